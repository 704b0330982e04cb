/*
 * cuda/det_sort.cuh -- the pieces of a stable counting sort by key on
 * the GPU that the deterministic kernels share: the bucket pre-pass of the
 * deterministic scatter-add of rows (cuda/scatter_add_det_bucket.cuh, keys:
 * the blocks that own the rows) runs the four stages below with them; the
 * bucket path of the deterministic histogram (cuda/bincount_det_count.cuh
 * and cuda/bincount_det_bucket.cuh, keys: windows of bins) has a count that
 * also checks x and a scan by window of its own, and takes DET_NONE, the
 * block sum, the warp scan, the table runs and, where its per-warp counts
 * do not fit in shared memory, det_stable_slots from here.
 * Valid CUDA C++17 on its own: device functions only, no kernel.
 *
 * The sort, over `tiles` tiles of consecutive positions (tile t: block t of
 * each stage's grid) and `keys` keys, with a table of keys x tiles counts
 * (key-major: table[key x tiles + tile]):
 *   COUNT    each block counts its tile per key: det_count_group, for each
 *            group of 32 lanes, finds the lanes of one key with
 *            __match_any_sync and the lowest of them adds their number with
 *            an integer atomic (exact in any order).
 *   REDUCE   block b sums its run of the table (det_reduce_table).
 *   SCAN     block b scans its run in place from the sum of the runs before
 *            it (det_scan_table): table[key x tiles + t] becomes the offset
 *            of tile t's entries of that key, starts[key] the first entry
 *            of the key, starts[keys] the number of entries.
 *   SCATTER  each block takes its tile again, in groups of 32 positions;
 *            det_stable_slots gives each lane its slot: its rank among the
 *            lanes of its key in the group (the count of those below it)
 *            plus an offset that the warps of the block take from the key's
 *            cursor in warp order, each warp's groups in order.  So each
 *            key's bucket holds its entries in the order of their positions:
 *            a stable scatter, whatever the timing.
 * Counts and offsets are 32-bit: the callers keep positions and table
 * entries below 2^31.
 */
#ifndef BC_CUDA_DET_SORT_CUH
#define BC_CUDA_DET_SORT_CUH

#include "cuda/device_helpers.cuh"

namespace bc {

/* The key of a lane that has none (nothing to count, sort or add), in
 * __match_any_sync (callers' keys are smaller). */
inline constexpr unsigned DET_NONE = 0xffffffffu;

/* COUNT, one group of 32 lanes: count[key * step] += the lanes of `key`
 * (those with `live`).  Every lane of the warp calls it. */
__device__ __forceinline__ void det_count_group(bc_u32 *count, bc_i64 step, unsigned key, bool live)
{
    const unsigned lane = threadIdx.x & 31u;
    const unsigned peers = __match_any_sync(FULL_WARP, live ? key : DET_NONE);
    if (live && (peers & ((1u << lane) - 1u)) == 0u)
        atomicAdd(count + key * step, (bc_u32)__popc(peers));
}

/* The sum of v over the block (every thread gets it); `scratch` holds a
 * word per warp.  Integers: exact in any order. */
__device__ __forceinline__ bc_u32 det_block_sum(bc_u32 v, bc_u32 *scratch)
{
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_xor_sync(FULL_WARP, v, d);
    __syncthreads();
    if ((threadIdx.x & 31u) == 0u)
        scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    bc_u32 s = 0;
    for (unsigned c = 0; c < (blockDim.x >> 5); c++)
        s += scratch[c];
    return s;
}

/* The inclusive sum of v over the lanes up to this one. */
__device__ __forceinline__ bc_u32 det_warp_scan(bc_u32 v)
{
    const unsigned lane = threadIdx.x & 31u;
    for (unsigned k = 1; k < 32; k <<= 1) {
        const bc_u32 t = __shfl_sync(FULL_WARP, v, lane >= k ? (int)(lane - k) : (int)lane);
        if (lane >= k)
            v += t;
    }
    return v;
}

/* The exclusive scan of v over the block's threads (thread order), from
 * `base`; `round` gets the block's total.  Every thread calls it (two
 * barriers); `scratch` holds a word per warp. */
__device__ __forceinline__ bc_u32 det_block_scan(bc_u32 v, bc_u32 base, bc_u32 *scratch, bc_u32 &round)
{
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const bc_u32 s = det_warp_scan(v);
    __syncthreads();
    if (lane == 31u)
        scratch[warp] = s;
    __syncthreads();
    round = 0;
    for (unsigned c = 0; c < (blockDim.x >> 5); c++) {
        base += c < warp ? scratch[c] : 0u;
        round += scratch[c];
    }
    return base + s - v;
}

/* The run of `entries` (a table's, or the windows') that block b takes:
 * [first, last). */
__device__ __forceinline__ void det_table_run(bc_i64 entries, bc_i64 &first, bc_i64 &last)
{
    const bc_i64 each = (entries + gridDim.x - 1) / gridDim.x;
    first = (bc_i64)blockIdx.x * each < entries ? (bc_i64)blockIdx.x * each : entries;
    last = first + each < entries ? first + each : entries;
}

/* REDUCE: runs[b] = the sum of block b's run of the table's `entries`.
 * The block's dynamic shared memory holds a word per warp. */
__device__ __forceinline__ void det_reduce_table(const bc_u32 *table, bc_i64 entries, bc_u32 *runs)
{
    bc_i64 first, last;
    det_table_run(entries, first, last);
    bc_u32 v = 0;
    for (bc_i64 e = first + threadIdx.x; e < last; e += blockDim.x)
        v += table[e];
    v = det_block_sum(v, reinterpret_cast<bc_u32 *>(dynamic_shared()));
    if (threadIdx.x == 0)
        runs[blockIdx.x] = v;
}

/* SCAN: the exclusive scan in place of the table of `keys` x `tiles`
 * entries (block b its run, from the sum of the runs before it), the keys'
 * starts, and starts[keys].  A thread per run: the grid is no larger than
 * a block.  The block's dynamic shared memory holds a word per warp. */
__device__ __forceinline__ void det_scan_table(bc_u32 *table, bc_i64 keys, bc_i64 tiles,
                                               const bc_u32 *runs, bc_u32 *starts)
{
    bc_u32 *scratch = reinterpret_cast<bc_u32 *>(dynamic_shared());
    bc_i64 first, last;
    det_table_run(keys * tiles, first, last);
    bc_u32 base = det_block_sum(threadIdx.x < blockIdx.x ? runs[threadIdx.x] : 0u, scratch);
    if (blockIdx.x == 0) {
        const bc_u32 all = det_block_sum(threadIdx.x < gridDim.x ? runs[threadIdx.x] : 0u, scratch);
        if (threadIdx.x == 0)
            starts[keys] = all;
    }
    for (bc_i64 at = first; at < last; at += blockDim.x) {
        const bc_i64 e = at + threadIdx.x;
        const bc_u32 v = e < last ? table[e] : 0u;
        bc_u32 round;
        const bc_u32 offset = det_block_scan(v, base, scratch, round);
        if (e < last) {
            table[e] = offset;
            if (e % tiles == 0)
                starts[e / tiles] = offset;
        }
        base += round;
    }
}

/* SCATTER: the slots of K groups of 32 lanes of each warp of the block
 * (group k of warp w: the K groups of a warp are consecutive positions, and
 * warp w's come before warp w + 1's), stable (see the top).  cursor[key *
 * step] is the next free slot of `key`, advanced here.  Every thread of
 * the block calls it (barriers); slot[k] is meaningful where live[k]. */
template <int K>
__device__ __forceinline__ void det_stable_slots(bc_u32 *cursor, bc_i64 step,
                                                 const unsigned (&key)[K], const bool (&live)[K],
                                                 bc_u32 (&slot)[K])
{
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    unsigned peers[K];
    bc_u32 at[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        peers[k] = __match_any_sync(FULL_WARP, live[k] ? key[k] : DET_NONE);
        at[k] = 0;
    }
    /* The cursors: warp 0's groups first, then warp 1's, ... */
    for (unsigned j = 0; j < warps; j++) {
        if (warp == j) {
#pragma unroll
            for (int k = 0; k < K; k++) {
                if (live[k] && (peers[k] & ((1u << lane) - 1u)) == 0u) {
                    at[k] = cursor[key[k] * step];
                    cursor[key[k] * step] = at[k] + (bc_u32)__popc(peers[k]);
                }
                __syncwarp(FULL_WARP);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < K; k++)
        slot[k] = __shfl_sync(FULL_WARP, at[k], __ffs((int)peers[k]) - 1) +
                  (bc_u32)__popc(peers[k] & ((1u << lane) - 1u));
}

} /* namespace bc */

#endif /* BC_CUDA_DET_SORT_CUH */
