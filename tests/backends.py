"""Where the reliability tests run: the CPU ``Bincount`` and, when present, the GPU Op.

Every reliability test takes a ``backend`` parameter (:data:`BACKENDS`).  A
backend knows how to hold an array in an Aesara shared variable on its device,
which Op the rewrite must put in the compiled graph, and how to read a result
back as a NumPy array.  The GPU variant skips cleanly until
``aesara_bincount.gpu.is_available()`` exists and says yes.

Compiled functions are cached per configuration (:func:`bincount_case`,
:func:`scatter_case`), so that a property test with hundreds of examples
compiles each configuration once, not once per example.
"""
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional, Tuple

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import get_default_mode
from aesara.tensor.extra_ops import bincount as aesara_bincount_graph
from aesara.tensor.subtensor import AdvancedIncSubtensor1

import aesara_bincount  # noqa: F401  (registers the rewrite)
from aesara_bincount import Bincount

__all__ = [
    "Backend",
    "CPU",
    "GPU",
    "BACKENDS",
    "Case",
    "bincount_case",
    "scatter_case",
    "bincount_op_nodes",
    "as_view",
    "compile_shared",
]


def bincount_op_nodes(fn) -> list:
    """The nodes of the compiled function ``fn`` whose Op is one of ours.

    Parameters
    ----------
    fn : aesara.compile.function.types.Function

    Returns
    -------
    list of Apply
        Nodes whose Op is :class:`~aesara_bincount.Bincount` or a GPU Op whose
        class name contains ``"Bincount"``.
    """
    return [
        node
        for node in fn.maker.fgraph.toposort()
        if isinstance(node.op, Bincount) or "Bincount" in type(node.op).__name__
    ]


class Backend:
    """A device the suite runs on (this base class is the CPU).

    Attributes
    ----------
    name : str
        ``"cpu"`` or ``"gpu"``.
    aesara_reference : bool
        Whether Aesara's own graph (``excluding("bincount")``) can be compiled
        on this backend's variables, to serve as a second reference.
    """

    name = "cpu"
    aesara_reference = True

    def unavailable(self) -> Optional[str]:
        """``None`` when usable, else the reason to skip."""
        return None

    def require(self) -> None:
        """Skip the calling test when this backend is not usable."""
        why = self.unavailable()
        if why is not None:
            pytest.skip(why)

    def shared(self, value: np.ndarray, name: Optional[str] = None):
        """An Aesara shared variable holding ``value`` on this device."""
        return aesara.shared(value, name=name, borrow=False)

    def set(self, var, value: np.ndarray, index=slice(None)) -> None:
        """Put ``value[index]`` in the shared variable ``var``.

        The view is kept as it is (``borrow=True``), so that the Op sees its
        strides; ``index`` is a slice such as ``slice(None, None, -2)``.
        """
        var.set_value(value[index], borrow=True)

    def get(self, var) -> np.ndarray:
        """The value of the shared variable ``var`` as a NumPy array (a copy)."""
        return np.array(self.to_numpy(var.get_value(borrow=True)), copy=True)

    def to_numpy(self, value) -> np.ndarray:
        """A function output or a stored value as a NumPy array."""
        return np.asarray(value)

    def check_graph(self, fn) -> None:
        """Fail unless the compiled ``fn`` holds our Op and no Aesara scatter-add."""
        ops = [type(node.op).__name__ for node in fn.maker.fgraph.toposort()]
        assert any(isinstance(node.op, Bincount) for node in fn.maker.fgraph.toposort()), ops
        assert not any(
            isinstance(node.op, AdvancedIncSubtensor1) for node in fn.maker.fgraph.toposort()
        ), ops

    def __repr__(self):
        return self.name


class GpuBackend(Backend):
    """The GPU path: arrays live in ``aesara_bincount.gpu.shared`` variables."""

    name = "gpu"
    aesara_reference = False

    def unavailable(self) -> Optional[str]:
        try:
            from aesara_bincount import gpu
        except Exception as exc:  # pragma: no cover - depends on the GPU branch
            return f"aesara_bincount.gpu does not import: {exc}"
        is_available = getattr(gpu, "is_available", None)
        if is_available is None:
            return "aesara_bincount.gpu has no is_available() yet"
        answer = is_available()
        ok, why = answer if isinstance(answer, tuple) else (bool(answer), "")
        return None if ok else f"no usable GPU: {why}"

    def shared(self, value, name=None):  # pragma: no cover - GPU machines only
        from aesara_bincount import gpu

        return gpu.shared(np.ascontiguousarray(value), name=name)

    def set(self, var, value, index=slice(None)):  # pragma: no cover - GPU machines only
        import cupy

        # The same view of a device copy, so that the GPU Op sees the strides.
        var.set_value(cupy.asarray(value)[index], borrow=True)

    def to_numpy(self, value):  # pragma: no cover - GPU machines only
        if hasattr(value, "__cuda_array_interface__"):
            import cupy

            return cupy.asnumpy(value)
        return np.asarray(value)

    def check_graph(self, fn):  # pragma: no cover - GPU machines only
        names = [type(node.op).__name__ for node in fn.maker.fgraph.toposort()]
        assert any("GpuBincount" in n for n in names), names


CPU = Backend()
GPU = GpuBackend()
#: The ``backend`` parameter of the reliability tests.
BACKENDS = [
    pytest.param(CPU, id="cpu"),
    pytest.param(GPU, id="gpu", marks=pytest.mark.gpu),
]


@dataclass
class Case:
    """One compiled configuration: the rewritten function and its variables.

    Attributes
    ----------
    backend : Backend
    fn : Function
        The rewritten function, ``fn(n)``; its graph holds our Op.
    x, w : SharedVariable
        The values (indices) and, if any, the weights or increments.
    build : callable
        Rebuilds the output graph from ``(x, w, n)``, for reference functions.
    """

    backend: Backend
    fn: object
    x: object
    w: object
    n: object
    build: Callable
    _reference: Optional[object] = field(default=None, repr=False)

    def run(self, x, w, n: int, fn=None) -> np.ndarray:
        """Set the shared variables and call the function with length ``n``.

        ``x`` and ``w`` are arrays or ``(base, index)`` pairs that stand for
        the strided view ``base[index]``.
        """
        self.backend.set(self.x, *as_view(x))
        if self.w is not None:
            self.backend.set(self.w, *as_view(w))
        return self.backend.to_numpy((fn or self.fn)(n))

    def reference(self):
        """Aesara's own graph for the same variables (``excluding("bincount")``)."""
        if self._reference is None:
            mode = get_default_mode().excluding("bincount")
            ref = aesara.function([self.n], self.build(self.x, self.w, self.n), mode=mode)
            assert not bincount_op_nodes(ref), "excluding('bincount') left our Op in"
            self._reference = ref
        return self._reference

    def run_reference(self, x, w, n) -> np.ndarray:
        """Aesara's own graph on the same inputs."""
        return self.run(x, w, n, fn=self.reference())


def as_view(value):
    """``(base, index)`` for a value given as an array or as such a pair."""
    if isinstance(value, tuple):
        return value
    return value, slice(None)


_CACHE: Dict[Tuple, Case] = {}
_CACHE_LOCK = threading.Lock()


def _compile(key, backend: Backend, x_dtype, w_spec, openmp, build) -> Case:
    with _CACHE_LOCK:
        case = _CACHE.get(key)
        if case is not None:
            return case
        backend.require()
        x = backend.shared(np.zeros(3, dtype=x_dtype), name="x")
        w = None
        if w_spec is not None:
            w_dtype, w_ndim = w_spec
            w = backend.shared(np.zeros((3,) * w_ndim, dtype=w_dtype), name="w")
        n = at.lscalar("n")
        with aesara.config.change_flags(openmp=openmp):
            fn = aesara.function([n], build(x, w, n))
        backend.check_graph(fn)
        for node in bincount_op_nodes(fn):
            if isinstance(node.op, Bincount):
                assert node.op.openmp == openmp, node.op
        case = Case(backend, fn, x, w, n, build)
        _CACHE[key] = case
        return case


def bincount_case(
    backend: Backend, x_dtype: str, w_dtype: Optional[str], openmp: bool
) -> Case:
    """``bincount(x, weights=w, minlength=n)`` as :func:`aesara.tensor.extra_ops.bincount` builds it.

    Parameters
    ----------
    backend : Backend
    x_dtype : str
        Integer dtype of ``x``.
    w_dtype : str or None
        dtype of the weights, or ``None`` for counts.
    openmp : bool
        ``aesara.config.openmp`` at compile time (ignored on the GPU).

    Returns
    -------
    Case
        Cached per configuration.
    """
    openmp = bool(openmp) and backend is not GPU

    def build(x, w, n):
        return aesara_bincount_graph(x, weights=w, minlength=n)

    spec = None if w_dtype is None else (w_dtype, 1)
    key = ("bincount", backend.name, x_dtype, spec, openmp)
    return _compile(key, backend, x_dtype, spec, openmp, build)


def scatter_case(
    backend: Backend,
    x_dtype: str,
    out_dtype: str,
    w_ndim: Optional[int],
    openmp: bool,
) -> Case:
    """The scatter-add ``inc_subtensor(zeros(n, out_dtype)[x], w)``.

    ``backend`` and ``openmp`` are as in :func:`bincount_case`; so is the
    returned, cached :class:`Case`.

    Parameters
    ----------
    x_dtype : str
        Integer dtype of the indices.
    out_dtype : str
        dtype of the zeros, the output and the increments.
    w_ndim : {None, 0, 1}
        ``None``: the increment is the constant 1 (a count); ``0``: one
        increment for all indices; ``1``: one per index.
    """
    openmp = bool(openmp) and backend is not GPU

    def build(x, w, n):
        return at.inc_subtensor(at.zeros(n, dtype=out_dtype)[x], 1 if w is None else w)

    spec = None if w_ndim is None else (out_dtype, w_ndim)
    key = ("scatter", backend.name, x_dtype, out_dtype, spec, openmp)
    return _compile(key, backend, x_dtype, spec, openmp, build)


def compile_shared(backend: Backend, build: Callable, values: dict, openmp: bool = False,
                   inputs=()):
    """Compile ``build(**shared)`` over shared variables holding ``values``.

    Parameters
    ----------
    backend : Backend
    build : callable
        Takes the shared variables as keyword arguments, returns the outputs.
    values : dict of str to ndarray
        Initial values, one shared variable each (named by its key).
    openmp : bool
        ``aesara.config.openmp`` at compile time.
    inputs : sequence of Variable
        Explicit inputs of the function, if any.

    Returns
    -------
    fn : Function
        Its graph is checked to hold our Op (``backend.check_graph``).
    shared : dict of str to SharedVariable
    """
    backend.require()
    shared = {k: backend.shared(np.asarray(v), name=k) for k, v in values.items()}
    with aesara.config.change_flags(openmp=openmp and backend is not GPU):
        fn = aesara.function(list(inputs), build(**shared))
    backend.check_graph(fn)
    return fn, shared
