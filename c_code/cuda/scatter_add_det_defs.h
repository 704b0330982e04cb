/*
 * cuda/scatter_add_det_defs.h -- what the bucket pre-pass of the deterministic
 * scatter-add of rows shares between its kernels (the stages of
 * scatter_rows_det_<idx>_<out>, cuda/scatter_add_det_bucket.cuh) and its
 * launcher (cuda_host/scatter_add_launch.h): when it is taken, its tiles of idx,
 * and the layout of its scratch buffer, computed by both with the same
 * functions.  The stages are those of the histogram's bucket path
 * (BC_DET_STAGE_*, cuda/bincount_det_defs.h), keyed by the block that owns each
 * index's row instead of by a window of bins.
 *
 * Valid C99, C++ and CUDA on its own; it includes only cuda/bincount_det_defs.h
 * (and through it cuda/kernel_defs.h).
 */
#ifndef AESARA_SCATTER_ADD_CUDA_DET_H
#define AESARA_SCATTER_ADD_CUDA_DET_H

#include "cuda/bincount_det_defs.h"

/* Whether the deterministic scatter-add of `n` indices into `nrows` rows of
 * `row_size` elements sorts idx by owner first: more than
 * BC_CUDA_ROWS_DET_SORT_MIN indices to scan per block (the indices times
 * the column tiles, 32 x BC_CUDA_ROWS_TILE columns each), more than one row,
 * and positions that fit in 31 bits.  Sizes only, never the device. */
BC_DET_FN int bc_rows_det_sorted(long long n, long long nrows, long long row_size)
{
    const long long tiles = (row_size + 32 * BC_CUDA_ROWS_TILE - 1) / (32 * BC_CUDA_ROWS_TILE);
    return nrows > 1 && n < BC_CUDA_DET_BUCKET_MAX / 2 &&
           n > BC_CUDA_ROWS_DET_SORT_MIN / (tiles > 0 ? tiles : 1);
}

/* The most columns of `itemsize` bytes that the streamed adds take
 * (det_bucket_streamed, cuda/scatter_add_det_bucket.cuh): a round of
 * BC_CUDA_THREADS entries' increments fills at most half the stage, so 32
 * bytes a row (8 float32, 4 float64).  The kernel's test and the slices'
 * width below both come from here. */
BC_DET_FN long long bc_rows_det_stream_cols(long long itemsize)
{
    return BC_CUDA_ROWS_DET_STAGE_BYTES / (2 * (long long)BC_CUDA_THREADS * itemsize);
}

/* The column slices of a hot bucket (bc_rows_det_hot) of rows of `row_size`
 * elements of `itemsize` bytes, at most BC_CUDA_ROWS_DET_SLICES, and in
 * *cols the columns of each but the last: a multiple of the streamed width
 * (bc_rows_det_stream_cols: 32 bytes), so that a slice reads whole sectors
 * and a slice of that width is streamed.  Sizes only, never the device:
 * the adds' grid is owners x slices. */
BC_DET_FN long long bc_rows_det_slices(long long row_size, long long itemsize, long long *cols)
{
    const long long least = bc_rows_det_stream_cols(itemsize);
    long long each = (row_size + BC_CUDA_ROWS_DET_SLICES - 1) / BC_CUDA_ROWS_DET_SLICES;
    each = (each + least - 1) / least * least;
    if (each < 1)
        each = 1;
    *cols = each;
    return row_size > each ? (row_size + each - 1) / each : 1;
}

/* Whether a bucket of `entries` positions, of `n` indices cut among
 * `owners` blocks, is hot: its columns then go to the slices' blocks. */
BC_DET_FN int bc_rows_det_hot(long long entries, long long n, long long owners)
{
    return entries >= BC_CUDA_ROWS_DET_HOT_MIN &&
           entries > BC_CUDA_ROWS_DET_HOT_SHARE * (n / (owners > 0 ? owners : 1));
}

/* Tiles of idx of the pre-pass (each a block of its stages): as the
 * histogram's bucket path cuts x, from the length of idx alone. */
BC_DET_FN long long bc_rows_det_tiles(long long n)
{
    const long long t = (n + BC_CUDA_MIN_ELEMS_PER_BLOCK - 1) / BC_CUDA_MIN_ELEMS_PER_BLOCK;
    return t < 1 ? 1 : t < BC_CUDA_DET_BLOCKS ? t : BC_CUDA_DET_BLOCKS;
}

/*
 * The byte offsets, in the pre-pass's scratch buffer, of its arrays, for
 * `n` indices, `owners` blocks owning rows and `tiles` tiles; the buffer's
 * size in bytes:
 *   table    u32 [owners x tiles]  counts, then their exclusive scan
 *   runs     u32 [tiles]           each block's sum of its run of the table
 *   starts   u32 [owners + 1]      first bucket entry of each owner, then n
 *   pos      u32 [n]               the buckets: positions in idx, each
 *                                  owner's in increasing order
 */
typedef struct bc_rows_det_layout {
    long long table, runs, starts, pos, bytes;
} bc_rows_det_layout;

BC_DET_FN bc_rows_det_layout bc_rows_det_make_layout(long long n, long long owners, long long tiles)
{
    bc_rows_det_layout l;
    l.table = 0;
    l.runs = (owners * tiles * 4 + 15) / 16 * 16;
    l.starts = l.runs + (tiles * 4 + 15) / 16 * 16;
    l.pos = l.starts + ((owners + 1) * 4 + 15) / 16 * 16;
    l.bytes = l.pos + (n * 4 + 15) / 16 * 16;
    return l;
}

#endif /* AESARA_SCATTER_ADD_CUDA_DET_H */
