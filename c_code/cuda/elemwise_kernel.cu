/*
 * cuda/elemwise_kernel.cu -- the template of the GPU elementwise kernels
 * (aesara_bincount_core/gpu/elemwise.py, GpuElemwise).
 *
 * One kernel per elementwise node, Aesara's fused Composite nodes included.
 * The Python side generates a small source that includes cuda/elemwise.cuh,
 * then the scalar ops' support code (aesara_bincount_core/scalar_codegen.py),
 * then defines BC_EW_NAME, BC_EW_NARGS (its number of arguments), the
 * element function
 *
 *     static __device__ void bc_ew_element(const bc_ew_params &p, const long long *off)
 *
 * and the vector function bc_ew_vector (below) from the scalar ops' own C
 * code, and last includes this file.  On its own
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
 *
 * The vector path (BC_EW_VEC > 1, and contiguous == 2: every array
 * contiguous and aligned to min(16, BC_EW_VEC * itemsize) bytes, which the
 * host checks; BC_EW_VEC is 4, or 2 for nodes with many or wide arrays, see
 * BC_EW_VEC_BYTES, or 0 for none): thread t
 * takes the groups of BC_EW_VEC elements t, t + gridDim * blockDim, ...,
 * loads each input's group with 16-byte loads (4 bytes for int8, 8 for
 * int16, two 16-byte loads for 8-byte dtypes; cuda/device_helpers.cuh,
 * vec_load), computes the elements one after the other with the same
 * element code, and stores each output's group the same way; the last
 * n % BC_EW_VEC elements then go through the loop above.  Every element
 * gets the same operations on either path, so the results are the same
 * bits; a thread has BC_EW_VEC elements of each input in flight instead of
 * one.  The generated source defines BC_EW_VEC and, when it is not 0, the
 * vector function
 *
 *     BC_EW_VECTOR_HEAD { BC_EW_VLOAD(k, T) ... BC_EW_VDECL(k, T) ...
 *                         BC_EW_EACH_ELEMENT { element code } BC_EW_VSTORE(k, T) ... }
 *
 * (cuda/elemwise.cuh), its element code reading BC_EW_VIN and writing
 * BC_EW_VOUT.
 */
#include "cuda/elemwise.cuh"

#ifndef BC_EW_NAME
#define BC_EW_NAME bc_elemwise_copy_f64
#define BC_EW_NARGS 2
#define BC_EW_VEC BC_EW_VEC_MAX
static __device__ __forceinline__ void bc_ew_element(const bc_ew_params &p, const long long *off)
{
    BC_EW_OUT(1, npy_float64) = BC_EW_IN(0, npy_float64);
}
BC_EW_VECTOR_HEAD
{
    BC_EW_VLOAD(0, npy_float64)
    BC_EW_VDECL(1, npy_float64)
    BC_EW_EACH_ELEMENT
    {
        BC_EW_VOUT(1, npy_float64) = BC_EW_VIN(0, npy_float64);
    }
    BC_EW_VSTORE(1, npy_float64)
}
#endif

extern "C" __global__ void __launch_bounds__(BC_EW_THREADS) BC_EW_NAME(const bc_ew_params p)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long start = 0;
#if BC_EW_VEC > 1
    if (p.contiguous == 2) {
        const long long groups = p.n / BC_EW_VEC;
        for (long long g = first; g < groups; g += stride)
            bc_ew_vector(p, g * BC_EW_VEC);
        start = groups * BC_EW_VEC;
    }
#endif
    long long off[BC_EW_MAX_ARGS];
    for (long long i = start + first; i < p.n; i += stride) {
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
