"""The call's one wait: :class:`GpuCallEndInserter` puts a :class:`~aesara_bincount_core.gpu.call_end.GpuCallEnd` at the end of a function.

Registered once in ``optdb`` at position 49.6, as ``gpu_call_end`` (tags
``fast_run``, ``bincount``, ``gpu_bincount``, ``cxx_only``):
after the merge (49), which leaves one call status per function, and the
bincount's own copy to the host (49.5), before the in-place rewrites (60,
75), which then see that the end of the call reads every output.

In a function whose GPU Ops check indices or values on the device (a
``GpuCallStatus`` in its graph), or that copies two or more GPU results to
the host, the outputs ``HostFromGpu(g)`` become outputs of one
``GpuCallEnd``, which reads the statuses and copies the results with one
wait; every other output of the function passes through it, so that it
runs last.  A function with one GPU result for the host and no check keeps
its ``HostFromGpu`` (one wait too).  The checks that write a status are
made by the lifting pass only (``gpu_lift``), so a mode that excludes this
pass must exclude ``gpu_lift`` too: excluding ``gpu_bincount`` excludes both.
"""
from aesara.compile import optdb
from aesara.graph.basic import Constant
from aesara.graph.rewriting.basic import GraphRewriter

from aesara_bincount_core.gpu.call_end import GpuCallEnd
from aesara_bincount_core.gpu.call_status import GpuCallStatus
from aesara_bincount_core.gpu.transfer import HostFromGpu

__all__ = ["GpuCallEndInserter", "end_of_call"]


def _unique(seq):
    out = []
    for v in seq:
        if v not in out:
            out.append(v)
    return out


def end_of_call(fgraph) -> bool:
    """Put one ``GpuCallEnd`` at the end of ``fgraph`` where it helps (see the module); whether it did.

    Parameters
    ----------
    fgraph : aesara.graph.fg.FunctionGraph
        The graph of a function (an inner graph has no end of call of its own).

    Returns
    -------
    bool
    """
    if any(isinstance(n.op, GpuCallEnd) for n in fgraph.apply_nodes):
        return False
    statuses = _unique(n.outputs[0] for n in fgraph.apply_nodes if isinstance(n.op, GpuCallStatus))
    outputs = list(fgraph.outputs)
    to_host = _unique(o for o in outputs if o.owner is not None and isinstance(o.owner.op, HostFromGpu))
    if not statuses and len(to_host) < 2:
        return False
    inputs = set(fgraph.inputs)
    keep = _unique(o for o in outputs if o not in to_host and o not in inputs and not isinstance(o, Constant))
    end = GpuCallEnd(len(statuses), len(to_host), len(keep))(
        *statuses, *[h.owner.inputs[0] for h in to_host], *keep, return_list=True
    )
    new = dict(zip(to_host + keep, end))
    for k, o in enumerate(outputs):
        if o in new:
            fgraph.change_node_input("output", k, new[o], reason="gpu_call_end")
    return True


class GpuCallEndInserter(GraphRewriter):
    """The pass of :func:`end_of_call`."""

    def apply(self, fgraph):
        end_of_call(fgraph)


optdb.register(
    "gpu_call_end",
    GpuCallEndInserter(),
    "fast_run",
    "bincount",
    "gpu_bincount",
    "cxx_only",
    position=49.6,
)
