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
 *   peers         __match_any_sync, bc::peer_sum and __ballot_sync over several
 *                 key patterns, the lane-alone masks of __activemask(), and
 *                 64-bit shared adds with carry (bc::shared_add): prints "ok"
 *   order         the order in which the blocks of two launches start (one
 *                 runner): increasing, or random with FAKE_CUDA_BLOCK_ORDER=random
 *
 * Test code only (C++20, g++).  Neighbours: cuda_emu.h (what it checks),
 * fake_libcuda.cc (the driver that launches the real kernels with it),
 * c_code/cuda/device_helpers.cuh (the warp helpers of the "peers" case).
 */
#include "cuda_emu.h"

#include "cuda/device_helpers.cuh"

#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

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

/* The key of `lane` in pattern k of the "peers" case. */
unsigned peer_key(int k, unsigned lane)
{
    switch (k) {
    case 0: return 7u;                        /* one group of 32 */
    case 1: return lane;                      /* 32 groups of one */
    case 2: return lane % 3u;                 /* interleaved groups */
    case 3: return lane / 5u;                 /* runs of 5 */
    default: return lane < 16u ? 9u : lane;   /* one group of 16, 16 alone */
    }
}

constexpr int PEER_PATTERNS = 5;

/* out[k * 32 + lane]: the sum of (lane + 1) over lane's group on its lowest
 * lane, -1 on the others, or -2 when peers or the ballot came out wrong;
 * out[PEER_PATTERNS * 32]: the 64-bit shared sums, checked by the host. */
__global__ void peers_kernel(params p)
{
    const unsigned lane = threadIdx.x & 31u;
    for (int k = 0; k < PEER_PATTERNS; k++) {
        const unsigned key = peer_key(k, lane);
        const unsigned peers = __match_any_sync(0xffffffffu, key);
        unsigned expected = 0;
        for (unsigned l = 0; l < 32; l++)
            expected |= (peer_key(k, l) == key ? 1u : 0u) << l;
        const unsigned odd = __ballot_sync(0xffffffffu, lane & 1u);
        const double sum = bc::peer_sum(0xffffffffu, peers, (double)(lane + 1));
        if (threadIdx.x < 32)
            p.out[k * 32 + lane] = peers != expected || odd != 0xaaaaaaaau ? -2
                                   : (peers & ((1u << lane) - 1u)) == 0u ? (long long)sum
                                                                         : -1;
    }
    /* __activemask() names the lane alone: a group of one, no barrier. */
    const unsigned alone = __activemask();
    if (__match_any_sync(alone, lane) != alone || bc::peer_sum(alone, alone, 5.0) != 5.0)
        p.out[0] = -3;
    /* 64-bit shared adds with carry: every thread adds 2^32 - 1 and -1. */
    unsigned long long *sh = reinterpret_cast<unsigned long long *>(bc::dynamic_shared());
    if (threadIdx.x == 0)
        sh[0] = 0xfffffffffffffff0ull;
    __syncthreads();
    bc::shared_add(sh, 0xffffffffull, 0u);
    bc::shared_add(sh, ~0ull, 0u);
    __syncthreads();
    if (threadIdx.x == 0)
        p.out[PEER_PATTERNS * 32] = (long long)sh[0];
}

int run_peers()
{
    std::vector<long long> out(PEER_PATTERNS * 32 + 1, 0);
    emu::launch(peers_kernel, params{out.data(), 6}, 1, 512, 64);
    bool ok = true;
    for (int k = 0; k < PEER_PATTERNS; k++) {
        for (unsigned lane = 0; lane < 32; lane++) {
            long long sum = 0;
            unsigned lowest = 32;
            for (unsigned l = 0; l < 32; l++) {
                if (peer_key(k, l) == peer_key(k, lane)) {
                    sum += l + 1;
                    lowest = l < lowest ? l : lowest;
                }
            }
            const long long want = lane == lowest ? sum : -1;
            if (out[k * 32 + lane] != want) {
                std::printf("wrong: pattern %d lane %u: %lld, expected %lld\n", k, lane,
                            out[k * 32 + lane], want);
                ok = false;
            }
        }
    }
    const unsigned long long want = 0xfffffffffffffff0ull + 512ull * 0xfffffffeull;
    if ((unsigned long long)out[PEER_PATTERNS * 32] != want) {
        std::printf("wrong: 64-bit shared sum %llx, expected %llx\n",
                    (unsigned long long)out[PEER_PATTERNS * 32], want);
        ok = false;
    }
    std::printf("%s\n", ok ? "ok" : "wrong");
    return ok ? 0 : 1;
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

/* order: which block each of two 16-block launches started first, second,
 * ... (run with one runner, FAKE_CUDA_RUNNERS=1), one line per launch. */
struct order_params {
    unsigned *seq;
    unsigned *next;
};

__global__ void order_kernel(order_params p)
{
    if (threadIdx.x == 0)
        p.seq[atomicAdd(p.next, 1u)] = blockIdx.x;
}

int run_order()
{
    for (int l = 0; l < 2; l++) {
        unsigned seq[16], next = 0;
        emu::launch(&order_kernel, order_params{seq, &next}, 16, 32, 0);
        for (int i = 0; i < 16; i++)
            std::printf("%u%c", seq[i], i == 15 ? '\n' : ' ');
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const char *const cases[] = {"sums", "runners", "missed", "exit_early", "half_warp",
                                        "partial_mask"};
    if (argc > 1 && std::strcmp(argv[1], "peers") == 0)
        return run_peers();
    if (argc > 1 && std::strcmp(argv[1], "order") == 0)
        return run_order();
    for (int which = 0; argc > 1 && which < 6; which++)
        if (std::strcmp(argv[1], cases[which]) == 0)
            return run(which, which == 1 ? 8 : 3, 512, which == 0 || which == 2 ? 2 : 1);
    std::fprintf(stderr,
                 "usage: emu_selftest sums|runners|missed|exit_early|half_warp|partial_mask|peers|order\n");
    return 2;
}
