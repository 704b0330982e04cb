/*
 * cuda/scatter_add_det.cuh -- the device code of the deterministic
 * scatter-add of float rows of aesara_bincount.gpu.GpuScatterAdd (chosen
 * when aesara.config.deterministic == "more" at compile time): each row of
 * the output receives its increments one at a time, in index order, each
 * add rounded in the output's dtype, which is the order and the rounding of
 * numpy.add.at; so the result is the same bits on every call, on every
 * device, and equal to np.add.at's.  Neighbours: cuda/scatter_add_kernels.cu
 * (which instantiates it, through cuda/scatter_add_det_bucket.cuh, as
 * scatter_rows_det_<idx>_<f32|f64>, and whose
 * checking kernel runs first), cuda/device_helpers.cuh (dynamic_shared),
 * cuda_host/scatter_add_launch.h (the launcher, which queues it in place of the
 * adding kernel).  Valid CUDA C++17 on its own: templates only.
 *
 * Algorithm.  The rows are cut into equal ranges, one per block (at most
 * one block per row), and a block's range into equal ranges, one per warp
 * (at most one warp per row): each row has one writer, no atomics.  For
 * each column tile (32 * BC_CUDA_ROWS_TILE columns; wider rows take several,
 * each reading idx again), a block reads idx in chunks of DET_ROW_CHUNK
 * (BC_CUDA_ROWS_DET_PER_THREAD indices a thread, coalesced, the next
 * chunk's loaded while this one is handled):
 *   1. Compaction: the chunk's indices that fall in the block's rows are
 *      written to shared memory in index order (row, position): a ballot
 *      per warp and index a thread takes, the warps' counts summed in
 *      order, so each match's slot is its rank among the chunk's matches.
 *   2. Staging: the matches' increment rows (the tile's columns) are loaded
 *      by all the block's threads at once, `per` = BC_CUDA_ROWS_DET_STAGE_BYTES
 *      / (tile width * itemsize) matches at a time (128 float32 rows of 64),
 *      into registers (each thread BC_CUDA_ROWS_DET_STAGE_BYTES / itemsize /
 *      BC_CUDA_THREADS elements), then stored to the stage in shared memory;
 *      the next `per` matches are loaded while the warps add these.
 *   3. Adds: each warp goes through the staged matches in order, picks out
 *      with a ballot those of its rows, and adds them one by one, 8 (float64:
 *      4) read from the stage at a time, its lanes holding the tile's
 *      columns of the current row in registers (loaded when the row
 *      changes, stored back when another row comes).  A step of 32 staged
 *      matches whose matches of the warp all fall on one row (a hot row)
 *      takes that row once and then only reads and adds, and when they are
 *      DET_ROW_DENSE or more, it goes through the 32 staged matches at
 *      fixed offsets, adding those of the warp (a uniform predicate); a
 *      tile of at most 64 columns reads and adds two columns a lane, not
 *      BC_CUDA_ROWS_TILE.
 * With p.owners != 0 (large idx: bc_rows_det_sorted, cuda/scatter_add_det_defs.h)
 * a pre-pass has sorted the positions of idx by owner block, stably
 * (cuda/scatter_add_det_bucket.cuh, whose rows_det_pass is the kernel's
 * body and checks the status first), and step 1 becomes: the block's next
 * DET_ROW_CHUNK positions of its bucket, in index order, and their rows,
 * written to the same shared arrays; steps 2 and 3 are the same
 * (det_stage_add).  There a hot bucket's columns are cut into slices, each
 * a block's, and a slice or row of at most 32 bytes is streamed (its next
 * round of increments loading while this one is added, det_add_lean):
 * rows_det and det_bucket_streamed, cuda/scatter_add_det_bucket.cuh.
 * A block's dynamic shared memory (BC_CUDA_ROWS_DET_SHARED_BYTES, 44 KB,
 * det_shared) holds the chunk's matches, the warps' counts and the stage.
 * So every row receives its increments in index order, one add each, rounded
 * in the output's dtype: np.add.at's order and bits, whatever the grid.
 *
 * Cost (H200; counts, not measured): idx is read once per block, not per
 * warp, and compacted with two barriers per chunk of 1,024 indices (about
 * 0.35 us a chunk), or, past the threshold, only the block's bucket is
 * read (about 10 us of pre-pass launches); a hot row (a large share of
 * the indices on one row) is still added by one warp per column tile, but
 * from shared memory, its increments loaded by the whole block many rows
 * ahead (32 KB in flight), so it is bound by the warp's issue (about 6
 * instructions an increment of 64 float32 columns on a dense step, 11 on
 * a sparser step of one row, 18 on a step that mixes rows) or by the
 * stage's supply (32 KB a load's latency) instead of by one round trip to
 * memory per 8 increments; past the threshold, by the chain of dependent
 * adds of each column (its slices' blocks, det_add_lean: about 4 cycles an
 * increment).  The figures are in docs/semantics.rst.
 */
#ifndef SCATTER_ADD_CUDA_DET_CUH
#define SCATTER_ADD_CUDA_DET_CUH

#include "cuda/device_helpers.cuh"
#include "cuda/scatter_add_det_defs.h"

namespace bc {

/* The row of index v (checked to lie in [-nrows, nrows) before). */
template <typename I> __device__ __forceinline__ bc_i64 det_row(I v, bc_i64 nrows)
{
    const bc_i64 s = (bc_i64)as_u64(v, typename traits<I>::sign());
    return s < 0 ? s + nrows : s;
}

/* A run of one row: its TILE columns of this lane, kept in registers. */
template <typename OUT> struct det_run {
    enum { TILE = BC_CUDA_ROWS_TILE };
    OUT val[TILE];
    bc_i64 row = -1;

    /* The lane's columns col + 32 t of the tile's `width` (lane + 32 t < width). */
    __device__ __forceinline__ void store(OUT *out, const bc_rows_params &p, bc_i64 col, int width) const
    {
        const int lane = (int)(threadIdx.x & 31u);
#pragma unroll
        for (int t = 0; t < TILE; t++)
            if (row >= 0 && lane + t * 32 < width)
                out[row * p.out_row + col + t * 32] = val[t];
    }
    __device__ __forceinline__ void load(const OUT *out, const bc_rows_params &p, bc_i64 col, int width)
    {
        const int lane = (int)(threadIdx.x & 31u);
#pragma unroll
        for (int t = 0; t < TILE; t++)
            val[t] = lane + t * 32 < width ? out[row * p.out_row + col + t * 32] : (OUT)0;
    }
};

/* Indices a thread takes of a chunk, indices of a chunk, warps of a block,
 * and bytes of the staged increments a warp reads at once: 8 matches of
 * float32, 4 of float64 (their shared-memory loads in flight, then the adds
 * one by one). */
enum {
    DET_ROW_K = BC_CUDA_ROWS_DET_PER_THREAD,
    DET_ROW_CHUNK = BC_CUDA_THREADS * DET_ROW_K,
    DET_ROW_WARPS = BC_CUDA_THREADS / 32,
    DET_ROW_BATCH_BYTES = 32,
    /* A step of 32 staged matches with at least this many of one row of
     * the warp's goes through them all at fixed offsets, not one by one. */
    DET_ROW_DENSE = 8
};
static_assert(DET_ROW_CHUNK * 12 + DET_ROW_K * DET_ROW_WARPS * 4 + BC_CUDA_ROWS_DET_STAGE_BYTES ==
                  BC_CUDA_ROWS_DET_SHARED_BYTES,
              "BC_CUDA_ROWS_DET_SHARED_BYTES: the layout of rows_det's shared memory");
static_assert((DET_ROW_CHUNK * 12 + DET_ROW_K * DET_ROW_WARPS * 4) % 8 == 0,
              "rows_det: the stage starts on 8 bytes");

/* The block's shared memory: the chunk's matches in index order (row, less
 * the block's first row; position in the chunk), each warp's count of
 * matches per index a thread takes, and the stage of increment rows. */
template <typename OUT> struct det_shared {
    bc_i64 *row;
    int *pos;
    int *count;
    OUT *stage;
    __device__ __forceinline__ det_shared()
    {
        unsigned char *base = reinterpret_cast<unsigned char *>(dynamic_shared());
        row = reinterpret_cast<bc_i64 *>(base);
        pos = reinterpret_cast<int *>(base + DET_ROW_CHUNK * 8);
        count = reinterpret_cast<int *>(base + DET_ROW_CHUNK * 12);
        stage = reinterpret_cast<OUT *>(base + DET_ROW_CHUNK * 12 + DET_ROW_K * DET_ROW_WARPS * 4);
    }
};

/* [lo, hi) of `total` items cut into `parts` near-equal ranges: range `k`. */
__device__ __forceinline__ void det_share(bc_i64 total, bc_i64 parts, bc_i64 k, bc_i64 &lo, bc_i64 &hi)
{
    const bc_i64 each = total / parts, extra = total % parts;
    lo = each * k + (k < extra ? k : extra);
    hi = lo + each + (k < extra ? 1 : 0);
}

/* The chunk's matches [lo, hi) of the block, `width` columns from col0 of
 * each increment row, loaded into v: element k of the stage (entry k / width,
 * column k % width) in v[j] of thread k - j * BC_CUDA_THREADS. */
template <typename OUT, int J>
__device__ __forceinline__ void det_stage_load(const bc_rows_params &p, const det_shared<OUT> &sh,
                                               bc_i64 c0, int lo, int hi, bc_i64 col0, int width,
                                               OUT (&v)[J])
{
    const OUT *inc = reinterpret_cast<const OUT *>(p.inc);
    const int size = (hi - lo) * width;
#pragma unroll
    for (int j = 0; j < J; j++) {
        const int k = (int)threadIdx.x + j * BC_CUDA_THREADS;
        if (k < size) {
            const int e = k / width;
            v[j] = inc[(c0 + sh.pos[lo + e]) * p.inc_row + (col0 + (k - e * width)) * p.inc_elem];
        }
    }
}

/* Adds to the warp's run, in index order, the staged matches [lo, hi) of
 * the chunk that fall in its rows [a, z) (offsets from r0): up to B at a
 * time, their staged columns read together, then added one by one (when
 * the warp's matches among a step of 32 staged ones all fall on one row,
 * without picking the row of each).  T of
 * the run's BC_CUDA_ROWS_TILE columns per lane are read and added (2 when
 * the tile is at most 64 columns wide: the others are outside the row). */
template <int T, typename OUT>
__device__ __forceinline__ void det_add_staged(det_run<OUT> &run, const det_shared<OUT> &sh,
                                               const bc_rows_params &p, int lo, int hi, bc_i64 a,
                                               bc_i64 z, bc_i64 r0, bc_i64 col, int width)
{
    enum { B = DET_ROW_BATCH_BYTES / (int)sizeof(OUT) };
    static_assert(T >= 1 && T <= BC_CUDA_ROWS_TILE, "det_add_staged: T columns of a tile");
    OUT *out = reinterpret_cast<OUT *>(p.out);
    const int lane = (int)(threadIdx.x & 31u);
    const OUT *cols = sh.stage + lane; /* this lane's columns of staged match 0 */
    for (int s = lo; s < hi; s += 32) {
        const bc_i64 r = s + lane < hi ? sh.row[s + lane] : -1;
        unsigned mine = __ballot_sync(FULL_WARP, r >= a && r < z);
        if (mine == 0u)
            continue;
        /* The step's matches all on one row (a hot row): that row once,
         * then only its staged columns, B matches at a time. */
        const bc_i64 first = __shfl_sync(FULL_WARP, r, __ffs((int)mine) - 1);
        if (__all_sync(FULL_WARP, ((mine >> lane) & 1u) == 0u || r == first)) {
            if (first + r0 != run.row) {
                run.store(out, p, col, width);
                run.row = first + r0;
                run.load(out, p, col, width);
            }
            if (__popc(mine) >= DET_ROW_DENSE) {
                /* A dense step (the hot row's usual one): each of the 32
                 * staged matches at its fixed offset, those of the warp
                 * (a uniform predicate) read and added, in order. */
                const OUT *step = cols + (s - lo) * width;
#pragma unroll 8
                for (int b = 0; b < 32; b++)
                    if ((mine >> b) & 1u)
#pragma unroll
                        for (int u = 0; u < T; u++)
                            if (lane + u * 32 < width)
                                run.val[u] += step[b * width + u * 32];
                mine = 0u;
            }
            while (mine != 0u) { /* uniform: every lane holds the same mask */
                int e[B], got = 0;
                OUT x[B][T];
#pragma unroll
                for (int b = 0; b < B; b++) {
                    e[b] = 0;
                    if (mine != 0u) {
                        e[b] = s + __ffs((int)mine) - 1 - lo;
                        mine &= mine - 1u;
                        got = b + 1;
                    }
                }
#pragma unroll
                for (int b = 0; b < B; b++)
#pragma unroll
                    for (int u = 0; u < T; u++)
                        x[b][u] = b < got && lane + u * 32 < width ? cols[e[b] * width + u * 32] : (OUT)0;
#pragma unroll
                for (int b = 0; b < B; b++) {
                    if (b >= got)
                        break;
#pragma unroll
                    for (int u = 0; u < T; u++)
                        run.val[u] += x[b][u];
                }
            }
        }
        while (mine != 0u) { /* uniform: every lane holds the same mask */
            int ls[B]; /* the lanes of the next B matches (their rows in r), or -1 */
            OUT x[B][T];
#pragma unroll
            for (int b = 0; b < B; b++) {
                ls[b] = -1;
                if (mine != 0u) {
                    ls[b] = __ffs((int)mine) - 1;
                    mine &= mine - 1u;
                }
            }
#pragma unroll
            for (int b = 0; b < B; b++)
#pragma unroll
                for (int u = 0; u < T; u++)
                    x[b][u] = ls[b] >= 0 && lane + u * 32 < width
                                  ? cols[(s - lo + ls[b]) * width + u * 32] : (OUT)0;
#pragma unroll
            for (int b = 0; b < B; b++) {
                if (ls[b] < 0)
                    break;
                const bc_i64 row = __shfl_sync(FULL_WARP, r, ls[b]) + r0;
                if (row != run.row) {
                    run.store(out, p, col, width);
                    run.row = row;
                    run.load(out, p, col, width);
                }
#pragma unroll
                for (int u = 0; u < T; u++)
                    run.val[u] += x[b][u];
            }
        }
    }
}

/* det_add_staged for a tile of at most 32 columns (one a lane), with fewer
 * registers (no batches): a dense step of one row as there, any other
 * step one match at a time.  For det_bucket_adds's streamed chunks, whose
 * next chunk's increments are in flight, in registers, meanwhile. */
template <typename OUT>
__device__ __forceinline__ void det_add_lean(det_run<OUT> &run, const det_shared<OUT> &sh,
                                             const bc_rows_params &p, int lo, int hi, bc_i64 a,
                                             bc_i64 z, bc_i64 r0, bc_i64 col, int width)
{
    OUT *out = reinterpret_cast<OUT *>(p.out);
    const int lane = (int)(threadIdx.x & 31u);
    const bool live = lane < width;
    for (int s = lo; s < hi; s += 32) {
        const bc_i64 r = s + lane < hi ? sh.row[s + lane] : -1;
        unsigned mine = __ballot_sync(FULL_WARP, r >= a && r < z);
        if (mine == 0u)
            continue;
        const OUT *step = sh.stage + lane + (s - lo) * width;
        const bc_i64 first = __shfl_sync(FULL_WARP, r, __ffs((int)mine) - 1);
        if (__popc(mine) >= DET_ROW_DENSE &&
            __all_sync(FULL_WARP, ((mine >> lane) & 1u) == 0u || r == first)) {
            if (first + r0 != run.row) {
                run.store(out, p, col, width);
                run.row = first + r0;
                run.load(out, p, col, width);
            }
#pragma unroll 8
            for (int b = 0; b < 32; b++)
                if (((mine >> b) & 1u) && live)
                    run.val[0] += step[b * width];
            continue;
        }
        while (mine != 0u) { /* uniform: every lane holds the same mask */
            const int l = __ffs((int)mine) - 1;
            mine &= mine - 1u;
            const bc_i64 row = __shfl_sync(FULL_WARP, r, l) + r0;
            if (row != run.row) {
                run.store(out, p, col, width);
                run.row = row;
                run.load(out, p, col, width);
            }
            if (live)
                run.val[0] += step[l * width];
        }
    }
}

/* Stages and adds the chunk's `total` matches (sh.row, sh.pos: positions
 * from c0), `per` at a time (the next ones loaded while the warps add
 * these); each warp adds those of its rows [a, z), in index order. */
template <typename OUT>
__device__ __forceinline__ void det_stage_add(det_run<OUT> &run, const det_shared<OUT> &sh,
                                              const bc_rows_params &p, bc_i64 c0, int total,
                                              int per, bc_i64 a, bc_i64 z, bc_i64 r0, bc_i64 col,
                                              bc_i64 col0, int width)
{
    enum {
        TILE = BC_CUDA_ROWS_TILE,
        STAGE = BC_CUDA_ROWS_DET_STAGE_BYTES / (int)sizeof(OUT), J = STAGE / BC_CUDA_THREADS
    };
    const int t = (int)threadIdx.x;
    OUT v[J];
    det_stage_load(p, sh, c0, 0, total < per ? total : per, col0, width, v);
    for (int lo = 0; lo < total; lo += per) {
        const int hi = lo + per < total ? lo + per : total;
        __syncthreads(); /* the stage is free */
#pragma unroll
        for (int j = 0; j < J; j++)
            if (t + j * BC_CUDA_THREADS < (hi - lo) * width)
                sh.stage[t + j * BC_CUDA_THREADS] = v[j];
        __syncthreads();
        if (hi < total)
            det_stage_load(p, sh, c0, hi, hi + per < total ? hi + per : total, col0, width, v);
        if (width <= 32)
            det_add_staged<1>(run, sh, p, lo, hi, a, z, r0, col, width);
        else if (width <= 64)
            det_add_staged<2>(run, sh, p, lo, hi, a, z, r0, col, width);
        else
            det_add_staged<TILE>(run, sh, p, lo, hi, a, z, r0, col, width);
    }
}

/* The adds of one column tile (`width` columns from col0; this lane's
 * column col) over all of idx, in chunks (no bucket pre-pass): each chunk's
 * indices in the block's rows [r0, r0 + span), compacted in index order,
 * their increments staged `per` at a time; each warp adds those of its rows
 * [a, z).  The run is the warp's current row (stored by the caller). */
template <typename I, typename OUT>
__device__ __forceinline__ void det_scan(det_run<OUT> &run, const det_shared<OUT> &sh,
                                         const bc_rows_params &p, bc_i64 r0, bc_i64 span, bc_i64 a,
                                         bc_i64 z, bc_i64 col, bc_i64 col0, int width, int per)
{
    enum { K = DET_ROW_K, CH = DET_ROW_CHUNK, NW = DET_ROW_WARPS };
    const I *idx = reinterpret_cast<const I *>(p.idx);
    const int t = (int)threadIdx.x, lane = t & 31, w = t >> 5;
    I next[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
        const bc_i64 i = (bc_i64)(k * BC_CUDA_THREADS + t);
        next[k] = i < p.n ? idx[i * p.idx_stride] : (I)0;
    }
    for (bc_i64 c0 = 0; c0 < p.n; c0 += CH) {
        /* 1. The chunk's indices in this block's rows, compacted in index
         * order; the next chunk's indices are loaded meanwhile. */
        bc_i64 row[K];
        unsigned hit[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            const bc_i64 i = c0 + k * BC_CUDA_THREADS + t;
            row[k] = i < p.n ? det_row(next[k], p.nrows) - r0 : -1;
            const bc_i64 ni = i + CH;
            next[k] = ni < p.n ? idx[ni * p.idx_stride] : (I)0;
            hit[k] = __ballot_sync(FULL_WARP, row[k] >= 0 && row[k] < span);
            if (lane == 0)
                sh.count[k * NW + w] = __popc(hit[k]);
        }
        __syncthreads();
        int total = 0, at[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
#pragma unroll
            for (int u = 0; u < NW; u++) {
                if (u == w)
                    at[k] = total + __popc(hit[k] & ((1u << lane) - 1u));
                total += sh.count[k * NW + u];
            }
        }
#pragma unroll
        for (int k = 0; k < K; k++) {
            if ((hit[k] >> lane) & 1u) {
                sh.row[at[k]] = row[k];
                sh.pos[at[k]] = k * BC_CUDA_THREADS + t;
            }
        }
        __syncthreads();
        /* 2. The matches' increments, staged in shared memory by the whole
         * block, and 3. the adds. */
        det_stage_add(run, sh, p, c0, total, per, a, z, r0, col, col0, width);
    }
}

} /* namespace bc */

#endif /* SCATTER_ADD_CUDA_DET_CUH */
