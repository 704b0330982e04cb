/*
 * cuda/bincount_det_defs.h -- what the deterministic float histogram shares
 * between its kernels (cuda/bincount_det.cuh, instantiated in
 * cuda/bincount_kernels.cu) and its launcher (cuda_host/bincount_det_launch.h):
 * the grid of the pass and the parameters of the kernel that sums the
 * blocks' partial histograms; for the bucket path (outputs of more than
 * BC_CUDA_DET_PASS_MAX_BINS bins, cuda/bincount_det_bucket.cuh), its
 * stages, sizes (windows, tiles, chunks) and the layout of its scratch
 * buffer, which the launcher and the kernels compute with the same
 * functions.
 * The pass itself takes bc_hist_params (cuda/kernel_defs.h), whose `out` is
 * then the partial histograms.
 *
 * Valid C99, C++ and CUDA on its own; it includes only cuda/kernel_defs.h.
 */
#ifndef AESARA_BINCOUNT_CUDA_DET_H
#define AESARA_BINCOUNT_CUDA_DET_H

#include "cuda/kernel_defs.h"

/* The size functions below serve the launcher and the kernels alike. */
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define BC_DET_FN __host__ __device__ inline
#else
#define BC_DET_FN static inline
#endif

/* Most blocks of a deterministic pass: its grid is min(this, ceil(N /
 * BC_CUDA_MIN_ELEMS_PER_BLOCK)) blocks for N values, whatever the device,
 * so that the order of the additions (which block and warp takes which
 * value) is the same on every GPU. */
#define BC_CUDA_DET_BLOCKS 256

/* Most bins of the output summed by window passes over x (each value's
 * block and warp fixed by its position, cuda/bincount_det.cuh); more bins
 * take the bucket path (cuda/bincount_det_bucket.cuh).  A length of the
 * output chooses the path, never the device. */
#define BC_CUDA_DET_PASS_MAX_BINS 4096
/* Bytes of a window's bins in the bucket path: 1024 float64 or 2048
 * float32 bins per window, on every device. */
#define BC_CUDA_DET_WINDOW_BYTES 8192
/* Fewest bucket entries a block of the bucket sum takes (a chunk); more
 * when x has more than BC_CUDA_DET_MAX_CHUNKS times as many values. */
#define BC_CUDA_DET_CHUNK 4096
#define BC_CUDA_DET_MAX_CHUNKS 4096
/* The bucket path keeps positions and table entries in 32 bits: x of
 * fewer values than this, windows x tiles fewer too. */
#define BC_CUDA_DET_BUCKET_MAX 2147483647

/* What a launch of the deterministic pass kernel does (bc_hist_params
 * stage). */
#define BC_DET_STAGE_WINDOW 0 /* a window pass over x (cuda/bincount_det.cuh) */
#define BC_DET_STAGE_COUNT 1  /* check x, count each tile's values per window */
#define BC_DET_STAGE_REDUCE 2 /* sum a run of the table (the rows' pre-pass only) */
#define BC_DET_STAGE_SCAN 3   /* exclusive scan of the table, window starts */
#define BC_DET_STAGE_SCATTER 4 /* stable scatter of (bin, weight) to buckets */
#define BC_DET_STAGE_SUM 5    /* sum a chunk of the buckets per window */

/* Bins of one window of the bucket path for weights of `itemsize` bytes. */
BC_DET_FN long long bc_det_window_bins(long long itemsize)
{
    return BC_CUDA_DET_WINDOW_BYTES / itemsize;
}

/* Values of x per tile of the bucket path (the last tiles may hold fewer,
 * or none): the length over the tiles, rounded up to whole 128-value
 * rounds of a warp. */
BC_DET_FN long long bc_det_tile_values(long long size, long long tiles)
{
    const long long t = (size + tiles - 1) / tiles;
    return (t + 127) / 128 * 128;
}

/* Bucket entries per chunk of the bucket sum, from the length of x. */
BC_DET_FN long long bc_det_chunk(long long size)
{
    long long c = (size + BC_CUDA_DET_MAX_CHUNKS - 1) / BC_CUDA_DET_MAX_CHUNKS;
    c = (c + 31) / 32 * 32;
    return c > BC_CUDA_DET_CHUNK ? c : BC_CUDA_DET_CHUNK;
}

/* Whether the bucket path's SCATTER stage scans the count table itself
 * (each block its own tile's offsets, cuda/bincount_det_count.cuh) so
 * that no SCAN stage is launched: for at most 32 windows (the tiles are at
 * most BC_CUDA_DET_BLOCKS, so at most 8,192 entries to read a block). */
BC_DET_FN int bc_det_scan_here(long long windows, long long tiles)
{
    return windows <= 32 && tiles <= BC_CUDA_DET_BLOCKS;
}

/*
 * The byte offsets, in the scratch buffer of the bucket path, of its
 * arrays, for x of `size` values, `windows` windows, `tiles` tiles and
 * weights of `itemsize` bytes; returns the buffer's size in bytes.  The
 * first three are zeroed by one memset (`starts` bytes) before the count:
 *   status   bc_status              the count's range check (cuda/kernel_defs.h)
 *   table    u32 [windows x tiles]  counts, then their exclusive scan
 *   totals   u32 [windows]          each window's count, summed by atomics
 *   starts   u32 [windows + 1]      bucket offset of each window, then size
 *   weights  W   [size]             the buckets' weights
 *   bins     u16 [size]             their bins within the window
 *   partials f64 [(chunks + windows) x window bins]  per chunk and window
 */
typedef struct bc_det_layout {
    long long status, table, totals, starts, weights, bins, partials, bytes;
} bc_det_layout;

BC_DET_FN bc_det_layout bc_det_make_layout(long long size, long long windows,
                                               long long tiles, long long itemsize)
{
    bc_det_layout l;
    const long long chunks = (size + bc_det_chunk(size) - 1) / bc_det_chunk(size);
    l.status = 0;
    l.table = (BC_CUDA_STATUS_BYTES + 15) / 16 * 16;
    l.totals = l.table + (windows * tiles * 4 + 15) / 16 * 16;
    l.starts = l.totals + (windows * 4 + 15) / 16 * 16;
    l.weights = l.starts + ((windows + 1) * 4 + 15) / 16 * 16;
    l.bins = l.weights + (size * itemsize + 15) / 16 * 16;
    l.partials = l.bins + (size * 2 + 15) / 16 * 16;
    l.bytes = l.partials + (chunks + windows) * bc_det_window_bins(itemsize) * 8;
    return l;
}

/* Whether a deterministic sum of `size` values into `length` bins takes the
 * bucket path (lengths only, never the device). */
BC_DET_FN int bc_det_bucketed(long long size, long long length, long long tiles,
                                  long long itemsize)
{
    const long long windows = (length + bc_det_window_bins(itemsize) - 1) /
                              bc_det_window_bins(itemsize);
    return length > BC_CUDA_DET_PASS_MAX_BINS && size < BC_CUDA_DET_BUCKET_MAX &&
           windows < BC_CUDA_DET_BUCKET_MAX / tiles;
}

/*
 * Parameters of bincount_det_finish_<out>.  Window passes (starts 0):
 * dst[j] = the sum over blocks b = 0, 1, ..., blocks - 1, in that order, of
 * src[b * stride + j], for j < bins.  Bucket path (starts != 0): src is the
 * partials of bc_det_layout, and dst[j], for bin j of window w, the sum of
 * the partials of the chunks that hold window w's entries, in chunk order
 * (cuda/bincount_det_bucket.cuh).  Every field is 8 bytes.
 */
typedef struct bc_det_finish_params {
    bc_u64 src;    /* const double *: the partial histograms of one window */
    bc_u64 dst;    /* OUT *: the output at the window's first bin */
    bc_i64 bins;   /* bins to write */
    bc_i64 stride; /* bins between two blocks' partial histograms */
    bc_i64 blocks; /* partial histograms */
    bc_u64 starts; /* bucket path: const bc_u32 *, the windows' starts; else 0 */
    bc_i64 chunk;  /* bucket path: entries per chunk */
    bc_i64 window_bins; /* bucket path: bins per window */
} bc_det_finish_params;

#endif /* AESARA_BINCOUNT_CUDA_DET_H */
