/*
 * cpu/bincount_runs.h -- data where runs of equal values dominate (all-equal
 * or sorted x): one update per run instead of one per element.
 *
 * Algorithm: the plain loop makes every update of a bin wait on the previous
 * one (a load that depends on the store just before it).  Here the run in
 * progress is summed in a register and written to its bin when a new value
 * starts the next run.  Both cases store, the running sum going to a
 * rotating scratch cell while the run goes on, so the loop has no branch to
 * mispredict and no chain through memory (BC_RUN_STEP, used by the private
 * histograms, the direct path and the output-histogram of
 * cpu/bincount_grow.h).  Counts also test each group of eight against the
 * run in progress with one vector compare (bc_group_equals): a group that
 * continues it adds 8 to the running count, with no store at all, so
 * all-equal and sorted data count at the speed of one read of x.  The driver
 * picks this loop when more than half of the sampled neighbours are equal
 * (bc_sample).
 *
 * Neighbours: cpu/bincount_defs.h (types), cpu/bincount_hist.h,
 * cpu/bincount_direct.h and cpu/bincount_grow.h (the callers).  Valid C99 and C++ on its own (see
 * cpu/bincount_defs.h).
 */
#ifndef BC_CPU_RUNS_DONE
#define BC_CPU_RUNS_DONE 1

#include "cpu/bincount_defs.h"

/* One step of run aggregation: a run of `prev` has summed `acc` so far; a new
 * value flushes it into dst[prev], an equal one extends it. */
#define BC_RUN_STEP(T, dst, v, k)                                                \
    do {                                                                         \
        const int same_ = (v) == prev;                                           \
        T *tgt_ = same_ ? &scratch[(k)&7] : &(dst)[prev];                        \
        *tgt_ += same_ ? (T)0 : acc;                                             \
        acc = same_ ? (T)(acc + (T)BC_INC(k)) : (T)BC_INC(k);                    \
        prev = (v);                                                              \
    } while (0)

/* Are the eight values x[0:8) all equal to v (v as bc_as_u64 gives it)?
 * One vector compare with AVX2 for 4- and 8-byte x.  Counts use it to add a
 * group of eight that continues the run in progress at once, with no store:
 * 1e6 equal int64 values into 1000 bins took 0.25 ms with a store an element
 * (BC_RUN_STEP), as long as the plain numba loop. */
static int APPLY_SPECIFIC(bc_group_equals)(const BC_X_T *BC_RESTRICT x, npy_uint64 v)
{
#if BC_SIMD
    if (sizeof(BC_X_T) == 8) {
        const __m256i p = _mm256_set1_epi64x((long long)v);
        const __m256i a = _mm256_cmpeq_epi64(_mm256_loadu_si256((const __m256i *)x), p);
        const __m256i b = _mm256_cmpeq_epi64(_mm256_loadu_si256((const __m256i *)(x + 4)), p);
        return _mm256_movemask_epi8(_mm256_and_si256(a, b)) == -1;
    }
    if (sizeof(BC_X_T) == 4)
        return _mm256_movemask_epi8(_mm256_cmpeq_epi32(_mm256_loadu_si256((const __m256i *)x),
                                                       _mm256_set1_epi32((int)v))) == -1;
#endif
    return (bc_as_u64(x[0]) == v) & (bc_as_u64(x[1]) == v) & (bc_as_u64(x[2]) == v) &
           (bc_as_u64(x[3]) == v) & (bc_as_u64(x[4]) == v) & (bc_as_u64(x[5]) == v) &
           (bc_as_u64(x[6]) == v) & (bc_as_u64(x[7]) == v);
}

/* Fast path when runs dominate: as bc_count_fast, adding each run of equal
 * values at once into the first copy; counts add a group of eight inside the
 * run in progress at once (bc_group_equals). */
static npy_intp APPLY_SPECIFIC(bc_count_fast_runs)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                                   const BC_OUT_T *BC_RESTRICT w,
                                                   npy_intp wstep, npy_intp i, npy_intp end)
{
    const npy_uint64 ucap = (npy_uint64)h->cap;
    BC_H_T *h0 = h->bins;
    BC_H_T scratch[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    BC_H_T acc = 0;
    npy_uint64 prev = 0, m0 = h->max_seen;
    (void)w;
    (void)wstep;
    for (; i + 4 <= end; i += 4) {
        npy_uint64 v0, v1, v2, v3;
#if !BC_WEIGHTED
        /* prev < cap: prev was counted (or is the initial 0 of a histogram
         * that has bins), so the group is too. */
        if (i + 8 <= end && prev < ucap && APPLY_SPECIFIC(bc_group_equals)(x + i, prev)) {
            acc += 8;
            i += 4;
            continue;
        }
#endif
        v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
        if ((v0 | v1 | v2 | v3) >= ucap)
            break;
        BC_RUN_STEP(BC_H_T, h0, v0, i);
        BC_RUN_STEP(BC_H_T, h0, v1, i + 1);
        BC_RUN_STEP(BC_H_T, h0, v2, i + 2);
        BC_RUN_STEP(BC_H_T, h0, v3, i + 3);
        BC_TRACK(m0, v0); BC_TRACK(m0, v1); BC_TRACK(m0, v2); BC_TRACK(m0, v3);
    }
    if (h0 != NULL)
        h0[prev] += acc;
    h->max_seen = m0;
    return i;
}

#endif /* BC_CPU_RUNS_DONE */
