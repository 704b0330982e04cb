/*
 * cpu/bincount_weighted.h -- weighted sums over few bins, with AVX2: the
 * counting loop of a private histogram (cpu/bincount_hist.h) for weights.
 *
 * Algorithm: x is read in groups of eight values with vector loads.  The
 * range test of the group is one instruction: (v0 | ... | v7) & ~(cap - 1)
 * is zero exactly when every value lies in [0, cap), cap a power of two
 * (a negative value has its sign bit set).  The running maximum of the
 * values, which gives the output its length, is kept in vector registers
 * (unsigned 32-bit lanes: after the test every value is below cap <= 2**22,
 * so the upper half of a 64-bit value is 0).  The scalar maxima these
 * instructions replace cost two instructions per element, which made a
 * plain numba loop faster.  Float64 weights are read with two vector loads
 * too, their lanes taken out with shuffles: each element then costs three
 * loads and a store (its value, its bin, the bin's store) instead of four
 * loads, and the loads were what bounded this loop (1e6 int64 values into
 * 1000 bins: 0.305 ms against 0.336 ms with scalar loads of the weights
 * and 0.46 ms for the plain loop; C microbenchmark, thread CPU time, best
 * of 41, load average 4.4).  The CPU plan (cpu/plan.h) may ask for
 * scalar loads of the weights instead, on a core where they cost less than
 * the shuffles.  The eight additions go to the histogram's four
 * interleaved copies in turn (one copy: four aliases of it).  A group that
 * fails the test returns to the caller, whose slow path takes it element by
 * element.
 *
 * Neighbours: cpu/bincount_defs.h (types, context), cpu/bincount_hist.h (the
 * caller, and the scalar loop used without AVX2).  Valid C99 and C++ on its
 * own (see cpu/bincount_defs.h).
 */
#ifndef BC_CPU_WEIGHTED_DONE
#define BC_CPU_WEIGHTED_DONE 1

#include "cpu/bincount_defs.h"

#if BC_SIMD && BC_WEIGHTED
/* Weighted fast path with AVX2, for 4- and 8-byte x: the range test and the
 * running maximum of a group of eight values in vector registers.  After the
 * test every value lies in [0, cap), cap <= 2**22, so the maximum can be
 * taken on unsigned 32-bit lanes (the upper half of a 64-bit value is 0). */
static npy_intp APPLY_SPECIFIC(bc_count_fast_simd)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                                   const BC_OUT_T *BC_RESTRICT w,
                                                   npy_intp wstep, npy_intp i, npy_intp end,
                                                   unsigned plan)
{
    /* float64 weights read as vectors, unless the plan says otherwise
     * (cpu/plan.h: the same additions in the same order). */
    const int vec_w = BC_OUT_FLOAT && sizeof(BC_OUT_T) == 8 && wstep == 1 &&
                      !(plan & BC_PLAN_SCALAR_WEIGHTS);
    const npy_intp cap = h->cap;
    BC_H_T *h0 = h->bins, *h1 = h0, *h2 = h0, *h3 = h0;
    const __m256i bad = sizeof(BC_X_T) == 8 ? _mm256_set1_epi64x((long long)~(cap - 1))
                                            : _mm256_set1_epi32((int)~(cap - 1));
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    npy_uint32 lanes[8];
    npy_uint64 top = h->max_seen;
    int k;
    if (cap == 0)
        return i; /* ~(cap - 1) would pass everything: the slow path makes bins */
    if (h->copies == 4) {
        h1 = h0 + cap;
        h2 = h1 + cap;
        h3 = h2 + cap;
    }
    for (; i + 8 <= end; i += 8) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(x + i));
        if (sizeof(BC_X_T) == 8) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x + i + 4));
            if (!_mm256_testz_si256(_mm256_or_si256(a, b), bad))
                break;
            m1 = _mm256_max_epu32(m1, b);
        } else if (!_mm256_testz_si256(a, bad)) {
            break;
        }
        m0 = _mm256_max_epu32(m0, a);
        if (vec_w) {
            /* float64 weights: two vector loads, the lanes taken out of
             * them (one shuffle for the odd ones) instead of eight scalar
             * loads, which would compete with the histogram's loads. */
            const __m256d wa = _mm256_loadu_pd((const double *)(const void *)(w + i));
            const __m256d wb = _mm256_loadu_pd((const double *)(const void *)(w + i + 4));
            const __m128d w01 = _mm256_castpd256_pd128(wa), w23 = _mm256_extractf128_pd(wa, 1);
            const __m128d w45 = _mm256_castpd256_pd128(wb), w67 = _mm256_extractf128_pd(wb, 1);
            h0[(npy_intp)x[i]] += (BC_H_T)_mm_cvtsd_f64(w01);
            h1[(npy_intp)x[i + 1]] += (BC_H_T)_mm_cvtsd_f64(_mm_unpackhi_pd(w01, w01));
            h2[(npy_intp)x[i + 2]] += (BC_H_T)_mm_cvtsd_f64(w23);
            h3[(npy_intp)x[i + 3]] += (BC_H_T)_mm_cvtsd_f64(_mm_unpackhi_pd(w23, w23));
            h0[(npy_intp)x[i + 4]] += (BC_H_T)_mm_cvtsd_f64(w45);
            h1[(npy_intp)x[i + 5]] += (BC_H_T)_mm_cvtsd_f64(_mm_unpackhi_pd(w45, w45));
            h2[(npy_intp)x[i + 6]] += (BC_H_T)_mm_cvtsd_f64(w67);
            h3[(npy_intp)x[i + 7]] += (BC_H_T)_mm_cvtsd_f64(_mm_unpackhi_pd(w67, w67));
            continue;
        }
        BC_ADD_GROUP8(h0, h1, h2, h3, i);
    }
    _mm256_storeu_si256((__m256i *)lanes, _mm256_max_epu32(m0, m1));
    for (k = 0; k < 8; k++)
        top = lanes[k] > top ? lanes[k] : top;
    h->max_seen = top;
    return i;
}
#endif

#endif /* BC_CPU_WEIGHTED_DONE */
