"""The stand-alone GPU kernel layer: bincount on CuPy arrays, without Aesara.

:func:`bincount_cupy` runs the kernels of ``c_code/cuda/bincount_kernels.cu``
(and :func:`scatter_add_cupy` those of ``c_code/cuda/scatter_add_kernels.cu``)
on CuPy arrays, with the semantics and error messages of the CPU
:class:`~aesara_bincount.Bincount` Op.  This package imports no Aesara and no
CuPy at import time (CuPy is imported on first use); it works with NumPy 1 +
CuPy 13 and with NumPy 2 + CuPy 14, so a plain ``import
aesara_bincount_core.cuda.kernels`` works where Aesara cannot be imported.

The layer, by job (as CuPy splits its compiler, kernels and runtime):

- :mod:`.nvrtc`: find NVRTC, compile, cache the images;
- :mod:`.sources`: what the CUDA sources define, which kernel serves which
  call, the compile options;
- :mod:`.driver`: the CUDA driver calls made from Python (modules,
  attributes, occupancy);
- :mod:`.modules`: the kernels loaded in each context and the figures that
  size their launches;
- :mod:`.launcher`: the C launcher (``c_code/cuda_host/bincount_launch.h``, the
  one implementation of the launch plan, which the GpuBincount Op compiles
  too), built into a small library and called through ctypes;
- :mod:`.errors`: the exceptions, and the rendering of launch errors;
- this module: the public functions.

How a call runs (the launch strategy) is described once, in
``c_code/cuda_host/bincount_launch.h``; in short: one pass over x counts into a
first guess of the length and finds ``max(x)`` and the first refused value,
the status comes back in one device-to-host copy (the call's only wait), and
a second pass counts what lies beyond the guess, when anything does.

Verified so far on the CPU emulation of ``tests/gpu_emu`` only (the kernels'
logic, every path of the launcher, the driver calls), with the kernels
compiled by the real NVRTC; no time or speed has been measured, and the
occupancy the driver grants, the float32 compare-and-swap adds under
contention and the cost of the call's wait are unknown until a GPU is lent.
"""
import operator
from typing import Optional, Tuple

import numpy

from aesara_bincount_core.cuda import driver as _driver
from aesara_bincount_core.cuda import launcher, modules, nvrtc
from aesara_bincount_core.cuda.errors import GpuUnavailableError
from aesara_bincount_core import _c_code
from aesara_bincount_core.cuda.sources import accumulation, rows_kernels
from aesara_bincount_core.semantics import INDEX_DTYPES, MODES, OUT_DTYPES, shape_text

__all__ = ["bincount_cupy", "scatter_add_cupy", "histogram_pass", "is_available", "availability", "GpuUnavailableError"]


def _cupy():
    import cupy

    return cupy


def _check_arguments(cp, x, weights, mode, out_dtype) -> str:
    """The checks only Python can make; return the output dtype's name."""
    if mode not in MODES:
        raise ValueError(f"bincount_cupy: unknown mode {mode!r}; expected one of {MODES}")
    if not isinstance(x, cp.ndarray):
        raise TypeError(f"bincount_cupy: x must be a cupy.ndarray, got {type(x).__name__}")
    if x.dtype.name not in INDEX_DTYPES:
        raise TypeError(f"bincount_cupy: x must have an integer dtype, got {x.dtype.name}")
    if weights is not None and not isinstance(weights, cp.ndarray):
        raise TypeError(
            f"bincount_cupy: weights must be a cupy.ndarray, got {type(weights).__name__}"
        )
    if out_dtype is None:
        out_dtype = weights.dtype if weights is not None else x.dtype
    out_dtype = numpy.dtype(out_dtype).name
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"bincount_cupy: unsupported out_dtype {out_dtype}")
    return out_dtype


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
        hint saves the second pass.

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
        ``x`` not 1-D; weights of the wrong shape; a negative ``n``; inputs on
        another device than the current one.
    IndexError
        An index outside ``[-n, n)`` (scatter form), naming the first one.
    MemoryError
        The output does not fit in the device's memory.
    GpuUnavailableError, nvrtc.NvrtcError, driver.CudaDriverError
        No C compiler for the launcher library, no NVRTC (or one newer than
        the driver), no driver; RuntimeError for a failed launch.

    Notes
    -----
    Runs on CuPy's current stream and waits for it once (to read ``max(x)``
    and the error status; other Python threads run meanwhile); an empty ``x``
    needs no wait.  Counts and integer sums are exact (integer sums wrap
    modulo ``2**bits`` of ``out_dtype``), and so are float32 subnormals.
    Float weights are added with atomics in an order that changes from run to
    run, so float results may differ in the last bits between runs and from
    NumPy's sequential sum.  The inputs are never written.
    """
    cp = _cupy()
    n = operator.index(n)
    out_dtype = _check_arguments(cp, x, weights, mode, out_dtype)
    launcher.check_aligned("x", x)
    if weights is not None:
        launcher.check_aligned("weights", weights)
    if weights is not None and weights.dtype.name != out_dtype:
        weights = weights.astype(out_dtype)
    acc = accumulation(out_dtype, weights is not None)
    kern = modules.kernels_for(x.dtype.name, acc.hist_kernel(x.dtype.name), acc.finish)
    return launcher.bincount(cp, x, weights, n, mode == "scatter", out_dtype, acc, kern, capacity_hint)


def _rows_layout(shape, strides, itemsize):
    """Whether dimensions 1.. lay each row out C-contiguously (length-1 ones: any stride)."""
    expected = itemsize
    for d, s in zip(reversed(shape[1:]), reversed(strides[1:])):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


def scatter_add_cupy(base, increments, idx, inplace: bool = False):
    """The scatter-add of rows on the GPU: ``base`` with ``increments`` added at the rows ``idx``.

    The CUDA counterpart of :func:`aesara_bincount.reference_scatter_add`
    (``out = base.copy(); np.add.at(out, idx, increments)``), with the same
    results, errors and messages, through the launcher that the
    ``GpuScatterAdd`` Op runs (``c_code/cuda_host/scatter_add_launch.h``).

    Parameters
    ----------
    base : cupy.ndarray, shape ``(V, *rest)``
        int8 ... uint64, float32 or float64, any strides.
    increments : cupy.ndarray
        Broadcastable, NumPy style, to ``(len(idx), *rest)``; cast to
        ``base.dtype`` first when of another dtype.
    idx : cupy.ndarray, shape ``(N,)``, int8 ... uint64, any stride
        A negative index wraps once.
    inplace : bool
        Add into ``base`` itself instead of a C-contiguous copy.

    Returns
    -------
    cupy.ndarray, shape ``(V, *rest)``
        ``base`` itself when ``inplace``.

    Raises
    ------
    TypeError
        An argument that is not a CuPy array, or of an unsupported dtype.
    IndexError
        An index outside ``[-V, V)``, naming the first one and its position;
        nothing is written.
    ValueError
        Increments that cannot be broadcast to ``(N, *rest)`` (after any
        ``IndexError``); ``idx`` not 1-D; inputs on another device.
    GpuUnavailableError, nvrtc.NvrtcError, driver.CudaDriverError
        As :func:`bincount_cupy`.

    Notes
    -----
    Waits for CuPy's current stream once (for the index check), then queues
    the adds and returns.  Rows of contiguous elements (any stride between
    rows) are used as they are; other increments are copied into a
    C-contiguous array first, and an in-place base with rows that are not
    contiguous is added into a copy that is copied back.  Float sums are
    added with atomics in an order that varies between runs.
    """
    cp = _cupy()
    for name, a in (("base", base), ("increments", increments), ("idx", idx)):
        if not isinstance(a, cp.ndarray):
            raise TypeError(f"scatter_add_cupy: {name} must be a cupy.ndarray, got {type(a).__name__}")
    if base.ndim < 1 or base.dtype.name not in OUT_DTYPES:
        raise TypeError(f"scatter_add_cupy: unsupported base {base.dtype.name}{base.shape}")
    if idx.dtype.name not in INDEX_DTYPES:
        raise TypeError(f"scatter_add_cupy: idx must have an integer dtype, got {idx.dtype.name}")
    if idx.ndim != 1:
        raise ValueError(_c_code.messages()["BC_MSG_NDIM"] % ("idx", 1, idx.ndim))
    for name, a in (("the base", base), ("the increments", increments), ("idx", idx)):
        launcher.check_aligned(name, a)  # before CuPy casts or copies them
    if increments.dtype != base.dtype:
        increments = increments.astype(base.dtype)
    check, add = rows_kernels(idx.dtype.name, base.dtype.name)
    kern = modules.rows_kernels_for(idx.dtype.name, check, add)
    target = (idx.shape[0],) + tuple(base.shape[1:])
    lead = len(target) - increments.ndim
    fits = lead >= 0 and all(d in (1, t) for d, t in zip(increments.shape, target[lead:]))
    nrows, row_size = base.shape[0], int(numpy.prod(base.shape[1:], dtype=numpy.int64))
    if not fits:
        launcher.scatter_rows(cp, None, 0, increments, 0, 0, idx, nrows, row_size, True, kern)
        raise ValueError(
            _c_code.messages()["BC_MSG_ROWS_BCAST"] % (shape_text(increments.shape), shape_text(target))
        )
    item = base.itemsize
    bstrides = [0] * lead + [0 if d == 1 else s for d, s in zip(increments.shape, increments.strides)]
    if all(s == 0 or t == 1 for s, t in zip(bstrides[1:], target[1:])):
        inc_elem = 0
    elif _rows_layout(target, bstrides, item):
        inc_elem = 1
    else:
        copy = cp.empty(target, dtype=base.dtype)
        copy[...] = increments
        increments, bstrides, inc_elem = copy, list(copy.strides), 1
    if inplace:
        out = base
        work = base if _rows_layout(base.shape, base.strides, item) else base.copy()
    else:
        out = work = base.copy()
    launcher.scatter_rows(
        cp, work, work.strides[0] if work.shape[0] > 1 else 0,
        increments, bstrides[0] if target[0] > 1 else 0, inc_elem,
        idx, nrows, row_size, False, kern,
    )  # fmt: skip
    if work is not out:
        out[...] = work
    return out


def histogram_pass(x, bins: int):
    """A function that queues one histogram pass over ``x``: the kernel alone.

    For benchmarks: the returned zero-argument function launches the
    histogram kernel that :func:`bincount_cupy` would run for ``x`` (counts,
    ``x``'s dtype), over the bins ``[0, bins)`` of a buffer allocated once,
    and returns without waiting.  Repeated calls add into the same buffer;
    nothing is checked or read back.

    Parameters
    ----------
    x : cupy.ndarray, shape ``(N,)``, N > 0, int8 ... uint64
    bins : int
        Bins of the window, at least ``max(x) + 1`` for every value to count.
    """
    cp = _cupy()
    _check_arguments(cp, x, None, "bincount", None)
    acc = accumulation(x.dtype.name, False)
    kern = modules.kernels_for(x.dtype.name, acc.hist_kernel(x.dtype.name), acc.finish)
    return launcher.hist_pass(cp, x, bins, acc, kern)


def is_available() -> bool:
    """Whether a usable GPU is there: ``if aesara_bincount.gpu.is_available():``.

    Returns
    -------
    bool
        True when :func:`availability` finds every piece (it says which is
        missing otherwise).  Each call checks again; nothing is compiled and
        nothing waits for the device.
    """
    return availability()[0]


def availability() -> Tuple[bool, str]:
    """Whether a usable GPU is there, and why not.

    Checks, in order: CuPy imports; the CUDA driver library loads and
    initializes; CuPy sees a device; an NVRTC that is not newer than the
    driver loads; a C compiler for the launcher library is there.  Nothing
    is compiled.

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
        drv = _driver.driver()
    except _driver.CudaDriverError as exc:
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
    if launcher.compiler() is None:
        return False, "no C compiler (cc, gcc or clang; or set CC) to build the GPU launcher library"
    return True, (
        f"{count} CUDA device(s), driver CUDA {drv.version // 1000}.{drv.version % 1000 // 10}, "
        f"NVRTC {lib.version[0]}.{lib.version[1]}, CuPy {cp.__version__}"
    )
