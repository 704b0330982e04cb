/*
 * cuda_host/kernel_layer_lib.c -- the launcher library of the stand-alone kernel layer.
 *
 * aesara_bincount_core/cuda/launcher.py builds this file, at run time and
 * once per version (cached on disk), into a small shared library with the
 * system C compiler, and calls it through ctypes: the kernel layer then runs
 * the very launchers the GpuBincount and GpuScatterAdd Ops compile into
 * their modules (cuda_host/bincount_launch.h, cuda_host/scatter_add_launch.h), with no
 * Python, Aesara or CUDA headers needed.
 *
 * The functions take plain numbers (ctypes passes them without any mirrored
 * struct layout, apart from bc_cuda_error, whose size the loader checks with
 * bc_lib_error_size).  ctypes releases the GIL around each call; the
 * allocation callbacks take it back.
 *
 * Valid C99 and C++ on its own.
 */
#include "cuda_host/bincount_launch.h"
#include "cuda_host/scatter_add_launch.h"

#if defined(__GNUC__)
#define BC_LIB_EXPORT __attribute__((visibility("default")))
#else
#define BC_LIB_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef void *(*bc_lib_alloc_fn)(void *ctx, int dtype, long long count, int zero,
                                 bc_CUdeviceptr *ptr, int *out_of_memory);
typedef void (*bc_lib_release_fn)(void *ctx, void *handle);

/* sizeof(bc_cuda_error), which the ctypes loader checks against its copy. */
BC_LIB_EXPORT long long bc_lib_error_size(void)
{
    return (long long)sizeof(bc_cuda_error);
}

/*
 * What every entry point unpacks, written once: the start of a call (the
 * error cleared, the driver table loaded: NULL with *err filled when it
 * cannot be), an array from its numbers, a driver handle from the
 * integer ctypes passes, and the caller's allocation callbacks.
 */
static const bc_cuda_api *bc_lib_begin(bc_cuda_error *err)
{
    memset(err, 0, sizeof(*err));
    return bc_cuda_load(err);
}

static bc_cuda_array bc_lib_array(bc_CUdeviceptr ptr, long long length, long long stride_bytes,
                                  int itemsize, int ndim, int device)
{
    bc_cuda_array a;
    a.ptr = ptr;
    a.length = length;
    a.stride_bytes = stride_bytes;
    a.itemsize = itemsize;
    a.ndim = ndim;
    a.device = device;
    return a;
}

#define BC_LIB_HANDLE(type, value) ((type)(size_t)(value))

/* The kernels of the current context (bc_cuda_kernels), from their handles and figures. */
static bc_cuda_kernels bc_lib_kernels(unsigned long long context, unsigned long long hist,
                                      unsigned long long finish, long long resident_blocks,
                                      long long shared_budget, unsigned long long total_memory)
{
    bc_cuda_kernels k;
    memset(&k, 0, sizeof(k)); /* context_key: only the Ops' tables use it */
    k.context = BC_LIB_HANDLE(bc_CUcontext, context);
    k.hist = BC_LIB_HANDLE(bc_CUfunction, hist);
    k.finish = BC_LIB_HANDLE(bc_CUfunction, finish);
    k.resident_blocks = resident_blocks;
    k.shared_budget = shared_budget;
    k.total_memory = total_memory;
    return k;
}

static bc_cuda_host bc_lib_host(void *ctx, bc_lib_alloc_fn alloc, bc_lib_release_fn release)
{
    bc_cuda_host host;
    host.ctx = ctx;
    host.alloc = alloc;
    host.release = release;
    host.unlock = NULL; /* ctypes already let go of the GIL */
    host.relock = NULL;
    return host;
}

/*
 * bc_cuda_bincount (cuda_host/bincount_launch.h) with its arguments spelled out.
 * x_* and w_* describe the arrays (bc_cuda_array); k_* the kernels of the
 * current context (bc_cuda_kernels; k_finish 0 when none).  On success the
 * result's handle, length and view flag are written to result[0..2] and 0 is
 * returned; else -1 with *err filled.
 */
BC_LIB_EXPORT int bc_lib_bincount(
    bc_CUdeviceptr x_ptr, long long x_length, long long x_stride_bytes, int x_itemsize, int x_ndim,
    int x_device, int weighted, bc_CUdeviceptr w_ptr, long long w_length, long long w_stride_bytes,
    int w_ndim,
    int w_device, int scatter, int x_signed, int out_dtype, int out_itemsize, int buffer_dtype,
    int buffer_itemsize, int shared_itemsize, long long n, long long capacity_hint,
    unsigned long long stream, unsigned long long k_context, unsigned long long k_hist,
    unsigned long long k_finish, long long k_resident_blocks, long long k_shared_budget,
    unsigned long long k_total_memory, bc_lib_alloc_fn alloc, bc_lib_release_fn release,
    void *host_ctx, unsigned long long *result, bc_cuda_error *err)
{
    bc_cuda_bincount_call c;
    const bc_cuda_kernels k = bc_lib_kernels(k_context, k_hist, k_finish, k_resident_blocks,
                                             k_shared_budget, k_total_memory);
    bc_cuda_host host = bc_lib_host(host_ctx, alloc, release);
    bc_cuda_result res;
    const bc_cuda_api *api = bc_lib_begin(err);
    if (api == NULL)
        return -1;
    memset(&c, 0, sizeof(c));
    c.x = bc_lib_array(x_ptr, x_length, x_stride_bytes, x_itemsize, x_ndim, x_device);
    c.weighted = weighted;
    /* the weights have the output's dtype */
    c.weights = bc_lib_array(w_ptr, w_length, w_stride_bytes, out_itemsize, w_ndim, w_device);
    c.scatter = scatter;
    c.x_signed = x_signed;
    c.out_dtype = out_dtype;
    c.out_itemsize = out_itemsize;
    c.buffer_dtype = buffer_dtype;
    c.buffer_itemsize = buffer_itemsize;
    c.shared_itemsize = shared_itemsize;
    c.n = n;
    c.capacity_hint = capacity_hint;
    c.stream = BC_LIB_HANDLE(bc_CUstream, stream);
    if (bc_cuda_bincount(api, &c, &k, &host, &res, err) != 0)
        return -1;
    result[0] = (unsigned long long)(size_t)res.array;
    result[1] = (unsigned long long)res.length;
    result[2] = (unsigned long long)res.view;
    return 0;
}

/* bc_cuda_make_plan: out = {blocks, shared bins, copies, shared bytes}. */
BC_LIB_EXPORT void bc_lib_plan(long long size, long long span, long long shared_itemsize,
                               long long resident_blocks, long long budget, long long *out)
{
    const bc_cuda_plan p =
        bc_cuda_make_plan(size, span, shared_itemsize, resident_blocks, budget);
    out[0] = p.blocks;
    out[1] = p.shared_bins;
    out[2] = p.copies;
    out[3] = p.shared_bytes;
}

/* bc_cuda_buffer_elements: elements of a buffer of `bins` bins; *padded
 * receives where its status starts. */
BC_LIB_EXPORT long long bc_lib_buffer_elements(long long bins, long long itemsize,
                                               long long *padded)
{
    return bc_cuda_buffer_elements(bins, itemsize, padded);
}

/*
 * Queue one histogram pass (counts, bincount form) of the contiguous or
 * strided x over the bins [0, bins) of the zero-filled buffer at `buffer`
 * (bc_lib_buffer_elements elements of `buffer_itemsize` bytes), on `stream`,
 * without waiting: the kernel alone, for benchmarks.  Returns 0, or -1 with
 * *err filled.
 */
BC_LIB_EXPORT int bc_lib_hist_pass(bc_CUdeviceptr x_ptr, long long x_length,
                                   long long x_stride_bytes, int x_itemsize, int buffer_itemsize, int shared_itemsize, long long bins,
                                   bc_CUdeviceptr buffer, unsigned long long stream,
                                   unsigned long long k_hist, long long k_resident_blocks,
                                   long long k_shared_budget, bc_cuda_error *err)
{
    bc_cuda_bincount_call c;
    const bc_cuda_kernels k = bc_lib_kernels(0, k_hist, 0, k_resident_blocks, k_shared_budget, 0);
    long long padded = 0;
    const bc_cuda_api *api = bc_lib_begin(err);
    if (api == NULL)
        return -1;
    memset(&c, 0, sizeof(c));
    c.x = bc_lib_array(x_ptr, x_length, x_stride_bytes, x_itemsize, 1, 0);
    c.buffer_itemsize = buffer_itemsize;
    c.shared_itemsize = shared_itemsize;
    c.n = bins;
    c.stream = BC_LIB_HANDLE(bc_CUstream, stream);
    bc_cuda_buffer_elements(bins, buffer_itemsize, &padded);
    return bc_cuda_queue_hist(api, &k, &c, buffer, padded, 0, bins, err);
}

/*
 * bc_cuda_scatter_rows (cuda_host/scatter_add_launch.h) with its arguments spelled
 * out (bc_rows_call, bc_rows_kernels).  Returns 0, or -1 with *err filled.
 */
BC_LIB_EXPORT int bc_lib_scatter_rows(
    bc_CUdeviceptr out, long long out_row_bytes, int out_device, int out_itemsize,
    bc_CUdeviceptr inc, long long inc_row_bytes, long long inc_elem, int inc_device,
    bc_CUdeviceptr idx_ptr, long long idx_length, long long idx_stride_bytes, int idx_device, int idx_signed, int idx_itemsize, long long nrows,
    long long row_size, int check_only, unsigned long long stream, unsigned long long k_context,
    unsigned long long k_check, unsigned long long k_add, unsigned long long k_wide,
    unsigned long long k_finish, long long k_resident_blocks, bc_lib_alloc_fn alloc,
    bc_lib_release_fn release, void *host_ctx, bc_cuda_error *err)
{
    bc_rows_call c;
    bc_rows_kernels k;
    bc_cuda_host host = bc_lib_host(host_ctx, alloc, release);
    const bc_cuda_api *api = bc_lib_begin(err);
    if (api == NULL)
        return -1;
    memset(&c, 0, sizeof(c));
    memset(&k, 0, sizeof(k));
    c.out = out;
    c.out_row_bytes = out_row_bytes;
    c.out_device = out_device;
    c.out_itemsize = out_itemsize;
    c.inc = inc;
    c.inc_row_bytes = inc_row_bytes;
    c.inc_elem = inc_elem;
    c.inc_device = inc_device;
    c.idx = bc_lib_array(idx_ptr, idx_length, idx_stride_bytes, idx_itemsize, 1, idx_device);
    c.idx_signed = idx_signed;
    c.nrows = nrows;
    c.row_size = row_size;
    c.check_only = check_only;
    c.stream = BC_LIB_HANDLE(bc_CUstream, stream);
    k.context = BC_LIB_HANDLE(bc_CUcontext, k_context);
    k.check = BC_LIB_HANDLE(bc_CUfunction, k_check);
    k.add = BC_LIB_HANDLE(bc_CUfunction, k_add);
    k.context_key = bc_cuda_context_key(api, k.context); /* as the Op's table has it */
    k.wide = BC_LIB_HANDLE(bc_CUfunction, k_wide);
    k.finish = BC_LIB_HANDLE(bc_CUfunction, k_finish);
    k.resident_blocks = k_resident_blocks;
    return bc_cuda_scatter_rows(api, &c, &k, &host, err);
}

/* bc_cuda_check_aligned: 0, or -1 with *err filled (BC_CUDA_E_ALIGN naming `what`). */
BC_LIB_EXPORT int bc_lib_check_aligned(const char *what, bc_CUdeviceptr ptr, long long stride_bytes,
                                       long long itemsize, bc_cuda_error *err)
{
    memset(err, 0, sizeof(*err));
    return bc_cuda_check_aligned(what, ptr, stride_bytes, itemsize, err);
}

/* bc_cuda_rows_plan: out = {check blocks, blocks, lanes, chunk, tiles, items}. */
BC_LIB_EXPORT void bc_lib_rows_plan(long long n, long long row_size, long long resident_blocks,
                                    long long *out)
{
    const bc_rows_plan p = bc_cuda_rows_plan(n, row_size, resident_blocks);
    out[0] = p.check_blocks;
    out[1] = p.blocks;
    out[2] = p.lanes;
    out[3] = p.chunk;
    out[4] = p.tiles;
    out[5] = p.items;
}

#ifdef __cplusplus
}
#endif
