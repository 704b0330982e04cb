/*
 * fake_libcuda.cc -- a stand-in for libcuda.so.1 that runs the kernels of
 * c_code/cuda/bincount_kernels.cu (histograms) and c_code/cuda/scatter_add_kernels.cu (rows)
 * on CPU threads (cuda_emu.h), for the test-suite on machines without a GPU.
 *
 * It implements the driver API calls that aesara_bincount makes (through
 * ctypes in aesara_bincount_core/cuda/driver.py and through dlopen in
 * c_code/cuda_host/driver.h), with "device pointers" that are host
 * pointers (the fake CuPy of tests/gpu_emu/fakecupy allocates NumPy memory).
 * It checks what the real driver checks that matters here: block shape,
 * dynamic shared memory against the function's limit, module images that
 * look like CUBIN or PTX, kernel names, and that a function is launched in
 * the context whose module it came from.  A kernel that would access memory
 * misaligned for its dtypes (its arrays' addresses, checked at the launch,
 * and each load and atomic, checked by cuda_emu.h as it runs) fails as on a
 * GPU: CUDA_ERROR_MISALIGNED_ADDRESS, a sticky error that every later call
 * returns (fake_cuda_sticky reads and clears it).
 *
 * Devices and contexts: FAKE_CUDA_DEVICES devices (default 2), each with one
 * context; a thread's current device is 0 until fake_cuda_set_device (the
 * fake CuPy's cupy.cuda.Device) changes it.
 *
 * Occupancy: a multiprocessor has FAKE_CUDA_SHARED_PER_SM bytes of shared
 * memory, of which the driver keeps FAKE_CUDA_BLOCK_RESERVE (default 1024,
 * as sm_90 does) per resident block, and runs at most
 * FAKE_CUDA_MAX_BLOCKS_PER_SM (default 2, what 64 registers per thread allow
 * for 512-thread blocks) blocks of a histogram kernel.
 *
 * Streams: kernels and copies run when they are queued; cuStreamSynchronize
 * runs the host functions queued with cuLaunchHostFunc on a thread of its
 * own, as the driver does, and waits for them, and can be told to wait for
 * the test (fake_cuda_hold_syncs).  A wait that lasts over 30 seconds fails
 * with CUDA_ERROR_LAUNCH_TIMEOUT instead of hanging the test-suite.  With
 * FAKE_CUDA_ASYNC=1 they are queued on a stream thread and run only once a
 * host thread waits (emu_stream.h: the asynchronous mode).
 *
 * Race check: a library built with -DBC_EMU_RACECHECK (tests/gpu_emu/build.py
 * builds one when FAKE_CUDA_RACECHECK is set) reports unordered accesses of
 * two threads of one block (emu_race.h); the plain library refuses to start
 * (cuInit fails) when FAKE_CUDA_RACECHECK is set, so that a check asked for
 * never passes unchecked.
 *
 * Generated kernels (GpuElemwise's, named bc_elemwise_<hash>, and the fused
 * histogram kernels of GpuFusedBincount, bincount_hist_fused_<x>_<inc>_<hash>,
 * which take dynamic shared memory and the occupancy calls as the built-in
 * histogram kernels do): the kernel
 * layer keeps each generated source in its cache folder
 * ($AESARA_BINCOUNT_CACHE/<name>.cu); cuModuleGetFunction compiles it for the
 * host with generated_emu.cc (g++, cached there by name and by this
 * library's build; cuda_emu.h comes precompiled, from the folder that
 * build.py names in BC_EMU_PCH), dlopens it and launches it from
 * cuLaunchKernel.
 *
 * Contexts have IDs (cuCtxGetId, unless FAKE_CUDA_NO_CTX_ID is set, when
 * it fails as on a driver older than CUDA 12.0).  fake_cuda_replace_context
 * stands for a context destroyed and another created at the same address:
 * the pointer stays, the ID changes, and the functions got in the old one
 * fail to launch (CUDA_ERROR_INVALID_HANDLE) until they are got again.
 *
 * Test API (extern "C", fake_cuda_*): counters, failure injection, devices,
 * held synchronizations, load counts, context replacement, the stream's
 * drain and the reports of the two modes above.
 *
 * Test code only (C++20, g++).
 */
#include "cuda_emu.h"
#include "emu_stream.h"

#include "cuda/bincount_kernels.cu"
#include "cuda/scatter_add_kernels.cu"
#include "cuda/scatter_set_kernels.cu"
#include "cuda/call_check_kernels.cu"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <dlfcn.h>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>

typedef int CUresult;

namespace {

enum {
    OK = 0,
    ERR_INVALID_VALUE = 1,
    ERR_INVALID_IMAGE = 200,
    ERR_INVALID_CONTEXT = 201,
    ERR_INVALID_HANDLE = 400,
    ERR_NOT_FOUND = 500,
    ERR_LAUNCH_TIMEOUT = 702,
    ERR_MISALIGNED_ADDRESS = 716,
};

constexpr int MAX_DEVICES = 8;

struct kernel_entry {
    const char *name;
    void *fn;
    int finish; /* 0: bc_hist_params, 1: bc_finish_params, 2: bc_rows_params,
                   3: bc_det_finish_params, 4: bc_set_params, 5: bc_check_params */
};

/* Bytes of the dtype whose short name (i8 ... f64) ends the kernel name
 * `name` (0 for c32 / c64: a count, no weights). */
int dtype_size(const std::string &name)
{
    const size_t at = name.find_last_of('_');
    const std::string s = name.substr(at + 1);
    if (s[0] == 'c')
        return 0;
    return std::atoi(s.c_str() + 1) / 8;
}

#define H(XN, IN) {"bincount_hist_" #XN "_" #IN, (void *)&bincount_hist_##XN##_##IN, 0},
#define D(XN, IN) {"bincount_hist_det_" #XN "_" #IN, (void *)&bincount_hist_det_##XN##_##IN, 0},
#define R(XN, ON) {"scatter_rows_add_" #XN "_" #ON, (void *)&scatter_rows_add_##XN##_##ON, 2},
#define HX(XN)                                                                                \
    H(XN, c32) H(XN, c64) H(XN, i8) H(XN, i16) H(XN, i32) H(XN, i64) H(XN, u8) H(XN, u16)     \
        H(XN, u32) H(XN, u64) H(XN, f32) H(XN, f64) D(XN, f32) D(XN, f64)                 \
            {"scatter_rows_check_" #XN, (void *)&scatter_rows_check_##XN, 2},                 \
            {"scatter_rows_wide_" #XN "_f32", (void *)&scatter_rows_wide_##XN##_f32, 2},      \
            {"scatter_rows_finish_" #XN "_f32", (void *)&scatter_rows_finish_##XN##_f32, 2},  \
            {"scatter_rows_det_" #XN "_f32", (void *)&scatter_rows_det_##XN##_f32, 2},        \
            {"scatter_rows_det_" #XN "_f64", (void *)&scatter_rows_det_##XN##_f64, 2},        \
        R(XN, i8) R(XN, i16) R(XN, i32) R(XN, i64) R(XN, u8) R(XN, u16) R(XN, u32)            \
            R(XN, u64) R(XN, f32) R(XN, f64)

const kernel_entry kernels[] = {
    HX(i8) HX(i16) HX(i32) HX(i64) HX(u8) HX(u16) HX(u32) HX(u64)
    {"bincount_finish_u32_u8", (void *)&bincount_finish_u32_u8, 1},
    {"bincount_finish_u32_u16", (void *)&bincount_finish_u32_u16, 1},
    {"bincount_finish_u64_f32", (void *)&bincount_finish_u64_f32, 1},
    {"bincount_finish_u64_f64", (void *)&bincount_finish_u64_f64, 1},
    {"bincount_finish_f64_f32", (void *)&bincount_finish_f64_f32, 1},
    {"bincount_det_finish_f32", (void *)&bincount_det_finish_f32, 3},
    {"bincount_det_finish_f64", (void *)&bincount_det_finish_f64, 3},
    {"scatter_set_last", (void *)&scatter_set_last, 4},
    {"scatter_set_rows_w1", (void *)&scatter_set_rows_w1, 4},
    {"scatter_set_rows_w2", (void *)&scatter_set_rows_w2, 4},
    {"scatter_set_rows_w4", (void *)&scatter_set_rows_w4, 4},
    {"scatter_set_rows_w8", (void *)&scatter_set_rows_w8, 4},
#define C(XN) {"call_check_" #XN, (void *)&call_check_##XN, 5}, \
              {"call_check_record_" #XN, (void *)&call_check_record_##XN, 5},
    C(i8) C(i16) C(i32) C(i64) C(u8) C(u16) C(u32) C(u64)
#undef C
};
#undef H
#undef D
#undef R
#undef HX
constexpr int N_KERNELS = sizeof(kernels) / sizeof(kernels[0]);

/* A function handle: a kernel in the module of one device's context. */
struct function_entry {
    const kernel_entry *kernel;
    int device;
    unsigned long long context_id; /* of the context it was got in */
};
struct context_entry {
    int device;
    unsigned long long id;
};
struct module_entry {
    int device;
};

function_entry functions[MAX_DEVICES][N_KERNELS];
context_entry contexts[MAX_DEVICES];
module_entry modules[MAX_DEVICES];
bool tables_ready = false;

/* A generated kernel, compiled for the host, in one device's context. */
struct generated_entry {
    std::string name;
    void (*run)(void **params, unsigned blocks, unsigned threads, size_t shared);
    /* A copy of the parameters, to run later (the asynchronous mode), and its run. */
    void *(*bind)(void **params);
    void (*run_bound)(void *bound, unsigned blocks, unsigned threads, size_t shared);
    int device;
    bool hist; /* a fused histogram kernel */
};
std::deque<generated_entry> generated; /* stable addresses: the handles */

std::mutex lock;
std::map<const void *, int> max_dynamic_shared; /* per function */
long long counters[13];                         /* see fake_cuda_counters, fake_cuda_counter */
/* Page-locked allocations live now (cuMemHostAlloc, cuMemFreeHost): their sizes. */
std::map<const void *, size_t> pinned;
/* The sticky error of the (every) context: after a kernel made a misaligned
 * access, every later call that uses the context fails with it, as on a GPU,
 * until the test clears it (fake_cuda_sticky). */
std::atomic<int> sticky{0};
int fail_call = -1, fail_code = 0, fail_skip = 0;
thread_local int current_device = 0;

/* Held synchronizations and host functions. */
std::condition_variable sync_cv;
bool hold_syncs = false;
int syncs_waiting = 0;
struct host_func {
    void (*fn)(void *);
    void *data;
};
std::vector<host_func> host_funcs;
constexpr auto WAIT_LIMIT = std::chrono::seconds(30);

int env_int(const char *name, int fallback)
{
    const char *v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
}

int device_count()
{
    const int n = env_int("FAKE_CUDA_DEVICES", 2);
    return n < 1 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : n;
}

void make_tables()
{
    std::lock_guard<std::mutex> g(lock);
    if (tables_ready)
        return;
    for (int d = 0; d < MAX_DEVICES; d++) {
        contexts[d].device = d;
        contexts[d].id = (unsigned long long)d + 1;
        modules[d].device = d;
        for (int i = 0; i < N_KERNELS; i++)
            functions[d][i] = {&kernels[i], d, 0};
    }
    tables_ready = true;
}

/* Fail this call if the test asked for it (once). */
/* FAKE_CUDA_SKIP_KERNELS=1: launches are checked and counted but no kernel
 * runs (the host-overhead benchmark, benchmarks/bench_gpu_host.py, times the
 * host side alone); results are then whatever the memory held. */
bool skip_kernels()
{
    static const bool skip = env_int("FAKE_CUDA_SKIP_KERNELS", 0) != 0;
    return skip;
}

/* Whether [p, p + bytes) lies in page-locked memory (called under `lock`). */
bool is_pinned(const void *p, size_t bytes)
{
    auto it = pinned.upper_bound(p);
    if (it == pinned.begin())
        return false;
    --it;
    const char *base = (const char *)it->first;
    return (const char *)p >= base && (const char *)p + bytes <= base + it->second;
}

bool injected(int which, CUresult *code)
{
    std::lock_guard<std::mutex> g(lock);
    if (fail_call != which)
        return false;
    if (fail_skip > 0) {
        fail_skip--;
        return false;
    }
    fail_call = -1;
    *code = fail_code;
    return true;
}

int shared_per_sm()
{
    return env_int("FAKE_CUDA_SHARED_PER_SM", 233472);
}

int shared_optin()
{
    return env_int("FAKE_CUDA_SHARED_OPTIN", 232448);
}

int block_reserve()
{
    return env_int("FAKE_CUDA_BLOCK_RESERVE", 1024);
}

/* Blocks of `threads` threads and `shared` dynamic shared bytes that fit on
 * one multiprocessor. */
int resident_blocks(int threads, long long shared)
{
    int blocks = env_int("FAKE_CUDA_MAX_BLOCKS_PER_SM", 2);
    if (threads > 0 && 2048 / threads < blocks)
        blocks = 2048 / threads;
    const long long by_shared = shared_per_sm() / (shared + block_reserve());
    return by_shared < blocks ? (int)by_shared : blocks;
}

const function_entry *as_function(void *func)
{
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (func >= (void *)&functions[d][0] && func < (void *)&functions[d][N_KERNELS])
            return (const function_entry *)func;
    }
    return nullptr;
}

const generated_entry *as_generated(void *func)
{
    for (const generated_entry &g : generated) {
        if (func == (const void *)&g)
            return &g;
    }
    return nullptr;
}

/* A histogram kernel: built in, or a generated fused one. */
bool is_hist_function(void *func)
{
    if (as_function(func) != nullptr)
        return true;
    std::lock_guard<std::mutex> g(lock);
    const generated_entry *e = as_generated(func);
    return e != nullptr && e->hist;
}

/* The generated kernel `name` for `device`: its source compiled for the host
 * (once) and loaded; nullptr when there is none or it does not build.
 * Called under `lock`. */
const generated_entry *load_generated(const char *name, int device)
{
    for (const generated_entry &g : generated) {
        if (g.name == name && g.device == device)
            return &g;
    }
    const char *cache = std::getenv("AESARA_BINCOUNT_CACHE");
    if (cache == nullptr || std::strchr(name, '/') != nullptr)
        return nullptr;
    const std::string source = std::string(cache) + "/" + name + ".cu";
    const std::string lib = std::string(cache) + "/" + name + "-emu-" BC_EMU_BUILD_ID ".so";
    void *handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const std::string tmp = lib + "." + std::to_string((long long)getpid()) + ".tmp";
#ifdef BC_EMU_RACECHECK
        /* Instrumented (emu_race.h), then linked without libtsan. */
        const std::string cmd = std::string(BC_EMU_CXX) +
                                " " BC_EMU_GENERATED_FLAGS " -c -include " BC_EMU_PCH " -I" BC_EMU_C_CODE
                                " -I" BC_EMU_DIR " -DBC_EMU_SOURCE='\"" + source + "\"' -o '" + tmp +
                                ".o' " BC_EMU_DIR "/generated_emu.cc 1>&2 && " BC_EMU_CXX
                                " -shared -pthread -o '" + tmp + "' '" + tmp + ".o' 1>&2 && rm -f '" +
                                tmp + ".o'";
#else
        const std::string cmd = std::string(BC_EMU_CXX) +
                                " " BC_EMU_GENERATED_FLAGS " -shared -include " BC_EMU_PCH " -I" BC_EMU_C_CODE
                                " -I" BC_EMU_DIR " -DBC_EMU_SOURCE='\"" + source + "\"' -o '" + tmp +
                                "' " BC_EMU_DIR "/generated_emu.cc 1>&2";
#endif
        if (std::system(cmd.c_str()) != 0 || std::rename(tmp.c_str(), lib.c_str()) != 0) {
            std::fprintf(stderr, "fake libcuda: building %s failed: %s\n", name, cmd.c_str());
            return nullptr;
        }
        handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    void *run = handle ? dlsym(handle, "bc_emu_launch") : nullptr;
    void *bind = handle ? dlsym(handle, "bc_emu_bind") : nullptr;
    void *run_bound = handle ? dlsym(handle, "bc_emu_run_bound") : nullptr;
    if (run == nullptr || bind == nullptr || run_bound == nullptr)
        return nullptr;
    generated.push_back({name, (void (*)(void **, unsigned, unsigned, size_t))run,
                         (void *(*)(void **))bind, (void (*)(void *, unsigned, unsigned, size_t))run_bound,
                         device, std::strncmp(name, "bincount_hist_fused_", 20) == 0});
    return &generated.back();
}

/* Run the queued host functions on a thread of their own, as the driver
 * does; false when they do not finish within WAIT_LIMIT. */
bool run_host_funcs()
{
    std::vector<host_func> queued;
    {
        std::lock_guard<std::mutex> g(lock);
        queued.swap(host_funcs);
    }
    if (queued.empty())
        return true;
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> finished = done->get_future();
    std::thread([queued, done]() {
        for (const host_func &h : queued)
            h.fn(h.data);
        done->set_value();
    }).detach();
    return finished.wait_for(WAIT_LIMIT) == std::future_status::ready;
}

/* Run a built-in kernel now, or queue it with a copy of its parameters
 * (the asynchronous mode, emu_stream.h); a misaligned access makes the
 * sticky error once it has run. */
template <typename P>
void run_kernel(void (*fn)(P), const P &params, unsigned blocks, unsigned threads, size_t shared)
{
    auto run = [fn, params, blocks, threads, shared] {
        emu::launch(fn, params, blocks, threads, shared);
        if (emu::misaligned.exchange(false))
            sticky.store(ERR_MISALIGNED_ADDRESS);
    };
    if (emu_stream::enabled())
        emu_stream::enqueue(run);
    else
        run();
}

} /* namespace */

extern "C" {

/* Test API: counters[0] launches, [1] stream synchronizations, [2] device-to-host
 * copies, [3] memsets, [4] device-to-device copies, [5] module loads, [6] histogram
 * launches with more blocks than run at once (a second wave), [7] the dynamic shared
 * memory of the last histogram launch. */
void fake_cuda_counters(long long *out)
{
    std::lock_guard<std::mutex> g(lock);
    for (int i = 0; i < 8; i++)
        out[i] = counters[i];
}

/* Test API: one counter, `which` of fake_cuda_counters or beyond: [8]
 * page-locked allocations (cuMemHostAlloc), [9] device-to-host copies into
 * pageable memory (each one a wait for the stream, as on a GPU: the driver
 * copies through a staging buffer and returns when the copy is done),
 * [10] page-locked allocations live now, [11] the grid (blocks) of the last
 * launch of a generated kernel, [12] that of the last launch of a kernel of
 * the package's modules. */
long long fake_cuda_counter(int which)
{
    std::lock_guard<std::mutex> g(lock);
    if (which == 10)
        return (long long)pinned.size();
    return which >= 0 && which < 13 ? counters[which] : -1;
}

/* Test API: make the next call of kind `which` (0 launch, 1 memset, 2 device-to-host
 * copy, 3 synchronization) return `code`. */
void fake_cuda_fail_next(int which, int code)
{
    std::lock_guard<std::mutex> g(lock);
    fail_call = which;
    fail_code = code;
    fail_skip = 0;
}

/* Test API: as fake_cuda_fail_next, but let `skip` calls of that kind succeed first. */
void fake_cuda_fail_after(int which, int code, int skip)
{
    std::lock_guard<std::mutex> g(lock);
    fail_call = which;
    fail_code = code;
    fail_skip = skip;
}

/* Test API: device `device`'s context destroyed and another created at the
 * same address (a new ID; functions got before fail to launch). */
void fake_cuda_replace_context(int device)
{
    make_tables();
    std::lock_guard<std::mutex> g(lock);
    contexts[device].id += 1000;
}

/* Test API: the calling thread's current device (its context). */
void fake_cuda_set_device(int device)
{
    current_device = device;
}

/* Test API: while `on`, every stream synchronization waits (at most 30 s)
 * until it is turned off. */
void fake_cuda_hold_syncs(int on)
{
    {
        std::lock_guard<std::mutex> g(lock);
        hold_syncs = on != 0;
    }
    sync_cv.notify_all();
}

/* Test API: synchronizations waiting now. */
int fake_cuda_syncs_waiting(void)
{
    std::lock_guard<std::mutex> g(lock);
    return syncs_waiting;
}

/* Test API: the sticky error (0 when none); cleared when `clear`. */
int fake_cuda_sticky(int clear)
{
    return clear ? sticky.exchange(0) : sticky.load();
}

/* Test API: __ldcs calls of the kernels by width in bytes (out[1] ... out[16]). */
void fake_cuda_load_counts(long long *out)
{
    for (int i = 0; i < 17; i++)
        out[i] = emu::load_counts[i].load();
}

/* Test API: __stwb calls of the kernels by width in bytes (out[1] ... out[16]). */
void fake_cuda_store_counts(long long *out)
{
    for (int i = 0; i < 17; i++)
        out[i] = emu::store_counts[i].load();
}

/* Test API: wait until the stream has run everything queued (the
 * asynchronous mode, emu_stream.h; at once otherwise): 0, or
 * CUDA_ERROR_LAUNCH_TIMEOUT after 30 s.  The fake CuPy calls it before its
 * own work on device memory. */
int fake_cuda_drain(void)
{
    if (!emu_stream::enabled())
        return OK;
    return emu_stream::drain(WAIT_LIMIT) ? OK : ERR_LAUNCH_TIMEOUT;
}

/* Test API: the faults the asynchronous mode reported (emu_stream.h). */
long long fake_cuda_async_reports(void)
{
    return emu_stream::reports.load();
}

/* Test API: the races the race check found (distinct pairs of code
 * locations, emu_race.h), or -1 when this library was built without it. */
long long fake_cuda_race_reports(void)
{
#ifdef BC_EMU_RACECHECK
    return emu::race::reports.load();
#else
    return -1;
#endif
}

CUresult cuInit(unsigned flags)
{
#ifndef BC_EMU_RACECHECK
    const char *race = std::getenv("FAKE_CUDA_RACECHECK");
    if (race != nullptr && *race && std::strcmp(race, "0") != 0) {
        std::fprintf(stderr, "fake libcuda: FAKE_CUDA_RACECHECK is set, but this library was built "
                             "without the race check (tests/gpu_emu/build.py builds it when the "
                             "variable is set)\n");
        return ERR_INVALID_VALUE;
    }
#endif
    make_tables();
    return flags == 0 ? OK : ERR_INVALID_VALUE;
}

CUresult cuDriverGetVersion(int *version)
{
    *version = env_int("FAKE_CUDA_DRIVER_VERSION", 12080);
    return OK;
}

CUresult cuGetErrorName(CUresult code, const char **name)
{
    switch (code) {
    case 2:
        *name = "CUDA_ERROR_OUT_OF_MEMORY";
        break;
    case ERR_INVALID_CONTEXT:
        *name = "CUDA_ERROR_INVALID_CONTEXT";
        break;
    case ERR_INVALID_HANDLE:
        *name = "CUDA_ERROR_INVALID_HANDLE";
        break;
    case ERR_LAUNCH_TIMEOUT:
        *name = "CUDA_ERROR_LAUNCH_TIMEOUT";
        break;
    case ERR_MISALIGNED_ADDRESS:
        *name = "CUDA_ERROR_MISALIGNED_ADDRESS";
        break;
    default:
        *name = "CUDA_ERROR_FAKE";
    }
    return OK;
}

CUresult cuGetErrorString(CUresult code, const char **text)
{
    switch (code) {
    case 2:
        *text = "out of memory";
        break;
    case ERR_INVALID_HANDLE:
        *text = "a function of another context";
        break;
    case ERR_LAUNCH_TIMEOUT:
        *text = "the fake driver waited 30 s for the stream";
        break;
    case ERR_MISALIGNED_ADDRESS:
        *text = "a kernel made a misaligned memory access (sticky: the context is lost)";
        break;
    default:
        *text = "an error injected by the fake driver";
    }
    return OK;
}

CUresult cuDeviceGetCount(int *count)
{
    *count = device_count();
    return OK;
}

CUresult cuCtxGetCurrent(void **ctx)
{
    make_tables();
    *ctx = &contexts[current_device];
    return OK;
}

CUresult cuCtxGetId(void *ctx, unsigned long long *id)
{
    const context_entry *c = (const context_entry *)ctx;
    if (env_int("FAKE_CUDA_NO_CTX_ID", 0))
        return 801; /* CUDA_ERROR_NOT_SUPPORTED */
    if (c < &contexts[0] || c >= &contexts[MAX_DEVICES])
        return ERR_INVALID_CONTEXT;
    *id = c->id;
    return OK;
}

CUresult cuCtxGetDevice(int *dev)
{
    *dev = current_device;
    return OK;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, int dev)
{
    if (dev < 0 || dev >= device_count())
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
        *value = shared_per_sm();
        return OK;
    case 97: /* opt-in shared memory per block */
        *value = shared_optin();
        return OK;
    default:
        return ERR_INVALID_VALUE;
    }
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
    *bytes = (size_t)env_int("FAKE_CUDA_TOTAL_MEM_MB", 1024) << 20;
    return dev >= 0 && dev < device_count() ? OK : ERR_INVALID_VALUE;
}

CUresult cuModuleLoadData(void **module, const void *image)
{
    const char *p = (const char *)image;
    const bool cubin = std::memcmp(p, "\x7f" "ELF", 4) == 0;
    const bool ptx = std::strstr(p, ".version") != nullptr && std::strstr(p, ".target") != nullptr;
    if (!cubin && !ptx)
        return ERR_INVALID_IMAGE;
    make_tables();
    std::lock_guard<std::mutex> g(lock);
    counters[5]++;
    *module = &modules[current_device];
    return OK;
}

CUresult cuModuleGetFunction(void **func, void *module, const char *name)
{
    const module_entry *m = (const module_entry *)module;
    if (m < &modules[0] || m >= &modules[MAX_DEVICES])
        return ERR_INVALID_VALUE;
    for (int i = 0; i < N_KERNELS; i++) {
        if (std::strcmp(kernels[i].name, name) == 0) {
            function_entry *f = &functions[m->device][i];
            __atomic_store_n(&f->context_id, contexts[m->device].id, __ATOMIC_RELAXED);
            *func = f;
            return OK;
        }
    }
    if (std::strncmp(name, "bc_elemwise_", 12) == 0 ||
        std::strncmp(name, "bincount_hist_fused_", 20) == 0) {
        std::lock_guard<std::mutex> g(lock);
        const generated_entry *e = load_generated(name, m->device);
        if (e != nullptr) {
            *func = (void *)e;
            return OK;
        }
    }
    return ERR_NOT_FOUND;
}

CUresult cuFuncSetAttribute(void *func, int attribute, int value)
{
    if (attribute != 8 || !is_hist_function(func)) /* only the dynamic shared memory limit */
        return ERR_INVALID_VALUE;
    if (value < 0 || value > shared_optin())
        return ERR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(lock);
    max_dynamic_shared[func] = value;
    return OK;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *func, int threads,
                                                     size_t shared)
{
    if (threads <= 0 || threads > 1024)
        return ERR_INVALID_VALUE;
    const generated_entry *e;
    {
        std::lock_guard<std::mutex> g(lock);
        e = as_generated(func);
    }
    if (e != nullptr && !e->hist) {
        /* A generated elementwise kernel: limited by its registers, as on an
         * sm_90 multiprocessor (65536 registers, at most 2048 threads and 32
         * blocks); FAKE_CUDA_EW_REGISTERS per thread (default 40, what NVRTC
         * gives the float64 kernels), in warps of 32, and by shared memory. */
        const int regs = env_int("FAKE_CUDA_EW_REGISTERS", 40);
        const int warps = (threads + 31) / 32;
        int fit = 65536 / (regs * 32 * warps);
        if (2048 / threads < fit)
            fit = 2048 / threads;
        if (fit > 32)
            fit = 32;
        const long long by_shared = shared_per_sm() / ((long long)shared + block_reserve());
        *blocks = by_shared < fit ? (int)by_shared : fit;
        return OK;
    }
    if (!is_hist_function(func))
        return ERR_INVALID_VALUE;
    {
        /* A block asking more than the function is allowed cannot run at all. */
        std::lock_guard<std::mutex> g(lock);
        auto it = max_dynamic_shared.find(func);
        const long long allowed = it == max_dynamic_shared.end() ? 48 * 1024 : it->second;
        if ((long long)shared > allowed) {
            *blocks = 0;
            return OK;
        }
    }
    *blocks = resident_blocks(threads, (long long)shared);
    return OK;
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *bytes, void *func, int blocks,
                                                 int threads)
{
    if (!is_hist_function(func) || blocks <= 0 || threads <= 0)
        return ERR_INVALID_VALUE;
    long long avail = 0;
    if (resident_blocks(threads, 0) >= blocks) {
        avail = shared_per_sm() / blocks - block_reserve();
        avail = avail < 0 ? 0 : avail > shared_optin() ? shared_optin() : avail;
    }
    *bytes = (size_t)avail;
    return OK;
}

CUresult cuLaunchKernel(void *func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **extra)
{
    CUresult code;
    (void)stream;
    if (sticky.load())
        return sticky.load();
    if (injected(0, &code))
        return code;
    const function_entry *f = as_function(func);
    if (f == nullptr && params != nullptr && extra == nullptr) {
        const generated_entry *e;
        {
            std::lock_guard<std::mutex> g(lock);
            e = as_generated(func);
        }
        if (e == nullptr)
            return ERR_INVALID_VALUE;
        if (e->device != current_device)
            return ERR_INVALID_HANDLE;
        if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || bx % 32 != 0 || bx > 1024 || by != 1 ||
            bz != 1 || (shared != 0 && !e->hist) || (e->hist && bx != BC_CUDA_THREADS))
            return ERR_INVALID_VALUE;
        {
            std::lock_guard<std::mutex> g(lock);
            if (e->hist) {
                auto it = max_dynamic_shared.find(func);
                if ((int)shared > (it == max_dynamic_shared.end() ? 48 * 1024 : it->second))
                    return ERR_INVALID_VALUE;
            }
            counters[0]++;
            counters[11] = gx;
        }
        if (skip_kernels())
            return OK;
        if (emu_stream::enabled()) {
            void *bound = e->bind(params);
            emu_stream::enqueue([e, bound, gx, bx, shared] {
                e->run_bound(bound, gx, bx, shared);
                if (emu::misaligned.exchange(false))
                    sticky.store(ERR_MISALIGNED_ADDRESS);
            });
            return OK;
        }
        e->run(params, gx, bx, shared);
        if (emu::misaligned.exchange(false))
            sticky.store(ERR_MISALIGNED_ADDRESS);
        return OK;
    }
    if (f == nullptr || params == nullptr || extra != nullptr)
        return ERR_INVALID_VALUE;
    if (f->device != current_device ||
        __atomic_load_n(&f->context_id, __ATOMIC_RELAXED) != contexts[current_device].id)
        return ERR_INVALID_HANDLE; /* a function of another context */
    if (gx == 0 || gy != 1 || gz != 1 || bx != BC_CUDA_THREADS || by != 1 || bz != 1)
        return ERR_INVALID_VALUE;
    const kernel_entry *k = f->kernel;
    {
        std::lock_guard<std::mutex> g(lock);
        auto it = max_dynamic_shared.find(func);
        const int limit = it == max_dynamic_shared.end() ? 48 * 1024 : it->second;
        if ((int)shared > limit)
            return ERR_INVALID_VALUE;
        counters[0]++;
        counters[12] = gx;
        if (k->finish == 0) {
            const long long wave = (long long)env_int("FAKE_CUDA_SMS", 2) *
                                   resident_blocks((int)bx, (long long)shared);
            if ((long long)gx > wave)
                counters[6]++;
            counters[7] = shared;
        }
    }
    /* The addresses a kernel's loads start from, against its dtypes (a
     * misaligned one faults at once on a GPU; the kernels' own loads and
     * atomics are checked as they run, by cuda_emu.h, but their plain loads
     * are not): the histogram, rows, index-check and scatter-set kernels. */
    const std::string name = k->name;
    bool misaligned = false;
    if (k->finish == 2) {
        const bc_rows_params &p = *(const bc_rows_params *)params[0];
        const bool check = name.find("_check_") != std::string::npos;
        const int isize = dtype_size(check ? name : name.substr(0, name.find_last_of('_')));
        const int osize = check ? 0 : dtype_size(name);
        misaligned = (isize && p.idx % isize) || (osize && p.n > 0 && p.row_size > 0 &&
                                                  (p.out % osize || p.inc % osize));
    } else if (k->finish == 0) {
        const bc_hist_params &p = *(const bc_hist_params *)params[0];
        const std::string head = name.substr(0, name.find_last_of('_'));
        const int xsize = dtype_size(head), wsize = dtype_size(name);
        misaligned = p.size > 0 && (p.x % xsize || (wsize && p.w % wsize));
    } else if (k->finish == 5) {
        /* the index check: indices of the name's dtype, int64 rows and status */
        const bc_check_params &p = *(const bc_check_params *)params[0];
        const int isize = dtype_size(name);
        misaligned = p.n > 0 && ((isize && p.idx % isize) || p.rows % 8 || p.status % 8);
    } else if (k->finish == 4) {
        /* the scatter-set: int64 rows, uint64 last writers; rows of w<bytes> elements */
        const bc_set_params &p = *(const bc_set_params *)params[0];
        const size_t at = name.find("_w");
        const long long esize = at == std::string::npos ? 0 : std::atoll(name.c_str() + at + 2);
        misaligned = p.n > 0 && (p.rows % 8 || p.last % 8 ||
                                 (esize && p.row_elems > 0 &&
                                  (p.out % esize || p.values % esize || p.out_row_bytes % esize)));
    }
    if (misaligned) {
        sticky.store(ERR_MISALIGNED_ADDRESS);
        return OK; /* reported by the next call, as the asynchronous fault is */
    }
    if (skip_kernels())
        return OK;
    if (k->finish == 5)
        run_kernel((void (*)(bc_check_params))k->fn, *(const bc_check_params *)params[0], gx, bx, shared);
    else if (k->finish == 4)
        run_kernel((void (*)(bc_set_params))k->fn, *(const bc_set_params *)params[0], gx, bx, shared);
    else if (k->finish == 2)
        run_kernel((void (*)(bc_rows_params))k->fn, *(const bc_rows_params *)params[0], gx, bx, shared);
    else if (k->finish == 3)
        run_kernel((void (*)(bc_det_finish_params))k->fn, *(const bc_det_finish_params *)params[0], gx,
                   bx, shared);
    else if (k->finish)
        run_kernel((void (*)(bc_finish_params))k->fn, *(const bc_finish_params *)params[0], gx, bx,
                   shared);
    else
        run_kernel((void (*)(bc_hist_params))k->fn, *(const bc_hist_params *)params[0], gx, bx, shared);
    return OK;
}

CUresult cuMemsetD32Async(unsigned long long dst, unsigned value, size_t count, void *stream)
{
    if (sticky.load())
        return sticky.load();
    CUresult code;
    (void)stream;
    if (injected(1, &code))
        return code;
    auto run = [dst, value, count] {
        unsigned *p = (unsigned *)dst;
        for (size_t i = 0; i < count; i++)
            p[i] = value;
    };
    if (emu_stream::enabled())
        emu_stream::enqueue(run);
    else
        run();
    std::lock_guard<std::mutex> g(lock);
    counters[3]++;
    return OK;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t bytes, void *stream)
{
    if (sticky.load())
        return sticky.load();
    CUresult code;
    (void)stream;
    if (injected(2, &code))
        return code;
    bool into_pinned;
    {
        std::lock_guard<std::mutex> g(lock);
        into_pinned = is_pinned(dst, bytes);
    }
    if (emu_stream::enabled() && into_pinned) {
        emu_stream::enqueue([dst, src, bytes] { std::memcpy(dst, (const void *)src, bytes); },
                            (const char *)dst, bytes);
    } else {
        /* Into pageable memory the driver copies once the stream is done. */
        if (emu_stream::enabled() && !emu_stream::drain(WAIT_LIMIT))
            return ERR_LAUNCH_TIMEOUT;
        std::memcpy(dst, (const void *)src, bytes);
    }
    std::lock_guard<std::mutex> g(lock);
    counters[2]++;
    if (!into_pinned)
        counters[9]++;
    return OK;
}

CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t bytes,
                              void *stream)
{
    if (sticky.load())
        return sticky.load();
    (void)stream;
    if (emu_stream::enabled())
        emu_stream::enqueue([dst, src, bytes] { std::memmove((void *)dst, (const void *)src, bytes); });
    else
        std::memmove((void *)dst, (const void *)src, bytes);
    std::lock_guard<std::mutex> g(lock);
    counters[4]++;
    return OK;
}

CUresult cuLaunchHostFunc(void *stream, void (*fn)(void *), void *data)
{
    if (sticky.load())
        return sticky.load();
    (void)stream;
    if (fn == nullptr)
        return ERR_INVALID_VALUE;
    if (emu_stream::enabled()) {
        emu_stream::enqueue([fn, data] { fn(data); }); /* in order, on the stream thread */
        return OK;
    }
    std::lock_guard<std::mutex> g(lock);
    host_funcs.push_back({fn, data});
    return OK;
}

/* Test API: make cuStreamIsCapturing report `status` (1: a CUDA graph capture
 * is under way on every stream; 0: none). */
int capture_status = 0;
void fake_cuda_set_capturing(int status)
{
    capture_status = status;
}

CUresult cuStreamIsCapturing(void *stream, int *status)
{
    (void)stream;
    if (sticky.load())
        return sticky.load();
    *status = capture_status;
    return OK;
}

CUresult cuStreamSynchronize(void *stream)
{
    if (sticky.load())
        return sticky.load();
    CUresult code;
    (void)stream;
    if (injected(3, &code))
        return code;
    if (emu_stream::enabled() && !emu_stream::drain(WAIT_LIMIT))
        return ERR_LAUNCH_TIMEOUT;
    if (sticky.load())
        return sticky.load(); /* a kernel of the stream faulted */
    if (!run_host_funcs())
        return ERR_LAUNCH_TIMEOUT;
    std::unique_lock<std::mutex> g(lock);
    syncs_waiting++;
    const bool released = sync_cv.wait_for(g, WAIT_LIMIT, [] { return !hold_syncs; });
    syncs_waiting--;
    if (!released)
        return ERR_LAUNCH_TIMEOUT;
    counters[1]++;
    return OK;
}

/* As the driver: page-aligned memory, not zeroed (filled with 0xA5 here, so
 * that code relying on zeroed memory fails); 0 bytes or unknown flags are
 * CUDA_ERROR_INVALID_VALUE; cuMemFreeHost of anything else than such an
 * allocation is CUDA_ERROR_INVALID_VALUE. */
CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags)
{
    if (p == nullptr || bytes == 0 || (flags & ~0x7u) != 0)
        return ERR_INVALID_VALUE;
    const size_t page = 4096, size = (bytes + page - 1) / page * page;
    void *mem = std::aligned_alloc(page, size);
    if (mem == nullptr)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    std::memset(mem, 0xA5, size);
    std::lock_guard<std::mutex> g(lock);
    pinned[mem] = size;
    counters[8]++;
    *p = mem;
    return OK;
}

CUresult cuMemFreeHost(void *p)
{
    size_t size;
    {
        std::lock_guard<std::mutex> g(lock);
        auto it = pinned.find(p);
        if (it == pinned.end())
            return ERR_INVALID_VALUE;
        size = it->second;
        pinned.erase(it);
    }
    if (emu_stream::enabled() && !emu_stream::may_free(p, size))
        return OK; /* reported; the copy in flight still lands in it */
    std::free(p);
    return OK;
}

} /* extern "C" */
