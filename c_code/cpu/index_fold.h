/*
 * cpu/index_fold.h -- the check and fold of several integer index arrays
 * into flat rows, shared by LinearIndex (cpu/linear_index.c), which writes
 * the flat rows out, and ScatterAddIndices (scatter_indices_cpu.c), which
 * folds them a block at a time inside its scatter loop.  This is the one
 * validation of the index arrays of a scatter with several of them, and the
 * one place that names a bad one.
 *
 * LI_NIDX = K index arrays idx_0 .. idx_{K-1} of any integer dtype, shape
 * and strides index the K leading axes, of sizes d_0 .. d_{K-1}, of a base.
 * They are broadcast together, NumPy style, to the shape B; the flat row of
 * position p of B (C order) is
 *
 *   flat = ((w_0 * d_1 + w_1) * d_2 + w_2) ... * d_{K-1} + w_{K-1},
 *
 * where w_a is idx_a (broadcast) at p, wrapped once when negative: the row of
 * base.reshape(d_0 * ... * d_{K-1}, *rest) that base[idx_0, ..., idx_{K-1}]
 * names.
 *
 * The walk (LI_IDX): B with its axes of length 1 dropped and the axes that
 * every array (the index arrays, and one more array of the caller, such as
 * the increments) steps through evenly merged, as NumPy's iterator does, so
 * that a row (the last axis of the walk) is as long as it can be.  Positions
 * keep their C order of B, so errors name the same positions.  A row is
 * folded a block at a time (li_fold_row): every axis folded into the block
 * while it is in the L1 cache, the dtype switch taken once per block and
 * axis; an index that is the same along the row (stride 0: arange(B)[:, None]
 * against a (B, M) array) is read and checked once.  Each index is checked
 * with one unsigned compare (v + d must lie in [0, 2d)) into a flag, so that
 * the loops have no branch; on a bad one li_raise_first_bad scans again,
 * serially, axis by axis, and names the first bad index of the first axis
 * that has one (as numpy checks its index arrays one after the other):
 * IndexError BC_MSG_AXIS_INDEX with its value, its position in C order of B
 * and the axis.  Shapes that do not broadcast raise IndexError
 * BC_MSG_INDEX_BCAST (li_setup).
 *
 * A "template" header: code of one instantiation (APPLY_SPECIFIC names,
 * LI_NIDX), guarded by LI_FOLD_INSTANTIATED, which the including .c file
 * undefines at its end so that the next node of a module instantiates it
 * again.  Valid C99 and C++ on its own: without APPLY_SPECIFIC it
 * instantiates two index arrays.
 */
#ifndef LI_FOLD_INSTANTIATED
#define LI_FOLD_INSTANTIATED 1

#ifndef APPLY_SPECIFIC
#define APPLY_SPECIFIC(str) str##_standalone
#endif
#ifndef LI_NIDX
#define LI_NIDX 2
#endif

#include "common/scatter_checks.h"

/* An index value as 64 bits: sign-extended (signed dtypes) or zero-extended. */
#define LI_WIDEN(IS_SIGNED, v) ((IS_SIGNED) ? (npy_uint64)bc_as_i64((npy_int64)(v)) : bc_as_u64((npy_uint64)(v)))

/* Positions of a row folded per axis before the next axis is taken: the
 * block of flat rows stays in the L1 cache while every axis is folded in. */
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
        } else if (st == 0) { /* the same index along the row: read and checked once */        \
            const npy_uint64 r = LI_WIDEN(IS_SIGNED, *(const T *)p) + shift;                   \
            const npy_uint64 w = r >= ud ? r - ud : r;                                         \
            acc = r >= span;                                                                   \
            if (first)                                                                         \
                for (j = 0; j < len; j++)                                                      \
                    out[j] = w;                                                                \
            else                                                                               \
                for (j = 0; j < len; j++)                                                      \
                    out[j] = out[j] * ud + w;                                                  \
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

/* The index dtypes a node's arrays can have, one bit each in the order
 * int8, int16, int32, int64, uint8, uint16, uint32, uint64 (the Op defines
 * it from its inputs' types: the other dtypes' loops are not compiled). */
#ifndef LI_DTYPE_MASK
#define LI_DTYPE_MASK 0xff
#endif

/* The canonical dtype code of an integer index array: NPY_INT8 ... NPY_UINT64
 * by its size and signedness (an int64 array may also say NPY_LONGLONG). */
static inline int APPLY_SPECIFIC(li_type_code)(PyArrayObject *a)
{
    static const int sgn[9] = {0, NPY_INT8, NPY_INT16, 0, NPY_INT32, 0, 0, 0, NPY_INT64};
    static const int uns[9] = {0, NPY_UINT8, NPY_UINT16, 0, NPY_UINT32, 0, 0, 0, NPY_UINT64};
    const npy_intp size = PyArray_ITEMSIZE(a);
    if (size < 1 || size > 8)
        return NPY_UINT64;
    return PyArray_ISSIGNED(a) ? sgn[size] : uns[size];
}

/* Dispatch on the canonical index dtype `type` (one switch per block and
 * axis); a dtype outside LI_DTYPE_MASK does nothing (it cannot occur). */
#define LI_CASE(CODE, BIT, T, S, MACRO)                                                        \
    case CODE:                                                                                 \
        if (LI_DTYPE_MASK & (BIT))                                                             \
            MACRO(T, S);                                                                       \
        break;
#define LI_SWITCH(MACRO)                                                                       \
    switch (type) {                                                                            \
        LI_CASE(NPY_INT8, 1, npy_int8, 1, MACRO)                                               \
        LI_CASE(NPY_INT16, 2, npy_int16, 1, MACRO)                                             \
        LI_CASE(NPY_INT32, 4, npy_int32, 1, MACRO)                                             \
        LI_CASE(NPY_INT64, 8, npy_int64, 1, MACRO)                                             \
        LI_CASE(NPY_UINT8, 16, npy_uint8, 0, MACRO)                                            \
        LI_CASE(NPY_UINT16, 32, npy_uint16, 0, MACRO)                                          \
        LI_CASE(NPY_UINT32, 64, npy_uint32, 0, MACRO)                                          \
        LI_CASE(NPY_UINT64, 128, npy_uint64, 0, MACRO)                                         \
    default:                                                                                   \
        break;                                                                                 \
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

/* ---- the walk over B ---- */

/* Arrays walked: the LI_NIDX index arrays, then one of the caller's. */
#define LI_NWALK (LI_NIDX + 1)

#define LI_IDX APPLY_SPECIFIC(li_idx)
typedef struct {
    npy_int64 dims[LI_NIDX];              /* d_a */
    const char *data[LI_NWALK];           /* the arrays' data (the caller's may be NULL) */
    int type[LI_NIDX];                    /* the index arrays' dtypes */
    int nd;                               /* axes of the walk (B merged) */
    npy_intp shape[NPY_MAXDIMS];          /* ... their lengths; the last one is a row */
    npy_intp st[LI_NWALK][NPY_MAXDIMS];   /* byte strides along them (0: broadcast) */
    npy_intp total;                       /* prod(B): positions */
    npy_intp inner;                       /* positions of a row (1 when nd == 0) */
    int bnd;                              /* dimensions of B, before merging */
    npy_intp bshape[NPY_MAXDIMS];         /* B */
} LI_IDX;

/* Where a row starts: byte offsets of each array's element at its first
 * position, and the row's first position. */
#define LI_ROW APPLY_SPECIFIC(li_row)
typedef struct {
    npy_intp ctr[NPY_MAXDIMS];
    npy_intp off[LI_NWALK];
    npy_intp pos;
} LI_ROW;

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

/* Set up the walk over the index arrays ix[0..LI_NIDX) for axes of sizes
 * dims: TypeError for an index array that is not of an integer dtype,
 * IndexError BC_MSG_INDEX_BCAST for shapes that do not broadcast, MemoryError
 * BC_MSG_NO_MEMORY when prod(B) overflows.  The caller's array is unset
 * (li_walk_extra); li_merge then merges the axes.  Returns 0 or -1. */
static int APPLY_SPECIFIC(li_setup)(LI_IDX *w, PyArrayObject **ix, const npy_int64 *dims)
{
    int a, k;
    memset(w, 0, sizeof(*w));
    for (a = 0; a < LI_NIDX; a++) {
        if (!PyArray_ISINTEGER(ix[a])) {
            PyErr_SetString(PyExc_TypeError, "scatter: index arrays must have an integer dtype");
            return -1;
        }
        w->dims[a] = dims[a];
        w->data[a] = PyArray_BYTES(ix[a]);
        w->type[a] = APPLY_SPECIFIC(li_type_code)(ix[a]);
    }
    if (APPLY_SPECIFIC(li_broadcast)(ix, LI_NIDX, &w->bnd, w->bshape) != 0)
        return -1;
    w->total = 1;
    for (k = 0; k < w->bnd; k++) {
        if (w->bshape[k] == 0) {
            w->total = 0;
            break;
        }
        if (w->total > NPY_MAX_INTP / w->bshape[k]) {
            PyErr_Format(PyExc_MemoryError, BC_MSG_NO_MEMORY, (long long)NPY_MAX_INTP, 8LL);
            return -1;
        }
        w->total *= w->bshape[k];
    }
    w->nd = w->bnd;
    for (k = 0; k < w->bnd; k++)
        w->shape[k] = w->bshape[k];
    w->inner = w->total == 0 ? 0 : w->bnd > 0 ? w->bshape[w->bnd - 1] : 1; /* until li_merge */
    /* Broadcast strides: 0 along a missing or length-1 axis. */
    for (a = 0; a < LI_NIDX; a++) {
        const int lead = w->bnd - PyArray_NDIM(ix[a]);
        for (k = 0; k < w->bnd; k++)
            w->st[a][k] = (k < lead || PyArray_DIM(ix[a], k - lead) == 1)
                              ? 0
                              : PyArray_STRIDE(ix[a], k - lead);
    }
    return 0;
}

/* The caller's array (data, byte strides along B's bnd axes) walked along. */
static void APPLY_SPECIFIC(li_walk_extra)(LI_IDX *w, const char *data, const npy_intp *strides)
{
    int k;
    w->data[LI_NIDX] = data;
    for (k = 0; k < w->bnd; k++)
        w->st[LI_NIDX][k] = strides[k];
}

/* Merge the axes of the walk: drop those of length 1, then merge axis k
 * into axis k + 1 wherever every array steps through them evenly
 * (st[k] == st[k + 1] * shape[k + 1]).  Positions keep their C order. */
static void APPLY_SPECIFIC(li_merge)(LI_IDX *w)
{
    int a, k, nd = 0;
    if (w->total == 0) {
        w->nd = 0;
        w->inner = 0;
        return;
    }
    for (k = 0; k < w->bnd; k++) {
        if (w->bshape[k] == 1)
            continue;
        if (nd > 0) {
            int even = 1;
            for (a = 0; a < LI_NWALK; a++)
                even &= w->st[a][nd - 1] == w->st[a][k] * w->bshape[k];
            if (even) {
                w->shape[nd - 1] *= w->bshape[k];
                for (a = 0; a < LI_NWALK; a++)
                    w->st[a][nd - 1] = w->st[a][k];
                continue;
            }
        }
        w->shape[nd] = w->bshape[k];
        for (a = 0; a < LI_NWALK; a++)
            w->st[a][nd] = w->st[a][k];
        nd++;
    }
    w->nd = nd;
    w->inner = nd > 0 ? w->shape[nd - 1] : 1;
}

/* Byte stride of array a along a row. */
static inline npy_intp APPLY_SPECIFIC(li_row_stride)(const LI_IDX *w, int a)
{
    return w->nd > 0 ? w->st[a][w->nd - 1] : 0;
}

/* The first row (r->pos = 0; the walk must have positions). */
static void APPLY_SPECIFIC(li_first_row)(LI_ROW *r)
{
    memset(r, 0, sizeof(*r));
}

/* Move r to the next row; returns 0 after the last one. */
static int APPLY_SPECIFIC(li_next_row)(const LI_IDX *w, LI_ROW *r)
{
    int k, a;
    r->pos += w->inner;
    if (w->inner <= 0 || r->pos >= w->total)
        return 0;
    for (k = w->nd - 2; k >= 0; k--) {
        for (a = 0; a < LI_NWALK; a++)
            r->off[a] += w->st[a][k];
        if (++r->ctr[k] < w->shape[k])
            break;
        for (a = 0; a < LI_NWALK; a++)
            r->off[a] -= w->st[a][k] * w->shape[k];
        r->ctr[k] = 0;
    }
    return 1;
}

/* Fold positions [c0, c0 + len) of row r into out[0..len); 1 when an index
 * there is bad (out is then meaningless). */
static int APPLY_SPECIFIC(li_fold_row)(const LI_IDX *w, const LI_ROW *r, npy_intp c0,
                                       npy_intp len, npy_uint64 *out)
{
    int a, bad = 0;
    for (a = 0; a < LI_NIDX; a++) {
        const npy_intp s = APPLY_SPECIFIC(li_row_stride)(w, a);
        bad |= APPLY_SPECIFIC(li_fold)(w->type[a], w->data[a] + r->off[a] + c0 * s, s, len,
                                       w->dims[a], out, a == 0);
    }
    return bad;
}

/* Is any index of the walk bad?  A pass over B, a block at a time (the
 * check that comes before anything is written into a base in place). */
static int APPLY_SPECIFIC(li_any_bad)(const LI_IDX *w)
{
    npy_uint64 block[LI_BLOCK];
    LI_ROW r;
    if (w->total == 0)
        return 0;
    APPLY_SPECIFIC(li_first_row)(&r);
    do {
        npy_intp c0;
        for (c0 = 0; c0 < w->inner; c0 += LI_BLOCK) {
            const npy_intp len = w->inner - c0 < LI_BLOCK ? w->inner - c0 : LI_BLOCK;
            if (APPLY_SPECIFIC(li_fold_row)(w, &r, c0, len, block))
                return 1;
        }
    } while (APPLY_SPECIFIC(li_next_row)(w, &r));
    return 0;
}

/* Raise IndexError BC_MSG_AXIS_INDEX for the first bad index of the first
 * axis that has one, in C order of B, as numpy checks its index arrays one
 * after the other.  Returns -1 (a RuntimeError when none is bad). */
static int APPLY_SPECIFIC(li_raise_first_bad)(const LI_IDX *w)
{
    int a;
    for (a = 0; a < LI_NIDX && w->total > 0; a++) {
        const npy_intp s = APPLY_SPECIFIC(li_row_stride)(w, a);
        LI_ROW r;
        APPLY_SPECIFIC(li_first_row)(&r);
        do {
            char text[32];
            const npy_intp found = APPLY_SPECIFIC(li_find)(w->type[a], w->data[a] + r.off[a], s,
                                                           w->inner, w->dims[a], text,
                                                           sizeof(text));
            if (found >= 0) {
                PyErr_Format(PyExc_IndexError, BC_MSG_AXIS_INDEX, text, (long long)(r.pos + found),
                             (long long)a, (long long)w->dims[a]);
                return -1;
            }
        } while (APPLY_SPECIFIC(li_next_row)(w, &r));
    }
    PyErr_SetString(PyExc_RuntimeError, "scatter: internal error, no bad index found");
    return -1;
}

#endif /* LI_FOLD_INSTANTIATED */
