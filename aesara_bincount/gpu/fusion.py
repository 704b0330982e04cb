"""The rewrite ``gpu_bincount_fusion``: a GPU elementwise weights graph inlined into ``GpuBincount``.

:func:`local_gpu_bincount_fusion` replaces ``GpuBincount(gx, n,
GpuElemwise(op)(*ins))`` by :class:`~aesara_bincount_core.gpu.fused.GpuFusedBincount`,
whose histogram kernel computes each weight from ``ins`` (the GPU
counterpart of :mod:`aesara_bincount.fusion_rewriting`), so that the weights
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

from aesara.graph.rewriting.basic import copy_stack_trace, in2out, node_rewriter
from aesara.scalar import basic as aes

from aesara_bincount.fusion_rewriting import fusion_db
from aesara_bincount_core.gpu import elemwise
from aesara_bincount_core.gpu.elemwise import GpuElemwise
from aesara_bincount_core.gpu.fused import MAX_ARGS, GpuFusedBincount
from aesara_bincount_core.gpu.op import GpuBincount
from aesara_bincount_core.gpu.type import GpuArrayType

__all__ = ["local_gpu_bincount_fusion", "gpu_fusion_problem"]


def gpu_fusion_problem(fgraph, node) -> Optional[str]:
    """Why the weights of the ``GpuBincount`` ``node`` are not fused, or None.

    Returns
    -------
    str or None
        The reason: no weights, weights that are not the one output of a
        ``GpuElemwise`` of one dimension, other clients of the weights (the
        array is needed anyway), an input that is neither a GPU array of 0
        or 1 dimension nor a host scalar, more than ``BC_CUDA_FUSED_MAX_ARGS``
        inputs, or a scalar graph that ``GpuElemwise`` would not take (its
        own acceptance rule, :func:`~aesara_bincount_core.gpu.elemwise.gpu_elemwise_problem`).
    """
    if len(node.inputs) < 3:
        return "no weights"
    w = node.inputs[2]
    enode = w.owner
    if enode is None or not isinstance(enode.op, GpuElemwise) or len(enode.outputs) != 1:
        return "the weights are not a GpuElemwise"
    if w.type.ndim != 1:
        return "the weights are not a vector"
    clients = fgraph.clients.get(w, [])
    if len(clients) != 1 or clients[0][0] is not node:
        return "the GpuElemwise has other clients"
    for v in enode.inputs:
        if isinstance(v.type, GpuArrayType) and v.type.ndim > 1:
            return "an input of the weights has more than one dimension"
        if not isinstance(v.type, GpuArrayType) and not elemwise._is_host_scalar(v):
            return "an input of the weights is a host array"
    if len(enode.inputs) > MAX_ARGS:
        return f"more than {MAX_ARGS} inputs"
    return elemwise._problem(enode.op.scalar_op, enode.inputs, enode.outputs)


def _composite(scalar_op, inputs) -> aes.Composite:
    """``scalar_op`` as a Composite of one output over inputs of these dtypes."""
    if isinstance(scalar_op, aes.Composite):
        return scalar_op
    ins = [aes.get_scalar_type(v.type.dtype)() for v in inputs]
    return aes.Composite(ins, [scalar_op(*ins)])


@node_rewriter([GpuBincount])
def local_gpu_bincount_fusion(fgraph, node):
    """Replace ``GpuBincount(gx, n, GpuElemwise(op)(*ins))`` by ``GpuFusedBincount``.

    Only a ``GpuBincount`` as such (not an already fused one) with weights
    that :func:`gpu_fusion_problem` accepts; the replacement has the type of
    the replaced output.
    """
    if type(node.op) is not GpuBincount or gpu_fusion_problem(fgraph, node) is not None:
        return False
    enode = node.inputs[2].owner
    old = node.outputs[0]
    op = GpuFusedBincount(node.op.mode, old.type.dtype, _composite(enode.op.scalar_op, enode.inputs))
    out = op(node.inputs[0], node.inputs[1], *enode.inputs)
    if out.type != old.type:
        out = old.type.filter_variable(out, allow_convert=True)
    copy_stack_trace(old, out)
    return [out]


fusion_db.register(
    "gpu_bincount_fusion",
    in2out(local_gpu_bincount_fusion, name="gpu_bincount_fusion"),
    "fast_run",
    "bincount",
    "gpu_bincount",
    position=1,
)
