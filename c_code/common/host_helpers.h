/*
 * common/host_helpers.h -- host-side helpers shared by the CPU Op (cpu/bincount.c)
 * and the GPU Op's host code: the error messages, and a guarded allocation of
 * the output histogram.
 *
 * The message formats below are also read by aesara_bincount_core/_c_code.py, so
 * the Python reference implementation (Op.perform) and the C code raise the
 * very same text.  Keep one message per #define, on one line.
 *
 * Valid C99 and C++ on its own: Aesara compiles it as C++, the tests also
 * compile it as C.
 */
#ifndef AESARA_BINCOUNT_COMMON_H
#define AESARA_BINCOUNT_COMMON_H

#include <Python.h>
#ifndef NPY_NO_DEPRECATED_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#endif
#include <numpy/arrayobject.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* ValueError: a negative value in the bincount form (numpy.bincount refuses them too). */
#define BC_MSG_NEGATIVE "bincount: x holds the negative value %lld at position %lld; bincount counts non-negative integers only"
/* IndexError: an index outside [-n, n) in the scatter-add form (as np.add.at). */
#define BC_MSG_INDEX "scatter-add: index %s at position %lld is out of bounds for a histogram of length %lld"
/* ValueError: max(x) + 1 cannot be represented as an array length. */
#define BC_MSG_TOO_LARGE "bincount: the largest value of x, %llu, needs more bins than an array can hold"
/* MemoryError: the output would not fit in this machine's memory. */
#define BC_MSG_NO_MEMORY "bincount: an output of %lld bins of %lld bytes each does not fit in memory"
/* ValueError: a negative minlength. */
#define BC_MSG_MINLENGTH "bincount: minlength must be non-negative, got %lld"
/* ValueError: a negative length for the zero-filled base of the scatter-add form. */
#define BC_MSG_LENGTH "scatter-add: the histogram length must be non-negative, got %lld"
/* ValueError: weights and x differ in length (bincount form). */
#define BC_MSG_WEIGHTS "bincount: weights has %lld elements but x has %lld; they must have the same length"
/* ValueError: increments that cannot be broadcast to the indices (scatter-add form). */
#define BC_MSG_WEIGHTS_BCAST "scatter-add: increments of length %lld cannot be broadcast to %lld indices"
/* ValueError: an input of the wrong number of dimensions reached the C code. */
#define BC_MSG_NDIM "bincount: %s must have %d dimension(s), got %d"
/* IndexError: a row index outside [-n, n) in the scatter-add of rows (ScatterAdd; as np.add.at). */
#define BC_MSG_ROW_INDEX "scatter-add: index %s at position %lld is out of bounds for axis 0 with size %lld"
/* ValueError: increments that cannot be broadcast to the indexed rows, shape (len(idx), *base.shape[1:]). */
#define BC_MSG_ROWS_BCAST "scatter-add: increments of shape %s cannot be broadcast to the indexed shape %s"
/* ValueError: a negative dimension of the zero-filled base (ScatterAdd onto zeros). */
#define BC_MSG_ZEROS_SHAPE "scatter-add: the shape of the zero-filled base must be non-negative, got %s"
/* MemoryError: the zero-filled base (ScatterAdd onto zeros) would not fit in this machine's memory. */
#define BC_MSG_ZEROS_MEMORY "scatter-add: a zero-filled base of shape %s and %lld bytes per element does not fit in memory"
/* The 1-D inputs of a fused elementwise x or weights (FusedBincount) differ in
 * length, and neither length is 1 (a length of 1 broadcasts, as in Elemwise). */
#define BC_MSG_FUSED_LENGTH "bincount: the inputs of the elementwise %s have lengths %lld and %lld; they must have the same length, or length 1"
/* IndexError: an index outside [-size, size) on one axis of a scatter or gather with several index arrays (LinearIndex; as numpy). */
#define BC_MSG_AXIS_INDEX "scatter: index %s at position %lld of the broadcast indices is out of bounds for axis %lld with size %lld"
/* IndexError: index arrays whose shapes do not broadcast together (LinearIndex; as numpy). */
#define BC_MSG_INDEX_BCAST "scatter: shape mismatch: indexing arrays could not be broadcast together with shapes %s"

/* Widening conversions written as functions.  A range test such as
 * `(npy_int64)v < 0` on a narrow unsigned type is constant, and gcc's
 * -Wtype-limits flags it; the code that instantiates such tests for every
 * integer dtype calls these instead. */
static inline npy_int64 bc_as_i64(npy_int64 v) { return v; }
static inline npy_uint64 bc_as_u64(npy_uint64 v) { return v; }

/* Whether a value of x is refused, given as `negative` (below 0; never for an
 * unsigned dtype), `s` (it as signed) and `u` (as unsigned): the bincount
 * form refuses negative values and values of NPY_MAX_INTP or more, the
 * scatter-add form (`scatter`) values outside [-n, n).  The one range test of
 * Bincount and FusedBincount (bc_is_bad, bc_f_is_bad wrap it per dtype). */
static inline int bc_value_is_bad(int negative, npy_int64 s, npy_uint64 u, int scatter, npy_intp n)
{
    if (scatter)
        return negative ? s < -(npy_int64)n : u >= (npy_uint64)n;
    return negative || u >= (npy_uint64)NPY_MAX_INTP;
}

/*
 * Whether an output of `nitems` items of `itemsize` bytes is acceptable: its
 * size in bytes neither overflows nor exceeds the physical memory of the
 * machine.  An allocator with overcommit may hand out a larger block and kill
 * the process later, when the pages are touched; a clear error is better.
 */
static int bc_output_fits(npy_intp nitems, npy_intp itemsize)
{
    unsigned long long bytes;
    long pages = -1, page_size = -1;
    if (nitems < 0 || itemsize <= 0 || nitems > NPY_MAX_INTP / itemsize)
        return 0;
    bytes = (unsigned long long)nitems * (unsigned long long)itemsize;
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    pages = sysconf(_SC_PHYS_PAGES);
    page_size = sysconf(_SC_PAGESIZE);
#endif
    return !(pages > 0 && page_size > 0 &&
             bytes > (unsigned long long)pages * (unsigned long long)page_size);
}

/*
 * Refuse, with a MemoryError, an output of `nbins` items of `itemsize` bytes
 * that bc_output_fits refuses.
 * Returns 0 when the size is acceptable, -1 with an exception set otherwise.
 */
static int bc_check_output_size(npy_intp nbins, npy_intp itemsize)
{
    if (!bc_output_fits(nbins, itemsize)) {
        PyErr_Format(PyExc_MemoryError, BC_MSG_NO_MEMORY, (long long)nbins,
                     (long long)itemsize);
        return -1;
    }
    return 0;
}

/* Start of part k of `parts` equal parts of [0, size), without overflow. */
static npy_intp bc_split(npy_intp size, npy_intp parts, npy_intp k)
{
    const npy_intp q = size / parts, r = size % parts;
    return q * k + (r * k) / parts;
}

/* Ask for transparent huge pages on the whole pages inside [p, p + bytes),
 * when the block is large (4 MiB or more).  Random updates over a large
 * histogram then miss the TLB far less often.  Advice only: ignored where
 * unsupported. */
#ifndef BC_HUGE_PAGE_MIN_BYTES
#define BC_HUGE_PAGE_MIN_BYTES (4 << 20)
#endif
static void bc_advise_huge_pages(void *p, size_t bytes)
{
#if defined(MADV_HUGEPAGE)
    const size_t page = 4096;
    if (p != NULL && bytes >= (size_t)BC_HUGE_PAGE_MIN_BYTES) {
        const size_t start = ((size_t)p + page - 1) & ~(page - 1);
        const size_t end = ((size_t)p + bytes) & ~(page - 1);
        if (end > start)
            (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
    }
#else
    (void)p;
    (void)bytes;
#endif
}

/* calloc with huge-page advice for large blocks; NULL on overflow or failure. */
static void *bc_calloc(size_t count, size_t size)
{
    void *p;
    if (size != 0 && count > ((size_t)-1) / size)
        return NULL;
    p = calloc(count, size);
    bc_advise_huge_pages(p, count * size);
    return p;
}

/*
 * A new 1-D array of `nbins` items of numpy type `typenum`, zero-filled when
 * `zero` is non-zero and uninitialised otherwise, or NULL with an exception
 * set (MemoryError when it cannot be allocated).
 */
static PyArrayObject *bc_new_array(npy_intp nbins, int typenum, int zero)
{
    npy_intp dims[1];
    PyArrayObject *out;
    PyArray_Descr *descr = PyArray_DescrFromType(typenum);
    if (descr == NULL)
        return NULL;
    if (bc_check_output_size(nbins, (npy_intp)descr->elsize) != 0) {
        Py_DECREF(descr);
        return NULL;
    }
    dims[0] = nbins;
    /* PyArray_Zeros and PyArray_Empty steal the reference to descr. */
    out = (PyArrayObject *)(zero ? PyArray_Zeros(1, dims, descr, 0)
                                 : PyArray_Empty(1, dims, descr, 0));
    if (out != NULL)
        bc_advise_huge_pages(PyArray_DATA(out), (size_t)PyArray_NBYTES(out));
    return out;
}

/* A new zero-filled 1-D array (see bc_new_array). */
static PyArrayObject *bc_new_zeros(npy_intp nbins, int typenum)
{
    return bc_new_array(nbins, typenum, 1);
}

/* Check that `a` has `ndim` dimensions; `what` names it in the message. */
static int bc_check_ndim(PyArrayObject *a, int ndim, const char *what)
{
    if (PyArray_NDIM(a) != ndim) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, what, ndim, PyArray_NDIM(a));
        return -1;
    }
    return 0;
}

/*
 * Check the shape of the weights: (N,) or () (one weight broadcast to every
 * element) in the bincount form; (N,), (1,) or () (broadcast) in the
 * scatter-add form, as numpy.add.at.  The bincount form takes a weight of
 * length 1 only when it is 0-d: a (1,) vector for N != 1 is refused, as
 * numpy.bincount refuses it.  `ndim` and `wlen` describe the weights (wlen
 * is 1 when 0-d), `size` is N.  Returns 0, or -1 with a ValueError set.
 */
static int bc_check_weights(int scatter, int ndim, long long wlen, long long size)
{
    if (ndim > 1) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "weights", 1, ndim);
        return -1;
    }
    if (!scatter && ndim == 1 && wlen != size) {
        PyErr_Format(PyExc_ValueError, BC_MSG_WEIGHTS, wlen, size);
        return -1;
    }
    if (scatter && wlen != size && wlen != 1) {
        PyErr_Format(PyExc_ValueError, BC_MSG_WEIGHTS_BCAST, wlen, size);
        return -1;
    }
    return 0;
}

/* Read an integer 0-d array (any integer dtype) as a long long. */
static int bc_read_scalar(PyArrayObject *a, const char *what, long long *value)
{
    PyObject *item;
    if (bc_check_ndim(a, 0, what) != 0)
        return -1;
    item = PyArray_GETITEM(a, (const char *)PyArray_DATA(a));
    if (item == NULL)
        return -1;
    *value = PyLong_AsLongLong(item);
    Py_DECREF(item);
    if (*value == -1 && PyErr_Occurred())
        return -1;
    return 0;
}

/* Read the Op's input n: minlength (bincount form) or the histogram length
 * (scatter-add form), which must be non-negative. */
static int bc_read_length(PyArrayObject *n_in, int scatter, long long *n)
{
    if (bc_read_scalar(n_in, scatter ? "the histogram length" : "minlength", n) != 0)
        return -1;
    if (*n < 0) {
        PyErr_Format(PyExc_ValueError, scatter ? BC_MSG_LENGTH : BC_MSG_MINLENGTH, *n);
        return -1;
    }
    return 0;
}

#endif /* AESARA_BINCOUNT_COMMON_H */
