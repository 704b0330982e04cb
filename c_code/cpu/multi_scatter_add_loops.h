/*
 * cpu/multi_scatter_add_loops.h -- MultiIndexScatterAdd's counting loops: the
 * scatter-adds of one integer value at every index (counts, such as a
 * confusion matrix or per-row histograms), whose sums are exact in any
 * order, so that they may be counted into private 32-bit histograms first.
 *
 * Neighbours: cpu/multi_scatter_add.c (the entry point, which chooses between
 * these loops and the general one, and describes the whole),
 * cpu/index_fold.h (the walk over the broadcast indices, their check and
 * fold), cpu/scatter_add_check.h (SA_CTX, the layout of out).
 *
 * Both loops count the positions of B into a private histogram of 32-bit
 * counters (half the cache footprint of 64-bit counts; fewer than 2**32
 * positions), then add count * value into out, in unsigned arithmetic of the
 * output's width (so int8 wraps as numpy's does):
 *
 *   mi_count_rows, per-row histograms: one index array varies along the rows
 *     of B (x in zeros((B, K))[arange(B)[:, None], x]); every other one is the
 *     same along a row, so a row adds into one stretch of out, d_a elements m
 *     rows apart.  A row is counted in groups of eight values, checked with
 *     one test, (v0 | ... | v7) < cap as unsigned, where cap is the power of
 *     two at or above d_a and the histogram has cap counters (a negative
 *     value is then huge); a group that fails goes value by value (a negative
 *     index wraps once; one outside [-d_a, d_a) is flagged).  Values in
 *     [d_a, cap) pass the test: their counters are looked at after the row.
 *     Bincount's loop of few bins (cpu/bincount_hist.h) checks its groups in
 *     the same way.  The other axes' indices are read and checked once per
 *     row.
 *   mi_count_flat, any other counts: the rows of a block of B are folded
 *     (li_fold_row) and counted into a histogram of all V rows of out.
 *
 * An index found bad stops the loop (return 1): the caller drops its fresh
 * output and scans for the index to name (li_raise_first_bad); these loops
 * run onto a base in place only after the whole check pass.
 *
 * Included once per instantiation (the guard is undefined at the end of
 * cpu/multi_scatter_add.c); valid C99 and C++ on its own.
 */
#ifndef MI_LOOPS_INSTANTIATED
#define MI_LOOPS_INSTANTIATED 1

#ifndef APPLY_SPECIFIC
#define APPLY_SPECIFIC(str) str##_standalone
#define DTYPE_OUTPUT_0 npy_int64
#define TYPENUM_OUTPUT_0 NPY_INT64
#define ITEMSIZE_OUTPUT_0 8
#define SA_ONTO_ZEROS 1
#define SA_INPLACE 0
#define SA_OUT_FLOAT 0
#define SA_IDX_SIGNED 0
#define SA_IDX_T npy_uint64
#endif

#include "cpu/index_fold.h"
#include "cpu/scatter_add_check.h"

/* Per-row histograms: at most this many counters (a power of two) ... */
#ifndef MI_ROW_MAX_BINS
#define MI_ROW_MAX_BINS (1 << 16)
#endif
/* ... and rows at least 1/MI_ROW_BINS_PER_VALUE as long as d_a (the
 * histogram is added into out after every row). */
#ifndef MI_ROW_BINS_PER_VALUE
#define MI_ROW_BINS_PER_VALUE 4
#endif
/* Positions folded at a time inside the scatter's loop: the block and the
 * index arrays' share of it stay in the L1 cache (4 KiB of int64 each). */
#ifndef MI_BLOCK
#define MI_BLOCK 64
#endif
/* While a block is added, the index arrays' next block is prefetched, a
 * cache line every eight positions, so that the next fold does not wait on
 * memory (the fold, then the adds: without it the two phases take turns). */
#ifndef MI_PREFETCH_AHEAD
#define MI_PREFETCH_AHEAD 512 /* positions ahead */
#endif
#if defined(__GNUC__)
#define MI_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define MI_PREFETCH(p) (void)(p)
#endif

/* Prefetch the cache lines of the index arrays at positions [c0, c0 + len)
 * of row r, position j of them (a multiple of 8). */
static inline void APPLY_SPECIFIC(mi_prefetch_at)(const LI_IDX *w, const LI_ROW *r, npy_intp pos)
{
    int a;
    for (a = 0; a < LI_NIDX; a++)
        MI_PREFETCH(w->data[a] + r->off[a] + pos * APPLY_SPECIFIC(li_row_stride)(w, a));
}

/* A histogram of all rows of out: at most this many counters (16 MiB), and
 * no more than the positions of B. */
#ifndef MI_FLAT_MAX_BINS
#define MI_FLAT_MAX_BINS (1 << 22)
#endif

/* out[r] += count * value (unsigned, the output's width), r at byte offset
 * r * step from seg; the counters are cleared. */
static void APPLY_SPECIFIC(mi_add_counts)(char *seg, npy_intp step, npy_uint32 *h, npy_intp n,
                                          SA_ACC_T value)
{
    npy_intp r;
    if (step == (npy_intp)sizeof(SA_ACC_T)) {
        SA_ACC_T *o = (SA_ACC_T *)seg;
        for (r = 0; r < n; r++)
            o[r] = (SA_ACC_T)(o[r] + (SA_ACC_T)((npy_uint64)h[r] * (npy_uint64)value));
    } else {
        for (r = 0; r < n; r++) {
            SA_ACC_T *o = (SA_ACC_T *)(seg + r * step);
            *o = (SA_ACC_T)(*o + (SA_ACC_T)((npy_uint64)h[r] * (npy_uint64)value));
        }
    }
    memset(h, 0, (size_t)n * sizeof(npy_uint32));
}

/* The fast groups of a row: from position j, eight contiguous values of
 * dtype T at a time while (v0 | ... | v7) < ucap as unsigned (a negative
 * value converts to a huge one); returns the position of the first group
 * that fails the test, or of the tail shorter than a group.  A function of
 * its own (not inlined), so that the eight values stay in registers. */
#if defined(__GNUC__)
#define MI_NOINLINE __attribute__((noinline))
#else
#define MI_NOINLINE
#endif
#define MI_DEFINE_FAST(T, NAME)                                                                \
    static MI_NOINLINE npy_intp APPLY_SPECIFIC(NAME)(const T *SA_RESTRICT q, npy_intp j,       \
                                                     npy_intp len,                             \
                                                     npy_uint32 *SA_RESTRICT h,                \
                                                     npy_uint64 ucap)                          \
    {                                                                                          \
        for (; j + 8 <= len; j += 8) {                                                         \
            const npy_uint64 v0 = (npy_uint64)q[j], v1 = (npy_uint64)q[j + 1];                 \
            const npy_uint64 v2 = (npy_uint64)q[j + 2], v3 = (npy_uint64)q[j + 3];             \
            const npy_uint64 v4 = (npy_uint64)q[j + 4], v5 = (npy_uint64)q[j + 5];             \
            const npy_uint64 v6 = (npy_uint64)q[j + 6], v7 = (npy_uint64)q[j + 7];             \
            if ((v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7) >= ucap)                               \
                break;                                                                         \
            h[v0]++;                                                                           \
            h[v1]++;                                                                           \
            h[v2]++;                                                                           \
            h[v3]++;                                                                           \
            h[v4]++;                                                                           \
            h[v5]++;                                                                           \
            h[v6]++;                                                                           \
            h[v7]++;                                                                           \
        }                                                                                      \
        return j;                                                                              \
    }
MI_DEFINE_FAST(npy_int8, mi_fast_i8)
MI_DEFINE_FAST(npy_int16, mi_fast_i16)
MI_DEFINE_FAST(npy_int32, mi_fast_i32)
MI_DEFINE_FAST(npy_int64, mi_fast_i64)
MI_DEFINE_FAST(npy_uint8, mi_fast_u8)
MI_DEFINE_FAST(npy_uint16, mi_fast_u16)
MI_DEFINE_FAST(npy_uint32, mi_fast_u32)
MI_DEFINE_FAST(npy_uint64, mi_fast_u64) /* those of dtypes outside LI_DTYPE_MASK are never called */

/* Count `len` values of dtype T (at p, byte stride st) into h, of `cap`
 * counters (a power of two at or above d): contiguous values through the
 * fast groups; the rest, and a group that fails, value by value (wrap a
 * negative one; flag one outside [-d, d) in acc, its count kept in range
 * with the mask). */
#define MI_ONE(LOAD_J)                                                                         \
    do {                                                                                       \
        const npy_uint64 r = (LOAD_J) + shift;                                                 \
        acc |= r >= span;                                                                      \
        h[(r >= ud ? r - ud : r) & mask]++;                                                    \
    } while (0)
#define MI_ROW_COUNT(T, IS_SIGNED, FAST)                                                       \
    do {                                                                                       \
        const npy_uint64 span = (IS_SIGNED ? 2 : 1) * ud, shift = IS_SIGNED ? ud : 0;           \
        npy_intp j = 0, stop;                                                                  \
        if (st == (npy_intp)sizeof(T)) {                                                       \
            const T *q = (const T *)p;                                                         \
            while (j < len) {                                                                  \
                j = APPLY_SPECIFIC(FAST)(q, j, len, h, ucap);                                  \
                stop = len - j < 8 ? len : j + 8; /* a group that failed, or the tail */       \
                for (; j < stop; j++)                                                          \
                    MI_ONE(LI_WIDEN(IS_SIGNED, q[j]));                                         \
            }                                                                                  \
        } else {                                                                               \
            for (; j < len; j++)                                                               \
                MI_ONE(LI_WIDEN(IS_SIGNED, *(const T *)(p + j * st)));                         \
        }                                                                                      \
    } while (0)

/* Count one row's values of index array of dtype `type` into h; 1 when a
 * value is outside [-d, d). */
static int APPLY_SPECIFIC(mi_row_count)(int type, const char *p, npy_intp st, npy_intp len,
                                        npy_int64 d, npy_uint32 *SA_RESTRICT h, npy_intp cap)
{
    const npy_uint64 ud = (npy_uint64)d, ucap = (npy_uint64)cap, mask = ucap - 1;
    npy_uint64 acc = 0;
    npy_intp k;
#define MI_CASE(CODE, BIT, T, S, FAST)                                                         \
    case CODE:                                                                                 \
        if (LI_DTYPE_MASK & (BIT))                                                             \
            MI_ROW_COUNT(T, S, FAST);                                                          \
        break;
    switch (type) {
        MI_CASE(NPY_INT8, 1, npy_int8, 1, mi_fast_i8)
        MI_CASE(NPY_INT16, 2, npy_int16, 1, mi_fast_i16)
        MI_CASE(NPY_INT32, 4, npy_int32, 1, mi_fast_i32)
        MI_CASE(NPY_INT64, 8, npy_int64, 1, mi_fast_i64)
        MI_CASE(NPY_UINT8, 16, npy_uint8, 0, mi_fast_u8)
        MI_CASE(NPY_UINT16, 32, npy_uint16, 0, mi_fast_u16)
        MI_CASE(NPY_UINT32, 64, npy_uint32, 0, mi_fast_u32)
        MI_CASE(NPY_UINT64, 128, npy_uint64, 0, mi_fast_u64)
    default:
        break;
    }
#undef MI_CASE
    for (k = d; k < cap; k++) /* values in [d, cap) passed the group test */
        acc |= h[k];
    return acc != 0;
}

/* The counters of a per-row histogram for axis `a` of size d, or 0 when the
 * loop does not suit the call (see the header). */
static npy_intp APPLY_SPECIFIC(mi_row_bins)(const LI_IDX *w, int a)
{
    const npy_int64 d = w->dims[a];
    npy_intp cap = 8;
    if (d <= 0 || d > MI_ROW_MAX_BINS || w->inner * MI_ROW_BINS_PER_VALUE < d ||
        w->inner > (npy_intp)0x7fffffff)
        return 0;
    while (cap < d)
        cap *= 2;
    return cap;
}

/* Per-row histograms of index array `a` (the only one that varies along a
 * row) into out (c: its layout, rows of one element), each position adding
 * `value`.  Returns 1 at a bad index, 0, or -1 when out of memory (nothing
 * written then). */
static int APPLY_SPECIFIC(mi_count_rows)(const SA_CTX *c, const LI_IDX *w, int a, npy_intp cap,
                                         SA_ACC_T value)
{
    const npy_intp st = APPLY_SPECIFIC(li_row_stride)(w, a);
    npy_uint32 *h = (npy_uint32 *)calloc((size_t)cap, sizeof(npy_uint32));
    npy_uint64 m = 1;
    LI_ROW r;
    int b, bad = 0;
    if (h == NULL)
        return -1;
    for (b = a + 1; b < LI_NIDX; b++)
        m *= (npy_uint64)w->dims[b];
    APPLY_SPECIFIC(li_first_row)(&r);
    do {
        /* The row's first element in out: every other axis's index, read and
         * checked once; axis a contributes 0. */
        npy_uint64 f = 0;
        for (b = 0; b < LI_NIDX && !bad; b++) {
            if (b == a)
                f *= (npy_uint64)w->dims[b];
            else
                bad = APPLY_SPECIFIC(li_fold)(w->type[b], w->data[b] + r.off[b], 0, 1,
                                              w->dims[b], &f, b == 0);
        }
        if (bad || APPLY_SPECIFIC(mi_row_count)(w->type[a], w->data[a] + r.off[a], st, w->inner,
                                                w->dims[a], h, cap)) {
            bad = 1;
            break;
        }
        APPLY_SPECIFIC(mi_add_counts)(c->out + (npy_intp)f * c->ostride, (npy_intp)m * c->ostride,
                                      h, (npy_intp)w->dims[a], value);
    } while (APPLY_SPECIFIC(li_next_row)(w, &r));
    free(h);
    return bad;
}

/* Whether mi_count_flat suits a call of V rows over `total` positions. */
static int APPLY_SPECIFIC(mi_flat_suits)(npy_intp nrows, npy_intp total)
{
    return nrows > 0 && nrows <= MI_FLAT_MAX_BINS && nrows <= total && total <= (npy_intp)0x7fffffff;
}

/* li_fold_row for int64 index arrays contiguous along the rows (NumPy's
 * default integers): every axis folded in one function, inlined, with no
 * dtype switch (the generic fold costs a call per axis and block).  Returns 1
 * when an index there is bad. */
static inline int APPLY_SPECIFIC(mi_fold_i64)(const LI_IDX *w, const LI_ROW *r, npy_intp c0,
                                              npy_intp len, npy_uint64 *SA_RESTRICT out)
{
    npy_uint64 acc = 0;
    npy_intp j;
    int a;
    for (a = 0; a < LI_NIDX; a++) {
        const npy_int64 *SA_RESTRICT q = (const npy_int64 *)(w->data[a] + r->off[a]) + c0;
        const npy_uint64 ud = (npy_uint64)w->dims[a], span = 2 * ud;
        if (a == 0) {
            for (j = 0; j < len; j++) {
                const npy_uint64 v = (npy_uint64)q[j] + ud;
                acc |= v >= span;
                out[j] = v >= ud ? v - ud : v;
            }
        } else {
            for (j = 0; j < len; j++) {
                const npy_uint64 v = (npy_uint64)q[j] + ud;
                acc |= v >= span;
                out[j] = out[j] * ud + (v >= ud ? v - ud : v);
            }
        }
    }
    return acc != 0;
}

/* Are the index arrays all int64, contiguous along the rows (mi_fold_i64)? */
static int APPLY_SPECIFIC(mi_all_i64)(const LI_IDX *w)
{
    int a, yes = 1;
    for (a = 0; a < LI_NIDX; a++)
        yes &= w->type[a] == NPY_INT64 && APPLY_SPECIFIC(li_row_stride)(w, a) == (npy_intp)sizeof(npy_int64);
    return yes;
}

/* Fold positions [c0, c0 + len) of row r into out: mi_fold_i64 where it
 * applies (i64), else li_fold_row.  1 when an index there is bad. */
static inline int APPLY_SPECIFIC(mi_fold)(const LI_IDX *w, const LI_ROW *r, npy_intp c0,
                                          npy_intp len, npy_uint64 *out, int i64)
{
    return i64 ? APPLY_SPECIFIC(mi_fold_i64)(w, r, c0, len, out)
               : APPLY_SPECIFIC(li_fold_row)(w, r, c0, len, out);
}

/* Counts into a histogram of all V rows of out, a folded block of B at a
 * time, then count * value added into out.  Returns 1 at a bad index, 0, or
 * -1 when out of memory (nothing written then). */
static int APPLY_SPECIFIC(mi_count_flat)(const SA_CTX *c, const LI_IDX *w, SA_ACC_T value)
{
    npy_uint32 *h = (npy_uint32 *)calloc((size_t)c->nrows, sizeof(npy_uint32));
    npy_uint64 block[MI_BLOCK];
    LI_ROW r;
    const int i64 = APPLY_SPECIFIC(mi_all_i64)(w);
    int bad = 0;
    if (h == NULL)
        return -1;
    APPLY_SPECIFIC(li_first_row)(&r);
    do {
        npy_intp c0, j;
        for (c0 = 0; c0 < w->inner && !bad; c0 += MI_BLOCK) {
            const npy_intp len = w->inner - c0 < MI_BLOCK ? w->inner - c0 : MI_BLOCK;
            bad = APPLY_SPECIFIC(mi_fold)(w, &r, c0, len, block, i64);
            if (bad)
                break;
            for (j = 0; j + 8 <= len; j += 8) {
                int k;
                APPLY_SPECIFIC(mi_prefetch_at)(w, &r, c0 + MI_PREFETCH_AHEAD + j);
                for (k = 0; k < 8; k++)
                    h[block[j + k]]++;
            }
            for (; j < len; j++)
                h[block[j]]++;
        }
    } while (!bad && APPLY_SPECIFIC(li_next_row)(w, &r));
    if (!bad)
        APPLY_SPECIFIC(mi_add_counts)(c->out, c->ostride, h, c->nrows, value);
    free(h);
    return bad;
}

#undef MI_DEFINE_FAST
#undef MI_ONE
#undef MI_ROW_COUNT
#undef MI_NOINLINE
#undef MI_PREFETCH

#endif /* MI_LOOPS_INSTANTIATED */
