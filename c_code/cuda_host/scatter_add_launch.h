/*
 * cuda_host/scatter_add_launch.h -- the launcher of the scatter-add of rows on the
 * GPU (the kernels scatter_rows_* of cuda/scatter_add_kernels.cu): the one
 * implementation of its launch plan and sequence, used by the GpuScatterAdd
 * Op (cuda_host/gpu_scatter_add_op.c, compiled into the Op's module by Aesara) and
 * by the stand-alone kernel layer (cuda_host/kernel_layer_lib.c, loaded with ctypes
 * by aesara_bincount_core/cuda/launcher.py).
 *
 * Plain C99 and C++, no Python: it stands on cuda_host/driver.h (the
 * driver table, bc_cuda_error, bc_cuda_host, bc_cuda_read_back) as the
 * bincount launcher does, and takes two helpers of that launcher.  The caller has already resolved the shapes: the
 * output (a zero-filled array, a copy of the base, or the base itself when
 * in place) and the increments, broadcast to (N, *rest), are described by a
 * row stride and, within a row, contiguous elements (inc_elem 1) or one
 * value repeated (inc_elem 0); the caller copies anything else into that
 * layout first.  The shape checks and their messages are the caller's
 * (common/scatter_checks.h for the Op).
 *
 * How a call runs:
 *
 *   0. Checks: idx is 1-D, every array lives on the current device and is
 *      aligned to its elements, addresses and row strides
 *      (bc_cuda_check_aligned), the kernels were loaded in the current
 *      context.  No index: nothing to do.
 *   1. Queued together, with no wait between them: the status zeroed
 *      (cuMemsetD32Async), the checking kernel (scatter_rows_check_<idx>),
 *      which finds the first index outside [-nrows, nrows) and writes its
 *      position to the status, the copy of the status into a page-locked
 *      slot, and, unless the caller asked for the check only (increments
 *      that do not broadcast: the Op raises their ValueError after the
 *      IndexError, as the CPU Op does) or there is nothing to add (D == 0),
 *      the adding kernel (scatter_rows_add_<idx>_<out>), which reads the
 *      status first and exits at once when an index was bad.  float32
 *      with the float64 scratch (bc_cuda_rows_scratch_elems: it fits
 *      BC_CUDA_ROWS_SCRATCH_MAX_BYTES, the output has at most
 *      BC_CUDA_ROWS_SCRATCH_ROWS_PER_INDEX rows per index, and the device
 *      has the memory; else the compare-and-swap kernel): the scratch sits
 *      before the status in one allocation, the checking kernel also sets
 *      the rows idx names to -0.0 (a warp per index), scatter_rows_wide_<idx>_f32
 *      replaces the adding kernel and scatter_rows_finish_<idx>_f32 (a warp
 *      per index) follows it, both skipped on a bad index.
 *   1b. With the call's status (c->call_status, the indices checked before
 *      by the caller): the same kernels, reading and writing the call's
 *      status in place of the zeroed one of step 1, so that the adds skip
 *      their work when any check of the call failed before them (an in-place
 *      base is left as it was); no read-back and no wait: the call reads its
 *      status once, when it ends.  The scratch goes back to the caller's
 *      stream-ordered pool (CuPy's) once the kernels are queued.
 *   2. One wait for the stream, the only one of a call (bc_cuda_read_back_then;
 *      the Op lets other Python threads run meanwhile): the GPU goes from
 *      the check to the adds without waiting for the host.  A bad index is
 *      read back too (a second small copy, on the error path only) and
 *      raises IndexError: nothing has been written, so a base updated in
 *      place keeps its value.
 *
 * Launch geometry of the adding kernel (bc_cuda_rows_plan): min(resident
 * blocks, N * D / BC_CUDA_ROWS_MIN_ELEMS_PER_BLOCK) blocks (at least one) of
 * BC_CUDA_THREADS threads, so that any call of a few thousand elements fills
 * every multiprocessor; lanes = min(32, D) lanes share a row; a column
 * tile is lanes * BC_CUDA_ROWS_TILE columns; indices are cut into chunks so
 * that every warp gets about BC_CUDA_ROWS_ITEMS_PER_WARP items (a chunk
 * times a tile), each chunk at least one warp step (32 / lanes indices).
 * The checking kernel, which loads BC_CUDA_ROWS_CHECK_PER_THREAD indices at
 * once per thread, gets N / (BC_CUDA_THREADS * BC_CUDA_ROWS_CHECK_PER_THREAD)
 * blocks, at most the resident ones.  The deterministic kernel
 * (scatter_rows_det_<idx>_<out>, the Op's kernel under deterministic ==
 * "more", in place of the adding kernel) gets the same blocks, each with
 * k->add_shared (BC_CUDA_ROWS_DET_SHARED_BYTES) of dynamic shared memory;
 * its order of adds does not depend on them (cuda/scatter_add_det.cuh).
 * For large idx (bc_rows_det_sorted: sizes only) the same kernel is first
 * launched four times more, the stages of its bucket pre-pass (COUNT,
 * REDUCE, SCAN, SCATTER of cuda/scatter_add_det_bucket.cuh, a block per tile
 * of idx, bc_rows_det_tiles), queued after the check with the adds, which
 * then get owners x bc_rows_det_slices blocks (a hot bucket's column slices'
 * blocks first); their buffer (bc_rows_det_make_layout) sits before the
 * status in the call's one allocation, as the float64 scratch does (no
 * memory: the adds scan idx).
 */
#ifndef AESARA_SCATTER_ADD_CUDA_LAUNCH_H
#define AESARA_SCATTER_ADD_CUDA_LAUNCH_H

#include "cuda/kernel_defs.h"
#include "cuda_host/driver.h"
#include "cuda_host/bincount_launch.h" /* bc_ceil_div, bc_cuda_alloc */
#include "cuda/scatter_add_det_defs.h"

/* The kernels of one dtype of idx and one output dtype in the current
 * context (aesara_bincount_core/cuda/modules.py loads and sizes them). */
typedef struct bc_rows_kernels {
    bc_CUcontext context;
    unsigned long long context_key; /* its bc_cuda_context_key (the host's tables) */
    bc_CUfunction check;       /* scatter_rows_check_<idx> */
    bc_CUfunction add;         /* scatter_rows_add_<idx>_<out> or scatter_rows_det_<idx>_<out> */
    unsigned add_shared;       /* dynamic shared memory of add: BC_CUDA_ROWS_DET_SHARED_BYTES
                                * for scatter_rows_det_*, else 0 */
    bc_CUfunction wide;        /* float32: scatter_rows_wide_<idx>_f32, else NULL */
    bc_CUfunction finish;      /* float32: scatter_rows_finish_<idx>_f32, else NULL */
    long long resident_blocks; /* blocks of add that run at once on the device */
} bc_rows_kernels;

/* One scatter-add of rows. */
typedef struct bc_rows_call {
    bc_CUdeviceptr out;      /* the output's row 0 */
    long long out_row_bytes; /* bytes between its rows */
    int out_device;
    int out_itemsize;        /* bytes of an element of the output and the increments */
    bc_CUdeviceptr inc;      /* the increments' row 0 */
    long long inc_row_bytes; /* bytes between their rows (0: one row for every index) */
    long long inc_elem;      /* 1: contiguous rows; 0: one value per row */
    int inc_device;
    bc_cuda_array idx;       /* (N,), any stride */
    int idx_signed;
    long long nrows;    /* V */
    long long row_size; /* D */
    int check_only;     /* 1: check the indices, add nothing */
    bc_CUstream stream;
    /* 0, or the call's status (aesara_bincount_core/gpu/call_status.py), whose
     * first 32 bytes are a bc_status: the indices were checked before (int64
     * rows in [0, nrows)), the kernels read and write this status instead of
     * one of their own, and nothing is read back (no wait; see step 1b). */
    bc_CUdeviceptr call_status;
} bc_rows_call;

/* Geometry of the two launches. */
typedef struct bc_rows_plan {
    long long check_blocks;
    long long blocks;
    int lanes;
    long long chunk;
    long long tiles;
    long long items;
} bc_rows_plan;

/* The plan for n > 0 indices of rows of row_size > 0 elements. */
static bc_rows_plan bc_cuda_rows_plan(long long n, long long row_size, long long resident_blocks)
{
    bc_rows_plan plan;
    long long warps, group, chunks, total;
    if (resident_blocks < 1)
        resident_blocks = 1;
    plan.check_blocks = bc_ceil_div(n, (long long)BC_CUDA_THREADS * BC_CUDA_ROWS_CHECK_PER_THREAD);
    if (plan.check_blocks > resident_blocks)
        plan.check_blocks = resident_blocks;
    total = n > (1LL << 62) / row_size ? (1LL << 62) : n * row_size;
    plan.blocks = bc_ceil_div(total, BC_CUDA_ROWS_MIN_ELEMS_PER_BLOCK);
    if (plan.blocks > resident_blocks)
        plan.blocks = resident_blocks;
    if (plan.blocks < 1)
        plan.blocks = 1;
    plan.lanes = row_size < 32 ? (int)row_size : 32;
    group = 32 / plan.lanes;
    plan.tiles = bc_ceil_div(row_size, (long long)plan.lanes * BC_CUDA_ROWS_TILE);
    warps = plan.blocks * (BC_CUDA_THREADS / 32);
    /* chunks * tiles ~ warps * ITEMS_PER_WARP, a chunk of at least one step */
    chunks = bc_ceil_div(warps * BC_CUDA_ROWS_ITEMS_PER_WARP, plan.tiles);
    plan.chunk = bc_ceil_div(n, chunks);
    if (plan.chunk < group)
        plan.chunk = group;
    plan.items = bc_ceil_div(n, plan.chunk) * plan.tiles;
    return plan;
}

/* Elements of the float64 scratch of a float32 call (step 1), or 0 for the
 * compare-and-swap kernel. */
static long long bc_cuda_rows_scratch_elems(const bc_rows_call *c, const bc_rows_kernels *k)
{
    const long long most = BC_CUDA_ROWS_SCRATCH_MAX_BYTES / 8;
    if (k->wide == NULL || k->finish == NULL || c->check_only || c->row_size <= 0 ||
        c->nrows <= 0 || c->nrows > most / c->row_size ||
        c->nrows / BC_CUDA_ROWS_SCRATCH_ROWS_PER_INDEX > c->idx.length)
        return 0;
    return c->nrows * c->row_size;
}

/* Step 0. */
static int bc_cuda_rows_check_call(const bc_cuda_api *api, const bc_rows_call *c,
                                   const bc_rows_kernels *k, bc_cuda_error *err)
{
    bc_CUcontext ctx = NULL;
    bc_CUdevice dev = 0;
    if (c->idx.ndim != 1)
        return bc_cuda_fail_text(err, BC_CUDA_E_NDIM, "idx", 1, c->idx.ndim, 0);
    if (bc_cuda_check(api, api->CtxGetCurrent(&ctx), "cuCtxGetCurrent", err) != 0 ||
        bc_cuda_check(api, api->CtxGetDevice(&dev), "cuCtxGetDevice", err) != 0)
        return -1;
    if (c->idx.device != dev)
        return bc_cuda_fail_text(err, BC_CUDA_E_DEVICE, "idx", c->idx.device, dev, 0);
    if (c->out_device != dev)
        return bc_cuda_fail_text(err, BC_CUDA_E_DEVICE, "the base", c->out_device, dev, 0);
    if (c->inc_device != dev)
        return bc_cuda_fail_text(err, BC_CUDA_E_DEVICE, "the increments", c->inc_device, dev, 0);
    if (c->idx.length > 0 &&
        (bc_cuda_check_aligned("idx", c->idx.ptr, c->idx.stride_bytes, c->idx.itemsize, err) != 0 ||
         (!c->check_only && c->row_size > 0 &&
          (bc_cuda_check_aligned("the base", c->out, c->out_row_bytes, c->out_itemsize, err) != 0 ||
           bc_cuda_check_aligned("the increments", c->inc, c->inc_row_bytes, c->out_itemsize,
                                 err) != 0))))
        return -1;
    if (ctx == NULL || ctx != k->context) {
        snprintf(err->text, sizeof(err->text),
                 "the kernels were loaded in CUDA context %p, but the current context is %p",
                 k->context, ctx);
        return bc_cuda_fail(err, BC_CUDA_E_DRIVER, 201 /* CUDA_ERROR_INVALID_CONTEXT */, 0, 0);
    }
    return 0;
}

/* The IndexError of the bad index at `pos` (step 2): its value is read back. */
static int bc_cuda_rows_bad_index(const bc_cuda_api *api, const bc_cuda_host *host,
                                  const bc_rows_call *c, long long pos, bc_cuda_error *err)
{
    unsigned char bytes[8];
    unsigned long long u = 0;
    int b;
    memset(bytes, 0, sizeof(bytes));
    if (bc_cuda_read_back(api, host, c->stream,
                          c->idx.ptr + (bc_CUdeviceptr)(pos * c->idx.stride_bytes),
                          bytes, (size_t)c->idx.itemsize, err) != 0)
        return -1;
    for (b = c->idx.itemsize - 1; b >= 0; b--) /* little-endian */
        u = (u << 8) | bytes[b];
    if (c->idx_signed) {
        const int shift = 64 - 8 * c->idx.itemsize;
        const long long s = shift ? (long long)(u << shift) >> shift : (long long)u;
        snprintf(err->text, sizeof(err->text), "%lld", s);
    } else {
        snprintf(err->text, sizeof(err->text), "%llu", u);
    }
    return bc_cuda_fail(err, BC_CUDA_E_ROW_INDEX, 0, pos, c->nrows);
}

/* bc_rows_params of a call and its plan. */
static bc_rows_params bc_cuda_rows_params(const bc_rows_call *c, const bc_rows_plan *plan,
                                          bc_CUdeviceptr status)
{
    bc_rows_params p;
    memset(&p, 0, sizeof(p));
    p.out = c->out;
    p.inc = c->inc;
    p.idx = c->idx.ptr;
    p.status = status;
    p.n = c->idx.length;
    p.nrows = c->nrows;
    p.row_size = c->row_size;
    p.idx_stride = bc_cuda_stride(&c->idx);
    p.out_row = c->out_itemsize > 0 ? c->out_row_bytes / c->out_itemsize : 0;
    p.inc_row = c->out_itemsize > 0 ? c->inc_row_bytes / c->out_itemsize : 0;
    p.inc_elem = c->inc_elem;
    p.chunk = plan->chunk;
    p.tiles = plan->tiles;
    p.items = plan->items;
    p.lanes = plan->lanes;
    return p;
}

/*
 * The whole call (steps 0-3).  Returns 0, or -1 with *err filled; either way
 * no buffer of the call is left allocated, and on failure nothing has been
 * written to the output.
 */
static int bc_cuda_scatter_rows(const bc_cuda_api *api, const bc_rows_call *c,
                                const bc_rows_kernels *k, const bc_cuda_host *host,
                                bc_cuda_error *err)
{
    bc_rows_plan plan;
    bc_rows_params p;
    bc_status status;
    bc_CUdeviceptr buf_ptr = 0, status_ptr;
    bc_cuda_launch then[BC_DET_STAGE_SCATTER + 1];
    bc_rows_params stages[BC_DET_STAGE_SCATTER + 1];
    void *args[1], *stage_args[BC_DET_STAGE_SCATTER + 1];
    void *buf = NULL;
    long long scratch, warp_blocks, owners = 0, sort_bytes = 0;
    int rc, n_then = 0, out_of_memory = 0, stage, wide;

    if (bc_cuda_rows_check_call(api, c, k, err) != 0)
        return -1;
    if (c->idx.length == 0)
        return 0;
    if (bc_cuda_not_capturing(api, c->stream, err) != 0)
        return -1;
    plan = bc_cuda_rows_plan(c->idx.length, c->row_size > 0 ? c->row_size : 1, k->resident_blocks);

    /* 1. The status (after the scratch, if any), the check, its copy and the
     * adds, queued together.  No memory for the scratch: the other kernel. */
    scratch = bc_cuda_rows_scratch_elems(c, k);
    /* The deterministic kernel's bucket pre-pass, for large idx: its buffer
     * before the status, as the scratch's (no memory: the adds scan idx). */
    if (k->add_shared != 0 && !c->check_only && c->row_size > 0 &&
        bc_rows_det_sorted(c->idx.length, c->nrows, c->row_size)) {
        owners = plan.blocks < c->nrows ? plan.blocks : c->nrows;
        sort_bytes = bc_rows_det_make_layout(c->idx.length, owners,
                                             bc_rows_det_tiles(c->idx.length)).bytes;
        sort_bytes = bc_ceil_div(sort_bytes, 8) * 8;
        buf = host->alloc(host->ctx, BC_DT_UINT64, sort_bytes / 8 + BC_CUDA_STATUS_BYTES / 8, 0,
                          &buf_ptr, &out_of_memory);
        if (buf == NULL && !out_of_memory)
            return bc_cuda_fail(err, BC_CUDA_E_HOST, 0, 0, 0);
        if (buf == NULL)
            owners = sort_bytes = 0;
        scratch = sort_bytes / 8; /* 8-byte words before the status */
    }
    if (scratch > 0 && owners == 0) {
        buf = host->alloc(host->ctx, BC_DT_FLOAT64, scratch + BC_CUDA_STATUS_BYTES / 8, 0,
                          &buf_ptr, &out_of_memory);
        if (buf == NULL && !out_of_memory)
            return bc_cuda_fail(err, BC_CUDA_E_HOST, 0, 0, 0);
        if (buf == NULL)
            scratch = 0;
    }
    if (buf == NULL) {
        buf = bc_cuda_alloc(host, BC_DT_UINT64, BC_CUDA_STATUS_BYTES / 8, 0, &buf_ptr,
                            BC_CUDA_STATUS_BYTES / 8, 8, err);
        if (buf == NULL)
            return -1;
    }
    wide = scratch > 0 && owners == 0; /* the float64 scratch of float32 rows */
    status_ptr = c->call_status != 0 ? c->call_status : buf_ptr + (bc_CUdeviceptr)scratch * 8u;
    p = bc_cuda_rows_params(c, &plan, status_ptr);
    /* With the scratch, the checking kernel and the finish kernel take a warp
     * per index (the scratch rows idx names). */
    warp_blocks = bc_ceil_div(c->idx.length, (long long)BC_CUDA_THREADS / 32);
    if (warp_blocks > k->resident_blocks)
        warp_blocks = k->resident_blocks;
    if (wide) {
        p.scratch = buf_ptr;
        if (plan.check_blocks < warp_blocks)
            plan.check_blocks = warp_blocks;
    }
    args[0] = &p;
    memset(then, 0, sizeof(then));
    /* The pre-pass's four stages (cuda/scatter_add_det_bucket.cuh), a block
     * per tile of idx, then the adds reading the buckets (stage 0); the
     * buffer is theirs only (the checking kernel clears a scratch it gets). */
    for (stage = BC_DET_STAGE_WINDOW; owners > 0 && stage <= BC_DET_STAGE_SCATTER; stage++) {
        stages[stage] = p;
        stages[stage].scratch = buf_ptr;
        stages[stage].owners = owners;
        stages[stage].slices = bc_rows_det_slices(c->row_size, c->out_itemsize,
                                                  &stages[stage].slice_cols);
        stages[stage].sort_tiles = bc_rows_det_tiles(c->idx.length);
        stages[stage].stage = stage;
        stage_args[stage] = &stages[stage];
        if (stage == BC_DET_STAGE_WINDOW)
            continue;
        then[n_then].func = k->add;
        then[n_then].blocks = (unsigned)bc_rows_det_tiles(c->idx.length);
        /* COUNT, SCATTER: a counter per owner (owners <= resident blocks, a
         * few hundred); REDUCE, SCAN: a word per warp */
        then[n_then].shared_bytes = (unsigned)(4 * (stage == BC_DET_STAGE_COUNT ||
                                                    stage == BC_DET_STAGE_SCATTER
                                                ? owners : BC_CUDA_THREADS / 32));
        then[n_then].args = &stage_args[stage];
        then[n_then].what = "cuLaunchKernel(bucket pre-pass of the scatter-add of rows)";
        n_then++;
    }
    if (!(c->check_only || c->row_size == 0 || c->nrows == 0)) {
        then[n_then].func = wide ? k->wide : k->add;
        /* with the buckets, owners x slices (rows_det: a hot bucket's
         * slices' blocks first, cuda/scatter_add_det_bucket.cuh) */
        then[n_then].blocks = (unsigned)(owners > 0 ? owners * stages[BC_DET_STAGE_WINDOW].slices
                                                    : plan.blocks);
        then[n_then].shared_bytes = wide ? 0u : k->add_shared;
        then[n_then].args = owners > 0 ? &stage_args[BC_DET_STAGE_WINDOW] : args;
        then[n_then].what = "cuLaunchKernel(scatter-add of rows)";
        n_then++;
        if (wide) {
            then[n_then].func = k->finish;
            then[n_then].blocks = (unsigned)warp_blocks;
            then[n_then].args = args;
            then[n_then].what = "cuLaunchKernel(finish of the scatter-add of rows)";
            n_then++;
        }
    }
    rc = c->call_status != 0
             ? 0
             : bc_cuda_check(api,
                             api->MemsetD32Async(status_ptr, 0, BC_CUDA_STATUS_BYTES / 4, c->stream),
                             "cuMemsetD32Async", err);
    if (rc == 0)
        rc = bc_cuda_check(api,
                           api->LaunchKernel(k->check, (unsigned)plan.check_blocks, 1, 1,
                                             BC_CUDA_THREADS, 1, 1, 0, c->stream, args, NULL),
                           "cuLaunchKernel(index check)", err);
    /* 1b. With the call's status: the kernels queued, no wait. */
    if (c->call_status != 0) {
        for (stage = 0; stage < n_then && rc == 0; stage++)
            rc = bc_cuda_check(api,
                               api->LaunchKernel(then[stage].func, then[stage].blocks, 1, 1,
                                                 BC_CUDA_THREADS, 1, 1, then[stage].shared_bytes,
                                                 c->stream, then[stage].args, NULL),
                               then[stage].what, err);
        host->release(host->ctx, buf); /* stream-ordered: reused only after these kernels */
        return rc != 0 ? -1 : 0;
    }
    /* 2. The one wait. */
    if (rc == 0)
        rc = bc_cuda_read_back_then(api, host, c->stream, status_ptr, &status, sizeof(status),
                                    then, n_then, err);
    host->release(host->ctx, buf); /* the read-back waited for everything that uses it */
    if (rc != 0)
        return -1;
    if (status.bad_pos_inv != 0)
        return bc_cuda_rows_bad_index(api, host, c, (long long)~status.bad_pos_inv, err);
    return 0;
}

#endif /* AESARA_SCATTER_ADD_CUDA_LAUNCH_H */
