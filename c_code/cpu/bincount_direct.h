/*
 * cpu/bincount_direct.h -- many bins: count straight into the exact-size
 * output, after one min/max pass over x.
 *
 * Algorithm: when a histogram would need more bins than a limit tied to the
 * length of x (N / (2 x histograms), so the workspace stays below N / 2
 * bins; 2 N for a single histogram of 32-bit counts for an output of 8-byte
 * items, whose copy into the output widens them anyway), private histograms
 * would cost more memory traffic than they save.  Then one vectorised
 * min/max pass over x (threaded) validates it and gives the output length,
 * and one thread counts straight into the exact-size output, with software
 * prefetches BC_PREFETCH_DIST elements ahead when the output is beyond the
 * L2 cache.  Atomic updates from several threads were 3x slower there (each
 * is a cache-line round trip), and one thread keeps float sums in the same
 * order on every call.  No workspace of threads x bins is used.
 *
 * Counts into an output of 8-byte items go through 32-bit counters first,
 * which are then widened into the output: the random updates touch half the
 * memory, and the output is written once rather than zeroed and updated.
 *
 * Nothing is sliced by bucket first: a radix-partitioned count (x and
 * weights scattered into buckets of bins that fit in L2, then each bucket
 * counted) was measured slower than the prefetched pass on the development
 * machine, at 1e6 and 1e7 values into 1e6 bins (docs/performance.rst has the
 * figures).  Outputs of 4 MiB and more are advised to use transparent huge
 * pages (common/host_helpers.h), which removes most TLB misses of the random
 * updates.
 *
 * Neighbours: cpu/bincount_defs.h (types, context), cpu/bincount_runs.h (the
 * loop for runs), cpu/bincount.c (the driver, which falls back to this path
 * when the private histograms give up).  Valid C99 and C++ on its own (see
 * cpu/bincount_defs.h).
 */
#ifndef BC_CPU_DIRECT_DONE
#define BC_CPU_DIRECT_DONE 1

#include "cpu/bincount_defs.h"
#include "cpu/bincount_runs.h"

/* Min and max of x[0:len), len > 0.  Written so that gcc vectorises it. */
static void APPLY_SPECIFIC(bc_minmax)(const BC_X_T *BC_RESTRICT x, npy_intp len,
                                      BC_X_T *lo, BC_X_T *hi)
{
    BC_X_T mn = x[0], mx = x[0];
    npy_intp i;
    for (i = 1; i < len; i++) {
        BC_X_T v = x[i];
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    *lo = mn;
    *hi = mx;
}

/* Index of x[i] in the output of the direct path (values are validated). */
#define BC_DIRECT_INDEX(i) (wrap && (npy_intp)x[i] < 0 ? (npy_intp)x[i] + n : (npy_intp)x[i])

/* Direct path: count straight into the exact-size output.  The values were
 * validated by a min/max pass; `wrap` says some are negative (scatter).
 * One thread does it: with many bins, atomic updates from several threads
 * measured 3x slower than one thread (each is a cache-line round trip), and
 * float sums stay in one order, so they round the same on every call.  An
 * output larger than the L2 cache is counted with prefetches. */
static void APPLY_SPECIFIC(bc_count_direct)(BC_CTX *ctx, BC_ACC_T *out, npy_intp nbins, int wrap)
{
    const BC_X_T *BC_RESTRICT x = ctx->x;
    const BC_OUT_T *BC_RESTRICT w = ctx->w;
    const npy_intp wstep = ctx->wstep, n = ctx->n, size = ctx->size;
    npy_intp i = 0;
    (void)w;
    (void)wstep;
    if (ctx->runs && !wrap) {
        /* Runs of equal values: add each run at once (see BC_RUN_STEP). */
        BC_ACC_T scratch[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        BC_ACC_T acc = 0;
        npy_intp prev = 0;
        for (; i < size; i++) {
            const npy_intp v = (npy_intp)x[i];
#if !BC_WEIGHTED
            /* A group of eight inside the run in progress, at once (prev is
             * a validated value, or the initial 0 of an output with bins). */
            if (i + 8 <= size && APPLY_SPECIFIC(bc_group_equals)(x + i, (npy_uint64)prev)) {
                acc += 8;
                i += 7;
                continue;
            }
#endif
            BC_RUN_STEP(BC_ACC_T, out, v, i);
        }
        out[prev] += acc;
        return;
    }
    if ((size_t)nbins * sizeof(BC_ACC_T) >= BC_PREFETCH_MIN_BYTES) {
        for (; i + BC_PREFETCH_DIST < size; i++) {
            __builtin_prefetch(out + BC_DIRECT_INDEX(i + BC_PREFETCH_DIST), 1);
            out[BC_DIRECT_INDEX(i)] += (BC_ACC_T)BC_INC(i);
        }
    }
    if (wrap) {
        for (; i < size; i++)
            out[BC_DIRECT_INDEX(i)] += (BC_ACC_T)BC_INC(i);
    } else {
        for (; i < size; i++)
            out[(npy_intp)x[i]] += (BC_ACC_T)BC_INC(i);
    }
}

#if !BC_WEIGHTED
/* Direct path for counts into a wide output (8-byte items): count into
 * 32-bit counters (a call never counts 2**32 elements this way), then widen
 * them into the output.  The random updates then touch half the memory, and
 * the output is written once instead of zeroed and then updated.  Used from
 * N >= bins / 2: with fewer elements zeroing the counters and widening them
 * costs more than the updates save. */
static void APPLY_SPECIFIC(bc_count_narrow)(BC_CTX *ctx, npy_uint32 *cnt, int wrap)
{
    const BC_X_T *BC_RESTRICT x = ctx->x;
    const npy_intp n = ctx->n, size = ctx->size;
    npy_intp i = 0;
    for (; i + BC_PREFETCH_DIST < size; i++) {
        __builtin_prefetch(cnt + BC_DIRECT_INDEX(i + BC_PREFETCH_DIST), 1);
        cnt[BC_DIRECT_INDEX(i)]++;
    }
    for (; i < size; i++)
        cnt[BC_DIRECT_INDEX(i)]++;
}

/* Widen task: out[b] = cnt[b] for the bins of merge task t. */
static void APPLY_SPECIFIC(bc_widen_task)(void *arg, int part, npy_intp t)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    const npy_uint32 *cnt = ctx->narrow;
    const npy_intp b0 = t * BC_MERGE_STEP;
    const npy_intp b1 = ctx->nbins - b0 < BC_MERGE_STEP ? ctx->nbins : b0 + BC_MERGE_STEP;
    npy_intp b;
    (void)part;
    for (b = b0; b < b1; b++)
        ctx->out[b] = (BC_ACC_T)cnt[b];
}
#endif

/* A new uninitialised 1-D array of the output's type (see bc_new_array). */
static PyArrayObject *APPLY_SPECIFIC(bc_new_empty)(npy_intp nbins)
{
    return bc_new_array(nbins, TYPENUM_OUTPUT_0, 0);
}

/* Direct path of bc_run: count the validated x into a new exact-size output
 * of nbins bins.  Returns 0, or -1 with an exception set. */
static int APPLY_SPECIFIC(bc_direct)(BC_CTX *ctx, int nt, npy_intp nbins, int wrap,
                                     PyArrayObject **res)
{
#if !BC_WEIGHTED
    if (sizeof(BC_ACC_T) > 4 && !ctx->runs && ctx->size <= BC_TASK_MAX && ctx->size >= nbins / 2 &&
        (size_t)nbins * sizeof(npy_uint32) >= BC_PREFETCH_MIN_BYTES) {
        ctx->narrow = (npy_uint32 *)bc_calloc((size_t)nbins, sizeof(npy_uint32));
        if (ctx->narrow != NULL) { /* else: count into the output */
            APPLY_SPECIFIC(bc_count_narrow)(ctx, ctx->narrow, wrap);
            *res = APPLY_SPECIFIC(bc_new_empty)(nbins);
            if (*res == NULL)
                return -1;
            ctx->out = (BC_ACC_T *)PyArray_DATA(*res);
            ctx->nbins = nbins;
            bc_pool_run(nt, (nbins + BC_MERGE_STEP - 1) / BC_MERGE_STEP,
                        APPLY_SPECIFIC(bc_widen_task), ctx);
            return 0;
        }
    }
#else
    (void)nt;
#endif
    *res = bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
    if (*res == NULL)
        return -1;
    APPLY_SPECIFIC(bc_count_direct)(ctx, (BC_ACC_T *)PyArray_DATA(*res), nbins, wrap);
    return 0;
}

/* Min/max task: the min and max of task t's slice, into the participant's
 * slot. */
static void APPLY_SPECIFIC(bc_minmax_task)(void *arg, int part, npy_intp t)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    const npy_intp a = bc_split(ctx->size, ctx->ntasks, t);
    const npy_intp e = bc_split(ctx->size, ctx->ntasks, t + 1);
    BC_X_T l, h;
    if (e <= a)
        return;
    APPLY_SPECIFIC(bc_minmax)(ctx->x + a, e - a, &l, &h);
    if (!ctx->seen[part] || l < ctx->lo[part])
        ctx->lo[part] = l;
    if (!ctx->seen[part] || h > ctx->hi[part])
        ctx->hi[part] = h;
    ctx->seen[part] = 1;
}

/* Min and max of all of x (size > 0), with up to nt threads.  Returns 0, or
 * -1 when out of memory (no exception set). */
static int APPLY_SPECIFIC(bc_minmax_all)(BC_CTX *ctx, int nt, BC_X_T *lo, BC_X_T *hi)
{
    int p, used;
    ctx->lo = (BC_X_T *)calloc((size_t)nt, sizeof(BC_X_T));
    ctx->hi = (BC_X_T *)calloc((size_t)nt, sizeof(BC_X_T));
    ctx->seen = (char *)calloc((size_t)nt, 1);
    if (ctx->lo == NULL || ctx->hi == NULL || ctx->seen == NULL)
        return -1;
    ctx->ntasks = nt == 1 ? 1 : (ctx->size + 4 * BC_TASK_LEN - 1) / (4 * BC_TASK_LEN);
    used = bc_pool_run(nt, ctx->ntasks, APPLY_SPECIFIC(bc_minmax_task), ctx);
    *lo = ctx->x[0];
    *hi = ctx->x[0];
    for (p = 0; p < used; p++) {
        if (!ctx->seen[p])
            continue;
        *lo = ctx->lo[p] < *lo ? ctx->lo[p] : *lo;
        *hi = ctx->hi[p] > *hi ? ctx->hi[p] : *hi;
    }
    return 0;
}

#endif /* BC_CPU_DIRECT_DONE */
