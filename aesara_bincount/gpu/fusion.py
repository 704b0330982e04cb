"""The rewrite ``gpu_bincount_fusion``: GPU elementwise x or weights inlined into ``GpuBincount``.

:func:`local_gpu_bincount_fusion` replaces ``GpuBincount(gx, n,
GpuElemwise(op)(*ins))`` (or ``GpuBincount(GpuElemwise(op)(*ins), ...)``,
or both) by :class:`~aesara_bincount_core.gpu.fused.GpuFusedBincount`,
whose histogram kernel computes each weight, or each x, from ``ins`` (the
GPU counterpart of :mod:`aesara_bincount.fusion_rewriting`), so that the
array is never written nor read back.  It runs in ``optdb``'s
``bincount_fusion`` pass (position 49.2,
:data:`aesara_bincount.fusion_rewriting.fusion_db`, after the CPU fusion),
after the lifting pass (48.4, which makes the ``GpuElemwise``) and the GPU
bincount rewrites (48.5-48.52), with the tags ``fast_run``, ``bincount`` and
``gpu_bincount``: ``mode.excluding("bincount_fusion")`` switches off the CPU
and the GPU fusion together, ``mode.excluding("gpu_bincount")`` every GPU
rewrite.
Neighbours: :mod:`.lifting` (which makes the ``GpuElemwise`` nodes),
:mod:`.rewriting` (which makes the ``GpuBincount`` nodes).
"""
from typing import Optional

from aesara.graph.rewriting.basic import in2out, node_rewriter
from aesara.scalar import basic as aes

from aesara_bincount.fusion_rewriting import fusion_db
from aesara_bincount.rewriting import replacement_for
from aesara_bincount_core.gpu import elemwise
from aesara_bincount_core.gpu.elemwise import GpuElemwise
from aesara_bincount_core.gpu.fused import MAX_ARGS, GpuFusedBincount
from aesara_bincount_core.gpu.op import GpuBincount
from aesara_bincount_core.gpu.type import GpuArrayType

__all__ = ["local_gpu_bincount_fusion", "gpu_fusion_problem"]


def gpu_fusion_problem(fgraph, node, v) -> Optional[str]:
    """Why the value ``v`` (``x`` or the weights) of the ``GpuBincount`` ``node``
    is not fused, or None.

    Returns
    -------
    str or None
        The reason: not the one output of a ``GpuElemwise`` of one
        dimension, other clients of ``v`` (the array is needed anyway), an
        input that is neither a GPU array of 0 or 1 dimension nor a host
        scalar, no GPU array input, or a scalar graph that ``GpuElemwise``
        would not take (its own acceptance rule,
        :func:`~aesara_bincount_core.gpu.elemwise.gpu_elemwise_problem`).
    """
    enode = v.owner
    if enode is None or not isinstance(enode.op, GpuElemwise) or len(enode.outputs) != 1:
        return "not a GpuElemwise"
    if v.type.ndim != 1:
        return "not a vector"
    clients = fgraph.clients.get(v, [])
    if len(clients) != 1 or clients[0][0] is not node:
        return "the GpuElemwise has other clients"
    for i in enode.inputs:
        if isinstance(i.type, GpuArrayType) and i.type.ndim > 1:
            return "an input has more than one dimension"
        if not isinstance(i.type, GpuArrayType) and not elemwise._is_host_scalar(i):
            return "an input is a host array"
    if not any(isinstance(i.type, GpuArrayType) for i in enode.inputs):
        return "no GPU array input"
    return elemwise._problem(enode.op.scalar_op, enode.inputs, enode.outputs)


def _absorb(fgraph, node, v):
    """``(Composite, inputs)`` that compute ``v`` inline, or None."""
    if v is None or gpu_fusion_problem(fgraph, node, v) is not None:
        return None
    enode = v.owner
    scalar_op = enode.op.scalar_op
    if not isinstance(scalar_op, aes.Composite):
        ins = [aes.get_scalar_type(i.type.dtype)() for i in enode.inputs]
        scalar_op = aes.Composite(ins, [scalar_op(*ins)])
    return scalar_op, list(enode.inputs)


@node_rewriter([GpuBincount])
def local_gpu_bincount_fusion(fgraph, node):
    """Replace ``GpuBincount(GpuElemwise(...), n[, GpuElemwise(...)])`` by ``GpuFusedBincount``.

    ``x``, the weights or both are absorbed when :func:`gpu_fusion_problem`
    accepts them, as long as all the inputs fit in ``BC_CUDA_FUSED_MAX_ARGS``.
    Only a ``GpuBincount`` as such (not an already fused one); the
    replacement has the type of the replaced output.
    """
    if type(node.op) is not GpuBincount:
        return False
    x, n = node.inputs[:2]
    w = node.inputs[2] if len(node.inputs) > 2 else None
    x_part, w_part = _absorb(fgraph, node, x), _absorb(fgraph, node, w)
    if x_part is None and w_part is None:
        return False
    x_op, x_ins = x_part if x_part is not None else (None, [x])
    w_op, w_ins = w_part if w_part is not None else (None, [w] if w is not None else [])
    if len(x_ins) + len(w_ins) > MAX_ARGS:
        return False
    old = node.outputs[0]
    op = GpuFusedBincount(node.op.mode, old.type.dtype, x_op=x_op, w_op=w_op, weighted=w is not None,
                          deterministic=node.op.deterministic, checked=node.op.checked)
    out = op(*x_ins, n, *w_ins)
    return replacement_for(old, out)


fusion_db.register(
    "gpu_bincount_fusion",
    in2out(local_gpu_bincount_fusion, name="gpu_bincount_fusion"),
    "fast_run",
    "bincount",
    "gpu_bincount",
    position=1,
)
