/*
 * cpu/fused_bincount.c -- the C loop of aesara_bincount_core.fused.FusedBincount:
 * a bincount (or 1-D scatter-add onto zeros) whose x, or weights, or both, are
 * computed inline from the inputs of an elementwise graph, which is never
 * stored as an array.  This file is the driver: threads, plan, the runs on
 * the pool, the merge, the checks of the inputs, the entry point.
 * Neighbours: cpu/fused_bincount_loops.h (this Op's per-instantiation part:
 * the defaults of the generated macros, the context, the counting loops, the
 * serial error scan) and cpu/fused_bincount_fast.h (its fast path: a
 * group's test and the loops the CPU plan chooses between), cpu/bincount.c (the plain Bincount, whose forms and
 * errors this file follows), common/host_helpers.h (messages, checks, range test,
 * allocation), cpu/worker_pool.h (the worker pool and its thread count); the
 * scalar code comes from aesara_bincount_core/scalar_codegen.py through the
 * Op.
 *
 * Entry point (called from the Op's one-line c_code glue):
 *
 *   int APPLY_SPECIFIC(cpu_bincount_fused)(PyArrayObject **ins, PyArrayObject **out);
 *
 * ins are the node's inputs: BC_NX inputs of x (x itself when BC_FX_FUSED is
 * 0), then n (minlength, or the histogram length), then the inputs of the
 * weights (the weights themselves when BC_FW_FUSED is 0; none when
 * BC_WEIGHTED is 0).  Each is 0-d (read once) or 1-D (read element by
 * element); the 1-D inputs of one group must have one length, N for x.  A
 * group of an elementwise graph may instead have inputs of several
 * dimensions, broadcasting among them, whose result is flattened in C order
 * (cpu/fused_bincount_nd.h); then N is the size of x's broadcast shape.
 * Returns 0, or -1 with a Python exception set (*out then unchanged).
 *
 * What the Op generates (each has a default in cpu/fused_bincount_loops.h, so
 * that both files are valid C on their own; the defaults compute x = in0 + in1, weights = in3 * in4):
 *   BC_FX_T, BC_FX_SIZE (its size in bytes), BC_NX, BC_NIN, BC_FX_FUSED,
 *   BC_FW_FUSED, BC_WEIGHTED;
 *   BC_FX_LOCALS(in), BC_FW_LOCALS(in): declarations of the input pointers,
 *     and of the 0-d inputs' values, read once;
 *   BC_FUSED_X(i, dst), BC_FUSED_W(i, dst): statements computing x[i] (or
 *     weights[i]) into dst, from Aesara's scalar C code; for an x or weights
 *     that are inputs as such, this file defines them as reads.  Where the
 *     scalar code fails (integer division by zero) it calls
 *     BC_SCALAR_FAIL(code), defined around each loop here: the pool's loops
 *     only record the failure (workers never call Python), and the calling
 *     thread's serial scan raises error `code` of BC_SCALAR_ERRORS;
 *   BC_SCALAR_ERRORS: the initializer of {&PyExc_..., "message"} pairs of
 *     scalar_codegen.SCALAR_ERRORS;
 *   BC_FW_VEC, BC_FUSED_WV(i, dst), only for weights whose graph has a vector
 *     form (vector_codegen.vector_code): BC_FW_VEC is 1, and the statements
 *     compute the weights i .. i + BC_F_LANES - 1 into dst, a vector of type
 *     BC_FWV (GCC's vector types, 32 bytes), from the same inputs.  For
 *     stored float weights this file defines it as a vector load.
 *   BC_F_ROW_SCALARS: the initializer of BC_NIN flags, 1 for an input of
 *     several dimensions that the scalar code reads once per row (its last
 *     axis has length 1 by its type).  Without it, no input has two or more
 *     dimensions.
 *
 * Algorithm: see cpu/fused_bincount_loops.h.
 *
 * Errors: when any task fails, the calling thread scans the inputs again,
 * serially: the first failure of the scalar code of x, then of the weights
 * (the unfused graph computes them before it counts), then the range error
 * of cpu/bincount.c (the first negative value, or the largest value; the
 * first index out of range in the scatter-add form).  So the message does not
 * depend on the thread count.
 *
 * Valid C99 and C++.
 */

#include "cpu/fused_bincount_loops.h"

/* Merge task: out[b] = the sum of the histograms' bins b, in histogram
 * order (the first one copied), for the bins of task t. */
static void APPLY_SPECIFIC(bc_f_merge_task)(void *arg, int part, npy_intp t)
{
    BC_FCTX *ctx = (BC_FCTX *)arg;
    const npy_intp b0 = t * BC_F_MERGE_STEP;
    const npy_intp b1 = ctx->nbins - b0 < BC_F_MERGE_STEP ? ctx->nbins : b0 + BC_F_MERGE_STEP;
    npy_intp b;
    int hi;
    (void)part;
    for (hi = 0; hi < ctx->nhists; hi++) {
        const BC_FHIST *h = &ctx->hists[hi];
        const npy_intp end = h->cap < b1 ? (h->cap > b0 ? h->cap : b0) : b1;
        if (hi == 0) { /* the first histogram is copied: out is not zeroed first */
            for (b = b0; b < end; b++)
                ctx->out[b] = h->bins[b];
            for (; b < b1; b++)
                ctx->out[b] = 0;
            continue;
        }
        for (b = b0; b < end; b++)
            ctx->out[b] += h->bins[b];
    }
}

/* Threads for a call over `size` elements (as cpu/bincount.c). */
static int APPLY_SPECIFIC(bc_f_threads)(npy_intp size)
{
    return bc_pool_threads((double)size, (double)BC_F_OMP_MIN_N, (double)(BC_F_OMP_MIN_N / 2));
}

/* Histograms and tasks for nt threads; 0, or -1 when out of memory. */
static int APPLY_SPECIFIC(bc_f_plan)(BC_FCTX *ctx, int nt)
{
    npy_intp limit;
    ctx->per_task = BC_ORDERED;
    if (ctx->per_task) {
        ctx->ntasks = nt == 1 ? 1 : 2 * nt;
        ctx->nhists = (int)ctx->ntasks;
    } else {
        ctx->ntasks = nt == 1 ? 1 : (ctx->size + BC_F_TASK_LEN - 1) / BC_F_TASK_LEN;
        if (ctx->ntasks < nt)
            ctx->ntasks = nt;
        ctx->nhists = nt;
    }
    limit = ctx->size / (2 * (npy_intp)ctx->nhists);
    limit = limit < BC_F_MIN_BINS ? BC_F_MIN_BINS : limit > BC_F_MAX_BINS ? BC_F_MAX_BINS : limit;
    ctx->limit = nt == 1 ? NPY_MAX_INTP : limit;
    ctx->stop = 0;
    ctx->hists = (BC_FHIST *)calloc((size_t)ctx->nhists, sizeof(BC_FHIST));
    return ctx->hists == NULL ? -1 : 0;
}

static void APPLY_SPECIFIC(bc_f_free)(BC_FCTX *ctx)
{
    int t;
    if (ctx->hists == NULL)
        return;
    for (t = 0; t < ctx->nhists; t++)
        free(ctx->hists[t].bins);
    free(ctx->hists);
    ctx->hists = NULL;
}

/* The status to act on of two: an error in the data first (the serial scan
 * finds it), then a lack of memory, then a histogram too large. */
static int APPLY_SPECIFIC(bc_f_worse)(int a, int b)
{
    const int ra = a == BC_F_RANGE || a == BC_F_FAULT ? 3 : a == BC_F_NOMEM ? 2 : a == BC_F_BAIL;
    const int rb = b == BC_F_RANGE || b == BC_F_FAULT ? 3 : b == BC_F_NOMEM ? 2 : b == BC_F_BAIL;
    return rb > ra ? b : a;
}

/* Count with nt threads: the status; on BC_F_OK *res is the new output. */
static int APPLY_SPECIFIC(bc_f_run)(BC_FCTX *ctx, int nt, PyArrayObject **res)
{
    int status = BC_F_OK, t;
    npy_intp nbins = ctx->n, nomem = 0;
    if (APPLY_SPECIFIC(bc_f_plan)(ctx, nt) != 0)
        return BC_F_NOMEM;
    if (BC_SCATTER && nt > 1 && ctx->n > ctx->limit)
        return BC_F_BAIL;
    bc_pool_run(nt, ctx->ntasks, APPLY_SPECIFIC(bc_f_task), ctx);
    for (t = 0; t < ctx->nhists; t++) {
        BC_FHIST *h = &ctx->hists[t];
        npy_intp b = h->cap;
        status = APPLY_SPECIFIC(bc_f_worse)(status, h->status);
        /* The output has n bins at least: the last non-zero bin matters
         * above n only (a histogram reserved to minlength has many zeros). */
        while (!BC_F_TRACK_MAX && b > 0 && b > ctx->n && h->bins[b - 1] == 0)
            b--;
        if (!BC_F_TRACK_MAX && b > 0 && (npy_uint64)(b - 1) > h->max_seen)
            h->max_seen = (npy_uint64)(b - 1);
        nomem = h->nomem_bins > nomem ? h->nomem_bins : nomem;
        /* The scatter-add form: a histogram's capacity is a power of two
         * >= n, so an index in [n, cap) passed the loops' range test. */
        if (BC_SCATTER && h->status == BC_F_OK && h->length > 0 && h->max_seen >= (npy_uint64)ctx->n)
            status = APPLY_SPECIFIC(bc_f_worse)(status, BC_F_RANGE);
        if (!BC_SCATTER && h->length > 0 && (npy_intp)h->max_seen + 1 > nbins)
            nbins = (npy_intp)h->max_seen + 1;
    }
    if (status == BC_F_NOMEM) {
        PyErr_Format(PyExc_MemoryError, BC_MSG_NO_MEMORY, (long long)nomem,
                     (long long)sizeof(BC_ACC_T));
        return status;
    }
    if (status != BC_F_OK)
        return status;
    *res = bc_new_array(nbins, TYPENUM_OUTPUT_0, 0);
    if (*res == NULL)
        return BC_F_NOMEM;
    ctx->out = (BC_ACC_T *)PyArray_DATA(*res);
    ctx->nbins = nbins;
    bc_pool_run(nbins > BC_F_MERGE_STEP ? nt : 1, (nbins + BC_F_MERGE_STEP - 1) / BC_F_MERGE_STEP,
                APPLY_SPECIFIC(bc_f_merge_task), ctx);
    return BC_F_OK;
}

/* One thread, with the number of bins known (the scatter-add form, or a
 * minlength): count straight into the output, allocated zero-filled with the
 * histogram's capacity (the power of two at or above n, as bc_f_reserve
 * gives) and cut to its length at the end, so that no histogram is zeroed
 * and copied out.  BC_F_BAIL when a value needs more bins than that (the
 * call then runs bc_f_run).  The status; on BC_F_OK *res is the output. */
static int APPLY_SPECIFIC(bc_f_run_direct)(BC_FCTX *ctx, PyArrayObject **res)
{
    npy_intp cap = 64, nbins = ctx->n;
    PyArrayObject *out;
    BC_FHIST *h;
    int status;
    while (cap < ctx->n)
        cap *= 2;
    out = bc_new_zeros(cap, TYPENUM_OUTPUT_0);
    if (out == NULL) { /* up to twice n bins: the general way may still fit */
        PyErr_Clear();
        return BC_F_BAIL;
    }
    ctx->hists = (BC_FHIST *)calloc(1, sizeof(BC_FHIST));
    if (ctx->hists == NULL) {
        Py_DECREF(out);
        return BC_F_NOMEM;
    }
    ctx->per_task = 0;
    ctx->ntasks = 1;
    ctx->nhists = 1;
    ctx->limit = cap;
    ctx->stop = 0;
    h = &ctx->hists[0];
    h->bins = (BC_ACC_T *)PyArray_DATA(out);
    h->cap = cap;
    APPLY_SPECIFIC(bc_f_task)(ctx, 0, 0);
    h->bins = NULL; /* the output's: not freed with the histograms */
    status = h->status;
    if (status == BC_F_OK) {
        npy_intp b = cap;
        while (!BC_F_TRACK_MAX && b > ctx->n && ((const BC_ACC_T *)PyArray_DATA(out))[b - 1] == 0)
            b--;
        if (!BC_F_TRACK_MAX && b > ctx->n)
            h->max_seen = (npy_uint64)(b - 1);
        /* As in bc_f_run: in the scatter-add form an index in [n, cap)
         * passed the loop's range test; otherwise the output grows to it. */
        if (BC_SCATTER && h->length > 0 && h->max_seen >= (npy_uint64)ctx->n)
            status = BC_F_RANGE;
        else if (!BC_SCATTER && h->length > 0 && (npy_intp)h->max_seen + 1 > nbins)
            nbins = (npy_intp)h->max_seen + 1;
    }
    if (status == BC_F_OK && nbins < cap) {
        PyArray_Dims dims;
        PyObject *done;
        dims.ptr = &nbins;
        dims.len = 1;
        done = PyArray_Resize(out, &dims, 0, NPY_CORDER); /* shrinks the buffer in place */
        if (done == NULL)
            status = BC_F_NOMEM;
        Py_XDECREF(done);
    }
    if (status != BC_F_OK) {
        Py_DECREF(out);
        return status;
    }
    *res = out;
    return BC_F_OK;
}

/* The common length of the 1-D inputs ins[lo:hi) (-1 if none), or -2 with a
 * ValueError set when they differ; a vector of length 1 broadcasts to the
 * others' length, as in Aesara's Elemwise.  `what` names the group. */
static npy_intp APPLY_SPECIFIC(bc_f_length)(PyArrayObject **ins, int lo, int hi, const char *what)
{
    npy_intp len = -1, d;
    int k;
    for (k = lo; k < hi; k++) {
        if (PyArray_NDIM(ins[k]) == 0)
            continue;
        if (bc_check_ndim(ins[k], 1, what) != 0)
            return -2;
        d = PyArray_DIM(ins[k], 0);
        if (len >= 0 && d != len && d != 1 && len != 1) {
            PyErr_Format(PyExc_ValueError, BC_MSG_FUSED_LENGTH, what, (long long)len, (long long)d);
            return -2;
        }
        if (len < 0 || len == 1)
            len = d;
    }
    return len;
}

/* The contiguous input the loops read: `a` itself (or a contiguous copy), or,
 * for a vector of length 1 in a group of length len != 1, a new vector of len
 * copies of its element (the loops index every vector by the element).  A new
 * reference, or NULL with an exception set. */
static PyArrayObject *APPLY_SPECIFIC(bc_f_own)(PyArrayObject *a, npy_intp len)
{
    PyArrayObject *r;
    npy_intp i, size;
    const char *src;
    char *dst;
    if (PyArray_NDIM(a) != 1 || PyArray_DIM(a, 0) != 1 || len == 1)
        return PyArray_GETCONTIGUOUS(a);
    r = (PyArrayObject *)PyArray_SimpleNew(1, &len, PyArray_TYPE(a));
    if (r == NULL)
        return NULL;
    size = (npy_intp)PyArray_ITEMSIZE(a);
    src = (const char *)PyArray_DATA(a);
    dst = (char *)PyArray_DATA(r);
    for (i = 0; i < len; i++)
        memcpy(dst + i * size, src, (size_t)size);
    return r;
}

int APPLY_SPECIFIC(cpu_bincount_fused)(PyArrayObject **ins, PyArrayObject **out)
{
    BC_FCTX ctx;
    BC_FND nd;
    PyArrayObject *own[BC_NIN];
    PyArrayObject *res = NULL;
    long long n_arg;
    npy_intp wlen = -1, len;
    int k, nt, status = BC_F_OK, rc = -1;
    static const int row_scalar[BC_NIN] = BC_F_ROW_SCALARS;

    memset(&ctx, 0, sizeof(ctx));
    memset(&nd, 0, sizeof(nd));
    memset(own, 0, sizeof(own));
    ctx.plan = bc_cpu_plan();
    nd.g[0].hi = BC_NX;
    nd.g[1].lo = BC_WIN;
    nd.g[1].hi = BC_WEIGHTED ? BC_NIN : BC_WIN;
    for (k = 0; k < BC_NIN; k++)
        nd.row_scalar[k] = row_scalar[k];
    if (bc_read_length(ins[BC_XIN], BC_SCATTER, &n_arg) != 0 ||
        bc_check_output_size((npy_intp)n_arg, ITEMSIZE_OUTPUT_0) != 0)
        return -1;
    ctx.n = (npy_intp)n_arg;
    len = APPLY_SPECIFIC(bc_f_nd_shape)(ins, &nd.g[0], "x");
    ctx.size = len == -1 ? APPLY_SPECIFIC(bc_f_length)(ins, 0, BC_NX, "x") : len;
    if (ctx.size == -2)
        return -1;
    if (ctx.size < 0) {
        PyErr_SetString(PyExc_ValueError, "bincount: x must have 1 dimension(s), got 0");
        return -1;
    }
#if BC_WEIGHTED
    len = APPLY_SPECIFIC(bc_f_nd_shape)(ins, &nd.g[1], "weights");
    wlen = len == -1 ? APPLY_SPECIFIC(bc_f_length)(ins, BC_WIN, BC_NIN, "weights") : len;
    if (wlen == -2)
        return -1;
    if (wlen >= 0 && bc_check_weights(BC_SCATTER, 1, (long long)wlen, (long long)ctx.size) != 0)
        return -1;
    ctx.w_const = wlen < 0 || (wlen == 1 && ctx.size != 1);
#endif
    for (k = 0; k < BC_NIN; k++) {
        const BC_FGROUP *g = &nd.g[k < BC_XIN ? 0 : 1];
        if (k == BC_XIN)
            continue;
        own[k] = g->nd ? APPLY_SPECIFIC(bc_f_nd_own)(ins[k], g, nd.row_scalar[k])
                       : APPLY_SPECIFIC(bc_f_own)(ins[k], k < BC_XIN ? ctx.size : wlen);
        if (own[k] == NULL)
            goto done;
        ctx.in[k] = PyArray_DATA(own[k]);
        nd.data[k] = PyArray_BYTES(own[k]);
        nd.step[k] = nd.row_scalar[k] || PyArray_NDIM(own[k]) == 0 ? 0 : PyArray_ITEMSIZE(own[k]);
    }
    for (k = 0; k < 2; k++) {
        if (nd.g[k].nd) {
            APPLY_SPECIFIC(bc_f_nd_layout)(&nd.g[k], own);
            ctx.nd = &nd;
        }
    }
    if (ctx.w_const && APPLY_SPECIFIC(bc_f_weight0)(&ctx) != 0)
        goto done;
    if (ctx.size == 0) {
        res = bc_new_zeros(ctx.n, TYPENUM_OUTPUT_0);
        rc = res == NULL ? -1 : 0;
        goto done;
    }
    nt = APPLY_SPECIFIC(bc_f_threads)(ctx.size);
    if (nt == 1 && ctx.n > 0) {
        status = APPLY_SPECIFIC(bc_f_run_direct)(&ctx, &res);
        if (status == BC_F_BAIL) /* more bins than n's power of two: the general way */
            APPLY_SPECIFIC(bc_f_free)(&ctx);
    }
    if (nt > 1 || ctx.n <= 0 || status == BC_F_BAIL)
        status = APPLY_SPECIFIC(bc_f_run)(&ctx, nt, &res);
    if (status == BC_F_BAIL) {
        APPLY_SPECIFIC(bc_f_free)(&ctx);
        status = APPLY_SPECIFIC(bc_f_run)(&ctx, 1, &res);
    }
    if (status == BC_F_RANGE || status == BC_F_FAULT)
        APPLY_SPECIFIC(bc_f_raise)(&ctx);
    else if (status == BC_F_NOMEM && !PyErr_Occurred())
        PyErr_NoMemory();
    rc = status == BC_F_OK ? 0 : -1;
done:
    APPLY_SPECIFIC(bc_f_free)(&ctx);
    for (k = 0; k < BC_NIN; k++)
        Py_XDECREF(own[k]);
    if (rc != 0)
        return -1;
    Py_XDECREF(*out);
    *out = res;
    return 0;
}

#undef BC_OUT_T
#undef BC_X_SIGNED
#undef BC_XIN
#undef BC_WIN
#undef BC_ACC_T
#undef BC_ORDERED
#undef BC_F_TRACK_MAX
#undef BC_F_STOP_CHECK
#undef BC_SCALAR_ERRORS
#undef BC_FX_LOCALS
#undef BC_FW_LOCALS
#undef BC_FUSED_X
#undef BC_FUSED_W
#undef BC_FHIST
#undef BC_FCTX
#undef BC_F_OK
#undef BC_F_RANGE
#undef BC_F_BAIL
#undef BC_F_NOMEM
#undef BC_F_FAULT
#undef BC_F_VTEST
#undef BC_F_WIDE
#undef BC_F_GROUP
#undef BC_FMAX
#undef BC_FW_VEC
#undef BC_FUSED_WV
#undef BC_F_LANES
#undef BC_FWV
#undef BC_FX_SIZE
#undef BC_FUSED_FAST_DONE
#undef BC_FUSED_LOOPS_DONE
#undef BC_FUSED_ND_DONE
#undef BC_FGROUP
#undef BC_FND
#undef BC_F_ROW_SCALARS
