/*
 * elemwise_cuda.cuh -- the launch parameters of the generated elementwise
 * kernels (aesara_bincount_core/gpu/elemwise.py, kernel template
 * elemwise_cuda_kernel.cu) and the macros their element code reads and
 * writes through.
 *
 * Valid CUDA on its own (NVRTC; C++ under tests/gpu_emu/cuda_emu.h).  Keep each number a plain integer
 * #define on one line: the Python side reads them (sources.header_constants)
 * to lay out the same struct with ctypes.
 */
#ifndef BC_ELEMWISE_CUDA_CUH
#define BC_ELEMWISE_CUDA_CUH

#include "scalar_cuda_preamble.cuh"

/* Most dimensions of an elementwise node (Aesara's arrays may have more:
 * such a node stays on the host). */
#define BC_EW_MAX_DIMS 6
/* Most arguments (inputs and outputs) of one node. */
#define BC_EW_MAX_ARGS 40
/* Threads per block. */
#define BC_EW_THREADS 512

/* One launch, passed by value.  Argument k (inputs first, then outputs) is
 * an array at data[k], with byte strides strides[k][d] over the dimensions
 * shape[0 .. ndim) (0 along broadcast dimensions), or a host scalar held in
 * the low bytes of scalars[k] (a learning rate, theta).  When contiguous is
 * set, element i of argument k is at data[k] + i * step[k] (step is the
 * itemsize, or 0 for an array of one element). */
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

/* Record the first error code of a launch (the element code's BC_SCALAR_FAIL). */
static __device__ __forceinline__ void bc_ew_fail(const bc_ew_params &p, int code)
{
    if (p.status != 0)
        atomicCAS(p.status, 0, code);
}

#endif /* BC_ELEMWISE_CUDA_CUH */
