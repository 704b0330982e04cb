/*
 * cuda_emu.h -- just enough of CUDA, on CPU threads, to run the kernels of
 * c_code/bincount_cuda_kernel.cu in the test-suite on machines without a GPU.
 *
 * Every CUDA thread is a std::thread.  __syncthreads() is a barrier of the
 * block, and each warp's shuffles and votes are barriers of its 32 threads,
 * so the kernels' warp-synchronous code runs as on the device.  Code that
 * calls a warp intrinsic from only some lanes of a warp, or __syncthreads()
 * from only some threads of a block, deadlocks here (undefined behaviour on
 * a GPU); the tests run under a time limit to catch that.  Warp intrinsics
 * insist on the full-warp mask, which is all the kernels use.  Atomics are
 * GCC __atomic builtins; dynamic shared memory is filled with garbage
 * before each block starts, so a kernel that forgets to zero it is caught.
 * Like the hardware's atom.global.add.f32, a float atomicAdd on global memory
 * flushes subnormal inputs and results to zero (shared-memory float atomics
 * and double atomics keep them), so a kernel that relies on it for float32
 * sums loses subnormals here as it would on a GPU.  Streaming loads (__ldcs)
 * are counted by their width (emu::load_counts), so that a test can tell the
 * vector path from the element-by-element one.
 *
 * Test code only (C++20, g++): it is not part of the package.
 */
#ifndef BC_CUDA_EMU_H
#define BC_CUDA_EMU_H

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct emu_dim3 {
    unsigned x, y, z;
};

struct uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};

namespace emu {

struct warp_state {
    std::barrier<> bar{32};
    unsigned long long slots[32];
};

struct block_state {
    explicit block_state(unsigned threads, size_t shared_bytes)
        : bar((std::ptrdiff_t)threads), warps(threads / 32),
          shared((shared_bytes + 7) / 8 + 1)
    {
        std::memset(shared.data(), 0xA5, shared.size() * 8); /* garbage */
    }
    std::barrier<> bar;
    std::vector<warp_state> warps;
    std::vector<unsigned long long> shared;
};

struct thread_state {
    emu_dim3 thread, block, block_dim, grid_dim;
    block_state *blk;
};

inline thread_local thread_state self;
inline thread_local bool in_kernel = false;

/* __ldcs calls, by the width of what they load (1 ... 16 bytes). */
inline std::atomic<long long> load_counts[17];

/* Set when a load or an atomic of a kernel was not aligned to its size (a
 * GPU faults with CUDA_ERROR_MISALIGNED_ADDRESS; the fake driver makes that
 * a sticky error of the context after the launch). */
inline std::atomic<bool> misaligned{false};

inline void check_aligned(const void *p, size_t size)
{
    if (reinterpret_cast<uintptr_t>(p) % size != 0)
        misaligned.store(true, std::memory_order_relaxed);
}

/* Whether p lies in the calling block's dynamic shared memory. */
inline bool in_shared(const void *p)
{
    if (self.blk == nullptr)
        return false;
    const char *lo = reinterpret_cast<const char *>(self.blk->shared.data());
    const char *c = reinterpret_cast<const char *>(p);
    return c >= lo && c < lo + self.blk->shared.size() * 8;
}

/* v, or a zero of its sign when it is subnormal (flush-to-zero). */
inline float flush(float v)
{
    return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

[[noreturn]] inline void die(const char *what)
{
    std::fprintf(stderr, "cuda_emu: %s\n", what);
    std::abort();
}

inline warp_state &warp()
{
    return self.blk->warps[self.thread.x / 32];
}

inline unsigned lane()
{
    return self.thread.x & 31u;
}

template <typename T> inline unsigned long long to_bits(T v)
{
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}

template <typename T> inline T from_bits(unsigned long long b)
{
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}

inline void check_mask(unsigned mask)
{
    if (mask != 0xffffffffu)
        die("warp intrinsic with a partial mask");
}

/* Run `kernel(params)` on a grid, each CUDA thread on its own std::thread. */
template <typename P>
inline void launch(void (*kernel)(P), const P &params, unsigned blocks, unsigned threads,
                   size_t shared_bytes)
{
    if (threads % 32 != 0)
        die("block size not a multiple of 32");
    std::vector<std::unique_ptr<block_state>> states;
    for (unsigned b = 0; b < blocks; b++)
        states.emplace_back(new block_state(threads, shared_bytes));
    std::vector<std::thread> pool;
    pool.reserve((size_t)blocks * threads);
    for (unsigned b = 0; b < blocks; b++) {
        for (unsigned t = 0; t < threads; t++) {
            block_state *blk = states[b].get();
            pool.emplace_back([=]() {
                self.thread = {t, 0, 0};
                self.block = {b, 0, 0};
                self.block_dim = {threads, 1, 1};
                self.grid_dim = {blocks, 1, 1};
                self.blk = blk;
                in_kernel = true;
                kernel(params);
                in_kernel = false;
            });
        }
    }
    for (auto &th : pool)
        th.join();
}

} /* namespace emu */

#define threadIdx (emu::self.thread)
#define blockIdx (emu::self.block)
#define blockDim (emu::self.block_dim)
#define gridDim (emu::self.grid_dim)

/* Shared memory hook of bincount_cuda_kernel.cu. */
#define BC_DYNAMIC_SHARED 1
namespace bc {
inline unsigned long long *dynamic_shared()
{
    return emu::self.blk->shared.data();
}
} /* namespace bc */

inline void __syncthreads()
{
    emu::self.blk->bar.arrive_and_wait();
}

inline void __threadfence()
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

template <typename T> inline T __ldcs(const T *p)
{
    static_assert(sizeof(T) <= 16, "load wider than 16 bytes");
    emu::load_counts[sizeof(T)].fetch_add(1, std::memory_order_relaxed);
    emu::check_aligned(p, sizeof(T));
    return *p;
}

inline unsigned int __float_as_uint(float v)
{
    return emu::from_bits<unsigned int>(emu::to_bits(v));
}

inline float __uint_as_float(unsigned int v)
{
    return emu::from_bits<float>(v);
}

template <typename T> inline T __shfl_sync(unsigned mask, T v, int src)
{
    emu::check_mask(mask);
    emu::warp_state &w = emu::warp();
    w.slots[emu::lane()] = emu::to_bits(v);
    w.bar.arrive_and_wait();
    const T r = emu::from_bits<T>(w.slots[src & 31]);
    w.bar.arrive_and_wait();
    return r;
}

template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask)
{
    return __shfl_sync(mask, v, (int)(emu::lane() ^ (unsigned)lane_mask));
}

inline int __all_sync(unsigned mask, int predicate)
{
    emu::check_mask(mask);
    emu::warp_state &w = emu::warp();
    w.slots[emu::lane()] = predicate ? 1 : 0;
    w.bar.arrive_and_wait();
    int all = 1;
    for (int i = 0; i < 32; i++)
        all &= (int)w.slots[i];
    w.bar.arrive_and_wait();
    return all;
}

template <typename T> inline T atomicAdd(T *p, T v)
{
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomicAdd on 4- or 8-byte words only");
    emu::check_aligned(p, sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
        /* float, double: compare-and-swap on the bits; a global float add
         * flushes subnormals as atom.global.add.f32 does */
        const bool ftz = std::is_same_v<T, float> && !emu::in_shared(p);
        T old, desired;
        __atomic_load(p, &old, __ATOMIC_RELAXED);
        do {
            if constexpr (std::is_same_v<T, float>)
                desired = ftz ? emu::flush(emu::flush(old) + emu::flush(v)) : old + v;
            else
                desired = old + v;
        } while (!__atomic_compare_exchange(p, &old, &desired, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED));
        return old;
    } else {
        return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
    }
}

template <typename T> inline T atomicCAS(T *p, T compare, T value)
{
    static_assert(std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                  "atomicCAS on 4- or 8-byte integers only");
    emu::check_aligned(p, sizeof(T));
    __atomic_compare_exchange_n(p, &compare, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare;
}

inline unsigned long long atomicMax(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v &&
           !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}

#endif /* BC_CUDA_EMU_H */
