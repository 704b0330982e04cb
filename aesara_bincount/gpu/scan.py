"""The rewrite that runs a ``Scan`` on the GPU: :func:`local_gpu_lift_scan`, :func:`scan_problem`.

A lifter of the lifting pass (:mod:`aesara_bincount.gpu.lifting`): a
``Scan`` one of whose sequences, initial states or non-sequences comes from
the GPU (``HostFromGpu``) becomes a
:class:`~aesara_bincount_core.gpu.scan.GpuScan`, whose inner graph has
been through the same rewrites as the outer graph, the lifting included.

Which of the loop's inputs live on the GPU is found by rewriting the inner
graph, as Theano's ``local_gpua_scan_to_gpua`` did, but with a rule that
follows the data instead of moving every float input: starting from the
inputs that come from the GPU, the inner graph is rewritten (every
rewrite of the scan's mode below the in-place ones, position 49.5) with
those inputs as GPU arrays, and the set grows by

- each input that the rewritten inner graph copies to the GPU at every
  step (a ``GpuFromHost`` of the slice, state or non-sequence): it goes to
  the GPU once, outside the loop, instead;
- each state whose new value the rewritten inner graph computes on the
  GPU: its initial value goes to the GPU, so that the state stays there
  from step to step;

and shrinks by each input from the GPU that the rewritten inner graph
reads on the host only (an index, a length: copied to the host at every
step, a wait each; given to the loop on the host, it is copied once per
call instead), until nothing changes (an input goes back to the host once,
for good).  The inner graph is rewritten at most twice per input, and
each round costs what its rewriting costs when the loop is compiled.  The
inputs that the inner graph reads on the host (a shape, a learning rate
that the GPU kernels take as an argument, an integer count) stay on the
host; the non-sequences that the rewritten inner graph no longer uses are
dropped.  A stacked result (nit-sot) that the inner graph computes on the
GPU is stacked on the GPU.  A ``while`` loop's condition stays on the host.

The checks of the inner GPU Ops write into the call's status
(:mod:`aesara_bincount_core.gpu.call_status`): the status the rewritten
inner graph makes becomes one more non-sequence of the loop, fed by the
status of the call that runs it, so that the steps neither make a status
nor read one; the call reads it once, at its end (``GpuCallEnd``, which
runs after the loop).

A Scan that stays on the host gives its reason to :func:`scan_problem`,
which :func:`aesara_bincount.gpu.report` prints.
"""
import copy
import dataclasses
import weakref
from typing import List, Set

from aesara.graph.basic import clone_replace
from aesara.graph.fg import FunctionGraph
from aesara.scan.op import Scan
from aesara.tensor.type import TensorType

from aesara_bincount.gpu.lifting import _lifter, _to_gpu, _to_host
from aesara_bincount.gpu.rewriting import _from_gpu
from aesara_bincount_core.gpu.call_status import GpuCallStatus, call_status, status_type, use_call_status
from aesara_bincount_core.gpu.scan import GpuScan
from aesara_bincount_core.gpu.transfer import GpuFromHost, HostFromGpu, host_from_gpu
from aesara_bincount_core.gpu.type import GPU_DTYPES, GpuArrayType

__all__ = ["INNER_CUTOFF", "local_gpu_lift_scan", "loop_input_reason", "loop_output_reason", "scan_problem"]

#: The inner graph is rewritten with the rewrites of the scan's mode below
#: this position of ``optdb``: everything but the in-place rewrites (a Scan's
#: inner graph may hold no in-place Op; they run when the loop is compiled).
INNER_CUTOFF = 49.5
#: Why a Scan node's Op stayed on the host, for the report.
_REFUSED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@dataclasses.dataclass
class _Slot:
    """One outer input of the loop that has inner inputs: a sequence, a state or a non-sequence."""

    kind: str
    outer: int  # position among the node's inputs
    inner: List[int]  # positions among the inner inputs
    outs: List[int]  # the inner outputs that feed it back (states)


def _slots(info) -> List[_Slot]:
    """The slots of a Scan, in the order of the outer inputs."""
    slots = []
    outer, inner, out = 1, 0, 0

    def add(kind, n_inner, n_outs):
        nonlocal outer, inner, out
        slots.append(_Slot(kind, outer, list(range(inner, inner + n_inner)), list(range(out, out + n_outs))))
        outer, inner, out = outer + 1, inner + n_inner, out + n_outs

    for _ in range(info.n_seqs):
        add("sequence", 1, 0)
    for taps, out_taps in zip(info.mit_mot_in_slices, info.mit_mot_out_slices):
        add("state", len(taps), len(out_taps))
    for taps in info.mit_sot_in_slices + info.sit_sot_in_slices:
        add("state", len(taps), 1)
    out += info.n_nit_sot  # the shared states' outputs come after the stacked results
    for _ in range(info.n_shared_outs):
        add("shared state", 1, 1)
    outer += info.n_nit_sot  # the stacked results' lengths have no inner input
    for _ in range(info.n_non_seqs):
        add("non-sequence", 1, 0)
    return slots


def _movable(node, slot: _Slot) -> bool:
    """Whether the slot's values may live on the GPU (tensors of a GPU dtype, in and out)."""
    op = node.op
    variables = [node.inputs[slot.outer]] + [op.inner_inputs[k] for k in slot.inner]
    variables += [op.inner_outputs[k] for k in slot.outs]
    return all(isinstance(v.type, TensorType) and v.type.dtype in GPU_DTYPES for v in variables)


def _inner_rewriter(op):
    """The scan's own rewrites (its mode's query), below :data:`INNER_CUTOFF`."""
    mode = op.mode_instance
    query = mode._optimizer
    if not hasattr(query, "position_cutoff"):  # a mode with a rewriter object of its own
        return None
    query = copy.copy(query)
    query.position_cutoff = min(query.position_cutoff, INNER_CUTOFF)
    return mode.optdb.query(query)


def _rewritten_inner_graph(op, slots, on_gpu: Set[int], rewriter) -> FunctionGraph:
    """The inner graph with the inputs of the slots ``on_gpu`` on the GPU, rewritten."""
    inputs = list(op.inner_inputs)
    replace = {}
    for s in on_gpu:
        for k in slots[s].inner:
            v = inputs[k]
            inputs[k] = GpuArrayType(v.type.dtype, shape=v.type.shape)(name=v.name)
            replace[v] = host_from_gpu(inputs[k])
    outputs = clone_replace(op.inner_outputs, replace=replace)
    for s in on_gpu:
        for k in slots[s].outs:
            outputs[k] = _to_gpu(outputs[k])
    fgraph = FunctionGraph(inputs, outputs, clone=True)
    rewriter.rewrite(fgraph)
    return fgraph


def _wanted(fgraph, node, slots, on_gpu: Set[int]) -> Set[int]:
    """The slots not yet on the GPU that the rewritten inner graph uses on the GPU."""
    wanted = set()
    for s, slot in enumerate(slots):
        if s in on_gpu or not _movable(node, slot):
            continue
        copied = any(
            client != "output" and isinstance(client.op, GpuFromHost)
            for k in slot.inner
            for client, _ in fgraph.clients[fgraph.inputs[k]]
        )
        computed = any(_from_gpu(fgraph.outputs[k]) is not None for k in slot.outs)
        if copied or computed:
            wanted.add(s)
    return wanted


def _read_on_host(fgraph, slots, on_gpu: Set[int], readers: Set[str]) -> Set[int]:
    """The slots on the GPU that the rewritten inner graph reads on the host only: every
    use of their inner inputs is a copy to the host (an index, a length), and a state's
    new value is computed on the host.  The names of the Ops that read them go to ``readers``."""
    found = set()
    for s in on_gpu:
        uses = [c for k in slots[s].inner for c, _ in fgraph.clients[fgraph.inputs[k]]]
        if not uses or any(c == "output" or not isinstance(c.op, HostFromGpu) for c in uses):
            continue
        outs = [fgraph.outputs[k] for k in slots[s].outs]
        if all(o.owner is not None and isinstance(o.owner.op, GpuFromHost) for o in outs):
            found.add(s)
            for transfer in uses:
                clients = fgraph.clients[transfer.outputs[0]]
                readers.update(type(c.op).__name__ for c, _ in clients if c != "output")
    return found


def _status_as_input(fgraph, info):
    """The call's status of the inner graph as its last non-sequence; the new info, and
    the outer variable that feeds it (None when no inner Op checks anything)."""
    if not any(isinstance(n.op, GpuCallStatus) for n in fgraph.apply_nodes):
        return info, None
    use_call_status(fgraph, status_type()(name="call_status"))
    return dataclasses.replace(info, n_non_seqs=info.n_non_seqs + 1), call_status()


def _gpu_scan(node, slots, on_gpu: Set[int], fgraph, read_on_host: str):
    """The GpuScan node's outputs, as host tensors of the Scan's output types."""
    op = node.op
    info, status = _status_as_input(fgraph, op.info)
    outputs = list(fgraph.outputs)
    first_nit_sot = info.n_mit_mot_outs + info.n_mit_sot + info.n_sit_sot
    for k in range(first_nit_sot, first_nit_sot + info.n_nit_sot):
        g = _from_gpu(outputs[k])
        if g is not None:  # a stacked result computed on the GPU is stacked there
            outputs[k] = g
    outer = list(node.inputs) + ([] if status is None else [status])
    for s in on_gpu:
        outer[slots[s].outer] = _to_gpu(outer[slots[s].outer])
    inputs, outer, info = _without_unused_non_sequences(fgraph, list(fgraph.inputs), outer, info)
    new_op = GpuScan(
        inputs, outputs, info, mode=op.mode, truncate_gradient=op.truncate_gradient,
        name=op.name, profile=op.profile, allow_gc=op.allow_gc, strict=op.strict,
    )  # fmt: skip
    new_op.read_on_host = read_on_host
    return _to_host(node.outputs, new_op(*outer, return_list=True))


def _without_unused_non_sequences(fgraph, inputs, outer, info):
    """The inner inputs, outer inputs and info without the non-sequences that the rewritten
    inner graph no longer uses (a host value passed to the loop for nothing would keep
    its producer on the host)."""
    first = len(inputs) - info.n_non_seqs
    unused = [k for k in range(first, len(inputs)) if not fgraph.clients[inputs[k]]]
    if not unused:
        return inputs, outer, info
    shift = len(outer) - len(inputs)  # the non-sequences end both lists
    inputs = [v for k, v in enumerate(inputs) if k not in unused]
    outer = [v for k, v in enumerate(outer) if k - shift not in unused]
    return inputs, outer, dataclasses.replace(info, n_non_seqs=info.n_non_seqs - len(unused))


@_lifter(Scan)
def local_gpu_lift_scan(fgraph, node):
    """``Scan`` reading GPU data -> ``GpuScan`` (see the module docstring)."""
    op = node.op
    if type(op) is not Scan:
        return False
    slots = _slots(op.info)
    on_gpu = {s for s, slot in enumerate(slots) if _from_gpu(node.inputs[slot.outer]) is not None}
    on_gpu = {s for s in on_gpu if _movable(node, slots[s])}
    if not on_gpu:
        _REFUSED[op] = "no sequence, state or non-sequence of the loop comes from the GPU"
        return False
    rewriter = _inner_rewriter(op)
    if rewriter is None:
        _REFUSED[op] = "the scan's mode has a rewriter of its own, not a query of optdb"
        return False
    read_on_host: Set[int] = set()  # a slot goes back to the host once, and for good
    readers: Set[str] = set()
    for _ in range(2 * len(slots) + 1):
        inner = _rewritten_inner_graph(op, slots, on_gpu, rewriter)
        more = _wanted(inner, node, slots, on_gpu) - read_on_host
        less = _read_on_host(inner, slots, on_gpu, readers)
        if not more and not less:
            break
        on_gpu, read_on_host = (on_gpu | more) - less, read_on_host | less
    on_host = (f"the loop's body reads it on the host only ({', '.join(sorted(readers))}): "
               "one copy per call instead of one at every step")  # fmt: skip
    if not on_gpu:
        _REFUSED[op] = on_host
        return False
    if any(n.op.destroy_map for n in inner.apply_nodes):
        _REFUSED[op] = "the rewritten inner graph has in-place Ops"
        return False
    return _gpu_scan(node, slots, on_gpu, inner, on_host if readers else "")


def scan_problem(node) -> str:
    """Why the ``Scan`` node ``node`` was left on the host; for a ``GpuScan``, why it takes
    an input from the GPU on the host."""
    if isinstance(node.op, GpuScan):
        return node.op.read_on_host or "the loop's body reads it on the host only"
    slots = _slots(node.op.info)
    if not any(_from_gpu(node.inputs[s.outer]) is not None for s in slots):
        return "no sequence, state or non-sequence of the loop comes from the GPU"
    return _REFUSED.get(node.op, "the loop's GPU inputs cannot live on the GPU inside it (dtype)")


def loop_input_reason(loop, inner_fgraph, var) -> str:
    """Why the loop ``loop`` passes its inner input ``var`` (of its compiled
    ``inner_fgraph``) on the host, which its inner graph copies to the GPU."""
    k = inner_fgraph.inputs.index(var)
    slot = next(s for s in _slots(loop.op.info) if k in s.inner)
    if isinstance(loop.op, GpuScan):
        return f"the loop's {slot.kind} {loop.inputs[slot.outer]} stays on the host (its dtype or type)"
    return f"{slot.kind} of a loop left on the host: {scan_problem(loop)}"


def loop_output_reason(loop, inner_fgraph, var) -> str:
    """Why the loop ``loop`` takes its inner output ``var`` on the host."""
    info = loop.op.info
    k = inner_fgraph.outputs.index(var)
    if info.as_while and k == len(inner_fgraph.outputs) - 1:
        return "a while loop reads its condition on the host at every step"
    if not isinstance(loop.op, GpuScan):
        return f"a result of a loop left on the host: {scan_problem(loop)}"
    return "the loop keeps this result on the host (its dtype or type)"
