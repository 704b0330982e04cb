/*
 * cpu/bincount_grow.h -- counts and weighted sums into many bins, one
 * counting thread: the output array is the histogram, counted in one pass
 * over x.
 *
 * Algorithm: when the sample of x (bc_sample) says that the output needs
 * BC_GROW_MIN_BYTES or more, and one thread counts anyway (OpenMP
 * off, or more bins than threaded private histograms may have), the call allocates
 * the zeroed output at once, a sixteenth larger than the sampled need, and
 * counts x straight into it: no private histogram to copy or widen
 * afterwards, no min/max pass before, the output zeroed once.  The range
 * check of a group of eight values is one vector compare of the group, as
 * unsigned (a negative value is a huge one), with the capacity
 * (bc_grow_group_bad: AVX-512, else AVX2, else the scalar maximum); a group
 * that fails it goes through the slow path one element at a time: grow the
 * output (a new zeroed array, at least twice as large, the counts copied
 * over: rare, since the sample sees nearly the largest value), stop with
 * BC_RANGE at a negative value (the driver
 * then names it), or give up with BC_BAIL at a value that needs more than
 * BC_GROW_MAX_BINS bins (the driver then starts over on the other paths,
 * which size such an output exactly).  At the end the output is cut to
 * max(minlength, max(x) + 1) bins (bc_grow_trim): for counts the largest
 * value is the last non-zero count (counts are kept in 4- and 8-byte cells
 * only, integer or float, for fewer than 2**32 elements, so a counted bin is
 * never 0); weighted
 * sums keep a running maximum of the values (one vector maximum a group),
 * since a sum may be 0.  Weighted sums are added in the order of x, on one
 * thread, as numpy.bincount adds them: float sums round as numpy's do.
 *
 * Why the output itself: with 1e6 bins of 8 bytes the updates hit the L3
 * cache, and what costs beyond the updates is memory traffic around them.
 * The 32-bit private counters of cpu/bincount_hist.h halve the footprint of
 * the updates but cost a widening pass over the 8 MB output; the direct path
 * of cpu/bincount_direct.h costs a min/max pass over x.  Measured on a 2-core
 * AMD EPYC (1 MiB L2, 32 MiB L3), thread CPU time, 1e6 int64 values into 1e6
 * bins: see docs/performance.rst.  Weighted sums were once measured slower
 * this way than on the direct path, with a scalar running maximum (two
 * instructions an element); with the vector maximum, 1e6 int64 values into
 * 1e6 float64 bins took 1.03 ms against the numba loop's 1.19 ms (0.94x
 * before, on the direct path; aesara.function, thread CPU time, interleaved
 * call by call, load average 2.2).
 * The vector compare replaced the scalar maximum of the group (seven
 * compares and moves per group, on general registers): at 1e7 values into
 * 1e6 bins, where x streams from DRAM, the loop took 10.0 ms with it and
 * 5.0 ms with the AVX-512 compare (5.3 ms AVX2; the plain loop with a sign
 * test, as numba compiles it, 5.9 ms); at 1e6 values 0.50 and 0.49 ms
 * (C microbenchmark, thread CPU time, best of 15, load average 3.6).
 * Software prefetches measured slower here
 * (distances 8 and 16, at 1e6 and 1e7 values), so there are none.  The
 * output is advised to use transparent huge pages (common/host_helpers.h), which
 * removes most TLB misses of the updates.
 *
 * Counts of data where runs of equal values dominate (the sample says so)
 * take bc_grow_fast_runs: a group that continues the run in progress is
 * added at once, other groups a run at a time (cpu/bincount_runs.h), so
 * neither a min/max pass nor a chain of updates of one bin costs.  Counts
 * of data whose values repeat within a few elements without forming runs
 * (the sample's "skewed", as Zipf data) take bc_grow_fast_hot: the values
 * below BC_GROW_HOT_BINS (1024 for 8-byte counts) are counted in four
 * interleaved copies of those bins (32 KiB, in the L1 cache), element j of
 * a group into copy j % 4, the others into the output; the copies are added
 * into the output at the end.  A repeat within three elements then goes to
 * another copy, so its update does not wait for the store of the one
 * before (1e6 Zipf(1.3) values into 1e6 bins: int64 0.57 -> 0.52 ms, int32
 * 0.50 -> 0.44 ms, the numba loop 0.53-0.60; aesara.function, thread CPU
 * time, load average 0.2-0.5).  Weighted sums keep one order of additions,
 * so no copies.
 *
 * A growth (bc_grow_next) takes the missed value's need scaled by the share
 * of x still to come, capped at twice the capacity: a value the sample
 * missed near the end grows the output to little more than it needs (it
 * used to double it: 1e6 values in [5e5, 9e5) and a last value of 999999,
 * int64, took 2.07-2.24 ms, now 0.89-0.92 ms, the numba loop 0.68-0.74),
 * and an ascending x grows it once (np.arange(1e6), int64: 1.35-1.70 ->
 * 0.56-0.59 ms; the numba loop 0.45-0.48; load average 0.4-0.6).
 *
 * Only the bincount form comes here (the scatter-add form knows its length
 * and keeps cpu/bincount_direct.h).
 *
 * Neighbours: cpu/bincount_defs.h (types, context), cpu/bincount.c (the
 * driver, which picks this path after the sample).  Valid C99 and C++ on its
 * own (see cpu/bincount_defs.h).
 */
#ifndef BC_CPU_GROW_DONE
#define BC_CPU_GROW_DONE 1

#include "cpu/bincount_defs.h"
#include "cpu/bincount_grow_loops.h"

#if !BC_SCATTER

/* Whether one of the eight cells p[0] .. p[7] of counts is non-zero.  Counts
 * are kept in the output's cells, so a float output (a count whose increment
 * is a constant float 1: the rewrite compiles it without weights) holds them
 * as floats, which have no bitwise OR: each cell is compared on its own
 * (counts are +0.0 or at least 1, never -0.0). */
#if BC_OUT_FLOAT
#define BC_GROW_ANY8(p)                                                                   \
    (((p)[0] != 0) | ((p)[1] != 0) | ((p)[2] != 0) | ((p)[3] != 0) | ((p)[4] != 0) |      \
     ((p)[5] != 0) | ((p)[6] != 0) | ((p)[7] != 0))
#else
#define BC_GROW_ANY8(p) (((p)[0] | (p)[1] | (p)[2] | (p)[3] | (p)[4] | (p)[5] | (p)[6] | (p)[7]) != 0)
#endif

/* Bins to allocate for `need` bins: a sixteenth more, so that the largest
 * value, which the sample sees nearly but rarely exactly, fits. */
static npy_intp APPLY_SPECIFIC(bc_grow_cap)(npy_uint64 need)
{
    return (npy_intp)(need + need / 16 + 64);
}

/* Bins of the output after value v at x[i] outgrew its `cap` bins: v's
 * need scaled by size / (i + 1), the share of x still to come (a value the
 * sample missed near the end then grows the output to little more than it
 * needs, and an ascending x grows it once, not each time it passes a
 * capacity), at least v's need, at most twice `cap` unless v needs more. */
static npy_intp APPLY_SPECIFIC(bc_grow_next)(npy_intp cap, npy_uint64 v, npy_intp i, npy_intp size)
{
    const npy_intp need = APPLY_SPECIFIC(bc_grow_cap)(v + 1);
    const double scaled = (double)(v + 1) * (double)size / (double)(i + 1);
    const npy_intp bigger = scaled < 2.0 * (double)cap ? APPLY_SPECIFIC(bc_grow_cap)((npy_uint64)scaled) : 2 * cap;
    return bigger < need ? need : bigger;
}

/* A new zeroed output of `cap` bins holding the first `old_cap` bins of
 * `old` (which it releases), or NULL with an exception set. */
static PyArrayObject *APPLY_SPECIFIC(bc_grow_to)(PyArrayObject *old, npy_intp old_cap, npy_intp cap)
{
    PyArrayObject *bigger = bc_new_zeros(cap, TYPENUM_OUTPUT_0);
    if (bigger != NULL && old != NULL)
        memcpy(PyArray_DATA(bigger), PyArray_DATA(old), (size_t)old_cap * sizeof(BC_ACC_T));
    Py_XDECREF(old);
    return bigger;
}

/* The first `nbins` bins of `arr` (of `cap` bins) as the output, which
 * takes over the reference to `arr`; NULL with an exception set.  Within a
 * sixteenth of slack, a view whose base is `arr`: the block that the memory
 * allocator gets back is then as large as the one it gave, call after call,
 * so glibc serves it again from its heap (a shrunk block it would map afresh
 * each call, and every page of it would fault again).  With more slack, the
 * block is shrunk in place (realloc). */
static PyArrayObject *APPLY_SPECIFIC(bc_grow_trim)(PyArrayObject *arr, npy_intp cap, npy_intp nbins)
{
    if (nbins == cap)
        return arr;
    if (cap - nbins <= nbins / 16 + 64) {
        npy_intp dims[1];
        PyArray_Descr *descr = PyArray_DESCR(arr);
        PyArrayObject *view;
        dims[0] = nbins;
        Py_INCREF(descr);
        view = (PyArrayObject *)PyArray_NewFromDescr(&PyArray_Type, descr, 1, dims, NULL,
                                                     PyArray_DATA(arr), NPY_ARRAY_CARRAY, NULL);
        if (view == NULL) {
            Py_DECREF(arr);
            return NULL;
        }
        if (PyArray_SetBaseObject(view, (PyObject *)arr) < 0) { /* steals arr */
            Py_DECREF(view);
            return NULL;
        }
        return view;
    } else {
        PyArray_Dims shape;
        PyObject *none;
        shape.ptr = &nbins;
        shape.len = 1;
        /* refcheck 0: the array is new and only ours. */
        none = PyArray_Resize(arr, &shape, 0, NPY_CORDER);
        if (none == NULL) {
            Py_DECREF(arr);
            return NULL;
        }
        Py_DECREF(none);
        return arr;
    }
}

/* Count all of x into a new output (see the top of this file).  `need` is
 * the sampled number of bins.  Returns 0 with *res set, -1 with an exception
 * set, BC_RANGE (no exception: the driver scans for the message) or
 * BC_BAIL (no exception: count on another path). */
static int APPLY_SPECIFIC(bc_grow_run)(BC_CTX *ctx, npy_uint64 need, PyArrayObject **res)
{
    const BC_X_T *BC_RESTRICT x = ctx->x;
    const BC_OUT_T *BC_RESTRICT w = ctx->w;
    const npy_intp size = ctx->size, wstep = ctx->wstep;
    npy_intp cap = APPLY_SPECIFIC(bc_grow_cap)(need), i = 0, nbins, top;
    npy_uint64 mx = 0; /* weighted: the largest value counted */
    PyArrayObject *arr;
    BC_ACC_T *out, *hot = NULL;
    (void)w;
    (void)wstep;
    (void)mx;
    arr = APPLY_SPECIFIC(bc_grow_to)(NULL, 0, cap);
    if (arr == NULL)
        return -1;
    out = (BC_ACC_T *)PyArray_DATA(arr);
#if !BC_WEIGHTED
    /* Repeats that are no runs: the hot bins in copies of their own (none
     * when they cannot be allocated: the plain loop then counts). */
    if (ctx->skewed && !ctx->runs)
        hot = (BC_ACC_T *)bc_calloc((size_t)(4 * BC_GROW_HOT_BINS), sizeof(BC_ACC_T));
#endif
    while (i < size) {
        npy_intp stop;
#if BC_WEIGHTED
        i = APPLY_SPECIFIC(bc_grow_fast_w)(out, cap, x, w, wstep, i, size, &mx);
#else
        i = ctx->runs ? APPLY_SPECIFIC(bc_grow_fast_runs)(out, cap, x, i, size)
            : hot != NULL ? APPLY_SPECIFIC(bc_grow_fast_hot)(out, hot, cap, x, i, size)
                          : APPLY_SPECIFIC(bc_grow_fast)(out, cap, x, i, size);
#endif
        /* The slow path, for the elements of the group that failed (or of the tail). */
        for (stop = size - i < 8 ? size : i + 8; i < stop; i++) {
            const BC_X_T raw = x[i];
            const npy_uint64 v = bc_as_u64(raw);
            if (BC_X_SIGNED && bc_as_i64(raw) < 0) {
                Py_DECREF(arr);
                free(hot);
                return BC_RANGE;
            }
            if (v >= (npy_uint64)BC_GROW_MAX_BINS) {
                Py_DECREF(arr); /* too many bins: the driver starts over */
                free(hot);
                return BC_BAIL;
            }
            if (v >= (npy_uint64)cap) {
                const npy_intp bigger = APPLY_SPECIFIC(bc_grow_next)(cap, v, i, size);
                arr = APPLY_SPECIFIC(bc_grow_to)(arr, cap, bigger);
                if (arr == NULL) {
                    free(hot);
                    return -1;
                }
                out = (BC_ACC_T *)PyArray_DATA(arr);
                cap = bigger;
            }
            out[v] += (BC_ACC_T)BC_INC(i);
#if BC_WEIGHTED
            mx = v > mx ? v : mx;
#endif
        }
    }
#if BC_WEIGHTED
    top = (npy_intp)mx; /* size > 0: some value was counted */
#else
    if (hot != NULL) {
        npy_intp b;
        for (b = 0; b < BC_GROW_HOT_BINS; b++)
            out[b] += hot[b] + hot[BC_GROW_HOT_BINS + b] + hot[2 * BC_GROW_HOT_BINS + b] +
                      hot[3 * BC_GROW_HOT_BINS + b];
        free(hot);
    }
    /* The last non-zero count, eight bins at a time over the slack (about a
     * sixteenth of the output: 62,500 bins of zeros at 1e6 bins). */
    for (top = cap; top >= 8; top -= 8) {
        const BC_ACC_T *p = out + top - 8;
        if (BC_GROW_ANY8(p))
            break;
    }
    for (top = top - 1; top >= 0 && out[top] == 0; top--)
        ;
#endif
    nbins = top + 1 > ctx->n ? top + 1 : ctx->n;
    *res = APPLY_SPECIFIC(bc_grow_trim)(arr, cap, nbins);
    return *res == NULL ? -1 : 0;
}

#endif /* !BC_SCATTER */
#endif /* BC_CPU_GROW_DONE */
