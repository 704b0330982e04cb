/*
 * bincount_cpu_runs.h -- data where runs of equal values dominate (all-equal
 * or sorted x): one update per run instead of one per element.
 *
 * Algorithm: the plain loop makes every update of a bin wait on the previous
 * one (a load that depends on the store just before it).  Here the run in
 * progress is summed in a register and written to its bin when a new value
 * starts the next run.  Both cases store, the running sum going to a
 * rotating scratch cell while the run goes on, so the loop has no branch to
 * mispredict and no chain through memory (BC_RUN_STEP, used by the private
 * histograms and by the direct path).  The driver picks this loop when more
 * than half of the sampled neighbours are equal (bc_sample).
 *
 * Neighbours: bincount_cpu_defs.h (types), bincount_cpu_hist.h and
 * bincount_cpu_direct.h (the callers).  Valid C99 and C++ on its own (see
 * bincount_cpu_defs.h).
 */
#ifndef BC_CPU_RUNS_DONE
#define BC_CPU_RUNS_DONE 1

#include "bincount_cpu_defs.h"

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

/* Fast path when runs dominate: as bc_count_fast, adding each run of equal
 * values at once into the first copy. */
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
        const npy_uint64 v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        const npy_uint64 v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
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
