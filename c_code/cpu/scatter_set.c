/*
 * cpu/scatter_set.c -- the C implementation of ScatterSet, the scatter-set of
 * rows (aesara_bincount_core/scatter_set.py).
 *
 * Entry point (called from the Op's one-line c_code glue):
 *
 *   int APPLY_SPECIFIC(cpu_scatter_set)(PyArrayObject *base, PyArrayObject *values,
 *                                       PyArrayObject *rows, PyArrayObject **out);
 *
 * It computes out = base; out[rows[i]] = values[i] for i < N = len(rows), in
 * index order, so that with duplicate rows the last one in index order wins,
 * as numpy's assignment base[rows] = values does.  base has shape (V, *rest)
 * and any dtype (elements are copied as bytes, bool and complex included);
 * values has base's dtype and is broadcast, NumPy style, to (N, *rest);
 * rows is an int64 vector (the rewrite passes the rows that LinearIndex
 * checked).
 *
 * The check comes first: every row is checked to lie in [-V, V) (a negative
 * one wraps once) and the values' shape is checked, before anything is
 * written, so an error (IndexError BC_MSG_ROW_INDEX naming the first bad row
 * and its position; ValueError BC_MSG_ROWS_BCAST) leaves base, and *out, as
 * they were.
 *
 * SS_INPLACE (0 or 1, defined by the Op): write into base itself (the Op
 * destroys its input 0), else into a new C-contiguous copy.
 *
 * One thread, one pass over rows after the check: a row is one memcpy when
 * the rows of out and of the values are contiguous, one element repeated
 * when the values are the same along the row, else an odometer over the
 * dimensions of a row.
 *
 * Valid C99 and C++ on its own (no APPLY_SPECIFIC defined: a copy of the
 * base), which the test-suite uses.
 */
#ifndef APPLY_SPECIFIC
#define APPLY_SPECIFIC(str) str##_standalone
#define SS_INPLACE 0
#endif

#include "common/scatter_checks.h"

/* Copy one row of `ndim` dimensions `dims` from src (byte strides sst) to
 * dst (byte strides dst_st), elements of `isz` bytes. */
static void APPLY_SPECIFIC(ss_copy_row)(char *dst, const char *src, int ndim, const npy_intp *dims,
                                        const npy_intp *dst_st, const npy_intp *sst, npy_intp isz)
{
    npy_intp ctr[NPY_MAXDIMS];
    int k;
    if (ndim == 0) {
        memcpy(dst, src, (size_t)isz);
        return;
    }
    for (k = 0; k < ndim; k++) {
        if (dims[k] == 0)
            return;
        ctr[k] = 0;
    }
    for (;;) {
        const npy_intp n = dims[ndim - 1], ds = dst_st[ndim - 1], ss = sst[ndim - 1];
        char *d = dst;
        const char *s = src;
        npy_intp j;
        for (k = 0; k < ndim - 1; k++) {
            d += ctr[k] * dst_st[k];
            s += ctr[k] * sst[k];
        }
        for (j = 0; j < n; j++)
            memcpy(d + j * ds, s + j * ss, (size_t)isz);
        for (k = ndim - 2; k >= 0; k--) {
            if (++ctr[k] < dims[k])
                break;
            ctr[k] = 0;
        }
        if (k < 0)
            return;
    }
}

int APPLY_SPECIFIC(cpu_scatter_set)(PyArrayObject *base, PyArrayObject *values,
                                    PyArrayObject *rows_in, PyArrayObject **out)
{
    PyArrayObject *rows = NULL, *res = NULL;
    npy_intp target[NPY_MAXDIMS], vst[NPY_MAXDIMS], n, i, nrows, isz, rowbytes;
    const npy_int64 *r;
    int ndim = PyArray_NDIM(base), k, contig = 1, scalar = 1;

    if (bc_check_ndim(rows_in, 1, "rows") != 0)
        return -1;
    if (ndim < 1) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "base", 1, 0);
        return -1;
    }
    if (PyArray_TYPE(rows_in) != NPY_INT64 || PyArray_TYPE(values) != PyArray_TYPE(base)) {
        PyErr_SetString(PyExc_TypeError, "scatter-set: rows must be int64 and values of the base's dtype");
        return -1;
    }
    rows = PyArray_GETCONTIGUOUS(rows_in);
    if (rows == NULL)
        return -1;
    r = (const npy_int64 *)PyArray_DATA(rows);
    n = PyArray_DIM(rows, 0);
    nrows = PyArray_DIM(base, 0);

    /* The check, before anything is written. */
    for (i = 0; i < n; i++) {
        if ((npy_uint64)r[i] + (npy_uint64)nrows >= 2 * (npy_uint64)nrows) {
            sa_raise_index(1, r[i], 0, i, nrows);
            goto fail;
        }
    }
    target[0] = n;
    for (k = 1; k < ndim; k++)
        target[k] = PyArray_DIM(base, k);
    if (sa_broadcast_increments(PyArray_NDIM(values), PyArray_DIMS(values), PyArray_STRIDES(values),
                                ndim, target, vst) != 0)
        goto fail;

    res = sa_output_of_base(base, SS_INPLACE, "the base of an in-place scatter-set");
    if (res == NULL)
        goto fail;

    /* The layout of a row: contiguous in out and in the values (one memcpy),
     * or one value repeated (all strides of the values 0 along a row). */
    isz = PyArray_ITEMSIZE(res);
    rowbytes = isz;
    for (k = ndim - 1; k >= 1; k--) {
        if (target[k] != 1) {
            contig &= PyArray_STRIDE(res, k) == rowbytes && vst[k] == rowbytes;
            scalar &= vst[k] == 0 && PyArray_STRIDE(res, k) == rowbytes;
        }
        rowbytes *= target[k];
    }
    {
        char *o = PyArray_BYTES(res);
        const char *v = PyArray_BYTES(values);
        const npy_intp ost = PyArray_STRIDE(res, 0), vst0 = vst[0];
        for (i = 0; i < n; i++) {
            const npy_intp row = r[i] < 0 ? (npy_intp)r[i] + nrows : (npy_intp)r[i];
            char *dst = o + row * ost;
            const char *src = v + i * vst0;
            if (contig) {
                memcpy(dst, src, (size_t)rowbytes);
            } else if (scalar) {
                npy_intp j;
                for (j = 0; j < rowbytes; j += isz)
                    memcpy(dst + j, src, (size_t)isz);
            } else {
                APPLY_SPECIFIC(ss_copy_row)(dst, src, ndim - 1, target + 1, PyArray_STRIDES(res) + 1,
                                            vst + 1, isz);
            }
        }
    }
    Py_DECREF(rows);
    Py_XDECREF(*out);
    *out = res;
    return 0;

fail:
    Py_XDECREF(rows);
    Py_XDECREF(res);
    return -1;
}
