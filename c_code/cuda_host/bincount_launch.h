/*
 * cuda_host/bincount_launch.h -- the launcher of the bincount kernels: the one
 * implementation of the launch plan, used by the GpuBincount Op
 * (cuda_host/gpu_bincount_op.c, compiled into the Op's module by Aesara) and by the
 * stand-alone kernel layer (cuda_host/kernel_layer_lib.c, built into a small shared
 * library that aesara_bincount_core/cuda/launcher.py loads with ctypes).
 *
 * Plain C99 and C++, no Python (see cuda_host/driver.h): the caller
 * describes its arrays with plain numbers, supplies the kernels of the
 * current context (compiled and loaded by the Python kernel layer,
 * aesara_bincount_core/cuda/modules.py), allocates device memory through
 * bc_cuda_host, and turns a bc_cuda_error into an exception.
 *
 * How a call runs (the numbers are the BC_CUDA_* constants of cuda/kernel_defs.h):
 *
 *   0. Checks, in the order of the NumPy reference (semantics.py): x is 1-D,
 *      n >= 0, n bins fit in device memory, the weights' shape, the inputs
 *      live on the current device; then that x and the weights are aligned
 *      to their elements (bc_cuda_check_aligned).  An empty x gives zeros(n)
 *      with no wait.
 *   1. The accumulator: counts go into 32-bit unsigned bins (64-bit for
 *      64-bit and float outputs), integer weights into unsigned bins of their
 *      width (32-bit for 8- and 16-bit weights), float weights into bins of
 *      their dtype; the caller names them (the kernel names and dtypes of
 *      aesara_bincount_core/cuda/sources.py).  When that is the output's own
 *      layout the accumulator is the output; otherwise the finish kernel
 *      (bincount_finish_*) converts it.
 *   2. The first pass provides C bins: exactly n in the scatter-add form; in
 *      the bincount form max(n, guess), the guess being the caller's hint
 *      (the previous call's length, at most BC_CUDA_FIRST_PASS_MAX_BINS) or
 *      BC_CUDA_FIRST_PASS_BINS.  It counts the values below C and, in the
 *      same pass, finds max(x) and the first refused position.  Buffer
 *      layout: the bins, padded to 8 bytes, then a bc_status, in one
 *      zero-filled allocation.
 *   3. The status comes back in one device-to-host copy, the only wait of a
 *      call (bc_cuda_read_back; the Op lets other Python threads run
 *      meanwhile).  A refused value raises here.  Skipped in the scatter-add
 *      form of indices checked before (`checked`): no wait at all.
 *   4. Only when max(x) + 1 > C: a second pass over x counts the values in
 *      [C, max(x) + 1) into a larger buffer that starts with a copy of the
 *      first pass's bins.  The first buffer is released after that copy is
 *      queued (the last operation that reads it).
 *   5. The result: the finish kernel's output; or, when the buffer wastes
 *      more than BC_CUDA_COMPACT_MIN_BYTES, an exact-size copy; else the
 *      buffer itself, of which the caller keeps the first `length` elements.
 *
 * Launch geometry of a pass (bc_cuda_make_plan): min(resident blocks,
 * N / BC_CUDA_MIN_ELEMS_PER_BLOCK) blocks of BC_CUDA_THREADS threads, where
 * "resident blocks" is what the caller measured with the driver's occupancy
 * calculator (BC_CUDA_BLOCKS_PER_SM per multiprocessor, or fewer when the
 * kernel's registers or the shared memory the driver reserves per block do
 * not allow it).  A block keeps the first max(BC_CUDA_SHARED_MIN_BINS,
 * elements per block) bins of the window, as many as its share of shared
 * memory holds, as a privatized shared-memory histogram, with up to
 * BC_CUDA_MAX_COPIES replicated copies while each copy still gets
 * BC_CUDA_COPY_MIN_ELEMS_PER_BIN elements per bin; the bins beyond go to
 * global memory with atomics.
 *
 * A second family of kernels (e.g. a scatter-add of rows) gets a header of
 * its own beside this one, with its own plan and sequence, and reuses
 * cuda_host/driver.h: the driver table, bc_cuda_error, bc_cuda_host and
 * bc_cuda_read_back.
 */
#ifndef AESARA_BINCOUNT_CUDA_LAUNCH_H
#define AESARA_BINCOUNT_CUDA_LAUNCH_H

#include "cuda/kernel_defs.h"
#include "cuda_host/driver.h"

/* A 0-d or 1-d device array, as the caller sees it. */
typedef struct bc_cuda_array {
    bc_CUdeviceptr ptr;     /* device address of element 0 */
    long long length;       /* elements (1 when 0-d) */
    long long stride_bytes; /* in bytes (0 when 0-d); checked to be whole elements */
    int itemsize;           /* bytes of an element */
    int ndim;
    int device; /* CUDA device ordinal */
} bc_cuda_array;

/*
 * The one alignment check of every array a kernel reads or writes (both
 * launchers run it before anything is queued).  A GPU loads and stores an
 * element only at an address that is a multiple of its size; any other
 * access fails with CUDA_ERROR_MISALIGNED_ADDRESS, a sticky error that
 * leaves the CUDA context unusable for the rest of the process.  Such
 * arrays come from views at odd byte offsets (cupy.ndarray(memptr=buf.data
 * + 1)), DLPack imports and byte strides that are not whole elements.
 * Returns 0, or -1 with BC_CUDA_E_ALIGN (a ValueError naming `what`).
 */
static int bc_cuda_check_aligned(const char *what, bc_CUdeviceptr ptr, long long stride_bytes,
                                 long long itemsize, bc_cuda_error *err)
{
    if (itemsize <= 0 || (unsigned long long)ptr % (unsigned long long)itemsize != 0 ||
        stride_bytes % itemsize != 0)
        return bc_cuda_fail_text(err, BC_CUDA_E_ALIGN, what, itemsize,
                                 (long long)((unsigned long long)ptr % 256u), stride_bytes);
    return 0;
}

/* The stride of an array in elements (after bc_cuda_check_aligned). */
static long long bc_cuda_stride(const bc_cuda_array *a)
{
    return a->itemsize > 0 ? a->stride_bytes / a->itemsize : 0;
}

/* The kernels of one dtype of x in the current context, and the figures
 * that size a launch (aesara_bincount_core/cuda/modules.py measures them). */
typedef struct bc_cuda_kernels {
    bc_CUcontext context;           /* the context they were loaded in */
    unsigned long long context_key; /* its bc_cuda_context_key (the host's tables) */
    bc_CUfunction hist;             /* bincount_hist_<x>_<inc> */
    bc_CUfunction finish;           /* bincount_finish_<acc>_<out>, or NULL */
    long long resident_blocks;      /* blocks of hist that run at once on the device */
    long long shared_budget;        /* dynamic shared memory one block of hist may use */
    unsigned long long total_memory; /* bytes of device memory */
} bc_cuda_kernels;

/* One bincount or scatter-add. */
typedef struct bc_cuda_bincount_call {
    bc_cuda_array x;
    bc_cuda_array weights; /* used when `weighted` */
    int weighted;
    int scatter;            /* 1: scatter-add form (n bins), 0: bincount form */
    int x_signed;           /* x has a signed dtype (how a refused value is shown) */
    int out_dtype;          /* BC_DT_* of the output */
    int out_itemsize;
    int buffer_dtype;       /* BC_DT_* of the accumulator buffer (the output's when no finish) */
    int buffer_itemsize;    /* 4 or 8 */
    int shared_itemsize;    /* bytes of a shared-memory bin of hist */
    long long n;            /* minlength (bincount form) or the length (scatter-add form) */
    long long capacity_hint; /* bins expected (0: none) */
    int checked;            /* 1: x holds indices already checked on the device (the call's
                             * status, read once when the call ends): the scatter-add form
                             * then does not wait (step 3 is skipped) */
    bc_CUstream stream;
    /* Fused weights (a kernel generated by aesara_bincount_core/gpu/fused.py,
     * `hist` of bc_cuda_kernels): the kernel's second parameter, or NULL.
     * Then `weights` describes the computed weights (their length; ptr 0)
     * and fused_arrays[0 .. nfused_arrays) the GPU arrays among the inputs,
     * which are checked as the weights are. */
    const bc_fused_params *fused;
    const bc_cuda_array *fused_arrays;
    int nfused_arrays;
} bc_cuda_bincount_call;

/* The output: the first `length` elements of `array` (a handle from
 * bc_cuda_host.alloc, owned by the caller), which holds exactly `length`
 * elements unless `view` is set. */
typedef struct bc_cuda_result {
    void *array;
    long long length;
    int view;
} bc_cuda_result;

/* Geometry of one histogram pass. */
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
 * elements (> 0) and a window of `span` bins (>= 0), with shared-memory bins
 * of `shared_itemsize` bytes, `resident_blocks` blocks that run at once and
 * `budget` bytes of shared memory per block.
 */
static bc_cuda_plan bc_cuda_make_plan(long long size, long long span, long long shared_itemsize,
                                      long long resident_blocks, long long budget)
{
    bc_cuda_plan plan;
    long long per_block, budget_bins, bins, max_copies;
    int copies = 1;
    plan.blocks = resident_blocks;
    if (bc_ceil_div(size, BC_CUDA_MIN_ELEMS_PER_BLOCK) < plan.blocks)
        plan.blocks = bc_ceil_div(size, BC_CUDA_MIN_ELEMS_PER_BLOCK);
    if (bc_ceil_div(size, BC_CUDA_MAX_ELEMS_PER_BLOCK) > plan.blocks)
        plan.blocks = bc_ceil_div(size, BC_CUDA_MAX_ELEMS_PER_BLOCK);
    if (plan.blocks < 1)
        plan.blocks = 1;
    per_block = bc_ceil_div(size, plan.blocks);
    budget_bins = budget > 0 ? budget / shared_itemsize : 0;
    bins = per_block > BC_CUDA_SHARED_MIN_BINS ? per_block : BC_CUDA_SHARED_MIN_BINS;
    if (budget_bins < bins)
        bins = budget_bins;
    if (span < bins)
        bins = span;
    if (bins < 0)
        bins = 0;
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

/* Elements of a buffer of `bins` bins of `itemsize` (4 or 8) bytes followed
 * by a bc_status; *padded is where the status starts, in elements. */
static long long bc_cuda_buffer_elements(long long bins, long long itemsize, long long *padded)
{
    *padded = bins + (itemsize == 4 ? bins % 2 : 0);
    return *padded + BC_CUDA_STATUS_BYTES / itemsize;
}

/* MemoryError (BC_MSG_NO_MEMORY) unless `bins` output items fit on the device. */
static int bc_cuda_check_size(const bc_cuda_bincount_call *c, const bc_cuda_kernels *k,
                              long long bins, bc_cuda_error *err)
{
    if (bins < 0 || bins > 0x7fffffffffffffffLL / c->out_itemsize ||
        (unsigned long long)bins * (unsigned long long)c->out_itemsize > k->total_memory)
        return bc_cuda_fail(err, BC_CUDA_E_NO_MEMORY, bins, c->out_itemsize, 0);
    return 0;
}

/* Bytes of an element of a BC_DT_* dtype. */
static int bc_cuda_dtype_size(int dtype)
{
    static const int sizes[] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8};
    return dtype >= 0 && dtype < 10 ? sizes[dtype] : 1;
}

/* Allocate through the caller; an out-of-memory becomes BC_MSG_NO_MEMORY
 * for an output of `reported_bins` bins. */
static void *bc_cuda_alloc(const bc_cuda_host *host, int dtype, long long count, int zero,
                           bc_CUdeviceptr *ptr, long long reported_bins, int out_itemsize,
                           bc_cuda_error *err)
{
    int out_of_memory = 0;
    void *a = host->alloc(host->ctx, dtype, count, zero, ptr, &out_of_memory);
    if (a == NULL) {
        if (out_of_memory)
            bc_cuda_fail(err, BC_CUDA_E_NO_MEMORY, reported_bins, out_itemsize, 0);
        else
            bc_cuda_fail(err, BC_CUDA_E_HOST, 0, 0, 0);
    }
    return a;
}

/* bc_cuda_alloc of zero-filled memory: cleared here, on the call's stream
 * (cuMemsetD32Async), when its size is whole 4-byte words, else by the
 * caller. */
static void *bc_cuda_alloc_zeroed(const bc_cuda_host *host, const bc_cuda_api *api,
                                  bc_CUstream stream, int dtype, long long count,
                                  bc_CUdeviceptr *ptr, long long reported_bins,
                                  int out_itemsize, bc_cuda_error *err)
{
    const long long bytes = count * bc_cuda_dtype_size(dtype);
    const int here = bytes % 4 == 0;
    void *a = bc_cuda_alloc(host, dtype, count, !here, ptr, reported_bins, out_itemsize, err);
    if (a != NULL && here && bytes > 0 &&
        bc_cuda_check(api, api->MemsetD32Async(*ptr, 0, (size_t)(bytes / 4), stream),
                      "cuMemsetD32Async", err) != 0) {
        host->release(host->ctx, a);
        return NULL;
    }
    return a;
}

/* A zero-filled accumulator buffer of `bins` bins and a bc_status. */
static void *bc_cuda_alloc_buffer(const bc_cuda_host *host, const bc_cuda_api *api,
                                  const bc_cuda_bincount_call *c, long long bins,
                                  long long *padded, bc_CUdeviceptr *ptr, bc_cuda_error *err)
{
    const long long count = bc_cuda_buffer_elements(bins, c->buffer_itemsize, padded);
    return bc_cuda_alloc_zeroed(host, api, c->stream, c->buffer_dtype, count, ptr, bins,
                                c->out_itemsize, err);
}

/*
 * Queue one histogram pass of x over the window [lo, hi) into the buffer at
 * `buffer`, whose status starts after `padded` elements.
 */
static int bc_cuda_queue_hist(const bc_cuda_api *api, const bc_cuda_kernels *k,
                              const bc_cuda_bincount_call *c, bc_CUdeviceptr buffer,
                              long long padded, long long lo, long long hi, bc_cuda_error *err)
{
    bc_hist_params p;
    void *args[2];
    const bc_cuda_plan plan = bc_cuda_make_plan(c->x.length, hi - lo, c->shared_itemsize,
                                                k->resident_blocks, k->shared_budget);
    memset(&p, 0, sizeof(p));
    p.x = c->x.ptr;
    p.w = c->weighted ? c->weights.ptr : 0;
    p.out = buffer;
    p.status = buffer + (bc_CUdeviceptr)padded * (bc_CUdeviceptr)c->buffer_itemsize;
    p.size = c->x.length;
    p.x_stride = bc_cuda_stride(&c->x);
    p.w_stride = c->weighted && c->weights.length == c->x.length ? bc_cuda_stride(&c->weights) : 0;
    p.lo = lo;
    p.hi = hi;
    p.n = c->n;
    p.shared_bins = plan.shared_bins;
    p.copies = plan.copies;
    p.scatter = c->scatter;
    args[0] = &p;
    args[1] = (void *)c->fused; /* read only by a fused kernel, which takes two */
    return bc_cuda_check(api,
                         api->LaunchKernel(k->hist, (unsigned)plan.blocks, 1, 1, BC_CUDA_THREADS,
                                           1, 1, (unsigned)plan.shared_bytes, c->stream, args,
                                           NULL),
                         "cuLaunchKernel(histogram pass)", err);
}

/* Queue the finish kernel of `k` (a grid-stride loop over `count` bins), its
 * one parameter at `params`; `what` names it in an error. */
static int bc_cuda_queue_finish_kernel(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                       bc_CUstream stream, long long count, void *params,
                                       const char *what, bc_cuda_error *err)
{
    void *args[1];
    long long blocks = bc_ceil_div(count, BC_CUDA_THREADS);
    if (blocks > k->resident_blocks)
        blocks = k->resident_blocks;
    if (blocks < 1)
        blocks = 1;
    args[0] = params;
    return bc_cuda_check(api,
                         api->LaunchKernel(k->finish, (unsigned)blocks, 1, 1, BC_CUDA_THREADS,
                                           1, 1, 0, stream, args, NULL),
                         what, err);
}

/* Queue the conversion of `count` accumulator bins at `src` into `dst`. */
static int bc_cuda_queue_finish(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                bc_CUstream stream, bc_CUdeviceptr src, bc_CUdeviceptr dst,
                                long long count, bc_cuda_error *err)
{
    bc_finish_params p;
    p.src = src;
    p.dst = dst;
    p.count = count;
    return bc_cuda_queue_finish_kernel(api, k, stream, count, &p, "cuLaunchKernel(finish)", err);
}

/* Checks before any work (step 0). */
static int bc_cuda_check_call(const bc_cuda_api *api, const bc_cuda_bincount_call *c,
                              const bc_cuda_kernels *k, bc_cuda_error *err)
{
    bc_CUcontext ctx = NULL;
    bc_CUdevice dev = 0;
    int i;
    if (c->x.ndim != 1)
        return bc_cuda_fail_text(err, BC_CUDA_E_NDIM, "x", 1, c->x.ndim, 0);
    if (c->n < 0)
        return bc_cuda_fail(err, c->scatter ? BC_CUDA_E_LENGTH : BC_CUDA_E_MINLENGTH, c->n, 0, 0);
    if (bc_cuda_check_size(c, k, c->n, err) != 0)
        return -1;
    if (c->weighted) {
        const bc_cuda_array *w = &c->weights;
        if (w->ndim > 1)
            return bc_cuda_fail_text(err, BC_CUDA_E_NDIM, "weights", 1, w->ndim, 0);
        if (!c->scatter && w->ndim == 1 && w->length != c->x.length)
            return bc_cuda_fail(err, BC_CUDA_E_WEIGHTS, w->length, c->x.length, 0);
        if (c->scatter && w->length != c->x.length && w->length != 1)
            return bc_cuda_fail(err, BC_CUDA_E_WEIGHTS_BCAST, w->length, c->x.length, 0);
    }
    if (bc_cuda_check(api, api->CtxGetCurrent(&ctx), "cuCtxGetCurrent", err) != 0 ||
        bc_cuda_check(api, api->CtxGetDevice(&dev), "cuCtxGetDevice", err) != 0)
        return -1;
    if (c->x.device != dev)
        return bc_cuda_fail_text(err, BC_CUDA_E_DEVICE, "x", c->x.device, dev, 0);
    if (c->weighted && c->weights.device != dev)
        return bc_cuda_fail_text(err, BC_CUDA_E_DEVICE, "weights", c->weights.device, dev, 0);
    for (i = 0; c->fused != NULL && i < c->nfused_arrays; i++) {
        const bc_cuda_array *a = &c->fused_arrays[i];
        if (a->ndim > 1)
            return bc_cuda_fail_text(err, BC_CUDA_E_NDIM, "weights", 1, a->ndim, 0);
        if (a->device != dev)
            return bc_cuda_fail_text(err, BC_CUDA_E_DEVICE, "weights", a->device, dev, 0);
        /* one element (broadcast) is loaded too: its address must be aligned,
         * its stride is never used */
        if (c->x.length > 0 && a->length > 0 &&
            bc_cuda_check_aligned("weights", a->ptr, a->length > 1 ? a->stride_bytes : 0,
                                  a->itemsize, err) != 0)
            return -1;
    }
    if (c->x.length > 0 &&
        (bc_cuda_check_aligned("x", c->x.ptr, c->x.stride_bytes, c->x.itemsize, err) != 0 ||
         (c->weighted && bc_cuda_check_aligned("weights", c->weights.ptr,
                                               c->weights.stride_bytes, c->weights.itemsize,
                                               err) != 0)))
        return -1;
    if (ctx == NULL || ctx != k->context) {
        snprintf(err->text, sizeof(err->text),
                 "the kernels were loaded in CUDA context %p, but the current context is %p",
                 k->context, ctx);
        return bc_cuda_fail(err, BC_CUDA_E_DRIVER, 201 /* CUDA_ERROR_INVALID_CONTEXT */, 0, 0);
    }
    return 0;
}

/* The error a status reports (step 3); 0 when there is none. */
static int bc_cuda_status_error(const bc_cuda_bincount_call *c, const bc_status *s,
                                bc_cuda_error *err)
{
    long long pos;
    if (s->bad_pos_inv == 0) {
        if (!c->scatter && s->max_value >= 0x7fffffffffffffffULL) {
            err->uarg = s->max_value;
            return bc_cuda_fail(err, BC_CUDA_E_TOO_LARGE, 0, 0, 0);
        }
        return 0;
    }
    pos = (long long)~s->bad_pos_inv;
    if (!c->scatter)
        return bc_cuda_fail(err, BC_CUDA_E_NEGATIVE, (long long)s->bad_value, pos, 0);
    if (c->x_signed)
        snprintf(err->text, sizeof(err->text), "%lld", (long long)s->bad_value);
    else
        snprintf(err->text, sizeof(err->text), "%llu", (unsigned long long)s->bad_value);
    return bc_cuda_fail(err, BC_CUDA_E_INDEX, 0, pos, c->n);
}

/* Bins of the first pass (step 2): n in the scatter-add form, else
 * max(n, guess), the guess being the caller's hint (at most `cap`) or
 * BC_CUDA_FIRST_PASS_BINS. */
static long long bc_cuda_first_bins(const bc_cuda_bincount_call *c, long long cap)
{
    long long guess = c->capacity_hint > 0 ? c->capacity_hint : BC_CUDA_FIRST_PASS_BINS;
    if (c->scatter)
        return c->n;
    if (guess > cap)
        guess = cap;
    return c->n > guess ? c->n : guess;
}

/*
 * Step 0 of a call, for this launcher and the deterministic one
 * (cuda_host/bincount_det_launch.h): the checks, and an empty x, whose result is
 * zeros(n) with no wait.  Returns 1 when the call is done (*result filled),
 * 0 to go on, -1 with *err filled.
 */
static int bc_cuda_bincount_begin(const bc_cuda_api *api, const bc_cuda_bincount_call *c,
                                  const bc_cuda_kernels *k, const bc_cuda_host *host,
                                  bc_cuda_result *result, bc_cuda_error *err)
{
    bc_CUdeviceptr out_ptr = 0;
    memset(result, 0, sizeof(*result));
    if (bc_cuda_check_call(api, c, k, err) != 0)
        return -1;
    if (c->x.length == 0) {
        result->array = bc_cuda_alloc_zeroed(host, api, c->stream, c->out_dtype, c->n, &out_ptr,
                                             c->n, c->out_itemsize, err);
        result->length = c->n;
        return result->array != NULL ? 1 : -1;
    }
    return bc_cuda_not_capturing(api, c->stream, err) != 0 ? -1 : 0;
}

/*
 * Step 3 of a call, for both launchers: the one wait, for the status at
 * device address `status_ptr`; a refused value raises.  *length is then the
 * result's length (max(max(x) + 1, n) in the bincount form, n in the
 * scatter-add form), checked to fit on the device.  Returns 0 or -1.
 */
static int bc_cuda_read_length(const bc_cuda_api *api, const bc_cuda_host *host,
                               const bc_cuda_bincount_call *c, const bc_cuda_kernels *k,
                               bc_CUdeviceptr status_ptr, long long *length, bc_cuda_error *err)
{
    bc_status status;
    if (c->scatter && c->checked) { /* n bins, and nothing the status could refuse */
        *length = c->n;
        return bc_cuda_check_size(c, k, *length, err);
    }
    if (bc_cuda_read_back(api, host, c->stream, status_ptr, &status, sizeof(status), err) != 0 ||
        bc_cuda_status_error(c, &status, err) != 0)
        return -1;
    *length = c->n;
    if (!c->scatter && (long long)status.max_value + 1 > *length)
        *length = (long long)status.max_value + 1;
    return bc_cuda_check_size(c, k, *length, err);
}

/*
 * The end of a call, for both launchers: the buffer `buf` is given back
 * (the caller has queued the last operation that reads it); when `ok`, the
 * result is `out`, exactly `length` bins, else `out` (if any) is given back
 * too.  Returns 0 when `ok`, else -1.
 */
static int bc_cuda_bincount_end(const bc_cuda_host *host, void *buf, void *out, long long length,
                                int ok, bc_cuda_result *result)
{
    if (!ok && out != NULL)
        host->release(host->ctx, out);
    if (buf != NULL)
        host->release(host->ctx, buf);
    if (!ok)
        return -1;
    result->array = out;
    result->length = length;
    return 0;
}

/*
 * Count, or sum weights, into bins: the whole call (steps 0-5 above).
 * Returns 0 with *result filled, or -1 with *err filled; either way no
 * buffer of the call is left allocated except the result's.
 */
static int bc_cuda_bincount(const bc_cuda_api *api, const bc_cuda_bincount_call *c,
                            const bc_cuda_kernels *k, const bc_cuda_host *host,
                            bc_cuda_result *result, bc_cuda_error *err)
{
    void *buf = NULL, *out = NULL;
    bc_CUdeviceptr buf_ptr = 0, out_ptr = 0;
    long long bins, padded = 0, length;
    const int begun = bc_cuda_bincount_begin(api, c, k, host, result, err);

    if (begun != 0)
        return begun > 0 ? 0 : -1;

    /* 2. First pass: C bins, max(x) and the first refused position. */
    bins = bc_cuda_first_bins(c, BC_CUDA_FIRST_PASS_MAX_BINS);
    buf = bc_cuda_alloc_buffer(host, api, c, bins, &padded, &buf_ptr, err);
    if (buf == NULL)
        return -1;
    if (bc_cuda_queue_hist(api, k, c, buf_ptr, padded, 0, bins, err) != 0)
        goto fail;

    /* 3. The one wait of the call. */
    if (bc_cuda_read_length(api, host, c, k,
                            buf_ptr + (bc_CUdeviceptr)padded * (bc_CUdeviceptr)c->buffer_itemsize,
                            &length, err) != 0)
        goto fail;

    /* 4. Second pass, only for values the first could not hold. */
    if (length > bins) {
        long long padded2 = 0;
        bc_CUdeviceptr ptr2 = 0;
        void *buf2 = bc_cuda_alloc_buffer(host, api, c, length, &padded2, &ptr2, err);
        if (buf2 == NULL)
            goto fail;
        if (bc_cuda_check(api,
                          api->MemcpyDtoDAsync(ptr2, buf_ptr,
                                               (size_t)bins * (size_t)c->buffer_itemsize,
                                               c->stream),
                          "cuMemcpyDtoDAsync", err) != 0) {
            host->release(host->ctx, buf2);
            goto fail;
        }
        /* The copy was the last operation that reads the first buffer. */
        host->release(host->ctx, buf);
        buf = buf2;
        buf_ptr = ptr2;
        padded = padded2;
        if (bc_cuda_queue_hist(api, k, c, buf_ptr, padded, bins, length, err) != 0)
            goto fail;
    }

    /* 5. The result. */
    if (k->finish != NULL) {
        out = bc_cuda_alloc(host, c->out_dtype, length, 0, &out_ptr, length, c->out_itemsize,
                            err);
        if (out == NULL ||
            bc_cuda_queue_finish(api, k, c->stream, buf_ptr, out_ptr, length, err) != 0)
            goto fail;
    } else if ((padded + BC_CUDA_STATUS_BYTES / c->buffer_itemsize - length) *
                   c->buffer_itemsize >
               BC_CUDA_COMPACT_MIN_BYTES) {
        out = bc_cuda_alloc(host, c->out_dtype, length, 0, &out_ptr, length, c->out_itemsize,
                            err);
        if (out == NULL ||
            bc_cuda_check(api,
                          api->MemcpyDtoDAsync(out_ptr, buf_ptr,
                                               (size_t)length * (size_t)c->buffer_itemsize,
                                               c->stream),
                          "cuMemcpyDtoDAsync", err) != 0)
            goto fail;
    } else {
        result->array = buf;
        result->length = length;
        result->view = 1;
        return 0;
    }
    /* The finish kernel or the copy was the last operation that reads it. */
    return bc_cuda_bincount_end(host, buf, out, length, 1, result);

fail:
    return bc_cuda_bincount_end(host, buf, out, 0, 0, result);
}

#endif /* AESARA_BINCOUNT_CUDA_LAUNCH_H */
