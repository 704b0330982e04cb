/*
 * cuda/bincount_det.cuh -- the device code of the deterministic float
 * histogram of aesara_bincount.GpuBincount and GpuFusedBincount (chosen when
 * aesara.config.deterministic == "more" at compile time): float weights
 * summed in an order fixed by the launch geometry alone, so that a call
 * returns the same bits every time on the same device.  Neighbours:
 * cuda/bincount_hist.cuh (the default pass, whose to_bin, range check and
 * fused hooks this one reuses), cuda/bincount_det_defs.h (the parameters of the
 * finishing kernel), cuda/bincount_kernels.cu (which instantiates both
 * kernels), cuda_host/bincount_det_launch.h (the launcher).  Valid CUDA C++17 on
 * its own: it defines templates only, no kernel.
 *
 * Algorithm (no float atomic anywhere, so no order left to the hardware):
 *   - The pass (det_hist) counts the window [lo, hi) of bins, which fits in
 *     shared memory once per warp: each warp has a private sub-histogram of
 *     the window, which only that warp writes.
 *   - Positions are dealt out by the fixed grid: warp w of block b takes, in
 *     each round of the grid, DET_UNROLL groups of 32 consecutive positions:
 *     a lane loads x (or computes it, and a computed weight) for all its
 *     groups first, with no branch between the loads (det_load_groups: a
 *     position past the end reads the last one), then finds the bins, then
 *     loads the stored weights of those in the window (det_load_weights),
 *     so that a round waits for memory about twice, not once per load.
 *     For each group the lanes that hold the same bin are found with
 *     __match_any_sync, their weights summed over a fixed tree of their
 *     lane ranks (peer_sum, cuda/device_helpers.cuh) and the lowest of them
 *     adds the sum to the warp's bin with a plain read-modify-write, then
 *     __syncwarp orders that write before the next group's.  So a warp's bin
 *     receives its sums in group order, each sum in lane order.
 *   - At the end each block sums its warps' sub-histograms, warp 0 first,
 *     in float64, and writes the sum of each bin of the window to its own
 *     row of a partial-histogram buffer (float64, blocks x window, no
 *     atomics).
 *   - The finishing kernel (det_finish) adds, for each bin, the blocks'
 *     partial sums in block order, block 0 first, and rounds once to the
 *     output dtype.
 *   The result depends on the values and the grid only (not on the window:
 *   a bin gets the same sums whichever pass counts it), and the launcher
 *   fixes the grid from the length of x alone (BC_CUDA_DET_BLOCKS), never
 *   from timing or the device.  Bins that do not fit in one window are
 *   counted by further passes over x, one per window, for outputs of up to
 *   BC_CUDA_DET_PASS_MAX_BINS bins; longer outputs take the bucket path
 *   (cuda/bincount_det_bucket.cuh), which reuses det_add_group, det_zero
 *   and det_merge below over each window's bucket instead of x and
 *   det_finish's chunk branch (cuda_host/bincount_det_launch.h).
 *
 * float32 weights are summed in float32 within a warp's sub-histogram (as
 * the default pass sums them in shared memory; float32 arithmetic keeps
 * subnormals, as the modules are compiled without -ftz) and in float64 from
 * the warps' sums on, rounded once.  A bin starts at +0.0, so a bin that
 * receives only -0.0 is +0.0, as numpy.bincount's; NaN and inf propagate as
 * in any sum.  The range check (max(x), the first refused position) is the
 * default pass's (publish_check, last_block_check).
 */
#ifndef BINCOUNT_CUDA_DET_CUH
#define BINCOUNT_CUDA_DET_CUH

#include "cuda/det_sort.cuh"
#include "cuda/bincount_det_defs.h"
#include "cuda/bincount_hist.cuh"

namespace bc {

/* Groups of 32 positions a lane loads before it adds them (loads in flight,
 * since a block per multiprocessor leaves few warps to hide latency). */
enum { DET_UNROLL = 4 };
/* Partial sums of a bin the finish loads before it adds them (whole
 * batches with no predicate: ptxas issues the loads back to back). */
enum { DET_FINISH_LOADS = 16 };

/* Add one group of 32 lanes to a warp's bins `mine`: the lanes that hold
 * the same key are found with __match_any_sync, their values summed over
 * the fixed tree of their lane ranks (peer_sum) and the lowest of them adds
 * the sum with a plain read-modify-write; __syncwarp orders it before the
 * next group's.  Every lane of the warp calls it; DET_NONE adds nothing. */
template <typename W> __device__ __forceinline__ void det_add_group(W *mine, unsigned key, W v)
{
    const unsigned lane = threadIdx.x & 31u;
    const unsigned peers = __match_any_sync(FULL_WARP, key);
    const W sum = peer_sum(FULL_WARP, peers, v);
    if (key != DET_NONE && (peers & ((1u << lane) - 1u)) == 0u)
        mine[key] += sum;
    __syncwarp(FULL_WARP);
}

/* Zero the block's `warps x span` shared bins of W, then a barrier. */
template <typename W> __device__ __forceinline__ void det_zero(W *shared, bc_u64 count)
{
    for (bc_u64 i = threadIdx.x; i < count; i += blockDim.x)
        shared[i] = (W)0;
    __syncthreads();
}

/* After a barrier: the block's partial histogram of `width` bins, the
 * bins (`span` apart) of its first `warps` warps summed warp 0 first, in
 * float64.  (A warp that added nothing holds +0.0 sums, and adding +0.0
 * changes no sum, which starts at +0.0 and so is never -0.0: leaving such
 * warps out gives the same bits.) */
template <typename W>
__device__ __forceinline__ void det_merge(const W *shared, bc_u64 span, bc_u64 width,
                                          double *partial, unsigned warps)
{
    for (bc_u64 b = threadIdx.x; b < width; b += blockDim.x) {
        double s = (double)shared[b];
        for (unsigned c = 1; c < warps; c++)
            s += (double)shared[c * span + b];
        partial[b] = s;
    }
}

/* The value of x at `pos` (computed by bc_fused_x when FX). */
template <typename X, bool FX>
__device__ __forceinline__ X det_x_at(const bc_hist_params &p, const bc_fused_params *f, bc_i64 pos)
{
    const X *x = reinterpret_cast<const X *>(p.x);
    return FX ? (X)bc_fused_x(*f, pos) : __ldcs(x + pos * p.x_stride);
}

/* A lane's DET_UNROLL values of x, at base + k * 32 + lane (k < DET_UNROLL),
 * and, when FUSED, their computed weights (else v = 0); a position at or
 * past `end` reads the one before `end` instead (its lane adds nothing), so
 * there is no branch between the loads and all of them are in flight at
 * once. */
template <typename X, typename W, bool FUSED, bool FX>
__device__ __forceinline__ void det_load_groups(const bc_hist_params &p, const bc_fused_params *f,
                                                bc_i64 base, bc_i64 end, X *xv, W *v)
{
    const bc_i64 lane = (bc_i64)(threadIdx.x & 31u);
#pragma unroll
    for (int k = 0; k < DET_UNROLL; k++) {
        const bc_i64 pos = base + k * 32 + lane;
        const bc_i64 at = pos < end ? pos : end - 1;
        xv[k] = det_x_at<X, FX>(p, f, at);
        v[k] = FUSED ? (W)bc_fused_weight(*f, at) : (W)0;
    }
}

/* Unless FUSED: the stored weights of a lane's groups that have a key
 * (predicated loads, all in flight at once); the others keep v. */
template <typename W, bool FUSED>
__device__ __forceinline__ void det_load_weights(const bc_hist_params &p, bc_i64 base,
                                                 const unsigned *key, W *v)
{
    const W *w = reinterpret_cast<const W *>(p.w);
    const bc_i64 lane = (bc_i64)(threadIdx.x & 31u);
#pragma unroll
    for (int k = 0; k < DET_UNROLL; k++)
        if (!FUSED && key[k] != DET_NONE)
            v[k] = __ldcs(w + (base + k * 32 + lane) * p.w_stride);
}

/*
 * One deterministic pass over x into the window [p.lo, p.hi) (see the top).
 * X: dtype of x; W: of the weights (float or double), also the type of a
 * warp's bins; FUSED / FX: the weights / x computed by bc_fused_weight /
 * bc_fused_x.  p.out is the partial-histogram buffer: block b writes bins
 * [lo, hi) to out[b * (hi - lo) ...].  The block's dynamic shared memory
 * holds (blockDim.x / 32) * (hi - lo) bins of W.
 */
template <typename X, typename W, bool FUSED, bool FX>
__device__ __forceinline__ void det_hist(const bc_hist_params &p, const bc_fused_params *f)
{
    typedef typename traits<X>::sign sign;
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warp = threadIdx.x >> 5;
    const unsigned warps = blockDim.x >> 5;
    const bc_u64 lo = (bc_u64)p.lo;
    const bc_u64 span = (bc_u64)(p.hi - p.lo);
    bc_status *status = reinterpret_cast<bc_status *>(p.status);
    W *shared = reinterpret_cast<W *>(dynamic_shared());
    W *mine = shared + warp * span;

    det_zero(shared, warps * span);

    bc_u64 vmax = 0, first_bad = NO_POSITION;
    const bc_i64 round = (bc_i64)gridDim.x * blockDim.x * DET_UNROLL;
    for (bc_i64 base = ((bc_i64)blockIdx.x * warps + warp) * 32 * DET_UNROLL; base < p.size;
         base += round) {
        unsigned key[DET_UNROLL];
        W v[DET_UNROLL];
        X xv[DET_UNROLL];
        /* 1. x (and computed weights) of every group, with no branch
         * between the loads: all of them in flight at once. */
        det_load_groups<X, W, FUSED, FX>(p, f, base, p.size, xv, v);
        /* 2. The bins. */
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++) {
            const bc_i64 pos = base + k * 32 + (bc_i64)lane;
            bc_u64 bin = 0;
            key[k] = DET_NONE;
            if (pos < p.size) {
                if (!to_bin(xv[k], sign(), p, bin, vmax))
                    first_bad = (bc_u64)pos < first_bad ? (bc_u64)pos : first_bad;
                else if (bin - lo < span)
                    key[k] = (unsigned)(bin - lo);
            }
        }
        /* 3. The stored weights of the values in the window (predicated
         * loads, again all in flight at once), then the adds. */
        det_load_weights<W, FUSED>(p, base, key, v);
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++)
            det_add_group(mine, key[k], v[k]);
    }

    publish_check(status, vmax, first_bad);
    __syncthreads();

    /* The block's partial histogram: its warps' bins, warp 0 first. */
    det_merge(shared, span, span, reinterpret_cast<double *>(p.out) + (bc_u64)blockIdx.x * span,
              warps);
    __syncthreads();
    last_block_check<X, FX>(p, f, status);
}

/* The sum of `count` (at least 1) partial sums `stride` apart from `src`,
 * in that order, the first not added to anything: DET_FINISH_LOADS loads
 * in flight, then their adds in the same order (the bits of a plain loop). */
__device__ __forceinline__ double det_sum_rows(const double *src, bc_i64 stride, bc_i64 count)
{
    double s = src[0];
    bc_i64 k = 1;
    for (; k + DET_FINISH_LOADS <= count; k += DET_FINISH_LOADS) {
        double t[DET_FINISH_LOADS];
#pragma unroll
        for (int u = 0; u < DET_FINISH_LOADS; u++)
            t[u] = src[(k + u) * stride];
#pragma unroll
        for (int u = 0; u < DET_FINISH_LOADS; u++)
            s += t[u];
    }
    if (k < count) { /* the last, partial batch: predicated loads */
        double t[DET_FINISH_LOADS];
#pragma unroll
        for (int u = 0; u < DET_FINISH_LOADS; u++)
            t[u] = k + u < count ? src[(k + u) * stride] : 0.0;
#pragma unroll
        for (int u = 0; u < DET_FINISH_LOADS; u++)
            if (k + u < count)
                s += t[u];
    }
    return s;
}

/* Each bin's partial sums added in order by det_sum_rows, rounded once to
 * OUT: in a window pass the blocks' rows, block 0 first; in the bucket path
 * (cuda/bincount_det_bucket.cuh) the rows of the chunks that hold the bin's
 * window's entries, chunk order (a bin of an empty window +0.0). */
template <typename OUT> __device__ __forceinline__ void det_finish(const bc_det_finish_params &p)
{
    const double *src = reinterpret_cast<const double *>(p.src);
    OUT *dst = reinterpret_cast<OUT *>(p.dst);
    const bc_i64 step = (bc_i64)gridDim.x * blockDim.x;
    const bc_u32 *starts = reinterpret_cast<const bc_u32 *>(p.starts);
    for (bc_i64 j = (bc_i64)blockIdx.x * blockDim.x + threadIdx.x; j < p.bins; j += step) {
        double s = 0.0;
        if (starts == 0) {
            s = det_sum_rows(src + j, p.stride, p.blocks);
        } else {
            /* window w's rows: chunk + w for the chunks e0 / chunk ...
             * (e1 - 1) / chunk of its entries [e0, e1) */
            const bc_i64 w = j / p.window_bins, b = j - w * p.window_bins;
            const bc_i64 e0 = starts[w], e1 = starts[w + 1];
            if (e1 > e0)
                s = det_sum_rows(src + (e0 / p.chunk + w) * p.window_bins + b, p.window_bins,
                                 (e1 - 1) / p.chunk - e0 / p.chunk + 1);
        }
        dst[j] = (OUT)s;
    }
}

} /* namespace bc */

#endif /* BINCOUNT_CUDA_DET_CUH */
