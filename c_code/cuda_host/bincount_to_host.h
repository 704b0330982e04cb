/*
 * cuda_host/bincount_to_host.h -- the bincount launch whose result goes to
 * the host, for the GpuBincount Op's host code (cuda_host/gpu_bincount_op.c, with
 * BC_TO_HOST): beside the one launcher (cuda_host/bincount_launch.h), whose checks,
 * plan, histogram pass and status it uses.  Plain C99 and C++, no Python.
 *
 * When a compiled function copies the output to the host (HostFromGpu
 * right after the Op), the call ends there instead: the bins and the status
 * come back together, in one device-to-host copy into page-locked memory,
 * behind the one wait of the call.  The caller lends the memory (kept from
 * call to call, so that a call allocates nothing).  The same for the
 * deterministic sum's window passes (bc_cuda_bincount_det_host, the
 * launcher's passes and finishes of cuda_host/bincount_det_launch.h).
 */
#ifndef AESARA_BINCOUNT_CUDA_HOST_RESULT_H
#define AESARA_BINCOUNT_CUDA_HOST_RESULT_H

#include "cuda/kernel_defs.h"
#include "cuda_host/bincount_det_launch.h"
#include "cuda_host/driver.h"
#include "cuda_host/bincount_launch.h"

/* Outputs whose bins and status take more bytes go through the device
 * path and a copy of the result (page-locked memory is kept that small). */
#define BC_CUDA_STAGING_MAX_BYTES (16ll << 20)

/* Device memory on which no queued work is pending and page-locked host
 * memory, both owned by the call. */
typedef struct bc_cuda_staging {
    bc_CUdeviceptr device;
    unsigned char *pinned;
} bc_cuda_staging;

/* Lend at least `device_bytes` of device memory and `pinned_bytes` of
 * page-locked memory into *st: 0, or -1 with *out_of_memory set (device or
 * page-locked memory) or with the caller's error pending. */
typedef int (*bc_cuda_stage_fn)(void *ctx, size_t device_bytes, size_t pinned_bytes,
                                bc_cuda_staging *st, int *out_of_memory);

typedef struct bc_cuda_host_result {
    long long length;  /* elements of the output */
    const void *bins;  /* its bins (accumulator dtype; output dtype from the
                          deterministic launcher) in the staging's page-locked
                          memory; NULL when all are zero (an empty x) */
    int device_path;   /* too large for the staging: nothing was done, run bc_cuda_bincount */
} bc_cuda_host_result;

/*
 * The bincount with its result to the host: checks as bc_cuda_bincount's;
 * the buffer cleared on the stream (cuMemsetD32Async), the histogram pass,
 * one copy of the bins and the status, one wait.  When max(x) + 1 exceeds
 * the bins of the pass (the first call, or larger values than the hint
 * said), the pass runs again with exactly that many bins (a second wait).
 * Returns 0 with *r filled (the bins then stay valid until the staging is
 * lent again), or -1 with *err filled.
 */
static int bc_cuda_bincount_host(const bc_cuda_api *api, const bc_cuda_bincount_call *c,
                                 const bc_cuda_kernels *k, const bc_cuda_host *host,
                                 bc_cuda_stage_fn stage, void *stage_ctx,
                                 bc_cuda_host_result *r, bc_cuda_error *err)
{
    long long bins, padded = 0, length;
    bc_cuda_staging st;
    bc_status status;

    memset(r, 0, sizeof(*r));
    if (bc_cuda_check_call(api, c, k, err) != 0)
        return -1;
    if (c->x.length == 0) {
        r->length = c->n;
        return 0;
    }
    if (bc_cuda_not_capturing(api, c->stream, err) != 0)
        return -1;
    bins = bc_cuda_first_bins(c, BC_CUDA_STAGING_MAX_BYTES / c->buffer_itemsize);
    for (;;) {
        const long long bytes =
            bc_cuda_buffer_elements(bins, c->buffer_itemsize, &padded) * c->buffer_itemsize;
        int out_of_memory = 0;
        if (bytes > BC_CUDA_STAGING_MAX_BYTES) {
            r->device_path = 1;
            return 0;
        }
        if (stage(stage_ctx, (size_t)bytes, (size_t)bytes, &st, &out_of_memory) != 0)
            return out_of_memory ? bc_cuda_fail(err, BC_CUDA_E_NO_MEMORY, bins, c->out_itemsize, 0)
                                 : bc_cuda_fail(err, BC_CUDA_E_HOST, 0, 0, 0);
        if (bc_cuda_check(api, api->MemsetD32Async(st.device, 0, (size_t)bytes / 4, c->stream),
                          "cuMemsetD32Async", err) != 0 ||
            bc_cuda_queue_hist(api, k, c, st.device, padded, 0, bins, err) != 0 ||
            bc_cuda_copy_wait(api, host, c->stream, st.device, st.pinned, (size_t)bytes, NULL, 0,
                              err) != 0)
            return -1;
        memcpy(&status, st.pinned + (size_t)padded * (size_t)c->buffer_itemsize, sizeof(status));
        if (bc_cuda_status_error(c, &status, err) != 0)
            return -1;
        length = c->n;
        if (!c->scatter && (long long)status.max_value + 1 > length)
            length = (long long)status.max_value + 1;
        if (bc_cuda_check_size(c, k, length, err) != 0)
            return -1;
        if (length <= bins)
            break;
        bins = length;
    }
    r->length = length;
    r->bins = st.pinned;
    return 0;
}

/*
 * The deterministic sum (bc_cuda_bincount_det) with its result to the host
 * in one wait.  For the expected length L (n in the scatter-add form, else
 * max(n, the caller's hint, or one window when there is none)), every
 * window's pass and finish are queued into the staging's device memory,
 * then one copy of the output bins (the output dtype) and the status into
 * its page-locked memory, then the wait.  Staging layout: the bins, padded
 * to 16 bytes, the status, then the blocks' partial sums (not copied).
 * When the actual length exceeds L, or L takes the bucket path or is too
 * large for the staging, r->device_path is set and the caller runs
 * bc_cuda_bincount_det (whose bits are the same: a bin's sum does not
 * depend on the window that counts it).  Returns 0 with *r filled, or -1
 * with *err filled.
 */
static int bc_cuda_bincount_det_host(const bc_cuda_api *api, const bc_cuda_bincount_call *c,
                                     const bc_cuda_kernels *k, const bc_cuda_host *host,
                                     bc_cuda_stage_fn stage, void *stage_ctx,
                                     bc_cuda_host_result *r, bc_cuda_error *err)
{
    long long span, blocks, guess, bins_bytes, length;
    size_t device_bytes;
    bc_cuda_staging st;
    bc_status status;
    int out_of_memory = 0;

    memset(r, 0, sizeof(*r));
    if (bc_cuda_check_call(api, c, k, err) != 0)
        return -1;
    if (c->x.length == 0) {
        r->length = c->n;
        return 0;
    }
    if (bc_cuda_not_capturing(api, c->stream, err) != 0 ||
        bc_cuda_det_geometry(c, k, &span, &blocks, err) != 0)
        return -1;
    guess = c->capacity_hint > 0 ? c->capacity_hint
                                 : (span < BC_CUDA_FIRST_PASS_BINS ? span : BC_CUDA_FIRST_PASS_BINS);
    guess = c->scatter || c->n > guess ? c->n : guess;
    bins_bytes = (guess * c->out_itemsize + 15) / 16 * 16;
    device_bytes = (size_t)(bins_bytes + BC_CUDA_STATUS_BYTES) +
                   (size_t)(blocks * (guess < span ? guess : span)) * 8u;
    if (guess < 1 || bc_det_bucketed(c->x.length, guess, blocks, c->shared_itemsize) ||
        device_bytes > (size_t)BC_CUDA_STAGING_MAX_BYTES) {
        r->device_path = 1;
        return 0;
    }
    if (stage(stage_ctx, device_bytes, (size_t)(bins_bytes + BC_CUDA_STATUS_BYTES), &st,
              &out_of_memory) != 0)
        return out_of_memory ? bc_cuda_fail(err, BC_CUDA_E_NO_MEMORY, guess, c->out_itemsize, 0)
                             : bc_cuda_fail(err, BC_CUDA_E_HOST, 0, 0, 0);
    {
        const bc_CUdeviceptr status_ptr = st.device + (bc_CUdeviceptr)bins_bytes;
        const bc_CUdeviceptr partials = status_ptr + BC_CUDA_STATUS_BYTES;
        if (bc_cuda_check(api,
                          api->MemsetD32Async(status_ptr, 0, BC_CUDA_STATUS_BYTES / 4, c->stream),
                          "cuMemsetD32Async", err) != 0 ||
            bc_cuda_det_queue_windows(api, k, c, partials, status_ptr, blocks, span, 0, guess,
                                      st.device, err) != 0 ||
            bc_cuda_copy_wait(api, host, c->stream, st.device, st.pinned,
                              (size_t)(bins_bytes + BC_CUDA_STATUS_BYTES), NULL, 0, err) != 0)
            return -1;
    }
    memcpy(&status, st.pinned + bins_bytes, sizeof(status));
    if (bc_cuda_status_error(c, &status, err) != 0)
        return -1;
    length = c->n;
    if (!c->scatter && (long long)status.max_value + 1 > length)
        length = (long long)status.max_value + 1;
    if (bc_cuda_check_size(c, k, length, err) != 0)
        return -1;
    if (length > guess) {
        r->device_path = 1; /* the guess was short: nothing is pending on the staging */
        return 0;
    }
    r->length = length;
    r->bins = st.pinned;
    return 0;
}

/* dst[i] = (out dtype) src[i], i < count, where src holds accumulator bins
 * of `buf_dtype`: what the finish kernels (bincount_finish_<acc>_<out>)
 * compute, with the same roundings; a plain copy when the dtypes match. */
static void bc_cuda_finish_on_host(void *dst, int out_dtype, const void *src, int buf_dtype,
                                   long long count)
{
    long long i;
    if (out_dtype == buf_dtype) {
        memcpy(dst, src, (size_t)count * (size_t)bc_cuda_dtype_size(out_dtype));
        return;
    }
    for (i = 0; i < count; i++) {
        unsigned long long u = 0;
        double f = 0;
        if (buf_dtype == BC_DT_UINT32)
            u = ((const unsigned int *)src)[i];
        else if (buf_dtype == BC_DT_UINT64)
            u = ((const unsigned long long *)src)[i];
        else
            f = ((const double *)src)[i];
        switch (out_dtype) {
        case BC_DT_INT8:
        case BC_DT_UINT8:
            ((unsigned char *)dst)[i] = (unsigned char)u;
            break;
        case BC_DT_INT16:
        case BC_DT_UINT16:
            ((unsigned short *)dst)[i] = (unsigned short)u;
            break;
        case BC_DT_FLOAT32:
            ((float *)dst)[i] = buf_dtype == BC_DT_FLOAT64 ? (float)f : (float)u;
            break;
        case BC_DT_FLOAT64:
            ((double *)dst)[i] = (double)u;
            break;
        default: /* not a conversion of sources.accumulation */
            break;
        }
    }
}


#endif /* AESARA_BINCOUNT_CUDA_HOST_RESULT_H */
