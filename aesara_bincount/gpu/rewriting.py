"""The GPU rewrite: run :class:`~aesara_bincount.Bincount` on the GPU when x lives there.

:func:`local_gpu_bincount` turns ``Bincount(HostFromGpu(gx), n, w)`` (which
:func:`aesara_bincount.rewriting.local_bincount` made out of every form of
``extra_ops.bincount`` and of the scatter-add onto zeros) into
``HostFromGpu(GpuBincount(gx, n, w'))``: GPU-resident weights are used in
place (``HostFromGpu(gw)`` becomes ``gw``), host weights are copied once per
call (``GpuFromHost``).  The output type is unchanged, and the host-side
``Max`` and transfer of ``x`` lose their last client and disappear.
``Assert``\\ s around ``x`` (``assert_nonneg=True``) are kept, on the result.
A scatter-add (``mode="scatter"``) whose weights come from the GPU but whose
indices are on the host (the gradient of ``B[i]`` for a GPU vector ``B``)
runs on the GPU too: the indices are copied there once per call.

:func:`local_gpu_scatter_add` does the same for the scatter-add of rows:
``ScatterAdd(HostFromGpu(gbase), y, idx)`` becomes
``HostFromGpu(GpuScatterAdd(gbase, y', idx'))`` (``onto="base"``: when the
base lives on the GPU), and ``ScatterAdd(shape, HostFromGpu(gy), idx)``
becomes ``HostFromGpu(GpuScatterAdd(shape, gy, idx'))`` (``onto="zeros"``:
when the increments do); the other arrays are used on the GPU in place or
copied there once per call.  :func:`local_gpu_transfer_round_trip` then
removes the ``GpuFromHost(HostFromGpu(g))`` that the update of a GPU shared
variable puts around the result, so that the update stays on the GPU, and
``local_inplace_scatter_add`` (position 60) makes it add in place.
:func:`local_gpu_scatter_set` does the same for the scatter-set of rows
(``ScatterSet`` of a GPU base becomes ``GpuScatterSet``).

:func:`local_gpu_bincount_to_host`, last (position 49.5, after the fusion
pass of :mod:`aesara_bincount.gpu.fusion`), gives the ``HostFromGpu`` that
is the only client of a ``GpuBincount`` (or ``GpuFusedBincount``) output to
the Op itself (``to_host=True``): the call then copies the bins and its
status back together, behind its one wait, instead of waiting once for the
status and once more for the copy of the result.

It is registered once, in ``optdb`` at position 48.5 (the rows rewrites at 48.51,
the round trip at 48.52) (after ``specialize``,
where ``local_bincount`` runs, and before the merge at 49 and the in-place
rewrites; Theano's GPU rewrites sat at the same place), with the tags
``fast_run``, ``bincount``, ``gpu_bincount`` and ``cxx_only`` (``GpuBincount`` is a C Op): ``mode.excluding("bincount")``
turns off both rewrites, ``mode.excluding("gpu_bincount")`` keeps the CPU
``Bincount`` (with a transfer of x to the host).  The first two also walk in
the lifting pass (:mod:`aesara_bincount.gpu.lifting`, 48.4), after its
lifters, so that they see lifted inputs and the nodes after them see their
GPU results; their own registrations here do that work when the lifting is
excluded.
"""
from aesara.compile import optdb
from aesara.graph.rewriting.basic import copy_stack_trace, in2out, node_rewriter
from aesara.raise_op import Assert
from aesara.tensor.shape import Shape, Shape_i

from aesara_bincount.rewriting import replacement_for
from aesara_bincount_core.gpu.transfer import GpuFromHost, HostFromGpu, gpu_from_host, host_from_gpu
from aesara_bincount_core.gpu.call_status import GpuCallStatus
from aesara_bincount_core.gpu.index_check import HISTOGRAM, checked_rows
from aesara_bincount_core.gpu.op import GpuBincount
from aesara_bincount_core.gpu.scatter_add import GpuScatterAdd
from aesara_bincount_core.gpu.scatter_set import GpuScatterSet
from aesara_bincount_core.gpu.type import GpuArrayType
from aesara_bincount_core.op import Bincount
from aesara_bincount_core.scatter_add import ScatterAdd
from aesara_bincount_core.scatter_set import ScatterSet

try:  # gpu-elemwise's Op (its fusion into GpuBincount computes the indices in the kernel)
    from aesara_bincount_core.gpu.elemwise import GpuElemwise
except ImportError:  # pragma: no cover - depends on the branch
    GpuElemwise = None

__all__ = [
    "local_gpu_bincount",
    "local_gpu_bincount_checked",
    "local_gpu_scatter_add",
    "local_gpu_scatter_add_checked",
    "local_gpu_scatter_set_checked",
    "local_gpu_transfer_round_trip",
    "local_gpu_bincount_to_host",
]


def _gpu_source(v):
    """``(gx, assert nodes)`` if ``v`` is ``HostFromGpu(gx)`` under Asserts, else None."""
    asserts = []
    while v.owner is not None and isinstance(v.owner.op, Assert):
        asserts.append(v.owner)
        v = v.owner.inputs[0]
    if v.owner is not None and isinstance(v.owner.op, HostFromGpu):
        return v.owner.inputs[0], asserts
    return None


def _on_gpu(v):
    """``v`` on the GPU: the source of a ``HostFromGpu``, else a transfer."""
    if v.owner is not None and isinstance(v.owner.op, HostFromGpu):
        return v.owner.inputs[0]
    return gpu_from_host(v)


def _gpu_bincount(node, call_status: bool):
    """``node`` (a ``Bincount``) on the GPU when its data is there, else None (see below)."""
    if type(node.op) is not Bincount:
        return None
    found = _gpu_source(node.inputs[0])
    if found is None:
        # A scatter-add of GPU increments with host indices (the gradient of
        # B[i], B a GPU vector, i a host lvector), or onto zeros as long as a
        # GPU array: the indices are copied to the GPU once per call, as for
        # the scatter-add of rows onto zeros.
        gpu_weights = len(node.inputs) > 2 and _from_gpu(node.inputs[2]) is not None
        if node.op.mode != "scatter" or not (gpu_weights or _shape_of_gpu_array(node.inputs[1])):
            return None
        found = gpu_from_host(node.inputs[0]), []
    gx, asserts = found
    old = node.outputs[0]
    # issue 39: with exactly n bins the Op would only wait for its index check, which
    # the call's status takes (read once, when the call ends); not for indices that a
    # GpuElemwise computes, which the fusion computes inside the Op's kernel instead
    computed = GpuElemwise is not None and gx.owner is not None and isinstance(gx.owner.op, GpuElemwise)
    checked = call_status and node.op.mode == "scatter" and not computed
    if checked:
        gx = checked_rows(gx, HISTOGRAM, node.inputs[1], GpuCallStatus()())
    inputs = [gx, node.inputs[1]]
    if len(node.inputs) > 2:
        inputs.append(_on_gpu(node.inputs[2]))
    new = GpuBincount(node.op.mode, out_dtype=old.type.dtype, checked=checked)(*inputs)
    out = host_from_gpu(new)
    for a in asserts:
        out = Assert(a.op.msg)(out, *a.inputs[1:])
    return replacement_for(old, out)


@node_rewriter([Bincount])
def local_gpu_bincount(fgraph, node):
    """Replace ``Bincount(HostFromGpu(gx), ...)`` by ``HostFromGpu(GpuBincount(gx, ...))``."""
    return _gpu_bincount(node, call_status=False) or False


@node_rewriter([Bincount])
def local_gpu_bincount_checked(fgraph, node):
    """:func:`local_gpu_bincount` as the lifting pass does it: in the
    ``"scatter"`` mode (exactly ``n`` bins: the gradient of ``v[idx]``, ``v`` a
    vector) the indices are checked on the device into the call's status
    (``GpuIndexCheck``) and ``GpuBincount`` (``checked``) does not wait;
    indices computed by a ``GpuElemwise`` are left to the fusion, which
    computes them inside the Op's kernel, and the Op checks them itself (one
    wait); a count still waits once (its length is ``max(x) + 1``: a wait by
    nature)."""
    return _gpu_bincount(node, call_status=True) or False


optdb.register(
    "local_gpu_bincount",
    in2out(local_gpu_bincount),
    "fast_run",
    "bincount",
    "gpu_bincount",
    "cxx_only",
    position=48.5,
)


def _from_gpu(v):
    """The GPU source of ``v`` when ``v`` is ``HostFromGpu(g)``, else None."""
    if v.owner is not None and isinstance(v.owner.op, HostFromGpu):
        return v.owner.inputs[0]
    return None


def _shape_of_gpu_array(shape, limit: int = 64) -> bool:
    """Whether the shape vector ``shape`` is computed from the shape of a GPU array.

    That is the zero-filled base of the gradient of a gather from a GPU
    variable (``zeros_like(W)``, the gradient of ``-log(P)[arange(n), y]``):
    its result is as large as that GPU array and goes to the GPU, so the
    scatter-add runs there, its indices and increments copied instead.  At
    most ``limit`` nodes above ``shape`` are looked at.
    """
    todo, seen = [shape], set()
    while todo and len(seen) < limit:
        v = todo.pop()
        if v in seen or v.owner is None:
            continue
        seen.add(v)
        if isinstance(v.owner.op, (Shape, Shape_i)):
            inp = v.owner.inputs[0]
            if isinstance(inp.type, GpuArrayType) or _from_gpu(inp) is not None:
                return True
            continue
        todo.extend(v.owner.inputs)
    return False


def _gpu_scatter_add(node, call_status: bool):
    """``node`` (a ``ScatterAdd``) on the GPU when its data is there, else None (see below)."""
    op = node.op
    if type(op) is not ScatterAdd:
        return None
    base, increments, idx = node.inputs
    # On the call's status (the lifting pass), any GPU input moves the node
    # (the placement's rule: host arrays go to the GPU work).
    moved_by_any = call_status and (_from_gpu(increments) is not None or _from_gpu(idx) is not None)
    if op.onto == "base":
        if _from_gpu(base) is None and not moved_by_any:
            return None
        base = _on_gpu(base)
    elif _from_gpu(increments) is None and not _shape_of_gpu_array(base) and not moved_by_any:
        return None
    old = node.outputs[0]
    idx = _on_gpu(idx)
    if call_status:
        rows = Shape_i(0)(base) if op.onto == "base" else base[0]
        status = [GpuCallStatus()()]
        idx = checked_rows(idx, "scatter-add", rows, status[0])
    else:
        status = []
    new = GpuScatterAdd(op.onto, inplace=op.inplace, call_status=call_status)(
        base, _on_gpu(increments), idx, *status
    )
    return replacement_for(old, host_from_gpu(new))


@node_rewriter([ScatterAdd])
def local_gpu_scatter_add(fgraph, node):
    """Replace ``ScatterAdd`` of GPU data by ``HostFromGpu(GpuScatterAdd(...))``.

    ``onto="base"``: when the base is ``HostFromGpu(g)``; ``onto="zeros"``:
    when the increments are, or when the shape of the zeros is that of a GPU
    array (:func:`_shape_of_gpu_array`).  The other arrays go to the GPU (``_on_gpu``);
    the shape of a zero-filled base stays on the host.  The Op checks its
    indices itself, with a wait.
    """
    return _gpu_scatter_add(node, call_status=False) or False


@node_rewriter([ScatterAdd])
def local_gpu_scatter_add_checked(fgraph, node):
    """:func:`local_gpu_scatter_add` as the lifting pass does it: the indices
    checked on the device (``GpuIndexCheck``) and the Op on the call's status,
    with no wait (a bad index is raised when the call ends); and the node
    moves when any of its arrays comes from the GPU (a host base or host
    increments go to the GPU: the gradient of ``q[gpu_idx]`` for a host ``q``)."""
    return _gpu_scatter_add(node, call_status=True) or False


def _gpu_scatter_set(node, call_status: bool):
    if type(node.op) is not ScatterSet:
        return False
    base, values, rows = node.inputs
    if _from_gpu(base) is None and not (
        call_status and (_from_gpu(values) is not None or _from_gpu(rows) is not None)
    ):
        return False
    base, rows = _on_gpu(base), _on_gpu(rows)
    status = []
    if call_status:
        status = [GpuCallStatus()()]
        rows = checked_rows(rows, "scatter-set", Shape_i(0)(base), status[0])
    new = GpuScatterSet(node.op, call_status)(base, _on_gpu(values), rows, *status)
    return replacement_for(node.outputs[0], host_from_gpu(new))


@node_rewriter([ScatterSet])
def local_gpu_scatter_set(fgraph, node):
    """Replace ``ScatterSet(HostFromGpu(g), values, rows)`` by ``HostFromGpu(GpuScatterSet(...))``.

    The set of rows of a GPU base (``set_subtensor(W[idx], v)``,
    ``set_subtensor(M[rows, cols], v)`` through the reshaped base) runs on
    the GPU: the values and the rows go there (``_on_gpu``), not the base.
    """
    return _gpu_scatter_set(node, call_status=False)


@node_rewriter([ScatterSet])
def local_gpu_scatter_set_checked(fgraph, node):
    """:func:`local_gpu_scatter_set` as the lifting pass does it: the rows checked
    on the device, no wait; and the node moves when any of its arrays comes
    from the GPU (its host base goes there: the gradient of a set)."""
    return _gpu_scatter_set(node, call_status=True)


@node_rewriter([GpuFromHost])
def local_gpu_transfer_round_trip(fgraph, node):
    """``GpuFromHost(HostFromGpu(g))`` is ``g`` (the same values, no copies),
    also when ``g``'s static shape is the more precise one (a lifted Op's
    output, whose shape the rewrites of the host graph have since found)."""
    g = _from_gpu(node.inputs[0])
    if g is None or not node.outputs[0].type.is_super(g.type):
        return False
    copy_stack_trace(node.outputs[0], g)
    return [g]


optdb.register(
    "local_gpu_scatter_add",
    in2out(local_gpu_scatter_add, local_gpu_scatter_set),
    "fast_run",
    "bincount",
    "gpu_bincount",
    "cxx_only",
    position=48.51,
)
optdb.register(
    "local_gpu_transfer_round_trip",
    in2out(local_gpu_transfer_round_trip),
    "fast_run",
    "bincount",
    "gpu_bincount",
    "cxx_only",
    position=48.52,
)


@node_rewriter([HostFromGpu])
def local_gpu_bincount_to_host(fgraph, node):
    """``HostFromGpu(GpuBincount(...))`` is ``GpuBincount(..., to_host=True)``
    when the copy is the only client of the GPU output (not a graph output)."""
    g = node.inputs[0]
    producer = g.owner
    if producer is None or not isinstance(producer.op, GpuBincount) or producer.op.to_host:
        return False
    clients = fgraph.clients.get(g, [])
    if len(clients) != 1 or clients[0][0] is not node:
        return False
    new = producer.op.with_host_output()(*producer.inputs)
    return replacement_for(node.outputs[0], new)


optdb.register(
    "local_gpu_bincount_to_host",
    in2out(local_gpu_bincount_to_host),
    "fast_run",
    "bincount",
    "gpu_bincount",
    "cxx_only",
    position=49.5,
)
