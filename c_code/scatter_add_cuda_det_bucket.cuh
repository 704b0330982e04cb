/*
 * scatter_add_cuda_det_bucket.cuh -- the bucket pre-pass of the
 * deterministic scatter-add of float rows (scatter_add_cuda_det.cuh): the
 * positions of idx sorted, stably, by the block that owns their row, so
 * that each block of the adds reads its own positions only, in increasing
 * order, instead of all of idx once per column tile.  Taken for large idx
 * (bc_rows_det_sorted, scatter_add_cuda_det.h: sizes only).  Neighbours:
 * bc_cuda_det_sort.cuh (the counting sort's pieces, shared with the
 * histogram's bucket path), scatter_add_cuda_det.h (the tiles, the layout
 * of the scratch buffer), scatter_add_cuda_det.cuh (det_row, det_share,
 * and the adds that read the buckets), scatter_add_cuda_kernel.cu (which
 * instantiates rows_det_pass as scatter_rows_det_<idx>_<out>),
 * scatter_add_cuda_launch.h (which queues the stages, then the adds).
 * Valid CUDA C++17 on its own: templates only.
 *
 * Stages, each a launch of the deterministic kernel (bc_rows_params stage),
 * after the checking kernel (each stage, as the adds, does nothing when it
 * found a bad index), over `sort_tiles` tiles of consecutive positions of
 * idx (tile t: block t), keyed by the owner of the index's row (the owners'
 * ranges of rows are det_share's, as in the adds):
 *   COUNT    each block counts its tile per owner in shared memory (integer
 *            atomics, exact) and writes its column of the table.
 *   REDUCE, SCAN  the table's exclusive scan (det_reduce_table,
 *            det_scan_table): each tile's offset in each owner's bucket,
 *            the owners' starts.
 *   SCATTER  each block takes its tile again and writes each position to
 *            its owner's bucket at the slot det_stable_slots gives (ranks
 *            in a group of 32 by __match_any_sync, warps in warp order): a
 *            stable scatter, so each bucket holds its positions in
 *            increasing order.
 * Then the adds (stage 0, p.owners != 0) read block b's bucket
 * [starts[b], starts[b + 1]) in chunks in place of idx: the same matches,
 * in the same order, as the scan of idx finds, so the same adds and bits.
 * Cost: idx read twice by the grid (not once per block and column tile),
 * 4 bytes written and read per index, a table of owners x tiles counts.
 */
#ifndef SCATTER_ADD_CUDA_DET_BUCKET_CUH
#define SCATTER_ADD_CUDA_DET_BUCKET_CUH

#include "bc_cuda_det_sort.cuh"
#include "scatter_add_cuda_det.cuh"
#include "scatter_add_cuda_det.h"

namespace bc {

/* Groups of 32 positions a warp of SCATTER takes at once. */
enum { DET_ROW_SORT_UNROLL = 4 };

/* The arrays of the scratch buffer (bc_rows_det_make_layout). */
struct det_rows_bucket {
    bc_u32 *table, *runs, *starts, *pos;
    bc_i64 owners, tiles, begin, end;

    __device__ __forceinline__ explicit det_rows_bucket(const bc_rows_params &p)
    {
        const bc_rows_det_layout l = bc_rows_det_make_layout(p.n, p.owners, p.sort_tiles);
        char *s = reinterpret_cast<char *>(p.scratch);
        table = reinterpret_cast<bc_u32 *>(s + l.table);
        runs = reinterpret_cast<bc_u32 *>(s + l.runs);
        starts = reinterpret_cast<bc_u32 *>(s + l.starts);
        pos = reinterpret_cast<bc_u32 *>(s + l.pos);
        owners = p.owners;
        tiles = p.sort_tiles;
        const bc_i64 each = bc_det_tile_values(p.n, p.sort_tiles);
        begin = (bc_i64)blockIdx.x * each < p.n ? (bc_i64)blockIdx.x * each : p.n;
        end = begin + each < p.n ? begin + each : p.n;
    }
};

/* The owner of the row of the index at `i` (det_share's ranges of rows). */
template <typename I>
__device__ __forceinline__ unsigned det_owner_at(const bc_rows_params &p, bc_i64 i)
{
    const bc_i64 r = det_row(reinterpret_cast<const I *>(p.idx)[i * p.idx_stride], p.nrows);
    const bc_i64 each = p.nrows / p.owners, extra = p.nrows % p.owners, big = (each + 1) * extra;
    return (unsigned)(r < big ? r / (each + 1) : extra + (r - big) / each);
}

/* COUNT: the block's tile counted per owner in shared memory. */
template <typename I> __device__ __forceinline__ void det_rows_count(const bc_rows_params &p)
{
    const det_rows_bucket d(p);
    bc_u32 *count = reinterpret_cast<bc_u32 *>(dynamic_shared());
    for (bc_i64 o = threadIdx.x; o < d.owners; o += blockDim.x)
        count[o] = 0u;
    __syncthreads();
    for (bc_i64 base = d.begin; base < d.end; base += blockDim.x) {
        const bc_i64 i = base + threadIdx.x;
        const bool live = i < d.end;
        det_count_group(count, 1, live ? det_owner_at<I>(p, i) : 0u, live);
    }
    __syncthreads();
    for (bc_i64 o = threadIdx.x; o < d.owners; o += blockDim.x)
        d.table[o * d.tiles + blockIdx.x] = count[o];
}

/* SCATTER: the block's tile to the owners' buckets, stable. */
template <typename I> __device__ __forceinline__ void det_rows_scatter(const bc_rows_params &p)
{
    enum { U = DET_ROW_SORT_UNROLL };
    const det_rows_bucket d(p);
    bc_u32 *cursor = reinterpret_cast<bc_u32 *>(dynamic_shared());
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (bc_i64 o = threadIdx.x; o < d.owners; o += blockDim.x)
        cursor[o] = d.table[o * d.tiles + blockIdx.x];
    __syncthreads();
    for (bc_i64 base = d.begin; base < d.end; base += (bc_i64)blockDim.x * U) {
        unsigned key[U];
        bool live[U];
        bc_u32 slot[U];
#pragma unroll
        for (int k = 0; k < U; k++) {
            const bc_i64 i = base + ((bc_i64)warp * U + k) * 32 + lane;
            live[k] = i < d.end;
            key[k] = live[k] ? det_owner_at<I>(p, i) : 0u;
        }
        det_stable_slots(cursor, 1, key, live, slot);
#pragma unroll
        for (int k = 0; k < U; k++)
            if (live[k])
                d.pos[slot[k]] = (bc_u32)(base + ((bc_i64)warp * U + k) * 32 + lane);
    }
}

/* The deterministic kernel: the stage p.stage, or the adds. */
template <typename I, typename OUT> __device__ __forceinline__ void rows_det_pass(const bc_rows_params &p)
{
    /* The checking kernel ran before (same stream): nothing to do when it
     * found a bad index (the same for every thread: the block leaves whole). */
    if (p.status != 0 &&
        reinterpret_cast<const volatile bc_status *>(p.status)->bad_pos_inv != 0)
        return;
    if (p.stage == BC_DET_STAGE_WINDOW) {
        rows_det<I, OUT>(p);
        return;
    }
    const det_rows_bucket d(p);
    switch (p.stage) {
    case BC_DET_STAGE_COUNT:
        det_rows_count<I>(p);
        break;
    case BC_DET_STAGE_REDUCE:
        det_reduce_table(d.table, d.owners * d.tiles, d.runs);
        break;
    case BC_DET_STAGE_SCAN:
        det_scan_table(d.table, d.owners, d.tiles, d.runs, d.starts);
        break;
    default:
        det_rows_scatter<I>(p);
    }
}

} /* namespace bc */

#endif /* SCATTER_ADD_CUDA_DET_BUCKET_CUH */
