/*
 * cpu/bincount.c -- the C implementation of aesara_bincount.Bincount: the
 * driver, which picks the counting regime and runs it on the worker pool.
 *
 * Entry point (called from the Op's one-line c_code glue):
 *
 *   int APPLY_SPECIFIC(cpu_bincount)(PyArrayObject *x, PyArrayObject *n,
 *                                    PyArrayObject *weights,  // may be NULL
 *                                    PyArrayObject **out);
 *
 * It returns 0 on success and -1 with a Python exception set on failure; on
 * failure *out is left as it was.
 *
 * Two forms share this code, chosen at compile time by BC_SCATTER:
 *   BC_SCATTER == 0, the bincount form:  out has max(max(x) + 1, n) bins and a
 *     negative value of x raises ValueError (as numpy.bincount does);
 *   BC_SCATTER == 1, the scatter-add form: out has exactly n bins, a negative
 *     index wraps once (Python style) and an index outside [-n, n) raises
 *     IndexError (as np.add.at does).
 * Without weights every element adds 1 to its bin; with weights, element i
 * adds weights[i] (a weights array of length 1, or 0-d, is broadcast in the
 * scatter-add form).  Sums are taken in the output dtype; integer outputs
 * wrap modulo 2**bits, computed with unsigned arithmetic so that the wrap is
 * well defined.
 *
 * Dispatch: a sample of x (bc_sample, cpu/bincount_hist.h) says whether runs
 * or repeats dominate and how many bins the values need.  Counts and
 * weighted sums that need a large output, on one counting thread anyway, go straight into the
 * output (cpu/bincount_grow.h); if a value there needs too many bins, the
 * call starts over on the other paths.  Otherwise the call
 * counts x into privatized histograms (cpu/bincount_hist.h, with the loops of
 * cpu/bincount_weighted.h, cpu/bincount_far.h and cpu/bincount_runs.h) on
 * the calling thread and the pool's workers; when those would need too many
 * bins they give up, and the direct path (cpu/bincount_direct.h) counts into
 * the exact-size output.  Counts for an 8-byte output whose bins exceed what
 * threaded histograms may have, but not what a single one may, are counted
 * by one thread into a single histogram (the min/max pass of the direct path
 * would cost more than threads save).
 *
 * Errors are reported deterministically: on any range error a serial scan
 * finds the first offending position, which the message names.
 *
 * The code is valid C99 and C++ (Aesara compiles it with g++).  Compiled on
 * its own (no APPLY_SPECIFIC defined) it instantiates the int64 bincount form,
 * which the test-suite uses to check that the file stands alone.  At its end
 * it undefines every macro of the instantiation, so that the next node of a
 * module includes the regime files afresh (see cpu/bincount_defs.h).
 */

#include "common/host_helpers.h"
#include "cpu/worker_pool.h"
#include "cpu/bincount_defs.h"
#include "cpu/bincount_hist.h"
#include "cpu/bincount_direct.h"
#include "cpu/bincount_grow.h"

/* Threads for a call over `size` elements: at least 50,000 elements a thread. */
static int APPLY_SPECIFIC(bc_threads)(npy_intp size)
{
    return bc_pool_threads((double)size, (double)BC_OMP_MIN_N, (double)(BC_OMP_MIN_N / 2));
}

/* After the tasks: the status, and for the scatter-add form the check that
 * no value landed in [n, cap) (the capacity is a power of two >= n). */
static int APPLY_SPECIFIC(bc_tasks_status)(BC_CTX *ctx)
{
    int status = BC_OK, t;
    for (t = 0; t < ctx->nhists; t++) {
        const BC_HIST *h = &ctx->hists[t];
        const int s = h->status;
        if (s == BC_RANGE || (s == BC_BAIL && status != BC_RANGE) ||
            (s == BC_NOMEM && status == BC_OK))
            status = s;
#if BC_SCATTER
        if (s == BC_OK && APPLY_SPECIFIC(bc_hist_top)(h) >= ctx->n)
            status = BC_RANGE;
#endif
    }
    return status;
}

/* Cut x into tasks and histograms for nt threads; 0, or -1 (no memory). */
static int APPLY_SPECIFIC(bc_plan)(BC_CTX *ctx, int nt)
{
    npy_intp limit;
    ctx->per_task = BC_ORDERED || ctx->size > BC_TASK_MAX;
    if (ctx->per_task) {
        /* Fixed tasks, one histogram each: twice as many tasks as threads, so
         * that a thread that starts late takes over a smaller share. */
        ctx->ntasks = (ctx->size + BC_TASK_MAX - 1) / BC_TASK_MAX;
        if (ctx->ntasks < (nt == 1 ? 1 : 2 * nt))
            ctx->ntasks = nt == 1 ? 1 : 2 * nt;
        ctx->nhists = (int)ctx->ntasks;
    } else {
        /* Exact sums: small tasks, one histogram per thread. */
        ctx->ntasks = nt == 1 ? 1 : (ctx->size + BC_TASK_LEN - 1) / BC_TASK_LEN;
        if (ctx->ntasks < nt)
            ctx->ntasks = nt;
        ctx->nhists = nt;
    }
    limit = ctx->size / (2 * (npy_intp)ctx->nhists);
#if !BC_WEIGHTED
    /* A single histogram of 32-bit counts for an output of 8-byte items may
     * grow to 2 N bins: its merge is a widening copy, as the direct path's
     * would be, and it spares the direct path's min/max pass. */
    if (ctx->nhists == 1 && sizeof(BC_ACC_T) > 4)
        limit = 2 * ctx->size;
#endif
    limit = limit < BC_PRIV_MIN_BINS ? BC_PRIV_MIN_BINS : limit;
    limit = limit > BC_PRIV_MAX_BINS ? BC_PRIV_MAX_BINS : limit;
    ctx->limit = limit;
    ctx->stop = 0;
    ctx->hists = (BC_HIST *)calloc((size_t)ctx->nhists, sizeof(BC_HIST));
    return ctx->hists == NULL ? -1 : 0;
}

#if !BC_SCATTER
/* Does the output-histogram of cpu/bincount_grow.h count this call?  Counts
 * or weighted sums of the bincount form into cells of 4 or 8 bytes, fewer
 * than 2**32 elements (a counted bin is then never 0, so the last non-zero
 * bin is the largest value; weighted sums track it), `need` sampled bins of BC_GROW_MIN_BYTES or more and at most
 * BC_GROW_MAX_BINS, no runs for weighted sums, and one counting thread anyway (one thread, or
 * more bins than threaded private histograms may have). */
static int APPLY_SPECIFIC(bc_grow_wanted)(const BC_CTX *ctx, int nt, npy_uint64 need)
{
    if (sizeof(BC_ACC_T) < 4 || ctx->size > BC_TASK_MAX || (BC_WEIGHTED && ctx->runs) ||
        need > (npy_uint64)BC_GROW_MAX_BINS || need * sizeof(BC_ACC_T) < (npy_uint64)BC_GROW_MIN_BYTES)
        return 0;
    return nt == 1 || need > (npy_uint64)(ctx->size / (2 * nt));
}
#endif

/* Run on validated, contiguous inputs; on success *res is a new array. */
static int APPLY_SPECIFIC(bc_run)(BC_CTX *ctx, PyArrayObject **res)
{
    const int nt = APPLY_SPECIFIC(bc_threads)(ctx->size);
    int count_nt = nt; /* threads that count (all of them may merge) */
    int status = BC_OK, rc = -1, t;
    npy_intp nbins = ctx->n;

    if (ctx->size == 0) {
        *res = bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
        return *res == NULL ? -1 : 0;
    }
    APPLY_SPECIFIC(bc_sample)(ctx);
#if !BC_SCATTER
    {
        const npy_uint64 need = ctx->top + 1 > (npy_uint64)ctx->n ? ctx->top + 1 : (npy_uint64)ctx->n;
        if (APPLY_SPECIFIC(bc_grow_wanted)(ctx, nt, need)) {
            rc = APPLY_SPECIFIC(bc_grow_run)(ctx, need, res);
            if (rc == BC_RANGE)
                return APPLY_SPECIFIC(bc_raise_range)(ctx->x, ctx->size, ctx->n);
            if (rc != BC_BAIL)
                return rc;
            rc = -1;
        }
    }
#endif
#if !BC_WEIGHTED
    {
        /* Counts for an 8-byte output that need (the scatter-add form's n, or
         * the sample says) more bins than threaded histograms may have, but
         * not more than a single one may: one thread counts, the merge stays
         * threaded.  Threads would bail out to the direct path, whose min/max
         * pass costs more than they save (1e6 values into 1e6 int64 bins on
         * 2 threads: 3.4 ms against 2.7 ms for one thread). */
        const npy_uint64 need = BC_SCATTER ? (npy_uint64)ctx->n : ctx->top + 1;
        if (nt > 1 && sizeof(BC_ACC_T) > 4 && ctx->size <= BC_TASK_MAX &&
            need > (npy_uint64)(ctx->size / (2 * nt)) && need <= (npy_uint64)(2 * ctx->size) &&
            need <= (npy_uint64)BC_PRIV_MAX_BINS)
            count_nt = 1;
    }
#endif
    if (APPLY_SPECIFIC(bc_plan)(ctx, count_nt) != 0) {
        PyErr_NoMemory();
        return -1;
    }

    if (BC_SCATTER && ctx->n > ctx->limit) {
        status = BC_BAIL; /* the histogram is too large to privatize */
    } else {
        bc_pool_run(count_nt, ctx->ntasks, APPLY_SPECIFIC(bc_task), ctx);
        status = APPLY_SPECIFIC(bc_tasks_status)(ctx);
    }

    if (status == BC_BAIL) {
        BC_X_T mn, mx;
        int wrap = 0;
        if (APPLY_SPECIFIC(bc_minmax_all)(ctx, nt, &mn, &mx) != 0) {
            status = BC_NOMEM;
        } else if (APPLY_SPECIFIC(bc_is_bad)(mn, ctx->n) || APPLY_SPECIFIC(bc_is_bad)(mx, ctx->n)) {
            status = BC_RANGE;
        } else {
#if BC_SCATTER
            wrap = BC_X_SIGNED && bc_as_i64(mn) < 0;
#else
            if ((npy_intp)mx + 1 > nbins)
                nbins = (npy_intp)mx + 1;
#endif
            rc = APPLY_SPECIFIC(bc_direct)(ctx, nt, nbins, wrap, res);
        }
    } else if (status == BC_OK) {
#if !BC_SCATTER
        for (t = 0; t < ctx->nhists; t++) {
            const npy_intp top = APPLY_SPECIFIC(bc_hist_top)(&ctx->hists[t]);
            if (top + 1 > nbins)
                nbins = top + 1;
        }
#endif
        /* One histogram is copied into an output left unzeroed; several are
         * added into zeros. */
        *res = ctx->nhists == 1 ? APPLY_SPECIFIC(bc_new_empty)(nbins)
                                : bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
        if (*res != NULL) {
            ctx->out = (BC_ACC_T *)PyArray_DATA(*res);
            ctx->nbins = nbins;
            bc_pool_run(nbins > BC_MERGE_STEP ? nt : 1, (nbins + BC_MERGE_STEP - 1) / BC_MERGE_STEP,
                        ctx->nhists == 1 ? APPLY_SPECIFIC(bc_merge_one_task)
                                         : APPLY_SPECIFIC(bc_merge_task), ctx);
            rc = 0;
        }
    }
    if (status == BC_NOMEM)
        PyErr_NoMemory();
    if (status == BC_RANGE)
        APPLY_SPECIFIC(bc_raise_range)(ctx->x, ctx->size, ctx->n);

    for (t = 0; t < ctx->nhists; t++)
        free(ctx->hists[t].bins);
    free(ctx->hists);
    free(ctx->lo);
    free(ctx->hi);
    free(ctx->seen);
    free(ctx->narrow);
    ctx->hists = NULL;
    return rc;
}

int APPLY_SPECIFIC(cpu_bincount)(PyArrayObject *x_in, PyArrayObject *n_in,
                                 PyArrayObject *w_in, PyArrayObject **out)
{
    BC_CTX ctx;
    long long n_arg;
    PyArrayObject *x = NULL, *w = NULL, *res = NULL;
    int rc;

    memset(&ctx, 0, sizeof(ctx));
    ctx.plan = bc_cpu_plan();
    if (bc_check_ndim(x_in, 1, "x") != 0)
        return -1;
    if (bc_read_length(n_in, BC_SCATTER, &n_arg) != 0)
        return -1;
    if (bc_check_output_size((npy_intp)n_arg, ITEMSIZE_OUTPUT_0) != 0)
        return -1;
    ctx.size = PyArray_DIM(x_in, 0);
    ctx.n = (npy_intp)n_arg;

#if BC_WEIGHTED
    {
        npy_intp wlen;
        if (w_in == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "bincount: weights missing");
            return -1;
        }
        wlen = PyArray_NDIM(w_in) == 0 ? 1 : PyArray_DIM(w_in, 0);
        if (bc_check_weights(BC_SCATTER, PyArray_NDIM(w_in), (long long)wlen,
                             (long long)ctx.size) != 0)
            return -1;
        ctx.wstep = wlen == ctx.size ? 1 : 0;
        w = PyArray_GETCONTIGUOUS(w_in);
        if (w == NULL)
            return -1;
        ctx.w = (const BC_OUT_T *)PyArray_DATA(w);
    }
#else
    (void)w_in;
#endif

    x = PyArray_GETCONTIGUOUS(x_in);
    if (x == NULL) {
        Py_XDECREF(w);
        return -1;
    }
    ctx.x = (const BC_X_T *)PyArray_DATA(x);
    rc = APPLY_SPECIFIC(bc_run)(&ctx, &res);
    Py_DECREF(x);
    Py_XDECREF(w);
    if (rc != 0)
        return -1;
    Py_XDECREF(*out);
    *out = res;
    return 0;
}

#undef BC_X_T
#undef BC_OUT_T
#undef BC_X_SIGNED
#undef BC_WEIGHTED
#undef BC_ORDERED
#undef BC_ACC_T
#undef BC_H_T
#undef BC_INC
#undef BC_TRACK
#undef BC_RUN_STEP
#undef BC_GROW_ANY8
#undef BC_DIRECT_INDEX
#undef BC_HIST
#undef BC_CTX
#undef BC_OK
#undef BC_RANGE
#undef BC_BAIL
#undef BC_NOMEM
#undef BC_CPU_DEFS_DONE
#undef BC_CPU_HIST_DONE
#undef BC_CPU_WEIGHTED_DONE
#undef BC_CPU_FAR_DONE
#undef BC_CPU_RUNS_DONE
#undef BC_CPU_DIRECT_DONE
#undef BC_CPU_GROW_DONE
#undef BC_CPU_GROW_LOOPS_DONE
