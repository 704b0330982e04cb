/*
 * elemwise_cuda_kernel.cu -- the template of the GPU elementwise kernels
 * (aesara_bincount_core/gpu/elemwise.py, GpuElemwise).
 *
 * One kernel per elementwise node, Aesara's fused Composite nodes included.
 * The Python side generates a small source that includes elemwise_cuda.cuh,
 * then the scalar ops' support code (aesara_bincount_core/scalar_codegen.py),
 * then defines BC_EW_NAME, BC_EW_NARGS (its number of arguments) and the
 * element function
 *
 *     static __device__ void bc_ew_element(const bc_ew_params &p, const long long *off)
 *
 * from the scalar ops' own C code, and last includes this file.  On its own
 * (no BC_EW_NAME) this file defines a default: bc_elemwise_copy_f64, which
 * copies one float64 argument into another, so that it compiles and can be
 * tested by itself.  The approach is that of Theano's GPU backends (the old
 * CUDA backend's per-node kernels, theano/sandbox/cuda/elemwise.py, and
 * GpuElemwise, theano/gpuarray/elemwise.py): the scalar C code inlined in a
 * grid-stride loop, broadcasting as a zero stride, a path of its own for
 * contiguous arguments.
 *
 * Each thread takes elements i, i + gridDim * blockDim, ...  Contiguous
 * arguments (or arrays of one element) are addressed as data + i * step;
 * others by splitting i into coordinates over shape[], last dimension
 * fastest (C order, the order of the output, which GpuElemwise allocates
 * C-contiguous), and summing coordinate * stride.  Offsets are 64-bit.
 * Host scalars are read from the kernel's parameters, never copied to the
 * device.  An error the scalar code reports (integer division by zero) is
 * written, first one only, to *status when status is not NULL; GpuElemwise
 * only takes nodes whose code cannot report one (a constant divisor).
 */
#include "elemwise_cuda.cuh"

#ifndef BC_EW_NAME
#define BC_EW_NAME bc_elemwise_copy_f64
#define BC_EW_NARGS 2
static __device__ __forceinline__ void bc_ew_element(const bc_ew_params &p, const long long *off)
{
    BC_EW_OUT(1, npy_float64) = BC_EW_IN(0, npy_float64);
}
#endif

extern "C" __global__ void __launch_bounds__(BC_EW_THREADS) BC_EW_NAME(const bc_ew_params p)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long off[BC_EW_MAX_ARGS];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        if (p.contiguous) {
            for (int k = 0; k < BC_EW_NARGS; k++)
                off[k] = i * p.step[k];
        } else {
            for (int k = 0; k < BC_EW_NARGS; k++)
                off[k] = 0;
            long long rest = i;
            for (int d = p.ndim - 1; d >= 0; d--) {
                const long long c = rest % p.shape[d];
                rest /= p.shape[d];
                for (int k = 0; k < BC_EW_NARGS; k++)
                    off[k] += c * p.strides[k][d];
            }
        }
        bc_ew_element(p, off);
    }
}
