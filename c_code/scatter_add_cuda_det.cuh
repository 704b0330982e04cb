/*
 * scatter_add_cuda_det.cuh -- the device code of the deterministic
 * scatter-add of float rows of aesara_bincount.gpu.GpuScatterAdd (chosen
 * when aesara.config.deterministic == "more" at compile time): each row of
 * the output receives its increments one at a time, in index order, each
 * add rounded in the output's dtype, which is the order and the rounding of
 * numpy.add.at; so the result is the same bits on every call, on every
 * device, and equal to np.add.at's.  Neighbours: scatter_add_cuda_kernel.cu
 * (which instantiates it as scatter_rows_det_<idx>_<f32|f64>, and whose
 * checking kernel runs first), bincount_cuda_device.cuh (warp helpers),
 * scatter_add_cuda_launch.h (the launcher, which queues it in place of the
 * adding kernel).  Valid CUDA C++17 on its own: templates only.
 *
 * Algorithm: the rows are cut into equal ranges, one per warp of the grid
 * (at most one warp per row).  Every warp reads all of idx, DET_ROW_STEPS
 * steps of 32 indices at a time, and picks out with a ballot those of each
 * step that fall in its rows; it takes them in index order, 8 (float64: 4)
 * at a time (their increment rows loaded together, then added one by one),
 * its lanes holding 32 * BC_CUDA_ROWS_TILE columns of the current row in
 * registers (loaded when the row changes, stored back when another row
 * comes).  Rows wider than that are done tile by tile, reading idx once per
 * tile.  No atomics: each element has one writer.
 *
 * Cost: idx is read once per warp (from L2 after the first), and the rows
 * of one warp are summed by that warp alone, so a hot row (a large share of
 * the indices on one row) is added serially by one warp.  This is the
 * price of numpy's order; the default kernel is faster.
 */
#ifndef SCATTER_ADD_CUDA_DET_CUH
#define SCATTER_ADD_CUDA_DET_CUH

#include "bincount_cuda_device.cuh"

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

    __device__ __forceinline__ void store(OUT *out, const bc_rows_params &p, bc_i64 col) const
    {
#pragma unroll
        for (int t = 0; t < TILE; t++)
            if (row >= 0 && col + t * 32 < p.row_size)
                out[row * p.out_row + col + t * 32] = val[t];
    }
    __device__ __forceinline__ void load(const OUT *out, const bc_rows_params &p, bc_i64 col)
    {
#pragma unroll
        for (int t = 0; t < TILE; t++)
            val[t] = col + t * 32 < p.row_size ? out[row * p.out_row + col + t * 32] : (OUT)0;
    }
};

/* Steps of 32 indices a warp loads at once, and matches whose increments it
 * loads at once, 8 of float32 and 4 of float64 (loads in flight: idx and
 * the increments come from memory, and a hot row's adds would otherwise
 * wait for one load each; 8 float64 spilled registers at sm_90). */
enum { DET_ROW_STEPS = 4, DET_ROW_BATCH_BYTES = 32 };

template <typename I, typename OUT> __device__ __forceinline__ void rows_det(const bc_rows_params &p)
{
    enum { TILE = BC_CUDA_ROWS_TILE, U = DET_ROW_STEPS, B = DET_ROW_BATCH_BYTES / (int)sizeof(OUT) };
    const I *idx = reinterpret_cast<const I *>(p.idx);
    const OUT *inc = reinterpret_cast<const OUT *>(p.inc);
    OUT *out = reinterpret_cast<OUT *>(p.out);
    const bc_i64 lane = (bc_i64)(threadIdx.x & 31u);
    const bc_i64 warp = (bc_i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const bc_i64 warps = (bc_i64)gridDim.x * (blockDim.x >> 5);
    const bc_i64 owners = warps < p.nrows ? warps : p.nrows;
    /* The checking kernel ran before (same stream): nothing is added when it
     * found a bad index. */
    if (p.status != 0 &&
        reinterpret_cast<const volatile bc_status *>(p.status)->bad_pos_inv != 0)
        return;
    if (warp >= owners)
        return;
    const bc_i64 r0 = p.nrows / owners * warp + (warp < p.nrows % owners ? warp : p.nrows % owners);
    const bc_i64 r1 = r0 + p.nrows / owners + (warp < p.nrows % owners ? 1 : 0);
    for (bc_i64 col0 = 0; col0 < p.row_size; col0 += 32 * TILE) {
        const bc_i64 col = col0 + lane;
        det_run<OUT> run;
        for (bc_i64 base = 0; base < p.n; base += 32 * U) {
            bc_i64 row[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const bc_i64 i = base + u * 32 + lane;
                row[u] = i < p.n ? det_row(idx[i * p.idx_stride], p.nrows) : -1;
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                unsigned mine = __ballot_sync(FULL_WARP, row[u] >= r0 && row[u] < r1);
                while (mine != 0u) { /* uniform: every lane holds the same mask */
                    /* Up to B matches, in index order: their rows, then their
                     * increments loaded together, then added one by one. */
                    bc_i64 rs[B], at[B];
                    OUT v[B][TILE];
#pragma unroll
                    for (int b = 0; b < B; b++) {
                        rs[b] = -1;
                        at[b] = 0;
                        if (mine != 0u) {
                            const int j = __ffs((int)mine) - 1;
                            mine &= mine - 1u;
                            rs[b] = __shfl_sync(FULL_WARP, row[u], j);
                            at[b] = base + u * 32 + j;
                        }
                    }
#pragma unroll
                    for (int b = 0; b < B; b++) {
                        const OUT *src = inc + at[b] * p.inc_row;
#pragma unroll
                        for (int t = 0; t < TILE; t++)
                            v[b][t] = rs[b] >= 0 && col + t * 32 < p.row_size
                                          ? src[(col + t * 32) * p.inc_elem]
                                          : (OUT)0;
                    }
#pragma unroll
                    for (int b = 0; b < B; b++) {
                        if (rs[b] < 0)
                            break;
                        if (rs[b] != run.row) {
                            run.store(out, p, col);
                            run.row = rs[b];
                            run.load(out, p, col);
                        }
#pragma unroll
                        for (int t = 0; t < TILE; t++)
                            run.val[t] += v[b][t];
                    }
                }
            }
        }
        run.store(out, p, col);
    }
}

} /* namespace bc */

#endif /* SCATTER_ADD_CUDA_DET_CUH */
