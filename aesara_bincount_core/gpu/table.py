"""One table from Aesara Op to GPU implementation: :data:`TABLE`, :func:`gpu_entry`, :class:`GpuTableOp`.

As Aesara's JAX backend maps each Op class to a function
(``aesara/link/jax/dispatch/basic.py``, ``jax_funcify``), this module maps
each host Op class to a :class:`GpuEntry`: the CuPy call (or a kernel of
ours) that computes it on GPU arrays, the dtypes and cases it accepts, and
how its outputs are allocated.  The modules of
:mod:`aesara_bincount_core.gpu.entries` fill it, one family of Ops per
module; the lifting pass (:mod:`aesara_bincount.gpu.lifting`) reads it, and
the documentation page "What runs on the GPU" is generated from it
(:func:`rows`).

An entry is one of two kinds:

- a *funcify* entry: ``funcify(op, node)`` is called once per node, when the
  function first runs it, and returns a closure ``fn(*inputs) -> outputs``
  on CuPy arrays (the props are read once, as in ``jax_funcify``); the
  generic :class:`GpuTableOp` runs it;
- a *twin* entry: a :class:`~aesara_bincount_core.gpu.twin.GpuTwin` class of
  its own (the views, reductions and gather), built as ``twin(op)``.

Refusal is explicit: ``accepts(node)`` returns the reason a node stays on
the host (a dtype, a case), or None; an Op class with no entry stays on the
host too (:func:`gpu_problem` says why).  Ops served by rewrites of their
own (``Elemwise``, ``Bincount``, ``ScatterAdd``, ``Shape``) and Ops known to
stay on the host are listed with :func:`note` so that the documentation
page lists them as well.
"""
import dataclasses
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from aesara.graph.basic import Apply
from aesara.tensor.exceptions import ShapeError
from aesara.tensor.type import TensorType

from aesara_bincount_core.gpu.twin import GpuTwin, as_device_array
from aesara_bincount_core.gpu.type import GPU_DTYPES

__all__ = [
    "GpuEntry",
    "GpuTableOp",
    "NOTES",
    "TABLE",
    "entry_checks",
    "gpu_entry",
    "gpu_problem",
    "note",
    "register",
    "rows",
]


@dataclasses.dataclass(frozen=True)
class GpuEntry:
    """What the table holds for one host Op class.

    Attributes
    ----------
    op_class : type
        The host Op class (matched exactly, not its subclasses).
    family : str
        The group in the documentation (``"blas"``, ``"nnet"``...).
    cupy : str
        The CuPy call, or the kernel of ours, that computes it.
    accepts_text : str
        The dtypes and cases accepted, in words; anything else stays on the host.
    outputs : str
        How the outputs are allocated (new arrays, views...).
    host_inputs : callable
        ``host_inputs(node)``: the positions of the inputs that stay on the
        host (shapes, axes, scalars of the BLAS calls); the others go to the GPU.
    accepts : callable
        ``accepts(node)``: None when the node can run here, else the reason.
    funcify : callable or None
        ``funcify(op, node) -> fn``, ``fn(*inputs)`` returning the list of
        outputs (CuPy arrays); None for a twin entry.
    twin : type or None
        The GpuTwin class of a twin entry.
    view_map : dict
        Outputs that are views of inputs (``{output: [input]}``), as for an Op.
    trigger : tuple of int or None
        The inputs whose life on the GPU makes the pass lift the node (None:
        every GPU input); the gather is lifted for its rows, not its indices.
    source : bool
        The node makes arrays from host values only (``Alloc``, ``Eye``): it
        is lifted when every user of its outputs is on the GPU.
    checks : bool or callable
        The entry checks indices or values on the device (``checks(node)``:
        for some nodes): its Op takes the call's status (:mod:`.call_status`)
        as a last input, and its closure gets it as a last argument.
    host_outputs : tuple of int
        Outputs that stay host tensors (a shape computed from the inputs' shapes).
    build : callable or None
        ``build(node, inputs) -> outputs``: the GPU graph of ``node`` from its
        inputs (GPU at the positions that are not ``host_inputs``), for an
        entry whose GPU form is more than one Op (a gather of checked rows).
    """

    op_class: type
    family: str
    cupy: str
    accepts_text: str
    outputs: str
    host_inputs: Callable[[Apply], Tuple[int, ...]]
    accepts: Callable[[Apply], Optional[str]]
    funcify: Optional[Callable] = None
    twin: Optional[type] = None
    view_map: Optional[dict] = None
    trigger: Optional[Tuple[int, ...]] = None
    source: bool = False
    checks: object = False
    host_outputs: Tuple[int, ...] = ()
    build: Optional[Callable] = None


#: The table: host Op class -> GpuEntry (one dispatch, by exact class).
TABLE: Dict[type, GpuEntry] = {}
#: The closure of each node (kept out of ``node.tag``, which pickling copies).
_CLOSURES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: Ops not lifted by the table, for the documentation: (Op name, where it runs, why).
NOTES: List[Tuple[str, str, str]] = []


def _no_host_inputs(node):
    return ()


def _accept_all(node):
    return None


def register(op_class, *, family, cupy, accepts_text, outputs, host_inputs=None, accepts=None,
             twin=None, view_map=None, trigger=None, source=False, checks=False, host_outputs=(),
             build=None):  # fmt: skip
    """Add an entry for ``op_class``; used as a decorator of its funcify (or called with ``twin``).

    Parameters
    ----------
    op_class : type
        Host Op class; registering one twice raises ``ValueError``.
    family, cupy, accepts_text, outputs : str
        See :class:`GpuEntry`.
    host_inputs : tuple of int or callable, optional
        Inputs kept on the host (default: none).
    accepts : callable, optional
        ``accepts(node) -> reason or None`` (default: every node whose
        dtypes GPU arrays can hold).
    twin : type, optional
        A GpuTwin class: then no funcify is given and this returns the entry.
    view_map : dict, optional
    trigger : tuple of int, optional
    source, checks, host_outputs, build : optional
        See :class:`GpuEntry`.

    Returns
    -------
    callable or GpuEntry
        The decorator (funcify entries), or the entry (twin entries).
    """
    if op_class in TABLE:
        raise ValueError(f"{op_class.__name__} already has a GPU entry")
    if host_inputs is None:
        host_inputs = _no_host_inputs
    elif not callable(host_inputs):
        fixed = tuple(host_inputs)
        host_inputs = lambda node: fixed  # noqa: E731
    fields = dict(op_class=op_class, family=family, cupy=cupy, accepts_text=accepts_text,
                  outputs=outputs, host_inputs=host_inputs, accepts=accepts or _accept_all,
                  view_map=view_map, trigger=trigger, source=source, checks=checks,
                  host_outputs=tuple(host_outputs), build=build)  # fmt: skip
    if twin is not None:
        entry = TABLE[op_class] = GpuEntry(twin=twin, **fields)
        return entry

    def decorate(funcify):
        TABLE[op_class] = GpuEntry(funcify=funcify, **fields)
        return funcify

    return decorate


def note(op_name: str, where: str, why: str) -> None:
    """List ``op_name`` in the documentation as running ``where`` (not through the table), and why."""
    NOTES.append((op_name, where, why))


def gpu_entry(op) -> Optional[GpuEntry]:
    """The entry of ``op``'s exact class, or None."""
    return TABLE.get(type(op))


def entry_checks(entry: GpuEntry, node) -> bool:
    """Whether ``entry`` checks something of ``node`` on the device (it then takes the call's status)."""
    return bool(entry.checks(node) if callable(entry.checks) else entry.checks)


def _dtypes_problem(node) -> Optional[str]:
    for v in list(node.inputs) + list(node.outputs):
        dtype = getattr(v.type, "dtype", None)
        if dtype is not None and dtype not in GPU_DTYPES:
            return f"dtype {dtype} cannot live on the GPU"
    return None


def gpu_problem(node) -> Optional[str]:
    """Why ``node`` cannot run on the GPU through the table, or None when it can.

    Parameters
    ----------
    node : aesara.graph.basic.Apply
        A host node (its inputs may come from the GPU through ``HostFromGpu``).

    Returns
    -------
    str or None
        "no GPU entry for ..." for an Op class outside the table; a dtype
        that GPU arrays cannot hold (complex, str); or the reason the
        entry's ``accepts`` gives.
    """
    entry = gpu_entry(node.op)
    if entry is None:
        return f"no GPU entry for {type(node.op).__name__}"
    return _dtypes_problem(node) or entry.accepts(node)


def rows(family: Optional[str] = None) -> List[GpuEntry]:
    """The entries, by family then Op name (what the documentation page lists)."""
    out = [e for e in TABLE.values() if family is None or e.family == family]
    return sorted(out, key=lambda e: (e.family, e.op_class.__name__))


class GpuTableOp(GpuTwin):
    """A host Op computed on the GPU by its table entry's closure.

    Parameters
    ----------
    host_op : aesara.graph.op.Op
        An Op with a funcify entry in :data:`TABLE`.
    gpu_inputs : tuple of int
        Positions of the inputs that are GPU arrays (the entry's
        ``host_inputs`` are the others).
    status : bool, optional
        The call's status is one more input, last, which the closure gets
        as its last argument (an entry that ``checks``).

    Notes
    -----
    Inputs and outputs: those of ``host_op`` (dtypes, static shapes, shape
    inference), with GPU arrays at ``gpu_inputs`` and for every output but
    the entry's ``host_outputs``; with ``status``, the call's status
    (:mod:`.call_status`) is one more input, last, where the closure records
    what its checks find, without a wait.
    The closure is built once per node (``funcify(host_op, node)``), on its
    first run.  An output whose dtype differs from the host Op's is cast;
    a 0-d result that CuPy gave as a scalar is wrapped.  Unless the entry
    gives a ``view_map``, every output is a new array.  Work is queued on
    CuPy's current stream; an entry that waits (a check of indices, a
    length read back) says so in :data:`TABLE`.

    Raises
    ------
    Whatever the entry raises for bad values, which is what the host Op
    raises (the same exception class), checked by the tests of each entry.
    """

    __props__ = ("host_op", "gpu_inputs", "status")
    #: For Ops pickled before the prop existed.
    status = False

    def __init__(self, host_op, gpu_inputs: Sequence[int], status: bool = False):
        super().__init__(host_op)
        self.gpu_inputs = tuple(gpu_inputs)
        self.status = bool(status)
        entry = gpu_entry(host_op)
        if entry is None or entry.funcify is None:
            raise TypeError(f"GpuTableOp: no funcify entry for {type(host_op).__name__}")
        if entry.view_map:
            self.view_map = dict(entry.view_map)

    def __str__(self):
        return f"Gpu{self.host_op}"

    @property
    def _entry(self):
        return gpu_entry(self.host_op)

    def make_node(self, *inputs):
        entry = self._entry
        status = []
        if self.status:
            *inputs, last = inputs
            status = [last]
        node = super().make_node(*inputs)
        outputs = [
            (TensorType if k in entry.host_outputs else type(o.type))(o.type.dtype, shape=o.type.shape)()
            for k, o in enumerate(node.outputs)
        ]
        return Apply(self, node.inputs + status, outputs)

    def infer_shape(self, fgraph, node, shapes):
        if not hasattr(self.host_op, "infer_shape"):  # Nonzero: shapes known only when it runs
            raise ShapeError(f"{type(self.host_op).__name__} has no infer_shape")
        if self.status:
            shapes = shapes[:-1]
        return self.host_op.infer_shape(fgraph, node, shapes)

    def perform(self, node, inputs, output_storage, params=None):
        fn = _CLOSURES.get(node)
        if fn is None:
            fn = _CLOSURES[node] = gpu_entry(self.host_op).funcify(self.host_op, node)
        results = fn(*inputs)
        for storage, out, res in zip(output_storage, node.outputs, results):
            if isinstance(out.type, TensorType):  # a host output
                storage[0] = np.asarray(res, dtype=out.type.dtype)
                continue
            res = as_device_array(res)
            if res.dtype != out.type.dtype:
                res = res.astype(out.type.dtype)
            storage[0] = res
