/*
 * cuda/call_check_kernels.cu -- the index check of a call on the GPU, written
 * into the call's status: aesara_bincount_core/gpu/index_check.py
 * (check_indices), which the gather, the scatter-add and scatter-set of rows,
 * LinearIndex, the cross-entropy's classes and advanced indexing use.  The
 * status is a GPU int64 array that the call makes zeroed and reads once, at
 * its end (aesara_bincount_core/gpu/call_status.py: its layout); its first
 * 32 bytes are a bc_status (cuda/kernel_defs.h), whose bad_pos_inv word the
 * adding kernels of the scatter-add of rows read (cuda/scatter_add_kernels.cu).
 *
 * Compiled at run time with NVRTC (aesara_bincount_core/cuda/nvrtc.py), one
 * module with every index dtype (the "check" family of
 * aesara_bincount_core/cuda/sources.py).  Valid CUDA C++17 on its own; the
 * -DBC_X_DTYPE option the kernel layer passes to every module is not used.
 *
 * Kernels (extern "C", one bc_check_params by value; <ix> is i8 ... u64):
 *
 *   call_check_<ix>         grid-stride over the n indices: rows[i] is index
 *                           i as a row in [0, len) (a negative one wrapped
 *                           once when wrap is set), or 0 when it is out of
 *                           range ([-len, len) with wrap, [0, len) without;
 *                           an unsigned one is taken at its value), and the
 *                           first bad position is kept in the status (word
 *                           BC_CHECK_FIRST, as ~position, with atomicMax).
 *   call_check_record_<ix>  one thread (launch one block): when this check
 *                           found a bad index and no check of the call
 *                           failed before, it writes the failure (code,
 *                           position, value, len, extra) and marks the call
 *                           failed (bad_pos_inv set).
 *
 * No wait: the host reads the status when the call ends.  A replaced index
 * reads row 0, so the work that follows stays in bounds.  Blocks of
 * BC_CUDA_THREADS threads (cuda/kernel_defs.h).
 */
#include "cuda/kernel_defs.h"

/* Words of the call's status (mirrored by aesara_bincount_core/gpu/call_status.py). */
#define BC_CHECK_FLAG 1    /* bc_status.bad_pos_inv: not 0 once a check of the call failed */
#define BC_CHECK_RECORD 4  /* code, position, value, len, extra, 0 */
#define BC_CHECK_FIRST 10  /* ~(first bad position) of the check that runs, 0 when none */

/* The parameters of both kernels (mirrored by ctypes in
 * aesara_bincount_core/gpu/index_check.py; the test emulation reads them too). */
typedef struct {
    unsigned long long idx;    /* const I *: n indices, idx_stride elements apart */
    unsigned long long rows;   /* long long *, (n,): the checked rows */
    unsigned long long status; /* long long *: the call's status */
    long long n;
    long long idx_stride;      /* elements between two indices */
    long long len;             /* the length indexed */
    long long wrap;            /* 1: [-len, len), negative indices wrapped once; 0: [0, len) */
    long long code;            /* the failure's code in the message table */
    long long extra;           /* one more number recorded (an axis) */
} bc_check_params;

template <typename I> struct bc_check_signed { enum { value = I(-1) < I(0) }; };

template <typename I> __device__ __forceinline__ void bc_call_check(const bc_check_params &p)
{
    const I *idx = (const I *)p.idx;
    long long *rows = (long long *)p.rows;
    unsigned long long *first = (unsigned long long *)p.status + BC_CHECK_FIRST;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += step) {
        const I v = idx[i * p.idx_stride];
        long long r;
        bool bad;
        if (bc_check_signed<I>::value) {
            r = (long long)v;
            bad = r >= p.len || r < (p.wrap ? -p.len : 0);
            if (r < 0)
                r += p.len;
        } else {
            bad = (unsigned long long)v >= (unsigned long long)p.len;
            r = (long long)v;
        }
        rows[i] = bad ? 0 : r;
        if (bad)
            atomicMax(first, ~(unsigned long long)i);
    }
}

template <typename I> __device__ __forceinline__ void bc_call_check_record(const bc_check_params &p)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    volatile long long *status = (volatile long long *)p.status;
    const unsigned long long first = (unsigned long long)status[BC_CHECK_FIRST];
    if (first == 0 || status[BC_CHECK_FLAG] != 0)
        return;
    const long long pos = (long long)~first;
    const I v = ((const I *)p.idx)[pos * p.idx_stride];
    status[BC_CHECK_RECORD] = p.code;
    status[BC_CHECK_RECORD + 1] = pos;
    status[BC_CHECK_RECORD + 2] = bc_check_signed<I>::value ? (long long)v
                                                             : (long long)(unsigned long long)v;
    status[BC_CHECK_RECORD + 3] = p.len;
    status[BC_CHECK_RECORD + 4] = p.extra;
    status[BC_CHECK_RECORD + 5] = 0;
    __threadfence();
    status[BC_CHECK_FLAG] = 1;
}

#define BC_CALL_CHECK(SHORT, T)                                                                \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        call_check_##SHORT(const bc_check_params p)                                            \
    {                                                                                          \
        bc_call_check<T>(p);                                                                   \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        call_check_record_##SHORT(const bc_check_params p)                                     \
    {                                                                                          \
        bc_call_check_record<T>(p);                                                            \
    }

BC_CALL_CHECK(i8, signed char)
BC_CALL_CHECK(i16, short)
BC_CALL_CHECK(i32, int)
BC_CALL_CHECK(i64, long long)
BC_CALL_CHECK(u8, unsigned char)
BC_CALL_CHECK(u16, unsigned short)
BC_CALL_CHECK(u32, unsigned int)
BC_CALL_CHECK(u64, unsigned long long)

#undef BC_CALL_CHECK
