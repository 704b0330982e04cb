"""The kernels loaded in each CUDA context, and the figures that size their launches.

Part of the stand-alone kernel layer.  A module (the kernels of one family
for one dtype of x, :func:`sources.compile_module`) is compiled once per
device architecture
(NVRTC, cached on disk) and loaded once per CUDA context; both the kernel
layer's launcher and the host C code of the GpuBincount Op
(:func:`c_kernel_handles`) take their kernels from here, keyed by the
context current on the calling thread (its unique ID,
:meth:`driver.Driver.context_key`, so that a context created where a
destroyed one was gets modules of its own).

Sizing a histogram kernel's launch (:class:`Kernels`): the plan wants
``BC_CUDA_BLOCKS_PER_SM`` blocks resident per multiprocessor, each with its
share of the multiprocessor's shared memory.  The driver keeps some shared
memory per resident block (1 KB on sm_80 and sm_90) and the kernel's
registers may allow fewer blocks, so the share is asked of the occupancy
calculator (``cuOccupancyAvailableDynamicSMemPerBlock``) and checked with
``cuOccupancyMaxActiveBlocksPerMultiprocessor``; when the blocks do not fit,
the plan takes one block per multiprocessor fewer.

A generated histogram kernel (``bincount_hist_fused_*``, the fused
prologue of :mod:`aesara_bincount_core.gpu.fused`) is registered by name
(:func:`register_generated_hist`) and then served like the others, from a
module of its own (with the finish kernels), sized the same way.

The kernels of the scatter-add of rows (``scatter_rows_*``, the ``"rows"``
family: a module of their own per index dtype) use no shared memory:
their resident blocks are what the occupancy calculator grants with none.
"""
import os
import threading
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from aesara_bincount_core.cuda import disk_cache
from aesara_bincount_core.cuda import driver as _driver
from aesara_bincount_core.cuda import nvrtc
from aesara_bincount_core.cuda.sources import (
    CONSTANTS,
    DTYPES,
    THREADS,
    compile_module,
    family_of,
    rows_scratch_kernels,
)

__all__ = [
    "DeviceModule",
    "Kernels",
    "RowsKernels",
    "device_module",
    "kernels_for",
    "rows_kernels_for",
    "c_kernel_handles",
    "c_rows_kernel_handles",
    "set_kernels",
    "shared_budget",
    "generated_function",
    "register_generated_hist",
]


def shared_budget(optin_per_block: int, per_multiprocessor: int, blocks_per_sm: int) -> int:
    """Bytes of shared memory one block may use when ``blocks_per_sm`` share a
    multiprocessor, from the device's attributes (before the occupancy check)."""
    share = per_multiprocessor // blocks_per_sm - CONSTANTS["SHARED_RESERVE"]
    return max(0, min(optin_per_block, share)) // 16 * 16


@dataclass(frozen=True)
class Kernels:
    """The kernels one call launches, in one context (``bc_cuda_kernels`` in C).

    Attributes
    ----------
    context, hist, finish : int
        ``CUcontext`` and ``CUfunction`` handles (``finish`` 0 when none).
    resident_blocks : int
        Blocks of ``hist`` that run at once on the device.
    shared_budget : int
        Bytes of dynamic shared memory a block of ``hist`` may use.
    total_memory : int
        Bytes of device memory.
    """

    context: int
    hist: int
    finish: int
    resident_blocks: int
    shared_budget: int
    total_memory: int


@dataclass(frozen=True)
class RowsKernels:
    """The kernels of one scatter-add of rows, in one context (``bc_rows_kernels`` in C).

    Attributes
    ----------
    context, check, add : int
        ``CUcontext`` and the ``CUfunction`` handles of the checking and the
        adding kernel.
    wide, finish : int
        float32 only (else 0): the kernels of the float64 scratch
        (:func:`sources.rows_scratch_kernels`).
    resident_blocks : int
        Blocks of ``add`` that run at once on the device.
    """

    context: int
    check: int
    add: int
    wide: int
    finish: int
    resident_blocks: int


@dataclass
class DeviceModule:
    """The kernels of one family for one dtype of x, loaded in one CUDA context."""

    context: int
    device: int
    multiprocessors: int
    optin_per_block: int
    shared_per_multiprocessor: int
    total_memory: int
    module: int
    #: name -> (CUfunction, resident blocks, shared budget); the latter two
    #: are 0 for the finish kernels.
    functions: Dict[str, Tuple[int, int, int]] = field(default_factory=dict)


_modules: Dict[tuple, DeviceModule] = {}
_lock = threading.Lock()


def _compute_capability(drv, dev: int) -> int:
    """The compute capability of device ``dev`` as NVRTC's arch number (8.0 -> 80)."""
    cc = 10 * drv.attribute(_driver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    return cc + drv.attribute(_driver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)


def _current_context(drv) -> int:
    ctx = drv.current_context()
    if not ctx:
        # No context on this thread yet: let the CUDA runtime (CuPy) create
        # the primary context of the current device, as its own calls would.
        import cupy

        cupy.cuda.runtime.setDevice(cupy.cuda.runtime.getDevice())
        cupy.cuda.runtime.free(0)
        ctx = drv.current_context()
    if not ctx:
        raise _driver.CudaDriverError("no CUDA context could be made current")
    return ctx


def _load(drv, x_dtype: str, cc: int, family: str) -> int:
    """Compile (or read from the cache) and load one module; the handle (see :func:`_load_image`)."""
    lib = nvrtc.load(drv.version)
    return _load_image(
        drv, lambda refresh: compile_module(x_dtype, cc, lib, family, refresh=refresh),
        f"the {family} kernels for {x_dtype}",
    )  # fmt: skip


def _load_image(drv, compile_image, what: str) -> int:
    """Load the image ``compile_image(refresh)`` gives; the module handle.

    An image the driver refuses (a cache entry that is valid on disk but not
    for this driver) is removed from the cache and compiled once more; when
    that one fails too, the error names the file.
    """
    image = compile_image(False)
    try:
        return drv.load_module(image.data)
    except _driver.CudaDriverError as first:
        nvrtc.discard(image)
        image = compile_image(True)
        try:
            return drv.load_module(image.data)
        except _driver.CudaDriverError as exc:
            raise _driver.CudaDriverError(
                f"{what} ({image.kind} for {image.target}, "
                f"{image.path or 'not cached'}) do not load, even compiled again: {exc} "
                f"(the first attempt: {first})",
                exc.code,
            ) from exc


def _device_module(key, load) -> DeviceModule:
    """The module of ``key`` in the current context: ``load(drv, cc)`` gives
    its handle the first time (under _lock)."""
    drv = _driver.driver()
    ctx = _current_context(drv)
    key = (drv.context_key(ctx),) + key
    with _lock:
        mod = _modules.get(key)
        if mod is not None:
            return mod
        dev = drv.current_device()
        module = load(drv, _compute_capability(drv, dev))
        mod = DeviceModule(
            context=ctx,
            device=dev,
            multiprocessors=drv.attribute(_driver.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
            optin_per_block=drv.attribute(
                _driver.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev
            ),
            shared_per_multiprocessor=drv.attribute(
                _driver.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev
            ),
            total_memory=drv.total_memory(dev),
            module=module,
        )
        _modules[key] = mod
        return mod


def device_module(x_dtype: str, family: str = "hist") -> DeviceModule:
    """The kernels of ``family`` for ``x_dtype`` in the current context,
    compiled and loaded once (``family``: a key of :data:`sources.FAMILIES`).

    Raises
    ------
    nvrtc.NvrtcError, driver.CudaDriverError
        No NVRTC (or one newer than the driver), no driver, a failed load
        (after one fresh compile; the message names the cached file).
    """
    return _device_module((family, x_dtype), lambda drv, cc: _load(drv, x_dtype, cc, family))


def _size_hist(drv, mod: DeviceModule, func: int, most_per_sm: int) -> Tuple[int, int]:
    """(resident blocks, shared budget) of a histogram kernel (module docstring),
    with at most ``most_per_sm`` blocks per multiprocessor; leaves the kernel
    allowed exactly that budget."""
    limit = _driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    # Allowed the most any candidate asks, so that the calculator weighs them all.
    drv.set_function_attribute(
        func, limit, shared_budget(mod.optin_per_block, mod.shared_per_multiprocessor, 1)
    )
    found = mod.multiprocessors, 0  # not even one block with shared memory: global only
    for per_sm in range(most_per_sm, 0, -1):
        budget = shared_budget(mod.optin_per_block, mod.shared_per_multiprocessor, per_sm)
        available = drv.available_shared(func, per_sm, THREADS)
        if available is not None:
            budget = min(budget, available // 16 * 16)
        if drv.max_active_blocks(func, THREADS, budget) >= per_sm:
            found = per_sm * mod.multiprocessors, budget
            break
    drv.set_function_attribute(func, limit, found[1])
    return found


def _function(mod: DeviceModule, name: str) -> Tuple[int, int, int]:
    """(CUfunction, resident blocks, shared budget) of kernel ``name`` (under _lock)."""
    found = mod.functions.get(name)
    if found is None:
        drv = _driver.driver()
        func = drv.get_function(mod.module, name)
        resident, budget = 0, 0
        if name.startswith(("bincount_hist_", _FUSED_PREFIX)):
            # The deterministic pass (a sub-histogram per warp): one block
            # per multiprocessor, with the most shared memory, for the
            # widest window (c_code/cuda_host/bincount_det_launch.h).
            most = 1 if "_det_" in name else CONSTANTS["BLOCKS_PER_SM"]
            resident, budget = _size_hist(drv, mod, func, most)
        elif name.startswith(("scatter_rows_", "scatter_set_", "call_check_")):
            # The deterministic rows kernel takes dynamic shared memory.
            shared = CONSTANTS["ROWS_DET_SHARED_BYTES"] if name.startswith("scatter_rows_det_") else 0
            per_sm = drv.max_active_blocks(func, THREADS, shared)
            resident = max(1, per_sm) * mod.multiprocessors
        found = mod.functions[name] = (func, resident, budget)
    return found


def kernels_for(x_dtype: str, hist: str, finish: Optional[str]) -> Kernels:
    """The :class:`Kernels` of the current context for one call.

    Parameters
    ----------
    x_dtype : str
        dtype of x (the module).
    hist, finish : str
        Kernel names (:class:`sources.Accumulation`); ``finish`` empty or None
        when the accumulator is the output.  A ``hist`` registered with
        :func:`register_generated_hist` is taken, with ``finish``, from its
        generated module.

    Raises
    ------
    nvrtc.NvrtcError, driver.CudaDriverError
    """
    generated = _generated_hist.get(hist)
    if generated is None:
        mod = device_module(x_dtype)
    else:
        mod = _device_module(("generated", hist), lambda drv, cc: _load_generated(drv, cc, hist, *generated))
    with _lock:
        hist_func, resident, budget = _function(mod, hist)
        finish_func = _function(mod, finish)[0] if finish else 0
    return Kernels(mod.context, hist_func, finish_func, resident, budget, mod.total_memory)


def c_kernel_handles(x_dtype: str, hist: str, finish: str) -> Tuple[int, ...]:
    """What the host C code of ``GpuBincount`` needs, for the current context.

    Returns
    -------
    tuple of int
        ``(context, hist function, finish function or 0, resident blocks,
        shared-memory budget per block, device memory in bytes)``: the
        fields of ``bc_cuda_kernels``.
    """
    k = kernels_for(x_dtype, hist, finish)
    return (k.context, k.hist, k.finish, k.resident_blocks, k.shared_budget, k.total_memory)


def rows_kernels_for(idx_dtype: str, check: str, add: str) -> RowsKernels:
    """The :class:`RowsKernels` of the current context for one scatter-add of rows.

    Parameters
    ----------
    idx_dtype : str
        dtype of the indices (the module).
    check, add : str
        Kernel names (:func:`sources.rows_kernels`).

    Raises
    ------
    nvrtc.NvrtcError, driver.CudaDriverError
    """
    mod = device_module(idx_dtype, family_of(add))
    wide, finish = rows_scratch_kernels(add)
    with _lock:
        check_func = _function(mod, check)[0]
        add_func, resident, _ = _function(mod, add)
        wide_func = _function(mod, wide)[0] if wide else 0
        finish_func = _function(mod, finish)[0] if finish else 0
    return RowsKernels(mod.context, check_func, add_func, wide_func, finish_func, resident)


def c_rows_kernel_handles(idx_dtype: str, check: str, add: str) -> Tuple[int, ...]:
    """What the host C code of ``GpuScatterAdd`` needs, for the current context.

    Returns
    -------
    tuple of int
        ``(context, check function, add function, wide function or 0,
        finish function or 0, resident blocks)``: the fields of
        ``bc_rows_kernels``.
    """
    k = rows_kernels_for(idx_dtype, check, add)
    return (k.context, k.check, k.add, k.wide, k.finish, k.resident_blocks)


def set_kernels(itemsize: int) -> Tuple[int, int, int]:
    """The kernels of the scatter-set of rows (``c_code/cuda/scatter_set_kernels.cu``)
    in the current context, for elements of ``itemsize`` bytes (1, 2, 4 or 8).

    Returns
    -------
    (int, int, int)
        ``(scatter_set_last, scatter_set_rows_w<itemsize>, resident blocks)``.

    Raises
    ------
    nvrtc.NvrtcError, driver.CudaDriverError
    """
    mod = device_module("int64", "set")
    with _lock:
        last, resident, _ = _function(mod, "scatter_set_last")
        rows = _function(mod, f"scatter_set_rows_w{itemsize}")[0]
    return last, rows, resident


def check_kernels(idx_dtype: str) -> Tuple[int, int, int]:
    """The kernels of the index check of a call (``c_code/cuda/call_check_kernels.cu``)
    in the current context, for indices of ``idx_dtype`` (int8 ... uint64).

    Returns
    -------
    (int, int, int)
        ``(call_check_<ix>, call_check_record_<ix>, resident blocks)``.

    Raises
    ------
    nvrtc.NvrtcError, driver.CudaDriverError
    """
    mod = device_module("int64", "check")
    short = DTYPES[idx_dtype][1]
    with _lock:
        check, resident, _ = _function(mod, f"call_check_{short}")
        record = _function(mod, f"call_check_record_{short}")[0]
    return check, record, resident


_generated: Dict[Tuple[int, str], Tuple[int, int]] = {}
#: Prefix of the generated histogram kernels (aesara_bincount_core/gpu/fused.py).
_FUSED_PREFIX = "bincount_hist_fused_"
#: name -> (source, headers, options) of the generated histogram kernels.
_generated_hist: Dict[str, Tuple[str, Dict[str, str], Tuple[str, ...]]] = {}


def register_generated_hist(name: str, source: str, headers: Dict[str, str],
                            options: Tuple[str, ...]) -> None:
    """Make the generated histogram kernel ``name`` known to :func:`kernels_for`.

    The fused GpuBincount Op registers its kernel when a function is made
    (``prepare_node``); its host C code then asks :func:`c_kernel_handles`
    for it by name like any histogram kernel, and gets it, sized by the
    occupancy calculator, from its own module, compiled from ``source``
    (NVRTC, the disk cache) once per architecture and loaded once per
    context.  ``name`` starts with ``bincount_hist_fused_`` and names this
    source alone (it carries the source's hash); the module also holds the
    finish kernels.
    """
    if not name.startswith(_FUSED_PREFIX):
        raise ValueError(f"a generated histogram kernel's name starts with {_FUSED_PREFIX}, got {name}")
    _generated_hist[name] = (source, dict(headers), tuple(options))


def _load_generated(drv, cc: int, name: str, source: str, headers: Dict[str, str],
                    options: Tuple[str, ...]) -> int:
    """Compile (or read from the disk cache) and load the generated source of
    kernel ``name``; the module handle.  Its text is kept as ``{name}.cu``
    (:func:`_keep_source`)."""
    lib = nvrtc.load(drv.version)
    module = _load_image(
        drv, lambda refresh: nvrtc.compile_cached(source, f"{name}.cu", cc, options, headers, lib, refresh),
        f"the generated kernel {name}",
    )  # fmt: skip
    _keep_source(name, source)
    return module


def _keep_source(name: str, source: str) -> None:
    """Write ``{name}.cu`` into the cache folder (atomically; skipped when the
    folder is not writable).  Write-only: nothing here reads it back."""
    kept = os.path.join(nvrtc.cache_dir(), f"{name}.cu")
    if os.path.isfile(kept):
        return
    tmp = disk_cache.temp_path(os.path.dirname(kept), ".cu")
    if tmp is None:
        return
    try:
        with open(tmp, "wb") as f:
            f.write(source.encode())
        os.replace(tmp, kept)
    except OSError:
        disk_cache.remove(tmp)


def generated_function(name: str, source: str, headers: Dict[str, str],
                       options: Tuple[str, ...] = ("-std=c++17",)) -> Tuple[int, int]:
    """The kernel ``name`` of a generated source, in the current context.

    The source is compiled once per device architecture
    (:func:`nvrtc.compile_cached`, in the same disk cache as the bincount
    modules) and loaded once per context.  The source is also kept in the
    cache folder as ``{name}.cu``, for reading (and for the test-suite's
    emulation of CUDA, which compiles it for the host with ``c_code/`` on
    its include path).  ``name`` must therefore name this source alone (the
    generated elementwise kernels carry a hash of their source in it).

    Returns
    -------
    (int, int)
        The ``CUfunction`` and the device's multiprocessor count.

    Raises
    ------
    nvrtc.NvrtcError, driver.CudaDriverError
    """
    drv = _driver.driver()
    ctx = _current_context(drv)
    key = (drv.context_key(ctx), name)
    with _lock:
        found = _generated.get(key)
        if found is not None:
            return found
        dev = drv.current_device()
        module = _load_generated(drv, _compute_capability(drv, dev), name, source, headers, options)
        func = drv.get_function(module, name)
        found = _generated[key] = (
            func, drv.attribute(_driver.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
        )
        return found
