/*
 * scatter_index_cpu.c -- the C implementation of LinearIndex
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
 * One pass per axis: the pass of axis a reads idx_a through its broadcast
 * strides, checks each value (one unsigned compare: v + d must lie in
 * [0, 2d)) into a flag that is looked at once per row of B, so that the
 * inner loop has no branch, and folds the value into flat.  The dtype switch
 * is taken once per axis.
 *
 * Valid C99 and C++ on its own; compiled on its own (no APPLY_SPECIFIC) it
 * instantiates two index arrays, which the test-suite uses.
 */
#ifndef APPLY_SPECIFIC
#define APPLY_SPECIFIC(str) str##_standalone
#define LI_NIDX 2
#endif

#include "scatter_add_common.h"
#include <stdarg.h>

/* An index value as 64 bits: sign-extended (signed dtypes) or zero-extended. */
#define LI_WIDEN(IS_SIGNED, v) ((IS_SIGNED) ? (npy_uint64)bc_as_i64((npy_int64)(v)) : bc_as_u64((npy_uint64)(v)))

/* One axis's pass over B (see the file notes), for index dtype T: reads the
 * index at `p` + the broadcast strides, writes flat[0 .. N).  On the first
 * bad row sets *bad_at to the position of its first bad index and stops. */
#define LI_AXIS_PASS(T, IS_SIGNED)                                                              \
    do {                                                                                        \
        const npy_uint64 ud = (npy_uint64)d, span = (IS_SIGNED ? 2 : 1) * ud;                    \
        const npy_uint64 shift = IS_SIGNED ? ud : 0;                                            \
        npy_intp pos = 0, j;                                                                    \
        memset(ctr, 0, sizeof(ctr));                                                            \
        while (pos < total) {                                                                   \
            const char *row = base_p;                                                           \
            npy_uint64 *out = (npy_uint64 *)flat + pos;                                         \
            int bad = 0, k;                                                                     \
            for (k = 0; k < bnd - 1; k++)                                                       \
                row += ctr[k] * st[k];                                                          \
            for (j = 0; j < inner; j++) {                                                       \
                const npy_uint64 u = (npy_uint64)LI_WIDEN(IS_SIGNED, *(const T *)(row + j * in_st)); \
                const npy_uint64 r = u + shift; /* in [0, span) when in range */                 \
                bad |= r >= span;                                                               \
                out[j] = out[j] * ud + (r >= ud ? r - ud : r);                                  \
            }                                                                                   \
            if (bad) {                                                                          \
                for (j = 0; j < inner; j++) {                                                   \
                    const T v = *(const T *)(row + j * in_st);                                  \
                    if ((npy_uint64)LI_WIDEN(IS_SIGNED, v) + shift >= span) {                   \
                        *bad_at = pos + j;                                                      \
                        if (IS_SIGNED)                                                          \
                            snprintf(text, text_size, "%lld", (long long)bc_as_i64((npy_int64)v)); \
                        else                                                                    \
                            snprintf(text, text_size, "%llu",                                   \
                                     (unsigned long long)bc_as_u64((npy_uint64)v));             \
                        return -1;                                                              \
                    }                                                                           \
                }                                                                               \
            }                                                                                   \
            pos += inner;                                                                       \
            for (k = bnd - 2; k >= 0; k--) { /* the odometer over the outer axes of B */        \
                if (++ctr[k] < bshape[k])                                                       \
                    break;                                                                      \
                ctr[k] = 0;                                                                     \
            }                                                                                   \
        }                                                                                       \
    } while (0)

/* Fold axis `a` (size d) of the index array `ix` into flat; see LI_AXIS_PASS.
 * Returns 0, or -1 with *bad_at and `text` (the bad value) set, or -2 for an
 * index dtype that is not an integer (with TypeError set). */
static int APPLY_SPECIFIC(li_fold_axis)(PyArrayObject *ix, const npy_intp *st, int bnd,
                                       const npy_intp *bshape, npy_intp total, npy_int64 d,
                                       npy_int64 *flat, npy_intp *bad_at, char *text,
                                       size_t text_size)
{
    npy_intp ctr[NPY_MAXDIMS];
    const char *base_p = PyArray_BYTES(ix);
    const npy_intp inner = bnd > 0 ? bshape[bnd - 1] : 1;
    const npy_intp in_st = bnd > 0 ? st[bnd - 1] : 0;
    (void)text_size;
    if (total == 0 || inner == 0)
        return 0;
    switch (PyArray_TYPE(ix)) {
    case NPY_INT8: LI_AXIS_PASS(npy_int8, 1); break;
    case NPY_INT16: LI_AXIS_PASS(npy_int16, 1); break;
    case NPY_INT32: LI_AXIS_PASS(npy_int32, 1); break;
    case NPY_INT64: LI_AXIS_PASS(npy_int64, 1); break;
    case NPY_UINT8: LI_AXIS_PASS(npy_uint8, 0); break;
    case NPY_UINT16: LI_AXIS_PASS(npy_uint16, 0); break;
    case NPY_UINT32: LI_AXIS_PASS(npy_uint32, 0); break;
    case NPY_UINT64: LI_AXIS_PASS(npy_uint64, 0); break;
    default:
        PyErr_SetString(PyExc_TypeError, "scatter: index arrays must have an integer dtype");
        return -2;
    }
    return 0;
}

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
    npy_intp bshape[NPY_MAXDIMS], st[NPY_MAXDIMS], total = 1, one = LI_NIDX;
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
        flat = (PyArrayObject *)PyArray_ZEROS(1, &total, NPY_INT64, 0);
        if (shape == NULL || flat == NULL)
            goto fail;
        for (k = 0; k < bnd; k++)
            ((npy_int64 *)PyArray_DATA(shape))[k] = (npy_int64)bshape[k];
    }

    for (a = 0; a < LI_NIDX; a++) {
        const int lead = bnd - PyArray_NDIM(ix[a]);
        npy_intp bad_at = -1;
        char text[32];
        int rc;
        for (k = 0; k < bnd; k++)
            st[k] = (k < lead || PyArray_DIM(ix[a], k - lead) == 1) ? 0
                                                                   : PyArray_STRIDE(ix[a], k - lead);
        rc = APPLY_SPECIFIC(li_fold_axis)(ix[a], st, bnd, bshape, total, dims[a],
                                          (npy_int64 *)PyArray_DATA(flat), &bad_at, text,
                                          sizeof(text));
        if (rc == -1)
            PyErr_Format(PyExc_IndexError, BC_MSG_AXIS_INDEX, text, (long long)bad_at,
                         (long long)a, (long long)dims[a]);
        if (rc != 0)
            goto fail;
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
