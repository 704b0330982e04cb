/*
 * cpu/fused_bincount_nd.h -- FusedBincount's elementwise x or weights of
 * several dimensions, broadcasting among their inputs:
 * bincount((base[:, None] + idx).ravel()), bincount(x.ravel(),
 * weights=(w[:, None] * v).ravel()).  The value at position i of the
 * flattened (C order) result is computed from the inputs' elements at the
 * same place of the broadcast shape; nothing is materialized.
 *
 * A group (the inputs of x, or of the weights) is "of several dimensions"
 * when one of its inputs has two or more; its shape S is the broadcast of its
 * inputs' shapes (each dimension S's or 1, NumPy style), and its positions
 * are those of S in C order.  The loops of cpu/fused_bincount_loops.h read a
 * vector input as p[i], i the position, and a 0-d input once: so the driver
 * cuts the positions into segments, each inside one row (the last axis) of
 * every such group, and gives the loops, for each segment, pointers that make
 * p[i] the input's element at position i (bc_f_segment):
 *   - an input whose last axis is broadcast by its type (its length is 1 by
 *     its static shape: base[:, None]) is declared by the Op's scalar code
 *     as a 0-d input (BC_F_ROW_SCALARS says which): its pointer is its
 *     element for the segment's row, read once;
 *   - any other input steps through the row one element at a time (a length
 *     of 1 along the last axis that only the values have is copied out to
 *     S's shape first); other axes of length 1 are broadcast by a zero
 *     stride, so that w[None, :] added to each row reads w again.
 * The group's axes of length 1 are dropped (but the last) and the axes every
 * input steps through evenly are merged (as NumPy's iterator does), so that
 * rows are as long as they can be.  One-dimensional groups keep their plain
 * layout.
 *
 * Errors: inputs of a group whose shapes do not broadcast raise ValueError
 * BC_MSG_FUSED_LENGTH naming the two lengths of the first axis that differs,
 * as the elementwise graph would refuse them (ValueError too).
 *
 * A "template" header of one instantiation, included by
 * cpu/fused_bincount_loops.h before its context (guarded by
 * BC_FUSED_ND_DONE, which the driver undefines at its end).  Valid C99 and
 * C++ on its own.
 */
#ifndef BC_FUSED_ND_DONE
#define BC_FUSED_ND_DONE 1

#ifndef APPLY_SPECIFIC
#define APPLY_SPECIFIC(str) str##_standalone
#endif
#ifndef BC_NIN
#define BC_NIN 5
#endif
#ifndef BC_F_ROW_SCALARS
#define BC_F_ROW_SCALARS {0}
#endif

#include "common/host_helpers.h"
#include <string.h>

/* One group of several dimensions: inputs [lo, hi) of the node. */
#define BC_FGROUP APPLY_SPECIFIC(bc_fgroup)
typedef struct {
    int lo, hi;                         /* its inputs */
    int nd;                             /* axes (merged; 0: not of several dimensions) */
    npy_intp shape[NPY_MAXDIMS];        /* ... their lengths; the last one is a row */
    npy_intp st[BC_NIN][NPY_MAXDIMS];   /* byte strides of each input along them */
    npy_intp inner;                     /* positions of a row */
} BC_FGROUP;

/* The groups of a call: x's and the weights'. */
#define BC_FND APPLY_SPECIFIC(bc_fnd)
typedef struct {
    BC_FGROUP g[2];
    const char *data[BC_NIN];           /* the inputs' data, as they were passed to the loops */
    int row_scalar[BC_NIN];             /* read once per row (BC_F_ROW_SCALARS) */
    npy_intp step[BC_NIN];              /* bytes between the elements the loops read as p[i]
                                           (0: read once, a 0-d or row-scalar input) */
    int any;                            /* a group of several dimensions */
} BC_FND;

/* Does input k belong to a group of several dimensions?  The group's shape
 * S (into g->shape, g->nd = its dimensions, before merging) and size; -2 with
 * ValueError BC_MSG_FUSED_LENGTH when the shapes do not broadcast, -1 when
 * the group has no input of two or more dimensions (a plain group). */
static npy_intp APPLY_SPECIFIC(bc_f_nd_shape)(PyArrayObject **ins, BC_FGROUP *g, const char *what)
{
    int k, d, nd = 0;
    npy_intp size = 1;
    for (k = g->lo; k < g->hi; k++)
        nd = PyArray_NDIM(ins[k]) > nd ? PyArray_NDIM(ins[k]) : nd;
    g->nd = 0;
    if (nd < 2)
        return -1;
    for (d = 0; d < nd; d++)
        g->shape[d] = 1;
    for (k = g->lo; k < g->hi; k++) {
        const int lead = nd - PyArray_NDIM(ins[k]);
        if (PyArray_NDIM(ins[k]) == 0)
            continue;
        for (d = lead; d < nd; d++) {
            const npy_intp s = PyArray_DIM(ins[k], d - lead);
            if (s == g->shape[d] || s == 1)
                continue;
            if (g->shape[d] != 1) {
                PyErr_Format(PyExc_ValueError, BC_MSG_FUSED_LENGTH, what, (long long)g->shape[d],
                             (long long)s);
                return -2;
            }
            g->shape[d] = s;
        }
    }
    for (d = 0; d < nd; d++) {
        if (g->shape[d] != 0 && size > NPY_MAX_INTP / g->shape[d]) {
            PyErr_NoMemory();
            return -2;
        }
        size *= g->shape[d];
    }
    g->nd = nd;
    return size;
}

/* The array the loops read for input k of group g (shape S, g->nd axes): a
 * C-contiguous array (a, or a copy), of S's shape when its last axis has
 * length 1 but S's has not and the scalar code reads it as a vector; new
 * reference, NULL with an exception set. */
static PyArrayObject *APPLY_SPECIFIC(bc_f_nd_own)(PyArrayObject *a, const BC_FGROUP *g, int row_scalar)
{
    const int nd = PyArray_NDIM(a);
    PyArrayObject *r;
    if (nd == 0 || row_scalar || PyArray_DIM(a, nd - 1) == g->shape[g->nd - 1])
        return PyArray_GETCONTIGUOUS(a);
    r = (PyArrayObject *)PyArray_SimpleNew(g->nd, (npy_intp *)g->shape, PyArray_TYPE(a));
    if (r != NULL && PyArray_CopyInto(r, a) != 0) { /* broadcasts a along S */
        Py_DECREF(r);
        r = NULL;
    }
    return r;
}

/* Strides of the (contiguous) inputs of g along S, then the axes merged:
 * those of length 1 dropped, and axis d merged into the one before it
 * wherever every input steps through both evenly. */
static void APPLY_SPECIFIC(bc_f_nd_layout)(BC_FGROUP *g, PyArrayObject **own)
{
    npy_intp st[BC_NIN][NPY_MAXDIMS], shape[NPY_MAXDIMS];
    int k, d, nd = 0;
    for (k = g->lo; k < g->hi; k++) {
        const int lead = g->nd - PyArray_NDIM(own[k]);
        for (d = 0; d < g->nd; d++)
            st[k][d] = (d < lead || PyArray_DIM(own[k], d - lead) == 1) ? 0
                                                                         : PyArray_STRIDE(own[k], d - lead);
    }
    for (d = 0; d < g->nd; d++)
        shape[d] = g->shape[d];
    for (d = 0; d < g->nd; d++) {
        int even = nd > 0;
        if (shape[d] == 1 && d < g->nd - 1)
            continue; /* the last axis stays: a row-scalar input is read once per row */
        for (k = g->lo; k < g->hi && even; k++)
            even = g->st[k][nd - 1] == st[k][d] * shape[d];
        if (even) {
            g->shape[nd - 1] *= shape[d];
            for (k = g->lo; k < g->hi; k++)
                g->st[k][nd - 1] = st[k][d];
            continue;
        }
        g->shape[nd] = shape[d];
        for (k = g->lo; k < g->hi; k++)
            g->st[k][nd] = st[k][d];
        nd++;
    }
    g->nd = nd;
    g->inner = g->shape[nd - 1];
}

/* For the positions from i (below `end`): the loops' input pointers `in`
 * (from nd->data) and the end of the segment, the first position that
 * starts a new row of a group. */
static npy_intp APPLY_SPECIFIC(bc_f_segment)(const BC_FND *nd, npy_intp i, npy_intp end,
                                             const void **in)
{
    int gi, k, d;
    for (gi = 0; gi < 2; gi++) {
        const BC_FGROUP *g = &nd->g[gi];
        npy_intp row, rest, first;
        if (g->nd == 0 || g->inner == 0)
            continue;
        row = i / g->inner;
        first = row * g->inner;
        end = end < first + g->inner ? end : first + g->inner;
        for (k = g->lo; k < g->hi; k++) {
            npy_intp off = 0;
            rest = row;
            for (d = g->nd - 2; d > 0; d--) {
                off += (rest % g->shape[d]) * g->st[k][d];
                rest /= g->shape[d];
            }
            if (g->nd >= 2) /* the outermost axis: rest is its index already */
                off += rest * g->st[k][0];
            if (nd->step[k] == 0)
                in[k] = nd->data[k] + off;
            else /* so that p[i] is the element at position i of this row */
                in[k] = (const void *)((npy_uintp)nd->data[k] + (npy_uintp)off -
                                       (npy_uintp)first * (npy_uintp)nd->step[k]);
        }
    }
    return end;
}

#endif /* BC_FUSED_ND_DONE */
