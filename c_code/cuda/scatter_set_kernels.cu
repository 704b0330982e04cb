/*
 * cuda/scatter_set_kernels.cu -- the CUDA kernels of the scatter-set of rows,
 * aesara_bincount_core.gpu.scatter_set.GpuScatterSet: out[rows[i]] = values[i]
 * for i in index order, so that with duplicate rows the last one in index
 * order wins, as numpy's assignment out[rows] = values does.  Neighbours:
 * cuda/scatter_add_kernels.cu (the scatter-add of rows, whose check kernel
 * checks the rows before these kernels run), cpu/scatter_set.c (the CPU Op).
 *
 * Compiled at run time with NVRTC (aesara_bincount_core/cuda/nvrtc.py), one
 * module (the rows are int64: the Op converts them once they are checked).
 * Valid CUDA C++17 on its own; the -DBC_X_DTYPE option the kernel layer
 * passes to every module is not used.
 *
 * Kernels (extern "C", one bc_set_params by value, any grid, grid-stride):
 *
 *   scatter_set_last      first kernel: last[r] = 1 + the largest position i
 *                         with rows[i] naming row r (atomicMax on a
 *                         zero-filled int64 scratch of one word per row of
 *                         out), so 0 means "not named".
 *   scatter_set_rows_w<B> second kernel, one per element size B = 1, 2, 4, 8
 *                         bytes: each element j of row i of the values is
 *                         copied into row rows[i] of out only when i is that
 *                         row's last position (last[r] == i + 1): exactly
 *                         one position writes each named row, so the result
 *                         does not depend on the order in which blocks run.
 *                         Elements are copied as unsigned integers of their
 *                         size: -0.0, NaN payloads and bool bytes are kept.
 *
 * The rows have been checked to lie in [-nrows, nrows) before the first
 * kernel is queued; a negative row wraps once.  The values are C-contiguous
 * (n, row_elems); each row of out is C-contiguous, rows out_row_bytes apart.
 * Cost: two passes over rows and one over the values, plus the scratch of
 * 8 * nrows bytes (zero-filled by the caller).  Blocks of BC_CUDA_THREADS
 * threads (cuda/kernel_defs.h, the launch shape of every kernel of the layer).
 */
#include "cuda/kernel_defs.h"

/* The parameters of both kernels (mirrored by ctypes in
 * aesara_bincount_core/gpu/scatter_set.py; the test emulation reads them
 * too). */
typedef struct {
    unsigned long long rows;      /* const long long *, (n,) */
    unsigned long long last;      /* unsigned long long *, (nrows,), zero-filled */
    unsigned long long out;       /* char *, rows out_row_bytes apart */
    unsigned long long values;    /* const char *, C-contiguous (n, row_elems) */
    long long n;                  /* number of rows written */
    long long nrows;              /* rows of out */
    long long row_elems;          /* elements of a row */
    long long out_row_bytes;      /* bytes between rows of out */
} bc_set_params;

/* The row of out that position i names (a negative row wraps once). */
__device__ __forceinline__ long long bc_set_row(const bc_set_params &p, long long i)
{
    const long long r = ((const long long *)p.rows)[i];
    return r < 0 ? r + p.nrows : r;
}

extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)
    scatter_set_last(const bc_set_params p)
{
    unsigned long long *last = (unsigned long long *)p.last;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += step)
        atomicMax(last + bc_set_row(p, i), (unsigned long long)(i + 1));
}

template <typename T>
__device__ __forceinline__ void bc_set_rows(const bc_set_params &p)
{
    const unsigned long long *last = (const unsigned long long *)p.last;
    const T *values = (const T *)p.values;
    const long long total = p.n * p.row_elems;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        const long long i = e / p.row_elems, j = e - i * p.row_elems;
        const long long r = bc_set_row(p, i);
        if (last[r] == (unsigned long long)(i + 1))
            ((T *)((char *)p.out + r * p.out_row_bytes))[j] = values[e];
    }
}

extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)
    scatter_set_rows_w1(const bc_set_params p)
{
    bc_set_rows<unsigned char>(p);
}

extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)
    scatter_set_rows_w2(const bc_set_params p)
{
    bc_set_rows<unsigned short>(p);
}

extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)
    scatter_set_rows_w4(const bc_set_params p)
{
    bc_set_rows<unsigned int>(p);
}

extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)
    scatter_set_rows_w8(const bc_set_params p)
{
    bc_set_rows<unsigned long long>(p);
}
