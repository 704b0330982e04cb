/*
 * cuda/bincount_kernels.cu -- the histogram kernels of
 * aesara_bincount.GpuBincount (one pass over x into a privatized
 * histogram) and the conversion of their accumulator to the output dtype.
 * Neighbours: cuda/bincount_hist.cuh (the templates of a pass, which these
 * kernels instantiate), cuda/device_helpers.cuh (device helpers shared with
 * the rows kernels), cuda/kernel_defs.h (the parameter structs and tuning numbers,
 * shared with the host), cuda/scatter_add_kernels.cu (the scatter-add of
 * rows, GpuScatterAdd's kernels), cuda_host/bincount_launch.h (the launcher).
 *
 * Compiled at run time with NVRTC (aesara_bincount_core/cuda/nvrtc.py), the
 * headers given by name.  Valid CUDA C++17 on its own: with no -D option it
 * instantiates every kernel; -DBC_X_DTYPE=<code> (a BC_DT_* code of
 * cuda/kernel_defs.h) keeps only those for one dtype of x, which is how the
 * kernel layer compiles it, one module per dtype of x.
 *
 * Kernels (extern "C", one bc_hist_params or bc_finish_params by value):
 *
 *   bincount_hist_<x>_<inc>   one pass over x: for each element, its bin
 *                             (the value itself; in the scatter-add form a
 *                             negative index wraps once) is checked, and when
 *                             it lies in the window [lo, hi) the increment is
 *                             added to out[bin].  <x> names the dtype of x
 *                             (i8 ... u64); <inc> is c32 / c64 for a count in
 *                             32- / 64-bit unsigned integers, or the dtype of
 *                             the weights (i8 ... u64, f32, f64).
 *   BC_FUSED_NAME             (only in a generated source, which defines it:
 *                             aesara_bincount_core/gpu/fused.py) the pass of
 *                             one dtype of x and one increment kind whose
 *                             weights (BC_FUSED_FW 1), x (BC_FUSED_FX 1) or
 *                             both are computed inline, from a second
 *                             parameter bc_fused_params, by the generated
 *                             device functions bc_fused_weight(f, pos) and
 *                             bc_fused_x(f, pos) (the scalar ops' own code):
 *                             no array of them is read or written.  Then
 *                             only this histogram kernel is instantiated,
 *                             with the finish kernels.  The inputs of a
 *                             computed x or weights are read with vector
 *                             loads when aligned (bc_fused_x_vec,
 *                             bc_fused_weight_vec), and the value at a
 *                             refused position is computed again.
 *   bincount_hist_det_<x>_<w> the deterministic kernel of float weights (w:
 *                             f32, f64): a window pass (cuda/bincount_det.cuh,
 *                             the window's bins summed per warp and per
 *                             block, in a fixed order, into partial
 *                             histograms, no float atomics) or a stage of
 *                             the bucket path (cuda/bincount_det_bucket.cuh),
 *                             as its parameters' `stage` says.
 *                             A generated source that defines BC_FUSED_DET
 *                             makes its BC_FUSED_NAME this pass.
 *   bincount_det_finish_<out> the blocks' partial histograms summed in block
 *                             order into the output (f32, f64), or the
 *                             bucket path's chunks' in chunk order.
 *   bincount_finish_<acc>_<out>  out[i] = (out dtype) acc[i]: u32_u8, u32_u16
 *                             (the low bits: 8- and 16-bit integer outputs
 *                             wrap), u64_f32, u64_f64 (counts to floats),
 *                             f64_f32 (float32 weights, summed in float64).
 *
 * The templates these kernels instantiate, and the algorithm of a pass, are
 * in cuda/bincount_hist.cuh.
 */
#include "cuda/bincount_det_bucket.cuh"

/* ---- extern "C" kernels ---- */

/* The types of each increment kind (the <inc> of a kernel name): weights,
 * shared-memory bin, global bin, weighted. */
#define BC_INC_c32 bc_u32, bc_u32, bc_u32, false
#define BC_INC_c64 bc_u64, bc_u32, bc_u64, false
#define BC_INC_i8 signed char, bc_u32, bc_u32, true
#define BC_INC_i16 short, bc_u32, bc_u32, true
#define BC_INC_i32 int, bc_u32, bc_u32, true
#define BC_INC_i64 long long, bc_u64, bc_u64, true
#define BC_INC_u8 unsigned char, bc_u32, bc_u32, true
#define BC_INC_u16 unsigned short, bc_u32, bc_u32, true
#define BC_INC_u32 unsigned int, bc_u32, bc_u32, true
#define BC_INC_u64 unsigned long long, bc_u64, bc_u64, true
#define BC_INC_f32 float, float, double, true
#define BC_INC_f64 double, double, double, true
/* Expand a row of BC_INC_* into the arguments of its consumer. */
#define BC_EXPAND(M, ...) M(__VA_ARGS__)

#define BC_HIST_TYPES(NAME, XT, WT, SHT, ACCT, WEIGHTED)                                      \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS, BC_CUDA_BLOCKS_PER_SM)      \
        NAME(const bc_hist_params p)                                                          \
    {                                                                                         \
        bc::hist<XT, WT, SHT, ACCT, WEIGHTED, false, false>(p, 0);                            \
    }
#define BC_HIST(XN, XT, IN) BC_EXPAND(BC_HIST_TYPES, bincount_hist_##XN##_##IN, XT, BC_INC_##IN)

#ifdef BC_FUSED_DET
/* The deterministic pass (float weights): one block per multiprocessor. */
#define BC_FUSED_TYPES(NAME, XT, WT, SHT, ACCT, WEIGHTED)                                     \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS, 1)                          \
        NAME(const bc_hist_params p, const bc_fused_params f)                                 \
    {                                                                                         \
        bc::det_pass<XT, WT, BC_FUSED_FW != 0, BC_FUSED_FX != 0>(p, &f);                      \
    }
#else
#define BC_FUSED_TYPES(NAME, XT, WT, SHT, ACCT, WEIGHTED)                                     \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS, BC_CUDA_BLOCKS_PER_SM)      \
        NAME(const bc_hist_params p, const bc_fused_params f)                                 \
    {                                                                                         \
        bc::hist<XT, WT, SHT, ACCT, WEIGHTED, BC_FUSED_FW != 0, BC_FUSED_FX != 0>(p, &f);     \
    }
#endif

/* The deterministic kernel of float weights (cuda/bincount_det_bucket.cuh). */
#define BC_DET(XN, XT, WN, WT)                                                                \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS, 1)                          \
        bincount_hist_det_##XN##_##WN(const bc_hist_params p)                                 \
    {                                                                                         \
        bc::det_pass<XT, WT, false, false>(p, 0);                                             \
    }

/* Every increment kind for one dtype of x: counts, then each weights dtype. */
#define BC_HIST_FOR_X(XN, XT)                                                                 \
    BC_HIST(XN, XT, c32)                                                                      \
    BC_HIST(XN, XT, c64)                                                                      \
    BC_HIST(XN, XT, i8)                                                                       \
    BC_HIST(XN, XT, i16)                                                                      \
    BC_HIST(XN, XT, i32)                                                                      \
    BC_HIST(XN, XT, i64)                                                                      \
    BC_HIST(XN, XT, u8)                                                                       \
    BC_HIST(XN, XT, u16)                                                                      \
    BC_HIST(XN, XT, u32)                                                                      \
    BC_HIST(XN, XT, u64)                                                                      \
    BC_HIST(XN, XT, f32)                                                                      \
    BC_HIST(XN, XT, f64)                                                                      \
    BC_DET(XN, XT, f32, float)                                                                \
    BC_DET(XN, XT, f64, double)

#ifdef BC_FUSED_NAME
/* A generated source: its one fused kernel (BC_FUSED_X: the short name of
 * the dtype of x; BC_FUSED_INC: the increment kind, c32 / c64 or a weights
 * dtype). */
#define BC_XT_i8 signed char
#define BC_XT_i16 short
#define BC_XT_i32 int
#define BC_XT_i64 long long
#define BC_XT_u8 unsigned char
#define BC_XT_u16 unsigned short
#define BC_XT_u32 unsigned int
#define BC_XT_u64 unsigned long long
#define BC_FUSED_PASTE(A, B) A##B
#define BC_FUSED_CAT(A, B) BC_FUSED_PASTE(A, B)
BC_EXPAND(BC_FUSED_TYPES, BC_FUSED_NAME, BC_FUSED_CAT(BC_XT_, BC_FUSED_X),
          BC_FUSED_CAT(BC_INC_, BC_FUSED_INC))
#undef BC_FUSED_PASTE
#undef BC_FUSED_CAT
#else
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT8
BC_HIST_FOR_X(i8, signed char)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT16
BC_HIST_FOR_X(i16, short)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT32
BC_HIST_FOR_X(i32, int)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT64
BC_HIST_FOR_X(i64, long long)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT8
BC_HIST_FOR_X(u8, unsigned char)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT16
BC_HIST_FOR_X(u16, unsigned short)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT32
BC_HIST_FOR_X(u32, unsigned int)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT64
BC_HIST_FOR_X(u64, unsigned long long)
#endif
#endif /* BC_FUSED_NAME */

#define BC_FINISH(AN, AT, ON, OT)                                                             \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        bincount_finish_##AN##_##ON(const bc_finish_params p)                                 \
    {                                                                                         \
        bc::finish<AT, OT>(p);                                                                \
    }

BC_FINISH(u32, bc_u32, u8, unsigned char)
BC_FINISH(u32, bc_u32, u16, unsigned short)
BC_FINISH(u64, bc_u64, f32, float)
BC_FINISH(u64, bc_u64, f64, double)
BC_FINISH(f64, double, f32, float)

#define BC_DET_FINISH(ON, OT)                                                                 \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        bincount_det_finish_##ON(const bc_det_finish_params p)                                \
    {                                                                                         \
        bc::det_finish<OT>(p);                                                                \
    }

BC_DET_FINISH(f32, float)
BC_DET_FINISH(f64, double)

#undef BC_HIST
#undef BC_HIST_TYPES
#undef BC_FUSED_TYPES
#undef BC_HIST_FOR_X
#undef BC_FINISH
#undef BC_DET
#undef BC_DET_FINISH
#undef BC_EXPAND
#undef BC_INC_c32
#undef BC_INC_c64
#undef BC_INC_i8
#undef BC_INC_i16
#undef BC_INC_i32
#undef BC_INC_i64
#undef BC_INC_u8
#undef BC_INC_u16
#undef BC_INC_u32
#undef BC_INC_u64
#undef BC_INC_f32
#undef BC_INC_f64
