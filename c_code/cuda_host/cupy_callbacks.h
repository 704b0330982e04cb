/*
 * The launchers' host callbacks (bc_cuda_host) through CuPy and the GIL, and
 * the Python exception a launch error stands for: the glue that the GPU
 * Ops' host C (cuda_host/gpu_bincount_op.c, cuda_host/gpu_scatter_add_op.c) share.
 *
 * - alloc: a new 1-d cupy.ndarray from CuPy's memory pool, on its current
 *   device and stream (cupy.zeros or cupy.empty); a MemoryError of CuPy is
 *   reported to the launcher as out of memory, any other error stays pending.
 * - release: drops the array (CuPy's pool reuses its memory in stream order).
 * - unlock / relock: release the GIL around the launcher's one wait.
 *
 * Everything here runs with the GIL held, except between unlock and relock,
 * where the launcher calls nothing of Python.  Nothing here keeps state.
 */
#ifndef AESARA_BINCOUNT_CUDA_HOST_CUPY_H
#define AESARA_BINCOUNT_CUDA_HOST_CUPY_H

#include <Python.h>

#include "cuda/kernel_defs.h"
#include "cuda_host/driver.h"
#include "cuda_host/gpuarray_type.h"

/* The dtype name of a BC_DT_* code.  CuPy takes the name: the NumPy C API
 * may not be initialised in a module whose inputs are all GPU arrays. */
static const char *bc_host_dtype_name(int dtype)
{
    static const char *const names[] = {"int8",   "int16",  "int32",   "int64",  "uint8",
                                        "uint16", "uint32", "uint64", "float32", "float64"};
    return names[dtype];
}

static void *bc_host_alloc(void *ctx, int dtype, long long count, int zero, bc_CUdeviceptr *ptr,
                           int *out_of_memory)
{
    PyObject *name = PyUnicode_FromString(bc_host_dtype_name(dtype));
    PyObject *a;
    (void)ctx;
    if (name == NULL)
        return NULL;
    a = bc_cupy_new(count, name, zero);
    Py_DECREF(name);
    if (a == NULL) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
            PyErr_Clear();
            *out_of_memory = 1;
        }
        return NULL;
    }
    if (bc_gpuarray_ptr(a, ptr) != 0) {
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

static void bc_host_release(void *ctx, void *handle)
{
    (void)ctx;
    Py_XDECREF((PyObject *)handle);
}

static void *bc_host_unlock(void *ctx)
{
    (void)ctx;
    return (void *)PyEval_SaveThread();
}

static void bc_host_relock(void *ctx, void *token)
{
    (void)ctx;
    PyEval_RestoreThread((PyThreadState *)token);
}

/* Fill the callbacks of *host (its ctx is unused). */
static void bc_host_cupy(bc_cuda_host *host)
{
    host->alloc = bc_host_alloc;
    host->release = bc_host_release;
    host->unlock = bc_host_unlock;
    host->relock = bc_host_relock;
}

/* Raise the exception that a launch error stands for
 * (aesara_bincount_core.cuda.errors.launch_error) and return -1.  For
 * BC_CUDA_E_HOST the exception of the failed callback is already set; `op`
 * names the Op in a RuntimeError should none be. */
static int bc_host_raise(const bc_cuda_error *err, const char *op)
{
    PyObject *module, *exc;
    if (err->code == BC_CUDA_E_HOST) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "%s: a CuPy call failed", op);
        return -1;
    }
    module = PyImport_ImportModule("aesara_bincount_core.cuda.errors");
    if (module == NULL)
        return -1;
    exc = PyObject_CallMethod(module, "launch_error", "iLLLKs", err->code, err->arg[0],
                              err->arg[1], err->arg[2], err->uarg, err->text);
    Py_DECREF(module);
    if (exc == NULL)
        return -1;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return -1;
}

#endif /* AESARA_BINCOUNT_CUDA_HOST_CUPY_H */
