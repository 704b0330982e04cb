/*
 * fake_libcuda.cc -- a stand-in for libcuda.so.1 that runs the kernels of
 * c_code/bincount_cuda_kernel.cu on CPU threads (cuda_emu.h), for the
 * test-suite on machines without a GPU.
 *
 * It implements the driver API calls that aesara_bincount makes (through
 * ctypes in aesara_bincount/gpu/driver.py and through dlopen in
 * c_code/bincount_cuda_host.c), with "device pointers" that are host
 * pointers (the fake CuPy of tests/gpu_emu/fakecupy allocates NumPy memory).
 * It checks what the real driver checks that matters here: block shape,
 * dynamic shared memory against the function's limit, module images that
 * look like CUBIN or PTX, kernel names.  It counts calls, so that tests can
 * check the number of synchronizations, and it can be told to fail a call.
 *
 * Test code only (C++20, g++).
 */
#include "cuda_emu.h"

#include "bincount_cuda_kernel.cu"

#include <map>
#include <mutex>
#include <string>

typedef int CUresult;

namespace {

enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_NOT_FOUND = 500, ERR_INVALID_IMAGE = 200 };

struct kernel_entry {
    const char *name;
    void *fn;
    int finish; /* 0: bc_hist_params, 1: bc_finish_params */
};

#define H(XN, IN) {"bincount_hist_" #XN "_" #IN, (void *)&bincount_hist_##XN##_##IN, 0},
#define HX(XN)                                                                                \
    H(XN, c32) H(XN, c64) H(XN, i8) H(XN, i16) H(XN, i32) H(XN, i64) H(XN, u8) H(XN, u16)     \
        H(XN, u32) H(XN, u64) H(XN, f32) H(XN, f64)

const kernel_entry kernels[] = {
    HX(i8) HX(i16) HX(i32) HX(i64) HX(u8) HX(u16) HX(u32) HX(u64)
    {"bincount_finish_u32_u8", (void *)&bincount_finish_u32_u8, 1},
    {"bincount_finish_u32_u16", (void *)&bincount_finish_u32_u16, 1},
    {"bincount_finish_u64_f32", (void *)&bincount_finish_u64_f32, 1},
    {"bincount_finish_u64_f64", (void *)&bincount_finish_u64_f64, 1},
};
#undef H
#undef HX

std::mutex lock;
std::map<const void *, int> max_dynamic_shared; /* per function */
long long counters[8];                          /* see fake_cuda_counters */
int fail_call = -1, fail_code = 0;

int env_int(const char *name, int fallback)
{
    const char *v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

/* Fail this call if the test asked for it (once). */
bool injected(int which, CUresult *code)
{
    std::lock_guard<std::mutex> g(lock);
    if (fail_call != which)
        return false;
    fail_call = -1;
    *code = fail_code;
    return true;
}

} /* namespace */

extern "C" {

/* Test API: counters[0] launches, [1] stream synchronizations, [2] device-to-host
 * copies, [3] memsets, [4] device-to-device copies, [5] module loads. */
void fake_cuda_counters(long long *out)
{
    std::lock_guard<std::mutex> g(lock);
    for (int i = 0; i < 8; i++)
        out[i] = counters[i];
}

/* Test API: make the next call of kind `which` (0 launch, 1 memset, 2 device-to-host
 * copy, 3 synchronization) return `code`. */
void fake_cuda_fail_next(int which, int code)
{
    std::lock_guard<std::mutex> g(lock);
    fail_call = which;
    fail_code = code;
}

CUresult cuInit(unsigned flags)
{
    return flags == 0 ? OK : ERR_INVALID_VALUE;
}

CUresult cuDriverGetVersion(int *version)
{
    *version = env_int("FAKE_CUDA_DRIVER_VERSION", 12080);
    return OK;
}

CUresult cuGetErrorName(CUresult code, const char **name)
{
    *name = code == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
    return OK;
}

CUresult cuGetErrorString(CUresult code, const char **text)
{
    *text = code == 2 ? "out of memory" : "an error injected by the fake driver";
    return OK;
}

CUresult cuCtxGetCurrent(void **ctx)
{
    *ctx = (void *)0x1;
    return OK;
}

CUresult cuCtxGetDevice(int *dev)
{
    *dev = 0;
    return OK;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int dev)
{
    if (dev != 0)
        return ERR_INVALID_VALUE;
    switch (attribute) {
    case 16: /* multiprocessors */
        *value = env_int("FAKE_CUDA_SMS", 2);
        return OK;
    case 75:
        *value = env_int("FAKE_CUDA_CC", 90) / 10;
        return OK;
    case 76:
        *value = env_int("FAKE_CUDA_CC", 90) % 10;
        return OK;
    case 81: /* shared memory per multiprocessor */
        *value = env_int("FAKE_CUDA_SHARED_PER_SM", 233472);
        return OK;
    case 97: /* opt-in shared memory per block */
        *value = env_int("FAKE_CUDA_SHARED_OPTIN", 232448);
        return OK;
    default:
        return ERR_INVALID_VALUE;
    }
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
    *bytes = (size_t)env_int("FAKE_CUDA_TOTAL_MEM_MB", 1024) << 20;
    return dev == 0 ? OK : ERR_INVALID_VALUE;
}

CUresult cuModuleLoadData(void **module, const void *image)
{
    const char *p = (const char *)image;
    const bool cubin = std::memcmp(p, "\x7f" "ELF", 4) == 0;
    const bool ptx = std::strstr(p, ".version") != nullptr && std::strstr(p, ".target") != nullptr;
    if (!cubin && !ptx)
        return ERR_INVALID_IMAGE;
    std::lock_guard<std::mutex> g(lock);
    counters[5]++;
    *module = (void *)0x2;
    return OK;
}

CUresult cuModuleGetFunction(void **func, void *module, const char *name)
{
    if (module != (void *)0x2)
        return ERR_INVALID_VALUE;
    for (const kernel_entry &k : kernels) {
        if (std::strcmp(k.name, name) == 0) {
            *func = (void *)&k;
            return OK;
        }
    }
    return ERR_NOT_FOUND;
}

CUresult cuFuncSetAttribute(void *func, int attribute, int value)
{
    if (attribute != 8) /* only the dynamic shared memory limit is used */
        return ERR_INVALID_VALUE;
    if (value < 0 || value > env_int("FAKE_CUDA_SHARED_OPTIN", 232448))
        return ERR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(lock);
    max_dynamic_shared[func] = value;
    return OK;
}

CUresult cuLaunchKernel(void *func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **extra)
{
    CUresult code;
    (void)stream;
    if (injected(0, &code))
        return code;
    const kernel_entry *k = (const kernel_entry *)func;
    bool known = false;
    for (const kernel_entry &e : kernels)
        known |= &e == k;
    if (!known || params == nullptr || extra != nullptr)
        return ERR_INVALID_VALUE;
    if (gx == 0 || gy != 1 || gz != 1 || bx != BC_CUDA_THREADS || by != 1 || bz != 1)
        return ERR_INVALID_VALUE;
    {
        std::lock_guard<std::mutex> g(lock);
        auto it = max_dynamic_shared.find(func);
        const int limit = it == max_dynamic_shared.end() ? 48 * 1024 : it->second;
        if ((int)shared > limit)
            return ERR_INVALID_VALUE;
        counters[0]++;
    }
    if (k->finish)
        emu::launch((void (*)(bc_finish_params))k->fn, *(const bc_finish_params *)params[0], gx, bx,
                    shared);
    else
        emu::launch((void (*)(bc_hist_params))k->fn, *(const bc_hist_params *)params[0], gx, bx,
                    shared);
    return OK;
}

CUresult cuMemsetD32Async(unsigned long long dst, unsigned value, size_t count, void *stream)
{
    CUresult code;
    (void)stream;
    if (injected(1, &code))
        return code;
    unsigned *p = (unsigned *)dst;
    for (size_t i = 0; i < count; i++)
        p[i] = value;
    std::lock_guard<std::mutex> g(lock);
    counters[3]++;
    return OK;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t bytes, void *stream)
{
    CUresult code;
    (void)stream;
    if (injected(2, &code))
        return code;
    std::memcpy(dst, (const void *)src, bytes);
    std::lock_guard<std::mutex> g(lock);
    counters[2]++;
    return OK;
}

CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t bytes,
                              void *stream)
{
    (void)stream;
    std::memmove((void *)dst, (const void *)src, bytes);
    std::lock_guard<std::mutex> g(lock);
    counters[4]++;
    return OK;
}

CUresult cuStreamSynchronize(void *stream)
{
    CUresult code;
    (void)stream;
    if (injected(3, &code))
        return code;
    std::lock_guard<std::mutex> g(lock);
    counters[1]++;
    return OK;
}

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags)
{
    (void)flags;
    *p = std::calloc(1, bytes);
    return *p ? OK : 2;
}

} /* extern "C" */
