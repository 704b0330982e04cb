/*
 * common/scatter_checks.h -- host-side checks of the scatter-add of rows
 * (ScatterAdd, aesara_bincount_core/scatter_add.py), shared by the CPU
 * implementation (cpu/scatter_add.c) and the host code of a GPU one: they
 * read only shapes and strides, never the data, so they serve device arrays
 * too.  The messages are the BC_MSG_ROW* / BC_MSG_ZEROS* entries of
 * common/host_helpers.h, which the NumPy reference raises as well.
 *
 * The Op computes out = base; out[idx[i]] += increments[i] for i < N, where
 * base has shape (V, *rest) and the increments are broadcast, NumPy style,
 * to the indexed shape (N, *rest).
 *
 * Valid C99 and C++ on its own.
 */
#ifndef AESARA_SCATTER_ADD_COMMON_H
#define AESARA_SCATTER_ADD_COMMON_H

#include "common/host_helpers.h"
#include <stdio.h>
#include <string.h>

/* Enough for the repr of a shape of NPY_MAXDIMS dimensions of 20 digits. */
#define SA_SHAPE_TEXT_SIZE (24 * NPY_MAXDIMS + 8)

/* Python's repr of the shape tuple `dims`: "()", "(3,)", "(3, 2)". */
static void sa_shape_text(char *buf, size_t size, int ndim, const npy_intp *dims)
{
    size_t used = 0;
    int k, n;
    buf[0] = '\0';
    n = snprintf(buf, size, "(");
    used = n > 0 ? (size_t)n : 0;
    for (k = 0; k < ndim && used < size; k++) {
        n = snprintf(buf + used, size - used, k ? ", %lld" : "%lld", (long long)dims[k]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < size)
        snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
}

/* Raise the IndexError of an index outside [-nrows, nrows) at position pos;
 * `is_signed` tells which of `s` and `u` holds it.  Returns -1. */
static int sa_raise_index(int is_signed, npy_int64 s, npy_uint64 u, npy_intp pos, npy_intp nrows)
{
    char text[32];
    if (is_signed)
        snprintf(text, sizeof(text), "%lld", (long long)s);
    else
        snprintf(text, sizeof(text), "%llu", (unsigned long long)u);
    PyErr_Format(PyExc_IndexError, BC_MSG_ROW_INDEX, text, (long long)pos, (long long)nrows);
    return -1;
}

/*
 * Broadcast the increments (inc_ndim dimensions inc_dims, byte strides
 * inc_strides) to the indexed shape target[0..ndim) = (N, *rest), NumPy
 * style: the dimensions are aligned on the right, and each one of the
 * increments is either the target's or 1.  On success bstrides[0..ndim)
 * receives the byte strides of the broadcast view (0 along every broadcast
 * dimension) and 0 is returned; otherwise -1 with ValueError
 * BC_MSG_ROWS_BCAST set.
 */
static int sa_broadcast_increments(int inc_ndim, const npy_intp *inc_dims,
                                   const npy_intp *inc_strides, int ndim,
                                   const npy_intp *target, npy_intp *bstrides)
{
    const int lead = ndim - inc_ndim;
    int k;
    for (k = 0; k < ndim; k++) {
        npy_intp d;
        if (k < lead) {
            bstrides[k] = 0;
            continue;
        }
        d = inc_dims[k - lead];
        if (d != target[k] && d != 1)
            break;
        bstrides[k] = (d == 1) ? 0 : inc_strides[k - lead];
    }
    if (lead < 0 || k < ndim) {
        char have[SA_SHAPE_TEXT_SIZE], want[SA_SHAPE_TEXT_SIZE];
        sa_shape_text(have, sizeof(have), inc_ndim, inc_dims);
        sa_shape_text(want, sizeof(want), ndim, target);
        PyErr_Format(PyExc_ValueError, BC_MSG_ROWS_BCAST, have, want);
        return -1;
    }
    return 0;
}

/*
 * Read the shape of the zero-filled base from the int64 vector `shape_in`
 * into dims[0..*ndim).  Raises ValueError BC_MSG_ZEROS_SHAPE for a negative
 * dimension, MemoryError BC_MSG_ZEROS_MEMORY
 * when the array would not fit in memory (bc_output_fits), and ValueError
 * BC_MSG_NDIM for a shape that is not a vector of 1 to NPY_MAXDIMS int64.
 * Returns 0 or -1.
 */
static int sa_read_zeros_shape(PyArrayObject *shape_in, npy_intp itemsize, int *ndim,
                               npy_intp *dims)
{
    npy_intp k, n, total = 1;
    int negative = 0, fits = 1;
    char text[SA_SHAPE_TEXT_SIZE];
    if (bc_check_ndim(shape_in, 1, "the shape of the zero-filled base") != 0)
        return -1;
    n = PyArray_DIM(shape_in, 0);
    if (PyArray_TYPE(shape_in) != NPY_INT64 || n < 1 || n > NPY_MAXDIMS) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "the shape of the zero-filled base", 1, 1);
        return -1;
    }
    for (k = 0; k < n; k++) {
        const npy_int64 d = *(const npy_int64 *)PyArray_GETPTR1(shape_in, k);
        negative |= d < 0;
        dims[k] = (npy_intp)d;
    }
    *ndim = (int)n;
    if (negative) {
        sa_shape_text(text, sizeof(text), (int)n, dims);
        PyErr_Format(PyExc_ValueError, BC_MSG_ZEROS_SHAPE, text);
        return -1;
    }
    for (k = 0; k < n; k++) {
        if (dims[k] == 0) {
            total = 0;
            break;
        }
        if (total > NPY_MAX_INTP / dims[k])
            fits = 0;
        else
            total *= dims[k];
    }
    if (total != 0 && (!fits || !bc_output_fits(total, itemsize))) {
        sa_shape_text(text, sizeof(text), (int)n, dims);
        PyErr_Format(PyExc_MemoryError, BC_MSG_ZEROS_MEMORY, text, (long long)itemsize);
        return -1;
    }
    return 0;
}

/*
 * The output of a scatter onto a host base: `base` itself, new reference,
 * when `inplace` (refused with ValueError when it is not writeable; `what`
 * names it), else a new C-contiguous copy.  NULL with an exception set on
 * failure.
 */
static PyArrayObject *sa_output_of_base(PyArrayObject *base, int inplace, const char *what)
{
    if (inplace) {
        if (PyArray_FailUnlessWriteable(base, what) < 0)
            return NULL;
        Py_INCREF(base);
        return base;
    }
    return (PyArrayObject *)PyArray_NewCopy(base, NPY_CORDER);
}

#endif /* AESARA_SCATTER_ADD_COMMON_H */
