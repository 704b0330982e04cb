"""Reductions of GPU arrays: :class:`GpuCAReduce`, with CuPy's reductions.

The :class:`~aesara_bincount_core.gpu.twin.GpuTwin` of Aesara's ``CAReduce``
for the reductions that have a CuPy counterpart: ``Sum``, ``Prod``, ``Max``,
``Min``, ``All``, ``Any`` (the ``Mean`` that Aesara builds is a ``Sum``
divided by a shape, an ``Elemwise``), over all axes or given axes, with the
host Op's accumulation and output dtypes.  :func:`gpu_reduction_problem`
says which ``CAReduce`` nodes can run here.  The other twins are in
:mod:`.views` and :mod:`.gather`; the rewrite is
:mod:`aesara_bincount.gpu.lifting`.
"""
from typing import Optional

import aesara.scalar as aes
from aesara.tensor.elemwise import CAReduce

from aesara_bincount_core.gpu.twin import GpuTwin, as_device_array
from aesara_bincount_core.gpu.type import GPU_DTYPES

__all__ = ["GpuCAReduce", "gpu_reduction_problem"]

#: The ``cupy.ndarray`` method of each scalar op, and whether it takes an accumulation dtype.
_METHODS = (
    (aes.Add, "sum", True),
    (aes.Mul, "prod", True),
    (aes.ScalarMaximum, "max", False),
    (aes.ScalarMinimum, "min", False),
    (aes.AND, "all", False),
    (aes.OR, "any", False),
)


def _method(scalar_op):
    for klass, name, takes_dtype in _METHODS:
        if isinstance(scalar_op, klass):
            return name, takes_dtype
    return None


def gpu_reduction_problem(node) -> Optional[str]:
    """Why a ``CAReduce`` node cannot run as :class:`GpuCAReduce`, or None when it can.

    Parameters
    ----------
    node : aesara.graph.basic.Apply
        A node whose Op is a ``CAReduce``.

    Returns
    -------
    str or None
        The reason: another Op, a scalar op without a CuPy reduction, a
        logical reduction of a non-bool input (``AND``/``OR`` of integers are
        bitwise), or a dtype that GPU arrays cannot hold (complex).
    """
    return _problem(node.op, node.inputs[0].type.dtype, node.outputs[0].type.dtype)


def _problem(op, in_dtype: str, out_dtype: str) -> Optional[str]:
    if not isinstance(op, CAReduce):
        return f"{op} is not a CAReduce"
    if _method(op.scalar_op) is None:
        return f"no GPU reduction for the scalar op {op.scalar_op}"
    if isinstance(op.scalar_op, (aes.AND, aes.OR)) and in_dtype != "bool":
        return f"{op.scalar_op} of {in_dtype} is bitwise"
    dtypes = [in_dtype, out_dtype, getattr(op, "acc_dtype", None)]
    bad = [d for d in dtypes if d is not None and d not in GPU_DTYPES]
    if bad:
        return f"dtype {bad[0]} cannot live on the GPU"
    return None


class GpuCAReduce(GpuTwin):
    """A ``CAReduce`` (sum, product, maximum, minimum, all, any) of a GPU array.

    Parameters
    ----------
    host_op : aesara.tensor.elemwise.CAReduce
        One for which :func:`gpu_reduction_problem` is None.

    Notes
    -----
    Input: GPU, any shape, dtype and strides.  Output: GPU, the input's
    shape less the reduced axes (0-d when all are reduced), of the host Op's
    output dtype.  Sums and products accumulate in the host Op's
    ``acc_dtype`` (int64 for integers and bool, float64 for float32 by
    Aesara's defaults), then are cast to the output dtype, as the host Op's
    ``perform`` does.  The reduction is CuPy's (``cupy.ndarray.sum`` ...),
    queued on CuPy's current stream and not waited for.  Float sums are added
    in another order than on the host, so they can differ in the last bits.

    Raises
    ------
    TypeError
        When the node is built, for a host Op that
        :func:`gpu_reduction_problem` rejects.
    ValueError
        When the function runs: a maximum or minimum over an empty axis
        (no identity), as on the host.
    """

    def make_node(self, x):
        node = super().make_node(x)
        problem = _problem(self.host_op, x.type.dtype, node.outputs[0].type.dtype)
        if problem is not None:
            raise TypeError(f"GpuCAReduce: {problem}")
        return node

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        name, takes_dtype = _method(self.host_op.scalar_op)
        out_dtype = node.outputs[0].type.dtype
        axis = self.host_op.axis
        if axis is not None:
            axis = tuple(axis)
        if takes_dtype:
            acc_dtype = getattr(self.host_op, "acc_dtype", None) or out_dtype
            res = getattr(x, name)(axis=axis, dtype=acc_dtype)
        else:
            res = getattr(x, name)(axis=axis)
        res = as_device_array(res)
        if res.dtype != out_dtype:
            res = res.astype(out_dtype)
        output_storage[0][0] = res
