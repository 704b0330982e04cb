"""The contract shared by every implementation: dtypes, modes, errors.

:func:`reference_bincount` is the NumPy reference that ``Bincount.perform``
runs and that the C and CUDA code must match; its error messages come from
``c_code/bincount_common.h`` so that all paths raise the same text.
"""
import os
from typing import Optional

import numpy as np

from aesara_bincount_core._c_code import messages

__all__ = [
    "INDEX_DTYPES",
    "OUT_DTYPES",
    "MODES",
    "check_output_size",
    "reference_bincount",
]

#: dtypes accepted for ``x`` (the values or indices).
INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
#: dtypes of the output (and of the weights, which share it).
OUT_DTYPES = INDEX_DTYPES + ("float32", "float64")
#: ``"bincount"``: length ``max(max(x) + 1, minlength)``, negatives refused;
#: ``"scatter"``: fixed length ``n``, negative indices wrap (``np.add.at``).
MODES = ("bincount", "scatter")

_MAX_INTP = np.iinfo(np.intp).max


def _msg(name: str, *args) -> str:
    return messages()[name] % args


def _physical_memory() -> Optional[int]:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_output_size(nbins: int, itemsize: int) -> None:
    """Raise ``MemoryError`` if ``nbins`` items of ``itemsize`` bytes cannot fit.

    The limit is the machine's physical memory, as in the C code
    (``bc_check_output_size`` in ``bincount_common.h``).

    Parameters
    ----------
    nbins : int
        Number of bins of the output.
    itemsize : int
        Bytes per bin (the output dtype's itemsize).

    Raises
    ------
    MemoryError
        When ``nbins`` is negative, when ``nbins * itemsize`` overflows
        ``intp``, or when it exceeds the physical memory.
    """
    phys = _physical_memory()
    if nbins < 0 or nbins > _MAX_INTP // itemsize or (phys and nbins * itemsize > phys):
        raise MemoryError(_msg("BC_MSG_NO_MEMORY", nbins, itemsize))


def reference_bincount(
    x, n: int = 0, weights=None, *, mode: str = "bincount", out_dtype: Optional[str] = None
) -> np.ndarray:
    """NumPy reference of :class:`aesara_bincount.Bincount`.

    Parameters
    ----------
    x : ndarray, shape ``(N,)``, integer dtype
        Values (``"bincount"``) or indices (``"scatter"``).
    n : int
        ``minlength`` (``"bincount"``) or the exact length (``"scatter"``).
    weights : ndarray, shape ``(N,)`` or ``()``, optional
        Cast to ``out_dtype`` before summing.  A 0-d weight is added for
        every element of ``x`` (broadcast), in both modes; in ``"scatter"``
        mode a ``(1,)`` array is broadcast too, as :func:`numpy.add.at` does.
    mode : {"bincount", "scatter"}
    out_dtype : str, optional
        Defaults to ``weights.dtype``, else ``x.dtype`` (Aesara's graph).

    Returns
    -------
    ndarray, shape ``(n_bins,)``, dtype ``out_dtype``
        Counts are computed exactly, then cast (integer dtypes wrap); weighted
        sums use :func:`numpy.add.at` in ``out_dtype``, in element order.

    Raises
    ------
    ValueError, IndexError, MemoryError
        As documented for :class:`aesara_bincount.Bincount`, with the same
        messages as the C code.
    """
    x = np.asarray(x)
    scatter = mode == "scatter"
    if x.ndim != 1:
        raise ValueError(_msg("BC_MSG_NDIM", "x", 1, x.ndim))
    if n < 0:
        raise ValueError(_msg("BC_MSG_LENGTH" if scatter else "BC_MSG_MINLENGTH", n))
    if out_dtype is None:
        out_dtype = weights.dtype if weights is not None else x.dtype
    out_dtype = np.dtype(out_dtype)
    check_output_size(n, out_dtype.itemsize)
    size = x.shape[0]
    if weights is not None:
        weights = np.asarray(weights)
        wlen = 1 if weights.ndim == 0 else weights.shape[0]
        if weights.ndim > 1:
            raise ValueError(_msg("BC_MSG_NDIM", "weights", 1, weights.ndim))
        if not scatter and weights.ndim == 1 and wlen != size:
            raise ValueError(_msg("BC_MSG_WEIGHTS", wlen, size))
        if scatter and wlen not in (size, 1):
            raise ValueError(_msg("BC_MSG_WEIGHTS_BCAST", wlen, size))
        weights = weights.astype(out_dtype, copy=False)
    if size == 0:
        return np.zeros(n, dtype=out_dtype)

    # Find the first refused value with Python ints, so that nothing overflows.
    if scatter:
        if x.dtype.kind == "i":
            xi = x.astype(np.int64)
            bad = (xi < -n) | (xi >= n)
        else:
            bad = x.astype(np.uint64) >= np.uint64(n)
        bad = np.flatnonzero(bad)
        if bad.size:
            i = int(bad[0])
            raise IndexError(_msg("BC_MSG_INDEX", str(int(x[i])), i, n))
        idx = x.astype(np.intp)
        if x.dtype.kind == "i":
            idx[idx < 0] += n
        nbins = n
    else:
        if x.dtype.kind == "i":
            negative = np.flatnonzero(x < 0)
            if negative.size:
                i = int(negative[0])
                raise ValueError(_msg("BC_MSG_NEGATIVE", int(x[i]), i))
        top = int(x.max())
        if top >= _MAX_INTP:
            raise ValueError(_msg("BC_MSG_TOO_LARGE", top))
        nbins = max(top + 1, n)
        idx = x.astype(np.intp)
    check_output_size(nbins, out_dtype.itemsize)

    if weights is None:
        return np.bincount(idx, minlength=nbins).astype(out_dtype)
    out = np.zeros(nbins, dtype=out_dtype)
    np.add.at(out, idx, weights if weights.ndim == 1 else weights.reshape(()))
    return out
