/*
 * cpu/bincount_far.h -- private histograms larger than the L2 cache
 * (BC_PREFETCH_MIN_BYTES and up): the counting loop.
 *
 * Algorithm: as the few-bins loop of cpu/bincount_hist.h (groups of eight,
 * one range test per group, one copy of the histogram), with the range test
 * on a vector load of the group (AVX-512, else AVX2; 4- and 8-byte x):
 * (v0 | ... | v7) & ~(cap - 1) is zero exactly when every value lies in
 * [0, cap), cap a power of two.  Weighted sums keep their running maximum
 * in a vector too.  Here x streams from memory while the updates miss the
 * L2 cache, and the scalar test (eight loads of x, then the OR) measured
 * 2-3x slower than one vector load: 2.5e6 int64 values into 2**20 bins,
 * 32-bit counts 3.74 ms scalar with prefetches against 1.50 ms vector
 * without, float64 sums 5.32 against 1.79 ms (C microbenchmark, thread CPU
 * time, best of 11, load average 3.7).  Software prefetches, which the
 * scalar loop needed, measured slower with the vector test (1.68 and 2.79
 * ms), so it has none.  Without AVX2, or for 1- and 2-byte x, the scalar
 * loop stays, with each group prefetching the bins of the group
 * BC_PREFETCH_DIST elements ahead (masked into the histogram, since those
 * values are not checked yet).
 *
 * Neighbours: cpu/bincount_defs.h (types, constants), cpu/bincount_hist.h
 * (the caller), cpu/bincount_direct.h (the prefetches of the direct path),
 * cpu/bincount_grow.h (the same vector test for the output-histogram).
 * Valid C99 and C++ on its own (see cpu/bincount_defs.h).
 */
#ifndef BC_CPU_FAR_DONE
#define BC_CPU_FAR_DONE 1

#include "cpu/bincount_defs.h"

#if BC_SIMD
/* Is any of the eight values x[0:8) outside [0, cap), cap a power of two?
 * One vector test: (v0 | ... | v7) & ~(cap - 1) (a negative value has its
 * sign bit set).  For 4- and 8-byte x. */
static int APPLY_SPECIFIC(bc_far_group_bad)(const BC_X_T *BC_RESTRICT x, npy_intp cap)
{
#if defined(__AVX512F__)
    if (sizeof(BC_X_T) == 8)
        return _mm512_test_epi64_mask(_mm512_loadu_si512((const void *)x),
                                      _mm512_set1_epi64((long long)~(cap - 1))) != 0;
#endif
    if (sizeof(BC_X_T) == 8) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)x);
        const __m256i b = _mm256_loadu_si256((const __m256i *)(x + 4));
        return !_mm256_testz_si256(_mm256_or_si256(a, b), _mm256_set1_epi64x((long long)~(cap - 1)));
    }
    return !_mm256_testz_si256(_mm256_loadu_si256((const __m256i *)x), _mm256_set1_epi32((int)~(cap - 1)));
}
#endif

/* As bc_count_fast for a histogram larger than the L2 cache (one copy).
 * With AVX2, for 4- and 8-byte x: the vector range test of a group, and the
 * running maximum of weighted values in a vector (after the test every value
 * lies below cap <= 2**22, so the AVX2 maximum is taken on unsigned 32-bit
 * lanes: the upper half of a 64-bit value is 0).  Otherwise the scalar test
 * of bc_count_fast, and each group prefetches the bins of the group
 * BC_PREFETCH_DIST elements ahead, masked into the histogram (those values
 * are not checked yet). */
static npy_intp APPLY_SPECIFIC(bc_count_fast_far)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                                  const BC_OUT_T *BC_RESTRICT w,
                                                  npy_intp wstep, npy_intp i, npy_intp end)
{
    const npy_uint64 ucap = (npy_uint64)h->cap, mask = ucap - 1;
    BC_H_T *h0 = h->bins;
    npy_uint64 m0 = h->max_seen, m1 = m0, m2 = m0, m3 = m0;
    const npy_intp pf_end = end - BC_PREFETCH_DIST - 8;
    int k;
    (void)w;
    (void)wstep;
#if BC_SIMD
    if ((sizeof(BC_X_T) == 8 || sizeof(BC_X_T) == 4) && h->cap > 0) {
#if defined(__AVX512F__)
        __m512i v512 = _mm512_setzero_si512();
#endif
        __m256i v256 = _mm256_setzero_si256();
        npy_uint32 lanes[8];
        for (; i + 8 <= end; i += 8) {
            if (APPLY_SPECIFIC(bc_far_group_bad)(x + i, h->cap))
                break;
            if (BC_WEIGHTED) {
#if defined(__AVX512F__)
                if (sizeof(BC_X_T) == 8)
                    v512 = _mm512_max_epu64(v512, _mm512_loadu_si512((const void *)(x + i)));
                else
#endif
                if (sizeof(BC_X_T) == 8)
                    v256 = _mm256_max_epu32(v256, _mm256_max_epu32(
                                                      _mm256_loadu_si256((const __m256i *)(x + i)),
                                                      _mm256_loadu_si256((const __m256i *)(x + i + 4))));
                else
                    v256 = _mm256_max_epu32(v256, _mm256_loadu_si256((const __m256i *)(x + i)));
            }
            BC_ADD_GROUP8(h0, h0, h0, h0, i);
        }
        if (BC_WEIGHTED) {
#if defined(__AVX512F__)
            const npy_uint64 t = (npy_uint64)_mm512_reduce_max_epu64(v512);
            m0 = t > m0 ? t : m0;
#endif
            _mm256_storeu_si256((__m256i *)lanes, v256);
            for (k = 0; k < 8; k++)
                m0 = lanes[k] > m0 ? lanes[k] : m0;
            h->max_seen = m0;
        }
        return i;
    }
#endif
    for (; i + 8 <= end; i += 8) {
        const npy_uint64 v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        const npy_uint64 v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
        const npy_uint64 v4 = (npy_uint64)x[i + 4], v5 = (npy_uint64)x[i + 5];
        const npy_uint64 v6 = (npy_uint64)x[i + 6], v7 = (npy_uint64)x[i + 7];
        if ((v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7) >= ucap)
            break;
        if (i <= pf_end)
            for (k = 0; k < 8; k++)
                __builtin_prefetch(h0 + ((npy_uint64)x[i + BC_PREFETCH_DIST + k] & mask), 1);
        h0[v0] += BC_INC(i);
        h0[v1] += BC_INC(i + 1);
        h0[v2] += BC_INC(i + 2);
        h0[v3] += BC_INC(i + 3);
        h0[v4] += BC_INC(i + 4);
        h0[v5] += BC_INC(i + 5);
        h0[v6] += BC_INC(i + 6);
        h0[v7] += BC_INC(i + 7);
        BC_TRACK(m0, v0); BC_TRACK(m1, v1); BC_TRACK(m2, v2); BC_TRACK(m3, v3);
        BC_TRACK(m0, v4); BC_TRACK(m1, v5); BC_TRACK(m2, v6); BC_TRACK(m3, v7);
    }
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    h->max_seen = m2 > m0 ? m2 : m0;
    return i;
}

#endif /* BC_CPU_FAR_DONE */
