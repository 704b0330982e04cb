/*
 * cpu/scatter_add_loops.h -- ScatterAdd's C code, part 2 of 3: adding the
 * increment rows of a range of idx on one thread.
 *
 * Neighbours: cpu/scatter_add_check.h (part 1: the types, the constants, the
 * index check), cpu/scatter_add_lanes.h (part 3: which thread adds which
 * range), cpu/scatter_add.c (the entry point and the overview).
 *
 * A row of contiguous increments onto a contiguous output row is added with
 * vector loads and adds (32-byte vectors, gcc's vector extensions).  In the
 * plain case (contiguous rows of 1, 2, 4, 8, 16, 32 or 64 elements, one
 * thread or one chunk of idx, no rows of out to prefetch) a loop of its own takes
 * four indices at a time, checked with one test, with the row length a
 * constant, and prefetches the increment rows SA_INC_AHEAD_ROWS ahead when
 * they are SA_INC_AHEAD_MIN_BYTES wide or more (see sa_accumulate_plain);
 * other lengths get the general loop.  Increments broadcast along
 * the row (one value per index) add that value; other layouts (a strided or
 * transposed increment, a base that is not C-contiguous, in place) go
 * through a strided loop over the row's dimensions: the slower path.  When
 * out is larger than a last-level cache (SA_PREFETCH_MIN_BYTES), such as a
 * large table updated in place, the row of out that an index about
 * SA_PREFETCH_BYTES ahead names is prefetched, all its cache lines, which
 * hides much of the latency of its random rows (below that size, measured,
 * the prefetches cost more than they saved).  The loops can skip the rows
 * that another owner adds (sa_owner), for the split by row of part 3.
 *
 * Included once per instantiation (see cpu/scatter_add_check.h); valid C99
 * and C++ on its own.
 */
#ifndef SA_LOOPS_INSTANTIATED
#define SA_LOOPS_INSTANTIATED 1

#include "cpu/scatter_add_check.h"

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
 * contiguous rows or one row for all (gstep 1 or 0), no rows of dst to
 * prefetch or filter.  Four indices at a time, checked with one test.  Rows
 * of increments of SA_INC_AHEAD_MIN_BYTES or more are prefetched
 * SA_INC_AHEAD_ROWS rows ahead, with the hint for data read once: the
 * hardware prefetcher alone fell behind the stream of increments between
 * the random rows of dst.  (N, V, D) = (1e5, 1e4, 64) took 2.2-2.6 ms
 * without (float64; 0.77-0.85 ms float32), 1.5-1.7 ms with (0.76-0.83 ms),
 * against the numba loop's 2.0-2.2 ms (1.0 ms) and one read of the
 * increments and indices, 1.5 ms (0.78 ms): thread CPU time, interleaved
 * call by call, 2-core AMD EPYC, load average 0.7-0.9.  Distance 8 measured
 * slightly slower for float32, the hint that keeps the lines in every cache
 * the same.  Returns 1 at a bad index (with check).
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
        if (len * (npy_intp)sizeof(SA_ACC_T) >= SA_INC_AHEAD_MIN_BYTES && gstep &&
            i + SA_INC_AHEAD_ROWS + 4 <= hi) {
            /* The four increment rows SA_INC_AHEAD_ROWS ahead, every line. */
            const char *p = (const char *)(g + (i + SA_INC_AHEAD_ROWS) * gs);
            npy_intp l;
            for (l = 0; l < 4 * len * (npy_intp)sizeof(SA_ACC_T); l += 64)
                SA_PREFETCH_ONCE(p + l);
        }
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
        /* One call per row length the compiler knows (its loop unrolled). */
#define SA_PLAIN_CASE(L)                                                                      \
    case L:                                                                                   \
        return APPLY_SPECIFIC(sa_accumulate_plain)(o, g, gstep, idx, lo, hi, nrows, check, L)
        switch (len) {
            SA_PLAIN_CASE(1);
            SA_PLAIN_CASE(2);
            SA_PLAIN_CASE(4);
            SA_PLAIN_CASE(8);
            SA_PLAIN_CASE(16);
            SA_PLAIN_CASE(32);
            SA_PLAIN_CASE(64);
        default:
            break; /* other lengths: the general loop below */
        }
#undef SA_PLAIN_CASE
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

#endif /* SA_LOOPS_INSTANTIATED */
