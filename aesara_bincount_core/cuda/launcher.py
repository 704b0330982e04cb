"""The C launchers, built into a small shared library and called through ctypes.

Part of the stand-alone kernel layer.  The launch plans and sequences exist
once, in C (``c_code/cuda_host/bincount_launch.h``, and
``c_code/cuda_host/scatter_add_launch.h`` for the scatter-add of rows); the
GpuBincount and GpuScatterAdd Ops compile them into their modules, and this module builds ``c_code/cuda_host/kernel_layer_lib.c``
(which includes them) with the system C compiler, once per version of the
sources, into the kernel cache folder (:mod:`.disk_cache`: the file is
compiled under a temporary name, renamed into place, and its name carries
its size and digest, so a truncated or overwritten library is found out and
rebuilt rather than loaded), then loads it with ctypes; a library that
still does not load is removed and rebuilt once.  Needs a C compiler
(``$CC``, else ``cc``, ``gcc`` or ``clang``), and neither Python's headers
nor CUDA's.

Device memory is allocated by the library through callbacks into this module
(CuPy arrays from its memory pool, so that results are ordinary
``cupy.ndarray`` objects); ctypes releases the GIL around each call into the
library and the callbacks take it back.
"""
import ctypes
import hashlib
import itertools
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Dict, List, Optional

import numpy

from aesara_bincount_core import _c_code, compile_args
from aesara_bincount_core.cuda import disk_cache
from aesara_bincount_core.cuda.errors import CODES, GpuUnavailableError, launch_error
from aesara_bincount_core.cuda.modules import Kernels
from aesara_bincount_core.cuda.sources import DTYPES, Accumulation

__all__ = [
    "LIBRARY_SOURCES",
    "compiler",
    "library",
    "bincount",
    "buffer_elements",
    "hist_pass",
    "plan",
    "scatter_rows",
    "rows_plan",
]

#: The library's source and every file it includes (hashed into its name).
LIBRARY_SOURCES = _c_code.included_closure(("cuda_host/kernel_layer_lib.c",))
_ERROR_TEXT = 320  # BC_CUDA_ERROR_TEXT


class _Error(ctypes.Structure):
    """``bc_cuda_error`` (its size is checked against the library's)."""

    _fields_ = [
        ("code", ctypes.c_int),
        ("reserved", ctypes.c_int),
        ("arg", ctypes.c_longlong * 3),
        ("uarg", ctypes.c_ulonglong),
        ("text", ctypes.c_char * _ERROR_TEXT),
    ]


_ALLOC = ctypes.CFUNCTYPE(
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.c_longlong,
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ctypes.c_int),
)
_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_LL, _ULL, _INT, _PTR = ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_int, ctypes.c_uint64


def compiler() -> Optional[List[str]]:
    """The C compiler command that builds the library, or None."""
    explicit = os.environ.get("CC")
    for name in ([explicit] if explicit else []) + ["cc", "gcc", "clang"]:
        argv = name.split()
        if argv and shutil.which(argv[0]):
            return argv
    return None


def _flags() -> List[str]:
    # The extra arguments of the C Ops (the sanitizers under make sanitize).
    return ["-O2", "-std=c99", "-fPIC", "-shared", "-Wall", *compile_args.extra_compile_args()]


def _build(rebuild: bool = False) -> str:
    """Path of the library, compiled if this version is not in the cache yet
    (or ``rebuild``)."""
    cc = compiler()
    if cc is None:
        raise GpuUnavailableError(
            "no C compiler (cc, gcc or clang; or set CC) to build the GPU launcher library"
        )
    flags = _flags()
    h = hashlib.sha256("\0".join(cc + flags).encode())
    h.update(_c_code.sources_hash(LIBRARY_SOURCES).encode())
    folder = disk_cache.cache_dir()
    stem = f"libbincount_cuda-{h.hexdigest()[:16]}"
    found = None if rebuild else disk_cache.find(folder, stem, ".so")
    if found is not None:
        return found[0]
    tmp = disk_cache.temp_path(folder, ".so")
    if tmp is None:
        folder = tempfile.mkdtemp(prefix="aesara_bincount-")  # a read-only cache folder
        tmp = os.path.join(folder, ".tmp-lib.so")
    source = _c_code.c_code_path(LIBRARY_SOURCES[0])
    cmd = [*cc, *flags, f"-I{_c_code.c_code_dir()}", "-o", tmp, source, "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        disk_cache.remove(tmp)
        raise GpuUnavailableError(
            f"building the GPU launcher library failed:\n{' '.join(cmd)}\n{proc.stderr}"
        )
    with open(tmp, "rb") as f:
        data = f.read()
    # Renamed into place (atomic: processes building at once each write a whole file).
    path = disk_cache.store(folder, stem, data, ".so", tmp=tmp)
    if path is None:
        raise GpuUnavailableError(f"the GPU launcher library could not be written to {folder}")
    return path


def _open() -> ctypes.CDLL:
    """Load the library; one that does not load is removed and rebuilt once."""
    path = _build()
    try:
        return ctypes.CDLL(path)
    except OSError as first:
        disk_cache.remove(path)
        path = _build(rebuild=True)
        try:
            return ctypes.CDLL(path)
        except OSError as exc:
            raise GpuUnavailableError(
                f"the GPU launcher library {path} does not load, even rebuilt: {exc} "
                f"(the first attempt: {first})"
            ) from exc


_library: Optional[ctypes.CDLL] = None
_library_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """The launcher library, built and loaded once per process.

    Raises
    ------
    GpuUnavailableError
        No C compiler, or the build failed (the message holds its output).
    """
    global _library
    with _library_lock:
        if _library is None:
            lib = _open()
            if lib.bc_lib_error_size() != ctypes.sizeof(_Error):
                raise GpuUnavailableError("the GPU launcher library's bc_cuda_error has another layout")
            lib.bc_lib_bincount.restype = ctypes.c_int
            lib.bc_lib_bincount.argtypes = [
                _PTR, _LL, _LL, _INT, _INT, _INT,  # x
                _INT, _PTR, _LL, _LL, _INT, _INT,  # weighted, weights
                _INT, _INT, _INT, _INT, _INT, _INT, _INT,  # scatter ... shared_itemsize
                _LL, _LL, _ULL,  # n, capacity_hint, stream
                _ULL, _ULL, _ULL, _LL, _LL, _ULL,  # kernels
                _ALLOC, _RELEASE, ctypes.c_void_p,
                ctypes.POINTER(_ULL), ctypes.POINTER(_Error),
            ]  # fmt: skip
            lib.bc_lib_plan.restype = None
            lib.bc_lib_plan.argtypes = [_LL, _LL, _LL, _LL, _LL, ctypes.POINTER(_LL)]
            lib.bc_lib_buffer_elements.restype = _LL
            lib.bc_lib_buffer_elements.argtypes = [_LL, _LL, ctypes.POINTER(_LL)]
            lib.bc_lib_hist_pass.restype = ctypes.c_int
            lib.bc_lib_hist_pass.argtypes = [
                _PTR, _LL, _LL, _INT, _INT, _INT, _LL, _PTR, _ULL, _ULL, _LL, _LL,
                ctypes.POINTER(_Error),
            ]  # fmt: skip
            lib.bc_lib_scatter_rows.restype = ctypes.c_int
            lib.bc_lib_scatter_rows.argtypes = [
                _PTR, _LL, _INT, _INT,  # out
                _PTR, _LL, _LL, _INT,  # increments
                _PTR, _LL, _LL, _INT, _INT, _INT,  # idx
                _LL, _LL, _INT, _ULL,  # nrows, row_size, check_only, stream
                _ULL, _ULL, _ULL, _ULL, _ULL, _LL,  # kernels
                _ALLOC, _RELEASE, ctypes.c_void_p, ctypes.POINTER(_Error),
            ]  # fmt: skip
            lib.bc_lib_check_aligned.restype = ctypes.c_int
            lib.bc_lib_check_aligned.argtypes = [
                ctypes.c_char_p, _PTR, _LL, _LL, ctypes.POINTER(_Error),
            ]  # fmt: skip
            lib.bc_lib_rows_plan.restype = None
            lib.bc_lib_rows_plan.argtypes = [_LL, _LL, _LL, ctypes.POINTER(_LL)]
            _library = lib
        return _library


def _raise(err: _Error) -> None:
    exc = launch_error(err.code, *err.arg, err.uarg, err.text.decode(errors="replace"))
    raise exc


# -- device memory for the library --------------------------------------------------


class _Call:
    """The arrays one call into the library holds, by handle."""

    def __init__(self, cp):
        self.cp = cp
        self.arrays: Dict[int, object] = {}
        self.error: Optional[BaseException] = None


_calls: Dict[int, _Call] = {}
_call_ids = itertools.count(1)
_handles = itertools.count(1)
_NAMES = {code: name for name, (code, _) in DTYPES.items()}


@_ALLOC
def _alloc(ctx, dtype, count, zero, ptr, out_of_memory):
    call = _calls[ctx]
    try:
        make = call.cp.zeros if zero else call.cp.empty
        a = make(count, dtype=_NAMES[dtype])
    except MemoryError:
        out_of_memory[0] = 1
        return None
    except BaseException as exc:  # kept, raised when the library returns
        call.error = exc
        return None
    handle = next(_handles)
    call.arrays[handle] = a
    ptr[0] = a.data.ptr
    return handle


@_RELEASE
def _release(ctx, handle):
    _calls[ctx].arrays.pop(handle, None)


def _describe(a):
    """(ptr, length, stride in bytes, itemsize, ndim, device) of a CuPy array."""
    if a.ndim > 1:
        return a.data.ptr, 0, 0, a.itemsize, a.ndim, a.data.device_id
    length = a.shape[0] if a.ndim == 1 else 1
    stride = a.strides[0] if a.ndim == 1 else 0
    return a.data.ptr, length, stride, a.itemsize, a.ndim, a.data.device_id


def check_aligned(name: str, a) -> None:
    """Raise unless the CuPy array ``a`` is aligned to its elements.

    The launchers' own check (``bc_cuda_check_aligned``), run on the address
    and every stride before CuPy itself reads ``a`` (a cast or a copy of a
    misaligned array would fault on the GPU as the kernels would).

    Raises
    ------
    ValueError
        The address or a stride is not a multiple of ``a.itemsize``; the
        message names ``name``.
    """
    lib = library()
    err = _Error()
    for stride in tuple(a.strides) or (0,):
        if lib.bc_lib_check_aligned(name.encode(), a.data.ptr, stride, a.itemsize,
                                    ctypes.byref(err)) != 0:  # fmt: skip
            _raise(err)


def bincount(cp, x, weights, n: int, scatter: bool, out_dtype: str, acc: Accumulation,
             kernels: Kernels, capacity_hint: Optional[int]):
    """Run ``bc_cuda_bincount`` on CuPy arrays; see :func:`kernels.bincount_cupy`.

    ``weights`` (or None) already has ``out_dtype``.  Returns the result,
    a ``cupy.ndarray``; raises what :func:`errors.launch_error` gives.
    """
    lib = library()
    out = numpy.dtype(out_dtype)
    buf = numpy.dtype(acc.buffer_dtype)
    x_desc = _describe(x)
    w_desc = (0, 0, 0, 1, 0)
    if weights is not None:
        w_ptr, w_length, w_stride, _, w_ndim, w_device = _describe(weights)
        w_desc = (w_ptr, w_length, w_stride, w_ndim, w_device)
    result = (_ULL * 3)()
    err = _Error()
    call_id = next(_call_ids)
    call = _calls[call_id] = _Call(cp)
    try:
        rc = lib.bc_lib_bincount(
            *x_desc, int(weights is not None), *w_desc,
            int(scatter), int(x.dtype.kind == "i"), DTYPES[out_dtype][0], out.itemsize,
            DTYPES[acc.buffer_dtype][0], buf.itemsize, acc.shared_itemsize,
            n, capacity_hint or 0, cp.cuda.get_current_stream().ptr,
            kernels.context, kernels.hist, kernels.finish, kernels.resident_blocks,
            kernels.shared_budget, kernels.total_memory,
            _alloc, _release, call_id, result, ctypes.byref(err),
        )  # fmt: skip
        if rc != 0:
            if err.code == CODES["HOST"] and call.error is not None:
                raise call.error
            _raise(err)
        array = call.arrays.pop(int(result[0]))
        length = int(result[1])
        return array[:length] if result[2] else array
    finally:
        del _calls[call_id]


def plan(size: int, span: int, shared_itemsize: int, resident_blocks: int, budget: int):
    """``bc_cuda_make_plan``: ``(blocks, shared bins, copies, shared bytes)``."""
    out = (_LL * 4)()
    library().bc_lib_plan(size, span, shared_itemsize, resident_blocks, budget, out)
    return tuple(out)


def buffer_elements(bins: int, itemsize: int):
    """``bc_cuda_buffer_elements``: ``(elements, where the status starts)``."""
    padded = _LL()
    return library().bc_lib_buffer_elements(bins, itemsize, ctypes.byref(padded)), padded.value


def hist_pass(cp, x, bins: int, acc: Accumulation, kernels: Kernels):
    """A function that queues one histogram pass of ``x`` (counts, window
    ``[0, bins)``) into a zero-filled buffer, without waiting: the kernel
    alone, for benchmarks.  The buffer is allocated once, here."""
    lib = library()
    itemsize = numpy.dtype(acc.buffer_dtype).itemsize
    elements, _ = buffer_elements(bins, itemsize)
    buf = cp.zeros(elements, dtype=acc.buffer_dtype)
    ptr, length, stride, x_itemsize, _, _ = _describe(x)
    stream = cp.cuda.get_current_stream().ptr

    def run():
        err = _Error()
        if lib.bc_lib_hist_pass(ptr, length, stride, x_itemsize, itemsize, acc.shared_itemsize, bins,
                                buf.data.ptr, stream, kernels.hist, kernels.resident_blocks,
                                kernels.shared_budget, ctypes.byref(err)) != 0:  # fmt: skip
            _raise(err)

    run.buffer, run.x = buf, x  # both live as long as the function
    return run


def scatter_rows(cp, out, out_row: int, inc, inc_row: int, inc_elem: int, idx, nrows: int,
                 row_size: int, check_only: bool, kernels) -> None:
    """Run ``bc_cuda_scatter_rows`` on CuPy arrays; see :func:`kernels.scatter_add_cupy`.

    ``out`` (or None when ``check_only``) and ``inc`` are laid out as the
    launcher needs (rows of contiguous elements; ``inc_elem`` 0 for one value
    per row); ``out_row`` and ``inc_row`` are the bytes between their rows.
    Raises what :func:`errors.launch_error` gives.
    """
    lib = library()
    idx_ptr, length, stride, idx_itemsize, _, idx_device = _describe(idx)
    err = _Error()
    call_id = next(_call_ids)
    call = _calls[call_id] = _Call(cp)
    out_ptr, out_device = (out.data.ptr, out.data.device_id) if out is not None else (0, idx_device)
    try:
        rc = lib.bc_lib_scatter_rows(
            out_ptr, out_row, out_device, inc.itemsize,
            inc.data.ptr, inc_row, inc_elem, inc.data.device_id,
            idx_ptr, length, stride, idx_device, int(idx.dtype.kind == "i"), idx_itemsize,
            nrows, row_size, int(check_only), cp.cuda.get_current_stream().ptr,
            kernels.context, kernels.check, kernels.add, kernels.wide, kernels.finish,
            kernels.resident_blocks, _alloc, _release, call_id, ctypes.byref(err),
        )  # fmt: skip
        if rc != 0:
            if err.code == CODES["HOST"] and call.error is not None:
                raise call.error
            _raise(err)
    finally:
        del _calls[call_id]


def rows_plan(n: int, row_size: int, resident_blocks: int):
    """``bc_cuda_rows_plan``: ``(check blocks, blocks, lanes, chunk, tiles, items)``."""
    out = (_LL * 6)()
    library().bc_lib_rows_plan(n, row_size, resident_blocks, out)
    return tuple(out)
