/*
 * cpu/fused_bincount_fast.h -- the fast path of the C loop of
 * aesara_bincount_core.fused.FusedBincount: groups of eight values of x
 * (four for counts of a computed x: BC_F_GROUP), their range test, and the forms of the loop that the CPU plan chooses
 * between (cpu/plan.h).
 *
 * A group's eight values of x are computed (or, for an x that is an input,
 * read in place), tested against the histogram's capacity in one test, and
 * added with their weights.  An x of 8 bytes that is an input is tested on
 * vector loads: two of AVX2, or one of AVX-512 where the plan says
 * BC_PLAN_AVX512_TEST; the running maximum of the values is then kept in a
 * vector register.  The weights of a group come as vectors (BC_FUSED_WV,
 * taken out lane by lane) or one by one from the scalar code, as the plan
 * says (BC_PLAN_SCALAR_WEIGHTS); cpu/fused_bincount_loops.h explains both
 * and why.  Each loop is an inlined copy for constant choices.
 *
 * A per-instantiation part of cpu/fused_bincount_loops.h, which includes it
 * after its types and inside its floating-point options (no contraction of
 * a product and a sum), and whose driver undefines the guard
 * BC_FUSED_FAST_DONE and the macros below.  Valid C99 and C++ on its own:
 * without the Op's macros it includes cpu/fused_bincount_loops.h, which
 * instantiates the default.
 */
#ifndef BC_FUSED_LOOPS_DONE
#include "cpu/fused_bincount_loops.h"
#endif
#ifndef BC_FUSED_FAST_DONE
#define BC_FUSED_FAST_DONE 1

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* The vector range test of a group of eight values of an x read in place:
 * 8-byte x, with AVX2 (two vectors), or AVX-512 (one vector) where the plan
 * says BC_PLAN_AVX512_TEST.  Other groups take the test in general registers. */
#if !BC_FX_FUSED && BC_FX_SIZE == 8 && (defined(__AVX512F__) || defined(__AVX2__))
#define BC_F_VTEST 1
#else
#define BC_F_VTEST 0
#endif
#if BC_F_VTEST && defined(__AVX512F__)
#define BC_F_WIDE 1
#else
#define BC_F_WIDE 0
#endif

/* The values of a group: eight, or four for counts of an x computed by
 * the scalar code.  With eight such values and their range test, gcc ran
 * out of general registers and kept the loop's index in a vector register
 * (seen in the disassembly), a chain through it from one group to the
 * next: the per-row histogram bincount((arange(1000)[:, None] * 100 +
 * x).ravel(), minlength=100000) took 0.431 ms with groups of eight, 0.410
 * with four (the numba loop 0.50; Zen 4, thread CPU time, load average
 * 3.7); bincount(x4 // 4) 0.402 and 0.407, the same within the noise. */
#define BC_F_GROUP (BC_FX_FUSED && !BC_WEIGHTED ? 4 : 8)

/* Weights as vectors of 32 bytes (GCC's vector types): stored float
 * weights, or computed ones whose graph the Op generated as BC_FUSED_WV
 * (it then defines BC_FW_VEC 1).  BC_F_LANES lanes a vector. */
#if BC_WEIGHTED && BC_OUT_FLOAT && !BC_FW_FUSED && defined(__GNUC__)
#define BC_FW_VEC 1
#define BC_FUSED_WV(i, dst) memcpy(&(dst), bc_wp + (i), sizeof(dst))
#endif
#if !defined(BC_FW_VEC) || !defined(__GNUC__) || !BC_OUT_FLOAT
#undef BC_FW_VEC
#define BC_FW_VEC 0
#endif
#if BC_FW_VEC
#define BC_F_LANES ((int)(32 / sizeof(BC_OUT_T)))
#define BC_FWV APPLY_SPECIFIC(bc_fwv)
typedef BC_OUT_T BC_FWV __attribute__((vector_size(32)));
#endif

/* The running maximum of the values a loop has tested (BC_F_TRACK_MAX):
 * in a general register, or in a vector register beside the vector test,
 * folded into m at the end of the loop (bc_f_max_fold). */
#define BC_FMAX APPLY_SPECIFIC(bc_fmax)
typedef struct {
    npy_uint64 m;
#if BC_F_VTEST
    __m256i m2;
#endif
#if BC_F_WIDE
    __m512i m5;
#endif
} BC_FMAX;

/* Does a value of the group xv[0:8) lie outside [0, ucap) (ucap a power of
 * two, at least 64)?  Else folds the group into the maximum t.  `wide`: one
 * AVX-512 vector for the group, else two of AVX2; after the test every
 * value is below ucap, at most 2**32 with a vector test (bc_f_groups leaves
 * a larger histogram to the slow path), so AVX2 takes the maximum on 32-bit
 * lanes (the upper halves are 0).  (A test of ucap in the loop, with a
 * 64-bit maximum for the larger histograms, measured 1% slower.) */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline int APPLY_SPECIFIC(bc_f_group_bad)(const BC_FX_T *xv, npy_uint64 ucap, int wide,
                                                 BC_FMAX *t)
{
#if BC_F_WIDE
    if (wide) {
        const __m512i a = _mm512_loadu_si512((const void *)xv);
        if (_mm512_test_epi64_mask(a, _mm512_set1_epi64((long long)~(ucap - 1))))
            return 1;
        if (BC_F_TRACK_MAX)
            t->m5 = _mm512_max_epu64(t->m5, a);
        return 0;
    }
#endif
#if BC_F_VTEST
    {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)xv);
        const __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(xv + 4));
        (void)wide;
        if (!_mm256_testz_si256(_mm256_or_si256(a, b), _mm256_set1_epi64x((long long)~(ucap - 1))))
            return 1;
        if (BC_F_TRACK_MAX) /* the upper halves are 0: the 32-bit maximum is the 64-bit one */
            t->m2 = _mm256_max_epu32(t->m2, _mm256_max_epu32(a, b));
        return 0;
    }
#else
    {
        npy_uint64 any = 0, top = 0;
        int k;
        (void)wide;
        for (k = 0; k < BC_F_GROUP; k++) {
            const npy_uint64 u = (npy_uint64)xv[k];
            any |= u;
            top = u > top ? u : top;
        }
        if (any >= ucap)
            return 1; /* the slow path counts the group, and keeps its maximum */
        if (BC_F_TRACK_MAX)
            t->m = top > t->m ? top : t->m;
        return 0;
    }
#endif
}

/* The largest value the maxima of t hold. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline npy_uint64 APPLY_SPECIFIC(bc_f_max_fold)(const BC_FMAX *t)
{
    npy_uint64 m = t->m;
#if BC_F_VTEST
    {
        npy_int64 l[4];
        int k;
        _mm256_storeu_si256((__m256i *)(void *)l, t->m2);
        for (k = 0; k < 4; k++)
            m = (npy_uint64)l[k] > m ? (npy_uint64)l[k] : m;
    }
#endif
#if BC_F_WIDE
    {
        const npy_uint64 w = (npy_uint64)_mm512_reduce_max_epu64(t->m5);
        m = w > m ? w : m;
    }
#endif
    return m;
}

/* The fast path: groups of eight while every value of a group lies in
 * [0, cap).  Returns the index of the first group that did not (or of the
 * tail shorter than a group), which the slow path handles; on a failure of
 * the scalar code it sets h->status to BC_F_FAULT.  `vec_w`: the weights of
 * a group as vectors (BC_FUSED_WV, taken out lane by lane), else each by the
 * scalar code as it is added; `wide`: the range test on one AVX-512 vector.
 * Inlined into bc_f_fast once for each pair of them that the build has, so
 * that each loop is compiled for constant choices. */
#define BC_SCALAR_FAIL(code)                                                   \
    do {                                                                       \
        (void)(code);                                                          \
        h->status = BC_F_FAULT;                                                \
        return i;                                                              \
    } while (0)
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline npy_intp APPLY_SPECIFIC(bc_f_groups)(const BC_FCTX *ctx, BC_FHIST *h, npy_intp i,
                                                   npy_intp end, const int vec_w, const int wide)
{
    const npy_uint64 ucap = (npy_uint64)h->cap;
    BC_ACC_T *BC_RESTRICT bins = h->bins;
    const int w_const = ctx->w_const;
    const BC_ACC_T w_value = (BC_ACC_T)ctx->w_value;
    BC_FMAX t;
    BC_FX_LOCALS(ctx->in)
    BC_FW_LOCALS(ctx->in)
    (void)w_const;
    (void)w_value;
    (void)vec_w;
    memset(&t, 0, sizeof(t));
    t.m = h->max_seen;
    if (BC_F_VTEST && (ucap == 0 || ucap > ((npy_uint64)1 << 32)))
        return i; /* no histogram yet (the slow path makes one), or above 2**32 bins */
    for (; i + BC_F_GROUP <= end; i += BC_F_GROUP) {
        int k;
#if BC_FX_FUSED
        BC_FX_T xv[BC_F_GROUP];
        for (k = 0; k < BC_F_GROUP; k++)
            BC_FUSED_X(i + k, xv[k]);
#else
        const BC_FX_T *xv = bc_xp0 + i; /* read in place */
#endif
        if (APPLY_SPECIFIC(bc_f_group_bad)(xv, ucap, wide, &t))
            break;
#if BC_FW_VEC
        if (vec_w) {
            BC_FWV wv[8 / BC_F_LANES];
            for (k = 0; k < 8 / BC_F_LANES; k++)
                BC_FUSED_WV(i + k * BC_F_LANES, wv[k]);
            for (k = 0; k < 8; k++)
                bins[(npy_intp)xv[k]] += (BC_ACC_T)wv[k / BC_F_LANES][k % BC_F_LANES];
            continue;
        }
#endif
#if BC_WEIGHTED
        if (w_const) {
            for (k = 0; k < BC_F_GROUP; k++)
                bins[(npy_intp)xv[k]] += w_value;
            continue;
        }
#endif
        for (k = 0; k < BC_F_GROUP; k++) {
            BC_OUT_T wk;
            BC_FUSED_W(i + k, wk);
            bins[(npy_intp)xv[k]] += (BC_ACC_T)wk;
        }
    }
    h->max_seen = APPLY_SPECIFIC(bc_f_max_fold)(&t);
    return i;
}
#undef BC_SCALAR_FAIL

/* The fast path of a task, in the loop the plan chooses (see the header);
 * vector weights only where the weights have a vector form and are not one
 * broadcast weight. */
static npy_intp APPLY_SPECIFIC(bc_f_fast)(const BC_FCTX *ctx, BC_FHIST *h, npy_intp i,
                                          npy_intp end)
{
    const int vec_w = BC_FW_VEC && !ctx->w_const && !(ctx->plan & BC_PLAN_SCALAR_WEIGHTS);
    const int wide = BC_F_WIDE && (ctx->plan & BC_PLAN_AVX512_TEST) != 0;
    if (vec_w)
        return wide ? APPLY_SPECIFIC(bc_f_groups)(ctx, h, i, end, 1, 1)
                    : APPLY_SPECIFIC(bc_f_groups)(ctx, h, i, end, 1, 0);
    return wide ? APPLY_SPECIFIC(bc_f_groups)(ctx, h, i, end, 0, 1)
                : APPLY_SPECIFIC(bc_f_groups)(ctx, h, i, end, 0, 0);
}

#endif /* BC_FUSED_FAST_DONE */
