"""Placement that follows the data: host values go to the GPU work, not the other way (Theano's rule).

The lifting pass (:mod:`aesara_bincount.gpu.lifting`) moves, from the inputs
to the outputs, each node that has a GPU implementation and reads GPU data;
each host array it reads then gets a ``GpuFromHost``.  :func:`place_host_values`
then decides, for each such copy, where the host value goes to the GPU
(Theano 1.0's ``GraphToGPU`` did the same in one walk, see the design notes):

1. a constant: it becomes a GPU constant, copied once, when the function is
   compiled;
2. an input of the function (the user's argument, a host shared variable):
   it stays a ``GpuFromHost`` of the input, one copy per call at its start;
3. a host value of one element known statically (``1 / n`` of a mean, a
   value computed from shapes): a fill of the GPU array (``cupy.full``, the
   value a kernel argument), no copy; unless a source makes it (rule 4);
4. the result of a node that has a GPU implementation and whose results all
   go to GPU work (``arange(n)`` beside a GPU index, ``zeros``, ``Alloc``,
   ``Eye``, a product of host values): the node moves to the GPU, and the
   same rules apply to its own host inputs, up to the inputs and constants;
5. anything else, a host result of a node with no GPU implementation (or one
   that the host also reads): it is copied where it is produced.

What stays on the host, and why: the shapes, lengths, axes and scalars that
GPU Ops read on the host (each entry's ``host_inputs``: a ``Reshape``'s
shape, ``Alloc``'s, the ``alpha`` and ``beta`` of ``Gemm``), which cost
nothing there and would cost a wait each on the GPU; nodes whose results the
host also reads (moving them would copy back); and every node of a graph
with no GPU data at all.  The rule sees no sizes: a large host input that
meets GPU data is copied to the GPU once per call, where putting it in
``aesara_bincount.gpu.shared`` would cost nothing.
"""
from aesara.graph.basic import Constant
from aesara.tensor.basic import Alloc
from aesara.tensor.type import TensorType

from aesara_bincount_core.gpu.table import GpuTableOp, gpu_entry
from aesara_bincount_core.gpu.transfer import GpuFromHost, HostFromGpu
from aesara_bincount_core.gpu.twin import as_device_array
from aesara_bincount_core.gpu.type import GPU_DTYPES, GpuArrayType
from aesara_bincount_core.gpu.var import GpuArrayConstant

__all__ = ["gpu_constant", "place_host_values"]

_ALLOC = Alloc()


def gpu_constant(v):
    """The host constant ``v`` as a GPU constant (copied once, when the function is
    compiled), or None when it cannot be one (a dtype GPU arrays cannot hold, no CuPy)."""
    if not isinstance(v.type, TensorType) or v.type.dtype not in GPU_DTYPES:
        return None
    try:
        value = as_device_array(v.data)
    except ImportError:  # symbolic graphs without CuPy: the transfer stays
        return None
    return GpuArrayConstant(GpuArrayType(v.type.dtype, shape=v.type.shape), value)


def _one_element(v) -> bool:
    return isinstance(v.type, TensorType) and all(s == 1 for s in v.type.shape)


def _fill(v):
    """A GPU array of the host value ``v`` of one element: ``cupy.full`` (a kernel argument)."""
    return GpuTableOp(_ALLOC, ())(v, *[1] * v.type.ndim)


def _all_users_on_gpu(fgraph, node) -> bool:
    """Whether every used output of ``node`` goes to GPU work, the outputs its
    GPU implementation keeps on the host (``LinearIndex``'s shape) aside."""
    host_outputs = getattr(gpu_entry(node.op), "host_outputs", ())
    used = False
    for k, out in enumerate(node.outputs):
        users = fgraph.clients.get(out, [])
        if k in host_outputs or not users:
            continue
        if any(c == "output" or not isinstance(c.op, GpuFromHost) for c, _ in users):
            return False
        used = True
    return used


def _liftable(fgraph, node, lift_node) -> bool:
    if isinstance(node.op, (GpuFromHost, HostFromGpu)) or not _all_users_on_gpu(fgraph, node):
        return False
    return lift_node(node, check_only=True)


def _from_inputs(v, lift_node, depth: int = 8) -> bool:
    """Whether the host value ``v`` is made from the function's inputs and constants
    alone by nodes that have a GPU implementation (at most ``depth`` deep): a GPU
    twin of it then costs no copy inside the call (rule 2b)."""
    if v.owner is None or _one_element(v):
        return True
    node = v.owner
    if depth == 0 or isinstance(node.op, (GpuFromHost, HostFromGpu)) or not lift_node(node, check_only=True):
        return False
    return all(_from_inputs(i, lift_node, depth - 1) for i in node.inputs if isinstance(i.type, TensorType))


def _gpu_twin(fgraph, node, lift_node) -> bool:
    """Rule 2b: ``node`` is ``GpuFromHost(v)``, ``v`` also read on the host and made from
    the function's inputs by nodes that have a GPU implementation (``q[4:10]`` of a
    sampler's ``q``): the GPU work reads a GPU twin of ``v``'s node, whose inputs go
    to the GPU by the rules above (an input at the start of the call), and the host
    readers keep the host node.  Whether it was done."""
    producer = node.inputs[0].owner
    if not _from_inputs(node.inputs[0], lift_node):
        return False
    outputs = lift_node(producer)
    if outputs is None:
        return False
    k = producer.outputs.index(node.inputs[0])
    twin = outputs[k].owner.inputs[0] if isinstance(outputs[k].owner.op, HostFromGpu) else None
    if twin is None or not node.outputs[0].type.is_super(twin.type):
        return False
    fgraph.replace_all_validate([(node.outputs[0], twin)], reason="gpu_placement")
    return True


def place_host_values(fgraph, lift_node) -> bool:
    """Apply the rules of the module to every ``GpuFromHost`` of ``fgraph``; whether anything changed.

    Parameters
    ----------
    fgraph : aesara.graph.fg.FunctionGraph
        A function's graph or an inner graph (a ``Scan``'s).
    lift_node : callable
        ``lift_node(node, check_only=False)``: the lifting pass's own move
        of a host node to the GPU, returning the node's new (host) outputs,
        or None when it cannot move it; with ``check_only``, whether it can.

    Returns
    -------
    bool
    """
    changed_any, changed = False, True
    while changed:
        changed = False
        for node in reversed(fgraph.toposort()):
            if node not in fgraph.apply_nodes or not isinstance(node.op, GpuFromHost):
                continue
            v = node.inputs[0]
            new = None
            if v.owner is None and not isinstance(v, Constant):
                continue  # an input of the function: copied once per call, at its start
            if v.owner is not None and isinstance(v.owner.op, HostFromGpu):
                continue  # issue 39 (scan): a round trip, removed below (not a fill of one element)
            source = v.owner is not None and getattr(gpu_entry(v.owner.op), "source", False)
            if isinstance(v, Constant):
                new = gpu_constant(v)
            elif _one_element(v) and not (source and _liftable(fgraph, v.owner, lift_node)):
                new = _fill(v)
            elif _liftable(fgraph, v.owner, lift_node):
                producer = v.owner
                outputs = lift_node(producer)
                if outputs is not None:
                    fgraph.replace_all_validate(list(zip(producer.outputs, outputs)), reason="gpu_placement")
                    changed = changed_any = True
                continue
            elif _gpu_twin(fgraph, node, lift_node):
                changed = changed_any = True
                continue
            if new is not None and new.type == node.outputs[0].type:
                fgraph.replace_all_validate([(node.outputs[0], new)], reason="gpu_placement")
                changed = changed_any = True
        # GpuFromHost(HostFromGpu(g)) left by a move is g
        for node in list(fgraph.apply_nodes):
            if isinstance(node.op, GpuFromHost) and node.inputs[0].owner is not None and isinstance(
                node.inputs[0].owner.op, HostFromGpu
            ):
                g = node.inputs[0].owner.inputs[0]
                if node.outputs[0].type.is_super(g.type):
                    fgraph.replace_all_validate([(node.outputs[0], g)], reason="gpu_placement")
                    changed = True
    return changed_any
