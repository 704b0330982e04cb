/*
 * cuda/elemwise.cuh -- the launch parameters of the generated elementwise
 * kernels (aesara_bincount_core/gpu/elemwise.py, kernel template
 * cuda/elemwise_kernel.cu) and the macros their element code reads and
 * writes through.
 *
 * Valid CUDA on its own (NVRTC; C++ under tests/gpu_emu/cuda_emu.h).  Keep each number a plain integer
 * #define on one line: the Python side reads them (sources.header_constants)
 * to lay out the same struct with ctypes.
 */
#ifndef BC_ELEMWISE_CUDA_CUH
#define BC_ELEMWISE_CUDA_CUH

#include "cuda/scalar_preamble.cuh"
#include "cuda/device_helpers.cuh"

/* Most dimensions of an elementwise node (Aesara's arrays may have more:
 * such a node stays on the host). */
#define BC_EW_MAX_DIMS 6
/* Most arguments (inputs and outputs) of one node. */
#define BC_EW_MAX_ARGS 40
/* Threads per block. */
#define BC_EW_THREADS 512
/* Most elements one thread computes per iteration of the vector path (its
 * loads of each array: 16 bytes of 4-byte dtypes, 2 x 16 of 8-byte ones).
 * A generated kernel defines BC_EW_VEC, its own number: the most, 2, or 0
 * (no vector path), so that the elements a thread holds, BC_EW_VEC times
 * the bytes of one element of every array argument, stay within ... */
#define BC_EW_VEC_MAX 4
/* ... this many bytes (64 registers; ptxas spills beyond, at sm_90, for
 * 12 float64 inputs with sin at 4 elements). */
#define BC_EW_VEC_BYTES 256

/* One launch, passed by value.  Argument k (inputs first, then outputs) is
 * an array at data[k], with byte strides strides[k][d] over the dimensions
 * shape[0 .. ndim) (0 along broadcast dimensions), or a host scalar held in
 * the low bytes of scalars[k] (a learning rate, theta).  When contiguous is
 * 1 or 2, element i of argument k is at data[k] + i * step[k] (step is the
 * itemsize, or 0 for an array of one element); 2 also says that every
 * array with a step is aligned to min(16, BC_EW_VEC * itemsize) bytes, so
 * that the vector path may load and store BC_EW_VEC elements at once (the
 * host sets 2 only for a kernel with a vector path). */
struct bc_ew_params {
    long long n;
    int ndim;
    int contiguous;
    int *status; /* first error code reported (BC_SCALAR_FAIL), or NULL */
    long long shape[BC_EW_MAX_DIMS];
    char *data[BC_EW_MAX_ARGS];
    long long step[BC_EW_MAX_ARGS];
    long long strides[BC_EW_MAX_ARGS][BC_EW_MAX_DIMS];
    unsigned long long scalars[BC_EW_MAX_ARGS];
};

/* A kernel's parameters may take 4 KB (before CUDA 12.1). */
static_assert(sizeof(bc_ew_params) <= 4096, "bc_ew_params exceeds the 4 KB of kernel parameters");

/* The element code's view of argument k at the byte offsets `off`. */
#define BC_EW_IN(k, T) (*(const T *)(p.data[k] + off[k]))
#define BC_EW_OUT(k, T) (*(T *)(p.data[k] + off[k]))
#define BC_EW_SCALAR(k, T) (*(const T *)&p.scalars[k])

/* The vector path's view of argument k (see bc_ew_vector in
 * cuda/elemwise_kernel.cu): BC_EW_VEC elements in registers, bc_v<k>,
 * element bc_j of them.  BC_EW_VLOAD declares and loads an input (one
 * element, repeated, when its step is 0), BC_EW_VDECL declares an output,
 * BC_EW_VSTORE stores it. */
#define BC_EW_VIN(k, T) (bc_v##k[bc_j])
#define BC_EW_VOUT(k, T) (bc_v##k[bc_j])
#define BC_EW_VLOAD(k, T)                                                                    \
    T bc_v##k[BC_EW_VEC];                                                                     \
    bc_ew_load<T>(p, k, i, bc_v##k);
#define BC_EW_VDECL(k, T) T bc_v##k[BC_EW_VEC];
#define BC_EW_VSTORE(k, T) bc::vec_store<T, BC_EW_VEC>::store((T *)p.data[k] + i, bc_v##k);
/* The head of the generated vector function and its loop over the elements. */
#define BC_EW_VECTOR_HEAD                                                                     \
    static __device__ __forceinline__ void bc_ew_vector(const bc_ew_params &p, long long i)
#define BC_EW_EACH_ELEMENT _Pragma("unroll") for (int bc_j = 0; bc_j < BC_EW_VEC; bc_j++)

/* Elements i ... i + V - 1 of input k: vector loads (contiguous
 * and aligned, see bc_ew_params), or its one element when its step is 0. */
template <typename T, int V>
static __device__ __forceinline__ void bc_ew_load(const bc_ew_params &p, int k, long long i,
                                                  T (&out)[V])
{
    if (p.step[k] == 0) {
        const T v = *(const T *)p.data[k];
#pragma unroll
        for (int j = 0; j < V; j++)
            out[j] = v;
    } else {
        bc::vec_load<T, V>::load((const T *)p.data[k] + i, out);
    }
}

/* Record the first error code of a launch (the element code's BC_SCALAR_FAIL). */
static __device__ __forceinline__ void bc_ew_fail(const bc_ew_params &p, int code)
{
    if (p.status != 0)
        atomicCAS(p.status, 0, code);
}

#endif /* BC_ELEMWISE_CUDA_CUH */
