/*
 * bincount_cuda_driver.h -- host-side CUDA helpers of the GpuBincount Op:
 * the few CUDA driver API functions it calls, loaded at run time, and the
 * launch plan of a histogram pass.
 *
 * No link-time CUDA dependency and no cuda.h: the driver library is opened
 * with dlopen on first use ($AESARA_BINCOUNT_LIBCUDA, else libcuda.so.1) and
 * the types are declared here (they match cuda.h; the test-suite checks that
 * when the CUDA toolkit is installed).  A machine without a driver gets a
 * RuntimeError naming the cause, not a crash.
 *
 * Valid C99 and C++ on its own (needs Python.h and dlfcn.h).
 */
#ifndef AESARA_BINCOUNT_CUDA_DRIVER_H
#define AESARA_BINCOUNT_CUDA_DRIVER_H

#include <Python.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "bincount_cuda.h"

typedef int bc_CUresult;
typedef int bc_CUdevice;
typedef void *bc_CUcontext;
typedef void *bc_CUfunction;
typedef void *bc_CUstream;
typedef unsigned long long bc_CUdeviceptr;

#define BC_CUDA_SUCCESS 0
#define BC_CUDA_ERROR_OUT_OF_MEMORY 2
#define BC_CU_MEMHOSTALLOC_PORTABLE 0x01

typedef bc_CUresult (*bc_PFN_cuGetErrorName)(bc_CUresult, const char **);
typedef bc_CUresult (*bc_PFN_cuGetErrorString)(bc_CUresult, const char **);
typedef bc_CUresult (*bc_PFN_cuCtxGetCurrent)(bc_CUcontext *);
typedef bc_CUresult (*bc_PFN_cuCtxGetDevice)(bc_CUdevice *);
typedef bc_CUresult (*bc_PFN_cuLaunchKernel)(bc_CUfunction, unsigned int, unsigned int,
                                             unsigned int, unsigned int, unsigned int,
                                             unsigned int, unsigned int, bc_CUstream, void **,
                                             void **);
typedef bc_CUresult (*bc_PFN_cuMemcpyDtoHAsync)(void *, bc_CUdeviceptr, size_t, bc_CUstream);
typedef bc_CUresult (*bc_PFN_cuMemcpyDtoDAsync)(bc_CUdeviceptr, bc_CUdeviceptr, size_t,
                                                bc_CUstream);
typedef bc_CUresult (*bc_PFN_cuStreamSynchronize)(bc_CUstream);
typedef bc_CUresult (*bc_PFN_cuMemHostAlloc)(void **, size_t, unsigned int);

/* The driver functions GpuBincount uses (the _v2 entry points where cuda.h
 * maps the plain name to one). */
typedef struct bc_cuda_api {
    bc_PFN_cuGetErrorName GetErrorName;
    bc_PFN_cuGetErrorString GetErrorString;
    bc_PFN_cuCtxGetCurrent CtxGetCurrent;
    bc_PFN_cuCtxGetDevice CtxGetDevice;
    bc_PFN_cuLaunchKernel LaunchKernel;
    bc_PFN_cuMemcpyDtoHAsync MemcpyDtoHAsync;
    bc_PFN_cuMemcpyDtoDAsync MemcpyDtoDAsync;
    bc_PFN_cuStreamSynchronize StreamSynchronize;
    bc_PFN_cuMemHostAlloc MemHostAlloc;
} bc_cuda_api;

/*
 * The driver API, loaded once (under the GIL).  Returns NULL with a
 * RuntimeError set when the library or one of its functions is missing.
 */
static const bc_cuda_api *bc_cuda(void)
{
    static bc_cuda_api api;
    static int loaded = 0;
    const char *path = getenv("AESARA_BINCOUNT_LIBCUDA");
    void *lib;
    if (loaded)
        return &api;
    if (path == NULL || *path == '\0')
        path = "libcuda.so.1";
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "GpuBincount: the CUDA driver library %s could not be loaded (%s); is an "
                     "NVIDIA driver installed?",
                     path, dlerror());
        return NULL;
    }
#define BC_LOAD(field, symbol)                                                                \
    do {                                                                                      \
        *(void **)(&api.field) = dlsym(lib, symbol);                                          \
        if (api.field == NULL) {                                                              \
            PyErr_Format(PyExc_RuntimeError,                                                  \
                         "GpuBincount: the CUDA driver library %s lacks %s; the driver is "   \
                         "too old",                                                           \
                         path, symbol);                                                       \
            return NULL;                                                                      \
        }                                                                                     \
    } while (0)
    BC_LOAD(GetErrorName, "cuGetErrorName");
    BC_LOAD(GetErrorString, "cuGetErrorString");
    BC_LOAD(CtxGetCurrent, "cuCtxGetCurrent");
    BC_LOAD(CtxGetDevice, "cuCtxGetDevice");
    BC_LOAD(LaunchKernel, "cuLaunchKernel");
    BC_LOAD(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    BC_LOAD(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    BC_LOAD(StreamSynchronize, "cuStreamSynchronize");
    BC_LOAD(MemHostAlloc, "cuMemHostAlloc");
#undef BC_LOAD
    loaded = 1;
    return &api;
}

/*
 * Turn a failed driver call into a Python exception: MemoryError for
 * CUDA_ERROR_OUT_OF_MEMORY, RuntimeError otherwise, naming the call and the
 * driver's description.  Returns 0 when `status` is success, else -1.
 */
static int bc_cuda_check(bc_CUresult status, const char *what)
{
    const char *name = NULL, *text = NULL;
    const bc_cuda_api *api;
    if (status == BC_CUDA_SUCCESS)
        return 0;
    api = bc_cuda();
    if (api == NULL)
        return -1;
    api->GetErrorName(status, &name);
    api->GetErrorString(status, &text);
    PyErr_Format(status == BC_CUDA_ERROR_OUT_OF_MEMORY ? PyExc_MemoryError : PyExc_RuntimeError,
                 "GpuBincount: %s failed with %s: %s", what, name ? name : "an unknown error",
                 text ? text : "no description");
    return -1;
}

/* 32 bytes of page-locked host memory for the status copy (one per module). */
static void *bc_cuda_status_buffer(const bc_cuda_api *api)
{
    static void *pinned = NULL;
    static int tried = 0;
    static unsigned long long pageable[BC_CUDA_STATUS_BYTES / 8];
    if (!tried) {
        tried = 1;
        if (api->MemHostAlloc(&pinned, BC_CUDA_STATUS_BYTES, BC_CU_MEMHOSTALLOC_PORTABLE) != 0)
            pinned = NULL; /* the copy still works, synchronously, from pageable memory */
    }
    return pinned != NULL ? pinned : (void *)pageable;
}

/* Geometry of one histogram pass (the same as kernels.launch_plan). */
typedef struct bc_cuda_plan {
    long long blocks;
    long long shared_bins;
    int copies;
    long long shared_bytes;
} bc_cuda_plan;

static long long bc_ceil_div(long long a, long long b)
{
    return (a + b - 1) / b;
}

/*
 * Blocks, shared-memory bins and replicated copies for a pass over `size`
 * elements (> 0) and a window of `span` bins (> 0); see the strategy comment
 * in bincount_cuda_host.c.
 */
static bc_cuda_plan bc_cuda_make_plan(long long size, long long span, long long shared_itemsize,
                                      long long multiprocessors, long long budget)
{
    bc_cuda_plan plan;
    long long per_block, budget_bins, bins, max_copies;
    int copies = 1;
    plan.blocks = multiprocessors * BC_CUDA_BLOCKS_PER_SM;
    if (bc_ceil_div(size, BC_CUDA_MIN_ELEMS_PER_BLOCK) < plan.blocks)
        plan.blocks = bc_ceil_div(size, BC_CUDA_MIN_ELEMS_PER_BLOCK);
    if (bc_ceil_div(size, BC_CUDA_MAX_ELEMS_PER_BLOCK) > plan.blocks)
        plan.blocks = bc_ceil_div(size, BC_CUDA_MAX_ELEMS_PER_BLOCK);
    if (plan.blocks < 1)
        plan.blocks = 1;
    per_block = bc_ceil_div(size, plan.blocks);
    budget_bins = budget / shared_itemsize;
    bins = per_block > BC_CUDA_SHARED_MIN_BINS ? per_block : BC_CUDA_SHARED_MIN_BINS;
    if (budget_bins < bins)
        bins = budget_bins;
    if (span < bins)
        bins = span;
    max_copies = BC_CUDA_THREADS / 32 < BC_CUDA_MAX_COPIES ? BC_CUDA_THREADS / 32
                                                           : BC_CUDA_MAX_COPIES;
    while (copies * 2 <= max_copies && copies * 2 * bins <= budget_bins &&
           copies * 2 * bins * BC_CUDA_COPY_MIN_ELEMS_PER_BIN <= per_block)
        copies *= 2;
    plan.shared_bins = bins;
    plan.copies = copies;
    plan.shared_bytes = copies * bins * shared_itemsize;
    return plan;
}

#endif /* AESARA_BINCOUNT_CUDA_DRIVER_H */
