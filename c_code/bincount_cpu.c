/*
 * bincount_cpu.c -- the C implementation of aesara_bincount.Bincount.
 *
 * Entry point (called from the Op's one-line c_code glue):
 *
 *   int APPLY_SPECIFIC(cpu_bincount)(PyArrayObject *x, PyArrayObject *n,
 *                                    PyArrayObject *weights,  // may be NULL
 *                                    PyArrayObject **out);
 *
 * It returns 0 on success and -1 with a Python exception set on failure; on
 * failure *out is left as it was.
 *
 * Two forms share this file, chosen at compile time by BC_SCATTER:
 *   BC_SCATTER == 0, the bincount form:  out has max(max(x) + 1, n) bins and a
 *     negative value of x raises ValueError (as numpy.bincount does);
 *   BC_SCATTER == 1, the scatter-add form: out has exactly n bins, a negative
 *     index wraps once (Python style) and an index outside [-n, n) raises
 *     IndexError (as np.add.at does).
 * Without weights every element adds 1 to its bin; with weights, element i
 * adds weights[i] (a weights array of length 1, or 0-d, is broadcast in the
 * scatter-add form).  Sums are taken in the output dtype; integer outputs
 * wrap modulo 2**bits, computed with unsigned arithmetic so that the wrap is
 * well defined.
 *
 * Algorithm: one pass over x while the bins are few (a privatized histogram).
 *   x is cut into tasks that the calling thread and the pool's workers claim
 *   one at a time (bincount_pool.h: a worker the scheduler has not run never
 *   holds up the call).  Each histogram's capacity is a power of two, so that
 *   the range check of a group of eight values is one test:
 *   (v0 | v1 | ... | v7) < capacity, which also rejects negative values
 *   (their sign bit).  A group that fails the test goes through the slow
 *   path one element at a time: wrap a negative index (scatter-add), grow the
 *   histogram (bincount), or record an error.  So the range check costs a few
 *   OR instructions per element and no extra pass over memory.
 *   Counts without weights are 32-bit (a histogram never sees 2**32
 *   elements), which halves the cache footprint against 64-bit counts; the
 *   largest value is then read off the histogram (its last non-zero bin), and
 *   sums are exact whatever the order, so each thread counts all the tasks it
 *   claims into one histogram of its own.  Weighted sums are kept in the
 *   output dtype, the largest value as a running maximum: with AVX2 the range
 *   test and the maximum of eight values take three vector instructions (the
 *   scalar maxima they replace cost two instructions per element, which made
 *   a plain numba loop faster than this one).  Float sums get one histogram
 *   per task, summed in task order, so that the order of the additions, and
 *   the rounding, does not depend on which thread ran which task.
 *   A sample of x (BC_SAMPLE elements from four places) picks the loop:
 *   - runs of equal values dominate (all-equal, sorted data): add each run at
 *     once (BC_RUN_STEP), or every update waits on the previous one;
 *   - frequent repeats within three elements (skewed data: one value is
 *     1 in 16 or more): four interleaved copies of a histogram that fits in
 *     the L1 cache, filled in turn, so that repeats update different memory
 *     words instead of waiting on each other (the store-to-load forwarding
 *     chain); Gomez-Luna et al., "An optimized approach to histogram
 *     computation on GPU", Machine Vision and Applications 24 (2013), describe
 *     such replication on GPUs;
 *   - otherwise one copy: on uniform data copies only cost cache (measured
 *     1.2x slower with four copies of 1000 float64 bins).
 *   A histogram of BC_PREFETCH_MIN_BYTES or more (beyond the L2 cache) is
 *   counted with software prefetches BC_PREFETCH_DIST elements ahead, which
 *   overlap the cache misses of its random updates.
 *
 *   At the end the histograms are summed into a zeroed output; a single
 *   histogram is copied into an output that is not zeroed first.
 *
 *   When a histogram needs more bins than a limit tied to the length of x
 *   (N / (2 x histograms), so the workspace stays below N / 2 bins; 2 N for a
 *   single histogram of 32-bit counts for an output of 8-byte items, whose
 *   copy into the output widens them anyway; with threads, such counts whose
 *   sample needs more bins than threaded histograms may have are counted by
 *   one thread into a single histogram), all tasks stop and the direct path
 *   runs instead: one vectorised min/max pass
 *   over x (threaded), then one thread counts straight into the exact-size
 *   output, with prefetches (atomic updates from several threads were 3x
 *   slower there, and one thread keeps float sums in the same order on every
 *   call).  Counts into an output of 8-byte items go through 32-bit counters
 *   first, which are then widened into the output: the random updates touch
 *   half the memory, and the output is written once rather than zeroed and
 *   updated (1e6 values into 1e6 int64 bins: 4.8 -> 3.7 ms).  No workspace of
 *   threads x bins is used.  The direct path slices nothing by bucket first:
 *   a radix-partitioned count (x and weights scattered into buckets of bins
 *   that fit in L2, then each bucket counted) was measured slower than the
 *   prefetched pass on the development machine, at 1e6 and 1e7 values into
 *   1e6 bins (docs/performance.rst has the figures).  Outputs and histograms
 *   of 4 MiB and more are advised to use transparent huge pages, which
 *   removes most TLB misses of the random updates.
 *
 * Errors are reported deterministically: on any range error a serial scan
 * finds the first offending position, which the message names.
 *
 * The code is valid C99 and C++ (Aesara compiles it with g++).  Compiled on
 * its own (no APPLY_SPECIFIC defined) it instantiates the int64 bincount form,
 * which the test-suite uses to check that the file stands alone.
 */

#ifndef APPLY_SPECIFIC
#define BC_STANDALONE 1
#define APPLY_SPECIFIC(str) str##_standalone
#define DTYPE_INPUT_0 npy_int64
#define DTYPE_OUTPUT_0 npy_int64
#define TYPENUM_OUTPUT_0 NPY_INT64
#define ITEMSIZE_OUTPUT_0 8
#define BC_SCATTER 0
#define BC_OUT_FLOAT 0
#endif

#include "bincount_common.h"
#include "bincount_pool.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#define BC_SIMD 1
#else
#define BC_SIMD 0
#endif

/* ---- tuning constants (measured on the development machine; see
 * docs/performance.rst for the figures) ---- */
#ifndef BC_COPIES_MAX_BYTES
/* Four interleaved copies while they fit in this (the L1 data cache). */
#define BC_COPIES_MAX_BYTES 32768
#endif
#ifndef BC_REPEAT_DIV
/* Copies when at least 1 in BC_REPEAT_DIV sampled elements repeats one of
 * the three before it: the measured crossover of one copy and four copies of
 * 1000 float64 bins was a repeat rate of 6-10%. */
#define BC_REPEAT_DIV 16
#endif
#ifndef BC_SAMPLE
#define BC_SAMPLE 4096 /* elements sampled (at most N / 8), from four places, for runs and repeats */
#endif
#ifndef BC_PREFETCH_MIN_BYTES
/* Histograms and outputs from this size up are counted with prefetches: the
 * measured crossover (uniform values, private histograms of 256 KiB to 16 MiB,
 * counts and float64 sums): up to 1 MiB prefetching cost 0-9%, from 2 MiB
 * on it saved 7-46%.  Four times the 512 KiB L2 cache of one core. */
#define BC_PREFETCH_MIN_BYTES (2 << 20)
#endif
#ifndef BC_PREFETCH_DIST
#define BC_PREFETCH_DIST 32 /* elements ahead: hides a miss to DRAM at ~1 ns/element */
#endif
#ifndef BC_PRIV_MIN_BINS
#define BC_PRIV_MIN_BINS 4096 /* private histograms may always grow this far */
#endif
#ifndef BC_PRIV_MAX_BINS
#define BC_PRIV_MAX_BINS (1 << 22) /* ... and never further */
#endif
#ifndef BC_OMP_MIN_N
#define BC_OMP_MIN_N 100000 /* below this many elements one thread does it all */
#endif
#ifndef BC_TASK_LEN
#define BC_TASK_LEN 32768 /* elements of a task (exact sums): ~20-40 us of work */
#endif
#define BC_TASK_MAX 0xFFFFFFFFLL /* elements per histogram: 32-bit counts cannot wrap */
#define BC_STOP_CHECK 65536      /* elements between looks at the stop flag */
#define BC_MERGE_STEP 16384      /* bins of a merge task */

#if defined(__GNUC__)
#define BC_RESTRICT __restrict__
#else
#define BC_RESTRICT
#endif

/* ---- types of this instantiation ---- */
#define BC_X_T DTYPE_INPUT_0
#define BC_OUT_T DTYPE_OUTPUT_0
#define BC_X_SIGNED (!((BC_X_T)-1 > (BC_X_T)0))
#ifdef DTYPE_INPUT_2
#define BC_WEIGHTED 1
#else
#define BC_WEIGHTED 0
#endif
/* Float sums depend on the order of the additions: one histogram per task. */
#define BC_ORDERED (BC_WEIGHTED && BC_OUT_FLOAT)

/* Accumulator: the output float type, or the unsigned integer of the output's
 * width (so that integer sums wrap as the output dtype does, without UB). */
#if BC_OUT_FLOAT
#define BC_ACC_T BC_OUT_T
#elif ITEMSIZE_OUTPUT_0 == 1
#define BC_ACC_T npy_uint8
#elif ITEMSIZE_OUTPUT_0 == 2
#define BC_ACC_T npy_uint16
#elif ITEMSIZE_OUTPUT_0 == 4
#define BC_ACC_T npy_uint32
#else
#define BC_ACC_T npy_uint64
#endif

/* Private histogram cell: a 32-bit count, or the weighted sum itself. */
#if BC_WEIGHTED
#define BC_H_T BC_ACC_T
#define BC_INC(i) ((BC_H_T)w[(i) * wstep])
/* Running maxima, four of them so that no chain of compares forms. */
#define BC_TRACK(mk, v) mk = (npy_uint64)(v) > mk ? (npy_uint64)(v) : mk
#else
#define BC_H_T npy_uint32
#define BC_INC(i) ((BC_H_T)1)
#define BC_TRACK(mk, v) (void)0
#endif

/* Status of a histogram, shared through the call context. */
#define BC_OK 0
#define BC_RANGE 1 /* a value out of range: scan again for the message */
#define BC_BAIL 2  /* too many bins for private histograms: go direct */
#define BC_NOMEM 3 /* malloc failed inside a task */

#define BC_HIST APPLY_SPECIFIC(bc_hist)
#define BC_CTX APPLY_SPECIFIC(bc_ctx)

/* A private histogram: `copies` copies of `cap` bins, copy-major.  cap is 0
 * or a power of two.  Padded to two cache lines, so that threads updating
 * neighbouring histograms do not share a line. */
typedef struct {
    BC_H_T *bins;
    npy_intp cap;
    int copies;
    npy_uint64 max_seen; /* weighted: largest value counted */
    npy_intp length;     /* elements counted into it */
    int status;
    char pad[128 - 6 * 8];
} BC_HIST;

/* Everything a task needs; one per call. */
typedef struct {
    const BC_X_T *x;
    npy_intp size;     /* elements of x */
    const BC_OUT_T *w; /* NULL when unweighted */
    npy_intp wstep;    /* 1, or 0 for a broadcast scalar increment */
    npy_intp n;        /* minlength (bincount) or histogram length (scatter) */
    npy_intp limit;    /* most bins a private histogram may have */
    npy_intp ntasks;   /* tasks x is cut into */
    int per_task;      /* histogram t is task t's (else participant p's) */
    int nhists;
    int runs;          /* the sample says: runs of equal values dominate */
    int skewed;        /* the sample says: repeats are frequent */
    npy_uint64 top;    /* the largest sampled value (as unsigned) */
    BC_HIST *hists;
    int stop;          /* set (atomically) when any task fails or bails */
    /* min/max pass: one slot per participant */
    BC_X_T *lo, *hi;
    char *seen;
    /* merge, or widening of the direct path's 32-bit counts */
    BC_ACC_T *out;
    npy_intp nbins;
    npy_uint32 *narrow;
} BC_CTX;

/* Min and max of x[0:len), len > 0.  Written so that gcc vectorises it. */
static void APPLY_SPECIFIC(bc_minmax)(const BC_X_T *BC_RESTRICT x, npy_intp len,
                                      BC_X_T *lo, BC_X_T *hi)
{
    BC_X_T mn = x[0], mx = x[0];
    npy_intp i;
    for (i = 1; i < len; i++) {
        BC_X_T v = x[i];
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    *lo = mn;
    *hi = mx;
}

/* Is v a value this form refuses (negative or too large, or out of [-n, n))? */
static int APPLY_SPECIFIC(bc_is_bad)(BC_X_T v, npy_intp n)
{
    int negative = BC_X_SIGNED && bc_as_i64(v) < 0;
#if BC_SCATTER
    if (negative)
        return bc_as_i64(v) < -(npy_int64)n;
    return bc_as_u64(v) >= (npy_uint64)n;
#else
    (void)n;
    return negative || bc_as_u64(v) >= (npy_uint64)NPY_MAX_INTP;
#endif
}

/* Serial scan that sets the Python exception for a refused x, in the order of
 * reference_bincount: the scatter-add form names the first bad index; the
 * bincount form names the first negative value, else the largest value. */
static int APPLY_SPECIFIC(bc_raise_range)(const BC_X_T *x, npy_intp size, npy_intp n)
{
    npy_intp i;
#if BC_SCATTER
    char text[32];
    for (i = 0; i < size; i++) {
        BC_X_T v = x[i];
        if (!APPLY_SPECIFIC(bc_is_bad)(v, n))
            continue;
        if (BC_X_SIGNED && bc_as_i64(v) < 0)
            snprintf(text, sizeof(text), "%lld", (long long)(npy_int64)v);
        else
            snprintf(text, sizeof(text), "%llu", (unsigned long long)(npy_uint64)v);
        PyErr_Format(PyExc_IndexError, BC_MSG_INDEX, text, (long long)i, (long long)n);
        return -1;
    }
#else
    npy_uint64 top = 0;
    (void)n;
    for (i = 0; i < size; i++) {
        BC_X_T v = x[i];
        if (BC_X_SIGNED && bc_as_i64(v) < 0) {
            PyErr_Format(PyExc_ValueError, BC_MSG_NEGATIVE, (long long)(npy_int64)v,
                         (long long)i);
            return -1;
        }
        if (bc_as_u64(v) > top)
            top = bc_as_u64(v);
    }
    if (top >= (npy_uint64)NPY_MAX_INTP) {
        PyErr_Format(PyExc_ValueError, BC_MSG_TOO_LARGE, (unsigned long long)top);
        return -1;
    }
#endif
    PyErr_SetString(PyExc_RuntimeError, "bincount: internal error, no bad value found");
    return -1;
}

/* Look at up to BC_SAMPLE elements (an eighth of x at most), from four
 * evenly spaced places: do runs of equal values dominate, and are repeats
 * within three elements frequent? */
static void APPLY_SPECIFIC(bc_sample)(BC_CTX *ctx)
{
    const npy_intp win = (ctx->size / 8 < BC_SAMPLE ? ctx->size / 8 : BC_SAMPLE) / 4 + 4;
    npy_intp part, pairs = 0, equal = 0, near = 0;
    npy_uint64 top = 0;
    for (part = 0; part < 4; part++) {
        const npy_intp lo = bc_split(ctx->size, 4, part);
        const npy_intp hi = ctx->size - lo < win ? ctx->size : lo + win;
        const BC_X_T *x = ctx->x;
        npy_intp i;
        for (i = lo; i < hi; i++)
            top = bc_as_u64(x[i]) > top ? bc_as_u64(x[i]) : top;
        for (i = lo + 3; i < hi; i++) {
            pairs++;
            equal += x[i] == x[i - 1];
            near += x[i] == x[i - 1] || x[i] == x[i - 2] || x[i] == x[i - 3];
        }
    }
    ctx->runs = 2 * equal > pairs;
    ctx->skewed = pairs > 0 && near * BC_REPEAT_DIV >= pairs;
    ctx->top = top;
}

/* Grow h to at least `need` bins (a power of two), folding copies when the
 * copy count drops.  No Python API: this runs in worker threads.  Returns 0,
 * or -1 if out of memory (h is then unchanged). */
static int APPLY_SPECIFIC(bc_hist_reserve)(BC_HIST *h, npy_intp need, int skewed)
{
    npy_intp cap = 64, b;
    int copies, c;
    BC_H_T *bins;
    while (cap < need)
        cap *= 2;
    copies = skewed && (size_t)cap * 4 * sizeof(BC_H_T) <= BC_COPIES_MAX_BYTES ? 4 : 1;
    bins = (BC_H_T *)bc_calloc((size_t)copies * (size_t)cap, sizeof(BC_H_T));
    if (bins == NULL)
        return -1;
    for (c = 0; c < h->copies; c++) {
        BC_H_T *dst = bins + (npy_intp)(c % copies) * cap;
        const BC_H_T *src = h->bins + (npy_intp)c * h->cap;
        for (b = 0; b < h->cap; b++)
            dst[b] += src[b];
    }
    free(h->bins);
    h->bins = bins;
    h->cap = cap;
    h->copies = copies;
    return 0;
}

#if BC_SIMD && BC_WEIGHTED
/* Weighted fast path with AVX2, for 4- and 8-byte x: the range test and the
 * running maximum of a group of eight values in vector registers.  After the
 * test every value lies in [0, cap), cap <= 2**22, so the maximum can be
 * taken on unsigned 32-bit lanes (the upper half of a 64-bit value is 0). */
static npy_intp APPLY_SPECIFIC(bc_count_fast_simd)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                                   const BC_OUT_T *BC_RESTRICT w,
                                                   npy_intp wstep, npy_intp i, npy_intp end)
{
    const npy_intp cap = h->cap;
    BC_H_T *h0 = h->bins, *h1 = h0, *h2 = h0, *h3 = h0;
    const __m256i bad = sizeof(BC_X_T) == 8 ? _mm256_set1_epi64x((long long)~(cap - 1))
                                            : _mm256_set1_epi32((int)~(cap - 1));
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    npy_uint32 lanes[8];
    npy_uint64 top = h->max_seen;
    int k;
    if (cap == 0)
        return i; /* ~(cap - 1) would pass everything: the slow path makes bins */
    if (h->copies == 4) {
        h1 = h0 + cap;
        h2 = h1 + cap;
        h3 = h2 + cap;
    }
    for (; i + 8 <= end; i += 8) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(x + i));
        if (sizeof(BC_X_T) == 8) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x + i + 4));
            if (!_mm256_testz_si256(_mm256_or_si256(a, b), bad))
                break;
            m1 = _mm256_max_epu32(m1, b);
        } else if (!_mm256_testz_si256(a, bad)) {
            break;
        }
        m0 = _mm256_max_epu32(m0, a);
        h0[(npy_intp)x[i]] += BC_INC(i);
        h1[(npy_intp)x[i + 1]] += BC_INC(i + 1);
        h2[(npy_intp)x[i + 2]] += BC_INC(i + 2);
        h3[(npy_intp)x[i + 3]] += BC_INC(i + 3);
        h0[(npy_intp)x[i + 4]] += BC_INC(i + 4);
        h1[(npy_intp)x[i + 5]] += BC_INC(i + 5);
        h2[(npy_intp)x[i + 6]] += BC_INC(i + 6);
        h3[(npy_intp)x[i + 7]] += BC_INC(i + 7);
    }
    _mm256_storeu_si256((__m256i *)lanes, _mm256_max_epu32(m0, m1));
    for (k = 0; k < 8; k++)
        top = lanes[k] > top ? lanes[k] : top;
    h->max_seen = top;
    return i;
}
#endif

/* The fast path: count x[i:end) in groups of eight while every value of a
 * group lies in [0, cap).  Returns the index of the first group that did not
 * (or of the tail shorter than a group), which the slow path handles. */
static npy_intp APPLY_SPECIFIC(bc_count_fast)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                              const BC_OUT_T *BC_RESTRICT w,
                                              npy_intp wstep, npy_intp i, npy_intp end)
{
    const npy_uint64 ucap = (npy_uint64)h->cap;
    const npy_intp cap = h->cap;
    /* With one copy the four pointers alias: no restrict here. */
    BC_H_T *h0 = h->bins, *h1 = h0, *h2 = h0, *h3 = h0;
    npy_uint64 m0 = h->max_seen, m1 = m0, m2 = m0, m3 = m0;
    (void)w;
    (void)wstep;
#if BC_SIMD && BC_WEIGHTED
    if (sizeof(BC_X_T) == 8 || sizeof(BC_X_T) == 4)
        return APPLY_SPECIFIC(bc_count_fast_simd)(h, x, w, wstep, i, end);
#endif
    if (h->copies == 4) {
        h1 = h0 + cap;
        h2 = h1 + cap;
        h3 = h2 + cap;
    }
    for (; i + 8 <= end; i += 8) {
        const npy_uint64 v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        const npy_uint64 v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
        const npy_uint64 v4 = (npy_uint64)x[i + 4], v5 = (npy_uint64)x[i + 5];
        const npy_uint64 v6 = (npy_uint64)x[i + 6], v7 = (npy_uint64)x[i + 7];
        if ((v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7) >= ucap)
            break;
        h0[v0] += BC_INC(i);
        h1[v1] += BC_INC(i + 1);
        h2[v2] += BC_INC(i + 2);
        h3[v3] += BC_INC(i + 3);
        h0[v4] += BC_INC(i + 4);
        h1[v5] += BC_INC(i + 5);
        h2[v6] += BC_INC(i + 6);
        h3[v7] += BC_INC(i + 7);
        BC_TRACK(m0, v0); BC_TRACK(m1, v1); BC_TRACK(m2, v2); BC_TRACK(m3, v3);
        BC_TRACK(m0, v4); BC_TRACK(m1, v5); BC_TRACK(m2, v6); BC_TRACK(m3, v7);
    }
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    h->max_seen = m2 > m0 ? m2 : m0;
    return i;
}

/* As bc_count_fast for a histogram larger than the L2 cache (one copy):
 * each group prefetches the bins of the group BC_PREFETCH_DIST elements
 * ahead.  Those values are not checked yet, so the prefetched address is
 * masked into the histogram.  (This loop waits on memory: the scalar maxima
 * cost nothing measurable here.) */
static npy_intp APPLY_SPECIFIC(bc_count_fast_far)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                                  const BC_OUT_T *BC_RESTRICT w,
                                                  npy_intp wstep, npy_intp i, npy_intp end)
{
    const npy_uint64 ucap = (npy_uint64)h->cap, mask = ucap - 1;
    BC_H_T *h0 = h->bins;
    npy_uint64 m0 = h->max_seen, m1 = m0, m2 = m0, m3 = m0;
    const npy_intp pf_end = end - BC_PREFETCH_DIST - 8;
    int k;
    (void)w;
    (void)wstep;
    for (; i + 8 <= end; i += 8) {
        const npy_uint64 v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        const npy_uint64 v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
        const npy_uint64 v4 = (npy_uint64)x[i + 4], v5 = (npy_uint64)x[i + 5];
        const npy_uint64 v6 = (npy_uint64)x[i + 6], v7 = (npy_uint64)x[i + 7];
        if ((v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7) >= ucap)
            break;
        if (i <= pf_end)
            for (k = 0; k < 8; k++)
                __builtin_prefetch(h0 + ((npy_uint64)x[i + BC_PREFETCH_DIST + k] & mask), 1);
        h0[v0] += BC_INC(i);
        h0[v1] += BC_INC(i + 1);
        h0[v2] += BC_INC(i + 2);
        h0[v3] += BC_INC(i + 3);
        h0[v4] += BC_INC(i + 4);
        h0[v5] += BC_INC(i + 5);
        h0[v6] += BC_INC(i + 6);
        h0[v7] += BC_INC(i + 7);
        BC_TRACK(m0, v0); BC_TRACK(m1, v1); BC_TRACK(m2, v2); BC_TRACK(m3, v3);
        BC_TRACK(m0, v4); BC_TRACK(m1, v5); BC_TRACK(m2, v6); BC_TRACK(m3, v7);
    }
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    h->max_seen = m2 > m0 ? m2 : m0;
    return i;
}

/* Runs of equal values make the plain loop wait on itself (each update of
 * a bin reads the previous one); the run-aggregating loops add a whole run at
 * once.  One step of run aggregation: a run of `prev` has summed `acc` so far.  A
 * new value flushes the run into dst[prev]; an equal one extends it.  Both
 * cases store (to a rotating scratch cell when the run goes on), so the loop
 * has no branch to mispredict and no chain through memory. */
#define BC_RUN_STEP(T, dst, v, k)                                                \
    do {                                                                         \
        const int same_ = (v) == prev;                                           \
        T *tgt_ = same_ ? &scratch[(k)&7] : &(dst)[prev];                        \
        *tgt_ += same_ ? (T)0 : acc;                                             \
        acc = same_ ? (T)(acc + (T)BC_INC(k)) : (T)BC_INC(k);                    \
        prev = (v);                                                              \
    } while (0)

/* Fast path when runs dominate: as bc_count_fast, adding each run of equal
 * values at once into the first copy. */
static npy_intp APPLY_SPECIFIC(bc_count_fast_runs)(BC_HIST *h, const BC_X_T *BC_RESTRICT x,
                                                   const BC_OUT_T *BC_RESTRICT w,
                                                   npy_intp wstep, npy_intp i, npy_intp end)
{
    const npy_uint64 ucap = (npy_uint64)h->cap;
    BC_H_T *h0 = h->bins;
    BC_H_T scratch[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    BC_H_T acc = 0;
    npy_uint64 prev = 0, m0 = h->max_seen;
    (void)w;
    (void)wstep;
    for (; i + 4 <= end; i += 4) {
        const npy_uint64 v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        const npy_uint64 v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
        if ((v0 | v1 | v2 | v3) >= ucap)
            break;
        BC_RUN_STEP(BC_H_T, h0, v0, i);
        BC_RUN_STEP(BC_H_T, h0, v1, i + 1);
        BC_RUN_STEP(BC_H_T, h0, v2, i + 2);
        BC_RUN_STEP(BC_H_T, h0, v3, i + 3);
        BC_TRACK(m0, v0); BC_TRACK(m0, v1); BC_TRACK(m0, v2); BC_TRACK(m0, v3);
    }
    if (h0 != NULL)
        h0[prev] += acc;
    h->max_seen = m0;
    return i;
}

/* The slow path for the element x[i]: wrap, grow, or report.  Returns a
 * status (BC_OK when the element was counted). */
static int APPLY_SPECIFIC(bc_count_slow)(BC_CTX *ctx, BC_HIST *h, npy_intp i)
{
    const BC_X_T raw = ctx->x[i];
    const BC_OUT_T *w = ctx->w;
    const npy_intp wstep = ctx->wstep;
    npy_intp v;
    (void)w;
    (void)wstep;
    if (APPLY_SPECIFIC(bc_is_bad)(raw, ctx->n))
        return BC_RANGE;
    v = (npy_intp)bc_as_i64(raw);
    if (BC_X_SIGNED && bc_as_i64(raw) < 0)
        v += ctx->n; /* only the scatter-add form gets here */
    if (v >= h->cap) {
        if (!BC_SCATTER && v + 1 > ctx->limit)
            return BC_BAIL;
        if (APPLY_SPECIFIC(bc_hist_reserve)(h, v + 1, ctx->skewed) != 0)
            return BC_NOMEM;
    }
    h->bins[v] += BC_INC(i);
    if (BC_WEIGHTED && (npy_uint64)v > h->max_seen)
        h->max_seen = (npy_uint64)v;
    return BC_OK;
}

/* Task t, run by participant `part`: count its slice of x into its
 * histogram (the task's own for float sums, else the participant's). */
static void APPLY_SPECIFIC(bc_task)(void *arg, int part, npy_intp t)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    BC_HIST *h = &ctx->hists[ctx->per_task ? t : (npy_intp)part];
    const npy_intp lo = bc_split(ctx->size, ctx->ntasks, t);
    const npy_intp hi = bc_split(ctx->size, ctx->ntasks, t + 1);
    npy_intp i = lo;

    if (h->status != BC_OK)
        return;
    h->length += hi - lo;
    if (BC_SCATTER && h->bins == NULL &&
        APPLY_SPECIFIC(bc_hist_reserve)(h, ctx->n, ctx->skewed) != 0)
        h->status = BC_NOMEM;
    while (h->status == BC_OK && i < hi) {
        const npy_intp end = hi - i < BC_STOP_CHECK ? hi : i + BC_STOP_CHECK;
        npy_intp stop_at;
        if (__atomic_load_n(&ctx->stop, __ATOMIC_RELAXED))
            return;
        if (ctx->runs)
            i = APPLY_SPECIFIC(bc_count_fast_runs)(h, ctx->x, ctx->w, ctx->wstep, i, end);
        else if ((size_t)h->cap * sizeof(BC_H_T) >= BC_PREFETCH_MIN_BYTES)
            i = APPLY_SPECIFIC(bc_count_fast_far)(h, ctx->x, ctx->w, ctx->wstep, i, end);
        else
            i = APPLY_SPECIFIC(bc_count_fast)(h, ctx->x, ctx->w, ctx->wstep, i, end);
        stop_at = end - i < 8 ? end : i + 8;
        for (; i < stop_at && h->status == BC_OK; i++)
            h->status = APPLY_SPECIFIC(bc_count_slow)(ctx, h, i);
    }
    if (h->status != BC_OK)
        __atomic_store_n(&ctx->stop, 1, __ATOMIC_RELAXED);
}

/* Largest value counted into h, or -1 if none. */
static npy_intp APPLY_SPECIFIC(bc_hist_top)(const BC_HIST *h)
{
#if BC_WEIGHTED
    return h->bins == NULL || h->length == 0 ? -1 : (npy_intp)h->max_seen;
#else
    npy_intp b;
    int c;
    for (b = h->cap - 1; b >= 0; b--)
        for (c = 0; c < h->copies; c++)
            if (h->bins[(npy_intp)c * h->cap + b] != 0)
                return b;
    return -1;
#endif
}

/* Merge task: sum bins [t * BC_MERGE_STEP, ...) of every histogram into the
 * output, histograms in order, copies in order (a fixed order of the float
 * additions). */
static void APPLY_SPECIFIC(bc_merge_task)(void *arg, int part, npy_intp task)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    BC_ACC_T *out = ctx->out;
    const npy_intp b0 = task * BC_MERGE_STEP;
    const npy_intp b1 = ctx->nbins - b0 < BC_MERGE_STEP ? ctx->nbins : b0 + BC_MERGE_STEP;
    int t, c;
    (void)part;
    for (t = 0; t < ctx->nhists; t++) {
        const BC_HIST *h = &ctx->hists[t];
        const npy_intp end = h->cap < b1 ? h->cap : b1;
        for (c = 0; c < h->copies; c++) {
            const BC_H_T *src = h->bins + (npy_intp)c * h->cap;
            npy_intp b;
            for (b = b0; b < end; b++)
                out[b] += (BC_ACC_T)src[b];
        }
    }
}

/* Merge task for a single histogram: out[b] = the sum of its copies (or 0
 * past its capacity), into an output that was not zeroed.  The sum starts
 * from 0, as bc_merge_task's does (0.0 + -0.0 is +0.0). */
static void APPLY_SPECIFIC(bc_merge_one_task)(void *arg, int part, npy_intp task)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    const BC_HIST *h = &ctx->hists[0];
    BC_ACC_T *out = ctx->out;
    const npy_intp b0 = task * BC_MERGE_STEP;
    const npy_intp b1 = ctx->nbins - b0 < BC_MERGE_STEP ? ctx->nbins : b0 + BC_MERGE_STEP;
    const npy_intp end = h->cap < b1 ? (h->cap > b0 ? h->cap : b0) : b1;
    npy_intp b;
    int c;
    (void)part;
    if (h->copies == 1) {
        for (b = b0; b < end; b++)
            out[b] = (BC_ACC_T)((BC_ACC_T)0 + (BC_ACC_T)h->bins[b]);
    } else {
        for (b = b0; b < end; b++) {
            BC_ACC_T acc = 0;
            for (c = 0; c < h->copies; c++)
                acc += (BC_ACC_T)h->bins[(npy_intp)c * h->cap + b];
            out[b] = acc;
        }
    }
    for (b = end; b < b1; b++)
        out[b] = 0;
}

/* Index of x[i] in the output of the direct path (values are validated). */
#define BC_DIRECT_INDEX(i) (wrap && (npy_intp)x[i] < 0 ? (npy_intp)x[i] + n : (npy_intp)x[i])

/* Direct path: count straight into the exact-size output.  The values were
 * validated by a min/max pass; `wrap` says some are negative (scatter).
 * One thread does it: with many bins, atomic updates from several threads
 * measured 3x slower than one thread (each is a cache-line round trip), and
 * float sums stay in one order, so they round the same on every call.  An
 * output larger than the L2 cache is counted with prefetches. */
static void APPLY_SPECIFIC(bc_count_direct)(BC_CTX *ctx, BC_ACC_T *out, npy_intp nbins, int wrap)
{
    const BC_X_T *BC_RESTRICT x = ctx->x;
    const BC_OUT_T *BC_RESTRICT w = ctx->w;
    const npy_intp wstep = ctx->wstep, n = ctx->n, size = ctx->size;
    npy_intp i = 0;
    (void)w;
    (void)wstep;
    if (ctx->runs && !wrap) {
        /* Runs of equal values: add each run at once (see BC_RUN_STEP). */
        BC_ACC_T scratch[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        BC_ACC_T acc = 0;
        npy_intp prev = 0;
        for (; i < size; i++) {
            const npy_intp v = (npy_intp)x[i];
            BC_RUN_STEP(BC_ACC_T, out, v, i);
        }
        out[prev] += acc;
        return;
    }
    if ((size_t)nbins * sizeof(BC_ACC_T) >= BC_PREFETCH_MIN_BYTES) {
        for (; i + BC_PREFETCH_DIST < size; i++) {
            __builtin_prefetch(out + BC_DIRECT_INDEX(i + BC_PREFETCH_DIST), 1);
            out[BC_DIRECT_INDEX(i)] += (BC_ACC_T)BC_INC(i);
        }
    }
    if (wrap) {
        for (; i < size; i++)
            out[BC_DIRECT_INDEX(i)] += (BC_ACC_T)BC_INC(i);
    } else {
        for (; i < size; i++)
            out[(npy_intp)x[i]] += (BC_ACC_T)BC_INC(i);
    }
}

#if !BC_WEIGHTED
/* Direct path for counts into a wide output (8-byte items): count into
 * 32-bit counters (a call never counts 2**32 elements this way), then widen
 * them into the output.  The random updates then touch half the memory, and
 * the output is written once instead of zeroed and then updated.  Used from
 * N >= bins / 2: with fewer elements zeroing the counters and widening them
 * costs more than the updates save. */
static void APPLY_SPECIFIC(bc_count_narrow)(BC_CTX *ctx, npy_uint32 *cnt, int wrap)
{
    const BC_X_T *BC_RESTRICT x = ctx->x;
    const npy_intp n = ctx->n, size = ctx->size;
    npy_intp i = 0;
    for (; i + BC_PREFETCH_DIST < size; i++) {
        __builtin_prefetch(cnt + BC_DIRECT_INDEX(i + BC_PREFETCH_DIST), 1);
        cnt[BC_DIRECT_INDEX(i)]++;
    }
    for (; i < size; i++)
        cnt[BC_DIRECT_INDEX(i)]++;
}

/* Widen task: out[b] = cnt[b] for the bins of merge task t. */
static void APPLY_SPECIFIC(bc_widen_task)(void *arg, int part, npy_intp t)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    const npy_uint32 *cnt = ctx->narrow;
    const npy_intp b0 = t * BC_MERGE_STEP;
    const npy_intp b1 = ctx->nbins - b0 < BC_MERGE_STEP ? ctx->nbins : b0 + BC_MERGE_STEP;
    npy_intp b;
    (void)part;
    for (b = b0; b < b1; b++)
        ctx->out[b] = (BC_ACC_T)cnt[b];
}
#endif

/* A new uninitialised 1-D array of the output's type (see bc_new_array). */
static PyArrayObject *APPLY_SPECIFIC(bc_new_empty)(npy_intp nbins)
{
    return bc_new_array(nbins, TYPENUM_OUTPUT_0, 0);
}

/* Direct path of bc_run: count the validated x into a new exact-size output
 * of nbins bins.  Returns 0, or -1 with an exception set. */
static int APPLY_SPECIFIC(bc_direct)(BC_CTX *ctx, int nt, npy_intp nbins, int wrap,
                                     PyArrayObject **res)
{
#if !BC_WEIGHTED
    if (sizeof(BC_ACC_T) > 4 && !ctx->runs && ctx->size <= BC_TASK_MAX && ctx->size >= nbins / 2 &&
        (size_t)nbins * sizeof(npy_uint32) >= BC_PREFETCH_MIN_BYTES) {
        ctx->narrow = (npy_uint32 *)bc_calloc((size_t)nbins, sizeof(npy_uint32));
        if (ctx->narrow != NULL) { /* else: count into the output */
            APPLY_SPECIFIC(bc_count_narrow)(ctx, ctx->narrow, wrap);
            *res = APPLY_SPECIFIC(bc_new_empty)(nbins);
            if (*res == NULL)
                return -1;
            ctx->out = (BC_ACC_T *)PyArray_DATA(*res);
            ctx->nbins = nbins;
            bc_pool_run(nt, (nbins + BC_MERGE_STEP - 1) / BC_MERGE_STEP,
                        APPLY_SPECIFIC(bc_widen_task), ctx);
            return 0;
        }
    }
#else
    (void)nt;
#endif
    *res = bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
    if (*res == NULL)
        return -1;
    APPLY_SPECIFIC(bc_count_direct)(ctx, (BC_ACC_T *)PyArray_DATA(*res), nbins, wrap);
    return 0;
}

/* Min/max task: the min and max of task t's slice, into the participant's
 * slot. */
static void APPLY_SPECIFIC(bc_minmax_task)(void *arg, int part, npy_intp t)
{
    BC_CTX *ctx = (BC_CTX *)arg;
    const npy_intp a = bc_split(ctx->size, ctx->ntasks, t);
    const npy_intp e = bc_split(ctx->size, ctx->ntasks, t + 1);
    BC_X_T l, h;
    if (e <= a)
        return;
    APPLY_SPECIFIC(bc_minmax)(ctx->x + a, e - a, &l, &h);
    if (!ctx->seen[part] || l < ctx->lo[part])
        ctx->lo[part] = l;
    if (!ctx->seen[part] || h > ctx->hi[part])
        ctx->hi[part] = h;
    ctx->seen[part] = 1;
}

/* Min and max of all of x (size > 0), with up to nt threads.  Returns 0, or
 * -1 when out of memory (no exception set). */
static int APPLY_SPECIFIC(bc_minmax_all)(BC_CTX *ctx, int nt, BC_X_T *lo, BC_X_T *hi)
{
    int p, used;
    ctx->lo = (BC_X_T *)calloc((size_t)nt, sizeof(BC_X_T));
    ctx->hi = (BC_X_T *)calloc((size_t)nt, sizeof(BC_X_T));
    ctx->seen = (char *)calloc((size_t)nt, 1);
    if (ctx->lo == NULL || ctx->hi == NULL || ctx->seen == NULL)
        return -1;
    ctx->ntasks = nt == 1 ? 1 : (ctx->size + 4 * BC_TASK_LEN - 1) / (4 * BC_TASK_LEN);
    used = bc_pool_run(nt, ctx->ntasks, APPLY_SPECIFIC(bc_minmax_task), ctx);
    *lo = ctx->x[0];
    *hi = ctx->x[0];
    for (p = 0; p < used; p++) {
        if (!ctx->seen[p])
            continue;
        *lo = ctx->lo[p] < *lo ? ctx->lo[p] : *lo;
        *hi = ctx->hi[p] > *hi ? ctx->hi[p] : *hi;
    }
    return 0;
}

/* Threads for a call over `size` elements. */
static int APPLY_SPECIFIC(bc_threads)(npy_intp size)
{
#ifdef _OPENMP
    int t;
    if (size < BC_OMP_MIN_N || omp_in_parallel())
        return 1;
    t = omp_get_max_threads();
    if ((npy_intp)t > size / (BC_OMP_MIN_N / 2))
        t = (int)(size / (BC_OMP_MIN_N / 2)); /* at least 50,000 elements a thread */
    return t < 1 ? 1 : t > BC_POOL_MAX_PARTS ? BC_POOL_MAX_PARTS : t;
#else
    (void)size;
    return 1;
#endif
}

/* After the tasks: the status, and for the scatter-add form the check that
 * no value landed in [n, cap) (the capacity is a power of two >= n). */
static int APPLY_SPECIFIC(bc_tasks_status)(BC_CTX *ctx)
{
    int status = BC_OK, t;
    for (t = 0; t < ctx->nhists; t++) {
        const BC_HIST *h = &ctx->hists[t];
        const int s = h->status;
        if (s == BC_RANGE || (s == BC_BAIL && status != BC_RANGE) ||
            (s == BC_NOMEM && status == BC_OK))
            status = s;
#if BC_SCATTER
        if (s == BC_OK && APPLY_SPECIFIC(bc_hist_top)(h) >= ctx->n)
            status = BC_RANGE;
#endif
    }
    return status;
}

/* Cut x into tasks and histograms for nt threads; 0, or -1 (no memory). */
static int APPLY_SPECIFIC(bc_plan)(BC_CTX *ctx, int nt)
{
    npy_intp limit;
    ctx->per_task = BC_ORDERED || ctx->size > BC_TASK_MAX;
    if (ctx->per_task) {
        /* Fixed tasks, one histogram each: twice as many tasks as threads, so
         * that a thread that starts late takes over a smaller share. */
        ctx->ntasks = (ctx->size + BC_TASK_MAX - 1) / BC_TASK_MAX;
        if (ctx->ntasks < (nt == 1 ? 1 : 2 * nt))
            ctx->ntasks = nt == 1 ? 1 : 2 * nt;
        ctx->nhists = (int)ctx->ntasks;
    } else {
        /* Exact sums: small tasks, one histogram per thread. */
        ctx->ntasks = nt == 1 ? 1 : (ctx->size + BC_TASK_LEN - 1) / BC_TASK_LEN;
        if (ctx->ntasks < nt)
            ctx->ntasks = nt;
        ctx->nhists = nt;
    }
    limit = ctx->size / (2 * (npy_intp)ctx->nhists);
#if !BC_WEIGHTED
    /* A single histogram of 32-bit counts for an output of 8-byte items may
     * grow to 2 N bins: its merge is a widening copy, as the direct path's
     * would be, and it spares the direct path's min/max pass. */
    if (ctx->nhists == 1 && sizeof(BC_ACC_T) > 4)
        limit = 2 * ctx->size;
#endif
    limit = limit < BC_PRIV_MIN_BINS ? BC_PRIV_MIN_BINS : limit;
    limit = limit > BC_PRIV_MAX_BINS ? BC_PRIV_MAX_BINS : limit;
    ctx->limit = limit;
    ctx->stop = 0;
    ctx->hists = (BC_HIST *)calloc((size_t)ctx->nhists, sizeof(BC_HIST));
    return ctx->hists == NULL ? -1 : 0;
}

/* Run on validated, contiguous inputs; on success *res is a new array. */
static int APPLY_SPECIFIC(bc_run)(BC_CTX *ctx, PyArrayObject **res)
{
    const int nt = APPLY_SPECIFIC(bc_threads)(ctx->size);
    int count_nt = nt; /* threads that count (all of them may merge) */
    int status = BC_OK, rc = -1, t;
    npy_intp nbins = ctx->n;

    if (ctx->size == 0) {
        *res = bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
        return *res == NULL ? -1 : 0;
    }
    APPLY_SPECIFIC(bc_sample)(ctx);
#if !BC_WEIGHTED
    {
        /* Counts for an 8-byte output that need (the scatter-add form's n, or
         * the sample says) more bins than threaded histograms may have, but
         * not more than a single one may: one thread counts, the merge stays
         * threaded.  Threads would bail out to the direct path, whose min/max
         * pass costs more than they save (1e6 values into 1e6 int64 bins on
         * 2 threads: 3.4 ms against 2.7 ms for one thread). */
        const npy_uint64 need = BC_SCATTER ? (npy_uint64)ctx->n : ctx->top + 1;
        if (nt > 1 && sizeof(BC_ACC_T) > 4 && ctx->size <= BC_TASK_MAX &&
            need > (npy_uint64)(ctx->size / (2 * nt)) && need <= (npy_uint64)(2 * ctx->size) &&
            need <= (npy_uint64)BC_PRIV_MAX_BINS)
            count_nt = 1;
    }
#endif
    if (APPLY_SPECIFIC(bc_plan)(ctx, count_nt) != 0) {
        PyErr_NoMemory();
        return -1;
    }

    if (BC_SCATTER && ctx->n > ctx->limit) {
        status = BC_BAIL; /* the histogram is too large to privatize */
    } else {
        bc_pool_run(count_nt, ctx->ntasks, APPLY_SPECIFIC(bc_task), ctx);
        status = APPLY_SPECIFIC(bc_tasks_status)(ctx);
    }

    if (status == BC_BAIL) {
        BC_X_T mn, mx;
        int wrap = 0;
        if (APPLY_SPECIFIC(bc_minmax_all)(ctx, nt, &mn, &mx) != 0) {
            status = BC_NOMEM;
        } else if (APPLY_SPECIFIC(bc_is_bad)(mn, ctx->n) || APPLY_SPECIFIC(bc_is_bad)(mx, ctx->n)) {
            status = BC_RANGE;
        } else {
#if BC_SCATTER
            wrap = BC_X_SIGNED && bc_as_i64(mn) < 0;
#else
            if ((npy_intp)mx + 1 > nbins)
                nbins = (npy_intp)mx + 1;
#endif
            rc = APPLY_SPECIFIC(bc_direct)(ctx, nt, nbins, wrap, res);
        }
    } else if (status == BC_OK) {
#if !BC_SCATTER
        for (t = 0; t < ctx->nhists; t++) {
            const npy_intp top = APPLY_SPECIFIC(bc_hist_top)(&ctx->hists[t]);
            if (top + 1 > nbins)
                nbins = top + 1;
        }
#endif
        /* One histogram is copied into an output left unzeroed; several are
         * added into zeros. */
        *res = ctx->nhists == 1 ? APPLY_SPECIFIC(bc_new_empty)(nbins)
                                : bc_new_zeros(nbins, TYPENUM_OUTPUT_0);
        if (*res != NULL) {
            ctx->out = (BC_ACC_T *)PyArray_DATA(*res);
            ctx->nbins = nbins;
            bc_pool_run(nbins > BC_MERGE_STEP ? nt : 1, (nbins + BC_MERGE_STEP - 1) / BC_MERGE_STEP,
                        ctx->nhists == 1 ? APPLY_SPECIFIC(bc_merge_one_task)
                                         : APPLY_SPECIFIC(bc_merge_task), ctx);
            rc = 0;
        }
    }
    if (status == BC_NOMEM)
        PyErr_NoMemory();
    if (status == BC_RANGE)
        APPLY_SPECIFIC(bc_raise_range)(ctx->x, ctx->size, ctx->n);

    for (t = 0; t < ctx->nhists; t++)
        free(ctx->hists[t].bins);
    free(ctx->hists);
    free(ctx->lo);
    free(ctx->hi);
    free(ctx->seen);
    free(ctx->narrow);
    ctx->hists = NULL;
    return rc;
}

int APPLY_SPECIFIC(cpu_bincount)(PyArrayObject *x_in, PyArrayObject *n_in,
                                 PyArrayObject *w_in, PyArrayObject **out)
{
    BC_CTX ctx;
    long long n_arg;
    PyArrayObject *x = NULL, *w = NULL, *res = NULL;
    int rc;

    memset(&ctx, 0, sizeof(ctx));
    if (bc_check_ndim(x_in, 1, "x") != 0)
        return -1;
    if (bc_read_length(n_in, BC_SCATTER, &n_arg) != 0)
        return -1;
    if (bc_check_output_size((npy_intp)n_arg, ITEMSIZE_OUTPUT_0) != 0)
        return -1;
    ctx.size = PyArray_DIM(x_in, 0);
    ctx.n = (npy_intp)n_arg;

#if BC_WEIGHTED
    {
        npy_intp wlen;
        if (w_in == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "bincount: weights missing");
            return -1;
        }
        wlen = PyArray_NDIM(w_in) == 0 ? 1 : PyArray_DIM(w_in, 0);
        if (bc_check_weights(BC_SCATTER, PyArray_NDIM(w_in), (long long)wlen,
                             (long long)ctx.size) != 0)
            return -1;
        ctx.wstep = wlen == ctx.size ? 1 : 0;
        w = PyArray_GETCONTIGUOUS(w_in);
        if (w == NULL)
            return -1;
        ctx.w = (const BC_OUT_T *)PyArray_DATA(w);
    }
#else
    (void)w_in;
#endif

    x = PyArray_GETCONTIGUOUS(x_in);
    if (x == NULL) {
        Py_XDECREF(w);
        return -1;
    }
    ctx.x = (const BC_X_T *)PyArray_DATA(x);
    rc = APPLY_SPECIFIC(bc_run)(&ctx, &res);
    Py_DECREF(x);
    Py_XDECREF(w);
    if (rc != 0)
        return -1;
    Py_XDECREF(*out);
    *out = res;
    return 0;
}

#undef BC_X_T
#undef BC_OUT_T
#undef BC_X_SIGNED
#undef BC_WEIGHTED
#undef BC_ORDERED
#undef BC_ACC_T
#undef BC_H_T
#undef BC_INC
#undef BC_TRACK
#undef BC_RUN_STEP
#undef BC_DIRECT_INDEX
#undef BC_HIST
#undef BC_CTX
#undef BC_OK
#undef BC_RANGE
#undef BC_BAIL
#undef BC_NOMEM
