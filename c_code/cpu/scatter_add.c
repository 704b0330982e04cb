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
 * point: the output's allocation and the order of the checks (the layout of
 * out and of the broadcast increments, sa_layout, is in part 1); at its end
 * it undefines the
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
