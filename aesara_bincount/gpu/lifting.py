"""The lifting pass: host Ops whose arrays come from the GPU run on the GPU.

One pass, ``gpu_lift`` (:class:`GpuLift`), registered once in ``optdb`` at
position 48.4; on a graph with GPU data it first runs Aesara's elementwise
fusion, so that a fused ``Composite`` becomes one ``GpuElemwise`` kernel,
then the walk below.  It sits after ``specialize`` (where
:func:`aesara_bincount.rewriting.local_bincount` makes ``Bincount`` and
``ScatterAdd``) and before the GPU bincount and
scatter-add rewrites of :mod:`aesara_bincount.gpu.rewriting` (48.5, 48.51),
and before the removal of transfer round trips (48.52), the merge and the
fusion (49) and the in-place rewrites.  Those two rewrites also walk in
this pass, after the lifters: they see the lifted inputs, and the nodes
after them their GPU results (``h / h.sum()``); their own registrations do
the same work when the lifting is excluded.  It walks the
graph from the inputs to the outputs; each lifter (one decorator,
:func:`_lifter`, per lifter) replaces a node by its GPU twin, with a
``HostFromGpu`` on each output, so that the next node sees GPU data:

- ``Elemwise`` (when ``aesara_bincount_core.gpu.elemwise`` is there):
  ``GpuElemwise``, for a node that its ``gpu_elemwise_problem`` accepts; host
  inputs of one element (a learning rate, ``theta``, also under a
  broadcasting ``DimShuffle``) stay on the host as kernel arguments;
- every Op of the GPU table (:mod:`aesara_bincount_core.gpu.table`, filled
  by :mod:`aesara_bincount_core.gpu.entries`): the views, reductions and
  gather (twins of their own), the matrix products, softmax and
  cross-entropy, argmax, Alloc, Join, sorts, ``IncSubtensor``... through
  :func:`local_gpu_lift_table`; the entry says which inputs stay on the host;
- ``Shape``, ``Shape_i``: Aesara's own Ops, applied to the GPU array (the
  shape is read on the host, with no transfer of the array).

The walk tries the multi-index gather first
(:func:`~aesara_bincount.gpu.multi_gather.local_gpu_multi_index_gather_lifted`),
so that ``log(p)[arange(n), y]`` of a lifted ``p`` becomes ``LinearIndex``
and a gather of rows on the GPU.  Entries that check indices or values
(the gather, ``LinearIndex``, the cross-entropy's classes, ``Assert`` of a
GPU condition) check on the device and record the first failure in the
call's status, which the call reads once, when it ends
(:mod:`aesara_bincount_core.gpu.call_status`); inside the walk the
scatter-add of rows does the same (``local_gpu_scatter_add_checked``).

A node is lifted when one of its array inputs (for the views, reductions,
shapes and ``Assert``: the data array) comes from the GPU (``HostFromGpu``).
Its other array inputs go to the GPU (a ``GpuFromHost``, or a GPU constant,
copied once when the function is compiled).  After the walk,
:func:`~aesara_bincount.gpu.placement.place_host_values` decides where
each host value goes to the GPU: an input of the function once per call at
its start, a value of one element as a fill (no copy), a node with a GPU
implementation whose results all go to GPU work on the GPU itself
(``arange(n)``, ``zeros``, ``Alloc``, ``Eye``...), anything else where it is
produced; the walk then runs again.  So, in a graph built on GPU variables,
the only transfers left are those of the host inputs and outputs, and those
around Ops with no GPU implementation.  :func:`lift_fgraph` runs all this
on any ``FunctionGraph`` (an inner graph too).

Tags: ``fast_run``, ``bincount``, ``gpu_bincount`` and ``cxx_only``; its
name is ``gpu_lift``.  ``mode.excluding("gpu_lift")`` turns off the lifting only
(the bincount and scatter-add still run on the GPU, the arithmetic around
them on the host); ``mode.excluding("gpu_bincount")`` turns off every GPU
rewrite and gives the host graphs with their transfers.
"""
from aesara.compile import optdb
from aesara.graph.basic import Constant
from aesara.configdefaults import config
from aesara.graph.rewriting.basic import GraphRewriter, copy_stack_trace, in2out, node_rewriter
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.rewriting.elemwise import FusionOptimizer, local_elemwise_fusion
from aesara.tensor.shape import Shape, Shape_i
from aesara.tensor.type import TensorType

from aesara_bincount.gpu.multi_gather import local_gpu_multi_index_gather_lifted
from aesara_bincount.gpu.placement import gpu_constant, place_host_values
from aesara_bincount.gpu.rewriting import (
    _from_gpu,
    _on_gpu,
    local_gpu_bincount_checked,
    local_gpu_scatter_add_checked,
    local_gpu_scatter_set_checked,
)
from aesara_bincount_core.gpu import entries  # noqa: F401 (fills the table)
from aesara_bincount_core.gpu.call_status import call_status
from aesara_bincount_core.gpu.table import GpuTableOp, entry_checks, gpu_entry, gpu_problem
from aesara_bincount_core.gpu.transfer import HostFromGpu, host_from_gpu
from aesara_bincount_core.gpu.type import GpuArrayType

try:  # gpu-elemwise's Op; without it Elemwise nodes stay on the host
    from aesara_bincount_core.gpu.elemwise import GpuElemwise, gpu_elemwise_problem
except ImportError:  # pragma: no cover - depends on the branch
    GpuElemwise = gpu_elemwise_problem = None

__all__ = ["GpuLift", "LIFTERS", "gpu_lift", "lift_fgraph", "lift_node"]

#: The lifters, in the order the pass tries them on a node.
LIFTERS = []


def _lifter(*op_classes):
    """Make ``fn(fgraph, node)`` a node rewriter of ``op_classes`` and a lifter of the pass."""

    def register(fn):
        rewriter = node_rewriter(list(op_classes))(fn)
        LIFTERS.append(rewriter)
        return rewriter

    return register


def _to_gpu(v):
    """``v`` on the GPU: the source of a ``HostFromGpu``, a GPU constant, else a transfer."""
    if isinstance(v, Constant):
        const = gpu_constant(v)
        if const is not None:
            return const
    return _on_gpu(v)


def _to_host(old_outputs, new_outputs):
    """The GPU results back as host tensors of the old outputs' types."""
    out = []
    for old, new in zip(old_outputs, new_outputs):
        host = host_from_gpu(new) if isinstance(new.type, GpuArrayType) else new
        if host.type != old.type:
            host = old.type.filter_variable(host, allow_convert=True)
        copy_stack_trace(old, host)
        out.append(host)
    return out


def _lift_with_entry(node, entry):
    """``node`` on the GPU through its table entry: the GPU twin, with the host outputs.

    An entry that ``checks`` gets the call's status as a last input
    (:mod:`aesara_bincount_core.gpu.call_status`); one with a ``build``
    makes its GPU graph itself.
    """
    host = set(entry.host_inputs(node))
    gpu_inputs = tuple(k for k in range(len(node.inputs)) if k not in host)
    args = [_to_gpu(v) if k in gpu_inputs else v for k, v in enumerate(node.inputs)]
    if entry.build is not None:
        new = entry.build(node, args)
    else:
        checks = entry_checks(entry, node)
        op = entry.twin(node.op) if entry.twin is not None else GpuTableOp(node.op, gpu_inputs, checks)
        new = op(*args, *([call_status()] if checks else []))
    return _to_host(node.outputs, new if isinstance(new, (list, tuple)) else [new])


@node_rewriter(None)
def local_gpu_lift_table(fgraph, node):
    """A node of an Op in the GPU table whose data comes from the GPU -> its GPU twin.

    The entry (:mod:`aesara_bincount_core.gpu.table`) says which inputs stay on
    the host and which inputs, when they come from the GPU, make the node move
    (``trigger``; by default any GPU input); its other array inputs go to the
    GPU.  A node that the entry refuses (``gpu_problem``) stays on the host.
    """
    entry = gpu_entry(node.op)
    if entry is None:
        return False
    host = set(entry.host_inputs(node))
    trigger = entry.trigger if entry.trigger is not None else range(len(node.inputs))
    if not any(k not in host and _from_gpu(node.inputs[k]) is not None for k in trigger):
        return False
    if gpu_problem(node) is not None:
        return False
    return _lift_with_entry(node, entry)


LIFTERS.append(local_gpu_lift_table)


@_lifter(Shape, Shape_i)
def local_gpu_lift_shape(fgraph, node):
    """``Shape(HostFromGpu(g))`` -> ``Shape(g)`` (and ``Shape_i``): no transfer of the array."""
    g = _from_gpu(node.inputs[0])
    if g is None or type(node.op) not in (Shape, Shape_i):
        return False
    return _to_host(node.outputs, [node.op(g)])


def _kernel_argument(v):
    """Whether ``v`` is a host value of one element (a 0-d ``theta``, ``DimShuffle{x}(theta)``,
    a constant of static shape 1...), which ``GpuElemwise`` takes as a kernel argument."""
    return (
        _from_gpu(v) is None
        and isinstance(v.type, TensorType)
        and all(s == 1 for s in v.type.shape)
    )


def _lift_elemwise(node):
    args = [v if _kernel_argument(v) else _to_gpu(v) for v in node.inputs]
    new = GpuElemwise(node.op.scalar_op)(*args)
    return _to_host(node.outputs, new if isinstance(new, (list, tuple)) else [new])


@_lifter(Elemwise)
def local_gpu_lift_elemwise(fgraph, node):
    """``Elemwise(HostFromGpu(g), theta, ...)`` -> ``HostFromGpu(GpuElemwise(g, theta, ...))``.

    Host inputs of one element (``theta``, ``DimShuffle{x}(theta)``, a
    constant) are passed as they are, kernel arguments; the other inputs go
    to the GPU.
    """
    if GpuElemwise is None or type(node.op) is not Elemwise:
        return False
    if not any(_from_gpu(v) is not None for v in node.inputs):
        return False
    if gpu_elemwise_problem(node) is not None:
        return False
    return _lift_elemwise(node)


def _gpu_form(node):
    """``node``, a GPU node with a host input copied from the GPU (``HostFromGpu(g)``,
    which it read as a kernel argument because ``g`` was still on the host when it
    was lifted), made again with ``g`` on the GPU; its new GPU outputs, or None."""
    op = node.op
    if isinstance(op, GpuTableOp):
        n = len(node.inputs) - int(op.status)
        args = [host_from_gpu(v) if k in op.gpu_inputs else v for k, v in enumerate(node.inputs[:n])]
        if not any(_from_gpu(a) is not None for k, a in enumerate(args) if k not in op.gpu_inputs):
            return None
        host_node = op.host_op.make_node(*args)
        if gpu_problem(host_node) is not None:
            return None
        new = _lift_with_entry(host_node, gpu_entry(op.host_op))
    elif GpuElemwise is not None and isinstance(op, GpuElemwise):
        if not any(_from_gpu(v) is not None for v in node.inputs):
            return None
        new = [_from_gpu(v) or v for v in node.inputs]
        new = op(*new, return_list=True)
        return new if all(a.type == b.type for a, b in zip(new, node.outputs)) else None
    else:
        return None
    gpu = [_from_gpu(v) if _from_gpu(v) is not None else v for v in new]
    return gpu if all(a.type == b.type for a, b in zip(gpu, node.outputs)) else None


def lift_host_arguments(fgraph) -> bool:
    """Make again each GPU node that reads a ``HostFromGpu`` copy as a host argument
    (:func:`_gpu_form`), so that it reads the GPU value; whether one changed."""
    changed = False
    for node in fgraph.toposort():
        if node not in fgraph.apply_nodes:
            continue
        new = _gpu_form(node)
        if new is not None:
            fgraph.replace_all_validate(list(zip(node.outputs, new)), reason="gpu_lift_host_arguments")
            changed = True
    return changed


def lift_node(node, check_only: bool = False):
    """Move the host ``node`` to the GPU whatever its inputs (the placement's step 4).

    Returns its new host outputs (``HostFromGpu`` of the GPU results), or
    None when no GPU implementation takes it; with ``check_only``, whether
    one does.  An ``Elemwise`` of host values of one element only is left to
    the placement's fill.
    """
    if type(node.op) is Elemwise:
        ok = (GpuElemwise is not None and gpu_elemwise_problem(node) is None
              and not all(_kernel_argument(v) for v in node.inputs))  # fmt: skip
        return ok if check_only else (_lift_elemwise(node) if ok else None)
    entry = gpu_entry(node.op)
    ok = entry is not None and gpu_problem(node) is None
    return ok if check_only else (_lift_with_entry(node, entry) if ok else None)


#: The walk: the multi-index gather first (so that ``dot(X, W)[arange(n), a]``
#: is seen on the GPU data the lifting made), then the lifters; the GPU
#: bincount and scatter-add rewrites walk with them, so that the nodes after a
#: ``GpuBincount`` see its GPU result.  Issue 39 (scan): made from LIFTERS when
#: the pass first runs (:func:`_the_walk`), so that the lifters of modules
#: imported after this one (``aesara_bincount.gpu.scan``) walk too.
_walk = None


def _the_walk():
    """The walk over the lifters registered so far (made again when one was added)."""
    global _walk
    if _walk is None or _walk.n_lifters != len(LIFTERS):
        _walk = in2out(local_gpu_multi_index_gather_lifted, *LIFTERS, local_gpu_bincount_checked,
                       local_gpu_scatter_add_checked, local_gpu_scatter_set_checked,
                       name="gpu_lift_walk")  # fmt: skip
        _walk.n_lifters = len(LIFTERS)
    return _walk


class GpuLift(GraphRewriter):
    """The pass: Aesara's elementwise fusion, then the walk, on graphs with GPU data.

    A graph with no ``HostFromGpu`` is left as it is.  In one with GPU data,
    Aesara's own ``FusionOptimizer`` first fuses chains of ``Elemwise`` into
    ``Composite`` nodes (it runs again at 49 for the rest of the graph), so
    that each fused node becomes one ``GpuElemwise`` kernel; then the walk
    lifts.
    """

    def add_requirements(self, fgraph):
        _fusion.add_requirements(fgraph)
        _the_walk().add_requirements(fgraph)

    def apply(self, fgraph):
        if not any(isinstance(node.op, HostFromGpu) for node in fgraph.apply_nodes):
            return
        if GpuElemwise is not None and config.tensor__local_elemwise_fusion:
            _fusion.apply(fgraph)
        _the_walk().apply(fgraph)
        # a walk after a placement can lift nodes that read what the placement moved
        # (the scatter-add of a gradient), whose host inputs the next placement places;
        # each round moves nodes to the GPU, never back (at most _ROUNDS, a guard)
        for _ in range(_ROUNDS):
            if not place_host_values(fgraph, lift_node):
                break
            _the_walk().apply(fgraph)
        lift_host_arguments(fgraph)


def lift_fgraph(fgraph) -> None:
    """Run the lifting pass on ``fgraph``, a function's graph or an inner graph (a ``Scan``'s).

    What ``gpu_lift`` does at position 48.4 (:class:`GpuLift`): nodes of GPU
    data move to the GPU, host values go to the GPU work
    (:mod:`aesara_bincount.gpu.placement`), checks on the device write the
    call's status (an inner graph that gets one as an input must pass it to
    the outer graph's ``GpuCallEnd``).  A graph with no ``HostFromGpu`` is
    left as it is.
    """
    gpu_lift.add_requirements(fgraph)
    gpu_lift.apply(fgraph)


_fusion = FusionOptimizer(local_elemwise_fusion)
#: The most rounds of placement and walk of one pass.
_ROUNDS = 16
#: The pass (registered once in ``optdb``, see the module docstring).
gpu_lift = GpuLift()
gpu_lift.name = "gpu_lift"

optdb.register(
    "gpu_lift",
    gpu_lift,
    "fast_run",
    "bincount",
    "gpu_bincount",
    "cxx_only",
    position=48.4,
)
