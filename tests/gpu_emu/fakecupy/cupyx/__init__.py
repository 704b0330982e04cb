"""The parts of ``cupyx`` (CuPy 13) that aesara_bincount uses, on the fake CuPy arrays.

Test code only.  ``scatter_add(a, slices, value)`` adds ``value`` into
``a[slices]`` in place, duplicates adding up (``numpy.add.at``), as CuPy's
does with atomics; like CuPy 13, it refuses NumPy arrays where it wants
device arrays and the dtypes its atomics lack (``TypeError``).
"""
import numpy as _np

from cupy import _drain, _unwrap, ndarray

__all__ = ["scatter_add"]


_ATOMIC_DTYPES = ("int32", "float16", "float32", "float64", "uint32", "uint64")


def scatter_add(a, slices, value):
    if not isinstance(a, ndarray):
        raise TypeError(f"Unsupported type {type(a)}")
    if a.dtype.name not in _ATOMIC_DTYPES:
        raise TypeError("scatter_add only supports int32, float16, float32, float64, uint32, uint64, as data type")
    _drain()
    _np.add.at(a._a, _unwrap(slices), _unwrap(value))
