"""The contract shared by every implementation: dtypes, modes, errors.

:func:`reference_bincount` is the NumPy reference that ``Bincount.perform``
runs and that the C and CUDA code must match, and :func:`reference_scatter_add`
the one of ``ScatterAdd`` (the scatter-add of rows); its error messages come from
``c_code/common/host_helpers.h`` so that all paths raise the same text.
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
    "ONTO",
    "shape_text",
    "reference_scatter_add",
    "reference_linear_index",
    "SET_DTYPES",
    "reference_scatter_set",
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


def _first_out_of_range(idx: np.ndarray, n: int) -> Optional[int]:
    """Position of the first index of ``idx`` outside ``[-n, n)`` (unsigned: ``[0, n)``), else None."""
    if idx.dtype.kind == "i":
        wide = idx.astype(np.int64)
        bad = np.flatnonzero((wide < -n) | (wide >= n))
    else:
        bad = np.flatnonzero(idx.astype(np.uint64) >= np.uint64(n))
    return int(bad[0]) if bad.size else None


def _check_rows_broadcast(increments: np.ndarray, target) -> None:
    """Raise ``BC_MSG_ROWS_BCAST`` unless ``increments`` broadcast, NumPy style, to ``target``."""
    lead = len(target) - increments.ndim
    if lead < 0 or any(d not in (1, t) for d, t in zip(increments.shape, target[lead:])):
        raise ValueError(_msg("BC_MSG_ROWS_BCAST", shape_text(increments.shape), shape_text(target)))


def _physical_memory() -> Optional[int]:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_output_size(nbins: int, itemsize: int) -> None:
    """Raise ``MemoryError`` if ``nbins`` items of ``itemsize`` bytes cannot fit.

    The limit is the machine's physical memory, as in the C code
    (``bc_check_output_size`` in ``common/host_helpers.h``).

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
        i = _first_out_of_range(x, n)
        if i is not None:
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


# -- the scatter-add of rows (ScatterAdd) ------------------------------------
#: Where a :class:`~aesara_bincount_core.scatter_add.ScatterAdd` adds:
#: onto a copy of (or in place of) its ``base`` input, or onto zeros of a
#: given shape.
ONTO = ("base", "zeros")


def shape_text(shape) -> str:
    """A shape as the messages write it: Python's tuple repr, ``(3, 2)``, ``(3,)``, ``()``."""
    return str(tuple(int(d) for d in shape))


def reference_scatter_add(base, increments, idx, *, onto: str = "base", inplace: bool = False):
    """NumPy reference of :class:`~aesara_bincount_core.scatter_add.ScatterAdd`.

    ``out = base.copy(); np.add.at(out, idx, increments); return out``, with the
    checks, messages and order of errors of the C code.

    Parameters
    ----------
    base : ndarray, shape ``(V, *rest)``; or the shape ``(V, *rest)`` itself
        ``onto="base"``: the array added onto (its dtype is the output's).
        ``onto="zeros"``: a sequence of non-negative ints, the shape of the
        zero-filled base (the output's dtype is then ``increments.dtype``).
    increments : ndarray
        Broadcastable, NumPy style, to ``(len(idx), *rest)``; cast to the
        output dtype first (Aesara's ``AdvancedIncSubtensor1`` does the same).
    idx : ndarray, shape ``(N,)``, integer dtype
        Row indices; a negative index wraps once, Python style.
    onto : {"base", "zeros"}
    inplace : bool
        Add into ``base`` itself (``onto="base"`` only) instead of a copy.

    Returns
    -------
    ndarray, shape ``(V, *rest)``
        Duplicate indices accumulate, in index order; integer sums wrap
        modulo ``2**bits``.

    Raises
    ------
    ValueError
        A negative dimension of the zero-filled base; increments that cannot
        be broadcast to ``(len(idx), *rest)``.
    IndexError
        An index outside ``[-V, V)``, naming the first one and its position
        (raised before the ``ValueError`` of the increments, as Aesara does).
    MemoryError
        A zero-filled base larger than the machine's memory.

    Nothing is written to ``base`` when an error is raised.
    """
    idx = np.asarray(idx)
    increments = np.asarray(increments)
    if idx.ndim != 1:
        raise ValueError(_msg("BC_MSG_NDIM", "idx", 1, idx.ndim))
    if onto == "zeros":
        shape = tuple(int(d) for d in np.asarray(base).reshape(-1))
        if any(d < 0 for d in shape):
            raise ValueError(_msg("BC_MSG_ZEROS_SHAPE", shape_text(shape)))
        dtype = increments.dtype
        total = int(np.prod(shape, dtype=object))
        phys = _physical_memory()
        if total > _MAX_INTP // dtype.itemsize or (phys and total * dtype.itemsize > phys):
            raise MemoryError(_msg("BC_MSG_ZEROS_MEMORY", shape_text(shape), dtype.itemsize))
    else:
        base = np.asarray(base)
        shape, dtype = base.shape, base.dtype
    nrows = shape[0]
    i = _first_out_of_range(idx, nrows)
    if i is not None:
        raise IndexError(_msg("BC_MSG_ROW_INDEX", str(int(idx[i])), i, nrows))
    target = (idx.shape[0],) + tuple(shape[1:])
    _check_rows_broadcast(increments, target)
    if onto == "zeros":
        out = np.zeros(shape, dtype=dtype)
    else:
        out = base if inplace else base.copy()
    rows = idx.astype(np.intp)
    if idx.dtype.kind == "i":
        rows[rows < 0] += nrows
    np.add.at(out, rows, np.broadcast_to(increments.astype(dtype, copy=False), target))
    return out


# -- several index arrays (LinearIndex) ----------------------------------------
def reference_linear_index(dims, indices):
    """NumPy reference of :class:`~aesara_bincount_core.linear_index.LinearIndex`.

    Parameters
    ----------
    dims : sequence of K non-negative ints
        The sizes of the K leading axes that the index arrays index.
    indices : sequence of K integer ndarrays
        Broadcast together, NumPy style, to the shape ``B``.

    Returns
    -------
    flat : ndarray, shape ``(prod(B),)``, int64
        ``numpy.ravel_multi_index`` of the indices (each wrapped once when
        negative) in C order of ``B``: the row of ``base.reshape(prod(dims),
        *rest)`` that ``base[idx_0, ..., idx_{K-1}]`` names.
    bshape : ndarray, shape ``(len(B),)``, int64
        ``B``.

    Raises
    ------
    IndexError
        Shapes that do not broadcast (``BC_MSG_INDEX_BCAST``); an index
        outside ``[-d_a, d_a)`` (``BC_MSG_AXIS_INDEX``): the first bad one,
        in C order of ``B``, of the first axis that has one, with its value,
        its position and the axis.
    """
    indices = [np.asarray(i) for i in indices]
    try:
        bcast = np.broadcast_arrays(*indices)
    except ValueError:
        raise IndexError(_msg("BC_MSG_INDEX_BCAST", " ".join(shape_text(i.shape) for i in indices)))
    bshape = bcast[0].shape if bcast else ()
    flat = np.zeros(int(np.prod(bshape, dtype=np.int64)), dtype=np.int64)
    for axis, (d, ix) in enumerate(zip(dims, bcast)):
        d = int(d)
        ix = ix.reshape(-1)
        i = _first_out_of_range(ix, d)
        if i is not None:
            raise IndexError(_msg("BC_MSG_AXIS_INDEX", str(int(ix[i])), i, axis, d))
        rows = ix.astype(np.int64)
        rows[rows < 0] += d
        flat = flat * d + rows
    return flat, np.asarray(bshape, dtype=np.int64)


# -- the scatter-set of rows (ScatterSet) --------------------------------------
#: dtypes of a scatter-set's base and values (elements are copied: bool too).
SET_DTYPES = OUT_DTYPES + ("bool",)


def reference_scatter_set(base, values, rows, *, inplace: bool = False):
    """NumPy reference of :class:`~aesara_bincount_core.scatter_set.ScatterSet`.

    ``out = base.copy(); out[rows] = values``, where with duplicate rows the
    last one in index order wins, with the checks, messages and order of
    errors of the C code (rows first, then the values' shape; nothing is
    written on error).

    Parameters
    ----------
    base : ndarray, shape ``(V, *rest)``
    values : ndarray
        Broadcastable, NumPy style, to ``(len(rows), *rest)``; cast to
        ``base.dtype``.
    rows : ndarray, shape ``(N,)``, integer dtype
        A negative row wraps once.
    inplace : bool
        Write into ``base`` itself.

    Returns
    -------
    ndarray, shape ``(V, *rest)``, dtype ``base.dtype``

    Raises
    ------
    IndexError
        A row outside ``[-V, V)``, naming the first one and its position.
    ValueError
        Values that cannot be broadcast to ``(N, *rest)``.
    """
    base, values, rows = np.asarray(base), np.asarray(values), np.asarray(rows)
    nrows = base.shape[0]
    i = _first_out_of_range(rows, nrows)
    if i is not None:
        raise IndexError(_msg("BC_MSG_ROW_INDEX", str(int(rows[i])), i, nrows))
    target = (rows.shape[0],) + base.shape[1:]
    _check_rows_broadcast(values, target)
    out = base if inplace else base.copy()
    wide = rows.astype(np.int64)
    wide = np.where(wide < 0, wide + nrows, wide)
    # The last occurrence of each row, so that the last one in index order wins.
    _, first_of_reversed = np.unique(wide[::-1], return_index=True)
    keep = np.sort(len(wide) - 1 - first_of_reversed)
    out[wide[keep]] = np.broadcast_to(values.astype(base.dtype, copy=False), target)[keep]
    return out
