/*
 * cpu/bincount_hist.h -- few bins: privatized histograms, counted in one pass
 * over x by the calling thread and the pool's workers.
 *
 * Algorithm: x is cut into tasks that the calling thread and the pool's
 * workers claim one at a time (cpu/worker_pool.h: a worker the scheduler has
 * not run never holds up the call).  Each histogram's capacity is a power of
 * two, so that the range check of a group of eight values is one test:
 * (v0 | v1 | ... | v7) < capacity, which also rejects negative values (their
 * sign bit); for 4-byte x with AVX2, one vector test of the group.  A group that fails the test goes through the slow path one
 * element at a time: wrap a negative index (scatter-add), grow the histogram
 * (bincount), record an error, or give up on private histograms when they
 * would need more bins than ctx->limit (the driver then takes the direct
 * path of cpu/bincount_direct.h).  So the range check costs a few OR
 * instructions per element and no extra pass over memory.
 *
 * Counts without weights are 32-bit (a histogram never sees 2**32 elements),
 * which halves the cache footprint against 64-bit counts; the largest value
 * is then read off the histogram (its last non-zero bin), and sums are exact
 * whatever the order, so each thread counts all the tasks it claims into one
 * histogram of its own.  Weighted sums are kept in the output dtype, the
 * largest value as a running maximum (cpu/bincount_weighted.h has the AVX2
 * loop).  Float sums get one histogram per task, summed in task order, so
 * that the order of the additions, and the rounding, does not depend on which
 * thread ran which task.
 *
 * A sample of x (BC_SAMPLE elements from four places) picks the loop:
 * - runs of equal values dominate (all-equal, sorted data): cpu/bincount_runs.h;
 * - frequent repeats within three elements (skewed data: one value is 1 in 16
 *   or more): four interleaved copies of a histogram that fits in the L1
 *   cache, filled in turn, so that repeats update different memory words
 *   instead of waiting on each other (the store-to-load forwarding chain);
 *   Gomez-Luna et al., "An optimized approach to histogram computation on
 *   GPU", Machine Vision and Applications 24 (2013), describe such
 *   replication on GPUs;
 * - otherwise one copy: on uniform data copies only cost cache (measured 1.2x
 *   slower with four copies of 1000 float64 bins).
 * A histogram of BC_PREFETCH_MIN_BYTES or more (beyond the L2 cache) is
 * counted by the loop of cpu/bincount_far.h (a vector range test).
 *
 * At the end the histograms are summed into a zeroed output, bins cut into
 * merge tasks; a single histogram is copied into an output that is not
 * zeroed first.
 *
 * Neighbours: cpu/bincount_defs.h (types, context), cpu/bincount_weighted.h,
 * cpu/bincount_far.h and cpu/bincount_runs.h (the other loops of a task),
 * cpu/bincount.c (the driver that plans the tasks and runs them).  Valid C99
 * and C++ on its own (see cpu/bincount_defs.h).
 */
#ifndef BC_CPU_HIST_DONE
#define BC_CPU_HIST_DONE 1

#include "cpu/bincount_defs.h"
#include "cpu/bincount_far.h"
#include "cpu/bincount_runs.h"
#include "cpu/bincount_weighted.h"

/* Look at up to BC_SAMPLE elements (an eighth of x at most), from four
 * evenly spaced places: do runs of equal values dominate, and are repeats
 * within three elements frequent? */
static void APPLY_SPECIFIC(bc_sample)(BC_CTX *ctx)
{
    const npy_intp win = (ctx->size / 8 < BC_SAMPLE ? ctx->size / 8 : BC_SAMPLE) / 4 + 4;
    npy_intp part, pairs = 0, equal = 0, near = 0;
    npy_uint64 top = 0;
    for (part = 0; part < 4; part++) {
        const npy_intp lo = bc_split(ctx->size, 4, part);
        const npy_intp hi = ctx->size - lo < win ? ctx->size : lo + win;
        const BC_X_T *x = ctx->x;
        npy_intp i;
        for (i = lo; i < hi; i++)
            top = bc_as_u64(x[i]) > top ? bc_as_u64(x[i]) : top;
        for (i = lo + 3; i < hi; i++) {
            pairs++;
            equal += x[i] == x[i - 1];
            near += x[i] == x[i - 1] || x[i] == x[i - 2] || x[i] == x[i - 3];
        }
    }
    ctx->runs = 2 * equal > pairs;
    ctx->skewed = pairs > 0 && near * BC_REPEAT_DIV >= pairs;
    ctx->top = top;
}

/* Grow h to at least `need` bins (a power of two), folding copies when the
 * copy count drops.  No Python API: this runs in worker threads.  Returns 0,
 * or -1 if out of memory (h is then unchanged). */
static int APPLY_SPECIFIC(bc_hist_reserve)(BC_HIST *h, npy_intp need, int skewed)
{
    npy_intp cap = 64, b;
    int copies, c;
    BC_H_T *bins;
    while (cap < need)
        cap *= 2;
    copies = skewed && (size_t)cap * 4 * sizeof(BC_H_T) <= BC_COPIES_MAX_BYTES ? 4 : 1;
    bins = (BC_H_T *)bc_calloc((size_t)copies * (size_t)cap, sizeof(BC_H_T));
    if (bins == NULL)
        return -1;
    for (c = 0; c < h->copies; c++) {
        BC_H_T *dst = bins + (npy_intp)(c % copies) * cap;
        const BC_H_T *src = h->bins + (npy_intp)c * h->cap;
        for (b = 0; b < h->cap; b++)
            dst[b] += src[b];
    }
    free(h->bins);
    h->bins = bins;
    h->cap = cap;
    h->copies = copies;
    return 0;
}

/* Counts without weights: x[i:end) into the histogram in groups of eight
 * while every value of a group lies in [0, cap) (see bc_count_fast), into
 * one copy or four.  With AVX2 and 4-byte x the range test of a group is the
 * vector test of cpu/bincount_far.h, and each value is read again from x for
 * its address; otherwise the OR of the group in general registers (for
 * 8-byte x the vector test measured slower: 0.27 against 0.24 ms).  The
 * loops are a function of their own (not inlined into the task), so that the values,
 * the pointers and the bound stay in general registers: inlined, gcc
 * kept five values of a group in vector registers (a move there and back on
 * the way to each address).  1e6 values into 1000 bins took 0.32 ms (int32)
 * and 0.28 ms (int64) before, 0.23 and 0.24 ms after, against the plain numba
 * loop's 0.31 and 0.26; into 16 bins (four copies) 0.44 and 0.27 before,
 * 0.23 and 0.26 after, against 0.39 and 0.33 (aesara.function, thread CPU
 * time, interleaved call by call, 2-core AMD EPYC, load average 0.5). */
#if !BC_WEIGHTED
/* Does any of x[0:8) lie outside [0, cap), cap a power of two, cap >= 1? */
static int APPLY_SPECIFIC(bc_hist_group_bad)(const BC_X_T *BC_RESTRICT x, npy_intp cap)
{
#if BC_SIMD
    if (sizeof(BC_X_T) == 4)
        return APPLY_SPECIFIC(bc_far_group_bad)(x, cap);
#endif
    return ((npy_uint64)x[0] | (npy_uint64)x[1] | (npy_uint64)x[2] | (npy_uint64)x[3] |
            (npy_uint64)x[4] | (npy_uint64)x[5] | (npy_uint64)x[6] | (npy_uint64)x[7]) >=
           (npy_uint64)cap;
}

/* The loop itself, inlined twice into bc_count_fast_counts: with h1..h3
 * equal to h0 (one copy) the compiler keeps one pointer. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline npy_intp APPLY_SPECIFIC(bc_count_groups)(BC_H_T *h0, BC_H_T *h1, BC_H_T *h2,
                                                       BC_H_T *h3, npy_intp cap,
                                                       const BC_X_T *BC_RESTRICT x, npy_intp i,
                                                       npy_intp end)
{
    for (; i + 8 <= end && !APPLY_SPECIFIC(bc_hist_group_bad)(x + i, cap); i += 8)
        BC_ADD_GROUP8(h0, h1, h2, h3, i);
    return i;
}

#if defined(__GNUC__)
__attribute__((noinline))
#endif
static npy_intp APPLY_SPECIFIC(bc_count_fast_counts)(BC_H_T *h0, npy_intp cap, int copies,
                                                     const BC_X_T *BC_RESTRICT x, npy_intp i,
                                                     npy_intp end)
{
    if (copies == 4)
        return APPLY_SPECIFIC(bc_count_groups)(h0, h0 + cap, h0 + 2 * cap, h0 + 3 * cap, cap, x,
                                               i, end);
    return APPLY_SPECIFIC(bc_count_groups)(h0, h0, h0, h0, cap, x, i, end);
}
#endif

/* The fast path: count x[i:end) in groups of eight while every value of a
 * group lies in [0, cap).  Returns the index of the first group that did not
 * (or of the tail shorter than a group), which the slow path handles. */
static npy_intp APPLY_SPECIFIC(bc_count_fast)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                              const BC_OUT_T *BC_RESTRICT w,
                                              npy_intp wstep, npy_intp i, npy_intp end,
                                              unsigned plan)
{
    const npy_uint64 ucap = (npy_uint64)h->cap;
    const npy_intp cap = h->cap;
    /* With one copy the four pointers alias: no restrict here. */
    BC_H_T *h0 = h->bins, *h1 = h0, *h2 = h0, *h3 = h0;
    npy_uint64 m0 = h->max_seen, m1 = m0, m2 = m0, m3 = m0;
    (void)w;
    (void)wstep;
    (void)plan;
#if BC_SIMD && BC_WEIGHTED
    if (sizeof(BC_X_T) == 8 || sizeof(BC_X_T) == 4)
        return APPLY_SPECIFIC(bc_count_fast_simd)(h, x, w, wstep, i, end, plan);
#endif
#if !BC_WEIGHTED
    if (cap == 0)
        return i; /* no histogram yet */
    return APPLY_SPECIFIC(bc_count_fast_counts)(h0, cap, h->copies, x, i, end);
#endif
    if (h->copies == 4) {
        h1 = h0 + cap;
        h2 = h1 + cap;
        h3 = h2 + cap;
    }
    for (; i + 8 <= end; i += 8) {
        const npy_uint64 v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        const npy_uint64 v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
        const npy_uint64 v4 = (npy_uint64)x[i + 4], v5 = (npy_uint64)x[i + 5];
        const npy_uint64 v6 = (npy_uint64)x[i + 6], v7 = (npy_uint64)x[i + 7];
        if ((v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7) >= ucap)
            break;
        h0[v0] += BC_INC(i);
        h1[v1] += BC_INC(i + 1);
        h2[v2] += BC_INC(i + 2);
        h3[v3] += BC_INC(i + 3);
        h0[v4] += BC_INC(i + 4);
        h1[v5] += BC_INC(i + 5);
        h2[v6] += BC_INC(i + 6);
        h3[v7] += BC_INC(i + 7);
        BC_TRACK(m0, v0); BC_TRACK(m1, v1); BC_TRACK(m2, v2); BC_TRACK(m3, v3);
        BC_TRACK(m0, v4); BC_TRACK(m1, v5); BC_TRACK(m2, v6); BC_TRACK(m3, v7);
    }
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    h->max_seen = m2 > m0 ? m2 : m0;
    return i;
}

/* The slow path for the element x[i]: wrap, grow, or report.  Returns a
 * status (BC_OK when the element was counted). */
static int APPLY_SPECIFIC(bc_count_slow)(BC_CTX *ctx, BC_HIST *h, npy_intp i)
{
    const BC_X_T raw = ctx->x[i];
    const BC_OUT_T *w = ctx->w;
    const npy_intp wstep = ctx->wstep;
    npy_intp v;
    (void)w;
    (void)wstep;
    if (APPLY_SPECIFIC(bc_is_bad)(raw, ctx->n))
        return BC_RANGE;
    v = (npy_intp)bc_as_i64(raw);
    if (BC_X_SIGNED && bc_as_i64(raw) < 0)
        v += ctx->n; /* only the scatter-add form gets here */
    if (v >= h->cap) {
        if (!BC_SCATTER && v + 1 > ctx->limit)
            return BC_BAIL;
        if (APPLY_SPECIFIC(bc_hist_reserve)(h, v + 1, ctx->skewed) != 0)
            return BC_NOMEM;
    }
    h->bins[v] += BC_INC(i);
    if (BC_WEIGHTED && (npy_uint64)v > h->max_seen)
        h->max_seen = (npy_uint64)v;
    return BC_OK;
}

/* Task t, run by participant `part`: count its slice of x into its
 * histogram (the task's own for float sums, else the participant's). */
static void APPLY_SPECIFIC(bc_task)(void *arg, int part, npy_intp t)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    BC_HIST *h = &ctx->hists[ctx->per_task ? t : (npy_intp)part];
    const npy_intp lo = bc_split(ctx->size, ctx->ntasks, t);
    const npy_intp hi = bc_split(ctx->size, ctx->ntasks, t + 1);
    npy_intp i = lo;

    if (h->status != BC_OK)
        return;
    h->length += hi - lo;
    if (BC_SCATTER && h->bins == NULL &&
        APPLY_SPECIFIC(bc_hist_reserve)(h, ctx->n, ctx->skewed) != 0)
        h->status = BC_NOMEM;
    while (h->status == BC_OK && i < hi) {
        const npy_intp end = hi - i < BC_STOP_CHECK ? hi : i + BC_STOP_CHECK;
        npy_intp stop_at;
        if (__atomic_load_n(&ctx->stop, __ATOMIC_RELAXED))
            return;
        if (ctx->runs)
            i = APPLY_SPECIFIC(bc_count_fast_runs)(h, ctx->x, ctx->w, ctx->wstep, i, end);
        else if ((size_t)h->cap * sizeof(BC_H_T) >= BC_PREFETCH_MIN_BYTES)
            i = APPLY_SPECIFIC(bc_count_fast_far)(h, ctx->x, ctx->w, ctx->wstep, i, end);
        else
            i = APPLY_SPECIFIC(bc_count_fast)(h, ctx->x, ctx->w, ctx->wstep, i, end, ctx->plan);
        stop_at = end - i < 8 ? end : i + 8;
        for (; i < stop_at && h->status == BC_OK; i++)
            h->status = APPLY_SPECIFIC(bc_count_slow)(ctx, h, i);
    }
    if (h->status != BC_OK)
        __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELAXED);
}

/* Largest value counted into h, or -1 if none. */
static npy_intp APPLY_SPECIFIC(bc_hist_top)(const BC_HIST *h)
{
#if BC_WEIGHTED
    return h->bins == NULL || h->length == 0 ? -1 : (npy_intp)h->max_seen;
#else
    npy_intp b;
    int c;
    for (b = h->cap - 1; b >= 0; b--)
        for (c = 0; c < h->copies; c++)
            if (h->bins[(npy_intp)c * h->cap + b] != 0)
                return b;
    return -1;
#endif
}

/* Merge task: sum bins [t * BC_MERGE_STEP, ...) of every histogram into the
 * output, histograms in order, copies in order (a fixed order of the float
 * additions). */
static void APPLY_SPECIFIC(bc_merge_task)(void *arg, int part, npy_intp task)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    BC_ACC_T *out = ctx->out;
    const npy_intp b0 = task * BC_MERGE_STEP;
    const npy_intp b1 = ctx->nbins - b0 < BC_MERGE_STEP ? ctx->nbins : b0 + BC_MERGE_STEP;
    int t, c;
    (void)part;
    for (t = 0; t < ctx->nhists; t++) {
        const BC_HIST *h = &ctx->hists[t];
        const npy_intp end = h->cap < b1 ? h->cap : b1;
        for (c = 0; c < h->copies; c++) {
            const BC_H_T *src = h->bins + (npy_intp)c * h->cap;
            npy_intp b;
            for (b = b0; b < end; b++)
                out[b] += (BC_ACC_T)src[b];
        }
    }
}

/* Merge task for a single histogram: out[b] = the sum of its copies (or 0
 * past its capacity), into an output that was not zeroed.  The sum starts
 * from 0, as bc_merge_task's does (0.0 + -0.0 is +0.0). */
static void APPLY_SPECIFIC(bc_merge_one_task)(void *arg, int part, npy_intp task)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    const BC_HIST *h = &ctx->hists[0];
    BC_ACC_T *out = ctx->out;
    const npy_intp b0 = task * BC_MERGE_STEP;
    const npy_intp b1 = ctx->nbins - b0 < BC_MERGE_STEP ? ctx->nbins : b0 + BC_MERGE_STEP;
    const npy_intp end = h->cap < b1 ? (h->cap > b0 ? h->cap : b0) : b1;
    npy_intp b;
    int c;
    (void)part;
    if (h->copies == 1) {
        for (b = b0; b < end; b++)
            out[b] = (BC_ACC_T)((BC_ACC_T)0 + (BC_ACC_T)h->bins[b]);
    } else {
        for (b = b0; b < end; b++) {
            BC_ACC_T acc = 0;
            for (c = 0; c < h->copies; c++)
                acc += (BC_ACC_T)h->bins[(npy_intp)c * h->cap + b];
            out[b] = acc;
        }
    }
    for (b = end; b < b1; b++)
        out[b] = 0;
}

#endif /* BC_CPU_HIST_DONE */
