/*
 * cuda/bincount_det_count.cuh -- the first stages of the bucket path of the
 * deterministic float histogram (cuda/bincount_det_bucket.cuh, whose top
 * comment has the algorithm): the arrays of its scratch buffer, COUNT
 * (the range check of x and each tile's counts per window) and SCAN (each
 * tile's offset in each window's bucket, the windows' starts), and the
 * same scan done by each SCATTER block for few windows.  Integer counts,
 * sums and offsets only: exact in any order.  Neighbours:
 * cuda/bincount_det_defs.h (the sizes and the layout of the scratch buffer),
 * cuda/bincount_det.cuh (det_zero, DET_UNROLL), cuda/det_sort.cuh
 * (DET_NONE, det_block_sum, det_warp_scan, det_table_run),
 * cuda/bincount_hist.cuh (to_bin, publish_check, last_block_check).  Valid
 * CUDA C++17 on its own: it defines templates only.
 */
#ifndef BINCOUNT_CUDA_DET_COUNT_CUH
#define BINCOUNT_CUDA_DET_COUNT_CUH

#include "cuda/bincount_det.cuh"

namespace bc {

/* The arrays of the scratch buffer (bc_det_make_layout) and the sizes. */
template <typename W> struct det_bucket {
    bc_status *status;
    bc_u32 *table, *totals, *starts;
    W *weights;
    unsigned short *bins;
    double *partials;
    bc_i64 windows, tiles, window_bins, tile_values, chunk;

    __device__ __forceinline__ explicit det_bucket(const bc_hist_params &p)
    {
        const bc_det_layout l = bc_det_make_layout(p.size, p.windows, p.tiles, sizeof(W));
        char *s = reinterpret_cast<char *>(p.scratch);
        status = reinterpret_cast<bc_status *>(s + l.status);
        table = reinterpret_cast<bc_u32 *>(s + l.table);
        totals = reinterpret_cast<bc_u32 *>(s + l.totals);
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

/* COUNT: the block's tile checked (max(x), the first refused position, as
 * the window pass checks it: publish_check, last_block_check) and counted
 * per window (p.shared_bins != 0: the counters in shared memory, else in
 * the zeroed table), the counts added to the windows' totals.  Values at
 * or past p.hi (the launcher's guess of the length was short) are not
 * counted: the launcher counts again with more windows. */
template <typename X, typename W, bool FX>
__device__ __forceinline__ void det_count(const bc_hist_params &p, const bc_fused_params *f)
{
    typedef typename traits<X>::sign sign;
    const det_bucket<W> d(p);
    const bool here = p.shared_bins != 0;
    bc_u32 *count = here ? reinterpret_cast<bc_u32 *>(dynamic_shared()) : d.table + blockIdx.x;
    const bc_i64 step = here ? 1 : d.tiles;
    const unsigned lane = threadIdx.x & 31u;
    const bc_i64 begin = (bc_i64)blockIdx.x * d.tile_values;
    const bc_i64 end = begin + d.tile_values < p.size ? begin + d.tile_values : p.size;
    bc_u64 vmax = 0, first_bad = NO_POSITION;
    if (here)
        det_zero(count, (bc_u64)d.windows);
    for (bc_i64 base = begin; base < end; base += blockDim.x) {
        const bc_i64 pos = base + threadIdx.x;
        unsigned key = DET_NONE;
        if (pos < end) {
            bc_u64 bin = 0;
            if (!to_bin(det_x_at<X, FX>(p, f, pos), sign(), p, bin, vmax))
                first_bad = (bc_u64)pos < first_bad ? (bc_u64)pos : first_bad;
            else if (bin < (bc_u64)p.hi)
                key = (unsigned)(bin / d.window_bins);
        }
        const unsigned peers = __match_any_sync(FULL_WARP, key);
        if (key != DET_NONE && (peers & ((1u << lane) - 1u)) == 0u) {
            atomicAdd(count + key * step, (bc_u32)__popc(peers));
            if (!here)
                atomicAdd(d.totals + key, (bc_u32)__popc(peers));
        }
    }
    publish_check(d.status, vmax, first_bad);
    __syncthreads();
    for (bc_i64 w = threadIdx.x; w < d.windows && here; w += blockDim.x) {
        const bc_u32 v = count[w];
        d.table[w * d.tiles + blockIdx.x] = v;
        if (v != 0u)
            atomicAdd(d.totals + w, v);
    }
    __syncthreads();
    last_block_check<X, FX>(p, f, d.status);
}

/* SCAN: block b takes a run of windows.  Their starts (the windows'
 * totals before them, scanned by the block, blockDim.x windows at a time,
 * the bases kept in shared memory after a word per warp), starts[windows]
 * the bucket's size; then each warp scans a window's row of the table in
 * place (a tile's offset in the window's bucket), rows dealt to the warps
 * in turn.  Integer sums: exact in any order. */
template <typename W> __device__ __forceinline__ void det_scan(const bc_hist_params &p)
{
    const det_bucket<W> d(p);
    if (bc_det_scan_here(d.windows, d.tiles))
        return; /* SCATTER scans (det_scan_here) */
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    bc_u32 *scratch = reinterpret_cast<bc_u32 *>(dynamic_shared());
    bc_u32 *bases = scratch + warps;
    bc_i64 first, last;
    det_table_run(d.windows, first, last);
    bc_u32 before = 0;
    for (bc_i64 w = threadIdx.x; w < first; w += blockDim.x)
        before += d.totals[w];
    before = det_block_sum(before, scratch);
    for (bc_i64 at = first; at < last; at += blockDim.x) {
        const bc_i64 w = at + threadIdx.x;
        const bc_u32 v = w < last ? d.totals[w] : 0u;
        bc_u32 round;
        const bc_u32 mine = det_block_scan(v, before, scratch, round);
        bases[threadIdx.x] = mine;
        if (w < last)
            d.starts[w] = mine;
        if (w < last && w == d.windows - 1)
            d.starts[d.windows] = mine + v;
        before += round;
        __syncthreads();
        const bc_i64 rows = last - at < (bc_i64)blockDim.x ? last - at : (bc_i64)blockDim.x;
        for (bc_i64 r = warp; r < rows; r += warps) {
            bc_u32 *row = d.table + (at + r) * d.tiles;
            bc_u32 run = bases[r];
            for (bc_i64 t0 = 0; t0 < d.tiles; t0 += 32) {
                const bc_i64 t = t0 + lane;
                const bc_u32 c = t < d.tiles ? row[t] : 0u;
                const bc_u32 inc = det_warp_scan(c);
                if (t < d.tiles)
                    row[t] = run + inc - c;
                run += __shfl_sync(FULL_WARP, inc, 31);
            }
        }
    }
}

/* The SCAN of few windows (bc_det_scan_here), done by each SCATTER block
 * for its own tile: its windows' cursors in shared memory, the window's
 * start plus the counts of the tiles before it (the table's rows read
 * DET_UNROLL entries a thread at a time, added with shared integer
 * atomics: exact); block 0 writes the windows' starts.  Then a barrier. */
template <typename W>
__device__ __forceinline__ void det_scan_here(const det_bucket<W> &d, bc_u32 *cursor)
{
    const unsigned lane = threadIdx.x & 31u;
    const bc_i64 before = (bc_i64)blockIdx.x, n = d.windows * before;
    if (threadIdx.x < 32u) { /* windows <= 32: one warp scans the totals */
        const bc_u32 v = lane < d.windows ? d.totals[lane] : 0u;
        const bc_u32 s = det_warp_scan(v);
        if (lane < d.windows)
            cursor[lane] = s - v;
        if (blockIdx.x == 0 && lane < d.windows)
            d.starts[lane] = s - v;
        if (blockIdx.x == 0 && lane == d.windows - 1)
            d.starts[d.windows] = s;
    }
    __syncthreads();
    for (bc_i64 e = threadIdx.x; e < n; e += (bc_i64)blockDim.x * DET_UNROLL) {
        bc_u32 v[DET_UNROLL];
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++) {
            const bc_i64 at = e + (bc_i64)k * blockDim.x;
            v[k] = at < n ? d.table[at / before * d.tiles + at % before] : 0u;
        }
#pragma unroll
        for (int k = 0; k < DET_UNROLL; k++)
            if (v[k] != 0u)
                atomicAdd(cursor + (e + (bc_i64)k * blockDim.x) / before, v[k]);
    }
}

} /* namespace bc */

#endif /* BINCOUNT_CUDA_DET_COUNT_CUH */
