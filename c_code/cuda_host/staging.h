/*
 * cuda_host/staging.h -- the memory that a GPU bincount whose result goes to
 * the host keeps from call to call (the staging of bc_cuda_bincount_host,
 * cuda_host/bincount_to_host.h), and the NumPy output made from it: the glue
 * of cuda_host/gpu_bincount_op.c with BC_TO_HOST.
 *
 * A staging is device memory (a cupy.ndarray from CuPy's pool, so that it
 * counts against the pool as the rest of CuPy's memory does) and as many
 * bytes of page-locked host memory (cuMemHostAlloc).  The Op keeps one per
 * CUDA context in its table and lends it to one call at a time; a call that
 * finds it lent uses a staging of its own.  Everything here runs with the
 * GIL held.  Valid C99 and C++ on its own (Python.h and NumPy's headers).
 */
#ifndef AESARA_BINCOUNT_CUDA_HOST_STAGING_H
#define AESARA_BINCOUNT_CUDA_HOST_STAGING_H

#include <Python.h>

#include "common/host_helpers.h" /* NumPy's headers, as the project includes them */
#include "cuda/kernel_defs.h"
#include "cuda_host/driver.h"
#include "cuda_host/bincount_to_host.h"
#include "cuda_host/cupy_callbacks.h"

typedef struct bc_host_staging {
    PyObject *device_array; /* a cupy.ndarray of device_bytes, or NULL */
    bc_CUdeviceptr device;
    size_t device_bytes;
    unsigned char *pinned; /* cuMemHostAlloc'd, or NULL */
    size_t pinned_bytes;
} bc_host_staging;

/* Free a staging (no queued work may use it any more). */
static void bc_host_staging_free(const bc_cuda_api *api, bc_host_staging *st)
{
    Py_CLEAR(st->device_array);
    if (st->pinned != NULL)
        api->MemFreeHost(st->pinned);
    memset(st, 0, sizeof(*st));
}

/* What the stage callback needs: the driver and the call's staging. */
typedef struct bc_host_stage_ctx {
    const bc_cuda_api *api;
    bc_host_staging *own;
} bc_host_stage_ctx;

/* bc_cuda_stage_fn: grow the call's staging to `device_bytes` of device
 * memory and `pinned_bytes` of page-locked memory. */
static int bc_host_stage(void *ctx, size_t device_bytes, size_t pinned_bytes, bc_cuda_staging *out,
                         int *out_of_memory)
{
    bc_host_stage_ctx *c = (bc_host_stage_ctx *)ctx;
    bc_host_staging *st = c->own;
    if (st->device_bytes < device_bytes) {
        bc_CUdeviceptr ptr = 0;
        PyObject *a;
        Py_CLEAR(st->device_array);
        st->device_bytes = 0;
        a = (PyObject *)bc_host_alloc(NULL, BC_DT_UINT64, (long long)((device_bytes + 7) / 8), 0,
                                      &ptr, out_of_memory);
        if (a == NULL)
            return -1;
        st->device_array = a;
        st->device = ptr;
        st->device_bytes = device_bytes;
    }
    if (st->pinned_bytes < pinned_bytes) {
        void *mem = NULL;
        if (st->pinned != NULL)
            c->api->MemFreeHost(st->pinned);
        st->pinned = NULL;
        st->pinned_bytes = 0;
        if (c->api->MemHostAlloc(&mem, pinned_bytes, BC_CU_MEMHOSTALLOC_PORTABLE) !=
                BC_CUDA_SUCCESS ||
            mem == NULL) {
            *out_of_memory = 1;
            return -1;
        }
        st->pinned = (unsigned char *)mem;
        st->pinned_bytes = pinned_bytes;
    }
    out->device = st->device;
    out->pinned = st->pinned;
    return 0;
}

/* The NumPy output (dtype `out_dtype`, a BC_DT_* code) of a call whose
 * result went to the host: its bins, of dtype `buf_dtype`, converted (zeros
 * when there are none), in *out when it already is a C-contiguous array of
 * that length and dtype (Aesara recycles an output only when it may), else
 * in a new array.  0, or -1 with a Python exception set. */
static int bc_host_numpy_output(const bc_cuda_host_result *hr, int out_dtype, int buf_dtype,
                                PyObject **out)
{
    static const int typenums[] = {NPY_INT8,   NPY_INT16,  NPY_INT32,   NPY_INT64,  NPY_UINT8,
                                   NPY_UINT16, NPY_UINT32, NPY_UINT64, NPY_FLOAT32, NPY_FLOAT64};
    const int typenum = typenums[out_dtype];
    PyArrayObject *a = (PyArrayObject *)*out;
    npy_intp dims[1];
    dims[0] = (npy_intp)hr->length;
    if (a == NULL || !PyArray_Check((PyObject *)a) || PyArray_NDIM(a) != 1 ||
        PyArray_DIMS(a)[0] != dims[0] || PyArray_TYPE(a) != typenum || !PyArray_ISCARRAY(a)) {
        a = (PyArrayObject *)PyArray_EMPTY(1, dims, typenum, 0);
        if (a == NULL)
            return -1;
        Py_XDECREF(*out);
        *out = (PyObject *)a;
    }
    if (hr->bins == NULL)
        memset(PyArray_DATA(a), 0, (size_t)hr->length * (size_t)bc_cuda_dtype_size(out_dtype));
    else
        bc_cuda_finish_on_host(PyArray_DATA(a), out_dtype, hr->bins, buf_dtype, hr->length);
    return 0;
}

#endif /* AESARA_BINCOUNT_CUDA_HOST_STAGING_H */
