/*
 * bincount_cpu.c -- the C implementation of aesara_bincount.Bincount.
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
 * Two forms share this file, chosen at compile time by BC_SCATTER:
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
 * Algorithm (one pass over x when the bins are few):
 *   x is cut into one contiguous chunk per OpenMP thread, and each chunk into
 *   blocks of BC_BLOCK elements.  For each block the thread first finds the
 *   block's min and max (a vectorised loop), which is the range check, then
 *   counts the block, still in L1 cache, into its private histogram.  The
 *   private histogram grows (by doubling) when a block needs more bins.  While
 *   it has at most BC_COPY_MAX_BINS bins it keeps BC_COPIES interleaved copies,
 *   so that runs of equal values update different memory words and do not
 *   wait on each other (the store-to-load forwarding chain).  At the end the
 *   private histograms are summed into the output.  This is the classic
 *   privatized histogram; see e.g. Gomez-Luna et al., "An optimized approach
 *   to histogram computation on GPU", Machine Vision and Applications 24
 *   (2013), for the replication idea on GPUs.
 *
 *   When the bins needed exceed a limit tied to the chunk length (private
 *   copies would cost more than the counting), the threads stop and the
 *   direct path runs instead: one vectorised min/max pass over x, then the
 *   counts go straight into the exact-size output, with atomic updates when
 *   more than one thread runs (integer sums only: float sums stay on one
 *   thread, so that their rounding is the same on every call).  No workspace
 *   of threads x bins is used then.
 *
 * Errors are reported deterministically: on any range error a serial scan
 * finds the first offending position, which the message names.
 *
 * The code is valid C99 and C++ (Aesara compiles it with g++).  Compiled on
 * its own (no APPLY_SPECIFIC defined) it instantiates the int64 bincount form,
 * which the test-suite uses to check that the file stands alone.
 */

#ifndef APPLY_SPECIFIC
#define BC_STANDALONE 1
#define APPLY_SPECIFIC(str) str##_standalone
#define DTYPE_INPUT_0 npy_int64
#define DTYPE_OUTPUT_0 npy_int64
#define TYPENUM_OUTPUT_0 NPY_INT64
#define ITEMSIZE_OUTPUT_0 8
#define BC_SCATTER 0
#define BC_OUT_FLOAT 0
#endif

#include "bincount_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- tuning constants (see benchmarks/ for how they were chosen) ---- */
#ifndef BC_BLOCK
#define BC_BLOCK 2048 /* elements range-checked, then counted, at a time */
#endif
#ifndef BC_COPIES
#define BC_COPIES 4 /* interleaved copies of a small private histogram */
#endif
#ifndef BC_COPY_MAX_BINS
#define BC_COPY_MAX_BINS 4096 /* largest histogram that keeps BC_COPIES copies */
#endif
#ifndef BC_PRIV_MIN_BINS
#define BC_PRIV_MIN_BINS 4096 /* private histograms may always grow this far */
#endif
#ifndef BC_PRIV_MAX_BINS
#define BC_PRIV_MAX_BINS (1 << 22) /* ... and never further */
#endif
#ifndef BC_OMP_MIN_N
#define BC_OMP_MIN_N 32768 /* below this many elements one thread does it all */
#endif

#if defined(__GNUC__)
#define BC_RESTRICT __restrict__
#else
#define BC_RESTRICT
#endif

/* ---- types of this instantiation ---- */
#define BC_X_T DTYPE_INPUT_0
#define BC_OUT_T DTYPE_OUTPUT_0
#define BC_X_SIGNED (((BC_X_T)-1) < (BC_X_T)0)
#ifdef DTYPE_INPUT_2
#define BC_WEIGHTED 1
#else
#define BC_WEIGHTED 0
#endif

/* Accumulator: the output float type, or the unsigned integer of the output's
 * width (so that integer sums wrap as the output dtype does, without UB). */
#if BC_OUT_FLOAT
#define BC_ACC_T BC_OUT_T
#elif ITEMSIZE_OUTPUT_0 == 1
#define BC_ACC_T npy_uint8
#elif ITEMSIZE_OUTPUT_0 == 2
#define BC_ACC_T npy_uint16
#elif ITEMSIZE_OUTPUT_0 == 4
#define BC_ACC_T npy_uint32
#else
#define BC_ACC_T npy_uint64
#endif

#if BC_WEIGHTED
#define BC_INC(i) ((BC_ACC_T)w[(i) * wstep])
#else
#define BC_INC(i) ((BC_ACC_T)1)
#endif

/* Status of a worker, shared through the call context. */
#define BC_OK 0
#define BC_RANGE 1 /* a value out of range: scan again for the message */
#define BC_BAIL 2  /* too many bins for private histograms: go direct */
#define BC_NOMEM 3 /* malloc failed inside the parallel region */

#define BC_HIST APPLY_SPECIFIC(bc_hist)
#define BC_CTX APPLY_SPECIFIC(bc_ctx)

/* One thread's private histogram: `copies` copies of `cap` bins, copy-major. */
typedef struct {
    BC_ACC_T *bins;
    npy_intp cap;
    int copies;
    npy_intp max_seen; /* largest value counted, -1 if none (bincount form) */
    int status;
} BC_HIST;

/* Everything a worker needs; one per call. */
typedef struct {
    const BC_X_T *x;
    npy_intp size;     /* elements of x */
    const BC_OUT_T *w; /* NULL when unweighted */
    npy_intp wstep;    /* 1, or 0 for a broadcast scalar increment */
    npy_intp n;        /* minlength (bincount) or histogram length (scatter) */
    npy_intp limit;    /* most bins a private histogram may have */
    BC_HIST *hists;    /* one per thread */
    int stop;          /* set (atomically) when any worker fails or bails */
} BC_CTX;

static npy_intp APPLY_SPECIFIC(bc_chunk_start)(npy_intp size, int t, int nt)
{
    /* size < 2**62 and nt is small, so the product cannot overflow. */
    return (npy_intp)(((npy_uint64)size * (npy_uint64)t) / (npy_uint64)nt);
}

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

/* Is v a value this form refuses (negative or too large, or out of [-n, n))? */
static int APPLY_SPECIFIC(bc_is_bad)(BC_X_T v, npy_intp n)
{
    int negative = BC_X_SIGNED && (npy_int64)v < 0;
#if BC_SCATTER
    if (negative)
        return (npy_int64)v < -(npy_int64)n;
    return (npy_uint64)v >= (npy_uint64)n;
#else
    (void)n;
    return negative || (npy_uint64)v >= (npy_uint64)NPY_MAX_INTP;
#endif
}

/* Serial scan that sets the Python exception for a refused x, in the order of
 * reference_bincount: the scatter-add form names the first bad index; the
 * bincount form names the first negative value, else the largest value. */
static int APPLY_SPECIFIC(bc_raise_range)(const BC_X_T *x, npy_intp size, npy_intp n)
{
    npy_intp i;
#if BC_SCATTER
    char text[32];
    for (i = 0; i < size; i++) {
        BC_X_T v = x[i];
        if (!APPLY_SPECIFIC(bc_is_bad)(v, n))
            continue;
        if (BC_X_SIGNED && (npy_int64)v < 0)
            snprintf(text, sizeof(text), "%lld", (long long)(npy_int64)v);
        else
            snprintf(text, sizeof(text), "%llu", (unsigned long long)(npy_uint64)v);
        PyErr_Format(PyExc_IndexError, BC_MSG_INDEX, text, (long long)i, (long long)n);
        return -1;
    }
#else
    npy_uint64 top = 0;
    (void)n;
    for (i = 0; i < size; i++) {
        BC_X_T v = x[i];
        if (BC_X_SIGNED && (npy_int64)v < 0) {
            PyErr_Format(PyExc_ValueError, BC_MSG_NEGATIVE, (long long)(npy_int64)v,
                         (long long)i);
            return -1;
        }
        if ((npy_uint64)v > top)
            top = (npy_uint64)v;
    }
    if (top >= (npy_uint64)NPY_MAX_INTP) {
        PyErr_Format(PyExc_ValueError, BC_MSG_TOO_LARGE, (unsigned long long)top);
        return -1;
    }
#endif
    PyErr_SetString(PyExc_RuntimeError, "bincount: internal error, no bad value found");
    return -1;
}

/* Grow h to hold at least `need` bins (need <= limit).  Copies are folded
 * into one when the histogram grows past BC_COPY_MAX_BINS.  No Python API:
 * this runs inside the parallel region.  Returns 0, or -1 if out of memory. */
static int APPLY_SPECIFIC(bc_hist_reserve)(BC_HIST *h, npy_intp need, npy_intp limit)
{
    npy_intp cap = 256, b;
    int copies, c;
    BC_ACC_T *bins;
    while (cap < need)
        cap *= 2;
    if (cap > limit)
        cap = need;
    copies = cap <= BC_COPY_MAX_BINS ? BC_COPIES : 1;
    /* at least one element, so that a histogram of 0 bins is not NULL */
    bins = (BC_ACC_T *)calloc((size_t)copies * (size_t)cap + 1, sizeof(BC_ACC_T));
    if (bins == NULL)
        return -1;
    for (c = 0; c < h->copies; c++) {
        BC_ACC_T *dst = bins + (copies > 1 ? (npy_intp)c * cap : 0);
        const BC_ACC_T *src = h->bins + (npy_intp)c * h->cap;
        for (b = 0; b < h->cap; b++)
            dst[b] += src[b];
    }
    free(h->bins);
    h->bins = bins;
    h->cap = cap;
    h->copies = copies;
    return 0;
}

/* Count x[0:len) into h.  All values lie in [0, h->cap) unless `wrap`, where
 * negative ones lie in [-n, 0) and are shifted by n (scatter-add form). */
static void APPLY_SPECIFIC(bc_count_block)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                           const BC_OUT_T *BC_RESTRICT w,
                                           npy_intp wstep, npy_intp len, int wrap,
                                           npy_intp n)
{
    npy_intp i = 0;
    BC_ACC_T *BC_RESTRICT h0 = h->bins;
    (void)w;
    (void)wstep;
    if (wrap) {
        for (; i < len; i++) {
            npy_intp v = (npy_intp)x[i];
            h0[v < 0 ? v + n : v] += BC_INC(i);
        }
    } else if (h->copies == 4) {
        BC_ACC_T *BC_RESTRICT h1 = h0 + h->cap;
        BC_ACC_T *BC_RESTRICT h2 = h1 + h->cap;
        BC_ACC_T *BC_RESTRICT h3 = h2 + h->cap;
        for (; i + 4 <= len; i += 4) {
            h0[(npy_intp)x[i]] += BC_INC(i);
            h1[(npy_intp)x[i + 1]] += BC_INC(i + 1);
            h2[(npy_intp)x[i + 2]] += BC_INC(i + 2);
            h3[(npy_intp)x[i + 3]] += BC_INC(i + 3);
        }
        for (; i < len; i++)
            h0[(npy_intp)x[i]] += BC_INC(i);
    } else {
        for (; i < len; i++)
            h0[(npy_intp)x[i]] += BC_INC(i);
    }
}

/* The one-pass privatized worker for thread t of nt. */
static void APPLY_SPECIFIC(bc_private_worker)(BC_CTX *ctx, int t, int nt)
{
    BC_HIST *h = &ctx->hists[t];
    const npy_intp lo = APPLY_SPECIFIC(bc_chunk_start)(ctx->size, t, nt);
    const npy_intp hi = APPLY_SPECIFIC(bc_chunk_start)(ctx->size, t + 1, nt);
    npy_intp b;

    if (BC_SCATTER && APPLY_SPECIFIC(bc_hist_reserve)(h, ctx->n, ctx->n) != 0) {
        h->status = BC_NOMEM;
        __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELAXED);
        return;
    }
    for (b = lo; b < hi; b += BC_BLOCK) {
        const npy_intp len = hi - b < BC_BLOCK ? hi - b : BC_BLOCK;
        const BC_X_T *xb = ctx->x + b;
        BC_X_T mn, mx;
        int wrap = 0;
        if (__atomic_load_n(&ctx->stop, __ATOMIC_RELAXED))
            return;
        APPLY_SPECIFIC(bc_minmax)(xb, len, &mn, &mx);
        if (APPLY_SPECIFIC(bc_is_bad)(mn, ctx->n) || APPLY_SPECIFIC(bc_is_bad)(mx, ctx->n)) {
            h->status = BC_RANGE;
            __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELAXED);
            return;
        }
#if BC_SCATTER
        wrap = BC_X_SIGNED && (npy_int64)mn < 0;
#else
        if ((npy_intp)mx >= h->cap) {
            if ((npy_intp)mx + 1 > ctx->limit) {
                h->status = BC_BAIL;
                __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELAXED);
                return;
            }
            if (APPLY_SPECIFIC(bc_hist_reserve)(h, (npy_intp)mx + 1, ctx->limit) != 0) {
                h->status = BC_NOMEM;
                __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELAXED);
                return;
            }
        }
        if ((npy_intp)mx > h->max_seen)
            h->max_seen = (npy_intp)mx;
#endif
        APPLY_SPECIFIC(bc_count_block)(h, xb, ctx->w ? ctx->w + b * ctx->wstep : NULL,
                                       ctx->wstep, len, wrap, ctx->n);
    }
}

/* Sum the private histograms of nt threads into out[0:nbins). */
static void APPLY_SPECIFIC(bc_merge)(BC_CTX *ctx, int nt, BC_ACC_T *out, npy_intp nbins)
{
    npy_intp b0;
    const npy_intp step = 1 << 14;
    (void)nt;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && nbins > step)
#endif
    for (b0 = 0; b0 < nbins; b0 += step) {
        int t, c;
        npy_intp b;
        const npy_intp b1 = nbins - b0 < step ? nbins : b0 + step;
        for (t = 0; t < nt; t++) {
            const BC_HIST *h = &ctx->hists[t];
            const npy_intp end = h->cap < b1 ? h->cap : b1;
            for (c = 0; c < h->copies; c++) {
                const BC_ACC_T *src = h->bins + (npy_intp)c * h->cap;
                for (b = b0; b < end; b++)
                    out[b] += src[b];
            }
        }
    }
}

/* Direct path: count straight into the exact-size output.  The values were
 * validated by a min/max pass; `wrap` says some are negative (scatter).
 * Float sums run on one thread: atomic float additions would land in an order
 * that changes from call to call, and so would the rounded result. */
static void APPLY_SPECIFIC(bc_count_direct)(BC_CTX *ctx, int nt, BC_ACC_T *out, int wrap)
{
    const BC_X_T *BC_RESTRICT x = ctx->x;
    const BC_OUT_T *BC_RESTRICT w = ctx->w;
    const npy_intp wstep = ctx->wstep, n = ctx->n, size = ctx->size;
    npy_intp i;
    (void)w;
    (void)wstep;
    if (nt <= 1 || BC_OUT_FLOAT) {
        if (wrap) {
            for (i = 0; i < size; i++) {
                npy_intp v = (npy_intp)x[i];
                out[v < 0 ? v + n : v] += BC_INC(i);
            }
        } else {
            for (i = 0; i < size; i++)
                out[(npy_intp)x[i]] += BC_INC(i);
        }
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
    for (i = 0; i < size; i++) {
        npy_intp v = (npy_intp)x[i];
        if (wrap && v < 0)
            v += n;
#pragma omp atomic
        out[v] += BC_INC(i);
    }
#endif
}

/* Min and max of all of x (size > 0), with nt threads. */
static void APPLY_SPECIFIC(bc_minmax_all)(BC_CTX *ctx, int nt, BC_X_T *lo, BC_X_T *hi)
{
    BC_X_T mn = ctx->x[0], mx = ctx->x[0];
#ifdef _OPENMP
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num(), tn = omp_get_num_threads();
            const npy_intp a = APPLY_SPECIFIC(bc_chunk_start)(ctx->size, t, tn);
            const npy_intp e = APPLY_SPECIFIC(bc_chunk_start)(ctx->size, t + 1, tn);
            BC_X_T l, h;
            if (e > a) {
                APPLY_SPECIFIC(bc_minmax)(ctx->x + a, e - a, &l, &h);
#pragma omp critical(aesara_bincount_minmax)
                {
                    mn = l < mn ? l : mn;
                    mx = h > mx ? h : mx;
                }
            }
        }
        *lo = mn;
        *hi = mx;
        return;
    }
#endif
    (void)nt;
    (void)mn;
    (void)mx;
    APPLY_SPECIFIC(bc_minmax)(ctx->x, ctx->size, lo, hi);
}

static int APPLY_SPECIFIC(bc_threads)(npy_intp size)
{
#ifdef _OPENMP
    int t;
    if (size < BC_OMP_MIN_N || omp_in_parallel())
        return 1;
    t = omp_get_max_threads();
    if ((npy_intp)t > size / (BC_OMP_MIN_N / 2))
        t = (int)(size / (BC_OMP_MIN_N / 2));
    return t < 1 ? 1 : t;
#else
    (void)size;
    return 1;
#endif
}

/* Run on validated, contiguous inputs; on success *res is a new array. */
static int APPLY_SPECIFIC(bc_run)(BC_CTX *ctx, PyArrayObject **res)
{
    int nt = APPLY_SPECIFIC(bc_threads)(ctx->size), t, used = 1, status = BC_OK, rc = -1;
    npy_intp nbins = ctx->n, limit;

    if (ctx->size == 0) {
        *res = bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
        return *res == NULL ? -1 : 0;
    }
    limit = ctx->size / (2 * (npy_intp)nt);
    limit = limit < BC_PRIV_MIN_BINS ? BC_PRIV_MIN_BINS : limit;
    limit = limit > BC_PRIV_MAX_BINS ? BC_PRIV_MAX_BINS : limit;
    ctx->limit = limit;
    ctx->stop = 0;
    ctx->hists = (BC_HIST *)calloc((size_t)nt, sizeof(BC_HIST));
    if (ctx->hists == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (t = 0; t < nt; t++)
        ctx->hists[t].max_seen = -1;

    if (BC_SCATTER && ctx->n > limit) {
        status = BC_BAIL; /* the histogram is too large to privatize */
    } else {
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            const int tn = omp_get_num_threads();
            APPLY_SPECIFIC(bc_private_worker)(ctx, omp_get_thread_num(), tn);
            if (omp_get_thread_num() == 0)
                used = tn;
        }
#else
        APPLY_SPECIFIC(bc_private_worker)(ctx, 0, 1);
#endif
        /* Priority: a range error wins over a bail, which wins over OOM. */
        for (t = 0; t < used; t++) {
            int s = ctx->hists[t].status;
            if (s == BC_RANGE || (s == BC_BAIL && status != BC_RANGE) ||
                (s == BC_NOMEM && status == BC_OK))
                status = s;
        }
    }

    if (status == BC_BAIL) {
        BC_X_T mn, mx;
        int wrap = 0;
        APPLY_SPECIFIC(bc_minmax_all)(ctx, nt, &mn, &mx);
        if (APPLY_SPECIFIC(bc_is_bad)(mn, ctx->n) || APPLY_SPECIFIC(bc_is_bad)(mx, ctx->n)) {
            status = BC_RANGE;
        } else {
#if BC_SCATTER
            wrap = BC_X_SIGNED && (npy_int64)mn < 0;
#else
            if ((npy_intp)mx + 1 > nbins)
                nbins = (npy_intp)mx + 1;
#endif
            *res = bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
            if (*res != NULL) {
                APPLY_SPECIFIC(bc_count_direct)(ctx, nt, (BC_ACC_T *)PyArray_DATA(*res), wrap);
                rc = 0;
            }
        }
    } else if (status == BC_OK) {
#if !BC_SCATTER
        for (t = 0; t < used; t++)
            if (ctx->hists[t].max_seen + 1 > nbins)
                nbins = ctx->hists[t].max_seen + 1;
#endif
        *res = bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
        if (*res != NULL) {
            APPLY_SPECIFIC(bc_merge)(ctx, used, (BC_ACC_T *)PyArray_DATA(*res), nbins);
            rc = 0;
        }
    } else if (status == BC_NOMEM) {
        PyErr_NoMemory();
    }
    if (status == BC_RANGE)
        APPLY_SPECIFIC(bc_raise_range)(ctx->x, ctx->size, ctx->n);

    for (t = 0; t < nt; t++)
        free(ctx->hists[t].bins);
    free(ctx->hists);
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
    if (bc_check_ndim(x_in, 1, "x") != 0)
        return -1;
    if (bc_read_scalar(n_in, BC_SCATTER ? "the histogram length" : "minlength", &n_arg) != 0)
        return -1;
    if (n_arg < 0) {
        PyErr_Format(PyExc_ValueError, BC_SCATTER ? BC_MSG_LENGTH : BC_MSG_MINLENGTH, n_arg);
        return -1;
    }
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
        if (PyArray_NDIM(w_in) > 1 || (!BC_SCATTER && PyArray_NDIM(w_in) != 1)) {
            return bc_check_ndim(w_in, 1, "weights");
        }
        wlen = PyArray_NDIM(w_in) == 0 ? 1 : PyArray_DIM(w_in, 0);
        if (!BC_SCATTER && wlen != ctx.size) {
            PyErr_Format(PyExc_ValueError, BC_MSG_WEIGHTS, (long long)wlen,
                         (long long)ctx.size);
            return -1;
        }
        if (BC_SCATTER && wlen != ctx.size && wlen != 1) {
            PyErr_Format(PyExc_ValueError, BC_MSG_WEIGHTS_BCAST, (long long)wlen,
                         (long long)ctx.size);
            return -1;
        }
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
#undef BC_ACC_T
#undef BC_INC
#undef BC_HIST
#undef BC_CTX
#undef BC_OK
#undef BC_RANGE
#undef BC_BAIL
#undef BC_NOMEM
