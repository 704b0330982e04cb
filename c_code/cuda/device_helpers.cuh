/*
 * cuda/device_helpers.cuh -- device helpers shared by the CUDA kernels of
 * aesara_bincount: the histogram kernels (cuda/bincount_kernels.cu, of
 * GpuBincount) and the scatter-add of rows (cuda/scatter_add_kernels.cu, of
 * GpuScatterAdd).  The plain-C definitions both share with the host (the
 * parameter structs, the status record, the tuning numbers) are in
 * cuda/kernel_defs.h, which this header includes.
 *
 * Holds: dtype traits (signed or not), the block's dynamic shared memory
 * (dynamic_shared), the value of an index as 64 bits,
 * streaming vector loads and write-back vector stores of up to 16 bytes
 * (also those of GpuElemwise's kernels, cuda/elemwise.cuh), the vector
 * loads of a fused kernel's inputs and the glue of its generated vector
 * functions, warp reductions, the add to
 * global memory that keeps float32 subnormals (global_add), and the adds to
 * shared memory (shared_add: native 32-bit atomics, with carry for 64-bit
 * integers; float and double, which the hardware runs as compare-and-swap
 * spins, after summing equal keys within the warp's converged lanes).
 *
 * Valid CUDA C++17 on its own (NVRTC; no C standard headers).  Every kernel
 * file includes it through NVRTC's headers argument
 * (aesara_bincount_core/cuda/sources.py); the CPU emulation of the
 * test-suite (tests/gpu_emu) includes it after its own intrinsics.
 *
 * Subnormals: the global float32 atomic add (atom.global.add.f32) flushes
 * subnormal inputs and results to zero, so float32 adds to global memory go
 * through a compare-and-swap loop (global_add<float>); shared-memory float
 * atomics and double atomics keep subnormals (NVIDIA developer forum,
 * "atomicAdd(float) does not add very small values", 2013, confirmed by
 * experiment there).  The modules are compiled without -ftz (NVRTC's
 * default), so the loop's addition keeps them.
 */
#ifndef AESARA_BINCOUNT_CUDA_DEVICE_CUH
#define AESARA_BINCOUNT_CUDA_DEVICE_CUH

#include "cuda/kernel_defs.h"

namespace bc {

/* ---- dtypes ---- */
template <bool S> struct sign_tag {
};

template <typename T> struct traits;
#define BC_TRAITS(T, SIGNED)                                                                  \
    template <> struct traits<T> {                                                            \
        typedef sign_tag<SIGNED> sign;                                                        \
    };
BC_TRAITS(signed char, true)
BC_TRAITS(short, true)
BC_TRAITS(int, true)
BC_TRAITS(long long, true)
BC_TRAITS(unsigned char, false)
BC_TRAITS(unsigned short, false)
BC_TRAITS(unsigned int, false)
BC_TRAITS(unsigned long long, false)
#undef BC_TRAITS

inline constexpr bc_u64 NO_POSITION = ~0ull;
inline constexpr unsigned FULL_WARP = 0xffffffffu;

#ifndef BC_DYNAMIC_SHARED
/* The block's dynamic shared memory (a hook, so that a CPU emulation used by
 * the test-suite can supply its own). */
__device__ __forceinline__ bc_u64 *dynamic_shared()
{
    extern __shared__ bc_u64 bc_dynamic_shared_memory[];
    return bc_dynamic_shared_memory;
}
#endif

/* A value of x as 64 bits: sign-extended when signed. */
template <typename X> __device__ __forceinline__ bc_u64 as_u64(X v, sign_tag<true>)
{
    return (bc_u64)(bc_i64)v;
}
template <typename X> __device__ __forceinline__ bc_u64 as_u64(X v, sign_tag<false>)
{
    return (bc_u64)v;
}

/* ---- loads ---- */

/* The word that loads B bytes at once, for B = 2, 4, 8 or 16. */
template <int B> struct word;
template <> struct word<2> {
    typedef unsigned short type;
};
template <> struct word<4> {
    typedef unsigned int type;
};
template <> struct word<8> {
    typedef uint2 type;
};
template <> struct word<16> {
    typedef uint4 type;
};

/* Load V contiguous elements of T with streaming loads of up to 16 bytes;
 * p must be aligned to min(16, V * sizeof(T)) bytes. */
template <typename T, int V> struct vec_load {
    enum { BYTES = V * (int)sizeof(T), WORD = BYTES < 16 ? BYTES : 16, WORDS = BYTES / WORD };
    typedef typename word<WORD>::type word_t;
    union chunk {
        word_t w[WORDS];
        T v[V];
    };
    static __device__ __forceinline__ void load(const T *p, T (&out)[V])
    {
        chunk c;
        const word_t *q = reinterpret_cast<const word_t *>(p);
#pragma unroll
        for (int i = 0; i < WORDS; i++)
            c.w[i] = __ldcs(q + i);
#pragma unroll
        for (int k = 0; k < V; k++)
            out[k] = c.v[k];
    }
};

/* Store V contiguous elements of T with stores of up to 16 bytes (__stwb:
 * the default write-back policy, so that the next kernel finds them in L2);
 * p must be aligned to min(16, V * sizeof(T)) bytes. */
template <typename T, int V> struct vec_store {
    typedef vec_load<T, V> layout;
    static __device__ __forceinline__ void store(T *p, const T (&in)[V])
    {
        typename layout::chunk c;
#pragma unroll
        for (int k = 0; k < V; k++)
            c.v[k] = in[k];
        typename layout::word_t *q = reinterpret_cast<typename layout::word_t *>(p);
#pragma unroll
        for (int i = 0; i < layout::WORDS; i++)
            __stwb(q + i, c.w[i]);
    }
};

/* ---- the inputs of a fused histogram kernel (bc_fused_params) ---- */

/* Whether input k (an array of T) may be loaded V elements at a time from
 * position pos: broadcast (stride 0), or contiguous with element pos on a
 * multiple of min(16, V * sizeof(T)) bytes (vec_load). */
template <typename T>
__device__ __forceinline__ bool fused_aligned(const bc_fused_params &f, int k, bc_i64 pos, int V)
{
    const bc_u64 a = V * sizeof(T) < 16 ? V * sizeof(T) : 16;
    return f.stride[k] == 0 || (f.stride[k] == 1 && (f.data[k] + (bc_u64)pos * sizeof(T)) % a == 0);
}
/* The first position at which contiguous input k (an array of T, aligned to
 * its elements) starts a vector of V elements. */
template <typename T> __device__ __forceinline__ bc_i64 fused_head(const bc_fused_params &f, int k, int V)
{
    const bc_u64 a = V * sizeof(T) < 16 ? V * sizeof(T) : 16;
    return (bc_i64)(((a - f.data[k] % a) % a) / sizeof(T));
}
/* Elements pos ... pos + V - 1 of input k (fused_aligned): its one element
 * repeated when broadcast, else vector loads. */
template <typename T, int V>
__device__ __forceinline__ void fused_load(const bc_fused_params &f, int k, bc_i64 pos, T (&out)[V])
{
    if (f.stride[k] == 0) {
        const T v = *reinterpret_cast<const T *>(f.data[k]);
#pragma unroll
        for (int j = 0; j < V; j++)
            out[j] = v;
    } else {
        vec_load<T, V>::load(reinterpret_cast<const T *>(f.data[k]) + pos, out);
    }
}

/* The glue of the generated vector functions of a fused kernel
 * (aesara_bincount_core/gpu/fused.py), for a scalar graph of output type R:
 *
 *   BC_FUSED_VECTOR(name) { BC_FUSED_VLOAD(k, T) ...
 *       BC_FUSED_EACH_ELEMENT { R bc_r; element code; bc_out[bc_j] = (O)bc_r; } }
 *       -- the values at pos ... pos + V - 1, the graph's code run on each,
 *          its array inputs read as BC_FUSED_VIN(k, T);
 *   BC_FUSED_VECTOR_OK(name) { return BC_FUSED_ALIGNED(k, T) && ... true; }
 *       -- whether every array input may be loaded so from pos;
 *   BC_FUSED_VECTOR_HEAD(name) { BC_FUSED_HEAD(k, T) ... return 0; }
 *       -- fused_head of the first contiguous array input, 0 when none. */
#define BC_FUSED_VECTOR(NAME)                                                                  \
    template <int V, typename O>                                                              \
    __device__ __forceinline__ void NAME(const bc_fused_params &f, bc_i64 pos, O(&bc_out)[V])
#define BC_FUSED_VLOAD(k, T)                                                                  \
    T bc_v##k[V];                                                                             \
    bc::fused_load<T, V>(f, k, pos, bc_v##k);
#define BC_FUSED_VIN(k, T) (bc_v##k[bc_j])
#define BC_FUSED_EACH_ELEMENT _Pragma("unroll") for (int bc_j = 0; bc_j < V; bc_j++)
#define BC_FUSED_VECTOR_OK(NAME)                                                              \
    __device__ __forceinline__ bool NAME(const bc_fused_params &f, bc_i64 pos, int V)
#define BC_FUSED_ALIGNED(k, T) bc::fused_aligned<T>(f, k, pos, V)
#define BC_FUSED_VECTOR_HEAD(NAME)                                                            \
    __device__ __forceinline__ bc_i64 NAME(const bc_fused_params &f, int V)
#define BC_FUSED_HEAD(k, T)                                                                   \
    if (f.stride[k] == 1)                                                                     \
        return bc::fused_head<T>(f, k, V);

/* ---- warp reductions (every lane of the warp must call them) ---- */
template <typename T> __device__ __forceinline__ T warp_sum(T v)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_xor_sync(FULL_WARP, v, d);
    return v;
}
/* The largest (MAX) or smallest value of v across the warp. */
template <bool MAX> __device__ __forceinline__ bc_u64 warp_extreme(bc_u64 v)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        const bc_u64 o = __shfl_xor_sync(FULL_WARP, v, d);
        v = (MAX ? o > v : o < v) ? o : v;
    }
    return v;
}

/* ---- adds to the global accumulator ---- */

/* Add v to *p in global memory, atomically. */
template <typename T> __device__ __forceinline__ void global_add(T *p, T v)
{
    atomicAdd(p, v);
}
/* float: compare-and-swap on the bits, so that subnormals are kept (the
 * comparison is on bits, so a NaN bin does not loop forever). */
template <> __device__ __forceinline__ void global_add<float>(float *p, float v)
{
    unsigned int *word = reinterpret_cast<unsigned int *>(p);
    unsigned int seen = *word, before;
    do {
        before = seen;
        seen = atomicCAS(word, before, __float_as_uint(__uint_as_float(before) + v));
    } while (seen != before);
}

/* ---- adds to shared memory ---- */

/*
 * The sum of v over the lanes of `peers` (lanes of `active` that hold the
 * same key as this one, this lane included), on the lowest lane of peers;
 * the other lanes get partial sums.  Every lane of `active` calls it (each
 * with its own peers).  A tree over each group's ranks, all groups at once:
 * in round r the lanes of rank 2^r * (2j) add the partial sum of the next
 * lane of their group still left, then the lanes of odd rank (in units of
 * 2^r) leave; ceil(log2(largest group)) rounds, none when every key
 * differs.  (The algorithm of E. Westphal, "Voting and Shuffling to Optimize
 * Atomic Operations", NVIDIA Developer Blog, 2015.)
 */
template <typename T> __device__ __forceinline__ T peer_sum(unsigned active, unsigned peers, T v)
{
    const unsigned lane = threadIdx.x & 31u;
    unsigned rank = (unsigned)__popc(peers & ((1u << lane) - 1u));
    unsigned above = peers & ~((2u << lane) - 1u); /* the peers above this lane */
    while (__any_sync(active, above != 0u)) {
        const int next = __ffs((int)above); /* 1 + the next lane left, 0 when none */
        const T t = __shfl_sync(active, v, next != 0 ? next - 1 : (int)lane);
        if (next != 0)
            v += t;
        above &= ~__ballot_sync(active, rank & 1u);
        rank >>= 1;
    }
    return v;
}

/* Add v to *p in shared memory, atomically; `key` names p's bin (the same
 * key for the same p).  32-bit integers: the native atomic. */
template <typename T> struct shared_adder {
    static __device__ __forceinline__ void add(T *p, T v, unsigned) { atomicAdd(p, v); }
};
/* 64-bit integers: two native 32-bit adds, the low word's carry added to the
 * high one (the hardware spins on a 64-bit compare-and-swap otherwise).  The
 * two words are not updated together, so the value is whole only once every
 * add is done (after the barrier that precedes the merge). */
template <> struct shared_adder<bc_u64> {
    static __device__ __forceinline__ void add(bc_u64 *p, bc_u64 v, unsigned)
    {
        unsigned int *word = reinterpret_cast<unsigned int *>(p); /* little-endian */
        const unsigned int lo = (unsigned int)v;
        const unsigned int old = atomicAdd(word, lo);
        const unsigned int hi = (unsigned int)(v >> 32) + (old + lo < old ? 1u : 0u);
        if (hi != 0u)
            atomicAdd(word + 1, hi);
    }
};
/* float and double: compare-and-swap spins in hardware, so the lanes that
 * arrive together with the same key first sum their values (peer_sum) and
 * the lowest of them adds the sum: one spin per bin and warp step instead
 * of one per lane on a hot bin. */
template <typename T> struct shared_float_adder {
    static __device__ __forceinline__ void add(T *p, T v, unsigned key)
    {
        const unsigned active = __activemask();
        const unsigned peers = __match_any_sync(active, key);
        v = peer_sum(active, peers, v);
        if ((peers & ((1u << (threadIdx.x & 31u)) - 1u)) == 0u)
            atomicAdd(p, v);
    }
};
template <> struct shared_adder<float> : shared_float_adder<float> {
};
template <> struct shared_adder<double> : shared_float_adder<double> {
};

template <typename T> __device__ __forceinline__ void shared_add(T *p, T v, unsigned key)
{
    shared_adder<T>::add(p, v, key);
}

} /* namespace bc */

#endif /* AESARA_BINCOUNT_CUDA_DEVICE_CUH */
