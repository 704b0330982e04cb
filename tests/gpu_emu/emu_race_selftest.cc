/*
 * emu_race_selftest.cc -- checks of the race check of the emulation
 * (emu_race.h), run by tests/test_gpu_strict.py: built twice, as the fake
 * libcuda is in each mode (plain, and with -fsanitize=thread
 * -DBC_EMU_RACECHECK), one run per case.
 *
 * Usage: emu_race_selftest CASE; it prints the kernel's result ("sum N")
 * and, in the race build, "races N" (reports of distinct pairs of code
 * locations).  CASE is one of
 *   lost_update   every lane adds 1 to one shared word with a plain
 *                 read-modify-write (the sum is right here: fibers do not
 *                 interleave; on a GPU it loses updates): a race
 *   atomic_add    the same with atomicAdd: none
 *   missed_warp   lane 0 writes a shared word, the warp shuffles (which
 *                 orders no memory), lane 1 reads it: a race
 *   synced_warp   the same with __syncwarp() between: none
 *   missed_block  warp 0 writes, warp 1 reads after a __syncwarp() only: a race
 *   synced_block  the same with __syncthreads(): none
 *   global_raw    thread 0 writes a global word, thread 33 reads it, no barrier: a race
 *   cas_guess     every thread adds 1 to a global word by a compare-and-swap loop
 *                 whose first guess is a plain read: none
 *   shared_atomic_read  every thread adds 1 to a shared word atomically, thread
 *                 32 reads it with no barrier: a race
 *   same_write    every thread stores 7 into one shared word: none (either order
 *                 leaves the same bytes)
 *   racing_write  every thread stores its index there: a race
 *   blocks        every block's thread 0 adds to one global word atomically
 *                 and writes a word of its own: none (blocks are not compared)
 *
 * Test code only (C++20, g++).
 */
#include "cuda_emu.h"

#include "cuda/device_helpers.cuh"

#include <cstring>

namespace {

struct params {
    unsigned long long *out;
    int which;
};

enum {
    LOST_UPDATE, ATOMIC_ADD, MISSED_WARP, SYNCED_WARP, MISSED_BLOCK, SYNCED_BLOCK, GLOBAL_RAW,
    CAS_GUESS, SHARED_ATOMIC_READ, SAME_WRITE, RACING_WRITE, BLOCKS, CASES
};

__global__ void kernel(params p)
{
    unsigned *sh = reinterpret_cast<unsigned *>(bc::dynamic_shared());
    const unsigned t = threadIdx.x;
    if (t == 0)
        sh[0] = 0u;
    __syncthreads();
    unsigned seen = 0;
    switch (p.which) {
    case LOST_UPDATE:
        sh[0] += 1u;
        break;
    case ATOMIC_ADD:
        atomicAdd(sh, 1u);
        break;
    case MISSED_WARP:
    case SYNCED_WARP:
        if (t == 0)
            sh[0] = 7u;
        if (p.which == SYNCED_WARP)
            __syncwarp();
        seen = __shfl_sync(0xffffffffu, t, 0);
        if (t == 1)
            seen = sh[0];
        break;
    case MISSED_BLOCK:
    case SYNCED_BLOCK:
        if (t == 0)
            sh[0] = 7u;
        if (p.which == SYNCED_BLOCK)
            __syncthreads();
        else
            __syncwarp();
        if (t == 32)
            seen = sh[0];
        break;
    case GLOBAL_RAW:
        if (t == 0)
            p.out[1] = 5u;
        if (t == 33)
            seen = (unsigned)p.out[1];
        break;
    case CAS_GUESS: {
        unsigned long long before, guess = *p.out;
        do {
            before = guess;
            guess = atomicCAS(p.out, before, before + 1u);
        } while (guess != before);
        break;
    }
    case SHARED_ATOMIC_READ:
        atomicAdd(sh, 1u);
        if (t == 32)
            seen = sh[0];
        break;
    case SAME_WRITE:
        sh[0] = 7u;
        break;
    case RACING_WRITE:
        sh[0] = t;
        break;
    case BLOCKS:
        if (t == 0) {
            atomicAdd(p.out, 1ull);
            p.out[2 + blockIdx.x] = blockIdx.x;
        }
        return;
    }
    __syncthreads();
    if (t == 0)
        atomicAdd(p.out, (unsigned long long)sh[0]);
    if (seen != 0u)
        atomicAdd(p.out, 0ull);
}

} /* namespace */

int main(int argc, char **argv)
{
    static const char *const cases[CASES] = {
        "lost_update", "atomic_add",         "missed_warp", "synced_warp",
        "missed_block", "synced_block",      "global_raw",  "cas_guess",
        "shared_atomic_read", "same_write",  "racing_write", "blocks"};
    for (int which = 0; argc > 1 && which < CASES; which++) {
        if (std::strcmp(argv[1], cases[which]) != 0)
            continue;
        unsigned long long out[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        emu::launch(kernel, params{out, which}, which == BLOCKS ? 4 : 1, 64, 64);
        std::printf("sum %llu\n", out[0]);
#ifdef BC_EMU_RACECHECK
        std::printf("races %lld\n", emu::race::reports.load());
#endif
        return 0;
    }
    std::fprintf(stderr, "usage: emu_race_selftest CASE (see the file)\n");
    return 2;
}
