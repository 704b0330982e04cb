/*
 * cpu/multi_scatter_add.c -- the C implementation of MultiIndexScatterAdd
 * (aesara_bincount_core/multi_scatter_add.py): the scatter-add of rows with
 * several integer index arrays in one pass, the index arithmetic inside the
 * scatter's loop.
 *
 * Entry point (called from the Op's one-line c_code glue, with LI_NIDX index
 * arrays after `dims`, then the address of the output):
 *
 *   int APPLY_SPECIFIC(cpu_multi_scatter_add)(PyArrayObject *base, PyArrayObject *inc,
 *                                             PyArrayObject *dims, ...);
 *   ... = PyArrayObject *idx_0, ..., idx_{LI_NIDX-1}, PyArrayObject **out
 *
 * It computes what ScatterAdd(base, inc, LinearIndex(dims, idx_0, ...).flat)
 * computes, without the array of flat rows:
 *
 *   out = base; out[flat(p)] += inc[p] for every position p of B,
 *
 * where base has shape (V, *rest), V = d_0 * ... * d_{K-1} (dims), the index
 * arrays broadcast to the shape B, flat(p) is the flat row of
 * cpu/index_fold.h (each axis's negative index wrapped once), and inc
 * broadcasts, NumPy style, to (*B, *rest).  Duplicate rows accumulate in C
 * order of B, as numpy's np.add.at does.
 *
 * Errors, in the order of the unfused graph (return -1 with the exception
 * set; *out unchanged): IndexError BC_MSG_INDEX_BCAST (index shapes),
 * IndexError BC_MSG_AXIS_INDEX (the first bad index of the first axis that
 * has one), ValueError BC_MSG_ROWS_BCAST (increments), the shape errors of
 * common/scatter_checks.h, IndexError BC_MSG_ROW_INDEX when V is not
 * prod(dims) and a flat row falls outside [0, V).  In place (SA_INPLACE) every
 * index is checked before anything is written, so a failed call leaves the
 * base as it was; into a fresh output (onto zeros, onto a copy) they are
 * checked while they are added, and on a bad one the output is dropped.
 *
 * Plans, chosen per call:
 *   counts (an integer output, rows of one element, one value for every
 *     position): the loops of cpu/multi_scatter_add_loops.h, per-row histograms
 *     (mi_count_rows) or one histogram of out's rows (mi_count_flat);
 *   otherwise, the rows of B a block of MI_BLOCK positions at a time: the
 *     block folded into flat rows in the L1 cache (li_fold_row), then added
 *     by ScatterAdd's own loop (sa_accumulate, cpu/scatter_add_loops.h: rows
 *     of any rank, vector adds, strided increments), in C order of B, so
 *     float sums are numpy's, bit for bit;
 *   with threads (openmp, work above SA_OMP_MIN_WORK, increments one stride
 *     along all of B) or V other than prod(dims): the flat rows of all of B
 *     in a buffer, then ScatterAdd's plans of cpu/scatter_add_lanes.h (sa_run:
 *     by row, by thread), as the unfused graph runs.
 *
 * Neighbours: cpu/index_fold.h (the walk over B, the check, the fold and
 * the error of a bad index, shared with LinearIndex), cpu/scatter_add_check.h,
 * _loops.h and _lanes.h (ScatterAdd's layout, loops and threads, included
 * with SA_IDX_T npy_uint64: the rows are folded, so in range), and
 * cpu/multi_scatter_add_loops.h (the counting loops).
 *
 * Valid C99 and C++ on its own; compiled on its own (no APPLY_SPECIFIC) it
 * instantiates int64 counts onto zeros with two index arrays.
 */
#ifndef APPLY_SPECIFIC
#define APPLY_SPECIFIC(str) str##_standalone
#define LI_NIDX 2
#define DTYPE_OUTPUT_0 npy_int64
#define TYPENUM_OUTPUT_0 NPY_INT64
#define ITEMSIZE_OUTPUT_0 8
#define SA_ONTO_ZEROS 1
#define SA_INPLACE 0
#define SA_OUT_FLOAT 0
#endif
#define SA_IDX_T npy_uint64
#define SA_IDX_SIGNED 0

#include "cpu/index_fold.h"
#include "cpu/scatter_add_check.h"
#include "cpu/scatter_add_loops.h"
#include "cpu/scatter_add_lanes.h"
#include "cpu/multi_scatter_add_loops.h"
#include <stdarg.h>

/* The general plan: the rows of B a block at a time, folded, then added by
 * sa_accumulate in C order of B.  Returns 1 at a bad index, else 0. */
static int APPLY_SPECIFIC(mi_add_blocks)(SA_CTX *c, const LI_IDX *w)
{
    npy_uint64 block[MI_BLOCK];
    const char *inc0 = c->inc;
    const npy_intp ist = APPLY_SPECIFIC(li_row_stride)(w, LI_NIDX);
    const int i64 = APPLY_SPECIFIC(mi_all_i64)(w);
    LI_ROW r;
    c->check = 0; /* the rows are folded, so in range */
    c->istride = ist;
    c->idx = block;
    APPLY_SPECIFIC(li_first_row)(&r);
    do {
        npy_intp c0, j;
        for (c0 = 0; c0 < w->inner; c0 += MI_BLOCK) {
            const npy_intp len = w->inner - c0 < MI_BLOCK ? w->inner - c0 : MI_BLOCK;
            if (APPLY_SPECIFIC(mi_fold)(w, &r, c0, len, block, i64))
                return 1;
            if (c->rowlen == 0)
                continue;
            for (j = 0; j < len; j += 8)
                APPLY_SPECIFIC(mi_prefetch_at)(w, &r, c0 + MI_PREFETCH_AHEAD + j);
            c->n = len;
            c->inc = inc0 + r.off[LI_NIDX] + c0 * ist;
            APPLY_SPECIFIC(sa_accumulate)(c, c->out, c->ostride, c->out_contig, 0, len, 0, 1);
        }
    } while (APPLY_SPECIFIC(li_next_row)(w, &r));
    return 0;
}

/* All flat rows of B into a buffer (*flat, malloc'd); 1 at a bad axis index,
 * -1 out of memory, 0. */
static int APPLY_SPECIFIC(mi_fold_all)(const LI_IDX *w, npy_uint64 **flat)
{
    npy_uint64 *f = (npy_uint64 *)malloc((size_t)(w->total > 0 ? w->total : 1) * sizeof(npy_uint64));
    LI_ROW r;
    *flat = f;
    if (f == NULL)
        return -1;
    if (w->total == 0)
        return 0;
    APPLY_SPECIFIC(li_first_row)(&r);
    do {
        npy_intp c0;
        for (c0 = 0; c0 < w->inner; c0 += LI_BLOCK) {
            const npy_intp len = w->inner - c0 < LI_BLOCK ? w->inner - c0 : LI_BLOCK;
            if (APPLY_SPECIFIC(li_fold_row)(w, &r, c0, len, f + r.pos + c0))
                return 1;
        }
    } while (APPLY_SPECIFIC(li_next_row)(w, &r));
    return 0;
}

/* The increments' single byte stride along all of B (positions in C order),
 * or -1 when they have none. */
static npy_intp APPLY_SPECIFIC(mi_flat_inc_stride)(const LI_IDX *w)
{
    int k, all_zero = 1;
    for (k = 0; k < w->nd; k++)
        all_zero &= w->st[LI_NIDX][k] == 0;
    if (all_zero)
        return 0;
    return w->nd == 1 ? w->st[LI_NIDX][0] : -1;
}

/* The counting plan that suits the call: 1 per-row histograms of axis *a
 * (*cap counters), 2 one histogram of out's rows, 0 none. */
static int APPLY_SPECIFIC(mi_count_plan)(const SA_CTX *c, const LI_IDX *w, int *a, npy_intp *cap)
{
    int b, varying = 0;
    if (SA_OUT_FLOAT || c->rowlen != 1 || APPLY_SPECIFIC(mi_flat_inc_stride)(w) != 0 || w->total == 0)
        return 0;
    for (b = 0; b < LI_NIDX; b++) {
        if (APPLY_SPECIFIC(li_row_stride)(w, b) != 0) {
            varying++;
            *a = b;
        }
    }
    if (varying == 1 && (*cap = APPLY_SPECIFIC(mi_row_bins)(w, *a)) > 0)
        return 1;
    return APPLY_SPECIFIC(mi_flat_suits)(c->nrows, w->total) ? 2 : 0;
}

/* Add everything into c->out (laid out).  Returns 0, 1 at a bad axis index,
 * 2 at a flat row outside [0, V) (*bad_pos, *bad_row; only when V is not
 * prod(dims), found before anything is written), -1 out of memory. */
static int APPLY_SPECIFIC(mi_run)(SA_CTX *c, const LI_IDX *w, int mismatch, npy_intp *bad_pos,
                                  npy_uint64 *bad_row)
{
    const npy_intp ist = APPLY_SPECIFIC(mi_flat_inc_stride)(w);
    npy_intp cap = 0;
    int a = 0, plan, rc;
    if (w->total == 0)
        return 0;
    c->n = w->total;
    if (mismatch || (ist >= 0 && APPLY_SPECIFIC(sa_threads)(c) > 1)) {
        npy_uint64 *flat = NULL;
        rc = APPLY_SPECIFIC(mi_fold_all)(w, &flat);
        if (rc == 0 && mismatch && (*bad_pos = APPLY_SPECIFIC(sa_first_bad)(flat, w->total, c->nrows)) >= 0) {
            *bad_row = flat[*bad_pos];
            rc = 2;
        } else if (rc == 0 && ist >= 0) {
            c->idx = flat;
            c->istride = ist;
            c->check = 0;
            if (c->rowlen > 0)
                APPLY_SPECIFIC(sa_run)(c);
        } else if (rc == 0) {
            rc = APPLY_SPECIFIC(mi_add_blocks)(c, w);
        }
        free(flat);
        return rc;
    }
    plan = APPLY_SPECIFIC(mi_count_plan)(c, w, &a, &cap);
    if (plan != 0) {
        const SA_ACC_T value = *(const SA_ACC_T *)c->inc;
        rc = plan == 1 ? APPLY_SPECIFIC(mi_count_rows)(c, w, a, cap, value)
                       : APPLY_SPECIFIC(mi_count_flat)(c, w, value);
        if (rc >= 0)
            return rc;
        /* out of memory for the counters: the general plan */
    }
    return APPLY_SPECIFIC(mi_add_blocks)(c, w);
}

int APPLY_SPECIFIC(cpu_multi_scatter_add)(PyArrayObject *base, PyArrayObject *inc_in,
                                          PyArrayObject *dims_in, ...)
{
    SA_CTX ctx;
    LI_IDX w;
    PyArrayObject *ix[LI_NIDX], **out, *res = NULL;
    npy_intp dims[NPY_MAXDIMS], target[2 * NPY_MAXDIMS], bstrides[2 * NPY_MAXDIMS];
    npy_intp rows[NPY_MAXDIMS], bad_pos = -1, one = LI_NIDX;
    npy_int64 axes[LI_NIDX];
    npy_uint64 prod = 1, bad_row = 0;
    int ndim, k, a, tnd, mismatch = 0, rc;
    va_list ap;

    va_start(ap, dims_in);
    for (a = 0; a < LI_NIDX; a++)
        ix[a] = va_arg(ap, PyArrayObject *);
    out = va_arg(ap, PyArrayObject **);
    va_end(ap);
    memset(&ctx, 0, sizeof(ctx));

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
    if (bc_check_ndim(dims_in, 1, "the sizes of the indexed axes") != 0)
        return -1;
    if (PyArray_TYPE(dims_in) != NPY_INT64 || PyArray_DIM(dims_in, 0) != one) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "the sizes of the indexed axes", 1, 1);
        return -1;
    }
    for (a = 0; a < LI_NIDX; a++) {
        axes[a] = *(const npy_int64 *)PyArray_GETPTR1(dims_in, a);
        if (axes[a] < 0 || (axes[a] > 0 && prod > NPY_MAX_INT64 / (npy_uint64)axes[a]))
            mismatch = 1;
        else
            prod *= (npy_uint64)axes[a];
    }
    mismatch |= prod != (npy_uint64)dims[0];
    if (APPLY_SPECIFIC(li_setup)(&w, ix, axes) != 0)
        return -1;

    /* The increments, broadcast to (*B, *rest); a bad index is reported
     * first, as the unfused graph does. */
    tnd = w.bnd + ndim - 1;
    for (k = 0; k < w.bnd; k++)
        target[k] = w.bshape[k];
    for (k = 1; k < ndim; k++)
        target[w.bnd + k - 1] = dims[k];
    if (tnd > NPY_MAXDIMS ||
        sa_broadcast_increments(PyArray_NDIM(inc_in), PyArray_DIMS(inc_in), PyArray_STRIDES(inc_in),
                                tnd, target, bstrides) != 0) {
        PyObject *type, *value, *trace;
        if (tnd > NPY_MAXDIMS)
            PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "the indexed increments", NPY_MAXDIMS, tnd);
        PyErr_Fetch(&type, &value, &trace);
        if (APPLY_SPECIFIC(li_any_bad)(&w)) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(trace);
            return APPLY_SPECIFIC(li_raise_first_bad)(&w);
        }
        PyErr_Restore(type, value, trace);
        return -1;
    }
    APPLY_SPECIFIC(li_walk_extra)(&w, PyArray_BYTES(inc_in), bstrides);
    APPLY_SPECIFIC(li_merge)(&w);

    /* In place, every index is checked before anything is written. */
    if (SA_INPLACE && APPLY_SPECIFIC(li_any_bad)(&w))
        return APPLY_SPECIFIC(li_raise_first_bad)(&w);

#if SA_ONTO_ZEROS
    {
        PyArray_Descr *descr = PyArray_DescrFromType(TYPENUM_OUTPUT_0);
        if (descr == NULL)
            return -1;
        res = (PyArrayObject *)PyArray_Zeros(ndim, dims, descr, 0); /* steals descr */
        if (res == NULL)
            return -1;
        bc_advise_huge_pages(PyArray_DATA(res), (size_t)PyArray_NBYTES(res));
    }
#else
    res = sa_output_of_base(base, SA_INPLACE, "the base of an in-place scatter-add");
    if (res == NULL)
        return -1;
#endif

    /* Out's rows, and the increments' strides along a row of the walk and
     * along out's row. */
    rows[0] = APPLY_SPECIFIC(li_row_stride)(&w, LI_NIDX);
    for (k = 1; k < ndim; k++)
        rows[k] = bstrides[w.bnd + k - 1];
    APPLY_SPECIFIC(sa_layout)(&ctx, res, rows);
    ctx.inc = PyArray_BYTES(inc_in);

    rc = APPLY_SPECIFIC(mi_run)(&ctx, &w, mismatch, &bad_pos, &bad_row);
    if (rc == 0) {
        Py_XDECREF(*out);
        *out = res;
        return 0;
    }
    Py_DECREF(res); /* a fresh output, or a base left as it was */
    if (rc == 1)
        APPLY_SPECIFIC(li_raise_first_bad)(&w);
    else if (rc == 2)
        sa_raise_index(0, 0, bad_row, bad_pos, dims[0]);
    else if (!PyErr_Occurred())
        PyErr_NoMemory();
    return -1;
}

#undef LI_FOLD_INSTANTIATED
#undef LI_IDX
#undef LI_ROW
#undef LI_NWALK
#undef MI_LOOPS_INSTANTIATED
#undef SA_IDX_T
#undef SA_IDX_SIGNED
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
