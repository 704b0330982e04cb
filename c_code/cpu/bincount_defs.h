/*
 * cpu/bincount_defs.h -- what every part of the CPU Op's C code shares, for
 * one instantiation (one Aesara node): the types picked by the node's dtypes,
 * the tuning constants, the call context and the private histogram, and the
 * range checks with their error messages.
 *
 * The CPU code of aesara_bincount.Bincount is cut by counting regime, one
 * algorithm per file, each explained at its top:
 *   cpu/bincount_defs.h     this file: types, constants, context, range checks;
 *   cpu/bincount_hist.h     few bins: privatized histograms (copies, slow path,
 *                           tasks, merge);
 *   cpu/bincount_weighted.h weighted sums over few bins: the AVX2 loop;
 *   cpu/bincount_far.h      private histograms beyond the L2 cache: the vector
 *                           range test (prefetches without AVX2);
 *   cpu/bincount_runs.h     runs of equal values: one update per run;
 *   cpu/bincount_direct.h   many bins: the min/max pass, then one thread counts
 *                           straight into the output;
 *   cpu/bincount_grow.h     counts into many bins, one thread: the output is
 *                           the histogram, no min/max pass;
 *   cpu/bincount_grow_loops.h  its counting loops (counts, hot copies, runs,
 *                           weighted sums) and their range test;
 *   cpu/bincount.c          the driver: threads, plan, dispatch, entry point.
 *   cpu/bincount_acc.h      the accumulator type (shared with the fused loop,
 *                           cpu/fused_bincount_loops.h).
 * common/host_helpers.h (messages, allocation) and cpu/worker_pool.h (the worker
 * threads) are shared with the scatter-add of rows and the GPU host code.
 *
 * These files are "template" headers: they hold code of one instantiation,
 * named through APPLY_SPECIFIC.  Aesara puts the support code of every node
 * of a graph into one module, so each header is guarded by a macro that
 * cpu/bincount.c undefines at its end (BC_CPU_*_DONE), with every other
 * per-instantiation macro: the next node includes them all afresh.
 *
 * Valid C99 and C++ on its own: without APPLY_SPECIFIC it instantiates the
 * int64 bincount form, which the test-suite uses to compile each file alone.
 */
#ifndef BC_CPU_DEFS_DONE
#define BC_CPU_DEFS_DONE 1

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

#include "common/host_helpers.h"
#include "cpu/plan.h"
#include "cpu/worker_pool.h"
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
 * on it saved 7-46%.  Four times the 512 KiB L2 cache of one core.  With
 * AVX2 the far loop of such histograms has a vector range test and no
 * prefetches (cpu/bincount_far.h); the direct path keeps them. */
#define BC_PREFETCH_MIN_BYTES (2 << 20)
#endif
#ifndef BC_PREFETCH_DIST
#define BC_PREFETCH_DIST 32 /* elements ahead: hides a miss to DRAM at ~1 ns/element */
#endif
#ifndef BC_GROW_MIN_BYTES
/* One counting thread and an output of this size or more (beyond the 1 MiB
 * L2 cache of a core): the output is the histogram (cpu/bincount_grow.h). */
#define BC_GROW_MIN_BYTES (1 << 20)
#endif
#ifndef BC_GROW_MAX_BINS
#define BC_GROW_MAX_BINS (1 << 26) /* ... and values below this (larger: sized exactly) */
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
#include "cpu/bincount_acc.h" /* BC_ACC_T */

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

/* Add the eight elements i .. i + 7 of x (range already checked) into the
 * histograms a, b, c, d in turn (a, b, c, d, a, b, c, d): four copies break
 * the chains of updates of one bin (cpu/bincount_weighted.h); the same
 * histogram four times is the plain unrolled loop. */
#define BC_ADD_GROUP8(a, b, c, d, i)                                                       \
    do {                                                                                  \
        (a)[(npy_intp)x[(i)]] += BC_INC(i);                                               \
        (b)[(npy_intp)x[(i) + 1]] += BC_INC((i) + 1);                                     \
        (c)[(npy_intp)x[(i) + 2]] += BC_INC((i) + 2);                                     \
        (d)[(npy_intp)x[(i) + 3]] += BC_INC((i) + 3);                                     \
        (a)[(npy_intp)x[(i) + 4]] += BC_INC((i) + 4);                                     \
        (b)[(npy_intp)x[(i) + 5]] += BC_INC((i) + 5);                                     \
        (c)[(npy_intp)x[(i) + 6]] += BC_INC((i) + 6);                                     \
        (d)[(npy_intp)x[(i) + 7]] += BC_INC((i) + 7);                                     \
    } while (0)

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
    unsigned plan;     /* the CPU plan (cpu/plan.h) */
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

/* Is v a value this form refuses (negative or too large, or out of [-n, n))? */
static int APPLY_SPECIFIC(bc_is_bad)(BC_X_T v, npy_intp n)
{
    return bc_value_is_bad(BC_X_SIGNED && bc_as_i64(v) < 0, bc_as_i64(v), bc_as_u64(v), BC_SCATTER, n);
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

#endif /* BC_CPU_DEFS_DONE */
