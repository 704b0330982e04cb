/*
 * cuda/bincount_hist.cuh -- the device code of the histogram pass of
 * aesara_bincount.GpuBincount and GpuFusedBincount: the bin of a value
 * under the form's rules (to_bin), the per-thread pass over x (hist_pass),
 * the block's kernel body (hist) and the conversion of the accumulator to
 * the output dtype (finish).  Neighbours: cuda/bincount_kernels.cu (the
 * extern "C" kernels that instantiate these templates, and the generated
 * fused kernels' entry), cuda/device_helpers.cuh (device helpers shared
 * with the rows kernels: shared_add, global_add, warp reductions),
 * cuda/kernel_defs.h (the parameter structs and tuning numbers),
 * cuda_host/bincount_launch.h (the launcher).  Valid CUDA C++17 on its own: it
 * defines templates only, no kernel.
 *
 * Algorithm of a histogram pass (a privatized histogram):
 *   - Each block keeps `copies` replicated copies of a shared-memory
 *     histogram for the bins [lo, lo + shared_bins); warp w adds into copy
 *     w % copies, so that warps do not contend on a hot bin.  Bins of the
 *     window beyond shared_bins are added to the global accumulator directly.
 *     At the end the block sums its copies and adds each non-zero bin to the
 *     global accumulator with one atomic.  (Replicated sub-histograms follow
 *     Gomez-Luna et al., "An optimized approach to histogram computation on
 *     GPU", Machine Vision and Applications 24, 2013; CUB's
 *     DeviceHistogram privatizes per block in the same way.)
 *   - Updates are aggregated before any atomic: each thread keeps a running
 *     sum for the bin it saw last and adds it (one atomic) only when another
 *     bin comes, so repeated values (all-equal or sorted input, a hot bin)
 *     cost one atomic per run instead of one per element; at the end, when
 *     all 32 lanes of a warp hold the same bin, their sums are reduced with
 *     shuffles and lane 0 issues one atomic for the warp (warp-aggregated
 *     atomics, as in NVIDIA's blog post "CUDA Pro Tip: Optimized Filtering
 *     with Warp-Aggregated Atomics", 2014).  Shared-memory float and double
 *     bins, whose atomics are compare-and-swap spins in the hardware, are
 *     also summed over the lanes that add to the same bin together, and
 *     64-bit integer bins are added as two native 32-bit adds with a carry
 *     (shared_add, cuda/device_helpers.cuh).
 *   - The range check is fused with the counting: each thread keeps the
 *     largest value and the first refused position it saw; warps reduce them
 *     and one atomicMax per warp publishes them in the bc_status.  The last
 *     block to finish (elected with a counter, after a fence) copies the
 *     value at the first refused position into the status, so the host reads
 *     everything it needs with a single device-to-host copy.
 *   - x is read with streaming loads of 4 elements (2 of 64-bit dtypes: up
 *     to 16 bytes; __ldcs, since x is read once and should not push the
 *     histogram out of L2) when it is contiguous, else element by element
 *     with its stride.  A contiguous view that does not start on a vector
 *     boundary (x[1:]) has its first few elements peeled off and counted one
 *     at a time, so that the rest still goes through vector loads (when the
 *     weights, if any, are then aligned too).  The inputs of a computed x
 *     or of computed weights (a fused kernel) are read the same way, the
 *     graph's code then run on each of the V elements in turn
 *     (bc_fused_x_vec, bc_fused_weight_vec): a computed x when each of its
 *     array inputs is broadcast or contiguous and aligned at the head of
 *     its first contiguous one, computed weights when each of theirs is at
 *     that head; others are computed one element at a time, with the same
 *     code, so the values are the same bits on either path.  Loops over x are uniform
 *     across a warp (all lanes iterate together), so that the lanes meet for
 *     the final warp reduction.  Positions are 64-bit.
 *
 * Counts are exact: shared counters are 32-bit (a block never counts more
 * than BC_CUDA_MAX_ELEMS_PER_BLOCK elements), global ones are the unsigned
 * integer of the accumulator's width, and integer weights are summed in
 * unsigned arithmetic, so sums wrap modulo 2**bits as on the CPU.  Float
 * weights are summed with floating-point atomics: the order of the additions
 * varies from run to run, so float results can differ in the last bits
 * between runs.  float32 weights are summed in float32 in shared memory (its
 * float atomics keep subnormals) and in float64 everywhere else: the running
 * sums, the bins beyond the shared window and the merge of the blocks'
 * histograms go to a float64 accumulator with the native double atomic add
 * (red.global.add.f64, which keeps subnormals), which the finish kernel
 * rounds to float32 once.  A compare-and-swap loop on float32 (global_add,
 * cuda/device_helpers.cuh) would complete about one update per L2 round
 * trip when many blocks merge into the same bins.
 */
#ifndef BINCOUNT_CUDA_HIST_CUH
#define BINCOUNT_CUDA_HIST_CUH

#include "cuda/device_helpers.cuh"

namespace bc {

/*
 * The bin of value v under the form's rules.  Returns false for a refused
 * value (negative in the bincount form; outside [-n, n) in the scatter-add
 * form, where a negative index wraps once).  In the bincount form it also
 * raises vmax.
 */
template <typename X>
__device__ __forceinline__ bool to_bin(X v, sign_tag<true>, const bc_hist_params &p,
                                       bc_u64 &bin, bc_u64 &vmax)
{
    const bc_i64 s = (bc_i64)v;
    if (p.scatter) {
        if (s < -p.n || s >= p.n)
            return false;
        bin = (bc_u64)(s < 0 ? s + p.n : s);
        return true;
    }
    if (s < 0)
        return false;
    bin = (bc_u64)s;
    vmax = bin > vmax ? bin : vmax;
    return true;
}
template <typename X>
__device__ __forceinline__ bool to_bin(X v, sign_tag<false>, const bc_hist_params &p,
                                       bc_u64 &bin, bc_u64 &vmax)
{
    bin = (bc_u64)v;
    if (p.scatter)
        return bin < (bc_u64)p.n;
    vmax = bin > vmax ? bin : vmax;
    return true;
}

/* Stand-ins of the generated prologue (see BC_FUSED_NAME above), so that
 * the template compiles on its own; no kernel instantiated here calls them. */
#ifndef BC_FUSED_FW
#define BC_FUSED_FW 0
__device__ __forceinline__ double bc_fused_weight(const bc_fused_params &, bc_i64)
{
    return 0.0;
}
template <int V, typename O>
__device__ __forceinline__ void bc_fused_weight_vec(const bc_fused_params &, bc_i64, O (&out)[V])
{
    for (int j = 0; j < V; j++)
        out[j] = (O)0;
}
__device__ __forceinline__ bool bc_fused_weight_vec_ok(const bc_fused_params &, bc_i64, int)
{
    return false;
}
#endif
#ifndef BC_FUSED_FX
#define BC_FUSED_FX 0
__device__ __forceinline__ bc_i64 bc_fused_x(const bc_fused_params &, bc_i64)
{
    return 0;
}
template <int V, typename O>
__device__ __forceinline__ void bc_fused_x_vec(const bc_fused_params &, bc_i64, O (&out)[V])
{
    for (int j = 0; j < V; j++)
        out[j] = (O)0;
}
__device__ __forceinline__ bool bc_fused_x_vec_ok(const bc_fused_params &, bc_i64, int)
{
    return false;
}
__device__ __forceinline__ bc_i64 bc_fused_x_head(const bc_fused_params &, int)
{
    return 0;
}
#endif

/*
 * One histogram pass.  X: dtype of x; W: dtype of the weights (unused when
 * counting); SH: type of a shared-memory bin; ACC: type of a global bin (the
 * accumulator); WEIGHTED: weights or a count; FUSED: the weights are
 * computed at each position by bc_fused_weight from the fused inputs `f`
 * (no weights array); FX: so is x, by bc_fused_x (no x array).
 */
template <typename X, typename W, typename SH, typename ACC, bool WEIGHTED, bool FUSED, bool FX>
struct hist_pass {
    /* Elements loaded together by one thread: 4 (2 of 64-bit dtypes), that
     * is 16 bytes of 32- and 64-bit x; narrower x is counted at a rate where
     * the atomics, not the loads, set the pace. */
    enum { V = sizeof(X) == 8 ? 2 : 4, X_ALIGN = V * (int)sizeof(X) };
    /* Vectors in flight per thread: two when counting; the weights bring
     * their own loads. */
    enum { UNROLL = WEIGHTED ? 1 : 2 };
    /* Alignment the vector path needs for the weights. */
    enum { W_ALIGN = V * (int)sizeof(W) < 16 ? V * (int)sizeof(W) : 16 };
    typedef typename traits<X>::sign sign;

    const bc_hist_params &p;
    const bc_fused_params *f; /* FUSED, FX: the inputs of the weights, of x */
    const X *x;
    const W *w;
    ACC *out;
    SH *sh;          /* this warp's copy of the shared histogram */
    bc_u64 lo;       /* window start */
    bc_u64 span;     /* window length */
    bc_u64 sbins;    /* bins [lo, lo + sbins) are in shared memory */
    bc_u64 vmax;     /* largest value seen (bincount form) */
    bc_u64 first_bad;
    unsigned lane;
    /* The thread's current run: increments for one bin, not yet added. */
    bc_u64 run_bin;
    ACC run_sum;
    bool have;

    __device__ __forceinline__ hist_pass(const bc_hist_params &params,
                                         const bc_fused_params *fused, SH *shared)
        : p(params), f(fused), x(reinterpret_cast<const X *>(params.x)),
          w(reinterpret_cast<const W *>(params.w)), out(reinterpret_cast<ACC *>(params.out)),
          sh(shared), lo((bc_u64)params.lo), span((bc_u64)(params.hi - params.lo)),
          sbins((bc_u64)params.shared_bins), vmax(0), first_bad(NO_POSITION),
          lane(threadIdx.x & 31u), run_bin(0), run_sum((ACC)0), have(false)
    {
    }

    __device__ __forceinline__ ACC weight_at(bc_i64 pos) const
    {
        if (!WEIGHTED)
            return (ACC)1;
        if (FUSED)
            return (ACC)(W)bc_fused_weight(*f, pos);
        return (ACC)__ldcs(w + pos * p.w_stride);
    }

    /* Add `amount` to bin `bin` (which lies in the window). */
    __device__ __forceinline__ void emit(bc_u64 bin, ACC amount)
    {
        const bc_u64 b = bin - lo;
        if (b < sbins)
            shared_add(sh + b, (SH)amount, (unsigned)b);
        else
            global_add(out + bin, amount);
    }

    /* Add `inc` to `bin`: to the current run while the bin repeats, else
     * emit the run and start another. */
    __device__ __forceinline__ void add(bc_u64 bin, ACC inc)
    {
        if (have && bin == run_bin) {
            run_sum += inc;
            return;
        }
        if (have)
            emit(run_bin, run_sum);
        run_bin = bin;
        run_sum = inc;
        have = true;
    }

    /* Check and count the V2 elements xv (positions pos0 + k), when `valid`. */
    template <int V2>
    __device__ __forceinline__ void process(const X (&xv)[V2], const ACC (&inc)[V2],
                                            bc_i64 pos0, bool valid)
    {
        if (!valid)
            return;
#pragma unroll
        for (int k = 0; k < V2; k++) {
            bc_u64 bin = 0;
            if (!to_bin(xv[k], sign(), p, bin, vmax)) {
                const bc_u64 pos = (bc_u64)(pos0 + k);
                first_bad = pos < first_bad ? pos : first_bad;
            } else if (bin - lo < span) {
                add(bin, inc[k]);
            }
        }
    }

    /* Emit the last runs.  All lanes of the warp call it together: when every
     * lane's run is on the same bin (all-equal input), one atomic adds the
     * warp's sum. */
    __device__ __forceinline__ void flush()
    {
        const bc_u64 lead = __shfl_sync(FULL_WARP, run_bin, 0);
        if (__all_sync(FULL_WARP, have && run_bin == lead)) {
            const ACC total = warp_sum(run_sum);
            if (lane == 0)
                emit(lead, total);
        } else if (have) {
            emit(run_bin, run_sum);
        }
        have = false;
    }

    /* Elements [start, end) one at a time, with the strides of x and w. */
    __device__ __forceinline__ void scalar_loop(bc_i64 start, bc_i64 end, bc_i64 first_warp,
                                                bc_i64 warps)
    {
        for (bc_i64 base = start + first_warp * 32; base < end; base += warps * 32) {
            const bc_i64 pos = base + (bc_i64)lane;
            const bool valid = pos < end;
            X xv[1] = {(X)0};
            ACC inc[1] = {(ACC)0};
            if (valid) {
                xv[0] = FX ? (X)bc_fused_x(*f, pos) : __ldcs(x + pos * p.x_stride);
                inc[0] = weight_at(pos);
            }
            process(xv, inc, pos, valid);
        }
    }

    /* nvec whole vectors of V elements from position `start`: x contiguous,
     * and x + start aligned to a vector (FX: bc_fused_x_vec_ok at start);
     * FW_VEC: computed weights from vector loads of their inputs (one loop
     * for each, so that neither holds the registers of the other). */
    template <bool FW_VEC>
    __device__ __forceinline__ void vector_loop(bc_i64 start, bc_i64 nvec, bc_i64 first_warp,
                                                bc_i64 warps)
    {
        const bc_i64 stride = warps * 32;
        ACC w0 = (ACC)1;
        if (WEIGHTED && !FUSED && p.w_stride == 0)
            w0 = weight_at(0);
        for (bc_i64 base = first_warp * 32; base < nvec; base += stride * UNROLL) {
            X xv[UNROLL][V];
            ACC inc[UNROLL][V];
            bool valid[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const bc_i64 vi = base + u * stride + (bc_i64)lane;
                valid[u] = vi < nvec;
                if (valid[u]) {
                    const bc_i64 pos = start + vi * V;
                    if (FX)
                        bc_fused_x_vec<V>(*f, pos, xv[u]);
                    else
                        vec_load<X, V>::load(x + pos, xv[u]);
                    if (FUSED && FW_VEC) {
                        W wv[V];
                        bc_fused_weight_vec<V>(*f, pos, wv);
#pragma unroll
                        for (int k = 0; k < V; k++)
                            inc[u][k] = (ACC)wv[k];
                    } else if (FUSED) {
#pragma unroll
                        for (int k = 0; k < V; k++)
                            inc[u][k] = weight_at(pos + k);
                    } else if (WEIGHTED && p.w_stride != 0) {
                        W wv[V];
                        vec_load<W, V>::load(w + pos, wv);
#pragma unroll
                        for (int k = 0; k < V; k++)
                            inc[u][k] = (ACC)wv[k];
                    } else {
#pragma unroll
                        for (int k = 0; k < V; k++)
                            inc[u][k] = w0;
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                process(xv[u], inc[u], start + (base + u * stride + (bc_i64)lane) * V, valid[u]);
        }
    }

    __device__ __forceinline__ void run()
    {
        const unsigned warps_per_block = blockDim.x >> 5;
        const bc_i64 first_warp = (bc_i64)blockIdx.x * warps_per_block + (threadIdx.x >> 5);
        const bc_i64 warps = (bc_i64)gridDim.x * warps_per_block;
        /* Contiguous x: peel the `head` elements before the first vector
         * boundary, then whole vectors, then the tail.  A computed x (FX)
         * takes the head of its first contiguous input, and the vector loop
         * when all its inputs are aligned there; computed weights take it
         * when all theirs are, else they are computed one at a time. */
        bc_i64 head = FX ? bc_fused_x_head(*f, V)
                         : (bc_i64)(((bc_u64)X_ALIGN - (p.x & (bc_u64)(X_ALIGN - 1))) &
                                    (bc_u64)(X_ALIGN - 1)) /
                               (bc_i64)sizeof(X);
        head = head < p.size ? head : p.size;
        const bool x_vec = FX ? bc_fused_x_vec_ok(*f, head, V)
                              : p.x_stride == 1 && (p.x & (bc_u64)(sizeof(X) - 1)) == 0;

        const bool w_vec =
            !WEIGHTED || FUSED || p.w_stride == 0 ||
            (p.w_stride == 1 && ((p.w + (bc_u64)head * sizeof(W)) & (bc_u64)(W_ALIGN - 1)) == 0);
        if (x_vec && w_vec) {
            const bc_i64 nvec = (p.size - head) / V;
            scalar_loop(0, head, first_warp, warps);
            if (FUSED && bc_fused_weight_vec_ok(*f, head, V))
                vector_loop<FUSED>(head, nvec, first_warp, warps);
            else
                vector_loop<false>(head, nvec, first_warp, warps);
            scalar_loop(head + nvec * V, p.size, first_warp, warps);
        } else {
            scalar_loop(0, p.size, first_warp, warps);
        }
        flush();
    }
};

/* Publish a thread's range check (its largest value, its first refused
 * position): one atomic per warp.  Every lane of the warp calls it. */
__device__ __forceinline__ void publish_check(bc_status *status, bc_u64 vmax, bc_u64 first_bad)
{
    vmax = warp_extreme<true>(vmax);
    first_bad = warp_extreme<false>(first_bad);
    if ((threadIdx.x & 31u) == 0u) {
        if (vmax != 0)
            atomicMax(&status->max_value, vmax);
        if (first_bad != NO_POSITION)
            atomicMax(&status->bad_pos_inv, ~first_bad);
    }
}

/* The end of a block, after a barrier that follows its last add: the last
 * block to finish records the value at the first refused position.  The
 * barrier orders the block's adds before thread 0's fence, which is
 * cumulative: one fence per block, not one per thread. */
template <typename X, bool FX>
__device__ __forceinline__ void last_block_check(const bc_hist_params &p, const bc_fused_params *f,
                                                 bc_status *status)
{
    if (threadIdx.x == 0) {
        __threadfence();
        const bc_u32 ticket = atomicAdd(&status->blocks_done, 1u);
        if (ticket == gridDim.x - 1) {
            __threadfence();
            const bc_u64 inv = atomicAdd(&status->bad_pos_inv, 0ull);
            if (inv != 0) {
                const X *x = reinterpret_cast<const X *>(p.x);
                const bc_i64 pos = (bc_i64)(~inv);
                status->bad_value = as_u64(FX ? (X)bc_fused_x(*f, pos) : x[pos * p.x_stride],
                                           typename traits<X>::sign());
            }
        }
    }
}

template <typename X, typename W, typename SH, typename ACC, bool WEIGHTED, bool FUSED, bool FX>
__device__ __forceinline__ void hist(const bc_hist_params &p, const bc_fused_params *f)
{
    SH *shared = reinterpret_cast<SH *>(dynamic_shared());
    const bc_i64 sbins = p.shared_bins;
    const bc_i64 all_bins = sbins * p.copies;
    bc_status *status = reinterpret_cast<bc_status *>(p.status);

    for (bc_i64 i = threadIdx.x; i < all_bins; i += blockDim.x)
        shared[i] = (SH)0;
    __syncthreads();

    hist_pass<X, W, SH, ACC, WEIGHTED, FUSED, FX> pass(
        p, f, shared + (p.copies > 1 ? (threadIdx.x >> 5) % (unsigned)p.copies : 0u) * sbins);
    pass.run();

    publish_check(status, pass.vmax, pass.first_bad);
    __syncthreads();

    /* Merge the copies and add the block's histogram to the accumulator. */
    ACC *out = reinterpret_cast<ACC *>(p.out);
    for (bc_i64 b = threadIdx.x; b < sbins; b += blockDim.x) {
        SH total = shared[b];
        for (int c = 1; c < p.copies; c++)
            total += shared[c * sbins + b];
        if (total != (SH)0)
            global_add(out + p.lo + b, (ACC)total);
    }

    __syncthreads();
    last_block_check<X, FX>(p, f, status);
}

template <typename ACC, typename OUT> __device__ __forceinline__ void finish(const bc_finish_params &p)
{
    const ACC *src = reinterpret_cast<const ACC *>(p.src);
    OUT *dst = reinterpret_cast<OUT *>(p.dst);
    const bc_i64 step = (bc_i64)gridDim.x * blockDim.x;
    for (bc_i64 i = (bc_i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += step)
        dst[i] = (OUT)src[i];
}

} /* namespace bc */

#endif /* BINCOUNT_CUDA_HIST_CUH */
