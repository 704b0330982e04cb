/*
 * cuda_host/gpu_bincount_op.c -- the host C code of aesara_bincount.gpu.GpuBincount.
 *
 * Entry point (called from the Op's one-line c_code glue):
 *
 *   int APPLY_SPECIFIC(gpu_bincount)(PyObject *x,            // cupy.ndarray (N,)
 *                                    PyArrayObject *n,        // int64 scalar
 *                                    PyObject *weights,       // cupy.ndarray or NULL
 *                                    BC_OUT_OBJECT **out);    // cupy.ndarray (n_bins,), or
 *                                                             // numpy.ndarray with BC_TO_HOST
 *
 * and, for aesara_bincount_core.gpu.fused.GpuFusedBincount (the weights
 * computed inline by a generated kernel; only when BC_FUSED_KINDS is
 * defined):
 *
 *   int APPLY_SPECIFIC(gpu_bincount_fused)(PyObject **ins,     // the inputs but n
 *                                          PyArrayObject *n,
 *                                          PyObject **out);
 *
 * Both return 0 on success and -1 with a Python exception set on failure (the
 * same types and messages as the CPU Op); on failure *out is left as it was
 * and no input is written.
 *
 * This file is the Python side of the launch only.  The launch itself (the
 * checks, the passes, the wait, the result) is bc_cuda_bincount of
 * cuda_host/bincount_launch.h, which the stand-alone kernel layer runs too.  Here:
 *
 *   - the inputs are read off the cupy.ndarray objects (cuda_host/gpuarray_type.h);
 *   - the kernels of the current CUDA context come from the Python kernel
 *     layer (aesara_bincount_core/cuda/modules.py: NVRTC, module loading,
 *     occupancy), asked once per context and kept in a small table keyed by
 *     the context's unique ID (bc_cuda_context_key: a context created at the
 *     address of a destroyed one is another entry), of which each call takes
 *     its own copy (so Python code that
 *     runs during a call -- an allocation, a garbage collection, another
 *     thread on another device -- cannot change what the call launches);
 *   - device memory comes from CuPy's memory pool (cupy.empty; what must be
 *     zero is cleared by the launcher on the stream);
 *   - with BC_TO_HOST (the output goes to the host: the Op took the place of
 *     HostFromGpu), the launcher's bc_cuda_bincount_host (deterministic:
 *     bc_cuda_bincount_det_host, for outputs of window passes) runs instead, on
 *     device and page-locked memory that the context's entry keeps from call
 *     to call (the staging, cuda_host/staging.h): a call then allocates nothing, copies once and
 *     waits once, and the output is a NumPy array (the previous one reused
 *     when it has the length);
 *   - the GIL is released while the stream is waited for;
 *   - a failure becomes an exception through the kernel layer's renderer
 *     (aesara_bincount_core/cuda/errors.py, the project's one message table).
 *
 * The Op passes, as macros: BC_SCATTER (the form), BC_X_DTYPE_NAME and
 * BC_X_SIGNED, BC_HIST_KERNEL and BC_FINISH_KERNEL (kernel names, the latter
 * "" when the accumulator is the output), BC_OUT_DTYPE / BC_BUF_DTYPE (BC_DT_*
 * codes of the output and of the accumulator buffer), BC_BUF_ITEMSIZE and
 * BC_SHARED_ITEMSIZE, BC_TO_HOST (0 or 1: the result comes back to the host
 * in one copy, cuda_host/bincount_to_host.h; the deterministic sum's bucket
 * path takes the device path, then a copy), BC_CHECKED (1: x holds indices checked on the
 * device into the call's status; the scatter-add form then does not wait), and
 * BC_DETERMINISTIC (1: float weights summed by
 * bc_cuda_bincount_det of cuda_host/bincount_det_launch.h, whose kernels
 * BC_HIST_KERNEL and BC_FINISH_KERNEL then name); the fused Op also BC_FUSED_KINDS, BC_FUSED_NX (see
 * gpu_bincount_fused), BC_FUSED_ITEMSIZES (the inputs' itemsizes, a C array
 * initializer) and BC_X_ITEMSIZE, and BC_HIST_KERNEL is then its generated
 * kernel; BC_X_DTYPE_NAME and BC_X_SIGNED describe the computed x.  Compiled on its own, it instantiates the int64 count
 * of the bincount form, which the test-suite uses to check that the file
 * stands alone.
 */

#ifndef APPLY_SPECIFIC
#define BC_STANDALONE 1
#define APPLY_SPECIFIC(str) str##_standalone
#define ITEMSIZE_OUTPUT_0 8
#define BC_SCATTER 0
#define BC_X_DTYPE_NAME "int64"
#define BC_X_SIGNED 1
#define BC_HIST_KERNEL "bincount_hist_i64_c64"
#define BC_FINISH_KERNEL ""
#define BC_OUT_DTYPE BC_DT_INT64
#define BC_BUF_DTYPE BC_DT_INT64
#define BC_BUF_ITEMSIZE 8
#define BC_SHARED_ITEMSIZE 4
#define BC_DETERMINISTIC 0
#endif
#ifndef BC_CHECKED
#define BC_CHECKED 0
#endif
#ifndef BC_TO_HOST
#define BC_TO_HOST 0 /* standalone: -DBC_TO_HOST=1 compiles the other form */
#endif

#if BC_TO_HOST
#define BC_OUT_OBJECT PyArrayObject
#else
#define BC_OUT_OBJECT PyObject
#endif

#include "common/host_helpers.h"
#include "cuda/kernel_defs.h"
#include "cuda_host/driver.h"
#include "cuda_host/bincount_launch.h"
#include "cuda_host/bincount_to_host.h"
#include "cuda_host/bincount_det_launch.h"
#include "cuda_host/gpuarray_type.h"
#include "cuda_host/cupy_callbacks.h"
#include "cuda_host/staging.h"

#ifdef DTYPE_INPUT_2
#define BC_WEIGHTED 1
#else
#define BC_WEIGHTED 0
#endif

/* Contexts whose kernels one compiled module remembers (then the oldest
 * entry is replaced; a replaced context is asked again). */
#define BC_GPU_CONTEXTS 16

/* What the kernel layer gave for one context, the capacity guess, and the
 * staging. */
typedef struct {
    bc_cuda_kernels kernels;
    long long last_length;
    bc_host_staging staging;
} APPLY_SPECIFIC(bc_gpu_entry);

/* The table, read and written only with the GIL held. */
static APPLY_SPECIFIC(bc_gpu_entry) *APPLY_SPECIFIC(bc_gpu_table)(int *next)
{
    static APPLY_SPECIFIC(bc_gpu_entry) table[BC_GPU_CONTEXTS];
    static int oldest = 0;
    if (next != NULL) {
        *next = oldest;
        oldest = (oldest + 1) % BC_GPU_CONTEXTS;
    }
    return table;
}

/*
 * This call's copy of the kernels of the current context (asked of the
 * Python kernel layer the first time, which also makes a context current if
 * the thread has none), and the capacity guess.
 */
static int APPLY_SPECIFIC(bc_gpu_prepare)(const bc_cuda_api *api, bc_cuda_kernels *k,
                                          long long *last_length)
{
    APPLY_SPECIFIC(bc_gpu_entry) *table = APPLY_SPECIFIC(bc_gpu_table)(NULL);
    bc_cuda_error err;
    bc_CUcontext ctx = NULL;
    unsigned long long key;
    PyObject *module, *res;
    unsigned long long v[6];
    int i, slot;
    memset(&err, 0, sizeof(err));
    if (bc_cuda_check(api, api->CtxGetCurrent(&ctx), "cuCtxGetCurrent", &err) != 0)
        return bc_host_raise(&err, "GpuBincount");
    key = bc_cuda_context_key(api, ctx);
    for (i = 0; ctx != NULL && i < BC_GPU_CONTEXTS; i++) {
        if (table[i].kernels.context_key == key) {
            *k = table[i].kernels;
            *last_length = table[i].last_length;
            return 0;
        }
    }
    module = PyImport_ImportModule("aesara_bincount_core.cuda.modules");
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
    k->context = (bc_CUcontext)(size_t)v[0];
    k->context_key = bc_cuda_context_key(api, k->context);
    k->hist = (bc_CUfunction)(size_t)v[1];
    k->finish = (bc_CUfunction)(size_t)v[2];
    k->resident_blocks = (long long)v[3];
    k->shared_budget = (long long)v[4];
    k->total_memory = v[5];
    *last_length = 0;
    /* Another call may have filled the entry meanwhile (the kernel layer ran
     * Python code): it is the same context, the same kernels. */
    for (i = 0; i < BC_GPU_CONTEXTS; i++) {
        if (table[i].kernels.context_key == k->context_key)
            return 0;
    }
    APPLY_SPECIFIC(bc_gpu_table)(&slot);
    bc_host_staging_free(api, &table[slot].staging);
    table[slot].kernels = *k;
    table[slot].last_length = 0;
    return 0;
}

/* Take the staging of the context `key` out of its entry into *st (empty
 * when the entry has none, or another call holds it). */
static void APPLY_SPECIFIC(bc_gpu_staging_take)(unsigned long long key,
                                                bc_host_staging *st)
{
    APPLY_SPECIFIC(bc_gpu_entry) *table = APPLY_SPECIFIC(bc_gpu_table)(NULL);
    int i;
    memset(st, 0, sizeof(*st));
    for (i = 0; i < BC_GPU_CONTEXTS; i++) {
        if (table[i].kernels.context_key == key) {
            *st = table[i].staging;
            memset(&table[i].staging, 0, sizeof(table[i].staging));
            return;
        }
    }
}

/* Give *st back to the entry of context `key`, or free it (the entry is
 * gone, or another call gave one back meanwhile, or `idle` is 0: work
 * queued on it may still be pending after a failure). */
static void APPLY_SPECIFIC(bc_gpu_staging_give_back)(const bc_cuda_api *api,
                                                     unsigned long long key,
                                                     bc_host_staging *st,
                                                     int idle)
{
    APPLY_SPECIFIC(bc_gpu_entry) *table = APPLY_SPECIFIC(bc_gpu_table)(NULL);
    int i;
    for (i = 0; idle && i < BC_GPU_CONTEXTS; i++) {
        if (table[i].kernels.context_key == key && table[i].staging.device_array == NULL &&
            table[i].staging.pinned == NULL) {
            table[i].staging = *st;
            memset(st, 0, sizeof(*st));
            return;
        }
    }
    bc_host_staging_free(api, st);
}

/* Remember the length of a call in the context's entry, as the next guess. */
static void APPLY_SPECIFIC(bc_gpu_remember)(unsigned long long context_key, long long length)
{
    APPLY_SPECIFIC(bc_gpu_entry) *table = APPLY_SPECIFIC(bc_gpu_table)(NULL);
    int i;
    for (i = 0; i < BC_GPU_CONTEXTS; i++) {
        if (table[i].kernels.context_key == context_key)
            table[i].last_length = length;
    }
}

/* The bc_cuda_array of a cupy.ndarray. */
static int APPLY_SPECIFIC(bc_gpu_describe)(PyObject *a, const char *what, bc_cuda_array *out)
{
    bc_gpuarray_info info;
    if (bc_gpuarray_info_of(a, what, &info) != 0)
        return -1;
    out->ptr = info.ptr;
    out->length = info.length;
    out->stride_bytes = info.stride_bytes;
    out->itemsize = info.itemsize;
    out->ndim = info.ndim;
    out->device = info.device;
    return 0;
}

/*
 * The call, once for both entry points: weights `w_in` (a cupy.ndarray, or
 * NULL when counting or fused) or the fused inputs (`fused` and the GPU
 * arrays among them, NULL when not fused).
 */
static int APPLY_SPECIFIC(bc_gpu_call)(const bc_cuda_bincount_call *call, PyObject **out)
{
    bc_cuda_bincount_call c = *call;
    bc_cuda_kernels k;
    bc_cuda_host host;
    bc_cuda_result res;
    bc_cuda_error err;
    const bc_cuda_api *api;
    unsigned long long stream;
    PyObject *result;

    memset(&err, 0, sizeof(err));
    api = bc_cuda_load(&err);
    if (api == NULL)
        return bc_host_raise(&err, "GpuBincount");
    if (APPLY_SPECIFIC(bc_gpu_prepare)(api, &k, &c.capacity_hint) != 0 ||
        bc_cupy_current_stream(&stream) != 0)
        return -1;
    c.scatter = BC_SCATTER;
    c.checked = BC_CHECKED;
    c.x_signed = BC_X_SIGNED;
    c.out_dtype = BC_OUT_DTYPE;
    c.out_itemsize = ITEMSIZE_OUTPUT_0;
    c.buffer_dtype = BC_BUF_DTYPE;
    c.buffer_itemsize = BC_BUF_ITEMSIZE;
    c.shared_itemsize = BC_SHARED_ITEMSIZE;
    c.stream = (bc_CUstream)(size_t)stream;
    host.ctx = NULL;
    bc_host_cupy(&host);

#if BC_TO_HOST
    {
        bc_host_staging own;
        bc_host_stage_ctx sctx;
        bc_cuda_host_result hr;
        int rc;
        APPLY_SPECIFIC(bc_gpu_staging_take)(k.context_key, &own);
        sctx.api = api;
        sctx.own = &own;
        /* the deterministic launcher's staging holds output bins */
        rc = BC_DETERMINISTIC
                 ? bc_cuda_bincount_det_host(api, &c, &k, &host, bc_host_stage, &sctx, &hr, &err)
                 : bc_cuda_bincount_host(api, &c, &k, &host, bc_host_stage, &sctx, &hr, &err);
        if (rc == 0 && !hr.device_path) {
            rc = bc_host_numpy_output(&hr, BC_OUT_DTYPE,
                                      BC_DETERMINISTIC ? BC_OUT_DTYPE : BC_BUF_DTYPE, out);
            if (rc == 0 && !BC_SCATTER && c.x.length > 0)
                APPLY_SPECIFIC(bc_gpu_remember)(k.context_key, hr.length);
            APPLY_SPECIFIC(bc_gpu_staging_give_back)(api, k.context_key, &own, 1);
            return rc;
        }
        APPLY_SPECIFIC(bc_gpu_staging_give_back)(api, k.context_key, &own, rc == 0);
        if (rc != 0)
            return bc_host_raise(&err, "GpuBincount");
        /* Too large for the staging (or, deterministic, the bucket path or
         * a length past the guess): the device path, then a copy. */
    }
#endif
    if ((BC_DETERMINISTIC ? bc_cuda_bincount_det(api, &c, &k, &host, &res, &err)
                          : bc_cuda_bincount(api, &c, &k, &host, &res, &err)) != 0)
        return bc_host_raise(&err, "GpuBincount");
    result = (PyObject *)res.array;
    if (res.view) {
        PyObject *whole = result;
        result = PySequence_GetSlice(whole, 0, (Py_ssize_t)res.length);
        Py_DECREF(whole);
        if (result == NULL)
            return -1;
    }
    if (!BC_SCATTER && c.x.length > 0)
        APPLY_SPECIFIC(bc_gpu_remember)(k.context_key, res.length);
#if BC_TO_HOST
    {
        PyObject *host_copy = PyObject_CallMethod(result, "get", NULL); /* synchronize! */
        Py_DECREF(result);
        if (host_copy == NULL)
            return -1;
        result = host_copy;
    }
#endif
    Py_XDECREF(*out);
    *out = result;
    return 0;
}

int APPLY_SPECIFIC(gpu_bincount)(PyObject *x, PyArrayObject *n_in, PyObject *w_in,
                                 BC_OUT_OBJECT **out)
{
    bc_cuda_bincount_call c;
    memset(&c, 0, sizeof(c));
    if (APPLY_SPECIFIC(bc_gpu_describe)(x, "x", &c.x) != 0 ||
        bc_read_scalar(n_in, BC_SCATTER ? "the histogram length" : "minlength", &c.n) != 0)
        return -1;
#if BC_WEIGHTED
    if (w_in == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "GpuBincount: weights missing");
        return -1;
    }
    if (APPLY_SPECIFIC(bc_gpu_describe)(w_in, "weights", &c.weights) != 0)
        return -1;
    c.weighted = 1;
#else
    (void)w_in;
#endif
    return APPLY_SPECIFIC(bc_gpu_call)(&c, (PyObject **)out);
}

#ifdef BC_FUSED_KINDS
/*
 * The fused x and weights: ins[] holds the node's inputs but n, the first
 * BC_FUSED_NX those of x.  BC_FUSED_KINDS says what each is: 'x' the stored
 * x, 'w' the stored weights, 'a' a GPU array input of a scalar graph (a
 * data pointer and a stride in elements, 0 for one element: broadcast),
 * 's' a host scalar input (its bits).  The value computed by a graph has
 * the length of its arrays, which must be one length where a length of 1
 * broadcasts (else ValueError, as Elemwise's); the launcher checks the
 * weights' length against x's as it checks a weights array's.
 */
int APPLY_SPECIFIC(gpu_bincount_fused)(PyObject **ins, PyArrayObject *n_in, PyObject **out)
{
    static const char kinds[] = BC_FUSED_KINDS;
    static const int itemsizes[] = BC_FUSED_ITEMSIZES;
    const int nin = (int)sizeof(kinds) - 1;
    bc_cuda_bincount_call c;
    bc_fused_params f;
    bc_cuda_array arrays[BC_CUDA_FUSED_MAX_ARGS];
    long long length[2] = {-1, -1}; /* of the computed x, weights */
    int device[2] = {-1, -1};
    int i, narrays = 0, fused_x = 0, fused_w = 0;

    memset(&c, 0, sizeof(c));
    memset(&f, 0, sizeof(f));
    if (bc_read_scalar(n_in, BC_SCATTER ? "the histogram length" : "minlength", &c.n) != 0)
        return -1;
    for (i = 0; i < nin && i < BC_CUDA_FUSED_MAX_ARGS; i++) {
        const int g = i < BC_FUSED_NX ? 0 : 1;
        const char *what = g == 0 ? "x" : "weights";
        if (kinds[i] == 'x' || kinds[i] == 'w') {
            if (APPLY_SPECIFIC(bc_gpu_describe)(ins[i], what, g == 0 ? &c.x : &c.weights) != 0)
                return -1;
            c.weighted |= g;
            continue;
        }
        if (kinds[i] == 's') {
            PyArrayObject *a = (PyArrayObject *)ins[i];
            if (PyArray_SIZE(a) != 1 || PyArray_ITEMSIZE(a) != itemsizes[i]) {
                PyErr_Format(PyExc_ValueError,
                             "GpuFusedBincount: a host input of the elementwise %s is not one value",
                             what);
                return -1;
            }
            memcpy(&f.data[i], PyArray_DATA(a), (size_t)itemsizes[i]);
            continue;
        }
        if (APPLY_SPECIFIC(bc_gpu_describe)(ins[i], what, &arrays[narrays]) != 0)
            return -1;
        {
            const bc_cuda_array *a = &arrays[narrays++];
            f.data[i] = a->ptr;
            f.stride[i] = a->length > 1 ? bc_cuda_stride(a) : 0;
            if (device[g] == -1)
                device[g] = a->device;
            /* The graph's length: that of its arrays, where 1 broadcasts. */
            if (a->length != 1 && length[g] != -1 && a->length != length[g]) {
                PyErr_Format(PyExc_ValueError, BC_MSG_FUSED_LENGTH, what, length[g],
                             a->length);
                return -1;
            }
            if (a->length != 1)
                length[g] = a->length;
            if (g == 0)
                fused_x = 1;
            else
                fused_w = 1;
        }
    }
    if (fused_x) {
        c.x.length = length[0] == -1 ? 1 : length[0];
        c.x.ndim = 1;
        c.x.itemsize = BC_X_ITEMSIZE;
        c.x.device = device[0];
    }
    if (fused_w) {
        c.weighted = 1;
        c.weights.length = length[1] == -1 ? 1 : length[1];
        c.weights.ndim = 1;
        c.weights.itemsize = ITEMSIZE_OUTPUT_0;
        c.weights.device = device[1];
    }
    c.fused = &f;
    c.fused_arrays = arrays;
    c.nfused_arrays = narrays;
    return APPLY_SPECIFIC(bc_gpu_call)(&c, out);
}
#endif

#undef BC_WEIGHTED
#undef BC_GPU_CONTEXTS
#undef BC_OUT_OBJECT
