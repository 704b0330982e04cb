/*
 * cpu/fused_bincount_loops.h -- the per-instantiation part of the C loop of
 * aesara_bincount_core.fused.FusedBincount: the defaults of the macros the Op
 * generates, the tuning constants, the private histogram and the call
 * context, the counting loops (the slow path, a task; the fast groups of
 * eight are in cpu/fused_bincount_fast.h, which this file includes), the
 * serial scan that raises the error, and the weight of a broadcast weight.
 * Neighbours: cpu/fused_bincount.c (the driver, which #includes this file,
 * documents the generated macros and the errors, and merges the
 * histograms), common/host_helpers.h (messages, range test, allocation),
 * cpu/worker_pool.h (the worker pool), cpu/plan.h (the CPU plan).
 *
 * Algorithm: x is cut into tasks that the calling thread and the pool's
 * workers claim (cpu/worker_pool.h).  A task goes through its slice in groups
 * of eight: it computes the eight values of x (into registers), checks them
 * with one test, (v0 | ... | v7) < capacity as unsigned (a negative value is
 * then huge), tracks their maximum, and adds them.  An x that is an input
 * of 8 bytes is tested on vector loads of the group (two of AVX2, or one of
 * AVX-512 where the CPU plan says BC_PLAN_AVX512_TEST: a vector OR and
 * test, and a vector maximum), and read again element by element for the
 * addresses, as in cpu/bincount_weighted.h.
 * The weights go one of two ways, which the CPU plan chooses
 * (cpu/plan.h, BC_PLAN_SCALAR_WEIGHTS):
 *   - vectors (the default, where the weights have a vector form: stored
 *     float weights, or a graph of +, -, *, / and negation of float64
 *     values, which the Op generates as BC_FUSED_WV with GCC's vector
 *     types): the eight weights of a group are read, or computed, as two
 *     vectors of 32 bytes (one for float32), and each is taken out of its
 *     lane as it is added.  Each vector operation is the IEEE operation of
 *     the scalar code on every lane, so the weights are the same bits;
 *   - scalars: each weight is computed by the scalar code as it is added
 *     (every other graph, and the plan's alternative).
 * Where the loop is bound by its loads and stores (1000 bins fit in the L1
 * cache), the vectors save a load an element for each input array of the
 * weights (th * v: x, v, the bin and its store, against x, the bin and its
 * store plus an eighth of a load and a shuffle).  (Blocks of computed
 * values in a buffer on the stack, with a vectorised elementwise loop,
 * measured 1.6x slower than the scalars for th * v: the buffer's stores and
 * loads cost more than the vector multiplies save.)  A group that fails the
 * test goes element by element: wrap a negative index (scatter-add form),
 * grow the histogram (bincount form), or stop with a range error.  Private
 * histograms are as in cpu/bincount.c: one per
 * thread for exact sums, one per task for float sums (summed in task order:
 * the same rounding on every call for a given thread count).  A histogram
 * that would need more bins than N / (2 x histograms) (at least 4096) makes
 * the call start again on one thread, with one histogram that grows as
 * needed.
 *
 * A "template" header, as bincount_cpu_*.h: code of one instantiation, named
 * through APPLY_SPECIFIC, guarded by BC_FUSED_LOOPS_DONE, which the driver
 * undefines at its end with every other per-instantiation macro.  So it must
 * not be listed in the Op's c_sources (those are included at the top of the
 * module); the Op hashes it through the driver's include closure.
 *
 * Valid C99 and C++ on its own: without the Op's macros it instantiates the
 * default (x = in0 + in1, weights = in3 * in4, float64 bincount).
 */
#ifndef BC_FUSED_LOOPS_DONE
#define BC_FUSED_LOOPS_DONE 1

#ifndef APPLY_SPECIFIC
#define BC_STANDALONE 1
#define APPLY_SPECIFIC(str) str##_standalone
#define DTYPE_OUTPUT_0 npy_float64
#define TYPENUM_OUTPUT_0 NPY_FLOAT64
#define ITEMSIZE_OUTPUT_0 8
#define BC_SCATTER 0
#define BC_OUT_FLOAT 1
#endif

#ifndef BC_NX
#define BC_NX 2
#define BC_NIN 5
#define BC_FX_T npy_int64
#define BC_FX_SIZE 8
#define BC_FX_FUSED 1
#define BC_WEIGHTED 1
#define BC_FW_FUSED 1
#define BC_FX_LOCALS(in)                                                       \
    const npy_int64 *BC_RESTRICT bc_xp0 = (const npy_int64 *)(in)[0];        \
    const npy_int64 bc_xs1 = *(const npy_int64 *)(in)[1];
#define BC_FUSED_X(i, dst) ((dst) = bc_xp0[i] + bc_xs1)
#define BC_FW_LOCALS(in)                                                       \
    const npy_float64 *BC_RESTRICT bc_wp3 = (const npy_float64 *)(in)[3];    \
    const npy_float64 bc_ws4 = *(const npy_float64 *)(in)[4];
#define BC_FUSED_W(i, dst) ((dst) = bc_wp3[i] * bc_ws4)
#define BC_SCALAR_ERRORS {{&PyExc_ZeroDivisionError, "integer division by zero"}}
#endif

/* An x, or weights, that are inputs as such are read. */
#if !BC_FX_FUSED
#define BC_FX_LOCALS(in) const BC_FX_T *BC_RESTRICT bc_xp0 = (const BC_FX_T *)(in)[0];
#define BC_FUSED_X(i, dst) ((dst) = bc_xp0[i])
#endif
#if !BC_WEIGHTED
#define BC_FW_LOCALS(in)
#define BC_FUSED_W(i, dst) ((dst) = 1)
#elif !BC_FW_FUSED
#define BC_FW_LOCALS(in)                                                       \
    const DTYPE_OUTPUT_0 *BC_RESTRICT bc_wp = (const DTYPE_OUTPUT_0 *)(in)[BC_NX + 1];
#define BC_FUSED_W(i, dst) ((dst) = bc_wp[i])
#endif

#include "common/host_helpers.h"
#include "cpu/plan.h"
#include "cpu/worker_pool.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define BC_F_STOP_CHECK 65536 /* elements between looks at the stop flag */
#define BC_F_OMP_MIN_N 100000 /* below this many elements one thread does it all */
#define BC_F_TASK_LEN 32768   /* elements of a task (exact sums) */
#define BC_F_MIN_BINS 4096    /* private histograms may always grow this far */
#define BC_F_MAX_BINS (1 << 22)
#define BC_F_MERGE_STEP 16384 /* bins of a merge task */

#if defined(__GNUC__)
#define BC_RESTRICT __restrict__
#else
#define BC_RESTRICT
#endif

#define BC_OUT_T DTYPE_OUTPUT_0
#define BC_X_SIGNED (!((BC_FX_T)-1 > (BC_FX_T)0))
#define BC_XIN (BC_NX)         /* index of n in ins */
#define BC_WIN (BC_NX + 1)     /* index of the first input of the weights */

#include "cpu/bincount_acc.h" /* BC_ACC_T */
#define BC_ORDERED (BC_WEIGHTED && BC_OUT_FLOAT)
/* Counts into 8-byte bins never wrap to 0, so the largest value counted is
 * the last non-zero bin, read at the end: the loop tracks no maximum. */
#define BC_F_TRACK_MAX (BC_WEIGHTED || ITEMSIZE_OUTPUT_0 < 8)

#define BC_F_OK 0
#define BC_F_RANGE 1 /* a value out of range */
#define BC_F_BAIL 2  /* too many bins for private histograms */
#define BC_F_NOMEM 3
#define BC_F_FAULT 4 /* the scalar code failed */

#define BC_FHIST APPLY_SPECIFIC(bc_fhist)
#define BC_FCTX APPLY_SPECIFIC(bc_fctx)

typedef struct {
    BC_ACC_T *bins;
    npy_intp cap;         /* bins allocated */
    npy_uint64 max_seen;  /* largest bin counted into */
    npy_intp length;      /* elements counted */
    npy_intp nomem_bins;  /* bins that could not be allocated */
    int status;
    char pad[64];
} BC_FHIST;

typedef struct {
    const void *in[BC_NIN];
    npy_intp size;       /* N */
    npy_intp n;          /* minlength, or the histogram length */
    int w_const;         /* one weight for every element */
    BC_OUT_T w_value;
    unsigned plan;       /* the CPU plan (cpu/plan.h) */
    npy_intp limit;      /* most bins of a private histogram */
    npy_intp ntasks;
    int per_task;
    int nhists;
    BC_FHIST *hists;
    int stop;
    BC_ACC_T *out;
    npy_intp nbins;
} BC_FCTX;

/* Is v refused: negative or too large (bincount), outside [-n, n) (scatter)? */
static int APPLY_SPECIFIC(bc_f_is_bad)(BC_FX_T v, npy_intp n)
{
    return bc_value_is_bad(BC_X_SIGNED && bc_as_i64(v) < 0, bc_as_i64(v), bc_as_u64(v), BC_SCATTER, n);
}

/* Grow h to at least `need` bins (a power of two, 64 at least).  No Python
 * API (worker threads).  0, or -1 when out of memory (h unchanged). */
static int APPLY_SPECIFIC(bc_f_reserve)(BC_FHIST *h, npy_intp need)
{
    npy_intp cap = 64;
    BC_ACC_T *bins;
    while (cap < need && cap <= NPY_MAX_INTP / 2)
        cap *= 2;
    if (cap < need || !bc_output_fits(cap, (npy_intp)sizeof(BC_ACC_T)) ||
        (bins = (BC_ACC_T *)bc_calloc((size_t)cap, sizeof(BC_ACC_T))) == NULL) {
        h->nomem_bins = need;
        return -1;
    }
    if (h->cap > 0)
        memcpy(bins, h->bins, (size_t)h->cap * sizeof(BC_ACC_T));
    free(h->bins);
    h->bins = bins;
    h->cap = cap;
    return 0;
}

/* Each weight is rounded to its dtype before it is added, as in the unfused
 * graph: no contraction of the scalar code's product with the addition into
 * the bin (a fused multiply-add would round once).  The helpers of the loops
 * are inside these options too, so that they can be inlined into them. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

#include "cpu/fused_bincount_fast.h" /* the fast path: a group's test, the loops the plan chooses */

/* The slow path for element i: wrap, grow, or report; the status. */
#define BC_SCALAR_FAIL(code) return ((void)(code), BC_F_FAULT)
static int APPLY_SPECIFIC(bc_f_slow)(const BC_FCTX *ctx, BC_FHIST *h, npy_intp i)
{
    BC_FX_T raw;
    BC_ACC_T inc = (BC_ACC_T)ctx->w_value;
    npy_intp v;
    BC_FX_LOCALS(ctx->in)
    BC_FW_LOCALS(ctx->in)
    BC_FUSED_X(i, raw);
    if (APPLY_SPECIFIC(bc_f_is_bad)(raw, ctx->n))
        return BC_F_RANGE;
    v = (npy_intp)bc_as_i64(raw);
    if (BC_X_SIGNED && bc_as_i64(raw) < 0)
        v += ctx->n; /* only the scatter-add form gets here */
    if (v >= h->cap) {
        if (v + 1 > ctx->limit)
            return BC_F_BAIL;
        if (APPLY_SPECIFIC(bc_f_reserve)(h, v + 1) != 0)
            return BC_F_NOMEM;
    }
    if (!ctx->w_const) {
        BC_OUT_T wk;
        BC_FUSED_W(i, wk);
        inc = (BC_ACC_T)wk;
    }
    h->bins[v] += inc;
    h->max_seen = (npy_uint64)v > h->max_seen ? (npy_uint64)v : h->max_seen;
    return BC_F_OK;
}
#undef BC_SCALAR_FAIL

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* Task t, run by participant `part`: count its slice of x. */
static void APPLY_SPECIFIC(bc_f_task)(void *arg, int part, npy_intp t)
{
    BC_FCTX *ctx = (BC_FCTX *)arg;
    BC_FHIST *h = &ctx->hists[ctx->per_task ? t : (npy_intp)part];
    const npy_intp lo = bc_split(ctx->size, ctx->ntasks, t);
    const npy_intp hi = bc_split(ctx->size, ctx->ntasks, t + 1);
    npy_intp i = lo;
    if (h->status != BC_F_OK)
        return;
    h->length += hi - lo;
    if (BC_SCATTER && h->bins == NULL && APPLY_SPECIFIC(bc_f_reserve)(h, ctx->n) != 0)
        h->status = BC_F_NOMEM;
    while (h->status == BC_F_OK && i < hi) {
        const npy_intp end = hi - i < BC_F_STOP_CHECK ? hi : i + BC_F_STOP_CHECK;
        npy_intp stop_at;
        if (__atomic_load_n(&ctx->stop, __ATOMIC_RELAXED))
            return;
        i = APPLY_SPECIFIC(bc_f_fast)(ctx, h, i, end);
        stop_at = end - i < 8 ? end : i + 8;
        for (; i < stop_at && h->status == BC_F_OK; i++)
            h->status = APPLY_SPECIFIC(bc_f_slow)(ctx, h, i);
    }
    if (h->status != BC_F_OK)
        __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELAXED);
}

/* Raise the scalar code's error `code` (1, 2, ...: BC_SCALAR_ERRORS); -1. */
static int APPLY_SPECIFIC(bc_f_scalar_error)(int code)
{
    static const struct {
        PyObject **type;
        const char *msg;
    } errors[] = BC_SCALAR_ERRORS;
    if (code < 1 || code > (int)(sizeof(errors) / sizeof(errors[0])))
        PyErr_Format(PyExc_RuntimeError, "bincount: unknown error %d of the scalar code", code);
    else
        PyErr_SetString(*errors[code - 1].type, errors[code - 1].msg);
    return -1;
}

/* The calling thread's serial scan for the error to raise (see the header);
 * always returns -1 with an exception set. */
#define BC_SCALAR_FAIL(code) return APPLY_SPECIFIC(bc_f_scalar_error)(code)
static int APPLY_SPECIFIC(bc_f_raise)(const BC_FCTX *ctx)
{
    npy_intp i, bad = -1, neg = -1;
    npy_uint64 top = 0;
    BC_FX_T bad_v = 0, neg_v = 0;
    BC_FX_LOCALS(ctx->in)
    BC_FW_LOCALS(ctx->in)
    for (i = 0; i < ctx->size; i++) {
        BC_FX_T v;
        BC_FUSED_X(i, v);
        if (bad < 0 && APPLY_SPECIFIC(bc_f_is_bad)(v, ctx->n)) {
            bad = i;
            bad_v = v;
        }
        if (neg < 0 && BC_X_SIGNED && bc_as_i64(v) < 0) {
            neg = i;
            neg_v = v;
        }
        top = bc_as_u64(v) > top ? bc_as_u64(v) : top;
    }
    for (i = 0; BC_WEIGHTED && !ctx->w_const && i < ctx->size; i++) {
        BC_OUT_T wk;
        BC_FUSED_W(i, wk);
        (void)wk;
    }
#if BC_SCATTER
    (void)neg;
    (void)neg_v;
    (void)top;
    if (bad >= 0) {
        char text[32];
        if (BC_X_SIGNED && bc_as_i64(bad_v) < 0)
            snprintf(text, sizeof(text), "%lld", (long long)(npy_int64)bad_v);
        else
            snprintf(text, sizeof(text), "%llu", (unsigned long long)(npy_uint64)bad_v);
        PyErr_Format(PyExc_IndexError, BC_MSG_INDEX, text, (long long)bad, (long long)ctx->n);
        return -1;
    }
#else
    (void)bad_v;
    if (neg >= 0) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NEGATIVE, (long long)(npy_int64)neg_v, (long long)neg);
        return -1;
    }
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError, BC_MSG_TOO_LARGE, (unsigned long long)top);
        return -1;
    }
#endif
    PyErr_SetString(PyExc_RuntimeError, "bincount: internal error, no bad value found");
    return -1;
}

/* The weight of every element, computed once at element 0 (a broadcast
 * weight); 0, or -1 with the scalar code's exception set. */
static int APPLY_SPECIFIC(bc_f_weight0)(BC_FCTX *ctx)
{
    BC_OUT_T wk = 1;
    const npy_intp i = 0;
    BC_FW_LOCALS(ctx->in)
    (void)i;
    BC_FUSED_W(i, wk);
    ctx->w_value = wk;
    return 0;
}
#undef BC_SCALAR_FAIL

#endif /* BC_FUSED_LOOPS_DONE */
