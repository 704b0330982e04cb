/*
 * cpu/scatter_add_check.h -- ScatterAdd's C code, part 1 of 3: what one
 * instantiation is (its types, the layout of a call, the tuning constants of
 * every part) and the check of the indices.
 *
 * Neighbours: cpu/scatter_add.c (the entry point, which includes the three
 * parts and describes the whole), cpu/scatter_add_loops.h (part 2: adding
 * rows on one thread), cpu/scatter_add_lanes.h (part 3: the split between
 * threads, on the pool of cpu/worker_pool.h), common/scatter_checks.h (the checks
 * of shapes shared with the GPU Op's host code).
 *
 * Index check.  Each index is checked with one unsigned compare (v + V < 2V,
 * which also catches negative ones).  In place, one pass over idx
 * (sa_first_bad, which vectorises) checks them all before any row is
 * written; into a fresh output (onto zeros, onto a copy of the base) they are
 * checked while the rows are added, and on a bad one the output is dropped
 * and the same serial scan names the first bad index, whatever the thread
 * count: one pass over idx fewer.
 *
 * Like the other parts it holds code of one instantiation (APPLY_SPECIFIC
 * names), so it has no include guard of its own: a guard macro keeps it to
 * once per instantiation, and cpu/scatter_add.c undefines that macro at its
 * end, so that the next node of the same module instantiates it again.
 * Compiled on its own (no APPLY_SPECIFIC defined) it instantiates float64
 * rows onto a copy of the base with int64 indices, which the test-suite uses
 * to check that each part stands alone; valid C99 and C++.
 */
#ifndef SA_CHECK_INSTANTIATED
#define SA_CHECK_INSTANTIATED 1

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

#include "common/scatter_checks.h"
#include "cpu/worker_pool.h"
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
#ifndef SA_ROWS_MIN_OUT_BYTES
#define SA_ROWS_MIN_OUT_BYTES (32 << 20) /* ... and out has this many bytes or more (else one thread) */
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
#ifndef SA_INC_AHEAD_ROWS
#define SA_INC_AHEAD_ROWS 16 /* the plain loop prefetches the increment rows this far ahead... */
#endif
#ifndef SA_INC_AHEAD_MIN_BYTES
#define SA_INC_AHEAD_MIN_BYTES 256 /* ... when a row has this many bytes or more */
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
#define SA_PREFETCH_ONCE(p) __builtin_prefetch((p), 0, 0) /* read once: no cache to keep it in */
#else
#define SA_RESTRICT
#define SA_PREFETCH_W(p) (void)(p)
#define SA_PREFETCH_ONCE(p) (void)(p)
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

#endif /* SA_CHECK_INSTANTIATED */
