"""Compiled scatter-adds of rows, and their expected values, for the ScatterAdd tests.

A case is one graph over shared variables ``W`` (the base), ``G`` (the
increments) and ``I`` (the indices), in one of three forms:

- ``"zeros"``: ``inc_subtensor(zeros((n, *W.shape[1:]))[I], G)``, ``n`` an
  input of the function: a scatter-add onto zeros (the gradient's form);
- ``"base"``: ``inc_subtensor(W[I], G)``: onto a base that must not change;
- ``"inplace"``: the update ``W <- inc_subtensor(W[I], G)``, which runs in
  place.

Functions are compiled once per configuration and cached, so that property
tests compile a bounded number of modules.  The checks go through a
:class:`~backends.Backend`, so that the same tests run on the GPU Op when it
exists (its class name contains ``"ScatterAdd"`` too).
"""
import threading
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import aesara
import aesara.tensor as at
import numpy as np
from aesara.compile.mode import get_default_mode
from aesara.tensor.subtensor import AdvancedIncSubtensor1

import aesara_bincount  # noqa: F401  (registers the rewrites)
from backends import Backend, as_view
from expect import assert_same_histogram

__all__ = [
    "FORMS",
    "RowsCase",
    "rows_case",
    "scatter_nodes",
    "check_rows_graph",
    "wrap",
    "expected_rows",
    "assert_same_rows",
]

FORMS = ("zeros", "base", "inplace")


def scatter_nodes(fn) -> list:
    """Nodes of the compiled ``fn`` whose Op is a ``ScatterAdd`` (CPU or GPU)."""
    return [n for n in fn.maker.fgraph.toposort() if "ScatterAdd" in type(n.op).__name__]


def check_rows_graph(fn, onto: Optional[str] = None, inplace: Optional[bool] = None) -> list:
    """Fail unless ``fn`` holds a ``ScatterAdd`` and no ``AdvancedIncSubtensor1``.

    ``onto`` and ``inplace``, when given, must hold for one of its nodes.
    Returns the ``ScatterAdd`` nodes.
    """
    nodes = scatter_nodes(fn)
    names = [type(n.op).__name__ for n in fn.maker.fgraph.toposort()]
    assert nodes, names
    assert not any(isinstance(n.op, AdvancedIncSubtensor1) for n in fn.maker.fgraph.toposort()), names
    if onto is not None or inplace is not None:
        assert any(
            (onto is None or n.op.onto == onto) and (inplace is None or n.op.inplace == inplace)
            for n in nodes
        ), [n.op for n in nodes]
    return nodes


def wrap(idx, nrows: int) -> np.ndarray:
    """Indices in ``[-nrows, nrows)`` as rows in ``[0, nrows)`` (int64)."""
    idx = np.asarray(idx).astype(np.int64)
    return np.where(idx < 0, idx + nrows, idx)


def expected_rows(base: np.ndarray, increments, idx) -> np.ndarray:
    """``np.add.at`` onto a copy of ``base``, increments cast to its dtype first."""
    out = np.array(base, copy=True)
    target = (len(idx),) + out.shape[1:]
    inc = np.broadcast_to(np.asarray(increments).astype(out.dtype), target)
    np.add.at(out, wrap(idx, out.shape[0]), inc)
    return out


def assert_same_rows(got, base, increments, idx, what: str = "") -> None:
    """Assert that ``got`` is ``np.add.at(base.copy(), idx, increments)``.

    Integer results are compared exactly (sums wrap).  Float results within
    the bound of ``expect.py`` that holds for any order of summation: each
    output element is a bin that receives its base value and the elements of
    the increments added to it, so the comparison is the histogram one,
    with the base among the terms: an element whose base and increments are
    all -0.0 must be -0.0, one with a +0.0 among them +0.0 (``np.add.at``).
    """
    base = np.asarray(base)
    got = np.asarray(got)
    assert got.shape == base.shape, f"{what}: shape {got.shape}, expected {base.shape}"
    assert got.dtype == base.dtype, f"{what}: dtype {got.dtype}, expected {base.dtype}"
    nrows = base.shape[0]
    rowlen = int(np.prod(base.shape[1:], dtype=np.int64))
    n = len(idx)
    inc = np.broadcast_to(np.asarray(increments).astype(base.dtype), (n,) + base.shape[1:])
    rows = wrap(idx, nrows)
    bins = np.concatenate(
        [np.arange(nrows * rowlen), (rows[:, None] * rowlen + np.arange(rowlen)).reshape(-1)]
    )
    terms = np.concatenate([base.reshape(-1), inc.reshape(-1)])
    assert_same_histogram(
        got.reshape(-1), bins, terms, nrows * rowlen, base.dtype, what, starts_at_zero=False
    )


@dataclass
class RowsCase:
    """One compiled configuration (see the module docstring).

    Attributes
    ----------
    fn : Function
        ``fn(n)`` for the ``"zeros"`` form, else ``fn()``; returns the result
        (``"inplace"``: returns nothing, ``W`` holds the result).
    """

    backend: Backend
    form: str
    fn: object
    W: object
    G: object
    I: object

    def run(self, base, increments, idx, nrows: Optional[int] = None) -> np.ndarray:
        """Set the shared variables and run; the result as a NumPy array.

        ``base``, ``increments`` and ``idx`` are arrays or ``(array, index)``
        pairs that stand for the view ``array[index]`` (strided inputs).  The
        ``"zeros"`` form adds onto ``zeros((nrows, *base.shape[1:]))``.
        """
        array, index = _view(base)
        # A copy of the whole array, viewed the same way: the in-place form
        # writes into it, the caller's base stays as it was.
        self.backend.set(self.W, np.array(array, copy=True), index)
        self.backend.set(self.G, *_view(increments))
        self.backend.set(self.I, *_view(idx))
        if self.form == "zeros":
            return self.backend.to_numpy(self.fn(nrows))
        if self.form == "base":
            got = self.backend.to_numpy(self.fn())
            np.testing.assert_array_equal(self.backend.get(self.W), array[index], "the base changed")
            return got
        self.fn()
        return self.backend.get(self.W)


def _view(value):
    """``(array, index)`` for an array or such a pair; a 0-d array takes ``...``."""
    array, index = as_view(value)
    array = np.asarray(array)
    return array, (... if array.ndim == 0 else index)


_CACHE: Dict[Tuple, RowsCase] = {}
_LOCK = threading.Lock()


def rows_case(
    backend: Backend,
    form: str,
    dtype: str,
    ndim: int,
    inc_dtype: str,
    inc_ndim: int,
    idx_dtype: str,
    openmp: bool = False,
) -> RowsCase:
    """The cached :class:`RowsCase` of one configuration.

    Parameters
    ----------
    backend : Backend
    form : {"zeros", "base", "inplace"}
    dtype : str
        dtype of the base (and of the result).
    ndim : int
        Dimensions of the base, 1 or more.
    inc_dtype : str
        dtype of the increments (cast to ``dtype`` in the graph).
    inc_ndim : int
        Dimensions of the increments, at most ``ndim``; any of their lengths
        may be 1 when the function runs (broadcast).
    idx_dtype : str
    openmp : bool
        ``aesara.config.openmp`` when compiled (ignored on the GPU).
    """
    key = (backend.name, form, dtype, ndim, inc_dtype, inc_ndim, idx_dtype, bool(openmp))
    with _LOCK:
        case = _CACHE.get(key)
        if case is not None:
            return case
        backend.require()
        W = backend.shared(np.zeros((1,) * ndim, dtype=dtype), name="W")
        G = backend.shared(np.zeros((1,) * inc_ndim, dtype=inc_dtype), name="G")
        I = backend.shared(np.zeros(1, dtype=idx_dtype), name="I")
        openmp = bool(openmp) and backend.name == "cpu"
        # On the GPU, the Op's own check and wait (the paths of its host C
        # code): the lifting pass would run it on the call's status instead
        # (issue 39; tested in tests/gpu/test_gpu_placement.py).
        mode = get_default_mode().excluding("gpu_lift") if backend.name == "gpu" else None
        with aesara.config.change_flags(openmp=openmp):
            if form == "zeros":
                n = at.lscalar("n")
                zeros = at.zeros((n,) + tuple(W.shape[k] for k in range(1, ndim)), dtype=dtype)
                fn = aesara.function([n], at.inc_subtensor(zeros[I], G), mode=mode)
                onto, inplace = "zeros", False
            elif form == "base":
                fn = aesara.function([], at.inc_subtensor(W[I], G), mode=mode)
                onto, inplace = "base", False
            else:
                fn = aesara.function([], [], updates={W: at.inc_subtensor(W[I], G)}, mode=mode)
                onto, inplace = "base", True
        if form == "zeros" and ndim == 1:
            backend.check_graph(fn)  # a 1-D scatter-add onto zeros stays Bincount's
        else:
            nodes = check_rows_graph(fn, onto, inplace)
            if backend.name == "cpu":
                assert all(node.op.openmp == openmp for node in nodes)
        case = RowsCase(backend, form, fn, W, G, I)
        _CACHE[key] = case
        return case

