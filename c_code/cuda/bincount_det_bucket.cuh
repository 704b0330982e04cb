/*
 * cuda/bincount_det_bucket.cuh -- the bucket path of the deterministic float
 * histogram (aesara.config.deterministic == "more"): outputs of more than
 * BC_CUDA_DET_PASS_MAX_BINS bins, whose window passes over x
 * (cuda/bincount_det.cuh) would need one pass per window.  Neighbours:
 * cuda/bincount_det.cuh (the window pass and the per-warp sums reused here,
 * the finishing kernel), cuda/bincount_det_defs.h (the sizes and the layout of
 * the scratch buffer), cuda/bincount_kernels.cu (which instantiates det_pass),
 * cuda_host/bincount_det_launch.h (the launcher, which queues the stages in
 * order).  Valid CUDA C++17 on its own: it defines templates only.
 *
 * Algorithm: one most-significant-digit radix pass on the window of each
 * value (window = bin / window bins: 1024 float64 or 2048 float32 bins, the
 * same on every device), then per window the shared-memory sums of the
 * window pass over the window's bucket instead of over x.  Stages, each a
 * launch of the same kernel (bc_hist_params stage):
 *   COUNT    x is cut into `tiles` tiles of consecutive positions (tile t:
 *            block t; tiles and their size from the length of x alone).
 *            Each block checks its tile (max(x), the first refused
 *            position, into the status at the head of the scratch buffer,
 *            as the window pass does: publish_check, last_block_check; the
 *            launcher reads it in the call's one wait) and counts its
 *            values per window in shared memory (or in the table in global
 *            memory when the windows' counters do not fit) with integer
 *            atomics (exact), writes table[window x tiles + tile] and adds
 *            its counts to totals[window] (integer atomics: exact).  Values
 *            at or past `windows` windows (the launcher's guess of the
 *            length was short) are left out; the launcher then counts again.
 *   SCAN     block b takes a run of windows: their starts (the totals of
 *            the windows before, scanned) and, a warp per window, the
 *            window's row of the table scanned in place: table[w x tiles +
 *            t] becomes the bucket offset of tile t's values of window w;
 *            starts[windows] the bucket's size.  For at most 32 windows
 *            (bc_det_scan_here) no SCAN is launched: each SCATTER block
 *            adds up its own column's offsets (det_scan_here).
 *   SCATTER  each block re-reads its tile (x and the weights, computed in
 *            the fused case; loaded as the window pass loads them, all of x
 *            first) and writes (bin within the window, weight) to
 *            its window's bucket at the tile's offset plus its rank.  The
 *            ranks: a warp takes DET_UNROLL groups of 32 consecutive
 *            positions; __match_any_sync finds the lanes of a group in the
 *            same window, a lane's rank is the count of those below it;
 *            the warp counts its groups per window, in group order, in a
 *            row of counters of its own, then a thread per window turns the
 *            warps' rows into each warp's offset, warp 0 first, from the
 *            window's cursor (when the rows do not fit in shared memory,
 *            the warps, in warp order, take their offsets from the cursors
 *            in turn: the same offsets).  So each window's bucket holds its
 *            values in the order of their positions in x: a stable scatter.
 *   SUM      the bucket (all windows one after the other) is cut into
 *            chunks of bc_det_chunk entries, chunk k: block k.  For each
 *            window a chunk touches, the block sums that window's entries
 *            as the window pass sums x (a private sub-histogram per warp,
 *            groups of 32 entries dealt to the warps by position, lanes
 *            combined by det_add_group, warps summed in warp order in
 *            float64; only the warps that get entries are cleared and
 *            merged) into partial row chunk + window (distinct for every
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
 *
 * Cost (estimated from instruction and memory counts, no GPU measured yet;
 * docs/semantics.rst, "Cost", has the count): 1e6 int64 values with
 * float64 weights into 1e4, 1e5 or 1e6 bins on an H200 move x twice, the
 * weights once, the buckets twice (48, 51, 76 MB with the table, the
 * partial rows and the output: 12, 12.7, 19 us); the offsets, the
 * sub-histograms' clearing and merging and the totals add 1.5 to 3.7 us,
 * the three or four dependent launches beyond the default's about 4 to 5.3
 * us: about 18, 20.5 and 28 us against 6, 7 and 10 us for the default
 * path, 2.8x to 3.0x.
 */
#ifndef BINCOUNT_CUDA_DET_BUCKET_CUH
#define BINCOUNT_CUDA_DET_BUCKET_CUH

#include "cuda/bincount_det_count.cuh"

namespace bc {

/* SCATTER: the block's tile to the buckets, stable (see the top).  The
 * windows' cursors: in shared memory when p.shared_bins != 0, else the
 * block's own column of the table.  When p.shared_bins holds a row of
 * counters per warp besides (windows x (warps + 1) words), each round's
 * offsets come from the warps' counts of the round (a warp counts its
 * groups in its own row; a thread per window turns the rows into each
 * warp's start, warp order; each warp adds its start); else the warps take
 * their offsets from the cursors in turn.  Both give the same offsets. */
template <typename X, typename W, bool FUSED, bool FX>
__device__ __forceinline__ void det_scatter(const bc_hist_params &p, const bc_fused_params *f)
{
    const det_bucket<W> d(p);
    const bool here = p.shared_bins != 0;
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const bool per_warp = p.shared_bins >= d.windows * (warps + 1);
    bc_u32 *cursor = here ? reinterpret_cast<bc_u32 *>(dynamic_shared()) : d.table + blockIdx.x;
    bc_u32 *counts = cursor + d.windows, *mine = counts + warp * d.windows;
    const bc_i64 step = here ? 1 : d.tiles;
    typedef typename traits<X>::sign sign;
    const bc_i64 begin = (bc_i64)blockIdx.x * d.tile_values;
    const bc_i64 end = begin + d.tile_values < p.size ? begin + d.tile_values : p.size;
    if (bc_det_scan_here(d.windows, d.tiles)) {
        det_scan_here(d, cursor);
    } else if (here) {
        for (bc_i64 c = threadIdx.x; c < d.windows; c += blockDim.x)
            cursor[c] = d.table[c * d.tiles + blockIdx.x];
    }
    for (bc_i64 c = threadIdx.x; per_warp && c < d.windows * warps; c += blockDim.x)
        counts[c] = 0u;
    __syncthreads();
    for (bc_i64 base = begin; base < end; base += (bc_i64)blockDim.x * DET_UNROLL) {
        const bc_i64 group = base + (bc_i64)warp * DET_UNROLL * 32; /* the warp's groups */
        unsigned key[DET_UNROLL], peers[DET_UNROLL];
        bc_u32 at[DET_UNROLL], dst[DET_UNROLL];
        unsigned short sub[DET_UNROLL];
        W v[DET_UNROLL];
        X xv[DET_UNROLL];
        /* x of every group first, then the bins, then the stored weights of
         * those with one (as the window pass: det_load_groups) */
        det_load_groups<X, W, FUSED, FX>(p, f, group, end, xv, v);
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++) {
            bc_u64 bin = 0, vmax = 0;
            key[k] = DET_NONE;
            sub[k] = 0;
            if (group + k * 32 + (bc_i64)lane < end && to_bin(xv[k], sign(), p, bin, vmax) &&
                bin < (bc_u64)p.hi) {
                key[k] = (unsigned)(bin / d.window_bins);
                sub[k] = (unsigned short)(bin - (bc_u64)key[k] * d.window_bins);
            }
        }
        det_load_weights<W, FUSED>(p, group, key, v);
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++) {
            peers[k] = __match_any_sync(FULL_WARP, key[k]);
            at[k] = 0;
        }
        if (per_warp) {
            /* The warp's own counts, in group order (at: the rank among them). */
#pragma unroll
            for (int k = 0; k < DET_UNROLL; k++) {
                if (key[k] != DET_NONE && (peers[k] & ((1u << lane) - 1u)) == 0u) {
                    at[k] = mine[key[k]];
                    mine[key[k]] = at[k] + (bc_u32)__popc(peers[k]);
                }
                __syncwarp(FULL_WARP);
            }
            __syncthreads();
            /* Each window: the warps' starts, warp 0 first, from the cursor. */
            for (bc_i64 c = threadIdx.x; c < d.windows; c += blockDim.x) {
                bc_u32 run = cursor[c];
                for (unsigned j = 0; j < warps; j++) {
                    const bc_u32 n = counts[j * d.windows + c];
                    if (n != 0u) {
                        counts[j * d.windows + c] = run;
                        run += n;
                    }
                }
                cursor[c] = run;
            }
            __syncthreads();
#pragma unroll
            for (int k = 0; k < DET_UNROLL; k++)
                if (key[k] != DET_NONE && (peers[k] & ((1u << lane) - 1u)) == 0u)
                    at[k] += mine[key[k]];
            __syncwarp(FULL_WARP);
#pragma unroll
            for (int k = 0; k < DET_UNROLL; k++)
                if (key[k] != DET_NONE && (peers[k] & ((1u << lane) - 1u)) == 0u)
                    mine[key[k]] = 0u; /* the row clean for the next round */
            __syncwarp(FULL_WARP); /* before other lanes use these words in the next round */
#pragma unroll
            for (int k = 0; k < DET_UNROLL; k++)
                dst[k] = __shfl_sync(FULL_WARP, at[k], __ffs((int)peers[k]) - 1) +
                         (bc_u32)__popc(peers[k] & ((1u << lane) - 1u));
        } else {
            /* The warps take their offsets from the cursors in turn. */
            bool live[DET_UNROLL];
#pragma unroll
            for (int k = 0; k < DET_UNROLL; k++)
                live[k] = key[k] != DET_NONE;
            det_stable_slots(cursor, step, key, live, dst);
        }
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++) {
            if (key[k] != DET_NONE) {
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
        /* the warps that get entries (the others' sub-histograms are
         * neither cleared nor merged: det_merge) */
        const bc_i64 groups = (e1 - e0 + 32 * DET_UNROLL - 1) / (32 * DET_UNROLL);
        const unsigned active = groups < (bc_i64)warps ? (unsigned)groups : warps;
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
            det_zero(shared, (bc_u64)(active * span));
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
            det_merge(shared, (bc_u64)span, (bc_u64)width, partial + s0, active);
            __syncthreads();
        }
    }
}

/* The deterministic kernel: the stage p.stage (cuda/bincount_det_defs.h). */
template <typename X, typename W, bool FUSED, bool FX>
__device__ __forceinline__ void det_pass(const bc_hist_params &p, const bc_fused_params *f)
{
    switch (p.stage) {
    case BC_DET_STAGE_COUNT:
        det_count<X, W, FX>(p, f);
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
