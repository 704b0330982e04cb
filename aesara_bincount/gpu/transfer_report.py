"""Where a compiled function copies between host and GPU, and why: :func:`report`, :func:`report_file`.

With its shared variables on the GPU (``aesara_bincount.gpu.shared``), a
function whose Ops are all in the GPU table
(:mod:`aesara_bincount_core.gpu.table`), or are ``Elemwise``, bincount or
scatter-add nodes that the GPU takes, has no transfer inside: only the
copies of the user's host inputs to the GPU and of its outputs to the host.
Each node left on the host costs one copy of each GPU input to the host and
one copy of its result back.  :func:`report` lists those copies with the
node that caused each and the reason it stayed on the host
(:func:`why_on_host`: no GPU entry for its Op, its entry refused it and
why, it computes from host values only...), then the GPU nodes that wait
for the device inside a call by nature (:func:`inner_waits`: a bincount's
length, the count of a boolean mask);
``python -m aesara_bincount --gpu-report FILE.py`` runs a script and reports
on every function it compiles.
"""
import dataclasses
import runpy
import sys
from typing import List, Optional, TextIO

from aesara.compile.function.types import Function
from aesara.scan.op import Scan
from aesara.tensor.basic import Nonzero
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.subtensor import AdvancedSubtensor

from aesara_bincount.gpu.scan import loop_input_reason, loop_output_reason, scan_problem
from aesara_bincount_core.gpu.gather import GpuAdvancedSubtensor1
from aesara_bincount_core.gpu.op import GpuBincount
from aesara_bincount_core.gpu.scatter_add import GpuScatterAdd
from aesara_bincount_core.gpu.scatter_set import GpuScatterSet
from aesara_bincount_core.gpu.table import gpu_entry, gpu_problem
from aesara_bincount_core.gpu.transfer import GpuFromHost, HostFromGpu
from aesara_bincount_core.gpu.type import GpuArrayType
from aesara_bincount_core.op import Bincount
from aesara_bincount_core.scatter_add import ScatterAdd
from aesara_bincount_core.scatter_set import ScatterSet
from aesara_bincount_core.semantics import OUT_DTYPES, SET_DTYPES

__all__ = ["Transfer", "Wait", "inner_transfers", "inner_waits", "report", "report_file", "why_on_host"]


def _from_gpu(v) -> bool:
    return v.owner is not None and isinstance(v.owner.op, HostFromGpu)


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One copy inside a function.

    Attributes
    ----------
    direction : str
        ``"GPU -> host"`` or ``"host -> GPU"``.
    node : aesara.graph.basic.Apply
        The ``HostFromGpu`` or ``GpuFromHost`` node.
    cause : aesara.graph.basic.Apply
        The host node that reads the copy (GPU -> host), or, for a copy
        back to the GPU, the host node above it that took its data off the
        GPU (else the node that makes the value copied).
    reason : str
        Why ``cause`` runs on the host.
    loop : aesara.graph.basic.Apply or None
        The ``Scan`` (or ``GpuScan``) node whose inner graph holds the copy,
        which then happens at every step of the loop; None for a copy of the
        function's own graph (issue 39).
    """

    direction: str
    node: object
    cause: object
    reason: str
    loop: object = None

    def __str__(self):
        where = "" if self.loop is None else f"inside {self.loop.op}, at every step: "
        return f"{where}{self.direction} for {self.cause.op}: {self.reason}"


def _own_rewrite_problem(node) -> Optional[str]:
    """Why a node of an Op with a GPU rewrite of its own (not the table) stayed, or None."""
    op = node.op
    if type(op) not in (Bincount, ScatterAdd, ScatterSet):
        return None
    dtype = node.outputs[0].type.dtype
    allowed = SET_DTYPES if type(op) is ScatterSet else OUT_DTYPES
    if dtype not in allowed:
        return f"dtype {dtype} (the GPU Op takes {', '.join(allowed)})"
    if type(op) is ScatterSet:
        return "its base is on the host (the scatter-set of rows moves with its base)"
    return "none of its arrays is on the GPU"


def why_on_host(node, fgraph=None) -> str:
    """The reason the host node ``node`` was not moved to the GPU.

    Parameters
    ----------
    node : aesara.graph.basic.Apply
    fgraph : aesara.graph.fg.FunctionGraph, optional
        The graph of ``node``, to tell a node whose result the host also reads.

    Returns
    -------
    str
        ``"no GPU entry for X"`` (an Op with no GPU implementation: the one
        to write); ``"X refused: ..."`` (its GPU implementation does not take
        this node: a dtype such as float16, a case, and why);
        ``"X moves with its input k, which is on the host"``; ``"computed
        from host values only"``, for a node that reads no GPU value (its
        result goes to the GPU where it is made); ``"its result is also read
        on the host"``.
    """
    name = type(node.op).__name__
    if isinstance(node.op, Scan):  # issue 39
        return scan_problem(node)
    if type(node.op) is Elemwise:
        try:
            from aesara_bincount_core.gpu.elemwise import gpu_elemwise_problem
        except ImportError:  # pragma: no cover - depends on the branch
            return "no GpuElemwise in this build"
        problem = gpu_elemwise_problem(node)
    elif type(node.op) in (Bincount, ScatterAdd, ScatterSet):
        problem = _own_rewrite_problem(node)
    else:
        entry = gpu_entry(node.op)
        if entry is None:
            return f"no GPU entry for {name}"
        problem = gpu_problem(node)
        if problem is None and entry.trigger is not None:
            trigger = [k for k in entry.trigger if k < len(node.inputs)]
            if trigger and not any(_from_gpu(node.inputs[k]) for k in trigger):
                return f"{name} moves with its input {trigger[0]}, which is on the host"
    if problem:
        return f"{name} refused: {problem}"
    if not any(_from_gpu(v) for v in node.inputs):
        if fgraph is not None and any(
            c == "output" or not isinstance(c.op, GpuFromHost)
            for out in node.outputs for c, _ in fgraph.clients.get(out, [])
        ):  # fmt: skip
            return "its result is also read on the host"
        return "computed from host values only"
    return "its GPU implementation was not reached by the lifting (please report it)"


def _left_the_gpu(node):
    """The host node at or above ``node`` (through host nodes) that reads a GPU value, or None."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if any(v.owner is not None and isinstance(v.owner.op, HostFromGpu) for v in n.inputs):
            return n
        todo += [v.owner for v in n.inputs if v.owner is not None and not isinstance(v.owner.op, GpuFromHost)]
    return None


def _is_function_copy(fgraph, client) -> bool:
    return client == "output" or type(client.op).__name__ == "DeepCopyOp"


def inner_transfers(f: Function) -> List[Transfer]:
    """The transfers inside the compiled function ``f``, in the order they run.

    A ``GpuFromHost`` of a graph input (the user's host argument) and a
    ``HostFromGpu`` whose result only goes to the function's outputs are
    the user's copies, not listed.  The copies inside the compiled inner
    graph of each ``Scan`` follow those of the graph that holds it
    (``Transfer.loop`` names the scan): there, a slice, state or
    non-sequence copied to the GPU and a result copied to the host are
    copies of every step.

    Parameters
    ----------
    f : aesara.compile.function.types.Function

    Returns
    -------
    list of Transfer
    """
    return _graph_transfers(f.maker.fgraph, None)


def _graph_transfers(fgraph, loop) -> List[Transfer]:
    """The transfers of ``fgraph``, a function's graph (``loop`` None) or the
    compiled inner graph of the scan node ``loop``, then those of its loops."""
    found = []
    for node in fgraph.toposort():
        if isinstance(node.op, HostFromGpu):
            for client, _ in fgraph.clients[node.outputs[0]]:
                if loop is not None and _is_function_copy(fgraph, client):  # issue 39: each step's
                    out = node.outputs[0] if client == "output" else client.outputs[0]
                    reason = loop_output_reason(loop, fgraph, out)
                    found.append(Transfer("GPU -> host", node, loop, reason, loop))
                elif not _is_function_copy(fgraph, client):
                    found.append(Transfer("GPU -> host", node, client, why_on_host(client, fgraph), loop))
        elif isinstance(node.op, GpuFromHost) and node.inputs[0].owner is None and loop is not None:
            # issue 39: a slice, state or non-sequence that the loop passes on the host
            reason = loop_input_reason(loop, fgraph, node.inputs[0])
            found.append(Transfer("host -> GPU", node, loop, reason, loop))
        elif isinstance(node.op, GpuFromHost) and node.inputs[0].owner is not None:
            # The node that took the data off the GPU caused the copy back.
            producer = node.inputs[0].owner
            cause = _left_the_gpu(producer) or producer
            reason = why_on_host(cause, fgraph)
            if cause is not producer:
                reason += f" (its result comes back through {producer.op} on the host)"
            found.append(Transfer("host -> GPU", node, cause, reason, loop))
    for node in fgraph.toposort():
        if isinstance(node.op, Scan):  # issue 39: the copies inside the loops
            found += _graph_transfers(node.op.fn.maker.fgraph, node)
    return found


@dataclasses.dataclass(frozen=True)
class Wait:
    """A GPU node that waits for the device inside a call (issue 39), by nature.

    Attributes
    ----------
    node : aesara.graph.basic.Apply
    reason : str
        What it reads on the host, and why.
    loop : aesara.graph.basic.Apply or None
        The loop whose inner graph holds it (a wait at every step), or None.
    """

    node: object
    reason: str
    loop: object = None

    def __str__(self):
        where = "" if self.loop is None else f"inside {self.loop.op}, at every step: "
        return f"{where}{self.node.op} waits: {self.reason}"


def why_it_waits(node) -> Optional[str]:
    """What the GPU node ``node`` reads back on the host inside a call, or None.

    Parameters
    ----------
    node : aesara.graph.basic.Apply

    Returns
    -------
    str or None
        The reason of the wait: a length that depends on the data (a
        bincount's ``max(x) + 1``, the count of non-zeros, of a boolean
        mask), or an Op's own index check read back (an Op made outside the
        lifting pass, which checks into the call's status instead).
    """
    op = node.op
    if isinstance(op, GpuBincount):
        if op.mode == "bincount":
            return "its length is max(x) + 1, read on the host (a count's length depends on the data)"
        if op.checked:
            return None
        computed = " (its indices are computed inside its kernel)" if getattr(op, "x_op", None) else ""
        return "it reads its own index check on the host" + computed
    if isinstance(op, (GpuAdvancedSubtensor1, GpuScatterAdd, GpuScatterSet)):
        checked = getattr(op, "checked", False) or getattr(op, "call_status", False)
        return None if checked else "it reads its own index check on the host"
    host_op = getattr(op, "host_op", None)
    if isinstance(host_op, Nonzero):
        return "the length of its result is the count of non-zeros, read on the host"
    if isinstance(host_op, AdvancedSubtensor) and any(
        isinstance(v.type, GpuArrayType) and v.type.dtype == "bool" and v.type.ndim > 0 for v in node.inputs
    ):
        return "CuPy reads the count of its boolean mask on the host (the length of the result)"
    return None


def inner_waits(f: Function) -> List[Wait]:
    """The GPU nodes of ``f`` (and of its loops) that wait inside a call, by nature.

    Besides the one wait of a call (``GpuCallEnd``: the results for the host
    and the call's status), a node waits when what it makes depends on its
    data (:func:`why_it_waits`); the copies around host nodes are
    :func:`inner_transfers`'.

    Parameters
    ----------
    f : aesara.compile.function.types.Function

    Returns
    -------
    list of Wait
    """
    return _graph_waits(f.maker.fgraph, None)


def _graph_waits(fgraph, loop) -> List[Wait]:
    found = [Wait(n, r, loop) for n in fgraph.toposort() for r in [why_it_waits(n)] if r is not None]
    for node in fgraph.toposort():
        if isinstance(node.op, Scan):
            found += _graph_waits(node.op.fn.maker.fgraph, node)
    return found


def report(f: Function, file: Optional[TextIO] = None) -> List[Transfer]:
    """Print the transfers inside ``f`` and the Op that caused each; return them.

    The GPU nodes that wait inside a call by nature (:func:`inner_waits`) are
    printed after them.

    Parameters
    ----------
    f : aesara.compile.function.types.Function
    file : file-like, optional
        Where to print (default ``sys.stdout``).

    Returns
    -------
    list of Transfer
        As :func:`inner_transfers` gives them.
    """
    out = file or sys.stdout
    found = inner_transfers(f)
    name = getattr(f, "name", None) or "function"
    print(f"{name}: {len(found)} transfer(s) between host and GPU inside", file=out)
    for t in found:
        print(f"  {t}", file=out)
    waits = inner_waits(f)
    if waits:
        print(f"{name}: {len(waits)} node(s) that wait for the GPU inside, besides the call's end", file=out)
        for w in waits:
            print(f"  {w}", file=out)
    return found


def report_file(path: str, file: Optional[TextIO] = None) -> List[List[Transfer]]:
    """Run the script ``path`` and :func:`report` every Aesara function it compiles.

    Parameters
    ----------
    path : str
        A Python file, run as ``__main__`` (``runpy.run_path``).
    file : file-like, optional

    Returns
    -------
    list of list of Transfer
        One list per function, in the order they were compiled.

    Raises
    ------
    Whatever the script raises.
    """
    compiled = []
    original = Function.__init__

    def recording(self, *args, **kwargs):
        original(self, *args, **kwargs)
        compiled.append(self)

    Function.__init__ = recording
    try:
        runpy.run_path(path, run_name="__main__")
    finally:
        Function.__init__ = original
    return [report(f, file=file) for f in compiled]
