"""The rewrite ``multi_index_one_pass``: a multi-index scatter-add left on the host runs in one pass.

:mod:`aesara_bincount.multi_index` writes ``inc_subtensor(base[i_0, ...,
i_{K-1}], y)`` in ``specialize`` as ``LinearIndex`` (the checked flat rows)
and ``ScatterAdd`` of those rows, a form that the GPU passes can move to the
GPU (the lifting pass ``gpu_lift``, position 48.4, and the passes up to
48.52).  :func:`local_multi_index_one_pass`, in a pass of its own at position
48.6 (after them; before Aesara's elementwise fusion, 49, and the in-place
rewrites, 60), takes the pairs that stayed on the host::

    ScatterAdd(rows, y', LinearIndex(dims, i_0, ..., i_{K-1})[0])
    -> MultiIndexScatterAdd(rows, y, dims, i_0, ..., i_{K-1})

where ``y'`` is ``y`` as ``ScatterAdd`` takes it (``(N, *rest)``, ``N =
prod(B)``) and ``y`` the same increments over ``(*B, *rest)``: for index
arrays of one dimension they are the same; for broadcast index arrays of
two or more, ``y'`` is the ``broadcast_to(y, (*B, *rest)).reshape(N, *rest)``
that :func:`~aesara_bincount.multi_index.rows_of_multi_index` builds, and
the ``broadcast_to`` and reshape (a copy when ``y`` broadcasts) are dropped.
The flat rows are then folded inside the scatter's loop, a block at a time,
never written to an array (see
:class:`~aesara_bincount_core.multi_scatter_add.MultiIndexScatterAdd`); the
checks, errors and results are the pair's.  ``LinearIndex`` stays where
its rows have another client (the GPU gather of
:mod:`aesara_bincount.gpu.multi_gather`, a second scatter), and so does the
pair.  The bincount form, ``Bincount(flat, n, w)`` in the scatter-add mode
with ``n`` the product of ``dims`` (a constant, or ``prod(dims)``), is taken
too, for one-dimensional index arrays.

Tags ``fast_run``, ``bincount``, ``cxx_only``; ``mode.excluding(
"multi_index_one_pass")`` keeps the pair.  ``local_inplace_scatter_add``
(position 60) makes the Op add into its base where Aesara allows it.
"""
from typing import Optional

import numpy as np
from aesara.compile import optdb
from aesara.graph.basic import Constant, Variable
from aesara.graph.rewriting.basic import in2out, node_rewriter
from aesara.tensor.basic import as_tensor_variable, cast, constant
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.extra_ops import BroadcastTo
from aesara.tensor.math import Prod
from aesara.tensor.shape import Reshape

from aesara_bincount.rewriting import _constant_value, replacement_for
from aesara_bincount_core.linear_index import LinearIndex
from aesara_bincount_core.multi_scatter_add import MultiIndexScatterAdd
from aesara_bincount_core.op import Bincount
from aesara_bincount_core.scatter_add import ScatterAdd

__all__ = ["local_multi_index_one_pass"]


def _flat_rows(fgraph, node, v: Variable):
    """The ``LinearIndex`` node whose flat rows ``v`` are, read by ``node`` only; else None."""
    owner = v.owner
    if owner is None or type(owner.op) is not LinearIndex or v is not owner.outputs[0]:
        return None
    clients = fgraph.clients.get(v, [])
    if len(clients) != 1 or clients[0][0] is not node:
        return None
    return owner


def _increments_over_b(inc: Variable, bnd: int, rest_nd: int) -> Optional[Variable]:
    """``inc`` (broadcastable to ``(N, *rest)``) as increments over ``(*B, *rest)``, or None."""
    if inc.type.ndim <= rest_nd or bnd == 1:
        return inc  # one value per row, or the rows of B themselves
    if inc.type.shape[0] == 1:
        return inc  # one row for every position: (1, *rest) broadcasts alike
    # rows_of_multi_index's broadcast_to(y, (*B, *rest)).reshape(N, *rest).
    if inc.owner is None or not isinstance(inc.owner.op, Reshape):
        return None
    bcast = inc.owner.inputs[0]
    if bcast.owner is None or not isinstance(bcast.owner.op, BroadcastTo):
        return None
    y, *shape = bcast.owner.inputs
    if len(shape) != bnd + rest_nd or y.type.ndim > len(shape) or y.type.dtype != inc.type.dtype:
        return None
    return y


def _is_prod_of(n: Variable, dims: Variable) -> bool:
    """Is the length ``n`` the product of the vector ``dims``?"""
    while n.owner is not None and isinstance(n.owner.op, Elemwise) and type(n.owner.op.scalar_op).__name__ == "Cast":
        n = n.owner.inputs[0]
    if n.owner is not None and isinstance(n.owner.op, Prod) and n.owner.inputs[0] is dims:
        return n.owner.op.axis is None or tuple(n.owner.op.axis) == (0,)
    value = _constant_value(n)
    if value is None or not isinstance(dims, Constant):
        return False
    return int(value) == int(np.prod(np.asarray(dims.data), dtype=np.int64))


@node_rewriter([ScatterAdd, Bincount])
def local_multi_index_one_pass(fgraph, node):
    """``ScatterAdd`` (or ``Bincount``) of ``LinearIndex`` rows as ``MultiIndexScatterAdd`` (see the module notes)."""
    op = node.op
    if type(op) is ScatterAdd and not op.inplace:
        rows, inc, flat = node.inputs
        onto = op.onto
    elif type(op) is Bincount and op.mode == "scatter":
        flat, n = node.inputs[:2]
        onto = "zeros"
    else:
        return False
    lnode = _flat_rows(fgraph, node, flat)
    if lnode is None:
        return False
    dims, *indices = lnode.inputs
    bnd = lnode.outputs[1].type.shape[0]
    out = node.outputs[0]
    if type(op) is Bincount:
        if bnd != 1 or not _is_prod_of(n, dims):
            return False
        w = node.inputs[2] if len(node.inputs) > 2 else None
        if w is None:
            inc = constant(np.ones((), dtype=out.type.dtype))
        elif w.type.ndim == 0 or w.type.shape == (1,):
            inc = w.reshape((), ndim=0) if w.type.ndim else w
        else:
            inc = w
        n64 = n if n.type.dtype == "int64" else cast(n, "int64")
        rows = as_tensor_variable([n64])
    else:
        inc = _increments_over_b(inc, bnd, out.type.ndim - 1)
        if inc is None:
            return False
    new = MultiIndexScatterAdd(onto, openmp=op.openmp)(rows, inc, dims, *indices)
    return replacement_for(out, new)


optdb.register(
    "multi_index_one_pass",
    in2out(local_multi_index_one_pass, name="multi_index_one_pass"),
    "fast_run",
    "bincount",
    "cxx_only",
    position=48.6,
)
