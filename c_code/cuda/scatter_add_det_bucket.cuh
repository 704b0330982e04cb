/*
 * cuda/scatter_add_det_bucket.cuh -- the bucket pre-pass of the
 * deterministic scatter-add of float rows (cuda/scatter_add_det.cuh): the
 * positions of idx sorted, stably, by the block that owns their row, so
 * that each block of the adds reads its own positions only, in increasing
 * order, instead of all of idx once per column tile.  Taken for large idx
 * (bc_rows_det_sorted, cuda/scatter_add_det_defs.h: sizes only).  Neighbours:
 * cuda/det_sort.cuh (the counting sort's pieces, shared with the
 * histogram's bucket path), cuda/scatter_add_det_defs.h (the tiles, the layout
 * of the scratch buffer), cuda/scatter_add_det.cuh (det_row, det_share,
 * and the adds that read the buckets), cuda/scatter_add_kernels.cu (which
 * instantiates rows_det_pass as scatter_rows_det_<idx>_<out>),
 * cuda_host/scatter_add_launch.h (which queues the stages, then the adds).
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
 * Then the adds (stage 0, p.owners != 0, rows_det below) read block b's
 * bucket [starts[b], starts[b + 1]) in chunks in place of idx: the same
 * matches, in the same order, as the scan of idx finds, so the same adds
 * and bits.  A hot bucket (bc_rows_det_hot: a hot row's) has its columns
 * cut into slices, each added by a block of its own, so that the hot
 * row's increments come through several multiprocessors and each column's
 * chain of adds runs beside the others; a slice (or a row) of at most 32
 * bytes is streamed, the next round's increments and indices loading while
 * this round is added (det_bucket_streamed).
 * Cost: idx read twice by the grid (not once per block and column tile),
 * 4 bytes written and read per index, a table of owners x tiles counts.
 */
#ifndef SCATTER_ADD_CUDA_DET_BUCKET_CUH
#define SCATTER_ADD_CUDA_DET_BUCKET_CUH

#include "cuda/det_sort.cuh"
#include "cuda/scatter_add_det.cuh"
#include "cuda/scatter_add_det_defs.h"

namespace bc {

/* Groups of 32 positions a warp of SCATTER takes at once; entries of a
 * round of det_bucket_streamed (one a thread). */
enum { DET_ROW_SORT_UNROLL = 4, DET_ROW_STREAM = BC_CUDA_THREADS };

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

/* The bucket's entries [e0, e1) read a chunk ahead: the positions of the
 * next chunk (next) and the indices of the current one (value), K a thread
 * (entry k * BC_CUDA_THREADS + thread of a chunk). */
template <typename I, int K> struct det_bucket_reader {
    enum { CH = K * BC_CUDA_THREADS };
    bc_u32 pos[K], next[K];
    I value[K];

    /* The chunk at c0: its positions and indices; the next one's positions. */
    __device__ __forceinline__ void first(const bc_rows_params &p, const bc_u32 *bucket, bc_i64 c0, bc_i64 e1)
    {
#pragma unroll
        for (int k = 0; k < K; k++) {
            const bc_i64 e = c0 + k * BC_CUDA_THREADS + (int)threadIdx.x;
            pos[k] = e < e1 ? bucket[e] : 0u;
            value[k] = e < e1 ? reinterpret_cast<const I *>(p.idx)[(bc_i64)pos[k] * p.idx_stride] : (I)0;
            next[k] = e + CH < e1 ? bucket[e + CH] : 0u;
        }
    }
    /* On to the chunk at c0 + CH (its positions were loaded): its indices
     * loaded, and the positions of the one after. */
    __device__ __forceinline__ void advance(const bc_rows_params &p, const bc_u32 *bucket, bc_i64 c0, bc_i64 e1)
    {
#pragma unroll
        for (int k = 0; k < K; k++) {
            const bc_i64 e = c0 + CH + k * BC_CUDA_THREADS + (int)threadIdx.x;
            pos[k] = next[k];
            value[k] = e < e1 ? reinterpret_cast<const I *>(p.idx)[(bc_i64)pos[k] * p.idx_stride] : (I)0;
            next[k] = e + CH < e1 ? bucket[e + CH] : 0u;
        }
    }
    /* The current chunk's rows (offsets from r0) to sh.row, the next
     * chunk's positions to sh.pos. */
    template <typename OUT>
    __device__ __forceinline__ void put(const det_shared<OUT> &sh, const bc_rows_params &p, bc_i64 r0,
                                        int total, int total_next) const
    {
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int e = k * BC_CUDA_THREADS + (int)threadIdx.x;
            if (e < total)
                sh.row[e] = det_row(value[k], p.nrows) - r0;
            if (e < total_next)
                sh.pos[e] = (int)next[k];
        }
    }
};

/* The adds of one column tile (`width` columns from col0) from the block's
 * bucket [e0, e1), in chunks of DET_ROW_CHUNK entries, their increments
 * staged `per` at a time (det_stage_add). */
template <typename I, typename OUT>
__device__ __forceinline__ void det_bucket_chunks(det_run<OUT> &run, const det_shared<OUT> &sh,
                                                  const bc_rows_params &p, const bc_u32 *bucket,
                                                  bc_i64 e0, bc_i64 e1, bc_i64 a, bc_i64 z,
                                                  bc_i64 r0, bc_i64 col, bc_i64 col0, int width,
                                                  int per)
{
    enum { CH = DET_ROW_CHUNK };
    const I *idx = reinterpret_cast<const I *>(p.idx);
    for (bc_i64 c0 = e0; c0 < e1; c0 += CH) {
        const int total = (int)(e1 - c0 < (bc_i64)CH ? e1 - c0 : (bc_i64)CH);
        __syncthreads(); /* the previous chunk's matches are added */
#pragma unroll
        for (int k = 0; k < DET_ROW_K; k++) {
            const int e = k * BC_CUDA_THREADS + (int)threadIdx.x;
            if (e < total) {
                const bc_u32 i = bucket[c0 + e];
                sh.pos[e] = (int)i;
                sh.row[e] = det_row(idx[(bc_i64)i * p.idx_stride], p.nrows) - r0;
            }
        }
        __syncthreads();
        det_stage_add(run, sh, p, 0, total, per, a, z, r0, col, col0, width);
    }
}

/* The adds of the block's columns (`width` from col0) from its bucket
 * [e0, e1) when a whole round's increments fit half the stage (a round is
 * DET_ROW_STREAM entries, a thread's each; width * DET_ROW_STREAM elements,
 * at most 32 bytes a row: a slice of a hot bucket, or narrow rows): the
 * next round's positions go to sh.pos as soon as this round's increments
 * are loaded, so that its increments (8 registers a thread) and indices
 * load while this round is added (det_add_lean).  A path of its own from
 * the block's start, so that ptxas fits it and the others in 128
 * registers a thread. */
template <typename I, typename OUT>
__device__ __forceinline__ void det_bucket_streamed(det_run<OUT> &run, const det_shared<OUT> &sh,
                                                    const bc_rows_params &p, const bc_u32 *bucket,
                                                    bc_i64 e0, bc_i64 e1, bc_i64 a, bc_i64 z,
                                                    bc_i64 r0, bc_i64 col, bc_i64 col0, int width)
{
    enum {
        R = DET_ROW_STREAM,
        J = BC_CUDA_ROWS_DET_STAGE_BYTES / 2 / (int)sizeof(OUT) / BC_CUDA_THREADS
    };
    const int t = (int)threadIdx.x;
    det_bucket_reader<I, R / BC_CUDA_THREADS> rd;
    rd.first(p, bucket, e0, e1);
    OUT v[J];
    if (e0 + t < e1) /* the first round's positions */
        sh.pos[t] = (int)rd.pos[0];
    __syncthreads();
    det_stage_load(p, sh, 0, 0, (int)(e1 - e0 < (bc_i64)R ? e1 - e0 : (bc_i64)R), col0, width, v);
    for (bc_i64 c0 = e0; c0 < e1; c0 += R) {
        const int total = (int)(e1 - c0 < (bc_i64)R ? e1 - c0 : (bc_i64)R);
        const bc_i64 c1 = c0 + R;
        const int total_next = c1 < e1 ? (int)(e1 - c1 < (bc_i64)R ? e1 - c1 : (bc_i64)R) : 0;
        __syncthreads(); /* the previous round's matches are added */
#pragma unroll
        for (int j = 0; j < J; j++)
            if (t + j * BC_CUDA_THREADS < total * width)
                sh.stage[t + j * BC_CUDA_THREADS] = v[j];
        rd.put(sh, p, r0, total, total_next);
        __syncthreads();
        if (total_next > 0)
            det_stage_load(p, sh, 0, 0, total_next, col0, width, v);
        rd.advance(p, bucket, c0, e1);
        det_add_lean(run, sh, p, 0, total, a, z, r0, col, width);
    }
}

/* The adds (the checking kernel ran first and found no bad index).  Block
 * b < owners owns rows (det_share); with p.owners != 0 it reads its bucket
 * of positions (the pre-pass) in place of all of idx, and when the bucket
 * is hot (bc_rows_det_hot) its columns are cut into p.slices slices of
 * p.slice_cols columns: slice 0 is block partners + b's, slice s > 0 block
 * (s - 1) * owners + b's, one of the grid's first partners = owners *
 * (slices - 1) blocks, which come first so that a hot row's slices start at
 * once (the other buckets' partners leave at once).  Each column gets the
 * same adds, in the same order, whichever block makes them: the slices
 * change no bit. */
template <typename I, typename OUT> __device__ __forceinline__ void rows_det(const bc_rows_params &p)
{
    enum {
        TILE = BC_CUDA_ROWS_TILE, CH = DET_ROW_CHUNK, NW = DET_ROW_WARPS,
        STAGE = BC_CUDA_ROWS_DET_STAGE_BYTES / (int)sizeof(OUT)
    };
    const int t = (int)threadIdx.x, lane = t & 31, w = t >> 5;
    const bc_i64 owners = p.owners != 0 ? p.owners
                                        : (bc_i64)gridDim.x < p.nrows ? (bc_i64)gridDim.x : p.nrows;
    const bc_i64 partners = p.owners != 0 && p.slices > 1 ? owners * (p.slices - 1) : 0;
    const bc_i64 block = (bc_i64)blockIdx.x;
    const bc_i64 b = block < partners ? block % owners : block - partners;
    const bc_i64 slice = block < partners ? 1 + block / owners : 0;
    if (b >= owners)
        return;
    /* The bucket: its positions [e0, e1) of the buffer `bucket`. */
    const bc_u32 *bucket = nullptr;
    bc_i64 e0 = 0, e1 = 0;
    if (p.owners != 0) {
        const bc_rows_det_layout l = bc_rows_det_make_layout(p.n, p.owners, p.sort_tiles);
        const bc_u32 *starts = reinterpret_cast<const bc_u32 *>(p.scratch + l.starts);
        bucket = reinterpret_cast<const bc_u32 *>(p.scratch + l.pos);
        e0 = starts[b];
        e1 = starts[b + 1];
    }
    /* The block's columns [cb, ce). */
    bc_i64 cb = 0, ce = p.row_size;
    if (partners > 0 && bc_rows_det_hot(e1 - e0, p.n, owners)) {
        cb = slice * p.slice_cols;
        ce = cb + p.slice_cols < p.row_size ? cb + p.slice_cols : p.row_size;
    } else if (slice > 0) {
        return;
    }
    /* The block's rows [r0, r0 + span), the warp's [a, z) of them (as
     * offsets from r0; none when the block has fewer rows than warps). */
    bc_i64 r0, r1, a = 0, z = 0;
    det_share(p.nrows, owners, b, r0, r1);
    const bc_i64 span = r1 - r0, wowners = span < (bc_i64)NW ? span : (bc_i64)NW;
    if (w < wowners)
        det_share(span, wowners, w, a, z);
    const det_shared<OUT> sh;
    if (bucket != nullptr && ce - cb <= (bc_i64)bc_rows_det_stream_cols((long long)sizeof(OUT))) {
        det_run<OUT> run;
        det_bucket_streamed<I>(run, sh, p, bucket, e0, e1, a, z, r0, cb + lane, cb, (int)(ce - cb));
        run.store(reinterpret_cast<OUT *>(p.out), p, cb + lane, (int)(ce - cb));
        return;
    }
    for (bc_i64 col0 = cb; col0 < ce; col0 += 32 * TILE) {
        const bc_i64 col = col0 + lane;
        const bc_i64 left = ce - col0, full = 32 * TILE;
        const int width = (int)(left < full ? left : full);
        const int per = (int)STAGE / width < (int)CH ? (int)STAGE / width : (int)CH; /* matches a stage holds */
        det_run<OUT> run;
        if (bucket != nullptr)
            det_bucket_chunks<I>(run, sh, p, bucket, e0, e1, a, z, r0, col, col0, width, per);
        else
            det_scan<I>(run, sh, p, r0, span, a, z, col, col0, width, per);
        run.store(reinterpret_cast<OUT *>(p.out), p, col, width);
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
