/*
 * cuda_host/driver.h -- what every GPU launcher of aesara_bincount stands on:
 * the few CUDA driver API functions it calls, loaded at run time; the error
 * record a launch fills instead of raising; the page-locked slots that status
 * words are read back into; and the interface through which the caller
 * allocates device memory and lets other threads run while a launch waits.
 *
 * Plain C99 and C++ with no Python and no cuda.h: it needs only dlfcn.h,
 * stdio.h, stdlib.h and string.h, so that both the GpuBincount Op's module
 * (cuda_host/gpu_bincount_op.c, compiled by Aesara) and the kernel layer's launcher
 * library (cuda_host/kernel_layer_lib.c, loaded with ctypes) compile it.  The driver
 * library is opened with dlopen on first use ($AESARA_BINCOUNT_LIBCUDA, else
 * libcuda.so.1); the types below match cuda.h (the test-suite checks that when
 * the CUDA toolkit is installed).
 *
 * Thread safety: nothing here needs the GIL.  The function table and the
 * pinned slots are published once with atomic compare-and-swap; a slot is
 * owned by one call at a time.
 */
#ifndef AESARA_BINCOUNT_CUDA_DRIVER_H
#define AESARA_BINCOUNT_CUDA_DRIVER_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/kernel_defs.h"

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
typedef bc_CUresult (*bc_PFN_cuCtxGetId)(bc_CUcontext, unsigned long long *);
typedef bc_CUresult (*bc_PFN_cuLaunchKernel)(bc_CUfunction, unsigned int, unsigned int,
                                             unsigned int, unsigned int, unsigned int,
                                             unsigned int, unsigned int, bc_CUstream, void **,
                                             void **);
typedef bc_CUresult (*bc_PFN_cuMemcpyDtoHAsync)(void *, bc_CUdeviceptr, size_t, bc_CUstream);
typedef bc_CUresult (*bc_PFN_cuMemcpyDtoDAsync)(bc_CUdeviceptr, bc_CUdeviceptr, size_t,
                                                bc_CUstream);
typedef bc_CUresult (*bc_PFN_cuStreamSynchronize)(bc_CUstream);
typedef bc_CUresult (*bc_PFN_cuStreamIsCapturing)(bc_CUstream, int *);
typedef bc_CUresult (*bc_PFN_cuMemsetD32Async)(bc_CUdeviceptr, unsigned int, size_t, bc_CUstream);
typedef bc_CUresult (*bc_PFN_cuMemHostAlloc)(void **, size_t, unsigned int);
typedef bc_CUresult (*bc_PFN_cuMemFreeHost)(void *);

/* The driver functions the launchers use (the _v2 entry points where cuda.h
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
    bc_PFN_cuStreamIsCapturing StreamIsCapturing;
    bc_PFN_cuMemsetD32Async MemsetD32Async;
    bc_PFN_cuMemHostAlloc MemHostAlloc;
    bc_PFN_cuMemFreeHost MemFreeHost;
    bc_PFN_cuCtxGetId CtxGetId; /* CUDA 12.0 and later; NULL when the driver lacks it */
} bc_cuda_api;

/* ---- the error record ---- */

/*
 * A launch reports a failure in a bc_cuda_error instead of raising, so that
 * this code needs no Python.  The caller turns it into an exception with the
 * project's one message table (aesara_bincount_core/cuda/errors.py renders
 * every code; the BC_MSG_* formats of common/host_helpers.h for the first ones).
 * Keep each code a plain integer #define on one line: errors.py parses them.
 */
#define BC_CUDA_E_NONE 0
/* ValueError BC_MSG_NDIM: text names the input, arg = {1, its ndim}. */
#define BC_CUDA_E_NDIM 1
/* ValueError BC_MSG_MINLENGTH / BC_MSG_LENGTH: arg[0] = n. */
#define BC_CUDA_E_MINLENGTH 2
#define BC_CUDA_E_LENGTH 3
/* ValueError BC_MSG_WEIGHTS / BC_MSG_WEIGHTS_BCAST: arg = {weights length, x length}. */
#define BC_CUDA_E_WEIGHTS 4
#define BC_CUDA_E_WEIGHTS_BCAST 5
/* ValueError BC_MSG_NEGATIVE: arg = {value, position}. */
#define BC_CUDA_E_NEGATIVE 6
/* IndexError BC_MSG_INDEX: text = the index as text, arg = {0, position, n}. */
#define BC_CUDA_E_INDEX 7
/* ValueError BC_MSG_TOO_LARGE: uarg = the value. */
#define BC_CUDA_E_TOO_LARGE 8
/* MemoryError BC_MSG_NO_MEMORY: arg = {bins, itemsize}. */
#define BC_CUDA_E_NO_MEMORY 9
/* ValueError: text names the input, arg = {its device, the current device}. */
#define BC_CUDA_E_DEVICE 10
/* A driver call failed: text says which and why; arg[0] = the CUresult
 * (MemoryError for CUDA_ERROR_OUT_OF_MEMORY, else RuntimeError). */
#define BC_CUDA_E_DRIVER 11
/* RuntimeError: the driver library or one of its functions is missing (text). */
#define BC_CUDA_E_LOAD 12
/* A callback of the caller (bc_cuda_host) failed and keeps its own error
 * (a pending Python exception): nothing to render. */
#define BC_CUDA_E_HOST 13
/* IndexError BC_MSG_ROW_INDEX (the scatter-add of rows): text = the index as
 * text, arg = {0, position, rows}. */
#define BC_CUDA_E_ROW_INDEX 14
/* ValueError: an array whose device address or stride is not a multiple of
 * its element size (bc_cuda_check_aligned): text names it, arg = {element
 * size, address modulo 256, stride in bytes}. */
#define BC_CUDA_E_ALIGN 15

#define BC_CUDA_ERROR_TEXT 320

typedef struct bc_cuda_error {
    int code;                     /* BC_CUDA_E_* */
    int reserved;
    long long arg[3];             /* integer arguments of the message, in order */
    unsigned long long uarg;      /* an unsigned argument (BC_CUDA_E_TOO_LARGE) */
    char text[BC_CUDA_ERROR_TEXT]; /* see each code */
} bc_cuda_error;

/* Record error `code` with its integer arguments; returns -1. */
static int bc_cuda_fail(bc_cuda_error *err, int code, long long a0, long long a1, long long a2)
{
    err->code = code;
    err->arg[0] = a0;
    err->arg[1] = a1;
    err->arg[2] = a2;
    return -1;
}

/* Record error `code` with a text argument; returns -1. */
static int bc_cuda_fail_text(bc_cuda_error *err, int code, const char *text, long long a0,
                             long long a1, long long a2)
{
    snprintf(err->text, sizeof(err->text), "%s", text);
    return bc_cuda_fail(err, code, a0, a1, a2);
}

/* ---- loading the driver ---- */

/*
 * The driver API, loaded once per process image (copies of this code in
 * different modules each load their own table; dlopen shares the library).
 * Returns NULL with BC_CUDA_E_LOAD recorded when the library or one of its
 * functions is missing.  Safe from any thread: a thread that loses the race
 * to publish its table frees it and uses the winner's.
 */
static const bc_cuda_api *bc_cuda_load(bc_cuda_error *err)
{
    static bc_cuda_api *published = NULL;
    bc_cuda_api *table = __atomic_load_n(&published, __ATOMIC_ACQUIRE), *expected = NULL;
    const char *path = getenv("AESARA_BINCOUNT_LIBCUDA");
    void *lib;
    if (table != NULL)
        return table;
    if (path == NULL || *path == '\0')
        path = "libcuda.so.1";
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(err->text, sizeof(err->text),
                 "the CUDA driver library %s could not be loaded (%s); is an NVIDIA driver "
                 "installed?",
                 path, dlerror());
        bc_cuda_fail(err, BC_CUDA_E_LOAD, 0, 0, 0);
        return NULL;
    }
    table = (bc_cuda_api *)calloc(1, sizeof(*table));
    if (table == NULL) {
        bc_cuda_fail_text(err, BC_CUDA_E_LOAD, "out of host memory loading the CUDA driver", 0,
                          0, 0);
        return NULL;
    }
#define BC_LOAD(field, symbol)                                                                \
    do {                                                                                      \
        *(void **)(&table->field) = dlsym(lib, symbol);                                       \
        if (table->field == NULL) {                                                           \
            snprintf(err->text, sizeof(err->text),                                            \
                     "the CUDA driver library %s lacks %s; the driver is too old", path,      \
                     symbol);                                                                 \
            free(table);                                                                      \
            bc_cuda_fail(err, BC_CUDA_E_LOAD, 0, 0, 0);                                       \
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
    BC_LOAD(StreamIsCapturing, "cuStreamIsCapturing");
    BC_LOAD(MemsetD32Async, "cuMemsetD32Async");
    BC_LOAD(MemHostAlloc, "cuMemHostAlloc");
    BC_LOAD(MemFreeHost, "cuMemFreeHost");
#undef BC_LOAD
    *(void **)(&table->CtxGetId) = dlsym(lib, "cuCtxGetId"); /* optional */
    if (!__atomic_compare_exchange_n(&published, &expected, table, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        free(table);
        return expected;
    }
    return table;
}

/*
 * The key of context `ctx` in the launchers' kernel tables: its unique ID
 * (cuCtxGetId, which no later context reuses), or, when the driver lacks it
 * or refuses, the CUcontext pointer itself (which a context created after
 * another was destroyed may reuse).  0 for no context.
 * aesara_bincount_core/cuda/driver.py's context_key is the same key.
 */
static unsigned long long bc_cuda_context_key(const bc_cuda_api *api, bc_CUcontext ctx)
{
    unsigned long long id = 0;
    if (ctx == NULL)
        return 0;
    if (api->CtxGetId != NULL && api->CtxGetId(ctx, &id) == BC_CUDA_SUCCESS)
        return id | (1ull << 63); /* never equal to a pointer (user-space addresses) */
    return (unsigned long long)(size_t)ctx;
}

/*
 * Record a failed driver call as BC_CUDA_E_DRIVER, naming the call and the
 * driver's description of `status`.  Returns 0 when `status` is success,
 * else -1.
 */
static int bc_cuda_check(const bc_cuda_api *api, bc_CUresult status, const char *what,
                         bc_cuda_error *err)
{
    const char *name = NULL, *text = NULL;
    if (status == BC_CUDA_SUCCESS)
        return 0;
    api->GetErrorName(status, &name);
    api->GetErrorString(status, &text);
    snprintf(err->text, sizeof(err->text), "%s failed with %s: %s", what,
             name ? name : "an unknown error", text ? text : "no description");
    return bc_cuda_fail(err, BC_CUDA_E_DRIVER, status, 0, 0);
}

/* ---- page-locked slots for the status read-back ---- */

/*
 * BC_CUDA_STATUS_SLOTS slots of BC_CUDA_STATUS_BYTES in one page-locked
 * allocation (made once, portable across contexts).  A call owns a slot from
 * the copy it queues until it has read the slot, so concurrent calls never
 * share one; when all are taken, or page-locked memory cannot be had, the
 * call copies into its own pageable buffer (the copy then waits for the
 * stream inside cuMemcpyDtoHAsync).
 */
#define BC_CUDA_STATUS_SLOTS 64

/* The slots' memory, or NULL when there is none (allocating it failed). */
static unsigned char *bc_cuda_pinned_slots(const bc_cuda_api *api)
{
    static void *published = NULL;
    static const char none = 0;
    void *mem = __atomic_load_n(&published, __ATOMIC_ACQUIRE), *expected = NULL;
    if (mem == NULL) {
        if (api->MemHostAlloc(&mem, (size_t)BC_CUDA_STATUS_SLOTS * BC_CUDA_STATUS_BYTES,
                              BC_CU_MEMHOSTALLOC_PORTABLE) != BC_CUDA_SUCCESS ||
            mem == NULL)
            mem = (void *)&none; /* remembered: do not try again */
        if (!__atomic_compare_exchange_n(&published, &expected, mem, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE)) {
            if (mem != (void *)&none)
                api->MemFreeHost(mem);
            mem = expected;
        }
    }
    return mem == (void *)&none ? NULL : (unsigned char *)mem;
}

/* Which slots are taken (bit i: slot i). */
static unsigned long long *bc_cuda_slot_bits(void)
{
    static unsigned long long taken = 0;
    return &taken;
}

/* Take a free slot: its index, or -1 when none is free. */
static int bc_cuda_slot_take(void)
{
    unsigned long long *bits = bc_cuda_slot_bits();
    unsigned long long seen = __atomic_load_n(bits, __ATOMIC_RELAXED);
    int i;
    for (i = 0; i < BC_CUDA_STATUS_SLOTS; i++) {
        const unsigned long long bit = 1ull << i;
        while (!(seen & bit)) {
            if (__atomic_compare_exchange_n(bits, &seen, seen | bit, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                return i;
        }
    }
    return -1;
}

static void bc_cuda_slot_give_back(int slot)
{
    if (slot >= 0)
        __atomic_fetch_and(bc_cuda_slot_bits(), ~(1ull << slot), __ATOMIC_RELEASE);
}

/* ---- what the caller provides ---- */

/*
 * How a launcher gets device memory and waits, supplied by its caller:
 *
 *   alloc    `count` elements of dtype `dtype` (a BC_DT_* code), zero-filled
 *            when `zero`, usable in the order of the call's stream (a CuPy
 *            array from its memory pool).  Returns a handle the caller owns,
 *            with the device address in *ptr; or NULL, with *out_of_memory
 *            set when the device is out of memory (the caller has then
 *            dropped its own error), else with the caller's error pending.
 *   release  drop a handle from alloc.  A launcher releases a buffer only
 *            after queueing the last operation that reads it, so memory that
 *            goes back to a stream-ordered pool is reused only after them.
 *   unlock, relock   called around the wait for the stream (the only wait of
 *            a launch); the Op releases the GIL there.  Either may be NULL.
 *            Between them the launcher calls nothing of the caller's.
 */
typedef struct bc_cuda_host {
    void *ctx;
    void *(*alloc)(void *ctx, int dtype, long long count, int zero, bc_CUdeviceptr *ptr,
                   int *out_of_memory);
    void (*release)(void *ctx, void *handle);
    void *(*unlock)(void *ctx);
    void (*relock)(void *ctx, void *token);
} bc_cuda_host;

/*
 * Fail unless `stream` is outside a CUDA graph capture: a launch that waits
 * for its stream would break the capture (cuStreamSynchronize is not
 * allowed there).  Called before anything is queued.
 */
static int bc_cuda_not_capturing(const bc_cuda_api *api, bc_CUstream stream, bc_cuda_error *err)
{
    int capturing = 0; /* CUstreamCaptureStatus: 0 is CU_STREAM_CAPTURE_STATUS_NONE */
    if (bc_cuda_check(api, api->StreamIsCapturing(stream, &capturing), "cuStreamIsCapturing",
                      err) != 0)
        return -1;
    if (capturing == 0)
        return 0;
    snprintf(err->text, sizeof(err->text),
             "the stream is being captured into a CUDA graph, and the call must wait for it "
             "once (to read its status); run it outside the capture");
    return bc_cuda_fail(err, BC_CUDA_E_DRIVER, 900 /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */,
                        0, 0);
}

/* A kernel to queue after a read-back's copy (bc_cuda_read_back_then). */
typedef struct bc_cuda_launch {
    bc_CUfunction func;
    unsigned blocks;
    unsigned shared_bytes; /* its dynamic shared memory per block */
    void **args;
    const char *what; /* for the error message */
} bc_cuda_launch;

/*
 * Queue a copy of `bytes` from device address `src` into `landing` (host
 * memory: page-locked, so that the copy is queued and returns at once),
 * then the `n_then` kernels of `then`, in order, and wait for `stream`
 * (synchronize!): the one wait of a launch.  The kernels run without
 * waiting for the host (they must themselves skip their work on what the
 * copied status reports).  The caller's unlock/relock hooks run around the
 * copy and the wait.
 */
static int bc_cuda_copy_wait(const bc_cuda_api *api, const bc_cuda_host *host, bc_CUstream stream,
                             bc_CUdeviceptr src, void *landing, size_t bytes,
                             const bc_cuda_launch *then, int n_then, bc_cuda_error *err)
{
    void *token = host->unlock != NULL ? host->unlock(host->ctx) : NULL;
    int rc = bc_cuda_check(api, api->MemcpyDtoHAsync(landing, src, bytes, stream),
                           "cuMemcpyDtoHAsync", err);
    if (rc == 0) {
        bc_cuda_error later;
        int queued = 0, i;
        memset(&later, 0, sizeof(later));
        for (i = 0; i < n_then && queued == 0; i++)
            queued = bc_cuda_check(api,
                                   api->LaunchKernel(then[i].func, then[i].blocks, 1, 1,
                                                     BC_CUDA_THREADS, 1, 1,
                                                     then[i].shared_bytes, stream,
                                                     then[i].args, NULL),
                                   then[i].what, err);
        /* Wait even when a launch failed: the copy into `landing` is queued. */
        rc = bc_cuda_check(api, api->StreamSynchronize(stream), "cuStreamSynchronize",
                           queued != 0 ? &later : err);
        if (queued != 0)
            rc = -1;
    }
    if (host->relock != NULL)
        host->relock(host->ctx, token);
    return rc;
}

/*
 * Copy `bytes` (at most BC_CUDA_STATUS_BYTES) from device address `src` to
 * `dst` once everything queued on `stream` is done, through a page-locked
 * slot (bc_cuda_copy_wait, with the `n_then` kernels of `then`).
 */
static int bc_cuda_read_back_then(const bc_cuda_api *api, const bc_cuda_host *host,
                                  bc_CUstream stream, bc_CUdeviceptr src, void *dst,
                                  size_t bytes, const bc_cuda_launch *then, int n_then,
                                  bc_cuda_error *err)
{
    unsigned long long pageable[BC_CUDA_STATUS_BYTES / 8];
    unsigned char *slots = bc_cuda_pinned_slots(api);
    const int slot = slots != NULL ? bc_cuda_slot_take() : -1;
    unsigned char *landing =
        slot >= 0 ? slots + (size_t)slot * BC_CUDA_STATUS_BYTES : (unsigned char *)pageable;
    const int rc = bc_cuda_copy_wait(api, host, stream, src, landing, bytes, then, n_then, err);
    if (rc == 0)
        memcpy(dst, landing, bytes);
    bc_cuda_slot_give_back(slot);
    return rc;
}

/* bc_cuda_read_back_then with nothing queued after the copy. */
static int bc_cuda_read_back(const bc_cuda_api *api, const bc_cuda_host *host,
                             bc_CUstream stream, bc_CUdeviceptr src, void *dst, size_t bytes,
                             bc_cuda_error *err)
{
    return bc_cuda_read_back_then(api, host, stream, src, dst, bytes, NULL, 0, err);
}

#endif /* AESARA_BINCOUNT_CUDA_DRIVER_H */
