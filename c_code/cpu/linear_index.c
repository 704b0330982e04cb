/*
 * cpu/linear_index.c -- the C implementation of LinearIndex
 * (aesara_bincount_core/linear_index.py): the check pass of a scatter or
 * gather with several integer index arrays, which turns them into one flat
 * row index.
 *
 * Entry point (called from the Op's one-line c_code glue, with LI_NIDX index
 * arrays after `dims`, then the addresses of the two outputs):
 *
 *   int APPLY_SPECIFIC(cpu_linear_index)(PyArrayObject *dims, ...);
 *   ... = PyArrayObject *idx_0, ..., idx_{LI_NIDX-1},
 *         PyArrayObject **flat, PyArrayObject **bshape
 *
 * `dims` is the int64 vector (d_0, ..., d_{K-1}) of the sizes of the K =
 * LI_NIDX leading axes that the index arrays index.  The index arrays, of any
 * integer dtype, shape and strides, are broadcast together, NumPy style, to
 * the shape B; *bshape receives B as an int64 vector, and *flat the int64
 * vector of prod(B) row numbers, in C order of B,
 *
 *   flat = ((w_0 * d_1 + w_1) * d_2 + w_2) ... * d_{K-1} + w_{K-1},
 *
 * where w_a is idx_a (broadcast) wrapped once when negative.  This is the
 * row of base.reshape(d_0 * ... * d_{K-1}, *rest) that base[idx_0, ...,
 * idx_{K-1}] names, so a ScatterAdd (or a scatter-set, or a gather) of rows
 * of that reshaped base does what numpy's indexing with several arrays does.
 *
 * Errors (return -1 with the exception set; the outputs are left as they
 * were): IndexError BC_MSG_INDEX_BCAST when the shapes do not broadcast;
 * IndexError BC_MSG_AXIS_INDEX for an index outside [-d_a, d_a), naming its
 * value, its position in C order of B and the axis a.  The axes are checked
 * in order, each in one pass over B, and the first bad index of the first
 * axis that has one is named, as numpy checks its index arrays one after the
 * other.  MemoryError when prod(B) row numbers do not fit in memory.
 *
 * The check and the fold are those of cpu/index_fold.h (shared with
 * ScatterAddIndices, which folds the rows inside its scatter loop instead of
 * writing them out): one pass over B, a block of LI_BLOCK positions of a row
 * at a time, every axis folded into the block of flat while it is in the L1
 * cache; on a bad index a second, serial scan names it.
 *
 * Valid C99 and C++ on its own; compiled on its own (no APPLY_SPECIFIC) it
 * instantiates two index arrays, which the test-suite uses.
 */
#ifndef APPLY_SPECIFIC
#define APPLY_SPECIFIC(str) str##_standalone
#define LI_NIDX 2
#endif

#include "cpu/index_fold.h"
#include <stdarg.h>

int APPLY_SPECIFIC(cpu_linear_index)(PyArrayObject *dims_in, ...)
{
    PyArrayObject *ix[LI_NIDX], **flat_out, **shape_out, *flat = NULL, *shape = NULL;
    npy_intp one = LI_NIDX;
    npy_int64 dims[LI_NIDX];
    LI_IDX w;
    int a, k;
    va_list ap;

    va_start(ap, dims_in);
    for (a = 0; a < LI_NIDX; a++)
        ix[a] = va_arg(ap, PyArrayObject *);
    flat_out = va_arg(ap, PyArrayObject **);
    shape_out = va_arg(ap, PyArrayObject **);
    va_end(ap);

    if (bc_check_ndim(dims_in, 1, "the sizes of the indexed axes") != 0)
        return -1;
    if (PyArray_TYPE(dims_in) != NPY_INT64 || PyArray_DIM(dims_in, 0) != one) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "the sizes of the indexed axes", 1, 1);
        return -1;
    }
    for (a = 0; a < LI_NIDX; a++)
        dims[a] = *(const npy_int64 *)PyArray_GETPTR1(dims_in, a);
    if (APPLY_SPECIFIC(li_setup)(&w, ix, dims) != 0)
        return -1;
    if (!bc_output_fits(w.total, 8)) {
        PyErr_Format(PyExc_MemoryError, BC_MSG_NO_MEMORY, (long long)w.total, 8LL);
        return -1;
    }
    APPLY_SPECIFIC(li_merge)(&w);

    {
        npy_intp nd = w.bnd;
        shape = (PyArrayObject *)PyArray_SimpleNew(1, &nd, NPY_INT64);
        flat = (PyArrayObject *)PyArray_SimpleNew(1, &w.total, NPY_INT64);
        if (shape == NULL || flat == NULL)
            goto fail;
        bc_advise_huge_pages(PyArray_DATA(flat), (size_t)PyArray_NBYTES(flat));
        for (k = 0; k < w.bnd; k++)
            ((npy_int64 *)PyArray_DATA(shape))[k] = (npy_int64)w.bshape[k];
    }

    if (w.total > 0) {
        npy_uint64 *flat_p = (npy_uint64 *)PyArray_DATA(flat);
        LI_ROW r;
        int bad = 0;
        /* One pass over B, a block of a row at a time, every axis folded
         * into the block while it is in the cache. */
        APPLY_SPECIFIC(li_first_row)(&r);
        do {
            npy_intp c0;
            for (c0 = 0; c0 < w.inner && !bad; c0 += LI_BLOCK) {
                const npy_intp len = w.inner - c0 < LI_BLOCK ? w.inner - c0 : LI_BLOCK;
                bad = APPLY_SPECIFIC(li_fold_row)(&w, &r, c0, len, flat_p + r.pos + c0);
            }
        } while (!bad && APPLY_SPECIFIC(li_next_row)(&w, &r));
        if (bad) {
            APPLY_SPECIFIC(li_raise_first_bad)(&w);
            goto fail;
        }
    }
    Py_XDECREF(*flat_out);
    Py_XDECREF(*shape_out);
    *flat_out = flat;
    *shape_out = shape;
    return 0;

fail:
    Py_XDECREF(flat);
    Py_XDECREF(shape);
    return -1;
}

#undef LI_FOLD_INSTANTIATED
#undef LI_IDX
#undef LI_ROW
