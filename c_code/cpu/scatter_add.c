/*
 * cpu/scatter_add.c -- the C implementation of ScatterAdd, the scatter-add of
 * rows (aesara_bincount_core/scatter_add.py).
 *
 * Entry point (called from the Op's one-line c_code glue):
 *
 *   int APPLY_SPECIFIC(cpu_scatter_add)(PyArrayObject *base, PyArrayObject *inc,
 *                                       PyArrayObject *idx, PyArrayObject **out);
 *
 * It computes out = base; out[idx[i]] += inc[i] for i < N = len(idx), where
 * base has shape (V, *rest) and inc is broadcast, NumPy style, to the indexed
 * shape (N, *rest).  Duplicate indices accumulate; a negative index wraps
 * once; an index outside [-V, V) raises IndexError naming the first one and
 * its position; increments that cannot be broadcast raise ValueError (after
 * the IndexError, as Aesara's AdvancedIncSubtensor1 orders them).  It returns
 * 0 on success and -1 with a Python exception set on failure; on failure *out
 * is left as it was and nothing has been written but a fresh output, which is
 * dropped.
 *
 * The Op defines SA_ONTO_ZEROS, SA_INPLACE, SA_OUT_FLOAT (the output is a
 * float) and SA_IDX_SIGNED (the indices are signed) to 0 or 1.  Three forms,
 * chosen at compile time:
 *   SA_ONTO_ZEROS == 1: `base` is the int64 vector of the shape (V, *rest);
 *     out is a new zero-filled array of that shape.
 *   SA_ONTO_ZEROS == 0, SA_INPLACE == 0: out is a new C-contiguous copy of base.
 *   SA_INPLACE == 1: out is base itself, written in place (the Op destroys its
 *     input 0); no copy, so the time follows the rows touched, not V.  All
 *     indices are checked before anything is written, so a failed call leaves
 *     base as it was.
 * Sums are taken in the output dtype (the increments have it already: the
 * Op's graph casts them, as Aesara's C code does); integer sums wrap modulo
 * 2**bits, computed with unsigned arithmetic so that the wrap is defined.
 *
 * The code is cut into three parts, each included once per instantiation:
 *   cpu/scatter_add_check.h  the types of an instantiation, the tuning
 *                            constants, the index check;
 *   cpu/scatter_add_loops.h  adding the rows of a range of idx on one thread
 *                            (vector loads, fixed row lengths, prefetching);
 *   cpu/scatter_add_lanes.h  the split between threads (by row, by thread)
 *                            on the pool of cpu/worker_pool.h, and the choice
 *                            of plan (sa_run).
 * Each opens with its part of the algorithm.  This file holds the entry
 * point: the layout of out and of the broadcast increments, the output's
 * allocation, and the order of the checks; at its end it undefines the
 * instantiation's macros, so that a module with several ScatterAdd nodes
 * instantiates the parts once for each.  The checks of shapes shared with
 * the GPU Op's host code are in common/scatter_checks.h.
 *
 * The code is valid C99 and C++ (Aesara compiles it with g++).  Compiled on
 * its own (no APPLY_SPECIFIC defined) it instantiates float64 rows onto a
 * copy of the base with int64 indices, which the test-suite uses to check that
 * the file stands alone.
 */

#include "cpu/scatter_add_check.h"
#include "cpu/scatter_add_loops.h"
#include "cpu/scatter_add_lanes.h"

/* ---- the entry point ---- */

/* Describe the rows of out and of the broadcast increments in *c. */
static void APPLY_SPECIFIC(sa_layout)(SA_CTX *c, PyArrayObject *res, const npy_intp *bstrides)
{
    const int ndim = PyArray_NDIM(res);
    const npy_intp *dims = PyArray_DIMS(res), *ostrides = PyArray_STRIDES(res);
    npy_intp want = (npy_intp)sizeof(SA_ACC_T);
    int k, inc_contig = 1, inc_scalar = 1, out_contig = 1;
    c->out = PyArray_BYTES(res);
    c->nrows = dims[0];
    c->ostride = ostrides[0];
    c->istride = bstrides[0];
    c->rest_ndim = ndim - 1;
    c->rowlen = 1;
    for (k = ndim - 1; k >= 1; k--) {
        c->rest_dims[k - 1] = dims[k];
        c->rest_ostrides[k - 1] = ostrides[k];
        c->rest_istrides[k - 1] = bstrides[k];
        c->rowlen *= dims[k];
        if (dims[k] != 1) {
            /* A dimension of length 1 says nothing about the layout. */
            out_contig &= ostrides[k] == want;
            inc_contig &= bstrides[k] == want;
            inc_scalar &= bstrides[k] == 0;
        }
        want *= dims[k];
    }
    c->out_contig = out_contig;
    c->inc_kind = inc_contig ? SA_INC_CONTIG : inc_scalar ? SA_INC_SCALAR : SA_INC_STRIDED;
    /* Prefetch the rows of out when out is larger than a last-level cache:
     * all the lines of a contiguous row (up to SA_PREFETCH_MAX_LINES), the
     * first one of a strided row, about SA_PREFETCH_BYTES ahead. */
    {
        const npy_intp rowbytes = c->rowlen * (npy_intp)sizeof(SA_ACC_T);
        const double bytes = (double)c->nrows * (double)rowbytes;
        npy_intp lines = out_contig ? (rowbytes + 63) / 64 : 1;
        npy_intp ahead = SA_PREFETCH_BYTES / (rowbytes > 0 ? rowbytes : 1);
        if (lines > SA_PREFETCH_MAX_LINES)
            lines = SA_PREFETCH_MAX_LINES;
        c->prefetch_lines = bytes >= (double)SA_PREFETCH_MIN_BYTES ? (int)lines : 0;
        c->prefetch_ahead = ahead < SA_PREFETCH_ROWS_MIN   ? SA_PREFETCH_ROWS_MIN
                            : ahead > SA_PREFETCH_ROWS_MAX ? SA_PREFETCH_ROWS_MAX
                                                           : ahead;
    }
}

int APPLY_SPECIFIC(cpu_scatter_add)(PyArrayObject *base, PyArrayObject *inc_in,
                                    PyArrayObject *idx_in, PyArrayObject **out)
{
    SA_CTX ctx;
    PyArrayObject *idx = NULL, *res = NULL;
    npy_intp dims[NPY_MAXDIMS], target[NPY_MAXDIMS], bstrides[NPY_MAXDIMS];
    int ndim, k;

    memset(&ctx, 0, sizeof(ctx));
    if (bc_check_ndim(idx_in, 1, "idx") != 0)
        return -1;
#if SA_ONTO_ZEROS
    if (sa_read_zeros_shape(base, ITEMSIZE_OUTPUT_0, &ndim, dims) != 0)
        return -1;
#else
    ndim = PyArray_NDIM(base);
    if (ndim < 1) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "base", 1, 0);
        return -1;
    }
    for (k = 0; k < ndim; k++)
        dims[k] = PyArray_DIM(base, k);
#endif

    /* Indices, contiguous.  In place, all are checked before anything is
     * written; into a fresh output, while adding (the output is discarded on
     * error), which saves a pass over idx. */
    idx = PyArray_GETCONTIGUOUS(idx_in);
    if (idx == NULL)
        return -1;
    ctx.idx = (const SA_IDX_T *)PyArray_DATA(idx);
    ctx.n = PyArray_DIM(idx, 0);
    ctx.check = !SA_INPLACE;
    if (SA_INPLACE && APPLY_SPECIFIC(sa_raise_first_bad)(&ctx, dims[0]) != 0)
        goto fail;

    /* Increments, broadcast to the indexed shape (N, *rest); a bad index is
     * reported first, as Aesara's graph does. */
    target[0] = ctx.n;
    for (k = 1; k < ndim; k++)
        target[k] = dims[k];
    if (sa_broadcast_increments(PyArray_NDIM(inc_in), PyArray_DIMS(inc_in),
                                PyArray_STRIDES(inc_in), ndim, target, bstrides) != 0) {
        if (!SA_INPLACE) {
            PyObject *type, *value, *trace;
            PyErr_Fetch(&type, &value, &trace);
            if (APPLY_SPECIFIC(sa_raise_first_bad)(&ctx, dims[0]) != 0) {
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(trace);
                goto fail;
            }
            PyErr_Restore(type, value, trace);
        }
        goto fail;
    }
    ctx.inc = PyArray_BYTES(inc_in);

    /* The output. */
#if SA_ONTO_ZEROS
    {
        PyArray_Descr *descr = PyArray_DescrFromType(TYPENUM_OUTPUT_0);
        if (descr == NULL)
            goto fail;
        res = (PyArrayObject *)PyArray_Zeros(ndim, dims, descr, 0); /* steals descr */
        if (res == NULL)
            goto fail;
        bc_advise_huge_pages(PyArray_DATA(res), (size_t)PyArray_NBYTES(res));
    }
#else
    res = sa_output_of_base(base, SA_INPLACE, "the base of an in-place scatter-add");
    if (res == NULL)
        goto fail;
#endif

    APPLY_SPECIFIC(sa_layout)(&ctx, res, bstrides);
    if (ctx.check && ctx.n > 0 &&
        (ctx.rowlen > 0 ? APPLY_SPECIFIC(sa_run)(&ctx) : 1) &&
        APPLY_SPECIFIC(sa_raise_first_bad)(&ctx, dims[0]) != 0)
        goto fail; /* nothing was written but res, which is dropped */
    if (!ctx.check && ctx.n > 0 && ctx.rowlen > 0)
        APPLY_SPECIFIC(sa_run)(&ctx);
    Py_DECREF(idx);
    Py_XDECREF(*out);
    *out = res;
    return 0;

fail:
    Py_XDECREF(idx);
    Py_XDECREF(res);
    return -1;
}

#undef SA_IDX_T
#undef SA_ACC_T
#undef SA_INC_CONTIG
#undef SA_INC_SCALAR
#undef SA_INC_STRIDED
#undef SA_CTX
#undef SA_JOB
#undef SA_LANE_STRIDE
#ifdef SA_VEC_T
#undef SA_VEC_T
#undef SA_VEC_BYTES
#undef SA_VLEN
#endif
#undef SA_CHECK_INSTANTIATED
#undef SA_LOOPS_INSTANTIATED
#undef SA_LANES_INSTANTIATED
