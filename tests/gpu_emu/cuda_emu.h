/*
 * cuda_emu.h -- just enough of CUDA, on CPU threads, to run the kernels of
 * the .cu files of c_code/ in the test-suite on machines without a GPU (fake_libcuda.cc
 * includes them; emu_selftest.cc checks the thread model below).
 *
 * Thread model.  A launch runs its blocks on a few OS threads (runners, at
 * most FAKE_CUDA_RUNNERS, default 4, and no more than there are blocks),
 * each starting with a block of its own and then claiming whole blocks in
 * turn, so every runner runs a block, and blocks run at the same time
 * and race on global memory as on a device.  Within a block, every CUDA
 * thread is a fiber (a user-space context with a stack of its own) on its
 * runner: the fibers run in turn, each until it waits at a barrier:
 * __syncthreads() is a barrier of the block, and each warp's shuffles and
 * votes are barriers of its 32 lanes, so the kernels' warp-synchronous code
 * runs as on the device.  The turn goes forwards and backwards over the
 * threads, round by round (and starts the other way on every other launch),
 * so a read that misses a barrier sees the writes of a neighbour missing
 * from one side or the other.  Code that calls a warp intrinsic from only
 * some lanes of a warp, or __syncthreads() from only some threads of a
 * block (undefined behaviour on a GPU), leaves every fiber of the block
 * waiting: the emulation then aborts at once, naming it ("cuda_emu:
 * deadlock").  Warp intrinsics insist on the full-warp mask, or on the
 * calling lane alone: __activemask() returns the calling lane's bit (a
 * device may find any subset of the warp converged, the lane itself at
 * least; the lanes of a warp do not run in step here), so code that
 * aggregates over __activemask() runs with groups of one lane, and the
 * aggregation itself is checked with full masks (emu_selftest.cc).
 *
 * Blocks are claimed in increasing order, or, with FAKE_CUDA_BLOCK_ORDER=random,
 * in a random order drawn afresh for each launch (block_order).
 *
 * Atomics are GCC __atomic builtins; dynamic shared memory is filled with
 * garbage before each block starts, so a kernel that forgets to zero it is
 * caught.  Like the hardware's atom.global.add.f32, a float atomicAdd on
 * global memory flushes subnormal inputs and results to zero (shared-memory
 * float atomics and double atomics keep them), so a kernel that relies on it
 * for float32 sums loses subnormals here as it would on a GPU.  Streaming
 * loads (__ldcs) and write-back stores (__stwb) are counted by their width
 * (emu::load_counts, emu::store_counts) and checked for alignment, so that
 * a test can tell the vector path from the element-by-element one, and a
 * wide access at an address it does not fit fails as on a GPU.
 *
 * Built with -DBC_EMU_RACECHECK (and GCC's -fsanitize=thread: what
 * build.py does for FAKE_CUDA_RACECHECK=1), every memory access of a kernel
 * is checked by emu_race.h against the block's other threads: fibers that
 * run to their barrier cannot lose an update or miss a __syncwarp, so that
 * check reports what a GPU could do there instead.
 *
 * A new warp intrinsic is written as __all_sync is: each lane puts its value
 * in warp().slots, warp_sync(), reads what it needs, warp_sync().
 *
 * Test code only (C++20, g++): it is not part of the package.  The context
 * switch is a few lines of assembly on x86-64 and ucontext elsewhere (or
 * with -DBC_EMU_UCONTEXT).
 */
#ifndef BC_CUDA_EMU_H
#define BC_CUDA_EMU_H

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>
#if !defined(__x86_64__) || defined(BC_EMU_UCONTEXT)
#include <ucontext.h>
#endif

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

[[noreturn]] inline void die(const char *what)
{
    std::fprintf(stderr, "cuda_emu: %s\n", what);
    std::abort();
}

/* -- user-space contexts ------------------------------------------------------------------ */
#if defined(__x86_64__) && !defined(BC_EMU_UCONTEXT)
/* Saves the callee-saved registers, MXCSR and the x87 control word on the
 * current stack, stores the stack pointer in *from and resumes the context
 * whose stack pointer is `to` (System V x86-64). */
extern "C" [[gnu::naked, gnu::noinline]] inline void bc_emu_switch(void ** /* from: rdi */, void * /* to: rsi */)
{
    __asm__ volatile(
        "pushq %rbp\n\t"
        "pushq %rbx\n\t"
        "pushq %r12\n\t"
        "pushq %r13\n\t"
        "pushq %r14\n\t"
        "pushq %r15\n\t"
        "subq $8, %rsp\n\t"
        "stmxcsr (%rsp)\n\t"
        "fnstcw 4(%rsp)\n\t"
        "movq %rsp, (%rdi)\n\t"
        "movq %rsi, %rsp\n\t"
        "ldmxcsr (%rsp)\n\t"
        "fldcw 4(%rsp)\n\t"
        "addq $8, %rsp\n\t"
        "popq %r15\n\t"
        "popq %r14\n\t"
        "popq %r13\n\t"
        "popq %r12\n\t"
        "popq %rbx\n\t"
        "popq %rbp\n\t"
        "ret\n\t");
}

struct context {
    void *sp = nullptr;
};

/* A context that starts in entry() on the stack [stack, stack + size). */
inline void context_init(context *c, char *stack, size_t size, void (*entry)())
{
    auto *top = reinterpret_cast<std::uintptr_t *>(
        (reinterpret_cast<std::uintptr_t>(stack + size) & ~(std::uintptr_t)15));
    top[-1] = 0;                                          /* entry's return address: none */
    top[-2] = reinterpret_cast<std::uintptr_t>(entry);    /* where the switch returns */
    for (int r = 3; r <= 8; r++)
        top[-r] = 0;                                      /* rbp, rbx, r12 ... r15 */
    top[-9] = 0x1F80u | ((std::uintptr_t)0x037Fu << 32); /* MXCSR, x87 control word */
    c->sp = top - 9;
}

inline void context_switch(context *from, context *to)
{
    bc_emu_switch(&from->sp, to->sp);
}
#else
struct context {
    ucontext_t uc;
};

inline void context_init(context *c, char *stack, size_t size, void (*entry)())
{
    if (getcontext(&c->uc) != 0)
        die("getcontext failed");
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, entry, 0);
}

inline void context_switch(context *from, context *to)
{
    if (swapcontext(&from->uc, &to->uc) != 0)
        die("swapcontext failed");
}
#endif

/* -- blocks, warps and their barriers -------------------------------------------------------- */
/* A barrier of fibers of one block: they all run on the block's runner, so
 * nothing here needs a lock. */
struct barrier {
    explicit barrier(unsigned n) : expected(n) {}
    unsigned expected;
    unsigned arrived = 0;
    unsigned long long generation = 0;
};

struct warp_state {
    barrier bar{32};
    unsigned long long slots[32];
#ifdef BC_EMU_RACECHECK
    unsigned mem_gen = 0; /* __syncwarp() calls passed (emu_race.h) */
#endif
};

struct block_state {
    explicit block_state(unsigned threads, size_t shared_bytes)
        : bar(threads), warps(threads / 32), shared((shared_bytes + 7) / 8 + 1)
    {
        std::memset(shared.data(), 0xA5, shared.size() * 8); /* garbage */
    }
    barrier bar;
    std::vector<warp_state> warps;
    std::vector<unsigned long long> shared;
    unsigned long long progress = 0; /* arrivals and exits, for the deadlock check */
};

struct thread_state {
    emu_dim3 thread, block, block_dim, grid_dim;
    block_state *blk;
};

inline thread_local thread_state self;
inline thread_local bool in_kernel = false;

} /* namespace emu */

#ifdef BC_EMU_RACECHECK
#include "emu_race.h"
#define BC_EMU_RACE(...) __VA_ARGS__
#else
#define BC_EMU_RACE(...)
#endif

namespace emu {

/* __ldcs calls, by the width of what they load (1 ... 16 bytes). */
inline std::atomic<long long> load_counts[17];
/* __stwb calls, by the width of what they store. */
inline std::atomic<long long> store_counts[17];

/* Set when a load or an atomic of a kernel was not aligned to its size (a
 * GPU faults with CUDA_ERROR_MISALIGNED_ADDRESS; the fake driver makes that
 * a sticky error of the context after the launch). */
inline std::atomic<bool> misaligned{false};

inline void check_aligned(const void *p, size_t size)
{
    if (reinterpret_cast<uintptr_t>(p) % size != 0)
        misaligned.store(true, std::memory_order_relaxed);
}

/* One CUDA thread of the block a runner is running. */
struct fiber {
    context ctx;
    thread_state state;
    bool done = false;
};

/* What an OS thread that runs blocks knows of the block it is running. */
struct runner_state {
    context scheduler;
    fiber *current = nullptr;
    void (*body)(const void *) = nullptr; /* runs the kernel with its parameters */
    const void *params = nullptr;
};

inline thread_local runner_state *runner = nullptr;

/* Fiber stacks: FAKE_CUDA_STACK_KB each (default 64), with a guard page
 * below each, so an overflow faults instead of writing into a neighbour.
 * Mapped once and kept for the next launches (a runner takes a set, gives it
 * back when its launch ends). */
struct stack_set {
    char *base = nullptr;
    size_t stride = 0, size = 0;
    unsigned count = 0;
};

inline std::mutex stacks_lock;
inline std::vector<stack_set> free_stacks;

inline size_t stack_bytes()
{
    static const size_t bytes = [] {
        const char *v = std::getenv("FAKE_CUDA_STACK_KB");
        const long kb = v ? std::atol(v) : 64;
        return (size_t)(kb > 16 ? kb : 16) * 1024;
    }();
    return bytes;
}

inline stack_set take_stacks(unsigned count)
{
    {
        std::lock_guard<std::mutex> g(stacks_lock);
        for (size_t i = 0; i < free_stacks.size(); i++) {
            if (free_stacks[i].count >= count) {
                stack_set s = free_stacks[i];
                free_stacks.erase(free_stacks.begin() + (long)i);
                return s;
            }
        }
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_set s;
    s.size = stack_bytes();
    s.stride = s.size + page;
    s.count = count;
    void *p = mmap(nullptr, s.stride * count, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        die("no memory for the fiber stacks");
    s.base = static_cast<char *>(p);
    for (unsigned i = 0; i < count; i++)
        if (mprotect(s.base + i * s.stride, page, PROT_NONE) != 0)
            die("mprotect of a stack guard failed");
    return s;
}

inline void give_back_stacks(const stack_set &s)
{
    std::lock_guard<std::mutex> g(stacks_lock);
    free_stacks.push_back(s);
}

/* Back to the scheduler of this runner; returns when the scheduler resumes the fiber. */
inline void yield()
{
    fiber *f = runner->current;
    context_switch(&f->ctx, &runner->scheduler);
}

inline void arrive_and_wait(barrier &b)
{
    self.blk->progress++;
    const unsigned long long generation = b.generation;
    if (++b.arrived == b.expected) {
        b.arrived = 0;
        b.generation++;
        return;
    }
    while (b.generation == generation)
        yield();
}

inline void fiber_main()
{
    fiber *f = runner->current;
    runner->body(runner->params);
    f->done = true;
    self.blk->progress++;
    context_switch(&f->ctx, &runner->scheduler); /* never resumed */
    die("a finished fiber was resumed");
}

/* Run block `b` of the launch as `threads` fibers on the calling runner;
 * `reverse` says which way the first round goes. */
inline void run_block(block_state *blk, const thread_state &common, unsigned threads,
                      std::vector<fiber> &fibers, const stack_set &stacks, bool reverse)
{
    for (unsigned t = 0; t < threads; t++) {
        fiber &f = fibers[t];
        f.done = false;
        f.state = common;
        f.state.thread = {t, 0, 0};
        f.state.blk = blk;
        context_init(&f.ctx, stacks.base + t * stacks.stride + (stacks.stride - stacks.size),
                     stacks.size, fiber_main);
    }
    unsigned live = threads;
    while (live > 0) {
        const unsigned long long before = blk->progress;
        for (unsigned k = 0; k < threads; k++) {
            fiber &f = fibers[reverse ? threads - 1 - k : k];
            if (f.done)
                continue;
            self = f.state;
            runner->current = &f;
            BC_EMU_RACE(race::fiber_running(true);)
            context_switch(&runner->scheduler, &f.ctx);
            BC_EMU_RACE(race::fiber_running(false);)
            if (f.done)
                live--;
        }
        if (live > 0 && blk->progress == before)
            die("deadlock: a __syncthreads() or warp intrinsic that not every thread of the "
                "block (or lane of the warp) reaches");
        reverse = !reverse;
    }
    self = thread_state{};
}

inline std::atomic<unsigned long long> launches{0};

/* FAKE_CUDA_BLOCK_ORDER=random: the runners claim the blocks of a launch in
 * a random order (a new one per launch), so that code whose result depends
 * on the order in which blocks run (float atomics) shows it from call to
 * call, as on a device; otherwise they claim them in increasing order. */
inline bool random_block_order()
{
    static const bool on = [] {
        const char *v = std::getenv("FAKE_CUDA_BLOCK_ORDER");
        return v != nullptr && std::strcmp(v, "random") == 0;
    }();
    return on;
}

/* The order in which the blocks of a launch are claimed: 0, 1, ... or, with
 * random_block_order(), a permutation drawn from the launch count and the clock. */
inline std::vector<unsigned> block_order(unsigned blocks)
{
    std::vector<unsigned> order(blocks);
    for (unsigned b = 0; b < blocks; b++)
        order[b] = b;
    if (random_block_order()) {
        unsigned long long state = launches.load() * 0x9E3779B97F4A7C15ull ^
                                   (unsigned long long)std::chrono::steady_clock::now()
                                       .time_since_epoch()
                                       .count();
        for (unsigned b = blocks; b > 1; b--) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            const unsigned j = (unsigned)((state >> 33) % b);
            const unsigned t = order[b - 1];
            order[b - 1] = order[j];
            order[j] = t;
        }
    }
    return order;
}

inline unsigned runner_count(unsigned blocks)
{
    static const unsigned most = [] {
        const char *v = std::getenv("FAKE_CUDA_RUNNERS");
        const long n = v ? std::atol(v) : 4;
        return (unsigned)(n > 0 ? n : 1);
    }();
    return blocks < most ? blocks : most;
}

inline warp_state &warp()
{
    return self.blk->warps[self.thread.x / 32];
}

inline unsigned lane()
{
    return self.thread.x & 31u;
}

/* The barrier of the calling lane's warp (each warp intrinsic's two steps). */
inline void warp_sync()
{
    arrive_and_wait(warp().bar);
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

/* Whether a warp intrinsic's mask names the calling lane alone (then it
 * needs no barrier); aborts unless it is that or the full warp. */
inline bool solo(unsigned mask)
{
    if (mask == 1u << (self.thread.x & 31u))
        return true;
    if (mask != 0xffffffffu)
        die("warp intrinsic with a partial mask");
    return false;
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

/* Run `kernel(params)` on a grid of `blocks` blocks of `threads` threads (see the
 * thread model at the top); returns when every block has finished. */
template <typename P>
inline void launch(void (*kernel)(P), const P &params, unsigned blocks, unsigned threads,
                   size_t shared_bytes)
{
    if (threads % 32 != 0)
        die("block size not a multiple of 32");
    struct call {
        void (*kernel)(P);
        const P *params;
        static void body(const void *c)
        {
            const call *self_call = static_cast<const call *>(c);
            self_call->kernel(*self_call->params);
        }
    } const job{kernel, &params};
    const bool reverse = (launches.fetch_add(1) & 1) != 0;
    /* Runner r starts with block r, then claims the next unclaimed block, so
     * every runner runs at least one block however late its OS thread starts. */
    const unsigned runners = runner_count(blocks);
    const std::vector<unsigned> order = block_order(blocks);
    std::atomic<unsigned> next{runners};
    auto run = [&](unsigned first) {
        runner_state state;
        state.body = &call::body;
        state.params = &job;
        runner = &state;
        in_kernel = true;
        const stack_set stacks = take_stacks(threads);
        BC_EMU_RACE(race::runner_begin(stacks.base, stacks.base + stacks.stride * threads);)
        std::vector<fiber> fibers(threads);
        for (unsigned claimed = first; claimed < blocks; claimed = next.fetch_add(1)) {
            const unsigned b = order[claimed];
            block_state blk(threads, shared_bytes);
            BC_EMU_RACE(race::block_begin(&blk);)
            const thread_state common{{0, 0, 0}, {b, 0, 0}, {threads, 1, 1}, {blocks, 1, 1}, nullptr};
            run_block(&blk, common, threads, fibers, stacks, reverse);
        }
        BC_EMU_RACE(race::runner_end();)
        give_back_stacks(stacks);
        in_kernel = false;
        runner = nullptr;
    };
    std::vector<std::thread> pool;
    for (unsigned r = 1; r < runners; r++)
        pool.emplace_back(run, r);
    run(0u); /* the calling thread is a runner too */
    for (auto &th : pool)
        th.join();
}

} /* namespace emu */

#define threadIdx (emu::self.thread)
#define blockIdx (emu::self.block)
#define blockDim (emu::self.block_dim)
#define gridDim (emu::self.grid_dim)

/* Shared memory hook of cuda/bincount_kernels.cu. */
#define BC_DYNAMIC_SHARED 1
namespace bc {
inline unsigned long long *dynamic_shared()
{
    return emu::self.blk->shared.data();
}
} /* namespace bc */

inline void __syncthreads()
{
    emu::arrive_and_wait(emu::self.blk->bar);
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

/* A store with the default (write-back) policy; checked and counted as loads are. */
template <typename T> inline void __stwb(T *p, T v)
{
    static_assert(sizeof(T) <= 16, "store wider than 16 bytes");
    emu::store_counts[sizeof(T)].fetch_add(1, std::memory_order_relaxed);
    emu::check_aligned(p, sizeof(T));
    *p = v;
}

inline unsigned int __float_as_uint(float v)
{
    return emu::from_bits<unsigned int>(emu::to_bits(v));
}

inline float __uint_as_float(unsigned int v)
{
    return emu::from_bits<float>(v);
}

inline long long __double_as_longlong(double v)
{
    return emu::from_bits<long long>(emu::to_bits(v));
}

inline double __longlong_as_double(long long v)
{
    return emu::from_bits<double>(emu::to_bits(v));
}

template <typename T> inline T __shfl_sync(unsigned mask, T v, int src)
{
    if (emu::solo(mask)) {
        if ((unsigned)(src & 31) != emu::lane())
            emu::die("shuffle from a lane outside the mask");
        return v;
    }
    emu::warp_state &w = emu::warp();
    w.slots[emu::lane()] = emu::to_bits(v);
    emu::warp_sync();
    const T r = emu::from_bits<T>(w.slots[src & 31]);
    emu::warp_sync();
    return r;
}

template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask)
{
    return __shfl_sync(mask, v, (int)(emu::lane() ^ (unsigned)lane_mask));
}

/* The bits of the lanes of `mask` whose value `v` satisfies keep(own, theirs). */
template <typename T, typename F> inline unsigned warp_select(unsigned mask, T v, F keep)
{
    if (emu::solo(mask))
        return keep(v, v) ? mask : 0u;
    emu::warp_state &w = emu::warp();
    w.slots[emu::lane()] = emu::to_bits(v);
    emu::warp_sync();
    unsigned bits = 0;
    for (int i = 0; i < 32; i++)
        bits |= keep(v, emu::from_bits<T>(w.slots[i])) ? 1u << i : 0u;
    emu::warp_sync();
    return bits;
}

inline unsigned __ballot_sync(unsigned mask, int predicate)
{
    return warp_select(mask, predicate ? 1 : 0, [](int, int theirs) { return theirs != 0; });
}

inline int __all_sync(unsigned mask, int predicate)
{
    return __ballot_sync(mask, predicate) == mask;
}

inline int __any_sync(unsigned mask, int predicate)
{
    return __ballot_sync(mask, predicate) != 0u;
}

/* The lanes of `mask` whose v equals the caller's (32- or 64-bit v). */
template <typename T> inline unsigned __match_any_sync(unsigned mask, T v)
{
    static_assert(std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8),
                  "__match_any_sync on 32- or 64-bit integers");
    return warp_select(mask, v, [](T own, T theirs) { return own == theirs; });
}

/* A barrier of the warp's lanes (and the memory order between them: the
 * race check counts it, emu_race.h). */
inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    if (emu::solo(mask))
        return;
    BC_EMU_RACE(emu::warp_state &w = emu::warp(); if (w.bar.arrived + 1 == w.bar.expected) w.mem_gen++;)
    emu::warp_sync();
}

inline unsigned __activemask()
{
    return 1u << emu::lane();
}

inline int __popc(unsigned v)
{
    return __builtin_popcount(v);
}

inline int __ffs(int v)
{
    return __builtin_ffs(v);
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

inline unsigned long long atomicExch(unsigned long long *p, unsigned long long v)
{
    emu::check_aligned(p, sizeof(v));
    return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);
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
