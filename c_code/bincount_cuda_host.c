/*
 * bincount_cuda_host.c -- the host C code of aesara_bincount.gpu.GpuBincount.
 *
 * Entry point (called from the Op's one-line c_code glue):
 *
 *   int APPLY_SPECIFIC(gpu_bincount)(PyObject *x,            // cupy.ndarray (N,)
 *                                    PyArrayObject *n,        // int64 scalar
 *                                    PyObject *weights,       // cupy.ndarray or NULL
 *                                    PyObject **out);         // cupy.ndarray (n_bins,)
 *
 * It returns 0 on success and -1 with a Python exception set on failure (the
 * same types and messages as the CPU Op, from bincount_common.h); on failure
 * *out is left as it was and no input is written.
 *
 * The kernels (bincount_cuda_kernel.cu) are compiled with NVRTC and loaded
 * by the Python kernel layer (aesara_bincount_core/cuda/kernels.py): the first
 * call in a CUDA context asks it, through the Python C API, for the
 * CUfunction handles and the device's figures, and keeps them.  Launches
 * then go straight through the CUDA driver API (bincount_cuda_driver.h),
 * on the stream CuPy is using; buffers are cupy.ndarray objects from CuPy's
 * memory pool.  The call holds the GIL throughout.
 *
 * The Op passes, as macros: BC_SCATTER (the form), BC_X_DTYPE_NAME,
 * BC_X_SIGNED, BC_HIST_KERNEL and BC_FINISH_KERNEL (kernel names, the latter
 * "" when the accumulator is the output), BC_BUF_TYPENUM / BC_BUF_ITEMSIZE
 * (numpy type and size of the accumulator buffer) and BC_SHARED_ITEMSIZE.
 * Compiled on its own, it instantiates the int64 count of the bincount form,
 * which the test-suite uses to check that the file stands alone.
 */

#ifndef APPLY_SPECIFIC
#define BC_STANDALONE 1
#define APPLY_SPECIFIC(str) str##_standalone
#define TYPENUM_OUTPUT_0 NPY_INT64
#define ITEMSIZE_OUTPUT_0 8
#define BC_SCATTER 0
#define BC_X_DTYPE_NAME "int64"
#define BC_X_SIGNED 1
#define BC_HIST_KERNEL "bincount_hist_i64_c64"
#define BC_FINISH_KERNEL ""
#define BC_BUF_TYPENUM NPY_INT64
#define BC_BUF_ITEMSIZE 8
#define BC_SHARED_ITEMSIZE 4
#endif

#include "bincount_common.h"
#include "bincount_cuda.h"
#include "bincount_cuda_driver.h"
#include "gpuarray_helper.h"
#include <stdio.h>

#ifdef DTYPE_INPUT_2
#define BC_WEIGHTED 1
#else
#define BC_WEIGHTED 0
#endif
#define BC_HAS_FINISH (sizeof(BC_FINISH_KERNEL) > 1)
#define BC_STATUS_ELEMS (BC_CUDA_STATUS_BYTES / BC_BUF_ITEMSIZE)

/*
 * Launch strategy (the numbers are the BC_CUDA_* constants of
 * bincount_cuda.h; kernels.py describes the same steps for the Python path):
 *
 *   1. The first pass provides C bins: n in the scatter-add form; in the
 *      bincount form max(minlength, guess), the guess being the previous
 *      call's length (at most BC_CUDA_FIRST_PASS_MAX_BINS) or
 *      BC_CUDA_FIRST_PASS_BINS.  It counts the values below C and finds
 *      max(x) and the first refused position in the same pass.
 *   2. One copy of the 32-byte status to the host and one stream
 *      synchronization: the only ones of a call.  Refused values raise here.
 *   3. Only if max(x) + 1 > C, a second pass counts [C, max(x) + 1) into a
 *      bigger buffer that starts with the first pass's bins.
 *   4. A pass runs min(BC_CUDA_BLOCKS_PER_SM * multiprocessors,
 *      N / BC_CUDA_MIN_ELEMS_PER_BLOCK) blocks of BC_CUDA_THREADS threads;
 *      each keeps max(BC_CUDA_SHARED_MIN_BINS, elements per block) bins of
 *      its window in shared memory (what fits in its share of the
 *      multiprocessor), in up to BC_CUDA_MAX_COPIES replicated copies while
 *      each copy gets BC_CUDA_COPY_MIN_ELEMS_PER_BIN elements per bin; the
 *      rest of the window is counted with global atomics
 *      (bc_cuda_make_plan).
 *   5. A result much smaller than the first pass's buffer (by
 *      BC_CUDA_COMPACT_MIN_BYTES) is copied out; narrow and float outputs are
 *      converted from the accumulator by the finish kernel.
 */

/* What the first call in a context learns, and the capacity guess. */
typedef struct {
    bc_CUcontext context;
    bc_CUfunction hist, finish;
    long long multiprocessors, shared_budget;
    unsigned long long total_memory;
    long long last_length;
} APPLY_SPECIFIC(bc_gpu_state);

static APPLY_SPECIFIC(bc_gpu_state) APPLY_SPECIFIC(bc_state);

/* Make sure the kernels are loaded in the current context (asking the Python
 * kernel layer the first time), and that the inputs live on its device. */
static int APPLY_SPECIFIC(bc_gpu_prepare)(const bc_cuda_api *api,
                                          APPLY_SPECIFIC(bc_gpu_state) *st)
{
    bc_CUcontext ctx = NULL;
    PyObject *module, *res;
    unsigned long long v[6];
    int i;
    if (bc_cuda_check(api->CtxGetCurrent(&ctx), "cuCtxGetCurrent") != 0)
        return -1;
    if (ctx != NULL && ctx == st->context)
        return 0;
    module = PyImport_ImportModule("aesara_bincount_core.cuda.kernels");
    if (module == NULL)
        return -1;
    res = PyObject_CallMethod(module, "c_kernel_handles", "sss", BC_X_DTYPE_NAME, BC_HIST_KERNEL,
                              BC_FINISH_KERNEL);
    Py_DECREF(module);
    if (res == NULL)
        return -1;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 6) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_RuntimeError, "GpuBincount: c_kernel_handles returned a bad value");
        return -1;
    }
    for (i = 0; i < 6; i++)
        v[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(res, i));
    Py_DECREF(res);
    if (PyErr_Occurred())
        return -1;
    st->context = (bc_CUcontext)(size_t)v[0];
    st->hist = (bc_CUfunction)(size_t)v[1];
    st->finish = (bc_CUfunction)(size_t)v[2];
    st->multiprocessors = (long long)v[3];
    st->shared_budget = (long long)v[4];
    st->total_memory = v[5];
    return 0;
}

static int APPLY_SPECIFIC(bc_gpu_check_device)(const bc_cuda_api *api, const bc_gpuarray_info *a,
                                               const char *what)
{
    bc_CUdevice dev = 0;
    if (bc_cuda_check(api->CtxGetDevice(&dev), "cuCtxGetDevice") != 0)
        return -1;
    if (a->device != dev) {
        PyErr_Format(PyExc_ValueError,
                     "GpuBincount: %s lives on device %d, but the current device is %d; run the "
                     "function under `with cupy.cuda.Device(%d)`",
                     what, a->device, dev, a->device);
        return -1;
    }
    return 0;
}

/* MemoryError (BC_MSG_NO_MEMORY) unless `bins` output items fit on the device. */
static int APPLY_SPECIFIC(bc_gpu_check_size)(const APPLY_SPECIFIC(bc_gpu_state) *st,
                                             long long bins)
{
    if (bins < 0 || bins > NPY_MAX_INT64 / ITEMSIZE_OUTPUT_0 ||
        (unsigned long long)bins * ITEMSIZE_OUTPUT_0 > st->total_memory) {
        PyErr_Format(PyExc_MemoryError, BC_MSG_NO_MEMORY, bins, (long long)ITEMSIZE_OUTPUT_0);
        return -1;
    }
    return 0;
}

/* A new cupy array of `length` items of numpy type `typenum`; a CuPy
 * out-of-memory error becomes MemoryError(BC_MSG_NO_MEMORY). */
static PyObject *APPLY_SPECIFIC(bc_gpu_array)(long long length, int typenum, int zero,
                                              long long reported_bins)
{
    PyArray_Descr *descr = PyArray_DescrFromType(typenum);
    PyObject *a;
    if (descr == NULL)
        return NULL;
    a = bc_cupy_new(length, (PyObject *)descr, zero);
    Py_DECREF(descr);
    if (a == NULL && PyErr_ExceptionMatches(PyExc_MemoryError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_MemoryError, BC_MSG_NO_MEMORY, reported_bins,
                     (long long)ITEMSIZE_OUTPUT_0);
    }
    return a;
}

/* A zeroed accumulator of `bins` bins (padded to 8 bytes) and a bc_status. */
static PyObject *APPLY_SPECIFIC(bc_gpu_buffer)(long long bins, long long *padded,
                                               unsigned long long *ptr)
{
    PyObject *buf;
    *padded = bins + (BC_BUF_ITEMSIZE == 4 ? bins % 2 : 0);
    buf = APPLY_SPECIFIC(bc_gpu_array)(*padded + BC_STATUS_ELEMS, BC_BUF_TYPENUM, 1, bins);
    if (buf != NULL && bc_gpuarray_ptr(buf, ptr) != 0)
        Py_CLEAR(buf);
    return buf;
}

/* Queue one histogram pass over the window [lo, hi). */
static int APPLY_SPECIFIC(bc_gpu_hist)(const bc_cuda_api *api,
                                       const APPLY_SPECIFIC(bc_gpu_state) *st,
                                       const bc_gpuarray_info *xi, unsigned long long w,
                                       long long w_stride, unsigned long long buf,
                                       long long padded, long long lo, long long hi, long long n,
                                       bc_CUstream stream)
{
    bc_hist_params p;
    void *args[1];
    const bc_cuda_plan plan = bc_cuda_make_plan(xi->length, hi - lo, BC_SHARED_ITEMSIZE,
                                                st->multiprocessors, st->shared_budget);
    memset(&p, 0, sizeof(p));
    p.x = xi->ptr;
    p.w = w;
    p.out = buf;
    p.status = buf + (unsigned long long)padded * BC_BUF_ITEMSIZE;
    p.size = xi->length;
    p.x_stride = xi->stride;
    p.w_stride = w_stride;
    p.lo = lo;
    p.hi = hi;
    p.n = n;
    p.shared_bins = plan.shared_bins;
    p.copies = plan.copies;
    p.scatter = BC_SCATTER;
    args[0] = &p;
    return bc_cuda_check(api->LaunchKernel(st->hist, (unsigned)plan.blocks, 1, 1, BC_CUDA_THREADS,
                                           1, 1, (unsigned)plan.shared_bytes, stream, args, NULL),
                         "cuLaunchKernel(" BC_HIST_KERNEL ")");
}

/* Raise the error a bad status reports; returns 0 if there is none. */
static int APPLY_SPECIFIC(bc_gpu_raise)(const bc_status *s, long long n)
{
    unsigned long long pos;
    char text[32];
    if (s->bad_pos_inv == 0) {
#if !BC_SCATTER
        if (s->max_value >= (unsigned long long)NPY_MAX_INT64) {
            PyErr_Format(PyExc_ValueError, BC_MSG_TOO_LARGE, (unsigned long long)s->max_value);
            return -1;
        }
#endif
        return 0;
    }
    pos = ~s->bad_pos_inv;
    if (BC_X_SIGNED)
        snprintf(text, sizeof(text), "%lld", (long long)s->bad_value);
    else
        snprintf(text, sizeof(text), "%llu", (unsigned long long)s->bad_value);
#if BC_SCATTER
    PyErr_Format(PyExc_IndexError, BC_MSG_INDEX, text, (long long)pos, n);
#else
    (void)n;
    PyErr_Format(PyExc_ValueError, BC_MSG_NEGATIVE, (long long)s->bad_value, (long long)pos);
#endif
    return -1;
}

int APPLY_SPECIFIC(gpu_bincount)(PyObject *x, PyArrayObject *n_in, PyObject *w_in,
                                 PyObject **out)
{
    APPLY_SPECIFIC(bc_gpu_state) *st = &APPLY_SPECIFIC(bc_state);
    const bc_cuda_api *api;
    bc_gpuarray_info xi, wi;
    long long n, bins, padded, length;
    unsigned long long buf_ptr, w_ptr = 0, stream_handle;
    long long w_stride = 0;
    bc_CUstream stream;
    bc_status status;
    PyObject *buf = NULL, *res = NULL;

    memset(&wi, 0, sizeof(wi));
    if (bc_gpuarray_info_of(x, "x", &xi) != 0)
        return -1;
    if (xi.ndim != 1) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "x", 1, xi.ndim);
        return -1;
    }
    if (bc_read_length(n_in, BC_SCATTER, &n) != 0)
        return -1;
    api = bc_cuda();
    if (api == NULL || APPLY_SPECIFIC(bc_gpu_prepare)(api, st) != 0 ||
        APPLY_SPECIFIC(bc_gpu_check_size)(st, n) != 0)
        return -1;
#if BC_WEIGHTED
    if (w_in == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "GpuBincount: weights missing");
        return -1;
    }
    if (bc_gpuarray_info_of(w_in, "weights", &wi) != 0 ||
        bc_check_weights(BC_SCATTER, wi.ndim, wi.length, xi.length) != 0)
        return -1;
    w_ptr = wi.ptr;
    w_stride = wi.length == xi.length ? wi.stride : 0;
    if (APPLY_SPECIFIC(bc_gpu_check_device)(api, &wi, "weights") != 0)
        return -1;
#else
    (void)w_in;
#endif
    if (APPLY_SPECIFIC(bc_gpu_check_device)(api, &xi, "x") != 0)
        return -1;

    if (xi.length == 0) {
        res = APPLY_SPECIFIC(bc_gpu_array)(n, TYPENUM_OUTPUT_0, 1, n);
        if (res == NULL)
            return -1;
        Py_XDECREF(*out);
        *out = res;
        return 0;
    }
    if (bc_cupy_current_stream(&stream_handle) != 0)
        return -1;
    stream = (bc_CUstream)(size_t)stream_handle;

    /* First pass: C bins, max(x) and the first refused position. */
    if (BC_SCATTER) {
        bins = n;
    } else {
        long long guess = st->last_length > 0 ? st->last_length : BC_CUDA_FIRST_PASS_BINS;
        if (guess > BC_CUDA_FIRST_PASS_MAX_BINS)
            guess = BC_CUDA_FIRST_PASS_MAX_BINS;
        bins = n > guess ? n : guess;
    }
    buf = APPLY_SPECIFIC(bc_gpu_buffer)(bins, &padded, &buf_ptr);
    if (buf == NULL)
        return -1;
    if (APPLY_SPECIFIC(bc_gpu_hist)(api, st, &xi, w_ptr, w_stride, buf_ptr, padded, 0, bins, n,
                                    stream) != 0)
        goto fail;
    /* synchronize! the one device-to-host copy of the call */
    {
        void *host = bc_cuda_status_buffer(api);
        if (bc_cuda_check(api->MemcpyDtoHAsync(host, buf_ptr + (unsigned long long)padded *
                                                             BC_BUF_ITEMSIZE,
                                               BC_CUDA_STATUS_BYTES, stream),
                          "cuMemcpyDtoHAsync") != 0 ||
            bc_cuda_check(api->StreamSynchronize(stream), "cuStreamSynchronize") != 0)
            goto fail;
        memcpy(&status, host, sizeof(status));
    }
    if (APPLY_SPECIFIC(bc_gpu_raise)(&status, n) != 0)
        goto fail;
    length = n;
#if !BC_SCATTER
    if ((long long)status.max_value + 1 > length)
        length = (long long)status.max_value + 1;
#endif
    if (APPLY_SPECIFIC(bc_gpu_check_size)(st, length) != 0)
        goto fail;

    /* Second pass, only for values the first could not hold. */
    if (length > bins) {
        long long padded2;
        unsigned long long ptr2;
        PyObject *buf2 = APPLY_SPECIFIC(bc_gpu_buffer)(length, &padded2, &ptr2);
        if (buf2 == NULL)
            goto fail;
        Py_DECREF(buf);
        buf = buf2;
        if (bc_cuda_check(api->MemcpyDtoDAsync(ptr2, buf_ptr,
                                               (size_t)bins * BC_BUF_ITEMSIZE, stream),
                          "cuMemcpyDtoDAsync") != 0)
            goto fail;
        if (APPLY_SPECIFIC(bc_gpu_hist)(api, st, &xi, w_ptr, w_stride, ptr2, padded2, bins,
                                        length, n, stream) != 0)
            goto fail;
        buf_ptr = ptr2;
        padded = padded2;
    }

    if (BC_HAS_FINISH) {
        bc_finish_params p;
        void *args[1];
        long long blocks = bc_ceil_div(length, BC_CUDA_THREADS);
        unsigned long long out_ptr;
        if (blocks > st->multiprocessors * BC_CUDA_BLOCKS_PER_SM)
            blocks = st->multiprocessors * BC_CUDA_BLOCKS_PER_SM;
        if (blocks < 1)
            blocks = 1;
        res = APPLY_SPECIFIC(bc_gpu_array)(length, TYPENUM_OUTPUT_0, 0, length);
        if (res == NULL || bc_gpuarray_ptr(res, &out_ptr) != 0)
            goto fail;
        p.src = buf_ptr;
        p.dst = out_ptr;
        p.count = length;
        args[0] = &p;
        if (bc_cuda_check(api->LaunchKernel(st->finish, (unsigned)blocks, 1, 1, BC_CUDA_THREADS,
                                            1, 1, 0, stream, args, NULL),
                          "cuLaunchKernel(" BC_FINISH_KERNEL ")") != 0)
            goto fail;
    } else if ((padded + BC_STATUS_ELEMS - length) * BC_BUF_ITEMSIZE >
               BC_CUDA_COMPACT_MIN_BYTES) {
        unsigned long long out_ptr;
        res = APPLY_SPECIFIC(bc_gpu_array)(length, TYPENUM_OUTPUT_0, 0, length);
        if (res == NULL || bc_gpuarray_ptr(res, &out_ptr) != 0)
            goto fail;
        if (bc_cuda_check(api->MemcpyDtoDAsync(out_ptr, buf_ptr,
                                               (size_t)length * BC_BUF_ITEMSIZE, stream),
                          "cuMemcpyDtoDAsync") != 0)
            goto fail;
    } else {
        res = PySequence_GetSlice(buf, 0, (Py_ssize_t)length);
        if (res == NULL)
            goto fail;
    }
    Py_DECREF(buf);
    st->last_length = length;
    Py_XDECREF(*out);
    *out = res;
    return 0;

fail:
    Py_XDECREF(res);
    Py_XDECREF(buf);
    return -1;
}

#undef BC_WEIGHTED
#undef BC_HAS_FINISH
#undef BC_STATUS_ELEMS
