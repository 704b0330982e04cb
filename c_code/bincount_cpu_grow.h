/*
 * bincount_cpu_grow.h -- counts into many bins, one counting thread: the
 * output array is the histogram, counted in one pass over x.
 *
 * Algorithm: when the sample of x (bc_sample) says that the counts need an
 * output of BC_GROW_MIN_BYTES or more, and one thread counts anyway (OpenMP
 * off, or more bins than threaded private histograms may have), the call allocates
 * the zeroed output at once, a sixteenth larger than the sampled need, and
 * counts x straight into it: no private histogram to copy or widen
 * afterwards, no min/max pass before, the output zeroed once.  The range
 * check of a group of eight values compares their largest value, as
 * unsigned (a negative value is a huge one), with the capacity; a group that
 * fails it goes through the slow path one element at a time: grow the
 * output (a new zeroed array, at least twice as large, the counts copied
 * over: rare, since the sample sees nearly the largest value), stop with
 * BC_RANGE at a negative value (the driver
 * then names it), or give up with BC_BAIL at a value that needs more than
 * BC_GROW_MAX_BINS bins (the driver then starts over on the other paths,
 * which size such an output exactly).  At the end the output is cut to
 * max(minlength, max(x) + 1) bins (bc_grow_trim): the largest value is the
 * last non-zero count (counts are kept in 4- and 8-byte cells only, for
 * fewer than 2**32 elements, so a counted bin is never 0).
 *
 * Why the output itself: with 1e6 bins of 8 bytes the updates hit the L3
 * cache, and what costs beyond the updates is memory traffic around them.
 * The 32-bit private counters of bincount_cpu_hist.h halve the footprint of
 * the updates but cost a widening pass over the 8 MB output; the direct path
 * of bincount_cpu_direct.h costs a min/max pass over x.  Measured on a 2-core
 * AMD EPYC (1 MiB L2, 32 MiB L3), thread CPU time, 1e6 int64 values into 1e6
 * bins: see docs/performance.rst.  Weighted sums were measured slower this
 * way than on the direct path (the running maximum that gives their length
 * costs more than the min/max pass saves), so they keep the other paths.
 * Software prefetches measured slower here
 * (distances 8 and 16, at 1e6 and 1e7 values), so there are none.  The
 * output is advised to use transparent huge pages (bincount_common.h), which
 * removes most TLB misses of the updates.
 *
 * Only the bincount form comes here (the scatter-add form knows its length
 * and keeps bincount_cpu_direct.h).
 *
 * Neighbours: bincount_cpu_defs.h (types, context), bincount_cpu.c (the
 * driver, which picks this path after the sample).  Valid C99 and C++ on its
 * own (see bincount_cpu_defs.h).
 */
#ifndef BC_CPU_GROW_DONE
#define BC_CPU_GROW_DONE 1

#include "bincount_cpu_defs.h"

#if !BC_WEIGHTED && !BC_SCATTER

/* Keep v in a general register: gcc otherwise loads the eight values of a
 * group into one vector register for the compares and then moves them out
 * one by one, which delays every address by a shuffle (measured 1.4 ms
 * against 0.85 ms for the plain loop at 1e6 values into 1e6 bins). */
#if defined(__GNUC__)
#define BC_IN_REG(v) __asm__("" : "+r"(v))
#else
#define BC_IN_REG(v) (void)0
#endif

/* Bins to allocate for `need` bins: a sixteenth more, so that the largest
 * value, which the sample sees nearly but rarely exactly, fits. */
static npy_intp APPLY_SPECIFIC(bc_grow_cap)(npy_uint64 need)
{
    return (npy_intp)(need + need / 16 + 64);
}

/* The counting loop of the output-histogram: x[i:end) in groups of eight
 * while every value of a group lies in [0, cap).  Returns the index of the
 * first group that did not (or of the tail shorter than a group). */
static npy_intp APPLY_SPECIFIC(bc_grow_fast)(BC_ACC_T *BC_RESTRICT out, npy_intp cap,
                                             const BC_X_T *BC_RESTRICT x, npy_intp i, npy_intp end)
{
    const npy_uint64 ucap = (npy_uint64)cap;
    for (; i + 8 <= end; i += 8) {
        npy_uint64 v0 = (npy_uint64)x[i], v1 = (npy_uint64)x[i + 1];
        npy_uint64 v2 = (npy_uint64)x[i + 2], v3 = (npy_uint64)x[i + 3];
        npy_uint64 v4 = (npy_uint64)x[i + 4], v5 = (npy_uint64)x[i + 5];
        npy_uint64 v6 = (npy_uint64)x[i + 6], v7 = (npy_uint64)x[i + 7];
        BC_IN_REG(v0); BC_IN_REG(v1); BC_IN_REG(v2); BC_IN_REG(v3);
        BC_IN_REG(v4); BC_IN_REG(v5); BC_IN_REG(v6); BC_IN_REG(v7);
        {
            /* The largest value of the group, as unsigned (a negative value
             * is a huge one). */
            const npy_uint64 a = v0 > v1 ? v0 : v1, b = v2 > v3 ? v2 : v3;
            const npy_uint64 c = v4 > v5 ? v4 : v5, d = v6 > v7 ? v6 : v7;
            const npy_uint64 ab = a > b ? a : b, cd = c > d ? c : d;
            const npy_uint64 top = ab > cd ? ab : cd;
            if (top >= ucap)
                break;
        }
        out[v0]++;
        out[v1]++;
        out[v2]++;
        out[v3]++;
        out[v4]++;
        out[v5]++;
        out[v6]++;
        out[v7]++;
    }
    return i;
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
    const npy_intp size = ctx->size;
    npy_intp cap = APPLY_SPECIFIC(bc_grow_cap)(need), i = 0, nbins, top;
    PyArrayObject *arr;
    BC_ACC_T *out;
    arr = APPLY_SPECIFIC(bc_grow_to)(NULL, 0, cap);
    if (arr == NULL)
        return -1;
    out = (BC_ACC_T *)PyArray_DATA(arr);
    while (i < size) {
        npy_intp stop;
        i = APPLY_SPECIFIC(bc_grow_fast)(out, cap, x, i, size);
        /* The slow path, for the elements of the group that failed (or of the tail). */
        for (stop = size - i < 8 ? size : i + 8; i < stop; i++) {
            const BC_X_T raw = x[i];
            const npy_uint64 v = bc_as_u64(raw);
            if (BC_X_SIGNED && bc_as_i64(raw) < 0) {
                Py_DECREF(arr);
                return BC_RANGE;
            }
            if (v >= (npy_uint64)BC_GROW_MAX_BINS) {
                Py_DECREF(arr); /* too many bins: the driver starts over */
                return BC_BAIL;
            }
            if (v >= (npy_uint64)cap) {
                npy_intp bigger = APPLY_SPECIFIC(bc_grow_cap)(v + 1);
                bigger = bigger < 2 * cap ? 2 * cap : bigger;
                arr = APPLY_SPECIFIC(bc_grow_to)(arr, cap, bigger);
                if (arr == NULL)
                    return -1;
                out = (BC_ACC_T *)PyArray_DATA(arr);
                cap = bigger;
            }
            out[v]++;
        }
    }
    for (top = cap - 1; top >= 0 && out[top] == 0; top--)
        ;
    nbins = top + 1 > ctx->n ? top + 1 : ctx->n;
    *res = APPLY_SPECIFIC(bc_grow_trim)(arr, cap, nbins);
    return *res == NULL ? -1 : 0;
}

#endif /* !BC_WEIGHTED && !BC_SCATTER */
#endif /* BC_CPU_GROW_DONE */
