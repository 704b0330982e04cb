"""``bincount_fusion`` through a flatten: ``bincount((a + b).flatten())`` fuses too.

:func:`local_bincount_flatten_elemwise` runs in a pass of its own at
position 48.3, before the GPU lifting pass (48.4: the lifted graph is then
``GpuBincount(GpuElemwise(GpuReshape(g), ...))``, which the GPU fusion
takes), and again in the ``bincount_fusion`` pass
(:data:`~aesara_bincount.fusion_rewriting.fusion_db`, position 49.2), just
before :func:`~aesara_bincount.fusion_rewriting.local_bincount_fusion`
(tags ``fast_run``, ``bincount``; ``cxx_only`` for the first).  It
moves a ``Reshape`` to one dimension (``flatten``, ``reshape(-1)``) of an
``Elemwise`` below it, onto the Elemwise's inputs::

    Bincount(Reshape{1}(Elemwise(a, b, s)), n, w)
    -> Bincount(Elemwise(Reshape{1}(a), Reshape{1}(b), s'), n, w)

which is the same array when ``a`` and ``b`` have the Elemwise's shape.
Aesara's Elemwise also broadcasts an axis that is 1 when the function runs
(a ``(5, 1)`` matrix with a ``(5, 6)`` one), which flattening each input
would not: so the flatten moves only when the static shapes of ``a`` and
``b`` are known and equal (otherwise ``bincount_fusion`` takes the
Elemwise with its dimensions on the CPU; on the GPU the Elemwise and the
bincount stay two kernels); and ``s`` has one element (a scalar,
``theta[None, None]``; it becomes a ``(1,)`` vector).  The flatten of a
C-contiguous input is a view, so ``local_bincount_fusion`` then computes
the values in the histogram pass and the flattened array is never written.
An input that is itself an Elemwise read only there is taken the same way
(``(A * 3 + B).flatten()`` before Aesara fuses the two).  A ``DimShuffle``
of an Elemwise needs nothing here: Aesara's
``local_dimshuffle_lift`` (canonicalize) already moves it onto the inputs.

Inputs that broadcast along some axes only (``base[:, None] + idx``) are
left alone: flattening them would write the broadcast array, no saving
(``bincount_fusion`` then fuses the flatten of such an Elemwise as it is,
its inputs keeping their dimensions).
The same for an Elemwise or a Reshape that has other clients.  The weights
are taken the same way as ``x``.
"""
import numpy as np
from aesara.compile import optdb
from aesara.graph.basic import Constant
from aesara.graph.rewriting.basic import in2out, node_rewriter
from aesara.tensor.basic import constant
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.shape import Reshape

from aesara_bincount.fusion_rewriting import _only_client, fusion_db
from aesara_bincount.rewriting import replacement_for
from aesara_bincount_core.op import Bincount

__all__ = ["local_bincount_flatten_elemwise"]



def _flatten_of(fgraph, e, client, shape, leaves, depth: int = 8):
    """``Reshape{1}(e, shape)``, moved onto the inputs of ``e`` when ``e`` is
    an Elemwise read by ``client`` only, recursively; None when an input
    broadcasts along some axes only.  The arrays it reshapes are appended to
    ``leaves``; with ``shape`` None nothing is built (True is returned)."""
    enode = e.owner
    if (
        depth == 0
        or enode is None
        or not isinstance(enode.op, Elemwise)
        or len(enode.outputs) != 1
        or enode.op.inplace_pattern
        or not _only_client(fgraph, e, client)
    ):
        leaves.append(e)
        return True if shape is None else Reshape(1)(e, shape)
    args = []
    for i in enode.inputs:
        if all(i.type.broadcastable):
            one = constant(np.reshape(i.data, (1,))) if isinstance(i, Constant) else i.reshape((1,), ndim=1)
            args.append(one)
        elif not any(i.type.broadcastable):
            inner = _flatten_of(fgraph, i, enode, shape, leaves, depth - 1)
            if inner is None:
                return None
            args.append(inner)
        else:
            return None  # broadcast along some axes only
    if shape is None:
        return True
    out = enode.op(*args)
    return out if out.type.dtype == e.type.dtype else None


def _flattened(fgraph, node, v):
    """``v`` with its ``Reshape{1}`` of an Elemwise moved onto the inputs, else None."""
    if v.owner is None or not isinstance(v.owner.op, Reshape) or v.type.ndim != 1:
        return None
    if not _only_client(fgraph, v, node):
        return None
    e, shape = v.owner.inputs
    if e.owner is None or not isinstance(e.owner.op, Elemwise) or e.type.ndim < 2:
        return None
    leaves = []
    if _flatten_of(fgraph, e, v.owner, None, leaves) is None or leaves == [e]:
        return None
    # Arrays of several dimensions are paired element by element only when
    # their static shapes say they are the same: Aesara's Elemwise broadcasts
    # an axis that is 1 when the function runs, which a flatten of each would
    # not (bincount_fusion then takes the Elemwise with its dimensions).
    # Aesara's BroadcastTo cannot help: its C code crashes on shapes that do
    # not broadcast.
    if len(leaves) > 1 and not _same_static_shape(leaves):
        return None
    return _flatten_of(fgraph, e, v.owner, shape, [])


def _same_static_shape(arrays) -> bool:
    """Whether the static shapes of ``arrays`` are all known and equal."""
    shapes = {a.type.shape for a in arrays}
    return len(shapes) == 1 and None not in next(iter(shapes))


@node_rewriter([Bincount])
def local_bincount_flatten_elemwise(fgraph, node):
    """Move a flatten of an elementwise ``x`` or weights of ``Bincount`` onto its inputs (see the module notes)."""
    if type(node.op) is not Bincount:
        return False
    inputs = list(node.inputs)
    changed = False
    for k in (0, 2):
        if k < len(inputs):
            new = _flattened(fgraph, node, inputs[k])
            if new is not None:
                inputs[k] = new
                changed = True
    if not changed:
        return False
    return replacement_for(node.outputs[0], node.op(*inputs))


# Also before the GPU lifting pass (48.4), so that the lifted graph is
# GpuBincount(GpuElemwise(GpuReshape(g), ...)), which the GPU fusion takes.
optdb.register(
    "bincount_flatten_elemwise_before_lift",
    in2out(local_bincount_flatten_elemwise, name="bincount_flatten_elemwise_before_lift"),
    "fast_run",
    "bincount",
    "cxx_only",
    position=48.3,
)
fusion_db.register(
    "local_bincount_flatten_elemwise",
    in2out(local_bincount_flatten_elemwise, name="bincount_flatten_elemwise"),
    "fast_run",
    "bincount",
    position=-1,
)
