/*
 * bincount_cuda_kernel.cu -- the CUDA kernels of aesara_bincount.GpuBincount.
 *
 * Compiled at run time with NVRTC (aesara_bincount_core/cuda/nvrtc.py), with the
 * folder of this file on the include path.  Valid CUDA C++17 on its own: with
 * no -D option it instantiates every kernel; -DBC_X_DTYPE=<code> (a BC_DT_*
 * code of bincount_cuda.h) keeps only those for one dtype of x, which is how
 * the kernel layer compiles it, one module per dtype of x.
 *
 * Kernels (extern "C", one bc_hist_params or bc_finish_params by value):
 *
 *   bincount_hist_<x>_<inc>   one pass over x: for each element, its bin
 *                             (the value itself; in the scatter-add form a
 *                             negative index wraps once) is checked, and when
 *                             it lies in the window [lo, hi) the increment is
 *                             added to out[bin].  <x> names the dtype of x
 *                             (i8 ... u64); <inc> is c32 / c64 for a count in
 *                             32- / 64-bit unsigned integers, or the dtype of
 *                             the weights (i8 ... u64, f32, f64).
 *   bincount_finish_<acc>_<out>  out[i] = (out dtype) acc[i]: u32_u8, u32_u16
 *                             (the low bits: 8- and 16-bit integer outputs
 *                             wrap), u64_f32, u64_f64 (counts to floats).
 *   scatter_rows_check_<idx>  the scatter-add of rows, first kernel: finds the
 *                             first index outside [-nrows, nrows) (one
 *                             bc_rows_params; see "Rows" below).
 *   scatter_rows_add_<idx>_<out>  second kernel: adds the rows of the
 *                             increments into out (every index was checked).
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
 *     with Warp-Aggregated Atomics", 2014).
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
 *     weights, if any, are then aligned too).  Loops over x are uniform
 *     across a warp (all lanes iterate together), so that the lanes meet for
 *     the final warp reduction.  Positions are 64-bit.
 *
 * Counts are exact: shared counters are 32-bit (a block never counts more
 * than BC_CUDA_MAX_ELEMS_PER_BLOCK elements), global ones are the unsigned
 * integer of the accumulator's width, and integer weights are summed in
 * unsigned arithmetic, so sums wrap modulo 2**bits as on the CPU.  Float
 * weights are summed with floating-point atomics: the order of the additions
 * varies from run to run, so float results can differ in the last bits
 * between runs.  Subnormal float32 sums are kept: the global float atomic
 * add (atom.global.add.f32) flushes subnormal inputs and results to zero,
 * so float32 adds to global memory go through a compare-and-swap loop
 * (global_add); shared-memory float atomics and double atomics keep
 * subnormals (NVIDIA developer forum, "atomicAdd(float) does not add very
 * small values", 2013, confirmed by experiment there).  The module is
 * compiled without -ftz (NVRTC's default), so the loop's addition keeps them.
 *
 * Rows (the scatter-add of rows, out[idx[i]] += inc[i] for rows of D
 * elements; launched by scatter_add_cuda_launch.h):
 *   - The checking kernel reads idx once and publishes the first position of
 *     an index outside [-nrows, nrows) with one atomicMax of its complement
 *     per thread that saw one; the host reads it back before the adding
 *     kernel is queued, so nothing is written when an index is bad.
 *   - The adding kernel splits the work into items: a chunk of `chunk`
 *     consecutive indices times a tile of columns.  A warp takes an item at a
 *     time.  Its lanes share rows of `lanes` = min(32, D) lanes: a wide row
 *     (D >= 32) is spread over the whole warp, lane l holding columns l,
 *     l + 32, ... of the tile (BC_CUDA_ROWS_TILE of them), so each load of
 *     the warp reads 32 consecutive elements of one row (coalesced); narrow
 *     rows are packed 32 / D to a warp step, so that the warp still reads
 *     consecutive memory.  Hot rows: each lane keeps running sums (in
 *     registers) for the row it saw last and adds them to out with one
 *     atomic per column only when the row changes and at the end of the
 *     item, so runs of equal indices (sorted indices, a hot row) cost one
 *     atomic per run and column instead of one per increment.
 *   - The adds to out are atomics: float32 through the compare-and-swap of
 *     global_add (subnormals kept), float64 atomicAdd, 32- and 64-bit
 *     integers unsigned atomicAdd, 8- and 16-bit integers a compare-and-swap
 *     on the aligned 32-bit word that holds them (as CUDA has no narrower
 *     atomics).  Integer sums wrap modulo 2**bits; float sums are taken in
 *     an order that varies from run to run (running sums, then atomics in
 *     any order), so float results can differ from np.add.at's sequential
 *     sum, and between runs, in the last bits.
 */
#include "bincount_cuda.h"

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

static constexpr bc_u64 NO_POSITION = ~0ull;
static constexpr unsigned FULL_WARP = 0xffffffffu;

/* A value of x as 64 bits: sign-extended when signed. */
template <typename X> __device__ __forceinline__ bc_u64 as_u64(X v, sign_tag<true>)
{
    return (bc_u64)(bc_i64)v;
}
template <typename X> __device__ __forceinline__ bc_u64 as_u64(X v, sign_tag<false>)
{
    return (bc_u64)v;
}

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

#ifndef BC_DYNAMIC_SHARED
/* The block's dynamic shared memory (a hook, so that a CPU emulation used by
 * the test-suite can supply its own). */
__device__ __forceinline__ bc_u64 *dynamic_shared()
{
    extern __shared__ bc_u64 bc_dynamic_shared_memory[];
    return bc_dynamic_shared_memory;
}
#endif

/*
 * One histogram pass.  X: dtype of x; W: dtype of the weights (unused when
 * counting); SH: type of a shared-memory bin; ACC: type of a global bin (the
 * accumulator); WEIGHTED: weights or a count.
 */
template <typename X, typename W, typename SH, typename ACC, bool WEIGHTED> struct hist_pass {
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

    __device__ __forceinline__ hist_pass(const bc_hist_params &params, SH *shared)
        : p(params), x(reinterpret_cast<const X *>(params.x)),
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
        return (ACC)__ldcs(w + pos * p.w_stride);
    }

    /* Add `amount` to bin `bin` (which lies in the window). */
    __device__ __forceinline__ void emit(bc_u64 bin, ACC amount)
    {
        const bc_u64 b = bin - lo;
        if (b < sbins)
            atomicAdd(sh + b, (SH)amount);
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
                xv[0] = __ldcs(x + pos * p.x_stride);
                inc[0] = weight_at(pos);
            }
            process(xv, inc, pos, valid);
        }
    }

    /* nvec whole vectors of V elements from position `start`: x contiguous,
     * and x + start aligned to a vector. */
    __device__ __forceinline__ void vector_loop(bc_i64 start, bc_i64 nvec, bc_i64 first_warp,
                                                bc_i64 warps)
    {
        const bc_i64 stride = warps * 32;
        const X *xs = x + start;
        ACC w0 = (ACC)1;
        if (WEIGHTED && p.w_stride == 0)
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
                    vec_load<X, V>::load(xs + vi * V, xv[u]);
                    if (WEIGHTED && p.w_stride != 0) {
                        W wv[V];
                        vec_load<W, V>::load(w + start + vi * V, wv);
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
         * boundary, then whole vectors, then the tail. */
        const bool x_vec = p.x_stride == 1 && (p.x & (bc_u64)(sizeof(X) - 1)) == 0;
        bc_i64 head = (bc_i64)(((bc_u64)X_ALIGN - (p.x & (bc_u64)(X_ALIGN - 1))) &
                               (bc_u64)(X_ALIGN - 1)) /
                      (bc_i64)sizeof(X);
        head = head < p.size ? head : p.size;
        const bool w_vec =
            !WEIGHTED || p.w_stride == 0 ||
            (p.w_stride == 1 && ((p.w + (bc_u64)head * sizeof(W)) & (bc_u64)(W_ALIGN - 1)) == 0);
        if (x_vec && w_vec) {
            const bc_i64 nvec = (p.size - head) / V;
            scalar_loop(0, head, first_warp, warps);
            vector_loop(head, nvec, first_warp, warps);
            scalar_loop(head + nvec * V, p.size, first_warp, warps);
        } else {
            scalar_loop(0, p.size, first_warp, warps);
        }
        flush();
    }
};

template <typename X, typename W, typename SH, typename ACC, bool WEIGHTED>
__device__ __forceinline__ void hist(const bc_hist_params &p)
{
    SH *shared = reinterpret_cast<SH *>(dynamic_shared());
    const bc_i64 sbins = p.shared_bins;
    const bc_i64 all_bins = sbins * p.copies;
    bc_status *status = reinterpret_cast<bc_status *>(p.status);

    for (bc_i64 i = threadIdx.x; i < all_bins; i += blockDim.x)
        shared[i] = (SH)0;
    __syncthreads();

    hist_pass<X, W, SH, ACC, WEIGHTED> pass(
        p, shared + (p.copies > 1 ? (threadIdx.x >> 5) % (unsigned)p.copies : 0u) * sbins);
    pass.run();

    /* Publish the range check: one atomic per warp. */
    const bc_u64 vmax = warp_extreme<true>(pass.vmax);
    const bc_u64 first_bad = warp_extreme<false>(pass.first_bad);
    if (pass.lane == 0) {
        if (vmax != 0)
            atomicMax(&status->max_value, vmax);
        if (first_bad != NO_POSITION)
            atomicMax(&status->bad_pos_inv, ~first_bad);
    }
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

    /* The last block to finish records the value at the first refused position. */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const bc_u32 ticket = atomicAdd(&status->blocks_done, 1u);
        if (ticket == gridDim.x - 1) {
            __threadfence();
            const bc_u64 inv = atomicAdd(&status->bad_pos_inv, 0ull);
            if (inv != 0) {
                const X *x = reinterpret_cast<const X *>(p.x);
                status->bad_value =
                    as_u64(x[(bc_i64)(~inv) * p.x_stride], typename traits<X>::sign());
            }
        }
    }
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

/* ---- extern "C" kernels ---- */

#define BC_HIST(XN, XT, IN, WT, SHT, ACCT, WEIGHTED)                                          \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS, BC_CUDA_BLOCKS_PER_SM)      \
        bincount_hist_##XN##_##IN(const bc_hist_params p)                                     \
    {                                                                                         \
        bc::hist<XT, WT, SHT, ACCT, WEIGHTED>(p);                                             \
    }

/* Every increment kind for one dtype of x: counts, then each weights dtype. */
#define BC_HIST_FOR_X(XN, XT)                                                                 \
    BC_HIST(XN, XT, c32, bc_u32, bc_u32, bc_u32, false)                                       \
    BC_HIST(XN, XT, c64, bc_u64, bc_u32, bc_u64, false)                                       \
    BC_HIST(XN, XT, i8, signed char, bc_u32, bc_u32, true)                                    \
    BC_HIST(XN, XT, i16, short, bc_u32, bc_u32, true)                                         \
    BC_HIST(XN, XT, i32, int, bc_u32, bc_u32, true)                                           \
    BC_HIST(XN, XT, i64, long long, bc_u64, bc_u64, true)                                     \
    BC_HIST(XN, XT, u8, unsigned char, bc_u32, bc_u32, true)                                  \
    BC_HIST(XN, XT, u16, unsigned short, bc_u32, bc_u32, true)                                \
    BC_HIST(XN, XT, u32, unsigned int, bc_u32, bc_u32, true)                                  \
    BC_HIST(XN, XT, u64, unsigned long long, bc_u64, bc_u64, true)                            \
    BC_HIST(XN, XT, f32, float, float, float, true)                                           \
    BC_HIST(XN, XT, f64, double, double, double, true)

#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT8
BC_HIST_FOR_X(i8, signed char)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT16
BC_HIST_FOR_X(i16, short)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT32
BC_HIST_FOR_X(i32, int)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT64
BC_HIST_FOR_X(i64, long long)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT8
BC_HIST_FOR_X(u8, unsigned char)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT16
BC_HIST_FOR_X(u16, unsigned short)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT32
BC_HIST_FOR_X(u32, unsigned int)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT64
BC_HIST_FOR_X(u64, unsigned long long)
#endif

#define BC_FINISH(AN, AT, ON, OT)                                                             \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        bincount_finish_##AN##_##ON(const bc_finish_params p)                                 \
    {                                                                                         \
        bc::finish<AT, OT>(p);                                                                \
    }

BC_FINISH(u32, bc_u32, u8, unsigned char)
BC_FINISH(u32, bc_u32, u16, unsigned short)
BC_FINISH(u64, bc_u64, f32, float)
BC_FINISH(u64, bc_u64, f64, double)

#undef BC_HIST
#undef BC_HIST_FOR_X
#undef BC_FINISH

/* ---- the scatter-add of rows ---- */
namespace bc {

/* A row index as a 64-bit row, wrapped once when negative (checked before). */
template <typename I> __device__ __forceinline__ bc_i64 row_of(I v, bc_i64 nrows, sign_tag<true>)
{
    const bc_i64 s = (bc_i64)v;
    return s < 0 ? s + nrows : s;
}
template <typename I> __device__ __forceinline__ bc_i64 row_of(I v, bc_i64, sign_tag<false>)
{
    return (bc_i64)(bc_u64)v;
}

/* Whether index v lies in [-nrows, nrows). */
template <typename I> __device__ __forceinline__ bool row_ok(I v, bc_i64 nrows, sign_tag<true>)
{
    const bc_i64 s = (bc_i64)v;
    return s >= -nrows && s < nrows;
}
template <typename I> __device__ __forceinline__ bool row_ok(I v, bc_i64 nrows, sign_tag<false>)
{
    return (bc_u64)v < (bc_u64)nrows;
}

template <typename I> __device__ __forceinline__ void rows_check(const bc_rows_params &p)
{
    const I *idx = reinterpret_cast<const I *>(p.idx);
    bc_status *status = reinterpret_cast<bc_status *>(p.status);
    const bc_i64 step = (bc_i64)gridDim.x * blockDim.x;
    bc_u64 first_bad = NO_POSITION;
    for (bc_i64 i = (bc_i64)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += step) {
        if (!row_ok(idx[i * p.idx_stride], p.nrows, typename traits<I>::sign())) {
            first_bad = (bc_u64)i;
            break; /* this thread's later positions are larger */
        }
    }
    if (first_bad != NO_POSITION)
        atomicMax(&status->bad_pos_inv, ~first_bad);
}

/* How a running sum of dtype OUT is kept (ACC) and added to out. */
template <typename OUT> struct rows_acc;
template <> struct rows_acc<float> {
    typedef float type;
    static __device__ __forceinline__ void add(float *p, float v) { global_add(p, v); }
};
template <> struct rows_acc<double> {
    typedef double type;
    static __device__ __forceinline__ void add(double *p, double v) { atomicAdd(p, v); }
};
/* 32- and 64-bit integers: unsigned arithmetic, so sums wrap. */
#define BC_ROWS_WORD(T, U)                                                                    \
    template <> struct rows_acc<T> {                                                          \
        typedef U type;                                                                       \
        static __device__ __forceinline__ void add(T *p, U v)                                 \
        {                                                                                     \
            atomicAdd(reinterpret_cast<U *>(p), v);                                           \
        }                                                                                     \
    };
BC_ROWS_WORD(int, bc_u32)
BC_ROWS_WORD(unsigned int, bc_u32)
BC_ROWS_WORD(long long, bc_u64)
BC_ROWS_WORD(unsigned long long, bc_u64)
#undef BC_ROWS_WORD
/* 8- and 16-bit integers: a compare-and-swap on the aligned 32-bit word that
 * holds the element (CUDA has no narrower atomics); the other bytes of the
 * word are written back as they were.  The word starts inside the
 * allocation (allocations are aligned to 256 bytes), but for the last
 * elements of an array whose end is not a multiple of 4 bytes it reaches up
 * to 3 bytes past the array's end: inside CuPy's memory pool, whose blocks
 * are multiples of 512 bytes, so nothing else is touched; compute-sanitizer's
 * memcheck, with plain cudaMalloc allocations, would report it as an
 * out-of-bounds access.  Not yet run under it (no GPU lent). */
template <typename T> __device__ __forceinline__ void narrow_add(T *p, bc_u32 v)
{
    const bc_u64 addr = reinterpret_cast<bc_u64>(p);
    bc_u32 *word = reinterpret_cast<bc_u32 *>(addr & ~(bc_u64)3);
    const bc_u32 shift = (bc_u32)(addr & 3) * 8u;
    const bc_u32 mask = (bc_u32)((1ull << (8 * sizeof(T))) - 1ull) << shift;
    bc_u32 seen = *word, before;
    do {
        before = seen;
        const bc_u32 sum = ((before >> shift) + v) << shift;
        seen = atomicCAS(word, before, (before & ~mask) | (sum & mask));
    } while (seen != before);
}
#define BC_ROWS_NARROW(T)                                                                     \
    template <> struct rows_acc<T> {                                                          \
        typedef bc_u32 type;                                                                  \
        static __device__ __forceinline__ void add(T *p, bc_u32 v) { narrow_add(p, v); }      \
    };
BC_ROWS_NARROW(signed char)
BC_ROWS_NARROW(unsigned char)
BC_ROWS_NARROW(short)
BC_ROWS_NARROW(unsigned short)
#undef BC_ROWS_NARROW

template <typename I, typename OUT> __device__ __forceinline__ void rows_add(const bc_rows_params &p)
{
    typedef typename rows_acc<OUT>::type ACC;
    enum { TILE = BC_CUDA_ROWS_TILE };
    const I *idx = reinterpret_cast<const I *>(p.idx);
    const OUT *inc = reinterpret_cast<const OUT *>(p.inc);
    OUT *out = reinterpret_cast<OUT *>(p.out);
    const bc_i64 lanes = p.lanes;
    const bc_i64 group = 32 / lanes; /* rows a warp step covers */
    const bc_i64 lane = (bc_i64)(threadIdx.x & 31u);
    const bc_i64 sub = lane / lanes; /* which of them is this lane's */
    const bc_i64 col_lane = lane % lanes;
    const bc_i64 warps_per_block = (bc_i64)(blockDim.x >> 5);
    const bc_i64 warps = (bc_i64)gridDim.x * warps_per_block;
    if (sub >= group)
        return; /* the lanes left over when 32 is not a multiple of D */
    for (bc_i64 item = (bc_i64)blockIdx.x * warps_per_block + (threadIdx.x >> 5); item < p.items;
         item += warps) {
        const bc_i64 begin = (item / p.tiles) * p.chunk;
        const bc_i64 end = begin + p.chunk < p.n ? begin + p.chunk : p.n;
        const bc_i64 col0 = (item % p.tiles) * lanes * TILE + col_lane;
        ACC sum[TILE];
        bc_i64 run_row = -1;
        for (bc_i64 i = begin + sub; i < end; i += group) {
            const bc_i64 row = row_of(idx[i * p.idx_stride], p.nrows, typename traits<I>::sign());
            if (row != run_row) {
                if (run_row >= 0) {
#pragma unroll
                    for (int t = 0; t < TILE; t++) {
                        const bc_i64 col = col0 + t * lanes;
                        if (col < p.row_size)
                            rows_acc<OUT>::add(out + run_row * p.out_row + col, sum[t]);
                    }
                }
                run_row = row;
#pragma unroll
                for (int t = 0; t < TILE; t++)
                    sum[t] = (ACC)0;
            }
            const OUT *src = inc + i * p.inc_row;
#pragma unroll
            for (int t = 0; t < TILE; t++) {
                const bc_i64 col = col0 + t * lanes;
                if (col < p.row_size)
                    sum[t] += (ACC)__ldcs(src + col * p.inc_elem);
            }
        }
        if (run_row >= 0) {
#pragma unroll
            for (int t = 0; t < TILE; t++) {
                const bc_i64 col = col0 + t * lanes;
                if (col < p.row_size)
                    rows_acc<OUT>::add(out + run_row * p.out_row + col, sum[t]);
            }
        }
    }
}

} /* namespace bc */

#define BC_ROWS_ADD(XN, XT, ON, OT)                                                           \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        scatter_rows_add_##XN##_##ON(const bc_rows_params p)                                  \
    {                                                                                         \
        bc::rows_add<XT, OT>(p);                                                              \
    }

/* The checking kernel and every output dtype for one dtype of idx. */
#define BC_ROWS_FOR_X(XN, XT)                                                                 \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        scatter_rows_check_##XN(const bc_rows_params p)                                       \
    {                                                                                         \
        bc::rows_check<XT>(p);                                                                \
    }                                                                                         \
    BC_ROWS_ADD(XN, XT, i8, signed char)                                                      \
    BC_ROWS_ADD(XN, XT, i16, short)                                                           \
    BC_ROWS_ADD(XN, XT, i32, int)                                                             \
    BC_ROWS_ADD(XN, XT, i64, long long)                                                       \
    BC_ROWS_ADD(XN, XT, u8, unsigned char)                                                    \
    BC_ROWS_ADD(XN, XT, u16, unsigned short)                                                  \
    BC_ROWS_ADD(XN, XT, u32, unsigned int)                                                    \
    BC_ROWS_ADD(XN, XT, u64, unsigned long long)                                              \
    BC_ROWS_ADD(XN, XT, f32, float)                                                           \
    BC_ROWS_ADD(XN, XT, f64, double)

#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT8
BC_ROWS_FOR_X(i8, signed char)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT16
BC_ROWS_FOR_X(i16, short)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT32
BC_ROWS_FOR_X(i32, int)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_INT64
BC_ROWS_FOR_X(i64, long long)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT8
BC_ROWS_FOR_X(u8, unsigned char)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT16
BC_ROWS_FOR_X(u16, unsigned short)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT32
BC_ROWS_FOR_X(u32, unsigned int)
#endif
#if !defined(BC_X_DTYPE) || BC_X_DTYPE == BC_DT_UINT64
BC_ROWS_FOR_X(u64, unsigned long long)
#endif

#undef BC_ROWS_ADD
#undef BC_ROWS_FOR_X

