"""The multi-index gather ``W[rows, cols]`` of GPU data runs on the GPU.

:func:`local_gpu_multi_index_gather`, a pass of its own at position 48.39
(just before the lifting pass ``gpu_lift``, 48.4; tags ``fast_run``,
``bincount``, ``gpu_bincount``, ``cxx_only``), takes Aesara's
``AdvancedSubtensor`` with two or more integer index arrays on the leading
axes, then only full slices, of an array that comes from the GPU
(``HostFromGpu``), and writes it as a gather of rows::

    flat, bshape = LinearIndex()(W.shape[:K], rows, cols)
    out = W.reshape((prod(W.shape[:K]), *rest))[flat].reshape((*bshape, *rest))

The lifting pass then runs the reshapes as GPU views, the gather as
``GpuAdvancedSubtensor1`` and ``LinearIndex`` on the GPU too (its table
entry: the indices checked on the device, each axis's negative index
wrapping once, an ``IndexError`` naming the axis, the value and its
position raised when the call ends).  The same rewrite walks in the lifting
pass (:func:`local_gpu_multi_index_gather_lifted`), where it also sees data
that the lifting put on the GPU (``dot(X, W)[arange(n), a]``) and host data
gathered by GPU indices.  Host arrays keep Aesara's ``AdvancedSubtensor``
(numpy's fancy indexing).
"""
from aesara.compile import optdb
from aesara.graph.rewriting.basic import in2out, node_rewriter
from aesara.tensor.basic import cast, stack
from aesara.tensor.math import prod
from aesara.tensor.subtensor import AdvancedSubtensor, advanced_subtensor1

from aesara_bincount.gpu.rewriting import _from_gpu
from aesara_bincount.multi_index import leading_index_arrays
from aesara_bincount.rewriting import replacement_for
from aesara_bincount_core.linear_index import LinearIndex

__all__ = ["local_gpu_multi_index_gather", "local_gpu_multi_index_gather_lifted"]


def _gather_of_rows(node, lifted: bool):
    if type(node.op) is not AdvancedSubtensor:
        return False
    x, *entries = node.inputs
    if _from_gpu(x) is None and not (lifted and any(_from_gpu(e) is not None for e in entries)):
        return False
    indices = leading_index_arrays(entries)
    if indices is None or len(indices) > x.type.ndim:
        return False
    k = len(indices)
    shape = [x.shape[d] for d in range(x.type.ndim)]
    shape = [s if s.type.dtype == "int64" else cast(s, "int64") for s in shape]
    rest = shape[k:]
    flat, bshape = LinearIndex()(stack(shape[:k]), *indices)
    bnd = bshape.type.shape[0]
    rows = x.reshape([prod(stack(shape[:k]), dtype="int64")] + rest, ndim=1 + len(rest))
    out = advanced_subtensor1(rows, flat)
    out = out.reshape([bshape[j] for j in range(bnd)] + rest, ndim=bnd + len(rest))
    return replacement_for(node.outputs[0], out)


@node_rewriter([AdvancedSubtensor])
def local_gpu_multi_index_gather(fgraph, node):
    """Write ``HostFromGpu(g)[i0, i1, ...]`` as a gather of rows (see the module notes)."""
    return _gather_of_rows(node, lifted=False)


@node_rewriter([AdvancedSubtensor])
def local_gpu_multi_index_gather_lifted(fgraph, node):
    """:func:`local_gpu_multi_index_gather` in the lifting walk: also for data that the
    lifting put on the GPU just before, and for host data gathered by GPU indices."""
    return _gather_of_rows(node, lifted=True)


optdb.register(
    "local_gpu_multi_index_gather",
    in2out(local_gpu_multi_index_gather),
    "fast_run",
    "bincount",
    "gpu_bincount",
    "cxx_only",
    position=48.39,
)
