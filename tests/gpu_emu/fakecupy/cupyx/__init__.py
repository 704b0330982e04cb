"""The parts of ``cupyx`` (CuPy 13) that aesara_bincount uses, on the fake CuPy arrays.

Test code only.  ``scatter_add(a, slices, value)`` adds ``value`` into
``a[slices]`` in place, duplicates adding up (``numpy.add.at``), as CuPy's
does with atomics; like CuPy, it refuses NumPy arrays where it wants device
arrays (``TypeError``).
"""
import numpy as _np

from cupy import _unwrap, ndarray

__all__ = ["scatter_add"]


def scatter_add(a, slices, value):
    if not isinstance(a, ndarray):
        raise TypeError(f"Unsupported type {type(a)}")
    _np.add.at(a._a, _unwrap(slices), _unwrap(value))
