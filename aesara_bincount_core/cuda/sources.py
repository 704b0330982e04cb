"""The CUDA sources: what they define, which kernel serves which call, how to compile them.

Part of the stand-alone kernel layer (NumPy and the standard library only).
The numbers come from the headers themselves (``c_code/cuda/kernel_defs.h``'s
``BC_CUDA_*`` constants), so that Python and C never hold two copies of one
figure.
"""
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, Optional, Tuple

import numpy

from aesara_bincount_core import _c_code
from aesara_bincount_core.cuda import nvrtc
from aesara_bincount_core.semantics import OUT_DTYPES

__all__ = [
    "KERNEL_SOURCE",
    "ROWS_SOURCE",
    "SET_SOURCE",
    "KERNEL_HEADER",
    "DEVICE_HEADER",
    "HIST_HEADER",
    "FAMILIES",
    "family_of",
    "kernel_files",
    "CONSTANTS",
    "THREADS",
    "DTYPES",
    "Accumulation",
    "accumulation",
    "rows_kernels",
    "DETERMINISTIC_MODES",
    "deterministic_sum",
    "det_hist_kernels",
    "rows_scratch_kernels",
    "header_constants",
    "module_options",
    "compile_module",
]

#: The CUDA sources in ``c_code/``: the histogram kernels (GpuBincount), the
#: scatter-add of rows (GpuScatterAdd), the header they share with the host
#: and the device helpers they share with each other.
KERNEL_SOURCE = "cuda/bincount_kernels.cu"
ROWS_SOURCE = "cuda/scatter_add_kernels.cu"
#: The scatter-set of rows (GpuScatterSet): the last one in index order wins.
SET_SOURCE = "cuda/scatter_set_kernels.cu"
#: The index check of a call, written into the call's status (GpuIndexCheck).
CHECK_SOURCE = "cuda/call_check_kernels.cu"
KERNEL_HEADER = "cuda/kernel_defs.h"
DEVICE_HEADER = "cuda/device_helpers.cuh"
#: The templates of the histogram pass, included by KERNEL_SOURCE.
HIST_HEADER = "cuda/bincount_hist.cuh"
#: Headers of each family's source besides KERNEL_HEADER and DEVICE_HEADER.
FAMILY_HEADERS = {
    "hist": (HIST_HEADER, "cuda/bincount_det.cuh", "cuda/bincount_det_count.cuh",
             "cuda/bincount_det_bucket.cuh", "cuda/bincount_det_defs.h", "cuda/det_sort.cuh"),
    "rows": ("cuda/scatter_add_det.cuh", "cuda/scatter_add_det_bucket.cuh", "cuda/scatter_add_det_defs.h",
             "cuda/det_sort.cuh", "cuda/bincount_det_defs.h"),
    "set": (),
    "check": (),
}
#: Kernel family -> its source file.  A module holds the kernels of one
#: family for one dtype of x (or of the indices), so a call compiles only
#: its own family.
FAMILIES = {"hist": KERNEL_SOURCE, "rows": ROWS_SOURCE, "set": SET_SOURCE, "check": CHECK_SOURCE}


@lru_cache(maxsize=None)
def header_constants(header: str, prefix: str) -> Dict[str, int]:
    """The integer ``#define {prefix}NAME value`` lines of a header, without the prefix.

    Each such constant must be a plain integer on one line (the headers say so).
    """
    text = _c_code.read_source(header)
    pattern = rf"^#define {re.escape(prefix)}(\w+) (\d+)\b"
    return {name: int(value) for name, value in re.findall(pattern, text, re.MULTILINE)}


#: The ``BC_CUDA_*`` numbers of ``cuda/kernel_defs.h``, without the prefix.
CONSTANTS = header_constants(KERNEL_HEADER, "BC_CUDA_")
#: Threads of a block of every kernel.
THREADS = CONSTANTS["THREADS"]

#: dtype name -> (BC_DT_* code, short name used in kernel names).
DTYPES = {
    name: (code, short)
    for name, short in (
        ("int8", "i8"), ("int16", "i16"), ("int32", "i32"), ("int64", "i64"),
        ("uint8", "u8"), ("uint16", "u16"), ("uint32", "u32"), ("uint64", "u64"),
        ("float32", "f32"), ("float64", "f64"),
    )  # fmt: skip
    for code in (header_constants(KERNEL_HEADER, "BC_DT_")[name.upper()],)
}


@dataclass(frozen=True)
class Accumulation:
    """How one output dtype is accumulated (see ``c_code/cuda_host/bincount_launch.h``).

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
    buffer_dtype : str
        dtype of the accumulator buffer the launcher allocates: the output's
        when there is no conversion (a ``uint32`` accumulator of an ``int32``
        output holds the same bits), else ``acc_dtype``.
    """

    inc: str
    acc_dtype: str
    shared_itemsize: int
    finish: Optional[str]
    buffer_dtype: str

    def hist_kernel(self, x_dtype: str) -> str:
        """Name of the histogram kernel for ``x_dtype``."""
        return f"bincount_hist_{DTYPES[x_dtype][1]}_{self.inc}"


def accumulation(out_dtype: str, weighted: bool) -> Accumulation:
    """The :class:`Accumulation` for an output dtype, counted or weighted.

    Raises
    ------
    TypeError
        ``out_dtype`` is not one of int8 ... uint64, float32, float64.
    """
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"bincount: unsupported output dtype {out_dtype}")
    size = 8 * numpy.dtype(out_dtype).itemsize
    narrow = {8: "u8", 16: "u16"}

    def make(inc, acc, shared, finish):
        return Accumulation(inc, acc, shared, finish, acc if finish else out_dtype)

    if not weighted:
        if out_dtype.startswith("float"):
            return make("c64", "uint64", 4, f"bincount_finish_u64_{DTYPES[out_dtype][1]}")
        if size == 64:
            return make("c64", "uint64", 4, None)
        return make("c32", "uint32", 4, f"bincount_finish_u32_{narrow[size]}" if size < 32 else None)
    inc = DTYPES[out_dtype][1]
    if out_dtype == "float32":
        # Summed in float64 outside shared memory: native double atomics
        # instead of float32 compare-and-swap loops (cuda/bincount_kernels.cu).
        return make(inc, "float64", 4, "bincount_finish_f64_f32")
    if out_dtype.startswith("float"):
        return make(inc, out_dtype, size // 8, None)
    if size == 64:
        return make(inc, "uint64", 8, None)
    return make(inc, "uint32", 4, f"bincount_finish_u32_{narrow[size]}" if size < 32 else None)


#: The values of ``aesara.config.deterministic`` the GPU Ops take as a prop.
DETERMINISTIC_MODES = ("default", "more")


def deterministic_sum(out_dtype: str, weighted: bool, deterministic: str) -> bool:
    """Whether a histogram of ``out_dtype`` takes the deterministic kernels:
    float weights under ``deterministic == "more"`` (integer sums are exact
    on every path)."""
    return deterministic == "more" and weighted and out_dtype.startswith("float")


def det_hist_kernels(x_dtype: str, out_dtype: str) -> Tuple[str, str]:
    """Names of the deterministic pass and finish kernels of float weights
    (``c_code/cuda/bincount_det.cuh``): ``bincount_hist_det_<x>_<w>`` and
    ``bincount_det_finish_<w>``."""
    w = DTYPES[out_dtype][1]
    return f"bincount_hist_det_{DTYPES[x_dtype][1]}_{w}", f"bincount_det_finish_{w}"


def rows_kernels(idx_dtype: str, out_dtype: str, deterministic: str = "default") -> Tuple[str, str]:
    """Names of the checking and the adding kernel of the scatter-add of rows.

    Float rows under ``deterministic == "more"`` take the deterministic
    adding kernel ``scatter_rows_det_<idx>_<out>``
    (``c_code/cuda/scatter_add_det.cuh``: index order, np.add.at's bits).

    Raises
    ------
    KeyError
        An index dtype other than int8 ... uint64 or an output dtype other
        than int8 ... uint64, float32, float64.
    """
    if idx_dtype.startswith("float"):
        raise KeyError(idx_dtype)
    i, o = DTYPES[idx_dtype][1], DTYPES[out_dtype][1]
    verb = "det" if deterministic == "more" and out_dtype.startswith("float") else "add"
    return f"scatter_rows_check_{i}", f"scatter_rows_{verb}_{i}_{o}"


def rows_scratch_kernels(add: str) -> Tuple[str, str]:
    """The two kernels of the float64 scratch that a float32 adding kernel ``add``
    may give way to (``scatter_rows_wide_<idx>_f32``, ``scatter_rows_finish_<idx>_f32``;
    ``c_code/cuda/scatter_add_kernels.cu``), or ``("", "")`` for other dtypes."""
    if not (add.startswith("scatter_rows_add_") and add.endswith("_f32")):
        return "", ""
    return (add.replace("scatter_rows_add_", "scatter_rows_wide_", 1),
            add.replace("scatter_rows_add_", "scatter_rows_finish_", 1))


def family_of(kernel: str) -> str:
    """The family (a key of :data:`FAMILIES`) of the kernel named ``kernel``."""
    if kernel.startswith("scatter_set_"):
        return "set"
    if kernel.startswith("call_check_"):
        return "check"
    return "rows" if kernel.startswith("scatter_rows_") else "hist"


def kernel_files(family: str) -> Tuple[str, ...]:
    """The CUDA files of a family's module besides ``cuda/kernel_defs.h``: its
    source, its own headers and the device header (what an Op hashes into
    its cache version)."""
    return (FAMILIES[family],) + FAMILY_HEADERS[family] + (DEVICE_HEADER,)


def module_options(x_dtype: str) -> Tuple[str, ...]:
    """NVRTC options (besides ``-arch``) of the module for ``x_dtype``.

    No ``-ftz``, ``-use_fast_math`` or the like: the float32 adds of the
    kernels must keep subnormals (see ``cuda/device_helpers.cuh``).
    """
    return ("-std=c++17", f"-DBC_X_DTYPE={DTYPES[x_dtype][0]}")


def compile_module(
    x_dtype: str,
    cc: int,
    nvrtc_lib: Optional[nvrtc.Nvrtc] = None,
    family: str = "hist",
    refresh: bool = False,
):
    """Compile (or fetch from the cache) one family's kernels for one dtype of x.

    Parameters
    ----------
    x_dtype : str
        One of int8 ... uint64 (of x, or of the indices of rows).
    cc : int
        Compute capability, ``10 * major + minor``.
    nvrtc_lib : nvrtc.Nvrtc, optional
        The NVRTC to use (:func:`nvrtc.load` by default).
    family : str
        ``"hist"`` (the histogram and conversion kernels), ``"set"`` (the
        scatter-set of rows, compiled for int64 rows only), ``"check"`` (the
        index check of a call, every index dtype in one module, compiled for
        int64 only) or ``"rows"`` (the scatter-add of rows); see :data:`FAMILIES`.
    refresh : bool
        Compile again even when cached (:func:`nvrtc.compile_cached`).

    Returns
    -------
    nvrtc.CompiledImage

    Raises
    ------
    nvrtc.NvrtcError
    """
    source = FAMILIES[family]
    return nvrtc.compile_cached(
        _c_code.read_source(source),
        source,
        cc,
        module_options(x_dtype),
        headers={h: _c_code.read_source(h) for h in (KERNEL_HEADER,) + kernel_files(family)[1:]},
        nvrtc=nvrtc_lib,
        refresh=refresh,
    )
