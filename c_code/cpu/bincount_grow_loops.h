/*
 * cpu/bincount_grow_loops.h -- the counting loops of the output-histogram
 * (cpu/bincount_grow.h, whose top explains the regime and gives the
 * measurements behind these loops).
 *
 * What is here: the range test of a group of eight values against the
 * output's capacity (bc_grow_group_bad), and the loops that count x into
 * the output while every group passes it: counts (bc_grow_fast), counts of
 * data whose values repeat within a few elements, with the values below
 * BC_GROW_HOT_BINS in four copies of their own (bc_grow_fast_hot), counts
 * of data with runs (bc_grow_fast_runs), and weighted sums with their
 * running maximum (bc_grow_fast_w).  Each returns the index of the first
 * group that failed the test (or of the tail shorter than a group); the
 * caller takes that group element by element.
 *
 * Neighbours: cpu/bincount_defs.h (types, context), cpu/bincount_runs.h
 * (the runs' step and group compare), cpu/bincount_grow.h (the caller).
 * Valid C99 and C++ on its own (see cpu/bincount_defs.h).
 */
#ifndef BC_CPU_GROW_LOOPS_DONE
#define BC_CPU_GROW_LOOPS_DONE 1

#include "cpu/bincount_defs.h"
#include "cpu/bincount_runs.h"

#if !BC_SCATTER
/* Keep v in a general register: gcc otherwise loads the eight values of a
 * group into one vector register for the compares and then moves them out
 * one by one, which delays every address by a shuffle (measured 1.4 ms
 * against 0.85 ms for the plain loop at 1e6 values into 1e6 bins). */
#if defined(__GNUC__)
#define BC_IN_REG(v) __asm__("" : "+r"(v))
#else
#define BC_IN_REG(v) (void)0
#endif

/* Does any of the eight values x[0:8) lie outside [0, cap)?  With AVX-512
 * one unsigned compare of a vector (a negative value is a huge one); with
 * AVX2 the sign bits of the values or of a signed compare with cap - 1 (an
 * unsigned value of 2**63 or more, or 2**31 for 4-byte x, is flagged too:
 * the slow path takes it, exactly).  Without either, the largest value of
 * the group as unsigned, in general registers. */
static int APPLY_SPECIFIC(bc_grow_group_bad)(const BC_X_T *BC_RESTRICT x, npy_intp cap)
{
#if defined(__AVX512F__)
    if (sizeof(BC_X_T) == 8)
        return _mm512_cmpge_epu64_mask(_mm512_loadu_si512((const void *)x),
                                       _mm512_set1_epi64((long long)cap)) != 0;
#endif
#if BC_SIMD
    if (sizeof(BC_X_T) == 8) {
        const __m256i lim = _mm256_set1_epi64x((long long)(cap - 1));
        const __m256i a = _mm256_loadu_si256((const __m256i *)x);
        const __m256i b = _mm256_loadu_si256((const __m256i *)(x + 4));
        const __m256i bad = _mm256_or_si256(_mm256_or_si256(a, b),
                                            _mm256_or_si256(_mm256_cmpgt_epi64(a, lim),
                                                            _mm256_cmpgt_epi64(b, lim)));
        return _mm256_movemask_pd(_mm256_castsi256_pd(bad)) != 0;
    }
    if (sizeof(BC_X_T) == 4) {
        const __m256i lim = _mm256_set1_epi32((int)(cap - 1));
        const __m256i a = _mm256_loadu_si256((const __m256i *)x);
        const __m256i bad = _mm256_or_si256(a, _mm256_cmpgt_epi32(a, lim));
        return _mm256_movemask_ps(_mm256_castsi256_ps(bad)) != 0;
    }
#endif
    {
        npy_uint64 v0 = (npy_uint64)x[0], v1 = (npy_uint64)x[1];
        npy_uint64 v2 = (npy_uint64)x[2], v3 = (npy_uint64)x[3];
        npy_uint64 v4 = (npy_uint64)x[4], v5 = (npy_uint64)x[5];
        npy_uint64 v6 = (npy_uint64)x[6], v7 = (npy_uint64)x[7];
        const npy_uint64 a = v0 > v1 ? v0 : v1, b = v2 > v3 ? v2 : v3;
        const npy_uint64 c = v4 > v5 ? v4 : v5, d = v6 > v7 ? v6 : v7;
        const npy_uint64 ab = a > b ? a : b, cd = c > d ? c : d;
        return (ab > cd ? ab : cd) >= (npy_uint64)cap;
    }
}

#if !BC_WEIGHTED
/* The bins [0, BC_GROW_HOT_BINS) that bc_grow_fast_hot counts in four
 * interleaved copies of its own: as many as four copies fit in the bytes of
 * BC_COPIES_MAX_BYTES (the L1 data cache). */
#define BC_GROW_HOT_BINS ((npy_intp)(BC_COPIES_MAX_BYTES / (4 * sizeof(BC_ACC_T))))

/* One element of the counting loop: a value below BC_GROW_HOT_BINS adds to
 * copy c of the hot bins (hot + c * stride), any other to the output (a
 * select of the base pointer, no branch; with stride 0 and hot == out both
 * sides are the output and the select folds away). */
#define BC_HOT_STEP(v, c)                                                                    \
    do {                                                                                     \
        BC_ACC_T *base_ = (v) < (npy_uint64)BC_GROW_HOT_BINS ? hot + (c) * stride : out;     \
        base_[v]++;                                                                          \
    } while (0)

/* The counting loop of the output-histogram: x[i:end) in groups of eight
 * while every value of a group lies in [0, cap), element j of a group into
 * copy j % 4 of the hot bins or into the output (BC_HOT_STEP).  Inlined
 * into its two forms below, with `stride` a constant.  Returns the index of
 * the first group that failed the test (or of the tail shorter than a
 * group).  `out` is not restrict: bc_grow_fast passes it as `hot` too. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline npy_intp APPLY_SPECIFIC(bc_grow_groups)(BC_ACC_T *out, BC_ACC_T *hot,
                                                      npy_intp stride, npy_intp cap,
                                                      const BC_X_T *BC_RESTRICT x, npy_intp i,
                                                      npy_intp end)
{
    for (; i + 8 <= end; i += 8) {
        npy_uint64 v0, v1, v2, v3, v4, v5, v6, v7;
        if (APPLY_SPECIFIC(bc_grow_group_bad)(x + i, cap))
            break;
        v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
        v4 = (npy_uint64)x[i + 4], v5 = (npy_uint64)x[i + 5];
        v6 = (npy_uint64)x[i + 6], v7 = (npy_uint64)x[i + 7];
        BC_IN_REG(v0); BC_IN_REG(v1); BC_IN_REG(v2); BC_IN_REG(v3);
        BC_IN_REG(v4); BC_IN_REG(v5); BC_IN_REG(v6); BC_IN_REG(v7);
        BC_HOT_STEP(v0, 0);
        BC_HOT_STEP(v1, 1);
        BC_HOT_STEP(v2, 2);
        BC_HOT_STEP(v3, 3);
        BC_HOT_STEP(v4, 0);
        BC_HOT_STEP(v5, 1);
        BC_HOT_STEP(v6, 2);
        BC_HOT_STEP(v7, 3);
    }
    return i;
}

/* Counts straight into the output. */
static npy_intp APPLY_SPECIFIC(bc_grow_fast)(BC_ACC_T *BC_RESTRICT out, npy_intp cap,
                                             const BC_X_T *BC_RESTRICT x, npy_intp i, npy_intp end)
{
    return APPLY_SPECIFIC(bc_grow_groups)(out, out, 0, cap, x, i, end);
}

/* Counts for data where values repeat within a few elements (the sample
 * says so, and the repeats are no runs): the values below BC_GROW_HOT_BINS
 * into `hot`, four copies of that many bins, the others into the output.  A
 * value that repeats one of the three before it then adds to another copy
 * than they did, so that its update does not wait on theirs (a chain of
 * updates of one bin costs a store-to-load forwarding each).  The caller
 * adds the copies into the output. */
static npy_intp APPLY_SPECIFIC(bc_grow_fast_hot)(BC_ACC_T *BC_RESTRICT out, BC_ACC_T *BC_RESTRICT hot,
                                                 npy_intp cap, const BC_X_T *BC_RESTRICT x,
                                                 npy_intp i, npy_intp end)
{
    return APPLY_SPECIFIC(bc_grow_groups)(out, hot, BC_GROW_HOT_BINS, cap, x, i, end);
}

/* bc_grow_fast for data where runs of equal values dominate (the sample
 * says so): a group of eight inside the run in progress is added at once
 * (bc_group_equals), any other group a run at a time (BC_RUN_STEP), so that
 * no update waits on the one before it.  1e6 equal int64 values into 1e6
 * bins took 0.60 ms on the direct path (a min/max pass, then a store an
 * element), against 0.35 ms for the plain numba loop. */
static npy_intp APPLY_SPECIFIC(bc_grow_fast_runs)(BC_ACC_T *BC_RESTRICT out, npy_intp cap,
                                                  const BC_X_T *BC_RESTRICT x, npy_intp i,
                                                  npy_intp end)
{
    BC_ACC_T scratch[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    BC_ACC_T acc = 0;
    npy_uint64 prev = 0; /* cap >= 64: the initial 0 is a bin */
    for (; i + 8 <= end; i += 8) {
        if (APPLY_SPECIFIC(bc_group_equals)(x + i, prev)) {
            acc += 8;
            continue;
        }
        if (APPLY_SPECIFIC(bc_grow_group_bad)(x + i, cap))
            break;
        BC_RUN_STEP(BC_ACC_T, out, (npy_uint64)x[i], i);
        BC_RUN_STEP(BC_ACC_T, out, (npy_uint64)x[i + 1], i + 1);
        BC_RUN_STEP(BC_ACC_T, out, (npy_uint64)x[i + 2], i + 2);
        BC_RUN_STEP(BC_ACC_T, out, (npy_uint64)x[i + 3], i + 3);
        BC_RUN_STEP(BC_ACC_T, out, (npy_uint64)x[i + 4], i + 4);
        BC_RUN_STEP(BC_ACC_T, out, (npy_uint64)x[i + 5], i + 5);
        BC_RUN_STEP(BC_ACC_T, out, (npy_uint64)x[i + 6], i + 6);
        BC_RUN_STEP(BC_ACC_T, out, (npy_uint64)x[i + 7], i + 7);
    }
    out[prev] += acc;
    return i;
}
#endif

#if BC_WEIGHTED
/* The weighted counting loop: as bc_grow_fast, adding w[i] and keeping the
 * largest value (the last non-zero sum need not be it: a weight may be 0).
 * After the range test every value lies in [0, cap), cap < 2**32, so the
 * maximum of AVX2 is taken on unsigned 32-bit lanes (the upper half of a
 * 64-bit value is 0); with AVX-512 on 64-bit lanes.  One vector maximum a
 * group: the scalar maxima cost two instructions an element.  Unlike the
 * counts' loop the values are not pinned to general registers: here that
 * measured slower (1e6 values into 1e6 float64 bins, warm output: 1.46 ms
 * pinned against 0.77 ms, the plain loop 1.30 ms; C microbenchmark, thread
 * CPU time, best of 21, load average 2.4).  *top is the largest value
 * counted so far, updated. */
static npy_intp APPLY_SPECIFIC(bc_grow_fast_w)(BC_ACC_T *BC_RESTRICT out, npy_intp cap,
                                               const BC_X_T *BC_RESTRICT x,
                                               const BC_OUT_T *BC_RESTRICT w, npy_intp wstep,
                                               npy_intp i, npy_intp end, npy_uint64 *top)
{
    npy_uint64 mx = *top;
#if defined(__AVX512F__)
    __m512i m512 = _mm512_setzero_si512();
#endif
#if BC_SIMD
    __m256i m256 = _mm256_setzero_si256();
    npy_uint32 lanes[8];
    int k;
#endif
    for (; i + 8 <= end; i += 8) {
        if (APPLY_SPECIFIC(bc_grow_group_bad)(x + i, cap))
            break;
#if defined(__AVX512F__)
        if (sizeof(BC_X_T) == 8)
            m512 = _mm512_max_epu64(m512, _mm512_loadu_si512((const void *)(x + i)));
        else
#endif
#if BC_SIMD
        if (sizeof(BC_X_T) == 8)
            m256 = _mm256_max_epu32(m256, _mm256_max_epu32(_mm256_loadu_si256((const __m256i *)(x + i)),
                                                           _mm256_loadu_si256((const __m256i *)(x + i + 4))));
        else if (sizeof(BC_X_T) == 4)
            m256 = _mm256_max_epu32(m256, _mm256_loadu_si256((const __m256i *)(x + i)));
        else
#endif
        {
            int j;
            for (j = 0; j < 8; j++)
                mx = (npy_uint64)x[i + j] > mx ? (npy_uint64)x[i + j] : mx;
        }
        BC_ADD_GROUP8(out, out, out, out, i);
    }
#if defined(__AVX512F__)
    {
        const npy_uint64 t = (npy_uint64)_mm512_reduce_max_epu64(m512);
        mx = t > mx ? t : mx;
    }
#endif
#if BC_SIMD
    _mm256_storeu_si256((__m256i *)lanes, m256);
    for (k = 0; k < 8; k++)
        mx = lanes[k] > mx ? lanes[k] : mx;
#endif
    *top = mx;
    return i;
}
#endif

#endif /* !BC_SCATTER */
#endif /* BC_CPU_GROW_LOOPS_DONE */
