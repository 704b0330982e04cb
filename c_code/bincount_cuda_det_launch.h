/*
 * bincount_cuda_det_launch.h -- the launcher of the deterministic float
 * histogram (the kernels bincount_hist_det_* or a generated fused one
 * built with BC_FUSED_DET, and bincount_det_finish_*; the algorithm is in
 * bincount_cuda_det.cuh).  GpuBincount and GpuFusedBincount run it instead
 * of bc_cuda_bincount (bincount_cuda_launch.h) when they were compiled
 * under aesara.config.deterministic == "more" and sum float weights
 * (bincount_cuda_host.c, BC_DETERMINISTIC).
 *
 * Plain C99 and C++, no Python: the same call description, kernels, host
 * interface and errors as bc_cuda_bincount, whose checks
 * (bc_cuda_bincount_begin, bc_cuda_read_length) and end
 * (bc_cuda_bincount_end) it reuses.  `hist` of the kernels is the deterministic pass, `finish` the
 * deterministic finish, and resident_blocks / shared_budget are those of
 * the pass (one block per multiprocessor, the most shared memory a block
 * may have; aesara_bincount_core/cuda/modules.py).
 *
 * How a call runs:
 *
 *   0. The checks of bc_cuda_bincount; an empty x gives zeros(n) with no wait.
 *   1. The window: a warp's sub-histogram of S = shared_budget / (warps x
 *      bin size) bins.  The grid: min(BC_CUDA_DET_BLOCKS, N /
 *      BC_CUDA_MIN_ELEMS_PER_BLOCK) blocks (at least one) for N values,
 *      whatever the device (more blocks than run at once simply run in
 *      waves).  One allocation holds blocks x S float64 partial sums and
 *      the status (zeroed by a memset).
 *   2. The first pass counts the bins [0, F): F = n in the scatter-add form,
 *      else max(n, the previous call's length or BC_CUDA_FIRST_PASS_BINS),
 *      both at most S; it also finds max(x) and the first refused position.
 *   3. The status comes back (the one wait); a refused value raises.
 *   4. The output, exactly `length` bins: the finish kernel sums the first
 *      window's partials in block order; each further window [lo, lo + S)
 *      is a pass over x and a finish, queued without waiting.
 *
 * The order of every float addition follows from the grid alone (a bin's
 * value is the same whichever window it falls in), and the grid from the
 * length of x alone: never from timing, nor from the device.  So the same
 * inputs give the same bits on every call, and, with the same kernels (the
 * package and NVRTC versions), on any GPU.
 */
#ifndef AESARA_BINCOUNT_CUDA_DET_LAUNCH_H
#define AESARA_BINCOUNT_CUDA_DET_LAUNCH_H

#include "bincount_cuda.h"
#include "bincount_cuda_det.h"
#include "bincount_cuda_driver.h"
#include "bincount_cuda_launch.h"

/* Queue one deterministic pass over the window [lo, hi) into the partial
 * sums at `partials`, with `blocks` blocks. */
static int bc_cuda_det_queue_pass(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                  const bc_cuda_bincount_call *c, bc_CUdeviceptr partials,
                                  bc_CUdeviceptr status, long long blocks, long long lo,
                                  long long hi, bc_cuda_error *err)
{
    bc_hist_params p;
    void *args[2];
    memset(&p, 0, sizeof(p));
    p.x = c->x.ptr;
    p.w = c->weights.ptr;
    p.out = partials;
    p.status = status;
    p.size = c->x.length;
    p.x_stride = bc_cuda_stride(&c->x);
    p.w_stride = c->weights.length == c->x.length ? bc_cuda_stride(&c->weights) : 0;
    p.lo = lo;
    p.hi = hi;
    p.n = c->n;
    p.shared_bins = hi - lo;
    p.copies = BC_CUDA_THREADS / 32;
    p.scatter = c->scatter;
    args[0] = &p;
    args[1] = (void *)c->fused; /* read only by a fused kernel, which takes two */
    return bc_cuda_check(
        api,
        api->LaunchKernel(k->hist, (unsigned)blocks, 1, 1, BC_CUDA_THREADS, 1, 1,
                          (unsigned)((hi - lo) * (BC_CUDA_THREADS / 32) * c->shared_itemsize),
                          c->stream, args, NULL),
        "cuLaunchKernel(deterministic histogram pass)", err);
}

/* Queue the sum, in block order, of `bins` bins of partial sums `stride`
 * apart into the output at `dst`. */
static int bc_cuda_det_queue_finish(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                    bc_CUstream stream, bc_CUdeviceptr partials, bc_CUdeviceptr dst,
                                    long long bins, long long stride, long long blocks,
                                    bc_cuda_error *err)
{
    bc_det_finish_params p;
    p.src = partials;
    p.dst = dst;
    p.bins = bins;
    p.stride = stride;
    p.blocks = blocks;
    return bc_cuda_queue_finish_kernel(api, k, stream, bins, &p,
                                       "cuLaunchKernel(deterministic finish)", err);
}

/*
 * The deterministic bincount of float weights (steps 0-4 above).  Returns 0
 * with *result filled (an exact-size array, never a view), or -1 with *err
 * filled; either way no buffer of the call is left allocated except the
 * result's.
 */
static int bc_cuda_bincount_det(const bc_cuda_api *api, const bc_cuda_bincount_call *c,
                                const bc_cuda_kernels *k, const bc_cuda_host *host,
                                bc_cuda_result *result, bc_cuda_error *err)
{
    const long long warps = BC_CUDA_THREADS / 32;
    void *buf = NULL, *out = NULL;
    bc_CUdeviceptr buf_ptr = 0, out_ptr = 0, status_ptr;
    long long span, blocks, first, length = 0, lo;
    const int begun = bc_cuda_bincount_begin(api, c, k, host, result, err);

    if (begun != 0)
        return begun > 0 ? 0 : -1;

    /* 1. The window and the grid. */
    span = k->shared_budget / (warps * c->shared_itemsize);
    if (span < 1)
        return bc_cuda_fail_text(err, BC_CUDA_E_DRIVER,
                                 "the deterministic histogram kernel got no shared memory",
                                 1 /* CUDA_ERROR_INVALID_VALUE */, 0, 0);
    blocks = bc_ceil_div(c->x.length, BC_CUDA_MIN_ELEMS_PER_BLOCK);
    blocks = blocks < BC_CUDA_DET_BLOCKS ? blocks : BC_CUDA_DET_BLOCKS;
    if (c->scatter) {
        first = c->n;
    } else {
        first = c->capacity_hint > 0 ? c->capacity_hint : BC_CUDA_FIRST_PASS_BINS;
        first = c->n > first ? c->n : first;
    }
    first = first < span ? first : span;
    buf = bc_cuda_alloc(host, BC_DT_FLOAT64, blocks * span + BC_CUDA_STATUS_BYTES / 8, 0,
                        &buf_ptr, blocks * span, 8, err);
    if (buf == NULL)
        return -1;
    status_ptr = buf_ptr + (bc_CUdeviceptr)(blocks * span) * 8u;

    /* 2. The first pass, 3. the one wait. */
    if (bc_cuda_check(api, api->MemsetD32Async(status_ptr, 0, BC_CUDA_STATUS_BYTES / 4, c->stream),
                      "cuMemsetD32Async", err) != 0 ||
        bc_cuda_det_queue_pass(api, k, c, buf_ptr, status_ptr, blocks, 0, first, err) != 0 ||
        bc_cuda_read_length(api, host, c, k, status_ptr, &length, err) != 0)
        goto fail;

    /* 4. The output, window by window. */
    out = bc_cuda_alloc(host, c->out_dtype, length, 0, &out_ptr, length, c->out_itemsize, err);
    if (out == NULL)
        goto fail;
    for (lo = 0; lo < length;) {
        const long long width = lo == 0 ? first : span;
        const long long hi = lo + width < length ? lo + width : length;
        if (lo > 0 &&
            bc_cuda_det_queue_pass(api, k, c, buf_ptr, status_ptr, blocks, lo, hi, err) != 0)
            goto fail;
        if (bc_cuda_det_queue_finish(api, k, c->stream, buf_ptr,
                                     out_ptr + (bc_CUdeviceptr)lo * (bc_CUdeviceptr)c->out_itemsize,
                                     hi - lo, lo == 0 ? first : hi - lo, blocks, err) != 0)
            goto fail;
        lo = hi;
    }
    /* The last finish was the last operation that reads the partial sums. */
    return bc_cuda_bincount_end(host, buf, out, length, 1, result);

fail:
    return bc_cuda_bincount_end(host, buf, out, 0, 0, result);
}

#endif /* AESARA_BINCOUNT_CUDA_DET_LAUNCH_H */
