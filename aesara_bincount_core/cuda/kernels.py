"""The stand-alone GPU kernel layer: compile, cache and launch the bincount kernels.

:func:`bincount_cupy` runs the kernels of ``c_code/bincount_cuda_kernel.cu``
on CuPy arrays, with the semantics and error messages of the CPU
:class:`~aesara_bincount.Bincount` Op.  This module imports no Aesara and no
CuPy at import time (CuPy is imported on first use); it works with NumPy 1 +
CuPy 13 and with NumPy 2 + CuPy 14, so a plain ``import
aesara_bincount_core.cuda.kernels`` works where Aesara cannot be imported.

How a call runs (the launch strategy)
-------------------------------------
The numbers are the ``BC_CUDA_*`` constants of ``c_code/bincount_cuda.h``,
which the host C code of :class:`~aesara_bincount.gpu.GpuBincount` uses too.

1. The accumulator: counts go into 32-bit unsigned bins (64-bit for 64-bit
   and float outputs), integer weights into unsigned bins of their width
   (32-bit for 8- and 16-bit weights), float weights into bins of their dtype.
   When that is the output's own layout the accumulator *is* the output;
   otherwise a small conversion kernel (``bincount_finish_*``) writes it.
2. The first pass provides ``C`` bins: exactly ``n`` in the scatter-add form;
   in the bincount form ``max(minlength, guess)``, where the guess is the
   previous call's length (``capacity_hint``, at most
   ``FIRST_PASS_MAX_BINS``) or ``FIRST_PASS_BINS``.  It counts the values
   below ``C`` and, in the same pass, finds ``max(x)`` and the first refused
   position.
3. One device-to-host copy of the 32-byte status (the only synchronization
   of a call).  A refused value raises here.
4. Only when ``max(x) + 1 > C``: a second pass over ``x`` counts the values
   in ``[C, max(x) + 1)`` into a larger buffer that starts with the first
   pass's bins.  Reading ``x`` twice costs little next to counting that many
   bins, and no buffer of blocks x bins is ever allocated.
5. Each pass launches ``min(2 * multiprocessors, N / MIN_ELEMS_PER_BLOCK)``
   blocks of ``THREADS`` threads.  A block keeps the first
   ``max(SHARED_MIN_BINS, elements per block)`` bins of its window (as many
   as fit in its share of shared memory, ``1 / BLOCKS_PER_SM`` of a
   multiprocessor's) as a privatized shared-memory histogram, with up to
   ``MAX_COPIES`` replicated copies while each copy still gets
   ``COPY_MIN_ELEMS_PER_BIN`` elements per bin; the bins beyond go to global
   memory with atomics.  Few bins: everything is counted in shared memory.
   Many bins: mostly global atomics.  Either way a thread adds up a run of
   equal bins before one atomic, and a warp whose lanes end on one bin adds
   their sums with one atomic.

The result is returned as a view of the first pass's buffer when that wastes
less than ``COMPACT_MIN_BYTES``, else copied to an exact-size array.
"""
import ctypes
import operator
import re
import threading
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy

from aesara_bincount_core import _c_code
from aesara_bincount_core.cuda import driver as _driver_mod
from aesara_bincount_core.cuda import nvrtc
from aesara_bincount_core.semantics import INDEX_DTYPES, MODES, OUT_DTYPES

__all__ = [
    "KERNEL_SOURCE",
    "Accumulation",
    "accumulation",
    "launch_plan",
    "shared_budget",
    "compile_module",
    "module_options",
    "bincount_cupy",
    "c_kernel_handles",
    "GpuUnavailableError",
    "is_available",
]

#: The CUDA source file and its header, in ``c_code/``.
KERNEL_SOURCE = "bincount_cuda_kernel.cu"
KERNEL_HEADER = "bincount_cuda.h"


def _constants() -> Dict[str, int]:
    text = _c_code.read_source(KERNEL_HEADER)
    return {
        name: int(value)
        for name, value in re.findall(r"^#define BC_CUDA_(\w+) (\d+)\b", text, re.MULTILINE)
    }


#: The ``BC_CUDA_*`` numbers of ``bincount_cuda.h``, without the prefix.
CONSTANTS = _constants()
THREADS = CONSTANTS["THREADS"]

#: dtype name -> (BC_DT_* code, short name used in kernel names).
DTYPES = {
    "int8": (0, "i8"),
    "int16": (1, "i16"),
    "int32": (2, "i32"),
    "int64": (3, "i64"),
    "uint8": (4, "u8"),
    "uint16": (5, "u16"),
    "uint32": (6, "u32"),
    "uint64": (7, "u64"),
    "float32": (8, "f32"),
    "float64": (9, "f64"),
}


class HistParams(ctypes.Structure):
    """``bc_hist_params`` of ``bincount_cuda.h``."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in ("x", "w", "out", "status")
    ] + [
        (name, ctypes.c_int64)
        for name in ("size", "x_stride", "w_stride", "lo", "hi", "n", "shared_bins")
    ] + [("copies", ctypes.c_int32), ("scatter", ctypes.c_int32)]


class FinishParams(ctypes.Structure):
    """``bc_finish_params`` of ``bincount_cuda.h``."""

    _fields_ = [("src", ctypes.c_uint64), ("dst", ctypes.c_uint64), ("count", ctypes.c_int64)]


STATUS_BYTES = CONSTANTS["STATUS_BYTES"]


@dataclass(frozen=True)
class Accumulation:
    """How one output dtype is accumulated.

    Attributes
    ----------
    inc : str
        The increment part of the histogram kernel's name: ``c32``/``c64``
        (counts) or the short name of the weights dtype.
    acc_dtype : str
        dtype of the global accumulator (``uint32``, ``uint64``, ``float32``
        or ``float64``).
    shared_itemsize : int
        Bytes of one shared-memory bin.
    finish : str or None
        Name of the conversion kernel, or None when the accumulator has the
        output's layout (then it is the output).
    """

    inc: str
    acc_dtype: str
    shared_itemsize: int
    finish: Optional[str]

    def hist_kernel(self, x_dtype: str) -> str:
        """Name of the histogram kernel for ``x_dtype``."""
        return f"bincount_hist_{DTYPES[x_dtype][1]}_{self.inc}"


def accumulation(out_dtype: str, weighted: bool) -> Accumulation:
    """The :class:`Accumulation` for an output dtype, counted or weighted."""
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"bincount: unsupported output dtype {out_dtype}")
    size = 8 * numpy.dtype(out_dtype).itemsize
    narrow = {8: "u8", 16: "u16"}
    if not weighted:
        if out_dtype.startswith("float"):
            return Accumulation("c64", "uint64", 4, f"bincount_finish_u64_{DTYPES[out_dtype][1]}")
        if size == 64:
            return Accumulation("c64", "uint64", 4, None)
        return Accumulation(
            "c32", "uint32", 4, f"bincount_finish_u32_{narrow[size]}" if size < 32 else None
        )
    inc = DTYPES[out_dtype][1]
    if out_dtype.startswith("float"):
        return Accumulation(inc, out_dtype, size // 8, None)
    if size == 64:
        return Accumulation(inc, "uint64", 8, None)
    return Accumulation(
        inc, "uint32", 4, f"bincount_finish_u32_{narrow[size]}" if size < 32 else None
    )


def shared_budget(optin_per_block: int, per_multiprocessor: int) -> int:
    """Bytes of shared memory one block may use (its share of a multiprocessor)."""
    share = per_multiprocessor // CONSTANTS["BLOCKS_PER_SM"] - CONSTANTS["SHARED_RESERVE"]
    return max(0, min(optin_per_block, share)) // 16 * 16


@dataclass(frozen=True)
class LaunchPlan:
    """Geometry of one histogram pass (see the module docstring)."""

    blocks: int
    shared_bins: int
    copies: int
    shared_bytes: int


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def launch_plan(
    size: int, span: int, shared_itemsize: int, multiprocessors: int, budget: int
) -> LaunchPlan:
    """Blocks, shared bins and copies for a pass over ``size`` elements.

    Parameters
    ----------
    size : int
        Elements of x (> 0).
    span : int
        Bins of the window (> 0).
    shared_itemsize : int
        Bytes of one shared-memory bin.
    multiprocessors : int
        Multiprocessors of the device.
    budget : int
        Bytes of shared memory one block may use (:func:`shared_budget`).

    Notes
    -----
    ``c_code/bincount_cuda_host.c`` computes the same (``bc_cuda_plan``); the
    test-suite compiles it and checks that both agree.
    """
    c = CONSTANTS
    blocks = min(multiprocessors * c["BLOCKS_PER_SM"], _ceil_div(size, c["MIN_ELEMS_PER_BLOCK"]))
    blocks = max(1, blocks, _ceil_div(size, c["MAX_ELEMS_PER_BLOCK"]))
    per_block = _ceil_div(size, blocks)
    budget_bins = budget // shared_itemsize
    shared_bins = min(span, budget_bins, max(c["SHARED_MIN_BINS"], per_block))
    copies = 1
    max_copies = min(c["MAX_COPIES"], THREADS // 32)
    while (
        copies * 2 <= max_copies
        and copies * 2 * shared_bins <= budget_bins
        and copies * 2 * shared_bins * c["COPY_MIN_ELEMS_PER_BIN"] <= per_block
    ):
        copies *= 2
    return LaunchPlan(blocks, shared_bins, copies, copies * shared_bins * shared_itemsize)


def first_pass_bins(n: int, capacity_hint: Optional[int]) -> int:
    """Bins the first pass of the bincount form provides (see the module docstring)."""
    guess = capacity_hint if capacity_hint else CONSTANTS["FIRST_PASS_BINS"]
    return max(n, min(guess, CONSTANTS["FIRST_PASS_MAX_BINS"]))


# ---------------------------------------------------------------------------
# Compilation and modules
# ---------------------------------------------------------------------------


def module_options(x_dtype: str) -> Tuple[str, ...]:
    """NVRTC options (besides ``-arch``) of the module for ``x_dtype``."""
    return ("-std=c++17", f"-DBC_X_DTYPE={DTYPES[x_dtype][0]}")


def compile_module(x_dtype: str, cc: int, nvrtc_lib: Optional[nvrtc.Nvrtc] = None):
    """Compile (or fetch from the cache) the kernels for one dtype of x.

    Parameters
    ----------
    x_dtype : str
        One of int8 ... uint64.
    cc : int
        Compute capability, ``10 * major + minor``.

    Returns
    -------
    nvrtc.CompiledImage

    Raises
    ------
    nvrtc.NvrtcError
    """
    return nvrtc.compile_cached(
        _c_code.read_source(KERNEL_SOURCE),
        KERNEL_SOURCE,
        cc,
        module_options(x_dtype),
        headers={KERNEL_HEADER: _c_code.read_source(KERNEL_HEADER)},
        nvrtc=nvrtc_lib,
    )


@dataclass
class DeviceModule:
    """The kernels for one dtype of x, loaded in one CUDA context."""

    context: int
    device: int
    multiprocessors: int
    shared_budget: int
    total_memory: int
    module: int
    functions: Dict[str, int]


_modules: Dict[Tuple[int, str], DeviceModule] = {}
_modules_lock = threading.Lock()


def _cupy():
    import cupy

    return cupy


def _current_context(drv) -> int:
    ctx = drv.current_context()
    if not ctx:
        # No context on this thread yet: let the CUDA runtime (CuPy) create
        # the primary context of the current device, as its own calls would.
        cp = _cupy()
        cp.cuda.runtime.setDevice(cp.cuda.runtime.getDevice())
        cp.cuda.runtime.free(0)
        ctx = drv.current_context()
    if not ctx:
        raise _driver_mod.CudaDriverError("no CUDA context could be made current")
    return ctx


def device_module(x_dtype: str) -> DeviceModule:
    """The kernels for ``x_dtype`` in the current context, compiled and loaded once."""
    drv = _driver_mod.driver()
    ctx = _current_context(drv)
    key = (ctx, x_dtype)
    with _modules_lock:
        mod = _modules.get(key)
        if mod is not None:
            return mod
        dev = drv.current_device()
        cc = 10 * drv.attribute(_driver_mod.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        cc += drv.attribute(_driver_mod.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        image = compile_module(x_dtype, cc, nvrtc.load(drv.version))
        budget = shared_budget(
            drv.attribute(_driver_mod.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
            drv.attribute(_driver_mod.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev),
        )
        mod = DeviceModule(
            context=ctx,
            device=dev,
            multiprocessors=drv.attribute(_driver_mod.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
            shared_budget=budget,
            total_memory=drv.total_memory(dev),
            module=drv.load_module(image.data),
            functions={},
        )
        _modules[key] = mod
        return mod


def kernel_function(mod: DeviceModule, name: str) -> int:
    """The ``CUfunction`` of kernel ``name``, allowed the block's shared-memory budget."""
    func = mod.functions.get(name)
    if func is None:
        drv = _driver_mod.driver()
        func = drv.get_function(mod.module, name)
        if name.startswith("bincount_hist_"):
            drv.set_function_attribute(
                func, _driver_mod.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, mod.shared_budget
            )
        mod.functions[name] = func
    return func


def c_kernel_handles(x_dtype: str, hist: str, finish: Optional[str]) -> Tuple[int, ...]:
    """What the host C code of ``GpuBincount`` needs, for the current context.

    Returns
    -------
    tuple of int
        ``(context, hist function, finish function or 0, multiprocessors,
        shared-memory budget per block, device memory in bytes)``.
    """
    mod = device_module(x_dtype)
    return (
        mod.context,
        kernel_function(mod, hist),
        kernel_function(mod, finish) if finish else 0,
        mod.multiprocessors,
        mod.shared_budget,
        mod.total_memory,
    )


# ---------------------------------------------------------------------------
# The launcher
# ---------------------------------------------------------------------------


def _msg(name: str, *args) -> str:
    return _c_code.messages()[name] % args


def _check_device_size(nbins: int, itemsize: int, mod: DeviceModule) -> None:
    if nbins < 0 or nbins > (2**63 - 1) // itemsize or nbins * itemsize > mod.total_memory:
        raise MemoryError(_msg("BC_MSG_NO_MEMORY", nbins, itemsize))


def _element_stride(a) -> int:
    return a.strides[0] // a.itemsize if a.ndim == 1 else 0


class _Buffer:
    """A zeroed accumulator of ``bins`` bins (padded to 8 bytes), then a bc_status.

    Its dtype is the output's when the accumulator has the output's layout
    (a ``uint32`` accumulator of an ``int32`` output holds the same bits), so
    that the result is a plain slice of it.
    """

    def __init__(self, cp, bins: int, dtype: str, out_itemsize: int):
        itemsize = 8 if dtype.endswith("64") else 4
        self.bins = bins + (bins % 2 if itemsize == 4 else 0)
        try:
            self.array = cp.zeros(self.bins + STATUS_BYTES // itemsize, dtype=dtype)
        except MemoryError as exc:
            raise MemoryError(_msg("BC_MSG_NO_MEMORY", bins, out_itemsize)) from exc

    @property
    def ptr(self) -> int:
        return self.array.data.ptr

    def status(self):
        """(max_value, first bad position or None, bad value): synchronizes."""
        words = self.array[self.bins:].view("uint64").get()  # synchronize!
        bad = int(words[1])
        return int(words[0]), ((~bad) & (2**64 - 1) if bad else None), int(words[2])


def _launch_hist(mod, acc, x, weights, buf, lo, hi, n, scatter, stream):
    size = x.shape[0]
    plan = launch_plan(size, hi - lo, acc.shared_itemsize, mod.multiprocessors, mod.shared_budget)
    params = HistParams(
        x=x.data.ptr,
        w=weights.data.ptr if weights is not None else 0,
        out=buf.ptr,
        status=buf.ptr + buf.bins * buf.array.itemsize,
        size=size,
        x_stride=_element_stride(x),
        w_stride=_element_stride(weights) if weights is not None else 0,
        lo=lo,
        hi=hi,
        n=n,
        shared_bins=plan.shared_bins,
        copies=plan.copies,
        scatter=int(scatter),
    )
    func = kernel_function(mod, acc.hist_kernel(x.dtype.name))
    _driver_mod.driver().launch(func, plan.blocks, THREADS, plan.shared_bytes, stream, params)


def _as_signed(value: int, x_dtype: str) -> int:
    """The 64-bit pattern ``value`` as the number x held."""
    if x_dtype.startswith("int") and value >= 2**63:
        return value - 2**64
    return value


def _check_x(cp, x, weights, n, mode, out_dtype) -> str:
    """Check x, n and the mode; return the output dtype's name."""
    if mode not in MODES:
        raise ValueError(f"bincount_cupy: unknown mode {mode!r}; expected one of {MODES}")
    if not isinstance(x, cp.ndarray):
        raise TypeError(f"bincount_cupy: x must be a cupy.ndarray, got {type(x).__name__}")
    if x.ndim != 1:
        raise ValueError(_msg("BC_MSG_NDIM", "x", 1, x.ndim))
    if x.dtype.name not in INDEX_DTYPES:
        raise TypeError(f"bincount_cupy: x must have an integer dtype, got {x.dtype.name}")
    if n < 0:
        raise ValueError(_msg("BC_MSG_LENGTH" if mode == "scatter" else "BC_MSG_MINLENGTH", n))
    if out_dtype is None:
        out_dtype = weights.dtype if weights is not None else x.dtype
    out_dtype = numpy.dtype(out_dtype).name
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"bincount_cupy: unsupported out_dtype {out_dtype}")
    return out_dtype


def _check_weights(cp, x, weights, mode, out_dtype):
    """Check the weights; return them as ``(N,)`` or ``()`` of ``out_dtype``."""
    scatter = mode == "scatter"
    if weights is not None:
        if not isinstance(weights, cp.ndarray):
            raise TypeError(
                f"bincount_cupy: weights must be a cupy.ndarray, got {type(weights).__name__}"
            )
        if weights.ndim > 1:
            raise ValueError(_msg("BC_MSG_NDIM", "weights", 1, weights.ndim))
        wlen = 1 if weights.ndim == 0 else weights.shape[0]
        if not scatter and weights.ndim == 1 and wlen != x.shape[0]:
            raise ValueError(_msg("BC_MSG_WEIGHTS", wlen, x.shape[0]))
        if scatter and wlen not in (x.shape[0], 1):
            raise ValueError(_msg("BC_MSG_WEIGHTS_BCAST", wlen, x.shape[0]))
        if weights.dtype.name != out_dtype:
            weights = weights.astype(out_dtype)
        if weights.ndim == 0 or wlen != x.shape[0]:
            weights = weights.reshape(())
    return weights


def _check_device(cp, *arrays) -> None:
    current = cp.cuda.runtime.getDevice()
    for a in arrays:
        if a is not None and a.data.device_id != current:
            raise ValueError(
                f"bincount_cupy: an input lives on device {a.data.device_id}, but the current "
                f"device is {current}; call it under `with cupy.cuda.Device({a.data.device_id})`"
            )


def bincount_cupy(
    x,
    weights=None,
    n: int = 0,
    mode: str = "bincount",
    out_dtype=None,
    capacity_hint: Optional[int] = None,
):
    """Count, or sum weights, into integer-indexed bins on the GPU.

    The CUDA counterpart of :func:`aesara_bincount.reference_bincount`, with
    the same results, errors and messages.

    Parameters
    ----------
    x : cupy.ndarray, shape ``(N,)``, int8 ... uint64
        Values (``"bincount"``) or indices (``"scatter"``), any strides.
    weights : cupy.ndarray, shape ``(N,)`` or ``()``, optional
        ``()`` is broadcast; in ``"scatter"`` mode ``(1,)`` too.  Cast to
        ``out_dtype`` first when of another dtype.
    n : int
        ``minlength`` (``"bincount"``) or the exact length (``"scatter"``).
    mode : {"bincount", "scatter"}
        As for :class:`aesara_bincount.Bincount`: ``"bincount"`` gives
        ``max(max(x) + 1, n)`` bins and refuses negative values;
        ``"scatter"`` gives ``n`` bins, wraps negative indices once and
        refuses indices outside ``[-n, n)``.
    out_dtype : str, optional
        Defaults to the weights' dtype, else ``x.dtype`` (Aesara's graph
        types, not NumPy's ``intp``/``float64``).
    capacity_hint : int, optional
        Bins the caller expects (e.g. the previous call's length); a good
        hint saves the second pass (see the module docstring).

    Returns
    -------
    cupy.ndarray, shape ``(n_bins,)``, dtype ``out_dtype``
        On the current device, possibly a view of a slightly larger buffer.

    Raises
    ------
    TypeError
        ``x`` or ``weights`` is not a CuPy array, or of an unsupported dtype.
    ValueError
        A negative value of ``x`` (bincount form; the message names the first
        one and its position); ``max(x) + 1`` too large for an array length;
        weights of the wrong length; a negative ``n``; inputs on another
        device than the current one.
    IndexError
        An index outside ``[-n, n)`` (scatter form), naming the first one.
    MemoryError
        The output does not fit in the device's memory.
    nvrtc.NvrtcError, driver.CudaDriverError
        No NVRTC, no driver, or a failed launch.

    Notes
    -----
    Runs on CuPy's current stream and synchronizes it once (to read
    ``max(x)`` and the error status); an empty ``x`` needs no
    synchronization.  Counts and integer sums are exact (integer sums wrap
    modulo ``2**bits`` of ``out_dtype``).  Float weights are added with
    atomics in an order that changes from run to run, so float results may
    differ in the last bits between runs and from NumPy's sequential sum.
    The inputs are never written.
    """
    cp = _cupy()
    n = operator.index(n)
    out_dtype = _check_x(cp, x, weights, n, mode, out_dtype)
    scatter = mode == "scatter"
    out_itemsize = numpy.dtype(out_dtype).itemsize
    acc = accumulation(out_dtype, weights is not None)
    mod = device_module(x.dtype.name)
    _check_device_size(n, out_itemsize, mod)
    weights = _check_weights(cp, x, weights, mode, out_dtype)
    _check_device(cp, x, weights)
    size = x.shape[0]
    if size == 0:
        try:
            return cp.zeros(n, dtype=out_dtype)
        except MemoryError as exc:
            raise MemoryError(_msg("BC_MSG_NO_MEMORY", n, out_itemsize)) from exc
    stream = cp.cuda.get_current_stream().ptr
    bins = n if scatter else first_pass_bins(n, capacity_hint)
    buf_dtype = out_dtype if acc.finish is None else acc.acc_dtype
    buf = _Buffer(cp, bins, buf_dtype, out_itemsize)
    _launch_hist(mod, acc, x, weights, buf, 0, bins, n, scatter, stream)
    top, bad_pos, bad_value = buf.status()
    if bad_pos is not None:
        value = _as_signed(bad_value, x.dtype.name)
        if scatter:
            raise IndexError(_msg("BC_MSG_INDEX", str(value), bad_pos, n))
        raise ValueError(_msg("BC_MSG_NEGATIVE", value, bad_pos))
    length = n
    if not scatter:
        if top >= 2**63 - 1:
            raise ValueError(_msg("BC_MSG_TOO_LARGE", top))
        length = max(top + 1, n)
    _check_device_size(length, out_itemsize, mod)
    if length > bins:
        bigger = _Buffer(cp, length, buf_dtype, out_itemsize)
        bigger.array[:bins] = buf.array[:bins]
        _launch_hist(mod, acc, x, weights, bigger, bins, length, n, scatter, stream)
        buf = bigger
    result = buf.array[:length]
    if acc.finish is None:
        if (buf.array.size - length) * buf.array.itemsize > CONSTANTS["COMPACT_MIN_BYTES"]:
            result = result.copy()
        return result
    try:
        out = cp.empty(length, dtype=out_dtype)
    except MemoryError as exc:
        raise MemoryError(_msg("BC_MSG_NO_MEMORY", length, out_itemsize)) from exc
    blocks = max(1, min(mod.multiprocessors * CONSTANTS["BLOCKS_PER_SM"], _ceil_div(length, THREADS)))
    params = FinishParams(src=buf.ptr, dst=out.data.ptr, count=length)
    _driver_mod.driver().launch(kernel_function(mod, acc.finish), blocks, THREADS, 0, stream, params)
    return out


# ---------------------------------------------------------------------------
# Availability
# ---------------------------------------------------------------------------


class GpuUnavailableError(RuntimeError):
    """No usable GPU: CuPy, the driver, a device or NVRTC is missing."""


def is_available() -> Tuple[bool, str]:
    """Whether a usable GPU is there, and why not.

    Checks, in order: CuPy imports; the CUDA driver library loads and
    initializes; CuPy sees a device; NVRTC loads.  Nothing is compiled.

    Returns
    -------
    (bool, str)
        ``(True, description)`` or ``(False, the first missing piece)``.
    """
    try:
        cp = _cupy()
    except ImportError as exc:
        return False, f"CuPy is not installed ({exc}); pip install 'aesara-bincount[cuda12]'"
    try:
        drv = _driver_mod.driver()
    except _driver_mod.CudaDriverError as exc:
        return False, str(exc)
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy's CUDARuntimeError and friends
        return False, f"CuPy finds no usable CUDA device ({exc})"
    if count < 1:
        return False, "no CUDA device"
    try:
        lib = nvrtc.load(drv.version)
    except nvrtc.NvrtcError as exc:
        return False, str(exc)
    return True, (
        f"{count} CUDA device(s), driver CUDA {drv.version // 1000}.{drv.version % 1000 // 10}, "
        f"NVRTC {lib.version[0]}.{lib.version[1]}, CuPy {cp.__version__}"
    )
