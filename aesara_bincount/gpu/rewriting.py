"""The GPU rewrite: run :class:`~aesara_bincount.Bincount` on the GPU when x lives there.

:func:`local_gpu_bincount` turns ``Bincount(HostFromGpu(gx), n, w)`` (which
:func:`aesara_bincount.rewriting.local_bincount` made out of every form of
``extra_ops.bincount`` and of the scatter-add onto zeros) into
``HostFromGpu(GpuBincount(gx, n, w'))``: GPU-resident weights are used in
place (``HostFromGpu(gw)`` becomes ``gw``), host weights are copied once per
call (``GpuFromHost``).  The output type is unchanged, and the host-side
``Max`` and transfer of ``x`` lose their last client and disappear.
``Assert``\\ s around ``x`` (``assert_nonneg=True``) are kept, on the result.

It is registered once, in ``optdb`` at position 48.5 (after ``specialize``,
where ``local_bincount`` runs, and before the merge at 49 and the in-place
rewrites; Theano's GPU rewrites sat at the same place), with the tags
``fast_run``, ``bincount``, ``gpu_bincount`` and ``cxx_only`` (``GpuBincount`` is a C Op): ``mode.excluding("bincount")``
turns off both rewrites, ``mode.excluding("gpu_bincount")`` keeps the CPU
``Bincount`` (with a transfer of x to the host).
"""
from aesara.compile import optdb
from aesara.graph.rewriting.basic import copy_stack_trace, in2out, node_rewriter
from aesara.raise_op import Assert

from aesara_bincount_core.gpu.transfer import HostFromGpu, gpu_from_host, host_from_gpu
from aesara_bincount_core.gpu.op import GpuBincount
from aesara_bincount_core.op import Bincount

__all__ = ["local_gpu_bincount"]


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


@node_rewriter([Bincount])
def local_gpu_bincount(fgraph, node):
    """Replace ``Bincount(HostFromGpu(gx), ...)`` by ``HostFromGpu(GpuBincount(gx, ...))``."""
    if type(node.op) is not Bincount:
        return False
    found = _gpu_source(node.inputs[0])
    if found is None:
        return False
    gx, asserts = found
    inputs = [gx, node.inputs[1]]
    if len(node.inputs) > 2:
        inputs.append(_on_gpu(node.inputs[2]))
    old = node.outputs[0]
    out = host_from_gpu(GpuBincount(node.op.mode, out_dtype=old.type.dtype)(*inputs))
    for a in asserts:
        out = Assert(a.op.msg)(out, *a.inputs[1:])
    if out.type != old.type:
        out = old.type.filter_variable(out, allow_convert=True)
    copy_stack_trace(old, out)
    return [out]


optdb.register(
    "local_gpu_bincount",
    in2out(local_gpu_bincount),
    "fast_run",
    "bincount",
    "gpu_bincount",
    "cxx_only",
    position=48.5,
)
