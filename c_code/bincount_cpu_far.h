/*
 * bincount_cpu_far.h -- private histograms larger than the L2 cache
 * (BC_PREFETCH_MIN_BYTES and up): the counting loop with software prefetches.
 *
 * Algorithm: as the few-bins loop of bincount_cpu_hist.h (groups of eight,
 * one range test per group), with one copy of the histogram, and each group
 * first prefetches the bins of the group BC_PREFETCH_DIST elements ahead, so
 * that the cache misses of the random updates overlap instead of following
 * one another.  The values ahead are not checked yet, so the prefetched
 * address is masked into the histogram (cap is a power of two).
 *
 * Neighbours: bincount_cpu_defs.h (types, constants), bincount_cpu_hist.h
 * (the caller), bincount_cpu_direct.h (the same prefetch for the direct
 * path).  Valid C99 and C++ on its own (see bincount_cpu_defs.h).
 */
#ifndef BC_CPU_FAR_DONE
#define BC_CPU_FAR_DONE 1

#include "bincount_cpu_defs.h"

/* As bc_count_fast for a histogram larger than the L2 cache (one copy):
 * each group prefetches the bins of the group BC_PREFETCH_DIST elements
 * ahead.  Those values are not checked yet, so the prefetched address is
 * masked into the histogram.  (This loop waits on memory: the scalar maxima
 * cost nothing measurable here.) */
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
