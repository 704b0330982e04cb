"""Where the tests of the Op run: the CPU ``Bincount`` and the GPU ``GpuBincount``.

A test that takes a ``backend`` argument runs once per :data:`BACKENDS`
entry: ``tests/conftest.py`` parametrizes it (an explicit
``@pytest.mark.parametrize("backend", BACKENDS)`` does the same).  A backend
knows how to hold an array in an Aesara shared variable on its device, which
Op the rewrite must put in the compiled graph, and how to read a result back
as a NumPy array.  The GPU variant carries the ``gpu`` mark: it is skipped
without a usable GPU, and ``tests/test_gpu_emulated.py`` runs every such test
on the CPU emulation of ``tests/gpu_emu``.

:meth:`Backend.function` is ``aesara.function`` for tests written with
symbolic inputs: on the GPU their array inputs become GPU shared variables,
set before each call, so the same test body drives ``GpuBincount``.

A test that cannot run on the GPU says why with ``@pytest.mark.cpu_only(reason)``
(its GPU variant is skipped with that reason); a test that fails on the GPU
because of a known fault is listed in :data:`GPU_KNOWN_FAULTS`.

Compiled functions are cached per configuration (:func:`bincount_case`,
:func:`scatter_case`), so that a property test with hundreds of examples
compiles each configuration once, not once per example.
"""
import os
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

#: GPU variants that fail because of a known fault of the GPU path, by node id
#: or by test id (``file::name``: every parametrization), with
#: ``(reason, strict, run)`` for ``pytest.mark.xfail``.  Strict (on the CPU
#: emulation only, where the fault shows every time) where the test fails
#: whatever ran before it, so that the fix shows up as a failure that asks to
#: remove the entry; not strict where the outcome depends on what ran
#: before (GpuBincount's C code keeps the previous call's length as its next
#: first-pass guess); ``run=False`` where the fault has crashed the process.
GPU_KNOWN_FAULTS: Dict[str, Tuple[str, bool, bool]] = {}

__all__ = [
    "Backend",
    "DeviceFunction",
    "GPU_KNOWN_FAULTS",
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
    float_sums_reproducible : bool
        Whether float sums are the same, bit for bit, on every call.
    """

    name = "cpu"
    aesara_reference = True
    #: Whether float sums are the same, bit for bit, on every call (the CPU: for
    #: a fixed input and thread count); on the GPU atomics add in any order.
    float_sums_reproducible = True

    def unavailable(self) -> Optional[str]:
        """``None`` when usable, else the reason to skip."""
        return None

    def require(self) -> None:
        """Skip the calling test when this backend is not usable."""
        why = self.unavailable()
        if why is not None:
            pytest.skip(why)

    def skip_on_emulation(self, why: str) -> None:
        """Skip the calling test on the CPU emulation of the GPU (tests/gpu_emu), saying ``why``.

        For work the emulation cannot do in reasonable time (each launch
        runs thousands of CPU threads: about a second a call); the test
        still runs on the CPU and on a real GPU.
        """
        if self.name == "gpu" and os.environ.get("AESARA_BINCOUNT_EMULATED_GPU") == "1":
            pytest.skip(f"too slow for the CPU emulation: {why}")

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

    def function(self, inputs, outputs, mode=None, check: bool = True, **kwargs):
        """``aesara.function(inputs, outputs)`` on this backend.

        On the CPU this is ``aesara.function`` itself.  On the GPU every
        input of one or more dimensions is replaced by a GPU shared variable
        (the scalars stay inputs); the returned :class:`DeviceFunction` takes
        the same arguments, copies each array argument to the device before
        the call (keeping its strides) and returns NumPy arrays.

        Parameters
        ----------
        inputs : list of Variable
        outputs : Variable or list of Variable
        mode : Mode, optional
        check : bool
            Fail unless the compiled graph holds this backend's Op
            (:meth:`check_graph`); off for graphs that need no Op, such as
            a shape.
        """
        fn = aesara.function(list(inputs), outputs, mode=mode, **kwargs)
        if check:
            self.check_graph(fn)
        return fn

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
    #: Aesara's own graph runs on a host copy of the GPU data (``HostFromGpu``).
    aesara_reference = True
    float_sums_reproducible = False

    def unavailable(self) -> Optional[str]:
        try:
            from aesara_bincount import gpu
        except Exception as exc:  # pragma: no cover - depends on the GPU branch
            return f"aesara_bincount.gpu does not import: {exc}"
        ok, why = gpu.availability()
        return None if ok else f"no usable GPU: {why}"

    def shared(self, value, name=None):
        self.require()
        from aesara_bincount import gpu

        # order="C" keeps a 0-d value 0-d (np.ascontiguousarray makes it 1-d).
        return gpu.shared(np.asarray(value, order="C"), name=name)

    def to_numpy(self, value):
        if hasattr(value, "__cuda_array_interface__"):
            import cupy

            return cupy.asnumpy(value)
        return np.asarray(value)

    def function(self, inputs, outputs, mode=None, check=True, **kwargs):
        self.require()
        from aesara_bincount.gpu import host_from_gpu

        inputs = list(inputs)
        on_device = {}
        for v in inputs:
            if v.type.ndim > 0:
                gv = self.shared(np.zeros((2,) * v.type.ndim, dtype=v.type.dtype), name=v.name)
                on_device[v] = (gv, v.type.filter_variable(host_from_gpu(gv), allow_convert=True))
        fn = aesara.function(
            [v for v in inputs if v not in on_device],
            outputs,
            mode=mode,
            givens=[(v, h) for v, (_, h) in on_device.items()],
            **kwargs,
        )
        if check:
            self.check_graph(fn)
        return DeviceFunction(self, fn, inputs, {v: gv for v, (gv, _) in on_device.items()})

    def set(self, var, value, index=slice(None)):
        import cupy

        # The same view of a device copy, so that the GPU Op sees the strides.
        var.set_value(cupy.asarray(value)[index], borrow=True)

    def check_graph(self, fn):
        """Fail unless ``fn`` runs every bincount on the GPU (``GpuBincount``, no ``Bincount``)."""
        ops = [node.op for node in fn.maker.fgraph.toposort()]
        names = [type(op).__name__ for op in ops]
        assert any("GpuBincount" in n for n in names), names
        assert not any(type(op) is Bincount for op in ops), names


class DeviceFunction:
    """A compiled function whose array inputs live in shared variables on a device.

    Made by :meth:`GpuBackend.function`.  Calling it with the arguments of the
    original inputs sets each shared variable to the device copy of its
    argument, in the same layout (:func:`device_layout`), passes the scalars
    on, and returns the outputs as NumPy arrays.  Other attributes (``maker``)
    are those of the compiled function.
    """

    def __init__(self, backend: Backend, fn, inputs, shared):
        self.backend = backend
        self.fn = fn
        self.inputs = inputs
        self.shared = shared

    def __call__(self, *args):
        if len(args) != len(self.inputs):
            raise TypeError(f"expected {len(self.inputs)} arguments, got {len(args)}")
        scalars = []
        for v, a in zip(self.inputs, args):
            if v in self.shared:
                a = np.asarray(a)
                if a.dtype != v.type.dtype:
                    # As aesara.function: only casts that lose nothing.
                    if not np.can_cast(a.dtype, v.type.dtype, "safe"):
                        raise TypeError(f"{v}: cannot take {a.dtype} for {v.type.dtype} without loss")
                    a = a.astype(v.type.dtype)
                self.backend.set(self.shared[v], *device_layout(a))
            else:
                scalars.append(a)
        out = self.fn(*scalars)
        if isinstance(out, (list, tuple)):
            return [self.backend.to_numpy(o) for o in out]
        return self.backend.to_numpy(out)

    def __getattr__(self, name):
        return getattr(self.fn, name)


def device_layout(value: np.ndarray):
    """``(base, index)`` such that ``base[index]`` equals ``value`` with its strides.

    A 1-d view with a step (``x[::3]``, ``x[::-1]``, a column of a matrix)
    becomes a contiguous base and that step, so that a device copy
    ``cupy.asarray(base)[index]`` is strided as ``value`` is; anything else
    is taken as it is.
    """
    if value.ndim != 1 or value.flags.c_contiguous or value.strides[0] % value.itemsize:
        return value, slice(None)
    step = value.strides[0] // value.itemsize
    if step == 0:
        return np.ascontiguousarray(value), slice(None)
    base = np.zeros(value.size * abs(step), dtype=value.dtype)
    index = slice(None, None, step)
    base[index] = value
    return base, index


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
