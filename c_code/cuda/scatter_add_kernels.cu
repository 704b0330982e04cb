/*
 * cuda/scatter_add_kernels.cu -- the CUDA kernels of the scatter-add of rows,
 * aesara_bincount.gpu.GpuScatterAdd: out[idx[i]] += inc[i] for rows of D
 * elements.  Neighbours: cuda/device_helpers.cuh (device helpers shared
 * with the histogram kernels), cuda/kernel_defs.h (bc_rows_params and the
 * BC_CUDA_ROWS_* numbers), cuda/bincount_kernels.cu (the histogram kernels
 * of GpuBincount), cuda_host/scatter_add_launch.h (the launcher).
 *
 * Compiled at run time with NVRTC (aesara_bincount_core/cuda/nvrtc.py), the
 * headers given by name.  Valid CUDA C++17 on its own: with no -D option it
 * instantiates every kernel; -DBC_X_DTYPE=<code> (a BC_DT_* code of
 * cuda/kernel_defs.h) keeps only those for one dtype of idx, which is how the
 * kernel layer compiles it, one module per dtype of idx.
 *
 * Kernels (extern "C", one bc_rows_params by value):
 *
 *   scatter_rows_check_<idx>  first kernel: finds the first index outside
 *                             [-nrows, nrows).
 *   scatter_rows_add_<idx>_<out>  second kernel: adds the rows of the
 *                             increments into out (every index was checked).
 *   scatter_rows_wide_<idx>_f32   instead of it for float32 when a float64
 *                             scratch is used (below): adds the rows into
 *                             the scratch, in float64.
 *   scatter_rows_finish_<idx>_f32  third kernel of the scratch: out +=
 *                             scratch, rounded to float32 once, for the rows
 *                             that idx names.
 *   scatter_rows_det_<idx>_<f32|f64>  instead of the adding kernel under
 *                             aesara.config.deterministic == "more": float
 *                             rows added in index order, np.add.at's bits
 *                             (cuda/scatter_add_det.cuh); for large idx
 *                             also the four stages of its bucket pre-pass
 *                             (p.stage, cuda/scatter_add_det_bucket.cuh).
 *
 * Algorithm:
 *   - The checking kernel reads idx once and publishes the first position of
 *     an index outside [-nrows, nrows) with one atomicMax of its complement
 *     per thread that saw one; the kernels queued after it on the stream
 *     read it first and exit on a bad index, so nothing is written then.
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
 *   - The adds to out are atomics: float64 atomicAdd, 32- and 64-bit
 *     integers unsigned atomicAdd, 8- and 16-bit integers a compare-and-swap
 *     on the aligned 32-bit word that holds them (as CUDA has no narrower
 *     atomics).  float32 (whose native global atomic add flushes subnormals,
 *     cuda/device_helpers.cuh) takes one of two paths, the launcher's
 *     choice (cuda_host/scatter_add_launch.h):
 *       - the float64 scratch, when one the size of the output fits
 *         BC_CUDA_ROWS_SCRATCH_MAX_BYTES and the output has at most
 *         BC_CUDA_ROWS_SCRATCH_ROWS_PER_INDEX rows per index: the running
 *         sums are kept in float64 and added to the scratch with the native
 *         double atomic (red.global.add.f64, which keeps subnormals and
 *         does not serialise on a hot row as a compare-and-swap loop does);
 *         then the finish kernel adds each element's sum to out and rounds
 *         it to float32 once.  The checking kernel sets the rows of the
 *         scratch that idx names to -0.0, the additive identity, and the
 *         finish kernel reads only those rows (so both cost the increments'
 *         size, not the output's); an element whose sum stays -0.0 (no
 *         increment, or only -0.0 ones) is left as it was (base + -0.0).
 *       - otherwise a compare-and-swap loop per element, BC_CUDA_ROWS_TILE of
 *         them side by side (the tile's loads, then its compare-and-swaps,
 *         then again only those that failed: tile_adder), so that a lane has
 *         all its round trips to L2 in flight at once.
 *     Integer sums wrap modulo 2**bits; float sums are taken in an order
 *     that varies from run to run (running sums, then atomics in any order),
 *     so float results can differ from np.add.at's sequential sum, and
 *     between runs, in the last bits (float32 summed in float64 is rounded
 *     once, so it is nearer the exact sum than np.add.at's, and a float32
 *     overflow that the sequential sum meets on the way may not happen).
 */
#include "cuda/device_helpers.cuh"
#include "cuda/scatter_add_det_bucket.cuh"

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
    enum { K = BC_CUDA_ROWS_CHECK_PER_THREAD };
    const I *idx = reinterpret_cast<const I *>(p.idx);
    bc_status *status = reinterpret_cast<bc_status *>(p.status);
    const bc_i64 step = (bc_i64)gridDim.x * blockDim.x;
    bc_u64 first_bad = NO_POSITION;
    /* K loads in flight per thread, then K checks; positions grow with k
     * and from one iteration to the next, so the first bad one found is
     * this thread's first. */
    for (bc_i64 i0 = (bc_i64)blockIdx.x * blockDim.x + threadIdx.x; i0 < p.n; i0 += K * step) {
        I v[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            const bc_i64 i = i0 + k * step;
            v[k] = i < p.n ? idx[i * p.idx_stride] : (I)0;
        }
#pragma unroll
        for (int k = 0; k < K; k++) {
            const bc_i64 i = i0 + k * step;
            if (first_bad == NO_POSITION && i < p.n &&
                !row_ok(v[k], p.nrows, typename traits<I>::sign()))
                first_bad = (bc_u64)i;
        }
        if (first_bad != NO_POSITION)
            break;
    }
    if (first_bad != NO_POSITION)
        atomicMax(&status->bad_pos_inv, ~first_bad);
    /* float32 with a scratch: the rows that idx names start at -0.0 (see the
     * top); the others are never read.  A warp per index, its lanes along
     * the row; a row named twice is cleared twice. */
    if (p.scratch != 0) {
        double *scratch = reinterpret_cast<double *>(p.scratch);
        const bc_i64 lane = (bc_i64)(threadIdx.x & 31u);
        const bc_i64 warps = step / 32;
        for (bc_i64 i = ((bc_i64)blockIdx.x * blockDim.x + threadIdx.x) / 32; i < p.n; i += warps) {
            const I v = idx[i * p.idx_stride];
            if (!row_ok(v, p.nrows, typename traits<I>::sign()))
                continue;
            double *row = scratch + row_of(v, p.nrows, typename traits<I>::sign()) * p.row_size;
            for (bc_i64 c = lane; c < p.row_size; c += 32)
                row[c] = -0.0;
        }
    }
}

/* How a running sum of dtype OUT is kept (ACC), where it starts (zero(): the
 * additive identity) and how it is added to out.  Float sums start at -0.0,
 * not +0.0: -0.0 + v is v for every v, -0.0 included, so a base of -0.0 that
 * receives only -0.0 stays -0.0, as in np.add.at. */
template <typename OUT> struct rows_acc;
template <> struct rows_acc<float> {
    typedef float type;
    typedef float target;
    static __device__ __forceinline__ float zero() { return -0.0f; }
    static __device__ __forceinline__ float term(float v) { return v; }
};
/* float32 increments added into the float64 scratch (scatter_rows_wide). */
struct rows_scratch {
    typedef double type;
    typedef double target;
    static __device__ __forceinline__ double zero() { return -0.0; }
    static __device__ __forceinline__ double term(float v) { return (double)v; }
    static __device__ __forceinline__ void add(double *p, double v) { atomicAdd(p, v); }
};
template <> struct rows_acc<double> {
    typedef double type;
    typedef double target;
    static __device__ __forceinline__ double zero() { return -0.0; }
    static __device__ __forceinline__ double term(double v) { return v; }
    static __device__ __forceinline__ void add(double *p, double v) { atomicAdd(p, v); }
};
/* 32- and 64-bit integers: unsigned arithmetic, so sums wrap. */
#define BC_ROWS_WORD(T, U)                                                                    \
    template <> struct rows_acc<T> {                                                          \
        typedef U type;                                                                       \
        typedef T target;                                                                     \
        static __device__ __forceinline__ U zero() { return 0u; }                             \
        static __device__ __forceinline__ U term(T v) { return (U)v; }                        \
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
    static_assert(sizeof(T) == 1 || sizeof(T) == 2, "narrow_add: 8- and 16-bit elements");
    /* p is aligned to sizeof(T) (the launcher checks every array), so the
     * element lies inside one aligned 32-bit word: an int16 at byte 0 or 2.
     * The word is reached from p itself (pointer arithmetic keeps the global
     * address space that the compiler infers), not rebuilt from an integer. */
    const unsigned offset = (unsigned)(reinterpret_cast<bc_u64>(p) & 3u);
    bc_u32 *word = reinterpret_cast<bc_u32 *>(reinterpret_cast<unsigned char *>(p) - offset);
    const bc_u32 shift = offset * 8u;
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
        typedef T target;                                                                     \
        static __device__ __forceinline__ bc_u32 zero() { return 0u; }                        \
        static __device__ __forceinline__ bc_u32 term(T v) { return (bc_u32)v; }             \
        static __device__ __forceinline__ void add(T *p, bc_u32 v) { narrow_add(p, v); }      \
    };
BC_ROWS_NARROW(signed char)
BC_ROWS_NARROW(unsigned char)
BC_ROWS_NARROW(short)
BC_ROWS_NARROW(unsigned short)
#undef BC_ROWS_NARROW

/* Add sum[t] to base[t * step] for the t with t * step < room (the columns
 * inside the row): one atomic each (A::add), or for float32
 * (tile_adder<rows_acc<float>>) a compare-and-swap loop each, all T run side
 * by side. */
template <typename A> struct tile_adder {
    template <int T>
    static __device__ __forceinline__ void run(typename A::target *base, bc_i64 step,
                                               const typename A::type (&sum)[T], bc_i64 room)
    {
#pragma unroll
        for (int t = 0; t < T; t++)
            if (t * step < room)
                A::add(base + t * step, sum[t]);
    }
};
/* T loads, then T compare-and-swaps, then again only for those that failed
 * (with the value each one found), so that a lane waits for one round trip
 * to L2 per round instead of one per element.  As global_add: the float add
 * keeps subnormals, and the comparison is on bits (a NaN does not loop). */
template <> struct tile_adder<rows_acc<float>> {
    template <int T>
    static __device__ __forceinline__ void run(float *base, bc_i64 step, const float (&sum)[T],
                                               bc_i64 room)
    {
        unsigned int *word = reinterpret_cast<unsigned int *>(base);
        unsigned int seen[T];
        unsigned live = 0u;
#pragma unroll
        for (int t = 0; t < T; t++)
            live |= (t * step < room ? 1u : 0u) << t;
#pragma unroll
        for (int t = 0; t < T; t++)
            seen[t] = (live >> t) & 1u ? word[t * step] : 0u;
        while (live != 0u) {
            unsigned int before[T];
#pragma unroll
            for (int t = 0; t < T; t++) {
                before[t] = seen[t];
                if ((live >> t) & 1u)
                    seen[t] = atomicCAS(word + t * step, before[t],
                                        __float_as_uint(__uint_as_float(before[t]) + sum[t]));
            }
#pragma unroll
            for (int t = 0; t < T; t++)
                if (seen[t] == before[t])
                    live &= ~(1u << t);
        }
    }
};

/* The adding kernels: A is rows_acc<OUT> (into out) or rows_scratch (into
 * the scratch, rows of row_size elements). */
template <typename I, typename OUT, typename A>
__device__ __forceinline__ void rows_add(const bc_rows_params &p)
{
    typedef typename A::type ACC;
    typedef typename A::target TGT;
    enum { TILE = BC_CUDA_ROWS_TILE };
    const bool scratch = sizeof(TGT) != sizeof(OUT);
    const I *idx = reinterpret_cast<const I *>(p.idx);
    const OUT *inc = reinterpret_cast<const OUT *>(p.inc);
    TGT *out = reinterpret_cast<TGT *>(scratch ? p.scratch : p.out);
    const bc_i64 out_row = scratch ? p.row_size : p.out_row;
    const bc_i64 lanes = p.lanes;
    const bc_i64 group = 32 / lanes; /* rows a warp step covers */
    const bc_i64 lane = (bc_i64)(threadIdx.x & 31u);
    const bc_i64 sub = lane / lanes; /* which of them is this lane's */
    const bc_i64 col_lane = lane % lanes;
    const bc_i64 warps_per_block = (bc_i64)(blockDim.x >> 5);
    const bc_i64 warps = (bc_i64)gridDim.x * warps_per_block;
    /* The checking kernel ran before (same stream): nothing is added when it
     * found a bad index. */
    if (p.status != 0 &&
        reinterpret_cast<const volatile bc_status *>(p.status)->bad_pos_inv != 0)
        return;
    if (sub >= group)
        return; /* the lanes left over when 32 is not a multiple of D */
    for (bc_i64 item = (bc_i64)blockIdx.x * warps_per_block + (threadIdx.x >> 5); item < p.items;
         item += warps) {
        const bc_i64 begin = (item / p.tiles) * p.chunk;
        const bc_i64 end = begin + p.chunk < p.n ? begin + p.chunk : p.n;
        const bc_i64 col0 = (item % p.tiles) * lanes * TILE + col_lane;
        const bc_i64 room = p.row_size - col0; /* the tile's columns inside the row */
        ACC sum[TILE];
        bc_i64 run_row = -1;
        for (bc_i64 i = begin + sub; i < end; i += group) {
            const bc_i64 row = row_of(idx[i * p.idx_stride], p.nrows, typename traits<I>::sign());
            if (row != run_row) {
                if (run_row >= 0)
                    tile_adder<A>::run(out + run_row * out_row + col0, lanes, sum, room);
                run_row = row;
#pragma unroll
                for (int t = 0; t < TILE; t++)
                    sum[t] = A::zero();
            }
            const OUT *src = inc + i * p.inc_row;
#pragma unroll
            for (int t = 0; t < TILE; t++)
                if (t * lanes < room)
                    sum[t] += A::term(__ldcs(src + (col0 + t * lanes) * p.inc_elem));
        }
        if (run_row >= 0)
            tile_adder<A>::run(out + run_row * out_row + col0, lanes, sum, room);
    }
}

/* The last kernel of the scratch: out += scratch, rounded to float32 once,
 * for the rows that idx names (a warp per index, its lanes along the row),
 * for every element whose sum is not -0.0 (the others keep their value, base
 * + -0.0 being the base).  Each element is taken once: its sum is exchanged
 * for -0.0 atomically, so of the indices that name one row only the first
 * to get there adds it (the others find -0.0, most with a plain read).
 * Skipped on a bad index. */
template <typename I> __device__ __forceinline__ void rows_finish(const bc_rows_params &p)
{
    const unsigned long long minus_zero = (unsigned long long)__double_as_longlong(-0.0);
    const I *idx = reinterpret_cast<const I *>(p.idx);
    float *out = reinterpret_cast<float *>(p.out);
    unsigned long long *scratch = reinterpret_cast<unsigned long long *>(p.scratch);
    const bc_i64 lane = (bc_i64)(threadIdx.x & 31u);
    const bc_i64 warps = (bc_i64)gridDim.x * blockDim.x / 32;
    if (p.status != 0 &&
        reinterpret_cast<const volatile bc_status *>(p.status)->bad_pos_inv != 0)
        return;
    for (bc_i64 i = ((bc_i64)blockIdx.x * blockDim.x + threadIdx.x) / 32; i < p.n; i += warps) {
        const bc_i64 r = row_of(idx[i * p.idx_stride], p.nrows, typename traits<I>::sign());
        unsigned long long *sums = scratch + r * p.row_size;
        for (bc_i64 c = lane; c < p.row_size; c += 32) {
            if (reinterpret_cast<volatile unsigned long long *>(sums)[c] == minus_zero)
                continue;
            const unsigned long long bits = atomicExch(sums + c, minus_zero);
            if (bits == minus_zero)
                continue;
            float *o = out + r * p.out_row + c;
            *o = (float)((double)*o + __longlong_as_double((long long)bits));
        }
    }
}

} /* namespace bc */

/* MINB: the launch bounds' blocks per multiprocessor (BC_ROWS_MINB for outputs
 * of up to 32 bits; 2 for float32, whose batched compare-and-swap spills at
 * 40 registers and fits 56 at sm_90; 1, no minimum, for 64-bit ones and the
 * float64 scratch).  BC_ROWS_MINB is BC_CUDA_ROWS_BLOCKS_PER_SM, except on
 * sm_75, whose multiprocessors run at most 1024 threads (two blocks). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750
#define BC_ROWS_MINB 2
#else
#define BC_ROWS_MINB BC_CUDA_ROWS_BLOCKS_PER_SM
#endif
#define BC_ROWS_ADD(XN, XT, ON, OT, MINB)                                                     \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS, MINB)                       \
        scatter_rows_add_##XN##_##ON(const bc_rows_params p)                                  \
    {                                                                                         \
        bc::rows_add<XT, OT, bc::rows_acc<OT> >(p);                                           \
    }

/* The checking kernel and every output dtype for one dtype of idx. */
#define BC_ROWS_FOR_X(XN, XT)                                                                 \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        scatter_rows_check_##XN(const bc_rows_params p)                                       \
    {                                                                                         \
        bc::rows_check<XT>(p);                                                                \
    }                                                                                         \
    BC_ROWS_ADD(XN, XT, i8, signed char, BC_ROWS_MINB)                                 \
    BC_ROWS_ADD(XN, XT, i16, short, BC_ROWS_MINB)                                      \
    BC_ROWS_ADD(XN, XT, i32, int, BC_ROWS_MINB)                                        \
    BC_ROWS_ADD(XN, XT, i64, long long, 1)                                                    \
    BC_ROWS_ADD(XN, XT, u8, unsigned char, BC_ROWS_MINB)                               \
    BC_ROWS_ADD(XN, XT, u16, unsigned short, BC_ROWS_MINB)                             \
    BC_ROWS_ADD(XN, XT, u32, unsigned int, BC_ROWS_MINB)                               \
    BC_ROWS_ADD(XN, XT, u64, unsigned long long, 1)                                           \
    BC_ROWS_ADD(XN, XT, f32, float, 2)                                                 \
    BC_ROWS_ADD(XN, XT, f64, double, 1)                                                       \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS, 1)                          \
        scatter_rows_wide_##XN##_f32(const bc_rows_params p)                                  \
    {                                                                                         \
        bc::rows_add<XT, float, bc::rows_scratch>(p);                                         \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        scatter_rows_finish_##XN##_f32(const bc_rows_params p)                                \
    {                                                                                         \
        bc::rows_finish<XT>(p);                                                               \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        scatter_rows_det_##XN##_f32(const bc_rows_params p)                                   \
    {                                                                                         \
        bc::rows_det_pass<XT, float>(p);                                                      \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(BC_CUDA_THREADS)                             \
        scatter_rows_det_##XN##_f64(const bc_rows_params p)                                   \
    {                                                                                         \
        bc::rows_det_pass<XT, double>(p);                                                     \
    }

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
#undef BC_ROWS_MINB
#undef BC_ROWS_FOR_X

