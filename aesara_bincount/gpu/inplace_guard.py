"""Keep Aesara's in-place ``Elemwise`` off host copies of GPU data that may broadcast.

Aesara 2.9.4 broadcasts an ``Elemwise`` input whose length turns out to be 1
only when the function runs, but its in-place rewrite
(``inplace_elemwise_opt``, ``optdb`` position 75) may still choose that
input's buffer for the output: ``gy // gx`` with ``gy`` of length 1 and
``gx`` of length 5 then returns one wrong value instead of five.  Aesara
never overwrites a function input or a shared variable, so on the host the
fault needs an intermediate array (``at.sort(y) // x``).  In a graph of GPU
data, every node that stays on the host (integer ``//`` by a variable,
float16 arithmetic, ``mode.excluding("gpu_lift")``) reads such an
intermediate: the ``HostFromGpu`` copy.  So this package, which put the copy
there, keeps the rewrite off it.

:class:`HostCopyGuard` runs just before the in-place rewrite (position
74.9, tags ``fast_run`` and ``inplace``: it runs whenever the in-place
rewrite does, whichever of this package's rewrites are excluded).  It marks
as protected (Aesara's ``Supervisor`` feature, the mechanism that keeps the
function's inputs and outputs intact) each ``Elemwise`` input that is a
``HostFromGpu`` output, or a view of one (``DimShuffle``, ``Subtensor``,
``Reshape``: any Op whose ``view_map`` says so, through any number of
them), and that
:func:`may_broadcast_at_run_time`.  Such an input then costs one output
allocation per call; the other in-place choices are untouched.
"""
from aesara.compile import optdb
from aesara.compile.function.types import Supervisor
from aesara.graph.rewriting.basic import GraphRewriter
from aesara.tensor.elemwise import DimShuffle, Elemwise

from aesara_bincount_core.gpu.transfer import HostFromGpu

__all__ = ["HostCopyGuard", "may_broadcast_at_run_time"]


def may_broadcast_at_run_time(var, node):
    """Whether input ``var`` of Elemwise ``node`` could be broadcast only when it runs.

    Parameters
    ----------
    var : TensorVariable
        One of ``node.inputs``.
    node : Apply
        An ``Elemwise`` node.

    Returns
    -------
    bool
        True when some dimension of ``var`` has no static length while
        another input is not broadcastable along it: ``var`` may then be
        of length 1 there and the output longer.  A dimension of static
        length (1 or more) is never broadcast at run time by surprise.
    """
    for d, length in enumerate(var.type.shape):
        if length is not None:
            continue
        for other in node.inputs:
            if other is var or other.type.ndim != var.type.ndim:
                continue
            if other.type.shape[d] != 1:
                return True
    return False


def _is_host_copy(var):
    """Whether ``var`` is ``HostFromGpu(g)`` or a view of it, through any number
    of views (``DimShuffle``, ``Subtensor``, ``Reshape``, ...: an output that
    its Op's ``view_map`` maps to an input)."""
    while var.owner is not None and not isinstance(var.owner.op, HostFromGpu):
        node = var.owner
        viewed = getattr(node.op, "view_map", {}).get(node.outputs.index(var))
        if not viewed and isinstance(node.op, DimShuffle):
            viewed = [0]  # a DimShuffle that is not marked in place is still a view
        if not viewed:
            return False
        var = node.inputs[viewed[0]]
    return var.owner is not None


class HostCopyGuard(GraphRewriter):
    """Protect host copies of GPU data that an ``Elemwise`` may broadcast (see the module)."""

    def add_requirements(self, fgraph):
        fgraph.attach_feature(Supervisor([]))

    def apply(self, fgraph):
        risky = {
            inp
            for node in fgraph.apply_nodes
            if isinstance(node.op, Elemwise) and len(node.inputs) > 1
            for inp in node.inputs
            if _is_host_copy(inp) and may_broadcast_at_run_time(inp, node)
        }
        # A second Supervisor adds its variables to the first one's set
        # (Supervisor.on_attach), which the in-place rewrite reads.
        if risky:
            fgraph.attach_feature(Supervisor(risky))


optdb.register("bincount_host_copy_guard", HostCopyGuard(), "fast_run", "inplace", position=74.9)
