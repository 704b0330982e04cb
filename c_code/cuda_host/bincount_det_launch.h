/*
 * cuda_host/bincount_det_launch.h -- the launcher of the deterministic float
 * histogram (the kernels bincount_hist_det_* or a generated fused one
 * built with BC_FUSED_DET, and bincount_det_finish_*; the algorithm is in
 * cuda/bincount_det.cuh).  GpuBincount and GpuFusedBincount run it instead
 * of bc_cuda_bincount (cuda_host/bincount_launch.h) when they were compiled
 * under aesara.config.deterministic == "more" and sum float weights
 * (cuda_host/gpu_bincount_op.c, BC_DETERMINISTIC).
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
 *      waves).
 *   2. The first pass, for the expected length L: n in the scatter-add
 *      form, else max(n, the previous call's length or
 *      BC_CUDA_FIRST_PASS_BINS).  When L would take the bucket path
 *      (bc_det_bucketed), the bucket path's COUNT for L's windows, which
 *      checks x as it counts (its scratch buffer, with the status at its
 *      head, cleared by one memset).  Else a window pass of the bins [0, F),
 *      F = min(L, S), into one allocation of blocks x S float64 partial
 *      sums and the status (zeroed by a memset), which also finds max(x)
 *      and the first refused position.
 *   3. The status comes back (the one wait); a refused value raises.
 *   4. The output, exactly `length` bins.  Up to BC_CUDA_DET_PASS_MAX_BINS
 *      bins: the finish kernel sums the first window's partials in block
 *      order; each further window [lo, lo + S) is a pass over x and a
 *      finish, queued without waiting (the partial sums allocated here when
 *      step 2 was a COUNT).  More bins: the bucket path
 *      (cuda/bincount_det_bucket.cuh), its COUNT again when step 2 counted
 *      none or other windows (a new scratch buffer: bc_det_make_layout, a
 *      u32 count per window and tile, the windows' totals and starts, 2 +
 *      weight bytes per value of x for the buckets, 8 bytes per bin of the
 *      windows for the chunks' partial sums, 8 KB per chunk), then SCAN
 *      (none for at most 32 windows), SCATTER, SUM and the finish, all
 *      queued without waiting.
 *
 * With the result to the host (cuda_host/bincount_to_host.h,
 * bc_cuda_bincount_det_host) steps 2-4 run for the expected length before
 * the wait, into memory the caller keeps, and the wait follows one copy of
 * the output and the status; this launcher runs only when that length was
 * short or takes the bucket path (bc_cuda_det_geometry and
 * bc_cuda_det_queue_windows serve both).
 *
 * The order of every float addition follows from the grid alone (a bin's
 * value is the same whichever window it falls in), and the grid from the
 * length of x alone, or, in the bucket path, from the lengths of x and of
 * the output and the values: never from timing, nor from the device.  So the same
 * inputs give the same bits on every call, and, with the same kernels (the
 * package and NVRTC versions), on any GPU.
 */
#ifndef AESARA_BINCOUNT_CUDA_DET_LAUNCH_H
#define AESARA_BINCOUNT_CUDA_DET_LAUNCH_H

#include "cuda/kernel_defs.h"
#include "cuda/bincount_det_defs.h"
#include "cuda_host/driver.h"
#include "cuda_host/bincount_launch.h"

/* The failure of a device whose shared memory cannot hold one bin a warp. */
static int bc_det_no_shared(bc_cuda_error *err)
{
    return bc_cuda_fail_text(err, BC_CUDA_E_DRIVER, "the deterministic histogram kernel got no shared memory",
                             1 /* CUDA_ERROR_INVALID_VALUE */, 0, 0);
}

/* The parameters of a launch of the deterministic kernel that are the same
 * in every stage. */
static bc_hist_params bc_cuda_det_params(const bc_cuda_bincount_call *c, bc_CUdeviceptr out,
                                         bc_CUdeviceptr status, long long lo, long long hi)
{
    bc_hist_params p;
    memset(&p, 0, sizeof(p));
    p.x = c->x.ptr;
    p.w = c->weights.ptr;
    p.out = out;
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
    return p;
}

/* Queue one launch of the deterministic kernel: `blocks` blocks with
 * `shared` bytes of dynamic shared memory. */
static int bc_cuda_det_launch(const bc_cuda_api *api, const bc_cuda_kernels *k,
                              const bc_cuda_bincount_call *c, bc_hist_params *p, long long blocks,
                              long long shared, bc_cuda_error *err)
{
    void *args[2];
    args[0] = p;
    args[1] = (void *)c->fused; /* read only by a fused kernel, which takes two */
    return bc_cuda_check(api,
                         api->LaunchKernel(k->hist, (unsigned)blocks, 1, 1, BC_CUDA_THREADS, 1, 1,
                                           (unsigned)shared, c->stream, args, NULL),
                         "cuLaunchKernel(deterministic histogram)", err);
}

/* Queue one window pass over the window [lo, hi) into the partial sums at
 * `partials`, with `blocks` blocks. */
static int bc_cuda_det_queue_pass(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                  const bc_cuda_bincount_call *c, bc_CUdeviceptr partials,
                                  bc_CUdeviceptr status, long long blocks, long long lo,
                                  long long hi, bc_cuda_error *err)
{
    bc_hist_params p = bc_cuda_det_params(c, partials, status, lo, hi);
    return bc_cuda_det_launch(api, k, c, &p, blocks,
                              (hi - lo) * (BC_CUDA_THREADS / 32) * c->shared_itemsize, err);
}

/* Queue the finish kernel into the output at `dst`, `bins` bins: the sum,
 * in block order, of `blocks` partial histograms `stride` apart at `src`
 * (starts 0), or, in the bucket path, of the chunks' partial rows at `src`
 * (starts: the windows' starts in the scratch buffer, chunk: its entries
 * per chunk). */
static int bc_cuda_det_queue_finish(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                    bc_CUstream stream, bc_CUdeviceptr src, bc_CUdeviceptr dst,
                                    long long bins, long long stride, long long blocks,
                                    bc_CUdeviceptr starts, long long chunk, long long window_bins,
                                    bc_cuda_error *err)
{
    bc_det_finish_params p;
    memset(&p, 0, sizeof(p));
    p.src = src;
    p.dst = dst;
    p.bins = bins;
    p.stride = stride;
    p.blocks = blocks;
    p.starts = starts;
    p.chunk = chunk;
    p.window_bins = window_bins;
    return bc_cuda_queue_finish_kernel(api, k, stream, bins, &p,
                                       "cuLaunchKernel(deterministic finish)", err);
}

/* The window of a pass (*span bins: a warp's sub-histogram in the shared
 * memory budget) and its grid (*blocks: from the length of x alone; step 1
 * above); 0, or -1 with *err filled. */
static int bc_cuda_det_geometry(const bc_cuda_bincount_call *c, const bc_cuda_kernels *k,
                                long long *span, long long *blocks, bc_cuda_error *err)
{
    *span = k->shared_budget / ((BC_CUDA_THREADS / 32) * c->shared_itemsize);
    if (*span < 1)
        return bc_det_no_shared(err);
    *blocks = bc_ceil_div(c->x.length, BC_CUDA_MIN_ELEMS_PER_BLOCK);
    *blocks = *blocks < BC_CUDA_DET_BLOCKS ? *blocks : BC_CUDA_DET_BLOCKS;
    return 0;
}

/* Queue the window passes and finishes of the bins [lo, length) into the
 * output at `out` (bin 0's address): windows of `span` bins, each a pass
 * into the partial sums at `partials` (blocks x span float64, reused by
 * every window: the stream orders each finish before the next pass) and a
 * finish. */
static int bc_cuda_det_queue_windows(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                     const bc_cuda_bincount_call *c, bc_CUdeviceptr partials,
                                     bc_CUdeviceptr status, long long blocks, long long span,
                                     long long lo, long long length, bc_CUdeviceptr out,
                                     bc_cuda_error *err)
{
    for (; lo < length; lo += span) {
        const long long hi = lo + span < length ? lo + span : length;
        if (bc_cuda_det_queue_pass(api, k, c, partials, status, blocks, lo, hi, err) != 0 ||
            bc_cuda_det_queue_finish(api, k, c->stream, partials,
                                     out + (bc_CUdeviceptr)lo * (bc_CUdeviceptr)c->out_itemsize,
                                     hi - lo, hi - lo, blocks, 0, 0, 0, err) != 0)
            return -1;
    }
    return 0;
}

/* The parameters of the bucket path's stages over `windows` windows of
 * bins and `tiles` tiles, with its scratch buffer at `base`. */
static bc_hist_params bc_cuda_det_bucket_params(const bc_cuda_bincount_call *c, long long windows,
                                                long long tiles, bc_CUdeviceptr base)
{
    bc_hist_params p = bc_cuda_det_params(c, 0, 0, 0, windows * bc_det_window_bins(c->shared_itemsize));
    p.scratch = base;
    p.windows = windows;
    p.tiles = (int)tiles;
    p.shared_bins = 0;
    return p;
}

/*
 * The first stage of the bucket path (cuda/bincount_det_bucket.cuh), for
 * `windows` windows of bins and `tiles` tiles (the window passes' grid):
 * its scratch buffer, allocated here (*scratch at *base, released by the
 * caller after the last launch that reads it), one memset of its status,
 * count table and totals, and the COUNT launch, which also checks every
 * value of x into the status at *base (the call's range check, read by
 * bc_cuda_read_length).
 */
static int bc_cuda_det_queue_count(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                   const bc_cuda_bincount_call *c, const bc_cuda_host *host,
                                   long long tiles, long long windows, void **scratch,
                                   bc_CUdeviceptr *base, bc_cuda_error *err)
{
    const bc_det_layout l = bc_det_make_layout(c->x.length, windows, tiles, c->shared_itemsize);
    bc_hist_params p;

    *scratch = bc_cuda_alloc(host, BC_DT_FLOAT64, bc_ceil_div(l.bytes, 8), 0, base,
                             windows * bc_det_window_bins(c->shared_itemsize), c->out_itemsize,
                             err);
    if (*scratch == NULL)
        return -1;
    p = bc_cuda_det_bucket_params(c, windows, tiles, *base);
    /* the windows' counters in shared memory when they fit */
    p.shared_bins = windows * 4 <= k->shared_budget ? windows : 0;
    p.stage = BC_DET_STAGE_COUNT;
    if (bc_cuda_check(api, api->MemsetD32Async(*base, 0, (size_t)(l.starts / 4), c->stream),
                      "cuMemsetD32Async", err) != 0)
        return -1;
    return bc_cuda_det_launch(api, k, c, &p, tiles, p.shared_bins * 4, err);
}

/*
 * The rest of the bucket path after its count (bc_cuda_det_queue_count,
 * the same windows and tiles, the scratch buffer at `base`) into the output
 * at `out` of `length` bins: SCAN, SCATTER, SUM and the finish, queued in
 * order.
 */
static int bc_cuda_det_queue_bucket(const bc_cuda_api *api, const bc_cuda_kernels *k,
                                    const bc_cuda_bincount_call *c, long long tiles,
                                    long long windows, bc_CUdeviceptr base, long long length,
                                    bc_CUdeviceptr out, bc_cuda_error *err)
{
    const long long warps = BC_CUDA_THREADS / 32, size = c->x.length;
    const long long window_bins = bc_det_window_bins(c->shared_itemsize);
    const bc_det_layout l = bc_det_make_layout(size, windows, tiles, c->shared_itemsize);
    /* the sum's sub-histograms: what the budget holds beside a word per warp */
    long long span = (k->shared_budget - warps * 8) / (warps * c->shared_itemsize);
    bc_hist_params p = bc_cuda_det_bucket_params(c, windows, tiles, base);

    span = span < window_bins ? span : window_bins;
    if (span < 1)
        return bc_det_no_shared(err);
    p.stage = BC_DET_STAGE_SCAN; /* a word per warp, then a base per thread */
    if (!bc_det_scan_here(windows, tiles) &&
        bc_cuda_det_launch(api, k, c, &p, tiles, (warps + BC_CUDA_THREADS) * 4, err) != 0)
        return -1;
    /* the cursors and a row of counters per warp, or the cursors only, in
     * shared memory when they fit */
    p.stage = BC_DET_STAGE_SCATTER;
    p.shared_bins = windows * (warps + 1) * 4 <= k->shared_budget ? windows * (warps + 1)
                    : windows * 4 <= k->shared_budget            ? windows
                                                                 : 0;
    if (bc_cuda_det_launch(api, k, c, &p, tiles, p.shared_bins * 4, err) != 0)
        return -1;
    p.stage = BC_DET_STAGE_SUM;
    p.shared_bins = span; /* the sub-histograms, then a word per warp */
    if (bc_cuda_det_launch(api, k, c, &p, bc_ceil_div(size, bc_det_chunk(size)),
                           bc_ceil_div(warps * span * c->shared_itemsize, 8) * 8 + warps * 8,
                           err) != 0)
        return -1;
    return bc_cuda_det_queue_finish(api, k, c->stream, base + (bc_CUdeviceptr)l.partials, out,
                                    length, 0, 0, base + (bc_CUdeviceptr)l.starts,
                                    bc_det_chunk(size), window_bins, err);
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
    const long long window_bins = bc_det_window_bins(c->shared_itemsize);
    void *buf = NULL, *out = NULL, *scratch = NULL;
    bc_CUdeviceptr buf_ptr = 0, out_ptr = 0, status_ptr = 0, base = 0;
    long long span, blocks, first, length = 0, lo, counted_windows = 0;
    int bucketed;
    const int begun = bc_cuda_bincount_begin(api, c, k, host, result, err);

    if (begun != 0)
        return begun > 0 ? 0 : -1;

    /* 1. The window and the grid. */
    if (bc_cuda_det_geometry(c, k, &span, &blocks, err) != 0)
        return -1;
    if (c->scatter) {
        first = c->n;
    } else {
        first = c->capacity_hint > 0 ? c->capacity_hint : BC_CUDA_FIRST_PASS_BINS;
        first = c->n > first ? c->n : first;
    }

    /* 2. The first pass: the bucket path's count, which checks x as it
     * counts, when that length would take it, else a window pass. */
    if (bc_det_bucketed(c->x.length, first, blocks, c->shared_itemsize)) {
        counted_windows = bc_ceil_div(first, window_bins);
        if (bc_cuda_det_queue_count(api, k, c, host, blocks, counted_windows, &scratch, &base,
                                    err) != 0)
            goto fail;
        status_ptr = base; /* bc_det_layout status */
        first = 0;
    } else {
        first = first < span ? first : span;
        buf = bc_cuda_alloc(host, BC_DT_FLOAT64, blocks * span + BC_CUDA_STATUS_BYTES / 8, 0,
                            &buf_ptr, blocks * span, 8, err);
        if (buf == NULL)
            return -1;
        status_ptr = buf_ptr + (bc_CUdeviceptr)(blocks * span) * 8u;
        if (bc_cuda_check(api,
                          api->MemsetD32Async(status_ptr, 0, BC_CUDA_STATUS_BYTES / 4, c->stream),
                          "cuMemsetD32Async", err) != 0 ||
            bc_cuda_det_queue_pass(api, k, c, buf_ptr, status_ptr, blocks, 0, first, err) != 0)
            goto fail;
    }

    /* 3. The one wait; a refused value raises. */
    if (bc_cuda_read_length(api, host, c, k, status_ptr, &length, err) != 0)
        goto fail;

    /* 4. The output: the bucket path, or window by window. */
    out = bc_cuda_alloc(host, c->out_dtype, length, 0, &out_ptr, length, c->out_itemsize, err);
    if (out == NULL)
        goto fail;
    bucketed = bc_det_bucketed(c->x.length, length, blocks, c->shared_itemsize);
    if (bucketed && bc_ceil_div(length, window_bins) != counted_windows) {
        /* no count yet, or one of other windows: count again (the wait
         * above was the last use of the old scratch buffer) */
        void *old = scratch;
        counted_windows = bc_ceil_div(length, window_bins);
        scratch = NULL;
        if (old != NULL)
            host->release(host->ctx, old);
        if (bc_cuda_det_queue_count(api, k, c, host, blocks, counted_windows, &scratch, &base,
                                    err) != 0)
            goto fail;
    }
    if (bucketed && bc_cuda_det_queue_bucket(api, k, c, blocks, counted_windows, base, length,
                                             out_ptr, err) != 0)
        goto fail;
    if (!bucketed && buf == NULL) {
        buf = bc_cuda_alloc(host, BC_DT_FLOAT64, blocks * span, 0, &buf_ptr, blocks * span, 8,
                            err);
        if (buf == NULL)
            goto fail;
    }
    if (!bucketed) {
        /* the first window, counted by the first pass (partial rows of
         * `first` bins), then the others, a pass and a finish each */
        lo = first < length ? first : length;
        if (lo > 0 && bc_cuda_det_queue_finish(api, k, c->stream, buf_ptr, out_ptr, lo, first,
                                               blocks, 0, 0, 0, err) != 0)
            goto fail;
        if (bc_cuda_det_queue_windows(api, k, c, buf_ptr, status_ptr, blocks, span, lo, length,
                                      out_ptr, err) != 0)
            goto fail;
    }
    /* The last finish was the last operation that reads the partial sums
     * and the scratch buffer. */
    if (scratch != NULL)
        host->release(host->ctx, scratch);
    return bc_cuda_bincount_end(host, buf, out, length, 1, result);

fail:
    if (scratch != NULL)
        host->release(host->ctx, scratch);
    return bc_cuda_bincount_end(host, buf, out, 0, 0, result);
}

#endif /* AESARA_BINCOUNT_CUDA_DET_LAUNCH_H */
