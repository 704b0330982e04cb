/*
 * emu_selftest.cc -- checks of the thread model of cuda_emu.h, run by
 * tests/test_gpu_emu_threads.py (one build, one run per case).
 *
 * Usage: emu_selftest CASE, where CASE is one of
 *   sums          block barriers, shuffles and votes give the device's results
 *                 over several blocks and launches; prints "ok"
 *   runners       how many OS threads ran the blocks of an 8-block launch
 *   missed        a read of a neighbour's shared-memory write with no barrier
 *                 between: prints how many reads saw the garbage fill, in two
 *                 launches (the turn starts each way once)
 *   exit_early    one thread returns before a __syncthreads(): aborts
 *   half_warp     half the lanes of a warp call __shfl_sync: aborts
 *   partial_mask  a shuffle with a partial mask: aborts
 *
 * Test code only (C++20, g++).  Neighbours: cuda_emu.h (what it checks),
 * fake_libcuda.cc (the driver that launches the real kernels with it).
 */
#include "cuda_emu.h"

#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace {

struct params {
    long long *out;
    int which;
};

std::mutex ids_lock;
std::set<std::thread::id> ids;

__global__ void kernel(params p)
{
    unsigned *sh = reinterpret_cast<unsigned *>(bc::dynamic_shared());
    const unsigned t = threadIdx.x;
    if (p.which == 2) { /* missed: no barrier between the write and the read */
        sh[t] = t;
        if (sh[t ^ 1u] == 0xA5A5A5A5u)
            atomicAdd(reinterpret_cast<unsigned long long *>(p.out), 1ull);
        return;
    }
    if (p.which == 1 && t == 0) {
        std::lock_guard<std::mutex> g(ids_lock);
        ids.insert(std::this_thread::get_id());
    }
    sh[t] = t + blockIdx.x;
    __syncthreads();
    long long v = sh[(t + 1) % blockDim.x];
    if (p.which == 3 && t == 5)
        return;
    __syncthreads();
    if (p.which == 4 && (t & 31u) >= 16)
        return;
    for (int d = 16; d > 0; d /= 2)
        v += __shfl_xor_sync(p.which == 5 ? 0xffffu : 0xffffffffu, v, d);
    if ((t & 31u) == 0)
        atomicAdd(reinterpret_cast<unsigned long long *>(p.out), (unsigned long long)v);
    if (__all_sync(0xffffffffu, v == __shfl_sync(0xffffffffu, v, 0)))
        atomicAdd(reinterpret_cast<unsigned long long *>(p.out + 1), 1ull);
}

int run(int which, unsigned blocks, unsigned threads, int launches)
{
    long long out[2] = {0, 0};
    const params p{out, which};
    for (int i = 0; i < launches; i++) {
        emu::launch(kernel, p, blocks, threads, threads * sizeof(unsigned));
        if (which == 2) {
            std::printf("%lld\n", out[0]);
            out[0] = 0;
        }
    }
    if (which == 1)
        std::printf("%zu\n", ids.size());
    if (which == 0) {
        long long sum = 0;
        for (unsigned b = 0; b < blocks; b++)
            for (unsigned t = 0; t < threads; t++)
                sum += t + b;
        const bool ok = out[0] == sum * launches && out[1] == (long long)blocks * threads * launches;
        std::printf("%s %lld %lld\n", ok ? "ok" : "wrong", out[0], out[1]);
        return ok ? 0 : 1;
    }
    return 0;
}

} /* namespace */

int main(int argc, char **argv)
{
    static const char *const cases[] = {"sums", "runners", "missed", "exit_early", "half_warp",
                                        "partial_mask"};
    for (int which = 0; argc > 1 && which < 6; which++)
        if (std::strcmp(argv[1], cases[which]) == 0)
            return run(which, which == 1 ? 8 : 3, 512, which == 0 || which == 2 ? 2 : 1);
    std::fprintf(stderr, "usage: emu_selftest sums|runners|missed|exit_early|half_warp|partial_mask\n");
    return 2;
}
