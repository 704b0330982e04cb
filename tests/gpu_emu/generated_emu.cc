/*
 * generated_emu.cc -- wraps one generated CUDA source (a GpuElemwise kernel,
 * c_code/cuda/elemwise_kernel.cu with the scalar code of one node, or a
 * fused histogram kernel of GpuFusedBincount, c_code/cuda/bincount_kernels.cu
 * with the generated bc_fused_weight) for the
 * emulation: fake_libcuda.cc compiles it with the host compiler, with
 * -DBC_EMU_SOURCE=<path of the .cu> (the copy the kernel layer keeps in its
 * cache, aesara_bincount_core/cuda/modules.py:generated_function), into a
 * shared object of its own, dlopens it, and launches the kernel through
 * bc_emu_launch below, on CPU threads (cuda_emu.h).
 *
 * Test code only (C++20, g++).
 */
#include "cuda_emu.h"

#include BC_EMU_SOURCE

#ifdef BC_FUSED_NAME
/* A fused histogram kernel takes two parameters; the emulation launches
 * kernels of one, so it runs this wrapper of the pair. */
struct bc_emu_fused_args {
    bc_hist_params p;
    bc_fused_params f;
};
static void bc_emu_fused(const bc_emu_fused_args a)
{
    BC_FUSED_NAME(a.p, a.f);
}

typedef bc_emu_fused_args bc_emu_args;
static bc_emu_args bc_emu_args_of(void **params)
{
    return {*(const bc_hist_params *)params[0], *(const bc_fused_params *)params[1]};
}
static void bc_emu_run(const bc_emu_args &a, unsigned blocks, unsigned threads, size_t shared)
{
    emu::launch(&bc_emu_fused, a, blocks, threads, shared);
}
#else
typedef bc_ew_params bc_emu_args;
static bc_emu_args bc_emu_args_of(void **params)
{
    return *(const bc_ew_params *)params[0];
}
static void bc_emu_run(const bc_emu_args &a, unsigned blocks, unsigned threads, size_t shared)
{
    emu::launch(&BC_EW_NAME, a, blocks, threads, shared);
}
#endif

/* The launch, now (params: cuLaunchKernel's kernelParams). */
extern "C" void bc_emu_launch(void **params, unsigned blocks, unsigned threads, size_t shared)
{
    bc_emu_run(bc_emu_args_of(params), blocks, threads, shared);
}

/* A copy of the parameters, for bc_emu_run_bound later (the asynchronous
 * mode: the caller's parameters are gone by then). */
extern "C" void *bc_emu_bind(void **params)
{
    return new bc_emu_args(bc_emu_args_of(params));
}

/* The launch of bound parameters, which it frees. */
extern "C" void bc_emu_run_bound(void *bound, unsigned blocks, unsigned threads, size_t shared)
{
    bc_emu_args *a = static_cast<bc_emu_args *>(bound);
    bc_emu_run(*a, blocks, threads, shared);
    delete a;
}
