/*
 * cuda_host/gpu_scatter_add_op.c -- the host C code of GpuScatterAdd, the
 * scatter-add of rows on the GPU (aesara_bincount_core/gpu/scatter_add.py).
 *
 * Entry point (called from the Op's one-line c_code glue):
 *
 *   int APPLY_SPECIFIC(gpu_scatter_add)(SA_BASE_T *base,  // cupy.ndarray (V, *rest),
 *                                                          // or (onto zeros) the int64
 *                                                          // shape, a numpy vector
 *                                       PyObject *inc,     // cupy.ndarray
 *                                       PyObject *idx,     // cupy.ndarray (N,)
 *                                       [PyObject *status, // with SA_CALL_STATUS: the
 *                                                          // call's status, idx checked]
 *                                       PyObject **out);   // cupy.ndarray (V, *rest)
 *
 * It computes what ScatterAdd's cpu/scatter_add.c computes, with the same
 * checks, exceptions and messages (common/scatter_checks.h): out = base (a new
 * zero-filled array, a new C-contiguous copy of the base, or, in place, the
 * base itself); out[idx[i]] += inc[i].  Returns 0, or -1 with a Python
 * exception set; on failure *out is left as it was and nothing has been
 * written to the base.
 *
 * This file is the Python side only: it reads the CuPy arrays, makes the
 * copies CuPy makes best, and runs the one launcher of the rows kernels,
 * bc_cuda_scatter_rows of cuda_host/scatter_add_launch.h (which the kernel layer
 * runs too), on CuPy's current stream; a launch error becomes an exception
 * through aesara_bincount_core/cuda/errors.py.  Layouts:
 *
 *   - out: the kernels need each row's elements C-contiguous (any stride
 *     between rows).  A new output is C-contiguous.  A base updated in place
 *     whose rows are not (a transposed or column-sliced view, rare for a
 *     shared variable) is added into a C-contiguous copy, copied back into
 *     the base once every index has been checked.
 *   - increments: broadcast to (N, *rest) by strides (common/scatter_checks.h);
 *     used as they are when each row is C-contiguous or one value repeated
 *     (any stride between rows, 0 for one row added at every index);
 *     otherwise copied into a C-contiguous (N, *rest) array first.
 *   - idx: any stride.
 *
 * With SA_CALL_STATUS, idx holds int64 rows already checked into [0, V) and
 * the kernels use the call's status (aesara_bincount_core/gpu/call_status.py):
 * no wait (cuda_host/scatter_add_launch.h, step 1b).
 *
 * The Op passes, as macros: SA_ONTO_ZEROS, SA_INPLACE, SA_CALL_STATUS, SA_IDX_SIGNED,
 * SA_IDX_DTYPE_NAME, SA_OUT_DTYPE_NAME, SA_CHECK_KERNEL and SA_ADD_KERNEL
 * (kernel names), SA_ADD_DET (1 when the adding kernel is the deterministic
 * one, which takes dynamic shared memory).  No NumPy C-API call is made but
 * on the shape of a zero-filled base (a NumPy input, which makes Aesara's
 * module import NumPy's C API): the other forms' modules have no NumPy
 * input.
 * Compiled on its own, it instantiates float64 rows onto a copy of the base
 * with int64 indices, which the test-suite uses to check that it stands alone.
 */

#ifndef APPLY_SPECIFIC
#define SA_STANDALONE 1
#define APPLY_SPECIFIC(str) str##_standalone
#define ITEMSIZE_OUTPUT_0 8
#define SA_OUT_DTYPE_NAME "float64"
#define SA_ONTO_ZEROS 0
#define SA_INPLACE 0
#define SA_IDX_SIGNED 1
#define SA_IDX_DTYPE_NAME "int64"
#define SA_CHECK_KERNEL "scatter_rows_check_i64"
#define SA_ADD_KERNEL "scatter_rows_add_i64_f64"
#define SA_ADD_DET 0
#define SA_CALL_STATUS 0
#endif

#include "common/host_helpers.h"
#include "common/scatter_checks.h"
#include "cuda/kernel_defs.h"
#include "cuda_host/driver.h"
#include "cuda_host/scatter_add_launch.h"
#include "cuda_host/gpuarray_type.h"
#include "cuda_host/cupy_callbacks.h"

#if SA_ONTO_ZEROS
#define SA_BASE_T PyArrayObject
#else
#define SA_BASE_T PyObject
#endif

/* Contexts whose kernels one compiled module remembers. */
#define SA_GPU_CONTEXTS 16

/* The kernels of each context (keyed by bc_cuda_context_key), read and
 * written only with the GIL held. */
static bc_rows_kernels *APPLY_SPECIFIC(sa_gpu_table)(int *next)
{
    static bc_rows_kernels table[SA_GPU_CONTEXTS];
    static int oldest = 0;
    if (next != NULL) {
        *next = oldest;
        oldest = (oldest + 1) % SA_GPU_CONTEXTS;
    }
    return table;
}

/* This call's copy of the kernels of the current context (asked of the
 * Python kernel layer the first time in a context). */
static int APPLY_SPECIFIC(sa_gpu_prepare)(const bc_cuda_api *api, bc_rows_kernels *k)
{
    bc_rows_kernels *table = APPLY_SPECIFIC(sa_gpu_table)(NULL);
    bc_cuda_error err;
    bc_CUcontext ctx = NULL;
    unsigned long long key;
    PyObject *module, *res;
    unsigned long long v[6];
    int i, slot;
    memset(&err, 0, sizeof(err));
    if (bc_cuda_check(api, api->CtxGetCurrent(&ctx), "cuCtxGetCurrent", &err) != 0)
        return bc_host_raise(&err, "GpuScatterAdd");
    key = bc_cuda_context_key(api, ctx);
    for (i = 0; ctx != NULL && i < SA_GPU_CONTEXTS; i++) {
        if (table[i].context_key == key) {
            *k = table[i];
            return 0;
        }
    }
    module = PyImport_ImportModule("aesara_bincount_core.cuda.modules");
    if (module == NULL)
        return -1;
    res = PyObject_CallMethod(module, "c_rows_kernel_handles", "sss", SA_IDX_DTYPE_NAME,
                              SA_CHECK_KERNEL, SA_ADD_KERNEL);
    Py_DECREF(module);
    if (res == NULL)
        return -1;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 6) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_RuntimeError,
                        "GpuScatterAdd: c_rows_kernel_handles returned a bad value");
        return -1;
    }
    for (i = 0; i < 6; i++)
        v[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(res, i));
    Py_DECREF(res);
    if (PyErr_Occurred())
        return -1;
    k->context = (bc_CUcontext)(size_t)v[0];
    k->context_key = bc_cuda_context_key(api, k->context);
    k->check = (bc_CUfunction)(size_t)v[1];
    k->add = (bc_CUfunction)(size_t)v[2];
    k->add_shared = SA_ADD_DET ? BC_CUDA_ROWS_DET_SHARED_BYTES : 0u;
    k->wide = (bc_CUfunction)(size_t)v[3];
    k->finish = (bc_CUfunction)(size_t)v[4];
    k->resident_blocks = (long long)v[5];
    for (i = 0; i < SA_GPU_CONTEXTS; i++) {
        if (table[i].context_key == k->context_key)
            return 0; /* filled meanwhile by another call: the same kernels */
    }
    APPLY_SPECIFIC(sa_gpu_table)(&slot);
    table[slot] = *k;
    return 0;
}

/* ---- the arrays ---- */

/* Shape and byte strides of an N-d cupy.ndarray. */
typedef struct {
    int ndim;
    npy_intp dims[NPY_MAXDIMS];
    npy_intp strides[NPY_MAXDIMS];
    unsigned long long ptr;
    int device;
} APPLY_SPECIFIC(sa_gpu_array);

static int APPLY_SPECIFIC(sa_gpu_read_tuple)(PyObject *a, const char *name, int ndim,
                                             npy_intp *values)
{
    PyObject *t = PyObject_GetAttrString(a, name);
    int k;
    if (t == NULL)
        return -1;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != ndim) {
        Py_DECREF(t);
        PyErr_Format(PyExc_TypeError, "GpuScatterAdd: unexpected %s of a cupy.ndarray", name);
        return -1;
    }
    for (k = 0; k < ndim; k++)
        values[k] = (npy_intp)PyLong_AsSsize_t(PyTuple_GET_ITEM(t, k));
    Py_DECREF(t);
    return PyErr_Occurred() ? -1 : 0;
}

static int APPLY_SPECIFIC(sa_gpu_describe)(PyObject *a, APPLY_SPECIFIC(sa_gpu_array) *d)
{
    long long ndim;
    memset(d, 0, sizeof(*d));
    if (bc_read_ll(a, "ndim", &ndim) != 0)
        return -1;
    if (ndim < 0 || ndim > NPY_MAXDIMS) {
        PyErr_SetString(PyExc_ValueError, "GpuScatterAdd: too many dimensions");
        return -1;
    }
    d->ndim = (int)ndim;
    if (APPLY_SPECIFIC(sa_gpu_read_tuple)(a, "shape", d->ndim, d->dims) != 0 ||
        APPLY_SPECIFIC(sa_gpu_read_tuple)(a, "strides", d->ndim, d->strides) != 0 ||
        bc_gpuarray_ptr(a, &d->ptr) != 0)
        return -1;
    return bc_gpuarray_device(a, &d->device);
}

/* The launchers' alignment check (bc_cuda_check_aligned) on the address and
 * every stride of `a`, run before CuPy copies or reads it: CuPy's kernels
 * would fault on a misaligned array as ours would.  0, or -1 with a
 * ValueError set. */
static int APPLY_SPECIFIC(sa_gpu_aligned)(const APPLY_SPECIFIC(sa_gpu_array) *a, const char *what,
                                          npy_intp itemsize)
{
    bc_cuda_error err;
    int k;
    memset(&err, 0, sizeof(err));
    for (k = -1; k < a->ndim; k++) {
        if (bc_cuda_check_aligned(what, a->ptr, k < 0 ? 0 : (long long)a->strides[k],
                                  (long long)itemsize, &err) != 0)
            return bc_host_raise(&err, "GpuScatterAdd");
    }
    return 0;
}

/* Whether dimensions 1.. of (dims, strides) lay each row out C-contiguously
 * (dimensions of length 1 take any stride). */
static int APPLY_SPECIFIC(sa_rows_contiguous)(int ndim, const npy_intp *dims,
                                              const npy_intp *strides, npy_intp itemsize)
{
    npy_intp expected = itemsize;
    int k;
    for (k = ndim - 1; k >= 1; k--) {
        if (dims[k] != 1 && strides[k] != expected)
            return 0;
        expected *= dims[k];
    }
    return 1;
}

/* The shape as a Python tuple. */
static PyObject *APPLY_SPECIFIC(sa_shape_tuple)(int ndim, const npy_intp *dims)
{
    PyObject *t = PyTuple_New(ndim);
    int k;
    if (t == NULL)
        return NULL;
    for (k = 0; k < ndim; k++) {
        PyObject *d = PyLong_FromSsize_t((Py_ssize_t)dims[k]);
        if (d == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, d);
    }
    return t;
}

/* A new C-contiguous cupy array of the output's dtype and shape `dims`:
 * zero-filled, or (src != NULL) a copy of src, broadcast. */
static PyObject *APPLY_SPECIFIC(sa_new_array)(int ndim, const npy_intp *dims, PyObject *src)
{
    PyObject *descr = PyUnicode_FromString(SA_OUT_DTYPE_NAME);
    PyObject *shape = APPLY_SPECIFIC(sa_shape_tuple)(ndim, dims), *fn, *a = NULL;
    if (descr != NULL && shape != NULL) {
        fn = bc_cupy_attr(src == NULL ? "zeros" : "empty");
        if (fn != NULL)
            a = PyObject_CallFunctionObjArgs(fn, shape, descr, NULL);
    }
    Py_XDECREF(descr);
    Py_XDECREF(shape);
    if (a != NULL && src != NULL && PyObject_SetItem(a, Py_Ellipsis, src) != 0) {
        Py_DECREF(a);
        a = NULL;
    }
    return a;
}

int APPLY_SPECIFIC(gpu_scatter_add)(SA_BASE_T *base_in, PyObject *inc_in, PyObject *idx_in,
#if SA_CALL_STATUS
                                    PyObject *status_in,
#endif
                                    PyObject **out)
{
    const npy_intp itemsize = ITEMSIZE_OUTPUT_0;
    APPLY_SPECIFIC(sa_gpu_array) base, inc;
    npy_intp target[NPY_MAXDIMS], bstrides[NPY_MAXDIMS];
    PyObject *result = NULL, *work = NULL, *inc_copy = NULL;
    PyObject *bcast_type = NULL, *bcast_value = NULL, *bcast_tb = NULL;
    bc_rows_call c;
    bc_rows_kernels k;
    bc_cuda_host host;
    bc_cuda_error err;
    bc_gpuarray_info idx;
    const bc_cuda_api *api;
    unsigned long long stream;
    npy_intp row_size = 1;
    int ndim, kdim, rc = -1;

    memset(&c, 0, sizeof(c));
    memset(&err, 0, sizeof(err));
    memset(&base, 0, sizeof(base));
    if (bc_gpuarray_info_of(idx_in, "idx", &idx) != 0 ||
        APPLY_SPECIFIC(sa_gpu_describe)(inc_in, &inc) != 0 ||
        APPLY_SPECIFIC(sa_gpu_aligned)(&inc, "the increments", itemsize) != 0)
        return -1;
#if SA_ONTO_ZEROS
    if (sa_read_zeros_shape(base_in, itemsize, &base.ndim, base.dims) != 0)
        return -1;
#else
    if (APPLY_SPECIFIC(sa_gpu_describe)(base_in, &base) != 0)
        return -1;
    if (base.ndim < 1) {
        PyErr_Format(PyExc_ValueError, BC_MSG_NDIM, "the base", 1, 0);
        return -1;
    }
    if (APPLY_SPECIFIC(sa_gpu_aligned)(&base, "the base", itemsize) != 0)
        return -1;
#endif
    ndim = base.ndim;
    for (kdim = 1; kdim < ndim; kdim++)
        row_size *= base.dims[kdim];
    target[0] = (npy_intp)idx.length;
    for (kdim = 1; kdim < ndim; kdim++)
        target[kdim] = base.dims[kdim];
    /* Increments that do not broadcast: their ValueError comes after any
     * IndexError, so it waits while the indices are checked. */
    if (sa_broadcast_increments(inc.ndim, inc.dims, inc.strides, ndim, target, bstrides) != 0) {
        PyErr_Fetch(&bcast_type, &bcast_value, &bcast_tb);
        c.check_only = 1;
    }

    api = bc_cuda_load(&err);
    if (api == NULL) {
        bc_host_raise(&err, "GpuScatterAdd");
        goto done;
    }
    if (APPLY_SPECIFIC(sa_gpu_prepare)(api, &k) != 0 || bc_cupy_current_stream(&stream) != 0)
        goto done;

    /* The output, and the array the kernels add into (`work`). */
#if SA_ONTO_ZEROS
    if (!c.check_only) {
        result = APPLY_SPECIFIC(sa_new_array)(ndim, base.dims, NULL);
        if (result == NULL)
            goto done;
    }
#elif SA_INPLACE
    result = (PyObject *)base_in;
    Py_INCREF(result);
#else
    if (!c.check_only) {
        result = APPLY_SPECIFIC(sa_new_array)(ndim, base.dims, (PyObject *)base_in);
        if (result == NULL)
            goto done;
    }
#endif
    c.out_device = idx.device;
    c.inc_device = inc.device;
    if (result != NULL) {
        APPLY_SPECIFIC(sa_gpu_array) w;
        if (APPLY_SPECIFIC(sa_rows_contiguous)(ndim, base.dims, base.strides, itemsize) ||
            SA_ONTO_ZEROS || !SA_INPLACE) {
            work = result;
            Py_INCREF(work);
        } else {
            /* In place on rows that are not C-contiguous: a contiguous copy. */
            work = APPLY_SPECIFIC(sa_new_array)(ndim, base.dims, result);
            if (work == NULL)
                goto done;
        }
        if (APPLY_SPECIFIC(sa_gpu_describe)(work, &w) != 0)
            goto done;
        c.out = w.ptr;
        c.out_row_bytes = w.dims[0] > 1 ? (long long)w.strides[0] : 0;
        c.out_device = w.device;
    }
    if (!c.check_only) {
        int rest_zero = 1;
        for (kdim = 1; kdim < ndim; kdim++)
            rest_zero &= bstrides[kdim] == 0 || target[kdim] == 1;
        if (rest_zero) {
            c.inc_elem = 0;
        } else if (APPLY_SPECIFIC(sa_rows_contiguous)(ndim, target, bstrides, itemsize)) {
            c.inc_elem = 1;
        } else {
            /* Another layout: the increments, broadcast, in a contiguous copy. */
            inc_copy = APPLY_SPECIFIC(sa_new_array)(ndim, target, inc_in);
            if (inc_copy == NULL || APPLY_SPECIFIC(sa_gpu_describe)(inc_copy, &inc) != 0)
                goto done;
            bstrides[0] = inc.strides[0];
            c.inc_elem = 1;
        }
        c.inc = inc.ptr;
        c.inc_row_bytes = target[0] > 1 ? (long long)bstrides[0] : 0;
    }
    c.out_itemsize = (int)itemsize;
    c.inc_device = inc.device;
    c.idx.ptr = idx.ptr;
    c.idx.length = idx.length;
    c.idx.stride_bytes = idx.stride_bytes;
    c.idx.itemsize = idx.itemsize;
    c.idx.ndim = idx.ndim;
    c.idx.device = idx.device;
    c.idx_signed = SA_IDX_SIGNED;
    c.nrows = (long long)base.dims[0];
    c.row_size = (long long)row_size;
    c.stream = (bc_CUstream)(size_t)stream;
#if SA_CALL_STATUS
    {
        bc_gpuarray_info st;
        if (bc_gpuarray_info_of(status_in, "the call's status", &st) != 0)
            goto done;
        c.call_status = st.ptr;
    }
#endif
    host.ctx = NULL;
    bc_host_cupy(&host);

    if (bc_cuda_scatter_rows(api, &c, &k, &host, &err) != 0) {
        bc_host_raise(&err, "GpuScatterAdd");
        goto done;
    }
    if (c.check_only) {
        PyErr_Restore(bcast_type, bcast_value, bcast_tb);
        bcast_type = bcast_value = bcast_tb = NULL;
        goto done;
    }
    /* Every index was good: a contiguous copy of an in-place base goes back. */
    if (work != result && PyObject_SetItem(result, Py_Ellipsis, work) != 0)
        goto done;
    Py_XDECREF(*out);
    *out = result;
    result = NULL;
    rc = 0;

done:
    Py_XDECREF(bcast_type);
    Py_XDECREF(bcast_value);
    Py_XDECREF(bcast_tb);
    Py_XDECREF(inc_copy);
    Py_XDECREF(work);
    Py_XDECREF(result);
    return rc;
}

#undef SA_BASE_T
#undef SA_GPU_CONTEXTS
