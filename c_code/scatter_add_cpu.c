/*
 * scatter_add_cpu.c -- the C implementation of ScatterAdd, the scatter-add of
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
 * Algorithm.  Each index is checked with one unsigned compare (v + V < 2V,
 * which also catches negative ones).  In place, one pass over idx checks them
 * all (it vectorises) before any row is written; into a fresh output (onto
 * zeros, onto a copy of the base) they are checked while the rows are added,
 * and on a bad one the output is dropped and a serial scan names the first
 * bad index, whatever the thread count: one pass over idx fewer.
 *
 * A row of contiguous increments onto a contiguous output row is added with
 * vector loads and adds (32-byte vectors, gcc's vector extensions).  In the
 * plain case (contiguous rows of 1, 2, 4, 8, 16, 32 or 64 elements, one
 * thread or one chunk of idx, nothing to prefetch) a loop of its own takes
 * four indices at a time, checked with one test, with the row length a
 * constant; other lengths get the general loop.  Increments broadcast along
 * the row (one value per index) add that value; other layouts (a strided or
 * transposed increment, a base that is not C-contiguous, in place) go
 * through a strided loop over the row's dimensions: the slower path.  When
 * out is larger than a last-level cache (SA_PREFETCH_MIN_BYTES), such as a
 * large table updated in place, the row of out that an index about
 * SA_PREFETCH_BYTES ahead names is prefetched, all its cache lines, which
 * hides much of the latency of its random rows (below that size, measured,
 * the prefetches cost more than they saved).
 *
 * With OpenMP (openmp=True gives the thread count, omp_get_max_threads), and
 * when the work is large enough (SA_OMP_MIN_WORK), two ways to split it
 * without atomics.  Both cut idx into blocks of about SA_TASK_BYTES of
 * increments and the work into lanes, one per thread, each of which gets
 * its blocks in index order, one at a time (a lock per lane); the tasks run
 * on the worker pool that Bincount uses (bincount_pool.h, one pool per
 * process), a block each: the calling thread claims tasks itself, so a call
 * never waits on a worker that has not started (on busy cores it does the
 * work alone), only for a block in progress; after a stall (a worker
 * preempted in the middle of a block) calls run the serial loop for a while.
 *   by row, when rows are wide (SA_ROWS_MIN_BYTES): a lane is an owner of
 *     rows of out, blocks of SA_ROWS_BLOCK rows dealt out in turn (so that
 *     the hot rows of a skewed index, such as the first rows of a
 *     vocabulary sorted by frequency, are shared out); it walks every block
 *     of idx and adds the rows it owns.  Reading idx once per owner costs
 *     little against wide rows, and nothing else is read or written twice.
 *     Each row receives its increments in index order, so the result is the
 *     serial one, bit for bit.
 *   by thread (privatized rows), for narrow rows: two runs of the pool.
 *     First the blocks of idx, dealt out in turn to the lanes: lane 0 adds
 *     into out, lane t into private copy t - 1 of out (starting at 0, or -0.0
 *     for floats).  Then, unless a bad index was met, the copies are added
 *     into out in copy order, a task per block of rows (SA_MERGE_BYTES).
 *     Chosen when the copies are small against the increments
 *     (SA_PRIVATE_MAX_FRACTION), below SA_PRIVATE_MAX_BYTES, and idx has two
 *     blocks or more.  Float sums then depend on the thread count (fixed for
 *     a given count, whichever thread ran which block).
 * Both cost more than the serial loop when one thread runs all their tasks,
 * so a call takes them only when the pool would share them out
 * (bc_pool_threaded), except the split by thread of float sums, whose
 * rounding it fixes (see sa_run).
 * Otherwise one thread adds everything, in index order.
 *
 * The code is valid C99 and C++ (Aesara compiles it with g++).  Compiled on
 * its own (no APPLY_SPECIFIC defined) it instantiates float64 rows onto a
 * copy of the base with int64 indices, which the test-suite uses to check that
 * the file stands alone.
 */

#ifndef APPLY_SPECIFIC
#define SA_STANDALONE 1
#define APPLY_SPECIFIC(str) str##_standalone
#define DTYPE_INPUT_0 npy_float64
#define DTYPE_INPUT_1 npy_float64
#define DTYPE_INPUT_2 npy_int64
#define DTYPE_OUTPUT_0 npy_float64
#define TYPENUM_OUTPUT_0 NPY_FLOAT64
#define ITEMSIZE_OUTPUT_0 8
#define SA_ONTO_ZEROS 0
#define SA_INPLACE 0
#define SA_OUT_FLOAT 1
#define SA_IDX_SIGNED 1
#endif

#include "scatter_add_common.h"
#include "bincount_pool.h"
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- tuning constants ---- */
#ifndef SA_OMP_MIN_WORK
#define SA_OMP_MIN_WORK (1 << 16) /* elements added (N * row) below which one thread does all */
#endif
#ifndef SA_PRIVATE_MAX_FRACTION
#define SA_PRIVATE_MAX_FRACTION 4 /* private copies at most 1/4 of the increments' bytes */
#endif
#ifndef SA_PRIVATE_MAX_BYTES
#define SA_PRIVATE_MAX_BYTES (256LL << 20) /* ... and at most this many bytes in all */
#endif
#ifndef SA_ROWS_MIN_BYTES
#define SA_ROWS_MIN_BYTES 256 /* split by row when a row has this many bytes or more */
#endif
#ifndef SA_ROWS_BLOCK
#define SA_ROWS_BLOCK 8 /* ... dealing out blocks of this many rows in turn */
#endif
#ifndef SA_PREFETCH_BYTES
#define SA_PREFETCH_BYTES 2048 /* prefetch rows of out this many bytes ahead... */
#endif
#ifndef SA_PREFETCH_ROWS_MIN
#define SA_PREFETCH_ROWS_MIN 4 /* ... and between this many */
#endif
#ifndef SA_PREFETCH_ROWS_MAX
#define SA_PREFETCH_ROWS_MAX 32 /* ... and this many rows ahead */
#endif
#ifndef SA_PREFETCH_MIN_BYTES
#define SA_PREFETCH_MIN_BYTES (32 << 20) /* ... when out has this many bytes or more */
#endif
#ifndef SA_PREFETCH_MAX_LINES
#define SA_PREFETCH_MAX_LINES 16 /* ... at most this many cache lines of it */
#endif
#ifndef SA_TASK_BYTES
#define SA_TASK_BYTES (128 << 10) /* bytes of increments per task (a block of idx) of a threaded split */
#endif
#ifndef SA_MERGE_BYTES
#define SA_MERGE_BYTES 16384 /* bytes of out per task when the private copies are added in */
#endif
#define SA_CHECK_BLOCK 4096 /* indices checked between looks at the result */

#if defined(__GNUC__)
#define SA_RESTRICT __restrict__
#define SA_PREFETCH_W(p) __builtin_prefetch((p), 1, 3)
#else
#define SA_RESTRICT
#define SA_PREFETCH_W(p) (void)(p)
#endif

/* ---- types of this instantiation ---- */
#define SA_IDX_T DTYPE_INPUT_2 /* SA_IDX_SIGNED says whether it is signed */

/* Accumulator: the output float type, or the unsigned integer of the output's
 * width (so that integer sums wrap as the output dtype does, without UB; an
 * unsigned lvalue may alias its signed counterpart). */
#if SA_OUT_FLOAT
#define SA_ACC_T DTYPE_OUTPUT_0
#elif ITEMSIZE_OUTPUT_0 == 1
#define SA_ACC_T npy_uint8
#elif ITEMSIZE_OUTPUT_0 == 2
#define SA_ACC_T npy_uint16
#elif ITEMSIZE_OUTPUT_0 == 4
#define SA_ACC_T npy_uint32
#else
#define SA_ACC_T npy_uint64
#endif

/* Layouts of an increment row (the broadcast view of inc, row i). */
#define SA_INC_CONTIG 0  /* the row's elements are contiguous */
#define SA_INC_SCALAR 1  /* one value for the whole row (all row strides 0) */
#define SA_INC_STRIDED 2 /* anything else */

#define SA_CTX APPLY_SPECIFIC(sa_ctx)
typedef struct {
    char *out;                  /* data of out */
    npy_intp nrows;             /* V */
    npy_intp rowlen;            /* elements per row: prod(rest) */
    npy_intp ostride;           /* bytes between rows of out */
    int out_contig;             /* rows of out are contiguous */
    const char *inc;            /* data of the increments */
    npy_intp istride;           /* bytes between increment rows (0: broadcast) */
    int inc_kind;               /* SA_INC_* */
    int rest_ndim;              /* dimensions of a row, and their sizes and strides */
    npy_intp rest_dims[NPY_MAXDIMS];
    npy_intp rest_ostrides[NPY_MAXDIMS];
    npy_intp rest_istrides[NPY_MAXDIMS];
    const SA_IDX_T *idx;        /* contiguous indices */
    npy_intp n;                 /* N */
    int check;                  /* check each index while adding (else checked already) */
    int prefetch_lines;         /* cache lines of a row of out to prefetch (0: none) */
    npy_intp prefetch_ahead;    /* ... for the index this many places ahead */
} SA_CTX;

/* The row of index value v (checked to lie in [-V, V)). */
static inline npy_intp APPLY_SPECIFIC(sa_row)(SA_IDX_T v, npy_intp nrows)
{
#if SA_IDX_SIGNED
    const npy_intp r = (npy_intp)v;
    return r < 0 ? r + nrows : r;
#else
    (void)nrows;
    return (npy_intp)v;
#endif
}

/* Is the index value v outside [-V, V)?  One unsigned compare: v + V must
 * lie in [0, 2V) (computed modulo 2**64, which also catches the extremes). */
static inline int APPLY_SPECIFIC(sa_is_bad)(SA_IDX_T v, npy_intp nrows)
{
#if SA_IDX_SIGNED
    return (npy_uint64)bc_as_i64((npy_int64)v) + (npy_uint64)nrows >= 2 * (npy_uint64)nrows;
#else
    return bc_as_u64((npy_uint64)v) >= (npy_uint64)nrows;
#endif
}

/* Position of the first index outside [-V, V), or -1 when all are in range. */
static npy_intp APPLY_SPECIFIC(sa_first_bad)(const SA_IDX_T *SA_RESTRICT idx, npy_intp n,
                                            npy_intp nrows)
{
    npy_intp lo, i;
    for (lo = 0; lo < n; lo += SA_CHECK_BLOCK) {
        const npy_intp hi = lo + SA_CHECK_BLOCK < n ? lo + SA_CHECK_BLOCK : n;
        int bad = 0;
        for (i = lo; i < hi; i++)
            bad |= APPLY_SPECIFIC(sa_is_bad)(idx[i], nrows);
        if (bad) {
            for (i = lo; i < hi; i++)
                if (APPLY_SPECIFIC(sa_is_bad)(idx[i], nrows))
                    return i;
        }
    }
    return -1;
}

/* Raise the IndexError of the first index outside [-V, V), if any: returns
 * -1 then, else 0. */
static int APPLY_SPECIFIC(sa_raise_first_bad)(const SA_CTX *c, npy_intp nrows)
{
    const npy_intp bad = APPLY_SPECIFIC(sa_first_bad)(c->idx, c->n, nrows);
    if (bad < 0)
        return 0;
    {
        const SA_IDX_T v = c->idx[bad];
        return sa_raise_index(SA_IDX_SIGNED, (npy_int64)v, (npy_uint64)v, bad, nrows);
    }
}

/* Which of `parts` parts owns row r when rows are split between threads:
 * blocks of SA_ROWS_BLOCK rows are dealt out in turn, so that the hot rows
 * of a skewed index (the first ones of a vocabulary sorted by frequency) do
 * not all fall to one thread. */
static inline int APPLY_SPECIFIC(sa_owner)(npy_intp r, int parts)
{
    const npy_intp block = r / SA_ROWS_BLOCK;
    return (int)((parts & (parts - 1)) == 0 ? (block & (parts - 1)) : (block % parts));
}

/* Prefetch, for writing, the first `lines` cache lines of the row of dst that
 * the index value v names, if it is a valid index of a row of part `part`. */
static inline void APPLY_SPECIFIC(sa_prefetch)(char *dst, npy_intp dstride, SA_IDX_T v,
                                               npy_intp nrows, int lines, int part, int parts)
{
    npy_intp r;
    int l;
    if (APPLY_SPECIFIC(sa_is_bad)(v, nrows))
        return;
    r = APPLY_SPECIFIC(sa_row)(v, nrows);
    if (parts > 1 && APPLY_SPECIFIC(sa_owner)(r, parts) != part)
        return;
    for (l = 0; l < lines; l++)
        SA_PREFETCH_W(dst + r * dstride + 64 * l);
}

/* ---- adding one row ---- */

/* Vectors of SA_VEC_BYTES bytes (gcc's vector extensions; memcpy loads and
 * stores them unaligned, as one instruction each).  gcc's auto-vectoriser
 * left some of the fixed-length loops below scalar once inlined, so the
 * vectors are written out. */
#if defined(__GNUC__)
#define SA_VEC_BYTES 32
#define SA_VEC_T APPLY_SPECIFIC(sa_vec)
#define SA_VLEN ((npy_intp)(SA_VEC_BYTES / sizeof(SA_ACC_T)))
typedef SA_ACC_T SA_VEC_T __attribute__((vector_size(SA_VEC_BYTES)));
#endif

/* o[0..len) += g[0..len), both contiguous. */
static inline void APPLY_SPECIFIC(sa_add_contig)(SA_ACC_T *SA_RESTRICT o,
                                                 const SA_ACC_T *SA_RESTRICT g, npy_intp len)
{
    npy_intp k = 0;
#ifdef SA_VEC_T
    for (; k + SA_VLEN <= len; k += SA_VLEN) {
        SA_VEC_T a, b;
        memcpy(&a, o + k, sizeof(a));
        memcpy(&b, g + k, sizeof(b));
        a += b;
        memcpy(o + k, &a, sizeof(a));
    }
#endif
    for (; k < len; k++)
        o[k] += g[k];
}

/* o[0..len) += s, o contiguous. */
static inline void APPLY_SPECIFIC(sa_add_scalar)(SA_ACC_T *SA_RESTRICT o, SA_ACC_T s, npy_intp len)
{
    npy_intp k = 0;
#ifdef SA_VEC_T
    SA_VEC_T b;
    for (k = 0; k < SA_VLEN; k++)
        b[k] = s;
    for (k = 0; k + SA_VLEN <= len; k += SA_VLEN) {
        SA_VEC_T a;
        memcpy(&a, o + k, sizeof(a));
        a += b;
        memcpy(o + k, &a, sizeof(a));
    }
#endif
    for (; k < len; k++)
        o[k] += s;
}

/* The row at o (byte strides os) += the row at g (byte strides gs), over
 * the row's dimensions; any strides, 0 included. */
static void APPLY_SPECIFIC(sa_add_strided)(const SA_CTX *c, char *o, const npy_intp *os,
                                           const char *g, const npy_intp *gs)
{
    npy_intp ctr[NPY_MAXDIMS];
    const int nd = c->rest_ndim;
    const npy_intp *dims = c->rest_dims;
    int k;
    npy_intp j;
    if (nd == 0) {
        *(SA_ACC_T *)o += *(const SA_ACC_T *)g;
        return;
    }
    if (c->rowlen == 0)
        return;
    for (k = 0; k < nd; k++)
        ctr[k] = 0;
    for (;;) {
        /* The innermost dimension in one loop. */
        const npy_intp osk = os[nd - 1], gsk = gs[nd - 1];
        for (j = 0; j < dims[nd - 1]; j++)
            *(SA_ACC_T *)(o + j * osk) += *(const SA_ACC_T *)(g + j * gsk);
        /* Advance the counter of the outer dimensions. */
        for (k = nd - 2; k >= 0; k--) {
            o += os[k];
            g += gs[k];
            if (++ctr[k] < dims[k])
                break;
            o -= os[k] * dims[k];
            g -= gs[k] * dims[k];
            ctr[k] = 0;
        }
        if (k < 0)
            return;
    }
}

/*
 * Add the increment rows i in [lo, hi) whose row v belongs to part `part` of
 * `parts` (sa_owner; all rows when parts is 1) into
 * dst, whose rows are dstride bytes apart; `contig` says whether dst's rows
 * are contiguous (else they have out's strides).  With c->check, stop and
 * return 1 at an index outside [-V, V) (the caller then discards its fresh
 * output); else return 0.
 */
#define SA_LOOP(ROW_ADD)                                                              \
    for (i = lo; i < hi; i++) {                                                       \
        const SA_IDX_T raw = idx[i];                                                  \
        npy_intp v;                                                                   \
        if (check && APPLY_SPECIFIC(sa_is_bad)(raw, nrows))                           \
            return 1;                                                                 \
        v = APPLY_SPECIFIC(sa_row)(raw, nrows);                                       \
        if (lines && i + ahead < hi)                                                  \
            APPLY_SPECIFIC(sa_prefetch)(dst, dstride, idx[i + ahead], nrows, lines, part, \
                                        parts);                                       \
        if (parts > 1 && APPLY_SPECIFIC(sa_owner)(v, parts) != part)                  \
            continue;                                                                 \
        ROW_ADD;                                                                      \
    }

#define SA_FIXED_LOOP(LEN)                                                            \
    SA_LOOP(APPLY_SPECIFIC(sa_add_contig)((SA_ACC_T *)(dst + v * dstride),            \
                                          (const SA_ACC_T *)(inc + i * istride), LEN))

/*
 * The plain case, with less work per row: rows of `len` contiguous elements
 * in dst (`len` a constant where the function is inlined), increments
 * contiguous rows or one row for all (gstep 1 or 0), nothing to prefetch or
 * filter.  Four indices at a time, checked with one test.  Returns 1 at a
 * bad index (with check).
 */
static inline int APPLY_SPECIFIC(sa_accumulate_plain)(SA_ACC_T *SA_RESTRICT out,
                                                      const SA_ACC_T *SA_RESTRICT g,
                                                      npy_intp gstep,
                                                      const SA_IDX_T *SA_RESTRICT idx,
                                                      npy_intp lo, npy_intp hi, npy_intp nrows,
                                                      int check, npy_intp len)
{
    const npy_intp gs = gstep * len;
    npy_intp i = lo;
    for (; i + 4 <= hi; i += 4) {
        const SA_IDX_T a = idx[i], b = idx[i + 1], d = idx[i + 2], e = idx[i + 3];
        if (check && (APPLY_SPECIFIC(sa_is_bad)(a, nrows) | APPLY_SPECIFIC(sa_is_bad)(b, nrows) |
                      APPLY_SPECIFIC(sa_is_bad)(d, nrows) | APPLY_SPECIFIC(sa_is_bad)(e, nrows)))
            return 1;
        APPLY_SPECIFIC(sa_add_contig)(out + APPLY_SPECIFIC(sa_row)(a, nrows) * len, g + i * gs, len);
        APPLY_SPECIFIC(sa_add_contig)(out + APPLY_SPECIFIC(sa_row)(b, nrows) * len, g + (i + 1) * gs,
                                      len);
        APPLY_SPECIFIC(sa_add_contig)(out + APPLY_SPECIFIC(sa_row)(d, nrows) * len, g + (i + 2) * gs,
                                      len);
        APPLY_SPECIFIC(sa_add_contig)(out + APPLY_SPECIFIC(sa_row)(e, nrows) * len, g + (i + 3) * gs,
                                      len);
    }
    for (; i < hi; i++) {
        if (check && APPLY_SPECIFIC(sa_is_bad)(idx[i], nrows))
            return 1;
        APPLY_SPECIFIC(sa_add_contig)(out + APPLY_SPECIFIC(sa_row)(idx[i], nrows) * len, g + i * gs,
                                      len);
    }
    return 0;
}

static int APPLY_SPECIFIC(sa_accumulate)(const SA_CTX *c, char *dst, npy_intp dstride,
                                         int contig, npy_intp lo, npy_intp hi, int part,
                                         int parts)
{
    const SA_IDX_T *SA_RESTRICT idx = c->idx;
    const char *inc = c->inc;
    const npy_intp nrows = c->nrows, istride = c->istride, len = c->rowlen;
    const int check = c->check, lines = c->prefetch_lines;
    const npy_intp ahead = c->prefetch_ahead;
    npy_intp i;
    if (contig && c->inc_kind == SA_INC_CONTIG && !lines && parts == 1 &&
        dstride == len * (npy_intp)sizeof(SA_ACC_T) &&
        (istride == 0 || istride == len * (npy_intp)sizeof(SA_ACC_T))) {
        SA_ACC_T *o = (SA_ACC_T *)dst;
        const SA_ACC_T *g = (const SA_ACC_T *)inc;
        const npy_intp gstep = istride ? 1 : 0;
        switch (len) {
        case 1:
            return APPLY_SPECIFIC(sa_accumulate_plain)(o, g, gstep, idx, lo, hi, nrows, check, 1);
        case 2:
            return APPLY_SPECIFIC(sa_accumulate_plain)(o, g, gstep, idx, lo, hi, nrows, check, 2);
        case 4:
            return APPLY_SPECIFIC(sa_accumulate_plain)(o, g, gstep, idx, lo, hi, nrows, check, 4);
        case 8:
            return APPLY_SPECIFIC(sa_accumulate_plain)(o, g, gstep, idx, lo, hi, nrows, check, 8);
        case 16:
            return APPLY_SPECIFIC(sa_accumulate_plain)(o, g, gstep, idx, lo, hi, nrows, check, 16);
        case 32:
            return APPLY_SPECIFIC(sa_accumulate_plain)(o, g, gstep, idx, lo, hi, nrows, check, 32);
        case 64:
            return APPLY_SPECIFIC(sa_accumulate_plain)(o, g, gstep, idx, lo, hi, nrows, check, 64);
        default:
            break; /* other lengths: the general loop below */
        }
    }
    if (contig && c->inc_kind == SA_INC_CONTIG) {
        /* Rows of a length known at compile time get loops of their own:
         * gcc then adds a row with a few vector instructions, no loop. */
        switch (len) {
        case 1:
            SA_LOOP(*(SA_ACC_T *)(dst + v * dstride) += *(const SA_ACC_T *)(inc + i * istride))
            break;
        case 2:
            SA_FIXED_LOOP(2)
            break;
        case 4:
            SA_FIXED_LOOP(4)
            break;
        case 8:
            SA_FIXED_LOOP(8)
            break;
        case 16:
            SA_FIXED_LOOP(16)
            break;
        case 32:
            SA_FIXED_LOOP(32)
            break;
        default:
            SA_FIXED_LOOP(len)
            break;
        }
    } else if (contig && c->inc_kind == SA_INC_SCALAR) {
        SA_LOOP(APPLY_SPECIFIC(sa_add_scalar)((SA_ACC_T *)(dst + v * dstride),
                                              *(const SA_ACC_T *)(inc + i * istride), len))
    } else {
        npy_intp cstrides[NPY_MAXDIMS];
        const npy_intp *os = c->rest_ostrides;
        int k;
        if (contig) {
            /* A private copy: C-contiguous rows. */
            npy_intp s = (npy_intp)sizeof(SA_ACC_T);
            for (k = c->rest_ndim - 1; k >= 0; k--) {
                cstrides[k] = s;
                s *= c->rest_dims[k];
            }
            os = cstrides;
        }
        SA_LOOP(APPLY_SPECIFIC(sa_add_strided)(c, dst + v * dstride, os, inc + i * istride,
                                               c->rest_istrides))
    }
    return 0;
}

#undef SA_FIXED_LOOP
#undef SA_LOOP

/* ---- the strategies ---- */

/* Threads for a call (1: the calling thread adds everything). */
static int APPLY_SPECIFIC(sa_threads)(const SA_CTX *c)
{
#ifdef _OPENMP
    const double work = (double)c->n * (double)(c->rowlen ? c->rowlen : 1);
    int nt;
    if (work < (double)SA_OMP_MIN_WORK || omp_in_parallel())
        return 1;
    nt = omp_get_max_threads();
    if (nt < 2)
        return 1;
    if ((double)nt * SA_OMP_MIN_WORK / 2 > work)
        nt = (int)(2 * work / SA_OMP_MIN_WORK);
    return nt < 1 ? 1 : nt > BC_POOL_MAX_PARTS ? BC_POOL_MAX_PARTS : nt;
#else
    (void)c;
    return 1;
#endif
}

/* A threaded call: its strategy's data, shared by its tasks (bincount_pool.h
 * runs them on the calling thread and on the pool's workers).  Both splits
 * cut idx into blocks of `block` indices and the work into lanes: a lane is
 * a private copy of out (by thread; lane 0 is out itself) or an owner of
 * rows (by row), which receives its blocks in index order, one at a time.
 * Each task of the pool runs one block: the next one of a lane that no
 * other thread holds (a lock per lane), the thread's own lane first.  So a
 * lane's sums come out the same whichever threads ran its blocks, and a
 * thread waits only when every lane with blocks left is held by another
 * thread, for the block in progress there: as with the pool itself, a call
 * never waits on a worker that has not started, only on one that the
 * operating system preempted in the middle of a block (a stall, which the
 * call reports to the pool: calls then run on one thread for a while). */
#define SA_JOB APPLY_SPECIFIC(sa_job)
typedef struct {
    const SA_CTX *c;
    int parts;           /* lanes */
    npy_intp block;      /* indices of a block of idx */
    npy_intp nblocks;    /* blocks of idx */
    npy_intp *lanes;     /* per lane, SA_LANE_STRIDE apart: blocks started, lock */
    SA_ACC_T *priv;      /* by thread: parts - 1 private copies of out (NULL: by row) */
    npy_intp copy;       /* ... of this many elements each */
    npy_intp merge_rows; /* ... added into out this many rows per task */
    int bad;             /* atomic: a block met a bad index (c->check only) */
    int stalled;         /* atomic: a thread waited over BC_POOL_STALL_NS for a lane */
} SA_JOB;

/* The state of a lane, one cache line from the next lane's. */
#define SA_LANE_STRIDE ((npy_intp)(64 / sizeof(npy_intp)))

/* Blocks of lane `lane`: by thread, blocks lane, lane + parts, ...; by row,
 * every block. */
static npy_intp APPLY_SPECIFIC(sa_lane_blocks)(const SA_JOB *j, int lane)
{
    if (j->priv == NULL)
        return j->nblocks;
    return (j->nblocks - lane + j->parts - 1) / j->parts;
}

/* By thread, block `step` of lane `lane`: block step * parts + lane of idx
 * into out (lane 0) or into private copy lane - 1, which the lane's first
 * block fills with the additive identity: 0, or -0.0 for floats (x + -0.0 is
 * x for every x, -0.0 included, where x + 0.0 would turn a -0.0 of the base
 * into 0.0).  A block always goes into the same array, after the same
 * blocks, so float sums depend on the thread count only. */
static void APPLY_SPECIFIC(sa_chunk_block)(SA_JOB *j, int lane, npy_intp step)
{
    const SA_CTX *c = j->c;
    const npy_intp lo = (step * j->parts + lane) * j->block;
    const npy_intp hi = c->n - lo < j->block ? c->n : lo + j->block;
    int found;
    if (lane == 0) {
        found = APPLY_SPECIFIC(sa_accumulate)(c, c->out, c->ostride, 1, lo, hi, 0, 1);
    } else {
        SA_ACC_T *p = j->priv + (npy_intp)(lane - 1) * j->copy;
        if (step == 0) {
            /* The copy is filled by the thread that first adds into it, so
             * that its pages sit near that thread. */
#if SA_OUT_FLOAT
            npy_intp r;
            for (r = 0; r < j->copy; r++)
                p[r] = (SA_ACC_T)-0.0;
#else
            memset(p, 0, (size_t)j->copy * sizeof(SA_ACC_T));
#endif
        }
        found = APPLY_SPECIFIC(sa_accumulate)(c, (char *)p,
                                              c->rowlen * (npy_intp)sizeof(SA_ACC_T), 1, lo, hi,
                                              0, 1);
    }
    if (found)
        __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

/* By row, block `step` of lane `lane`: block step of idx, adding the
 * increments of the rows that owner `lane` owns (sa_owner). */
static void APPLY_SPECIFIC(sa_rows_block)(SA_JOB *j, int lane, npy_intp step)
{
    const SA_CTX *c = j->c;
    const npy_intp lo = step * j->block;
    const npy_intp hi = c->n - lo < j->block ? c->n : lo + j->block;
    if (APPLY_SPECIFIC(sa_accumulate)(c, c->out, c->ostride, c->out_contig, lo, hi, lane,
                                      j->parts))
        __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

/* A task: run the next block of a lane that no other thread holds: of the
 * lane that has started the fewest blocks (the thread's own lane first among
 * equals).  A thread alone then runs block b of every lane before block
 * b + 1 of any: by row, the owners' passes over a block of idx and its
 * increments follow each other while these are in the cache; by thread, idx
 * is read in order. */
static void APPLY_SPECIFIC(sa_lane_task)(void *arg, int part, npy_intp task)
{
    SA_JOB *j = (SA_JOB *)arg;
    long long start = 0;
    int k = 0;
    (void)task;
    for (;;) {
        int i, best = -1;
        npy_intp best_step = 0;
        for (i = 0; i < j->parts; i++) {
            const int lane = (part + i) % j->parts;
            const npy_intp *st = j->lanes + (npy_intp)lane * SA_LANE_STRIDE;
            const npy_intp s = __atomic_load_n(&st[0], __ATOMIC_ACQUIRE);
            if (s >= APPLY_SPECIFIC(sa_lane_blocks)(j, lane) ||
                __atomic_load_n(&st[1], __ATOMIC_RELAXED))
                continue; /* done, or held by another thread */
            if (best < 0 || s < best_step) {
                best = lane;
                best_step = s;
            }
        }
        if (best >= 0) {
            npy_intp *st = j->lanes + (npy_intp)best * SA_LANE_STRIDE;
            npy_intp unlocked = 0, step;
            const npy_intp nb = APPLY_SPECIFIC(sa_lane_blocks)(j, best);
            if (!__atomic_compare_exchange_n(&st[1], &unlocked, 1, 0, __ATOMIC_ACQUIRE,
                                             __ATOMIC_RELAXED))
                continue; /* another thread took it first: look again */
            if (start != 0 && bc_now_ns() - start > BC_POOL_STALL_NS)
                __atomic_store_n(&j->stalled, 1, __ATOMIC_RELAXED);
            step = st[0];
            if (step < nb) {
                __atomic_store_n(&st[0], step + 1, __ATOMIC_RELEASE);
                if (__atomic_load_n(&j->bad, __ATOMIC_RELAXED))
                    ; /* a bad index: out is dropped, the copies are not merged */
                else if (j->priv != NULL)
                    APPLY_SPECIFIC(sa_chunk_block)(j, best, step);
                else
                    APPLY_SPECIFIC(sa_rows_block)(j, best, step);
            }
            __atomic_store_n(&st[1], 0, __ATOMIC_RELEASE);
            if (step < nb)
                return;
            continue; /* the lane ran out meanwhile: look again */
        }
        /* Every lane with blocks left is held by another thread (there are
         * as many tasks as blocks: one is left for this task): wait. */
        if (start == 0)
            start = bc_now_ns();
        if (++k & 255 || bc_now_ns() - start < BC_POOL_SPIN_NS / 4)
            bc_cpu_relax();
        else
            sched_yield(); /* the holder may need this core */
    }
}

/* Run the blocks of every lane (parts, block, nblocks, priv must be set), then
 * tell the pool of a stall that the tasks saw.  0, or -1 when out of memory
 * (nothing has been run then). */
static int APPLY_SPECIFIC(sa_run_lanes)(SA_JOB *j, int nt)
{
    npy_intp ntasks = 0;
    int lane;
    j->lanes = (npy_intp *)calloc((size_t)j->parts * (size_t)SA_LANE_STRIDE, sizeof(npy_intp));
    if (j->lanes == NULL)
        return -1;
    for (lane = 0; lane < j->parts; lane++)
        ntasks += APPLY_SPECIFIC(sa_lane_blocks)(j, lane);
    bc_pool_run(nt, ntasks, APPLY_SPECIFIC(sa_lane_task), j);
    if (__atomic_load_n(&j->stalled, __ATOMIC_RELAXED))
        bc_pool_stalled();
    free(j->lanes);
    j->lanes = NULL;
    return 0;
}

/* By thread, merge task t: rows [t * merge_rows, ...) of every copy, in copy
 * order, into out. */
static void APPLY_SPECIFIC(sa_merge_task)(void *arg, int part, npy_intp t)
{
    SA_JOB *j = (SA_JOB *)arg;
    const SA_CTX *c = j->c;
    const npy_intp r0 = t * j->merge_rows;
    const npy_intp r1 = c->nrows - r0 < j->merge_rows ? c->nrows : r0 + j->merge_rows;
    npy_intp r;
    int k;
    (void)part;
    for (k = 0; k < j->parts - 1; k++) {
        const SA_ACC_T *p = j->priv + (npy_intp)k * j->copy;
        for (r = r0; r < r1; r++)
            APPLY_SPECIFIC(sa_add_contig)((SA_ACC_T *)(c->out + r * c->ostride),
                                          p + r * c->rowlen, c->rowlen);
    }
}

/* By thread (privatized rows): two runs of the pool, the blocks of idx into
 * their lanes (sa_chunk_block), then, unless a bad index was met, the
 * copies into out by blocks of rows (sa_merge_task).  Needs 2 blocks or
 * more.  Returns -1 when out of memory (nothing has been written then), else
 * 0; *bad is set when a bad index was met. */
static int APPLY_SPECIFIC(sa_run_private)(const SA_CTX *c, int nt, npy_intp block, int *bad)
{
    const npy_intp rowbytes = c->rowlen * (npy_intp)sizeof(SA_ACC_T);
    SA_JOB j;
    size_t bytes;
    memset(&j, 0, sizeof(j));
    j.c = c;
    j.block = block;
    j.nblocks = (c->n + block - 1) / block;
    j.parts = (npy_intp)nt < j.nblocks ? nt : (int)j.nblocks;
    j.copy = c->nrows * c->rowlen;
    bytes = (size_t)(j.parts - 1) * (size_t)j.copy * sizeof(SA_ACC_T);
    j.priv = (SA_ACC_T *)malloc(bytes ? bytes : 1);
    if (j.priv == NULL)
        return -1;
    bc_advise_huge_pages(j.priv, bytes);
    if (APPLY_SPECIFIC(sa_run_lanes)(&j, nt) != 0) {
        free(j.priv);
        return -1;
    }
    *bad = __atomic_load_n(&j.bad, __ATOMIC_RELAXED);
    j.merge_rows = SA_MERGE_BYTES / rowbytes;
    if (j.merge_rows < 1)
        j.merge_rows = 1;
    if (!*bad)
        bc_pool_run(nt, (c->nrows + j.merge_rows - 1) / j.merge_rows,
                    APPLY_SPECIFIC(sa_merge_task), &j);
    free(j.priv);
    return 0;
}

/* By row: one pool run over the blocks of idx of every owner of rows.
 * Returns 1 when a bad index was met, 0, or -1 when out of memory (nothing
 * has been written then). */
static int APPLY_SPECIFIC(sa_run_rows)(const SA_CTX *c, int nt, npy_intp block)
{
    SA_JOB j;
    memset(&j, 0, sizeof(j));
    j.c = c;
    j.parts = nt;
    j.block = block;
    j.nblocks = (c->n + block - 1) / block;
    if (APPLY_SPECIFIC(sa_run_lanes)(&j, nt) != 0)
        return -1;
    return __atomic_load_n(&j.bad, __ATOMIC_RELAXED);
}

/* Add everything; returns 1 when a bad index was met (c->check only).  Run
 * on one thread, both threaded plans cost more than the serial loop (copies
 * to fill and merge, or idx read once per owner), so while the pool would
 * not share them out (bc_pool_threaded: it backs off after a stall) the
 * call takes the serial loop, which gives the same result: the split by row
 * adds in index order, and integer sums are exact.  Float sums split by
 * thread are not the serial ones: they keep that split (run on one thread
 * then), so that they depend on the thread count only, never on the load of
 * the machine. */
static int APPLY_SPECIFIC(sa_run)(const SA_CTX *c)
{
    const int nt = APPLY_SPECIFIC(sa_threads)(c);
    int bad = 0;
    if (nt > 1) {
        const npy_intp rowbytes = c->rowlen * (npy_intp)sizeof(SA_ACC_T);
        const double inc_bytes = (double)c->n * (double)rowbytes;
        const double priv_bytes = (double)(nt - 1) * (double)c->nrows * (double)rowbytes;
        const npy_intp block = SA_TASK_BYTES / rowbytes > 0 ? SA_TASK_BYTES / rowbytes : 1;
        const int by_row = rowbytes >= SA_ROWS_MIN_BYTES && c->nrows >= (npy_intp)nt * SA_ROWS_BLOCK;
        const int by_thread = !by_row && c->out_contig && c->n > block &&
                              priv_bytes * SA_PRIVATE_MAX_FRACTION <= inc_bytes &&
                              priv_bytes <= (double)SA_PRIVATE_MAX_BYTES;
        if (by_row && bc_pool_threaded()) {
            bad = APPLY_SPECIFIC(sa_run_rows)(c, nt, block);
            if (bad >= 0)
                return bad;
        }
        if (by_thread && (SA_OUT_FLOAT || bc_pool_threaded()) &&
            APPLY_SPECIFIC(sa_run_private)(c, nt, block, &bad) == 0)
            return bad;
    }
    return APPLY_SPECIFIC(sa_accumulate)(c, c->out, c->ostride, c->out_contig, 0, c->n, 0, 1);
}

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
#elif SA_INPLACE
    if (PyArray_FailUnlessWriteable(base, "the base of an in-place scatter-add") < 0)
        goto fail;
    Py_INCREF(base);
    res = base;
#else
    res = (PyArrayObject *)PyArray_NewCopy(base, NPY_CORDER);
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
