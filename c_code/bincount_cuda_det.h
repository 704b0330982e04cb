/*
 * bincount_cuda_det.h -- what the deterministic float histogram shares
 * between its kernels (bincount_cuda_det.cuh, instantiated in
 * bincount_cuda_kernel.cu) and its launcher (bincount_cuda_det_launch.h):
 * the grid of the pass and the parameters of the kernel that sums the
 * blocks' partial histograms.
 * The pass itself takes bc_hist_params (bincount_cuda.h), whose `out` is
 * then the partial histograms.
 *
 * Valid C99, C++ and CUDA on its own; it includes only bincount_cuda.h.
 */
#ifndef AESARA_BINCOUNT_CUDA_DET_H
#define AESARA_BINCOUNT_CUDA_DET_H

#include "bincount_cuda.h"

/* Most blocks of a deterministic pass: its grid is min(this, ceil(N /
 * BC_CUDA_MIN_ELEMS_PER_BLOCK)) blocks for N values, whatever the device,
 * so that the order of the additions (which block and warp takes which
 * value) is the same on every GPU. */
#define BC_CUDA_DET_BLOCKS 256

/*
 * Parameters of bincount_det_finish_<out>: dst[j] = the sum over blocks
 * b = 0, 1, ..., blocks - 1, in that order, of src[b * stride + j], for
 * j < bins.  Every field is 8 bytes.
 */
typedef struct bc_det_finish_params {
    bc_u64 src;    /* const double *: the partial histograms of one window */
    bc_u64 dst;    /* OUT *: the output at the window's first bin */
    bc_i64 bins;   /* bins to write */
    bc_i64 stride; /* bins between two blocks' partial histograms */
    bc_i64 blocks; /* partial histograms */
} bc_det_finish_params;

#endif /* AESARA_BINCOUNT_CUDA_DET_H */
