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
 * One pass over B: a block of LI_BLOCK positions of a row of B at a time,
 * every axis folded into the block of flat while it is in the L1 cache (the
 * dtype switch taken once per block and axis).  Each index is checked with
 * one unsigned compare (v + d must lie in [0, 2d)) into a flag, so that the
 * loops have no branch; on a bad one a second, serial scan, axis by axis,
 * names the first bad index of the first axis that has one.
 *
 * Valid C99 and C++ on its own; compiled on its own (no APPLY_SPECIFIC) it
 * instantiates two index arrays, which the test-suite uses.
 */
#ifndef APPLY_SPECIFIC
#define APPLY_SPECIFIC(str) str##_standalone
#define LI_NIDX 2
#endif

#include "common/scatter_checks.h"
#include <stdarg.h>

/* An index value as 64 bits: sign-extended (signed dtypes) or zero-extended. */
#define LI_WIDEN(IS_SIGNED, v) ((IS_SIGNED) ? (npy_uint64)bc_as_i64((npy_int64)(v)) : bc_as_u64((npy_uint64)(v)))

/* Positions of B folded per axis before the next axis is taken: the block of
 * flat stays in the L1 cache while every axis is folded into it. */
#define LI_BLOCK 2048

/* Fold `len` indices of dtype T (at p, byte stride st) of an axis of size d
 * into out[0..len): out = out * d + wrapped index (first axis: out = wrapped
 * index).  Sets bad to 1 when an index lies outside [-d, d) (one unsigned
 * compare: v + d must lie in [0, 2d)); no branch in the loop. */
#define LI_FOLD_LOOP(LOAD)                                                                     \
    do {                                                                                       \
        if (first) {                                                                           \
            for (j = 0; j < len; j++) {                                                        \
                const npy_uint64 r = (npy_uint64)(LOAD) + shift;                               \
                acc |= r >= span;                                                              \
                out[j] = r >= ud ? r - ud : r;                                                 \
            }                                                                                  \
        } else {                                                                               \
            for (j = 0; j < len; j++) {                                                        \
                const npy_uint64 r = (npy_uint64)(LOAD) + shift;                               \
                acc |= r >= span;                                                              \
                out[j] = out[j] * ud + (r >= ud ? r - ud : r);                                 \
            }                                                                                  \
        }                                                                                      \
    } while (0)
#define LI_FOLD(T, IS_SIGNED)                                                                  \
    do {                                                                                       \
        const npy_uint64 span = (IS_SIGNED ? 2 : 1) * ud, shift = IS_SIGNED ? ud : 0;           \
        npy_uint64 acc = 0;                                                                    \
        npy_intp j;                                                                            \
        if (st == (npy_intp)sizeof(T)) { /* contiguous: a loop the compiler vectorises */      \
            const T *q = (const T *)p;                                                         \
            LI_FOLD_LOOP(LI_WIDEN(IS_SIGNED, q[j]));                                           \
        } else {                                                                               \
            LI_FOLD_LOOP(LI_WIDEN(IS_SIGNED, *(const T *)(p + j * st)));                       \
        }                                                                                      \
        bad = acc != 0;                                                                        \
    } while (0)

/* The position of the first index of dtype T outside [-d, d) among `len` at
 * p (byte stride st), or -1; its value written into text. */
#define LI_FIND(T, IS_SIGNED)                                                                  \
    do {                                                                                       \
        const npy_uint64 span = (IS_SIGNED ? 2 : 1) * ud, shift = IS_SIGNED ? ud : 0;           \
        npy_intp j;                                                                            \
        for (j = 0; j < len; j++) {                                                            \
            const T v = *(const T *)(p + j * st);                                              \
            if ((npy_uint64)LI_WIDEN(IS_SIGNED, v) + shift >= span) {                          \
                if (IS_SIGNED)                                                                 \
                    snprintf(text, text_size, "%lld", (long long)bc_as_i64((npy_int64)v));     \
                else                                                                           \
                    snprintf(text, text_size, "%llu", (unsigned long long)bc_as_u64((npy_uint64)v)); \
                return j;                                                                      \
            }                                                                                  \
        }                                                                                      \
        return -1;                                                                             \
    } while (0)

/* Dispatch on the index dtype `type` (one switch per block and axis). */
#define LI_SWITCH(MACRO)                                                                       \
    switch (type) {                                                                            \
    case NPY_INT8: MACRO(npy_int8, 1); break;                                                  \
    case NPY_INT16: MACRO(npy_int16, 1); break;                                                \
    case NPY_INT32: MACRO(npy_int32, 1); break;                                                \
    case NPY_INT64: MACRO(npy_int64, 1); break;                                                \
    case NPY_UINT8: MACRO(npy_uint8, 0); break;                                                \
    case NPY_UINT16: MACRO(npy_uint16, 0); break;                                              \
    case NPY_UINT32: MACRO(npy_uint32, 0); break;                                              \
    default: MACRO(npy_uint64, 0); break;                                                      \
    }

/* LI_FOLD for the index dtype `type`; returns 1 when an index was bad. */
static int APPLY_SPECIFIC(li_fold)(int type, const char *p, npy_intp st, npy_intp len,
                                   npy_int64 d, npy_uint64 *out, int first)
{
    const npy_uint64 ud = (npy_uint64)d;
    int bad = 0;
    LI_SWITCH(LI_FOLD)
    return bad;
}

/* LI_FIND for the index dtype `type`. */
static npy_intp APPLY_SPECIFIC(li_find)(int type, const char *p, npy_intp st, npy_intp len,
                                        npy_int64 d, char *text, size_t text_size)
{
    const npy_uint64 ud = (npy_uint64)d;
    LI_SWITCH(LI_FIND)
    return -1;
}

/* Walk the rows of B (the last axis of B is a row; bnd == 0 is one row of
 * one) with an odometer over the other axes.  For each row, fill
 * row_ptr[a] with the address of index array a's first element of that row. */
#define LI_FOR_EACH_ROW(BODY)                                                                  \
    do {                                                                                       \
        npy_intp ctr[NPY_MAXDIMS], pos = 0;                                                    \
        int k_, a_;                                                                            \
        for (k_ = 0; k_ < NPY_MAXDIMS; k_++)                                                   \
            ctr[k_] = 0;                                                                       \
        while (pos < total) {                                                                  \
            for (a_ = 0; a_ < LI_NIDX; a_++) {                                                 \
                row_ptr[a_] = PyArray_BYTES(ix[a_]);                                           \
                for (k_ = 0; k_ < bnd - 1; k_++)                                               \
                    row_ptr[a_] += ctr[k_] * st[a_][k_];                                       \
            }                                                                                  \
            BODY;                                                                              \
            pos += inner;                                                                      \
            for (k_ = bnd - 2; k_ >= 0; k_--) {                                                \
                if (++ctr[k_] < bshape[k_])                                                    \
                    break;                                                                     \
                ctr[k_] = 0;                                                                   \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* Broadcast the shapes of the n index arrays to bshape[0..*bnd); IndexError
 * BC_MSG_INDEX_BCAST when they do not broadcast.  Returns 0 or -1. */
static int APPLY_SPECIFIC(li_broadcast)(PyArrayObject **ix, int n, int *bnd, npy_intp *bshape)
{
    int a, k, nd = 0;
    for (a = 0; a < n; a++)
        nd = PyArray_NDIM(ix[a]) > nd ? PyArray_NDIM(ix[a]) : nd;
    for (k = 0; k < nd; k++)
        bshape[k] = 1;
    for (a = 0; a < n; a++) {
        const int lead = nd - PyArray_NDIM(ix[a]);
        for (k = lead; k < nd; k++) {
            const npy_intp s = PyArray_DIM(ix[a], k - lead);
            if (s == bshape[k] || s == 1)
                continue;
            if (bshape[k] == 1) {
                bshape[k] = s;
                continue;
            }
            {
                char text[SA_SHAPE_TEXT_SIZE * 4];
                size_t used = 0;
                int b;
                text[0] = '\0';
                for (b = 0; b < n && used + SA_SHAPE_TEXT_SIZE < sizeof(text); b++) {
                    if (b)
                        text[used++] = ' ';
                    sa_shape_text(text + used, sizeof(text) - used, PyArray_NDIM(ix[b]),
                                  PyArray_DIMS(ix[b]));
                    used += strlen(text + used);
                }
                PyErr_Format(PyExc_IndexError, BC_MSG_INDEX_BCAST, text);
                return -1;
            }
        }
    }
    *bnd = nd;
    return 0;
}

int APPLY_SPECIFIC(cpu_linear_index)(PyArrayObject *dims_in, ...)
{
    PyArrayObject *ix[LI_NIDX], **flat_out, **shape_out, *flat = NULL, *shape = NULL;
    npy_intp bshape[NPY_MAXDIMS], st[LI_NIDX][NPY_MAXDIMS], total = 1, one = LI_NIDX;
    npy_int64 dims[LI_NIDX];
    int a, k, bnd = 0;
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
    for (a = 0; a < LI_NIDX; a++) {
        if (!PyArray_ISINTEGER(ix[a])) {
            PyErr_SetString(PyExc_TypeError, "scatter: index arrays must have an integer dtype");
            return -1;
        }
    }
    if (APPLY_SPECIFIC(li_broadcast)(ix, LI_NIDX, &bnd, bshape) != 0)
        return -1;
    for (k = 0; k < bnd; k++) {
        if (bshape[k] == 0) {
            total = 0;
            break;
        }
        if (total > NPY_MAX_INTP / bshape[k] || !bc_output_fits(total * bshape[k], 8)) {
            PyErr_Format(PyExc_MemoryError, BC_MSG_NO_MEMORY, (long long)NPY_MAX_INTP, 8LL);
            return -1;
        }
        total *= bshape[k];
    }

    {
        npy_intp nd = bnd;
        shape = (PyArrayObject *)PyArray_SimpleNew(1, &nd, NPY_INT64);
        flat = (PyArrayObject *)PyArray_SimpleNew(1, &total, NPY_INT64);
        if (shape == NULL || flat == NULL)
            goto fail;
        bc_advise_huge_pages(PyArray_DATA(flat), (size_t)PyArray_NBYTES(flat));
        for (k = 0; k < bnd; k++)
            ((npy_int64 *)PyArray_DATA(shape))[k] = (npy_int64)bshape[k];
    }

    /* Broadcast strides: 0 along a missing or length-1 axis. */
    for (a = 0; a < LI_NIDX; a++) {
        const int lead = bnd - PyArray_NDIM(ix[a]);
        for (k = 0; k < bnd; k++)
            st[a][k] = (k < lead || PyArray_DIM(ix[a], k - lead) == 1) ? 0
                                                                      : PyArray_STRIDE(ix[a], k - lead);
    }
    if (total > 0) {
        const npy_intp inner = bnd > 0 ? bshape[bnd - 1] : 1;
        npy_uint64 *flat_p = (npy_uint64 *)PyArray_DATA(flat);
        const char *row_ptr[LI_NIDX];
        int bad = 0;
        /* One pass over B, a block of a row at a time, every axis folded
         * into the block while it is in the cache. */
        LI_FOR_EACH_ROW({
            npy_intp c0;
            for (c0 = 0; c0 < inner && !bad; c0 += LI_BLOCK) {
                const npy_intp len = inner - c0 < LI_BLOCK ? inner - c0 : LI_BLOCK;
                for (a = 0; a < LI_NIDX; a++) {
                    const npy_intp s_in = bnd > 0 ? st[a][bnd - 1] : 0;
                    bad |= APPLY_SPECIFIC(li_fold)(PyArray_TYPE(ix[a]), row_ptr[a] + c0 * s_in, s_in,
                                                   len, dims[a], flat_p + pos + c0, a == 0);
                }
            }
            if (bad)
                break;
        });
        if (bad) {
            /* Name the first bad index of the first axis that has one, in C
             * order of B, as numpy checks its index arrays one by one. */
            for (a = 0; a < LI_NIDX; a++) {
                char text[32];
                npy_intp found = -1;
                const npy_intp s_in = bnd > 0 ? st[a][bnd - 1] : 0;
                LI_FOR_EACH_ROW({
                    found = APPLY_SPECIFIC(li_find)(PyArray_TYPE(ix[a]), row_ptr[a], s_in, inner,
                                                    dims[a], text, sizeof(text));
                    if (found >= 0) {
                        found += pos;
                        break;
                    }
                });
                if (found >= 0) {
                    PyErr_Format(PyExc_IndexError, BC_MSG_AXIS_INDEX, text, (long long)found,
                                 (long long)a, (long long)dims[a]);
                    goto fail;
                }
            }
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
