/*
 * emu_race.h -- the race check of the CPU emulation of CUDA
 * (FAKE_CUDA_RACECHECK=1; cuda_emu.h includes it when built with
 * -DBC_EMU_RACECHECK, and tests/gpu_emu/build.py builds the fake libcuda so).
 *
 * What it finds: two accesses to one byte of shared or global memory by two
 * CUDA threads of one block, at least one of them a plain (non-atomic)
 * write, with no barrier that orders them: no __syncthreads() between them,
 * and, for two lanes of one warp, no __syncwarp() either.  Shuffles, votes
 * and __match_any_sync order nothing here (the PTX memory model orders
 * memory between lanes only at bar.warp.sync), though they still exchange
 * their values.  Atomics (and volatile accesses: PTX's are relaxed ones) do
 * not conflict with atomics; an atomic conflicts with another thread's plain
 * write, and in shared memory with its plain read too (a block accumulates
 * there with atomics and reads the sums after a barrier).  A plain read of
 * global memory that other threads update atomically is not reported: an
 * aligned load sees the whole old or new value, which the compare-and-swap
 * loops take as their first guess.  Two writes of the same bytes are not
 * reported either (either order leaves the same memory), only after the
 * second store has been seen to change them.  Threads of different blocks
 * are never compared: they meet only through atomics or across launches.  A lost update of a shared-memory
 * adder (`*p += v` by two lanes) and a read of another lane's write with no
 * __syncwarp show here, however the fibers happen to run, where the normal
 * emulation (each fiber runs to its next barrier) gives the right answer.
 *
 * How.  The kernels (and generated kernels) are compiled with GCC's
 * -fsanitize=thread instrumentation but linked without its runtime: every
 * load, store and atomic of the compiled code calls the __tsan_* functions
 * defined below.  While a fiber runs, each access to memory other than the
 * fiber stacks and the emulation's own state is checked against a shadow
 * cell per byte (the block's shared memory: an array; global memory: a hash
 * map, cleared per block).  A cell holds the last plain write and the plain
 * reads and atomics since, each with its thread, its warp and the warp's
 * __syncwarp count, within one barrier interval of the block (the block's
 * __syncthreads count); a cell of an earlier interval counts as empty.  A
 * conflict is reported once per pair of code locations, on stderr, with both
 * locations (addr2line of the build's -g1 line tables), and counted
 * (races(): what fake_cuda_race_reports returns).
 *
 * FAKE_CUDA_RACECHECK=shared checks shared memory only (faster).
 *
 * Test code only (C++20, g++), as cuda_emu.h.
 */
#ifndef BC_EMU_RACE_H
#define BC_EMU_RACE_H

#include <dlfcn.h>

#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#define BC_EMU_NO_TSAN __attribute__((no_sanitize_thread))

namespace emu {
namespace race {

enum kind { READ = 0, WRITE = 1, ATOMIC = 2 };

/* The plain reads (or the atomics) of one byte in the current interval. */
struct accessors {
    unsigned warps = 0;   /* warps with one, a bit each */
    unsigned lanes = 0;   /* lanes of `warp` with one since its __syncwarp number `gen` */
    unsigned gen = 0;
    int warp = -1;
    int tid = -1, tid2 = -1; /* the last two threads, for the report */
    const void *pc = nullptr, *pc2 = nullptr;
};

struct cell {
    unsigned long long interval = 0; /* 0: never touched */
    int w_tid = -1;                  /* the last plain write */
    unsigned w_gen = 0;
    const void *w_pc = nullptr;
    accessors reads, atomics;
};

/* One global-memory granule of 8 bytes. */
struct granule {
    cell bytes[8];
};

/* The calling runner's state while it runs a block. */
struct runner_shadow {
    bool active = false; /* a fiber runs */
    bool busy = false;   /* inside the check (its own accesses are not checked) */
    unsigned long long serial = 0;
    const char *stack_lo = nullptr, *stack_hi = nullptr;
    const char *shared_lo = nullptr, *shared_hi = nullptr;
    const char *blk_lo = nullptr, *blk_hi = nullptr;
    const char *warps_lo = nullptr, *warps_hi = nullptr;
    std::vector<cell> shared;
    std::unordered_map<std::uintptr_t, granule> global;
};

inline thread_local runner_shadow *shadow = nullptr; /* while a runner runs a launch */
inline thread_local runner_shadow runner_own;
inline std::atomic<long long> reports{0};   /* distinct pairs of locations */
inline std::atomic<long long> conflicts{0}; /* every conflicting access */
inline std::mutex report_lock;
inline std::set<std::tuple<const void *, const void *, int, int>> reported;

BC_EMU_NO_TSAN inline bool global_too()
{
    static const bool on = [] {
        const char *v = std::getenv("FAKE_CUDA_RACECHECK");
        return !(v != nullptr && std::strcmp(v, "shared") == 0);
    }();
    return on;
}

/* "function at file:line" of a code address (addr2line), else the object and offset. */
BC_EMU_NO_TSAN inline std::string where(const void *pc)
{
    char buf[512];
    Dl_info info;
    if (pc == nullptr)
        return "?";
    if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) {
        std::snprintf(buf, sizeof(buf), "%p", pc);
        return buf;
    }
    const unsigned long off = (unsigned long)((const char *)pc - (const char *)info.dli_fbase) - 1;
    std::snprintf(buf, sizeof(buf), "addr2line -C -f -i -p -e '%s' 0x%lx 2>/dev/null", info.dli_fname,
                  off);
    std::string text;
    if (FILE *f = popen(buf, "r")) {
        while (std::fgets(buf, sizeof(buf), f) != nullptr)
            text += buf;
        pclose(f);
    }
    while (!text.empty() && text.back() == '\n')
        text.pop_back();
    for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 8))
        text.replace(at, 1, "\n        ");
    const char *base = std::strrchr(info.dli_fname, '/');
    std::snprintf(buf, sizeof(buf), " [%s+0x%lx]", base ? base + 1 : info.dli_fname, off);
    return (text.empty() || text[0] == '?' ? std::string("?") : text) + buf;
}

BC_EMU_NO_TSAN inline const char *kind_name(int k)
{
    return k == READ ? "read" : k == WRITE ? "write" : "atomic access";
}

BC_EMU_NO_TSAN inline const char *article(int k)
{
    return k == ATOMIC ? "an" : "a";
}

BC_EMU_NO_TSAN inline void report(bool in_shared, std::uintptr_t where_at, int k, const void *pc,
                                  int other_kind, int other_tid, const void *other_pc, unsigned tid,
                                  unsigned block)
{
    conflicts.fetch_add(1, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> g(report_lock);
        if (!reported.insert({pc, other_pc, k, other_kind}).second)
            return;
    }
    reports.fetch_add(1, std::memory_order_relaxed);
    char head[512];
    if (in_shared)
        std::snprintf(head, sizeof(head), "byte %lu of shared memory", (unsigned long)where_at);
    else
        std::snprintf(head, sizeof(head), "global memory at 0x%lx", (unsigned long)where_at);
    std::fprintf(stderr,
                 "cuda_emu racecheck: %s %s of %s by thread %u (warp %u, lane %u) of block %u "
                 "conflicts with %s %s by thread %d (warp %d, lane %d), with no __syncthreads() "
                 "or __syncwarp() between them\n"
                 "    this %s:    %s\n    earlier %s: %s\n",
                 article(k), kind_name(k), head, tid, tid / 32, tid % 32, block, article(other_kind),
                 kind_name(other_kind),
                 other_tid, other_tid / 32, other_tid % 32, kind_name(k), where(pc).c_str(),
                 kind_name(other_kind), where(other_pc).c_str());
    std::fflush(stderr);
}

/* The accessing thread. */
struct who {
    int tid, warp;
    unsigned lane, gen;
};

/* Whether `s` holds an access by a thread other than `u` not ordered before u's access. */
BC_EMU_NO_TSAN inline bool unordered(const accessors &s, const who &u)
{
    if (s.warps & ~(1u << u.warp))
        return true;
    return s.warps != 0 && s.gen == u.gen && (s.lanes & ~(1u << u.lane)) != 0;
}

/* The thread and location of s to name in a report about u. */
BC_EMU_NO_TSAN inline void other_of(const accessors &s, const who &u, int *tid, const void **pc)
{
    const bool first = s.tid != u.tid;
    *tid = first ? s.tid : s.tid2;
    *pc = first ? s.pc : s.pc2;
}

BC_EMU_NO_TSAN inline void add(accessors &s, const who &u, const void *pc)
{
    s.warps |= 1u << u.warp;
    if (s.warp == u.warp && s.gen == u.gen) {
        s.lanes |= 1u << u.lane;
    } else {
        s.warp = u.warp;
        s.gen = u.gen;
        s.lanes = 1u << u.lane;
    }
    if (s.tid != u.tid) {
        s.tid2 = s.tid;
        s.pc2 = s.pc;
    }
    s.tid = u.tid;
    s.pc = pc;
}

/* A conflict found at one byte: the other access. */
struct conflict {
    int kind = -1, tid = -1;
    const void *pc = nullptr;
};

/* Check and record access `k` of thread u to the byte of cell c; the first
 * conflict goes to *found (a write after another thread's write only when
 * nothing else conflicts: it may turn out to write the same bytes). */
BC_EMU_NO_TSAN inline void touch(cell &c, unsigned long long interval, const who &u, int k,
                                 const void *pc, bool in_shared, conflict *found)
{
    if (c.interval != interval) {
        c = cell{};
        c.interval = interval;
    }
    conflict f;
    const bool after_write = c.w_tid >= 0 && c.w_tid != u.tid && !(c.w_tid / 32 == u.warp && c.w_gen < u.gen);
    if (after_write && k != WRITE) {
        f = {WRITE, c.w_tid, c.w_pc};
    } else if ((k == WRITE || (k == ATOMIC && in_shared)) && unordered(c.reads, u)) {
        f.kind = READ;
        other_of(c.reads, u, &f.tid, &f.pc);
    } else if ((k == WRITE || in_shared) && k != ATOMIC && unordered(c.atomics, u)) {
        f.kind = ATOMIC;
        other_of(c.atomics, u, &f.tid, &f.pc);
    } else if (after_write) {
        f = {WRITE, c.w_tid, c.w_pc};
    }
    if (k == WRITE) {
        c.w_tid = u.tid;
        c.w_gen = u.gen;
        c.w_pc = pc;
        c.reads = accessors{};
        c.atomics = accessors{};
    } else {
        add(k == READ ? c.reads : c.atomics, u, pc);
    }
    if (f.kind >= 0 && (found->kind < 0 || (found->kind == WRITE && k == WRITE && f.kind != WRITE)))
        *found = f;
}

/* A write over another thread's unordered write, checked once the store is
 * done: a race only if it changed the bytes (two threads storing the same
 * value give the same memory in either order). */
struct pending_write {
    const char *p = nullptr;
    size_t size = 0;
    unsigned char before[16];
    bool in_shared = false;
    std::uintptr_t at = 0;
    const void *pc = nullptr;
    conflict other;
    unsigned tid = 0, block = 0;
};
inline thread_local pending_write pending;

BC_EMU_NO_TSAN inline void settle_pending()
{
    pending_write &w = pending;
    if (w.p == nullptr)
        return;
    const char *p = w.p;
    w.p = nullptr;
    if (std::memcmp(p, w.before, w.size) != 0)
        report(w.in_shared, w.at, WRITE, w.pc, WRITE, w.other.tid, w.other.pc, w.tid, w.block);
}

/* An access of `size` bytes at p of kind k, from code address pc. */
BC_EMU_NO_TSAN inline void access(const volatile void *vp, size_t size, int k, const void *pc)
{
    runner_shadow *s = shadow;
    if (s == nullptr || !s->active || s->busy || size == 0)
        return;
    s->busy = true;
    settle_pending();
    const char *p = (const char *)const_cast<const void *>(vp);
    const bool in_sh = p >= s->shared_lo && p < s->shared_hi;
    if ((p >= s->stack_lo && p < s->stack_hi) || (p >= s->blk_lo && p < s->blk_hi) ||
        (p >= s->warps_lo && p < s->warps_hi) ||
        (p >= (const char *)&self && p < (const char *)(&self + 1)) || (!in_sh && !global_too())) {
        s->busy = false;
        return;
    }
    const unsigned tid = self.thread.x;
    const who u{(int)tid, (int)(tid >> 5), tid & 31u, self.blk->warps[tid >> 5].mem_gen};
    const unsigned long long interval = (s->serial << 32) | self.blk->bar.generation;
    if (in_sh && p + size > s->shared_hi)
        size = (size_t)(s->shared_hi - p);
    conflict found;
    for (size_t i = 0; i < size; i++) {
        const std::uintptr_t a = (std::uintptr_t)(p + i);
        if (in_sh)
            touch(s->shared[(size_t)(p + i - s->shared_lo)], interval, u, k, pc, true, &found);
        else
            touch(s->global[a >> 3].bytes[a & 7u], interval, u, k, pc, false, &found);
    }
    const std::uintptr_t at = in_sh ? (std::uintptr_t)(p - s->shared_lo) : (std::uintptr_t)p;
    if (found.kind == WRITE && k == WRITE && size <= sizeof(pending.before)) {
        pending_write &w = pending;
        w.p = p;
        w.size = size;
        std::memcpy(w.before, p, size);
        w.in_shared = in_sh;
        w.at = at;
        w.pc = pc;
        w.other = found;
        w.tid = tid;
        w.block = self.block.x;
    } else if (found.kind >= 0) {
        report(in_sh, at, k, pc, found.kind, found.tid, found.pc, tid, self.block.x);
    }
    s->busy = false;
}

/* -- hooks of cuda_emu.h ----------------------------------------------------------------- */

/* A runner starts its share of a launch, with the fiber stacks [lo, hi). */
BC_EMU_NO_TSAN inline void runner_begin(const char *lo, const char *hi)
{
    runner_shadow *s = &runner_own;
    s->stack_lo = lo;
    s->stack_hi = hi;
    shadow = s;
}

BC_EMU_NO_TSAN inline void runner_end()
{
    shadow = nullptr;
}

/* A block starts on the calling runner. */
BC_EMU_NO_TSAN inline void block_begin(block_state *blk)
{
    runner_shadow *s = shadow;
    s->serial++;
    s->shared_lo = reinterpret_cast<const char *>(blk->shared.data());
    s->shared_hi = s->shared_lo + blk->shared.size() * 8;
    s->blk_lo = reinterpret_cast<const char *>(blk);
    s->blk_hi = reinterpret_cast<const char *>(blk + 1);
    s->warps_lo = reinterpret_cast<const char *>(blk->warps.data());
    s->warps_hi = reinterpret_cast<const char *>(blk->warps.data() + blk->warps.size());
    if (s->shared.size() < blk->shared.size() * 8)
        s->shared.resize(blk->shared.size() * 8);
    s->global.clear();
}

/* A fiber runs (true) or the runner's scheduler does (false). */
BC_EMU_NO_TSAN inline void fiber_running(bool on)
{
    if (shadow == nullptr)
        return;
    if (!on) {
        shadow->busy = true;
        settle_pending();
        shadow->busy = false;
    }
    shadow->active = on;
}

} /* namespace race */
} /* namespace emu */

/* -- the entry points of GCC's -fsanitize=thread instrumentation ------------------------- */
/* An access of N bytes at p of kind K, from the instrumented code's address. */
#define BC_EMU_AT(p, N, K) emu::race::access(p, N, emu::race::K, __builtin_return_address(0))
extern "C" {
#define BC_EMU_RW(N)                                                                          \
    BC_EMU_NO_TSAN void __tsan_read##N(void *p) { BC_EMU_AT(p, N, READ); }                    \
    BC_EMU_NO_TSAN void __tsan_write##N(void *p) { BC_EMU_AT(p, N, WRITE); }                  \
    BC_EMU_NO_TSAN void __tsan_unaligned_read##N(void *p) { BC_EMU_AT(p, N, READ); }          \
    BC_EMU_NO_TSAN void __tsan_unaligned_write##N(void *p) { BC_EMU_AT(p, N, WRITE); }        \
    /* volatile: PTX's are relaxed atomics */                                                 \
    BC_EMU_NO_TSAN void __tsan_volatile_read##N(void *p) { BC_EMU_AT(p, N, ATOMIC); }         \
    BC_EMU_NO_TSAN void __tsan_volatile_write##N(void *p) { BC_EMU_AT(p, N, ATOMIC); }        \
    BC_EMU_NO_TSAN void __tsan_unaligned_volatile_read##N(void *p) { BC_EMU_AT(p, N, ATOMIC); } \
    BC_EMU_NO_TSAN void __tsan_unaligned_volatile_write##N(void *p) { BC_EMU_AT(p, N, ATOMIC); }
BC_EMU_RW(1)
BC_EMU_RW(2)
BC_EMU_RW(4)
BC_EMU_RW(8)
BC_EMU_RW(16)
#undef BC_EMU_RW

BC_EMU_NO_TSAN void __tsan_read_range(void *p, unsigned long size) { BC_EMU_AT(p, size, READ); }
BC_EMU_NO_TSAN void __tsan_write_range(void *p, unsigned long size) { BC_EMU_AT(p, size, WRITE); }
BC_EMU_NO_TSAN void __tsan_init() {}
BC_EMU_NO_TSAN void __tsan_func_entry(void *) {}
BC_EMU_NO_TSAN void __tsan_func_exit() {}
BC_EMU_NO_TSAN void __tsan_vptr_update(void **, void *) {}
BC_EMU_NO_TSAN void __tsan_vptr_read(void **) {}
BC_EMU_NO_TSAN void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
BC_EMU_NO_TSAN void __tsan_atomic_signal_fence(int) {}

/* Atomics run as sequentially consistent ones (stronger than asked: nothing
 * here depends on a weaker order) and count as atomic accesses. */
#define BC_EMU_SC __ATOMIC_SEQ_CST
#define BC_EMU_RMW(N, T, OP, BUILTIN)                                                         \
    BC_EMU_NO_TSAN T __tsan_atomic##N##_##OP(volatile T *a, T v, int)                         \
    {                                                                                         \
        BC_EMU_AT(a, sizeof(T), ATOMIC);                                                      \
        return BUILTIN(a, v, BC_EMU_SC);                                                      \
    }
#define BC_EMU_ATOMIC(N, T)                                                                   \
    BC_EMU_NO_TSAN T __tsan_atomic##N##_load(const volatile T *a, int)                        \
    {                                                                                         \
        BC_EMU_AT(a, sizeof(T), ATOMIC);                                                      \
        return __atomic_load_n(a, BC_EMU_SC);                                                 \
    }                                                                                         \
    BC_EMU_NO_TSAN void __tsan_atomic##N##_store(volatile T *a, T v, int)                     \
    {                                                                                         \
        BC_EMU_AT(a, sizeof(T), ATOMIC);                                                      \
        __atomic_store_n(a, v, BC_EMU_SC);                                                    \
    }                                                                                         \
    BC_EMU_RMW(N, T, exchange, __atomic_exchange_n)                                           \
    BC_EMU_RMW(N, T, fetch_add, __atomic_fetch_add)                                           \
    BC_EMU_RMW(N, T, fetch_sub, __atomic_fetch_sub)                                           \
    BC_EMU_RMW(N, T, fetch_and, __atomic_fetch_and)                                           \
    BC_EMU_RMW(N, T, fetch_or, __atomic_fetch_or)                                             \
    BC_EMU_RMW(N, T, fetch_xor, __atomic_fetch_xor)                                           \
    BC_EMU_NO_TSAN int __tsan_atomic##N##_compare_exchange_strong(volatile T *a, T *c, T v, int, int) \
    {                                                                                         \
        BC_EMU_AT(a, sizeof(T), ATOMIC);                                                      \
        return __atomic_compare_exchange_n(a, c, v, false, BC_EMU_SC, BC_EMU_SC);             \
    }                                                                                         \
    BC_EMU_NO_TSAN int __tsan_atomic##N##_compare_exchange_weak(volatile T *a, T *c, T v, int, int) \
    {                                                                                         \
        BC_EMU_AT(a, sizeof(T), ATOMIC);                                                      \
        return __atomic_compare_exchange_n(a, c, v, false, BC_EMU_SC, BC_EMU_SC);             \
    }                                                                                         \
    BC_EMU_NO_TSAN T __tsan_atomic##N##_compare_exchange_val(volatile T *a, T c, T v, int, int) \
    {                                                                                         \
        BC_EMU_AT(a, sizeof(T), ATOMIC);                                                      \
        __atomic_compare_exchange_n(a, &c, v, false, BC_EMU_SC, BC_EMU_SC);                   \
        return c;                                                                             \
    }
BC_EMU_ATOMIC(8, unsigned char)
BC_EMU_ATOMIC(16, unsigned short)
BC_EMU_ATOMIC(32, unsigned int)
BC_EMU_ATOMIC(64, unsigned long long)
#undef BC_EMU_ATOMIC
#undef BC_EMU_RMW
} /* extern "C" */

#endif /* BC_EMU_RACE_H */
