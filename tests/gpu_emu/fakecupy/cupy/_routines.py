"""The array routines of CuPy 13 that the GPU table's entries call, on the fake arrays.

Test code only.  Each routine takes what the same CuPy 13 routine takes and
refuses what it refuses: a NumPy array where CuPy wants a device array
raises ``TypeError`` ("Unsupported type"), as CuPy does rather than convert
it; ``repeat`` refuses a device array of repeats (``ValueError``);
``sort`` and ``argsort`` are stable whatever NumPy would do, as CuPy's
radix sorts are, and refuse a ``kind`` (CuPy 13 raises
``NotImplementedError`` for any kind but None).  ``nonzero`` waits for the
device, as CuPy's does (the count is read back): it counts a sync.
Results are new arrays from the pool, except ``broadcast_to``'s view.
"""
import numpy as _np

import cupy as _cupy
from cupy import _drain, _made_on_device, counters, ndarray

__all__ = [
    "argsort", "broadcast_to", "concatenate", "cumprod", "cumsum", "dot", "eye", "log", "matmul",
    "nonzero", "outer", "repeat", "searchsorted", "sort", "take_along_axis", "where",
]  # fmt: skip


def _host(a):
    """The NumPy array behind a device array; scalars as they are; a NumPy array is refused."""
    if isinstance(a, ndarray):
        _drain()
        inner = getattr(a, "_a", None)  # a wrapper of a NumPy array, or a NumPy subclass
        return inner if inner is not None else a.view(_np.ndarray)
    if isinstance(a, _np.ndarray):
        raise TypeError(f"Unsupported type {type(a)}")
    return a


def _new(result):
    return _made_on_device(result)


def dot(a, b, out=None):
    return _new(_np.dot(_host(a), _host(b)))


def matmul(a, b):
    return _new(_np.matmul(_host(a), _host(b)))


def outer(a, b, out=None):
    return _new(_np.outer(_host(a), _host(b)))


def log(a):
    return _new(_np.log(_host(a)))


def where(condition, x, y):
    return _new(_np.where(_host(condition), _host(x), _host(y)))


def broadcast_to(array, shape):
    view = _np.broadcast_to(_host(array), shape)
    wrap = getattr(_cupy, "_wrap", None)  # the wrapper form of the fake arrays
    if wrap is not None:
        return wrap(view, array._device)
    view = view.view(ndarray)
    view._device = array._device
    return view


def concatenate(tup, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return _new(_np.concatenate([_host(a) for a in tup], axis=axis, dtype=dtype, casting=casting))


def eye(N, M=None, k=0, dtype=float, order="C"):
    return _new(_np.eye(N, M, k, dtype=dtype, order=order))


def take_along_axis(a, indices, axis):
    return _new(_np.take_along_axis(_host(a), _host(indices), axis))


def nonzero(a):
    counters["sync"] += 1  # CuPy reads the count of non-zeros back
    return tuple(_new(r) for r in _np.nonzero(_host(a)))


def searchsorted(a, v, side="left", sorter=None):
    return _new(_np.searchsorted(_host(a), _host(v), side=side,
                                 sorter=None if sorter is None else _host(sorter)))  # fmt: skip


def cumsum(a, axis=None, dtype=None, out=None):
    return _new(_np.cumsum(_host(a), axis=axis, dtype=dtype))


def cumprod(a, axis=None, dtype=None, out=None):
    return _new(_np.cumprod(_host(a), axis=axis, dtype=dtype))


def repeat(a, repeats, axis=None):
    if isinstance(repeats, ndarray):
        raise ValueError("cupy.ndaray cannot be specified as `repeats` argument.")  # CuPy 13's text
    return _new(_np.repeat(_host(a), repeats, axis=axis))


def _kind(kind):
    if kind is not None:
        raise NotImplementedError("kind argument is not supported.")


def sort(a, axis=-1, kind=None):
    _kind(kind)
    return _new(_np.sort(_host(a), axis=axis, kind="stable"))


def argsort(a, axis=-1, kind=None):
    _kind(kind)
    return _new(_np.argsort(_host(a), axis=axis, kind="stable"))
