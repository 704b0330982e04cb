/*
 * cuda/kernel_defs.h -- definitions shared by the CUDA kernels
 * (cuda/bincount_kernels.cu, cuda/scatter_add_kernels.cu and their device
 * helpers cuda/device_helpers.cuh), the host C code of the GpuBincount Op
 * (cuda_host/gpu_bincount_op.c) and the Python kernel layer
 * (aesara_bincount_core/cuda/kernels.py, which reads the BC_CUDA_* numbers below
 * from this file, so that both launchers use the same values).
 *
 * Valid C99, C++ and CUDA on its own; it includes nothing, because NVRTC has
 * no C standard headers.  Keep every tuning number a plain integer #define on
 * one line: kernels.py parses them.
 */
#ifndef AESARA_BINCOUNT_CUDA_H
#define AESARA_BINCOUNT_CUDA_H

typedef long long bc_i64;
typedef unsigned long long bc_u64;
typedef int bc_i32;
typedef unsigned int bc_u32;

/* ---- launch geometry and strategy (see the block comment in kernels.py and
 * cuda_host/gpu_bincount_op.c, above the launchers, for how they are used) ---- */

/* Threads per block; a multiple of the 32-lane warp. */
#define BC_CUDA_THREADS 512
/* Blocks that should be resident per multiprocessor (launch bounds, and the
 * share of a multiprocessor's shared memory one block may take). */
#define BC_CUDA_BLOCKS_PER_SM 2
/* Fewest elements of x a block is given before more blocks are launched. */
#define BC_CUDA_MIN_ELEMS_PER_BLOCK 4096
/* Most elements of x one block may count: keeps its 32-bit shared counters
 * exact (a bin of one block never exceeds this). */
#define BC_CUDA_MAX_ELEMS_PER_BLOCK 1073741824
/* Shared-memory bins a block always may use, however few its elements. */
#define BC_CUDA_SHARED_MIN_BINS 1024
/* Elements per bin and copy a block needs before it adds a replicated copy
 * of its shared histogram (copies cut contention on hot bins but cost
 * zeroing and merging). */
#define BC_CUDA_COPY_MIN_ELEMS_PER_BIN 8
/* Most replicated copies of the shared histogram in one block. */
#define BC_CUDA_MAX_COPIES 8
/* Shared memory per multiprocessor kept free (bytes) when sizing a block's. */
#define BC_CUDA_SHARED_RESERVE 1024
/* Bins the first pass of the bincount form provides when nothing better is
 * known (no minlength, no earlier call).  Values above it are counted by a
 * second pass once max(x) is known. */
#define BC_CUDA_FIRST_PASS_BINS 4096
/* Most bins the first pass provides from the length of an earlier call. */
#define BC_CUDA_FIRST_PASS_MAX_BINS 1048576
/* A first-pass buffer this many bytes larger than the result is copied to an
 * exact-size array instead of being returned as a view. */
#define BC_CUDA_COMPACT_MIN_BYTES 1048576

/* ---- the scatter-add of rows (cuda_host/scatter_add_launch.h) ---- */
/* Columns of a row one lane keeps running sums for, per column tile. */
#define BC_CUDA_ROWS_TILE 4
/* Fewest increments (elements) a block of the adding kernel is given before
 * more blocks are launched: 4 per thread, so that a call of 1e6 rows of one
 * element fills every multiprocessor (16384 gave 62 blocks on 132 SMs). */
#define BC_CUDA_ROWS_MIN_ELEMS_PER_BLOCK 2048
/* Blocks of the adding kernel that should be resident per multiprocessor
 * (its launch bounds) for outputs of up to 32 bits: ptxas fits them in 40
 * registers without spills at sm_90; 64-bit outputs would spill 16-24 bytes,
 * so theirs ask for no minimum (2 blocks of 52-57 registers). */
#define BC_CUDA_ROWS_BLOCKS_PER_SM 3
/* Work items (index chunks times column tiles) each warp should get, for
 * balance between warps. */
#define BC_CUDA_ROWS_ITEMS_PER_WARP 4
/* Indices one thread of the checking kernel loads at once (its loads in
 * flight), and is given before more blocks are launched. */
#define BC_CUDA_ROWS_CHECK_PER_THREAD 4
/* float32 rows are summed in a float64 scratch the size of the output (native
 * double atomics, then one rounding per element; cuda/scatter_add_kernels.cu)
 * when it takes at most this many bytes ... */
#define BC_CUDA_ROWS_SCRATCH_MAX_BYTES 268435456
/* ... and the output has at most this many rows per index (the scratch is
 * cleared and finished only for the rows that idx names, but it takes the
 * output's size in float64: an update of a few rows of a large table takes
 * the batched compare-and-swap instead). */
#define BC_CUDA_ROWS_SCRATCH_ROWS_PER_INDEX 4
/* The deterministic kernel (cuda/scatter_add_det.cuh): indices each thread
 * takes of a chunk of idx (a chunk is BC_CUDA_THREADS times as many), bytes
 * of the stage of increment rows in shared memory, and the dynamic shared
 * memory of a block: the chunk's matches (8-byte rows, 4-byte positions),
 * the warps' counts (4 bytes each per index a thread takes), the stage. */
#define BC_CUDA_ROWS_DET_PER_THREAD 2
#define BC_CUDA_ROWS_DET_STAGE_BYTES 32768
#define BC_CUDA_ROWS_DET_SHARED_BYTES 45184
/* ... which first sorts the positions of idx by the block that owns their
 * row (its bucket pre-pass, cuda/scatter_add_det_bucket.cuh), so that each
 * block reads its own indices only, when the indices times the column tiles
 * of a row exceed this (cuda/scatter_add_det_defs.h, bc_rows_det_sorted). */
#define BC_CUDA_ROWS_DET_SORT_MIN 32768
/* A block's bucket is hot (a hot row's) when it holds at least this many
 * entries and more than BC_CUDA_ROWS_DET_HOT_SHARE times its share n / owners:
 * its columns are then cut into at most BC_CUDA_ROWS_DET_SLICES slices, each
 * added by a block of its own (cuda/scatter_add_det_bucket.cuh), so that
 * the hot row's increments come through as many multiprocessors. */
#define BC_CUDA_ROWS_DET_HOT_MIN 4096
#define BC_CUDA_ROWS_DET_HOT_SHARE 2
#define BC_CUDA_ROWS_DET_SLICES 8

/* ---- dtype codes (kernel names use the short names) ---- */
#define BC_DT_INT8 0    /* i8 */
#define BC_DT_INT16 1   /* i16 */
#define BC_DT_INT32 2   /* i32 */
#define BC_DT_INT64 3   /* i64 */
#define BC_DT_UINT8 4   /* u8 */
#define BC_DT_UINT16 5  /* u16 */
#define BC_DT_UINT32 6  /* u32 */
#define BC_DT_UINT64 7  /* u64 */
#define BC_DT_FLOAT32 8 /* f32 */
#define BC_DT_FLOAT64 9 /* f64 */

/*
 * Status of one histogram pass, written by the kernel and read by the host
 * (the one device-to-host copy of a call).  It sits right after the bins in
 * the same allocation and starts zeroed.
 */
typedef struct bc_status {
    bc_u64 max_value;   /* largest non-negative value seen (bincount form) */
    bc_u64 bad_pos_inv; /* ~(first refused position), 0 when none */
    bc_u64 bad_value;   /* the value at that position, as 64 bits */
    bc_u32 blocks_done; /* blocks finished, to elect the last one */
    bc_u32 reserved;
} bc_status;

/* Bytes of bc_status (kernels.py checks it against the struct). */
#define BC_CUDA_STATUS_BYTES 32

/*
 * Parameters of a histogram pass, passed by value to the kernel.  Addresses
 * are device pointers as 64-bit integers; every field is 8 bytes except
 * two pairs of 4-byte ones, so the layout is the same in C, C++ and CUDA.
 */
typedef struct bc_hist_params {
    bc_u64 x;           /* const X *: the values (or indices) */
    bc_u64 w;           /* const W *: the weights, 0 when counting */
    bc_u64 out;         /* ACC *: bins [0, hi) of the accumulator */
    bc_u64 status;      /* bc_status * */
    bc_i64 size;        /* elements of x */
    bc_i64 x_stride;    /* stride of x, in elements */
    bc_i64 w_stride;    /* stride of the weights in elements; 0 broadcasts one */
    bc_i64 lo;          /* count only values v with lo <= v < hi ... */
    bc_i64 hi;          /* ... (after the wrap of the scatter form) */
    bc_i64 n;           /* scatter form: the histogram length */
    bc_i64 shared_bins; /* bins [lo, lo + shared_bins) go through shared memory */
    bc_i32 copies;      /* replicated copies of the shared histogram (>= 1) */
    bc_i32 scatter;     /* 1: scatter-add form, 0: bincount form */
    /* Read only by the deterministic kernels' bucket path (0 elsewhere;
     * cuda/bincount_det_defs.h, cuda/bincount_det_bucket.cuh): */
    bc_u64 scratch;     /* its scratch buffer (bc_det_layout) */
    bc_i64 windows;     /* windows of bins of the output */
    bc_i32 stage;       /* BC_DET_STAGE_*: what the launch does */
    bc_i32 tiles;       /* tiles of x (bc_det_tile_values) */
} bc_hist_params;

/* Most inputs of the scalar graph fused into a histogram kernel's weights. */
#define BC_CUDA_FUSED_MAX_ARGS 24

/*
 * The second parameter of a fused histogram kernel (bincount_hist_fused_*,
 * generated by aesara_bincount_core/gpu/fused.py): the inputs of the scalar
 * graph that computes each weight.  Input k is a GPU array whose value at
 * position i is ((const T *)data[k])[i * stride[k]] (stride 0 broadcasts
 * its one element), or a host scalar whose bits are held in the low bytes of
 * data[k] (stride unused).
 */
typedef struct bc_fused_params {
    bc_u64 data[BC_CUDA_FUSED_MAX_ARGS];
    bc_i64 stride[BC_CUDA_FUSED_MAX_ARGS];
} bc_fused_params;

/* Parameters of the conversion from the accumulator to the output dtype. */
typedef struct bc_finish_params {
    bc_u64 src;   /* const ACC * */
    bc_u64 dst;   /* OUT * */
    bc_i64 count; /* elements */
} bc_finish_params;

/*
 * Parameters of the kernels of the scatter-add of rows, passed by value:
 * scatter_rows_check_<idx> (reads idx, n, nrows, idx_stride, status),
 * scatter_rows_add_<idx>_<out> (everything but scratch),
 * scatter_rows_wide_<idx>_f32 (the same, adding into scratch instead of out)
 * and scatter_rows_finish_<idx>_f32 (out, out_row, idx, n, nrows, row_size,
 * idx_stride, scratch, status); the deterministic kernel
 * scatter_rows_det_<idx>_<out> also reads owners, slices, slice_cols,
 * sort_tiles and stage, and its pre-pass's buckets in scratch.  out[row * out_row + j]
 * += inc[i * inc_row + j * inc_elem] for j < row_size, row = idx[i]
 * (wrapped once when negative).  Every field is 8 bytes except the last two.
 */
typedef struct bc_rows_params {
    bc_u64 out;        /* OUT *: the output (or the base, in place) */
    bc_u64 inc;        /* const OUT *: the increments */
    bc_u64 idx;        /* const IDX *: the indices */
    bc_u64 status;     /* bc_status *: the first bad index (check kernel) */
    bc_u64 scratch;    /* double *: the negated sums of float32 rows (0: none) */
    bc_i64 n;          /* indices */
    bc_i64 nrows;      /* rows of the output */
    bc_i64 row_size;   /* elements of a row (the product of the other dimensions) */
    bc_i64 idx_stride; /* stride of idx, in elements */
    bc_i64 out_row;    /* elements between two rows of out */
    bc_i64 inc_row;    /* elements between two rows of inc; 0 broadcasts one row */
    bc_i64 inc_elem;   /* 1, or 0 to broadcast one value along each row */
    bc_i64 chunk;      /* consecutive indices of one work item */
    bc_i64 tiles;      /* column tiles of a row: ceil(row_size / (lanes * BC_CUDA_ROWS_TILE)) */
    bc_i64 items;      /* work items: ceil(n / chunk) * tiles */
    /* Read only by the deterministic kernel (cuda/scatter_add_det_defs.h): */
    bc_i64 owners;     /* 0, or the blocks owning rows whose buckets scratch holds */
    bc_i64 slices;     /* with owners: column slices of a hot bucket (bc_rows_det_slices) */
    bc_i64 slice_cols; /* with owners: columns of each slice but the last */
    bc_i64 sort_tiles; /* tiles of idx of the bucket pre-pass (bc_rows_det_tiles) */
    bc_i32 lanes;      /* lanes of a warp that share one row: min(32, row_size) */
    bc_i32 stage;      /* deterministic kernel: BC_DET_STAGE_* (0: the adds) */
} bc_rows_params;

#endif /* AESARA_BINCOUNT_CUDA_H */
