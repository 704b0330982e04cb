/*
 * bincount_cuda_det_bucket.cuh -- the bucket path of the deterministic float
 * histogram (aesara.config.deterministic == "more"): outputs of more than
 * BC_CUDA_DET_PASS_MAX_BINS bins, whose window passes over x
 * (bincount_cuda_det.cuh) would need one pass per window.  Neighbours:
 * bincount_cuda_det.cuh (the window pass and the per-warp sums reused here,
 * the finishing kernel), bincount_cuda_det.h (the sizes and the layout of
 * the scratch buffer), bincount_cuda_kernel.cu (which instantiates det_pass),
 * bincount_cuda_det_launch.h (the launcher, which queues the stages in
 * order), bc_cuda_det_sort.cuh (the counting sort's pieces that COUNT,
 * REDUCE, SCAN and SCATTER take, shared with the rows' bucket pre-pass).
 * Valid CUDA C++17 on its own: it defines templates only.
 *
 * Algorithm: one most-significant-digit radix pass on the window of each
 * value (window = bin / window bins: 1024 float64 or 2048 float32 bins, the
 * same on every device), then per window the shared-memory sums of the
 * window pass over the window's bucket instead of over x.  Stages, each a
 * launch of the same kernel (bc_hist_params stage):
 *   COUNT    x is cut into `tiles` tiles of consecutive positions (tile t:
 *            block t; tiles and their size from the length of x alone).
 *            Each block counts its tile's values per window in shared
 *            memory (or in the table in global memory when the windows'
 *            counters do not fit) with integer atomics (exact), and writes
 *            table[window x tiles + tile].
 *   REDUCE   block b sums its run of the table (window-major order).
 *   SCAN     block b scans its run in place, from the sum of the runs
 *            before it: table[w x tiles + t] becomes the bucket offset of
 *            tile t's values of window w; starts[w] the first entry of
 *            window w, starts[windows] the bucket's size.
 *   SCATTER  each block re-reads its tile (x and the weights, computed in
 *            the fused case) and writes (bin within the window, weight) to
 *            its window's bucket at the tile's offset plus its rank.  The
 *            ranks: a warp takes DET_UNROLL groups of 32 consecutive
 *            positions; __match_any_sync finds the lanes of a group in the
 *            same window, a lane's rank is the count of those below it, and
 *            the warps of the block, in warp order, then their groups in
 *            order, take their offsets from the window's cursor.  So each
 *            window's bucket holds its values in the order of their
 *            positions in x: a stable scatter.
 *   SUM      the bucket (all windows one after the other) is cut into
 *            chunks of bc_det_chunk entries, chunk k: block k.  For each
 *            window a chunk touches, the block sums that window's entries
 *            as the window pass sums x (a private sub-histogram per warp,
 *            groups of 32 entries dealt to the warps by position, lanes
 *            combined by det_add_group, warps summed in warp order in
 *            float64) into partial row chunk + window (distinct for every
 *            pair a chunk and a window share); a device with less shared
 *            memory than a window needs sums it in sub-windows, each bin
 *            getting the same additions.
 *   finish   (det_finish) each bin sums, in chunk order, the partial rows of
 *            the chunks that hold its window's entries, and rounds once.
 * The order of every float addition thus follows from the values and the
 * lengths of x and of the output alone: the tiles, the chunks and each
 * entry's warp come from positions and exact counts, never from timing,
 * thread count or the device.  Integer counts and offsets are exact.
 * float32 weights are summed as in the window pass: in float32 within a
 * warp's sub-histogram, in float64 from there on; a bin starts at +0.0.
 */
#ifndef BINCOUNT_CUDA_DET_BUCKET_CUH
#define BINCOUNT_CUDA_DET_BUCKET_CUH

#include "bc_cuda_det_sort.cuh"
#include "bincount_cuda_det.cuh"

namespace bc {

/* The arrays of the scratch buffer (bc_det_make_layout) and the sizes. */
template <typename W> struct det_bucket {
    bc_u32 *table, *runs, *starts;
    W *weights;
    unsigned short *bins;
    double *partials;
    bc_i64 windows, tiles, window_bins, tile_values, chunk;

    __device__ __forceinline__ explicit det_bucket(const bc_hist_params &p)
    {
        const bc_det_layout l = bc_det_make_layout(p.size, p.windows, p.tiles, sizeof(W));
        char *s = reinterpret_cast<char *>(p.scratch);
        table = reinterpret_cast<bc_u32 *>(s + l.table);
        runs = reinterpret_cast<bc_u32 *>(s + l.runs);
        starts = reinterpret_cast<bc_u32 *>(s + l.starts);
        weights = reinterpret_cast<W *>(s + l.weights);
        bins = reinterpret_cast<unsigned short *>(s + l.bins);
        partials = reinterpret_cast<double *>(s + l.partials);
        windows = p.windows;
        tiles = p.tiles;
        window_bins = bc_det_window_bins(sizeof(W));
        tile_values = bc_det_tile_values(p.size, p.tiles);
        chunk = bc_det_chunk(p.size);
    }
};

/* The bin of the value at `pos`, false when it has none in [0, p.hi) (the
 * range check ran before, in the window stage). */
template <typename X, bool FX>
__device__ __forceinline__ bool det_bin_at(const bc_hist_params &p, const bc_fused_params *f,
                                           bc_i64 pos, bc_u64 &bin)
{
    const X *x = reinterpret_cast<const X *>(p.x);
    const X xv = FX ? (X)bc_fused_x(*f, pos) : __ldcs(x + pos * p.x_stride);
    bc_u64 vmax = 0;
    return to_bin(xv, typename traits<X>::sign(), p, bin, vmax) && bin < (bc_u64)p.hi;
}

/* COUNT: the block's tile counted per window (p.shared_bins != 0: the
 * counters in shared memory, else in the zeroed table). */
template <typename X, typename W, bool FX>
__device__ __forceinline__ void det_count(const bc_hist_params &p, const bc_fused_params *f)
{
    const det_bucket<W> d(p);
    const bool here = p.shared_bins != 0;
    bc_u32 *count = here ? reinterpret_cast<bc_u32 *>(dynamic_shared()) : d.table + blockIdx.x;
    const bc_i64 step = here ? 1 : d.tiles;
    const bc_i64 begin = (bc_i64)blockIdx.x * d.tile_values;
    const bc_i64 end = begin + d.tile_values < p.size ? begin + d.tile_values : p.size;
    if (here)
        det_zero(count, (bc_u64)d.windows);
    for (bc_i64 base = begin; base < end; base += blockDim.x) {
        const bc_i64 pos = base + threadIdx.x;
        bc_u64 bin = 0;
        const bool live = pos < end && det_bin_at<X, FX>(p, f, pos, bin);
        det_count_group(count, step, live ? (unsigned)(bin / d.window_bins) : 0u, live);
    }
    if (here) {
        __syncthreads();
        for (bc_i64 w = threadIdx.x; w < d.windows; w += blockDim.x)
            d.table[w * d.tiles + blockIdx.x] = count[w];
    }
}

/* REDUCE: runs[b] = the sum of block b's run of the table. */
template <typename W> __device__ __forceinline__ void det_reduce(const bc_hist_params &p)
{
    const det_bucket<W> d(p);
    det_reduce_table(d.table, d.windows * d.tiles, d.runs);
}

/* SCAN: the table's exclusive scan in place, the windows' starts, and
 * starts[windows] (the tiles, at most BC_CUDA_DET_BLOCKS, are no more than
 * the threads of a block). */
template <typename W> __device__ __forceinline__ void det_scan(const bc_hist_params &p)
{
    const det_bucket<W> d(p);
    det_scan_table(d.table, d.windows, d.tiles, d.runs, d.starts);
}

/* SCATTER: the block's tile to the buckets, stable (see the top).  The
 * window cursors: in shared memory when p.shared_bins != 0, else the
 * block's own column of the table. */
template <typename X, typename W, bool FUSED, bool FX>
__device__ __forceinline__ void det_scatter(const bc_hist_params &p, const bc_fused_params *f)
{
    const det_bucket<W> d(p);
    const bool here = p.shared_bins != 0;
    bc_u32 *cursor = here ? reinterpret_cast<bc_u32 *>(dynamic_shared()) : d.table + blockIdx.x;
    const bc_i64 step = here ? 1 : d.tiles;
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const W *w = reinterpret_cast<const W *>(p.w);
    const bc_i64 begin = (bc_i64)blockIdx.x * d.tile_values;
    const bc_i64 end = begin + d.tile_values < p.size ? begin + d.tile_values : p.size;
    if (here) {
        for (bc_i64 c = threadIdx.x; c < d.windows; c += blockDim.x)
            cursor[c] = d.table[c * d.tiles + blockIdx.x];
        __syncthreads();
    }
    for (bc_i64 base = begin; base < end; base += (bc_i64)blockDim.x * DET_UNROLL) {
        unsigned key[DET_UNROLL];
        bool live[DET_UNROLL];
        bc_u32 dst[DET_UNROLL];
        unsigned short sub[DET_UNROLL];
        W v[DET_UNROLL];
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++) {
            const bc_i64 pos = base + ((bc_i64)warp * DET_UNROLL + k) * 32 + lane;
            bc_u64 bin = 0;
            key[k] = 0;
            sub[k] = 0;
            v[k] = (W)0;
            live[k] = pos < end && det_bin_at<X, FX>(p, f, pos, bin);
            if (live[k]) {
                key[k] = (unsigned)(bin / d.window_bins);
                sub[k] = (unsigned short)(bin - (bc_u64)key[k] * d.window_bins);
                v[k] = FUSED ? (W)bc_fused_weight(*f, pos) : __ldcs(w + pos * p.w_stride);
            }
        }
        det_stable_slots(cursor, step, key, live, dst);
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++) {
            if (live[k]) {
                d.weights[dst[k]] = v[k];
                d.bins[dst[k]] = sub[k];
            }
        }
    }
}

/* The sub-windows of `span` bins that the entries [e0, e1) touch: bit i
 * for sub-window i < 63, bit 63 for any from 63 on (the caller skips a
 * sub-window only when its bit is clear).  `masks` holds a word per warp,
 * after the sub-histograms. */
template <typename W>
__device__ __forceinline__ bc_u64 det_sub_windows(const det_bucket<W> &d, bc_i64 e0, bc_i64 e1,
                                                  bc_i64 span, bc_u64 *masks)
{
    bc_u64 m = 0;
    for (bc_i64 e = e0 + threadIdx.x; e < e1; e += blockDim.x)
        m |= 1ull << ((bc_i64)d.bins[e] / span < 63 ? (bc_i64)d.bins[e] / span : 63);
    for (int k = 16; k > 0; k >>= 1)
        m |= __shfl_xor_sync(FULL_WARP, m, k);
    __syncthreads();
    if ((threadIdx.x & 31u) == 0u)
        masks[threadIdx.x >> 5] = m;
    __syncthreads();
    m = 0;
    for (unsigned c = 0; c < (blockDim.x >> 5); c++)
        m |= masks[c];
    return m;
}

/* SUM: block k's chunk of the buckets, per window it touches, into the
 * partial rows k + window; p.shared_bins bins of each warp's sub-histogram
 * per sub-window. */
template <typename W> __device__ __forceinline__ void det_sum(const bc_hist_params &p)
{
    const det_bucket<W> d(p);
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const bc_i64 total = d.starts[d.windows];
    const bc_i64 c0 = (bc_i64)blockIdx.x * d.chunk;
    const bc_i64 c1 = c0 + d.chunk < total ? c0 + d.chunk : total;
    const bc_i64 span = p.shared_bins;
    W *shared = reinterpret_cast<W *>(dynamic_shared());
    W *mine = shared + warp * span;
    bc_u64 *masks = dynamic_shared() + (warps * span * sizeof(W) + 7) / 8;
    if (c0 >= c1)
        return;
    bc_i64 lo = 0, hi = d.windows; /* the window of entry c0: starts[lo] <= c0 < starts[hi] */
    while (hi - lo > 1) {
        const bc_i64 mid = (lo + hi) / 2;
        if ((bc_i64)d.starts[mid] <= c0)
            lo = mid;
        else
            hi = mid;
    }
    for (bc_i64 win = lo; win < d.windows && (bc_i64)d.starts[win] < c1; win++) {
        const bc_i64 e0 = c0 > (bc_i64)d.starts[win] ? c0 : (bc_i64)d.starts[win];
        const bc_i64 e1 = c1 < (bc_i64)d.starts[win + 1] ? c1 : (bc_i64)d.starts[win + 1];
        if (e0 >= e1)
            continue;
        double *partial = d.partials + ((bc_i64)blockIdx.x + win) * d.window_bins;
        /* (one sub-window: the part has entries in it) */
        const bc_u64 touched =
            span >= d.window_bins ? ~0ull : det_sub_windows(d, e0, e1, span, masks);
        for (bc_i64 s0 = 0; s0 < d.window_bins; s0 += span) {
            const bc_i64 width = s0 + span < d.window_bins ? span : d.window_bins - s0;
            if (s0 / span < 64 && !((touched >> (s0 / span)) & 1u)) {
                for (bc_i64 b = threadIdx.x; b < width; b += blockDim.x)
                    partial[s0 + b] = 0.0; /* no entry: the sums of +0.0 */
                continue;
            }
            det_zero(shared, (bc_u64)(warps * span));
            for (bc_i64 base = e0 + (bc_i64)warp * 32 * DET_UNROLL; base < e1;
                 base += (bc_i64)blockDim.x * DET_UNROLL) {
                unsigned key[DET_UNROLL];
                W v[DET_UNROLL];
#pragma unroll
                for (int k = 0; k < DET_UNROLL; k++) {
                    const bc_i64 pos = base + k * 32 + (bc_i64)lane;
                    const bc_i64 b = pos < e1 ? (bc_i64)d.bins[pos] - s0 : -1;
                    key[k] = b >= 0 && b < width ? (unsigned)b : DET_NONE;
                    v[k] = key[k] != DET_NONE ? d.weights[pos] : (W)0;
                }
#pragma unroll
                for (int k = 0; k < DET_UNROLL; k++)
                    det_add_group(mine, key[k], v[k]);
            }
            __syncthreads();
            det_merge(shared, (bc_u64)span, (bc_u64)width, partial + s0);
            __syncthreads();
        }
    }
}

/* The deterministic kernel: the stage p.stage (bincount_cuda_det.h). */
template <typename X, typename W, bool FUSED, bool FX>
__device__ __forceinline__ void det_pass(const bc_hist_params &p, const bc_fused_params *f)
{
    switch (p.stage) {
    case BC_DET_STAGE_COUNT:
        det_count<X, W, FX>(p, f);
        break;
    case BC_DET_STAGE_REDUCE:
        det_reduce<W>(p);
        break;
    case BC_DET_STAGE_SCAN:
        det_scan<W>(p);
        break;
    case BC_DET_STAGE_SCATTER:
        det_scatter<X, W, FUSED, FX>(p, f);
        break;
    case BC_DET_STAGE_SUM:
        det_sum<W>(p);
        break;
    default:
        det_hist<X, W, FUSED, FX>(p, f);
    }
}

} /* namespace bc */

#endif /* BINCOUNT_CUDA_DET_BUCKET_CUH */
