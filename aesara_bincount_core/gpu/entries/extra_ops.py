"""Table entries of Aesara's extra_ops and sort Ops: SearchsortedOp, CumOp, Repeat, SortOp, ArgSortOp.

CuPy's sorts are stable radix sorts (Thrust).  ``SortOp`` gives the host's
values whatever its ``kind``; ``ArgSortOp`` gives the stable order of equal
keys, which NumPy's ``kind="stable"`` and ``"mergesort"`` also give and its
default ``"quicksort"`` does not promise (``docs/semantics.rst``).  NaN sort
last, as in NumPy.
"""
import numpy as np
from aesara.graph.basic import Constant
from aesara.tensor.extra_ops import CumOp, Repeat, SearchsortedOp
from aesara.tensor.sort import ArgSortOp, SortOp

from aesara_bincount_core.gpu.entries._common import FLOATS, dtype_problem
from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.type import cupy_module

_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_NUMBERS = FLOATS + _INTS


def _searchsorted_accepts(node):
    if len(node.inputs) > 2:
        return "a sorter (CuPy's take would wrap an index out of range where NumPy raises)"
    if node.inputs[0].type.dtype != node.inputs[1].type.dtype:
        return "x and v of different dtypes"
    return dtype_problem(node, _NUMBERS)


@register(
    SearchsortedOp, family="extra_ops", cupy="cupy.searchsorted", accepts=_searchsorted_accepts,
    accepts_text="x and v of the same int or float dtype, side left or right, no sorter; NaN as in NumPy",
    outputs="a new int64 array of v's shape",
)  # fmt: skip
def _searchsorted_funcify(op, node):
    cp = cupy_module()

    def searchsorted(x, v):
        return [cp.searchsorted(x, v, side=op.side)]

    return searchsorted


def _cum_accepts(node):
    return dtype_problem(node, FLOATS + ("int32", "int64", "uint32", "uint64"))


@register(
    CumOp, family="extra_ops", cupy="cupy.cumsum, cupy.cumprod (in the input's dtype)",
    accepts=_cum_accepts,
    accepts_text="float32, float64, int32, int64, uint32, uint64 (integers wrap as in the host's C "
    "code); float bits: CuPy's scan adds in another order",
    outputs="a new array (flattened for axis=None)",
)  # fmt: skip
def _cum_funcify(op, node):
    cp = cupy_module()
    scan = cp.cumsum if op.mode == "add" else cp.cumprod
    dtype = node.outputs[0].type.dtype

    def cum(x):
        return [scan(x, axis=op.axis, dtype=dtype)]

    return cum


@register(
    Repeat, family="extra_ops", cupy="cupy.repeat", host_inputs=(1,),
    accepts=lambda node: dtype_problem(node, _NUMBERS + ("bool",)),
    accepts_text="any GPU dtype; the repeats stay on the host (CuPy takes them as a list)",
    outputs="a new C-contiguous array",
)  # fmt: skip
def _repeat_funcify(op, node):
    cp = cupy_module()

    def repeat(x, repeats):
        reps = np.asarray(repeats)
        length = x.size if op.axis is None else x.shape[op.axis]
        if reps.ndim and reps.size != 1:
            np.broadcast_to(reps, (length,))  # ValueError for a wrong length, as NumPy's
        if (reps < 0).any():
            raise ValueError("negative dimensions are not allowed")
        reps = int(reps.reshape(-1)[0]) if reps.size == 1 else [int(r) for r in reps]
        return [cp.repeat(x, reps, axis=op.axis)]

    return repeat


def _sort_accepts(node):
    if not isinstance(node.inputs[1], Constant) or node.inputs[1].data is None:
        return "an axis that is not a constant integer"
    if node.op.order is not None:
        return "a sort order of fields"
    dtype = node.inputs[0].type.dtype
    return None if dtype in _NUMBERS else f"dtype {dtype} (the GPU entry takes {', '.join(_NUMBERS)})"


def _sort_funcify(op, node):
    """``cupy.sort`` or ``cupy.argsort`` (int64) along the node's constant axis."""
    cp = cupy_module()
    axis = int(node.inputs[1].data)
    sort = cp.argsort if isinstance(op, ArgSortOp) else cp.sort

    def sort_along(x, _axis):
        return [sort(x, axis=axis)]

    return sort_along


register(
    SortOp, family="extra_ops", cupy="cupy.sort (stable radix sort)", host_inputs=(1,),
    accepts=_sort_accepts,
    accepts_text="int and float dtypes along a constant axis, any kind; NaN last; -0.0 and 0.0 may "
    "come in another order than NumPy's",
    outputs="a new array",
)(_sort_funcify)  # fmt: skip
register(
    ArgSortOp, family="extra_ops", cupy="cupy.argsort (stable radix sort)", host_inputs=(1,),
    accepts=_sort_accepts,
    accepts_text="int and float dtypes along a constant axis; equal keys in their stable order "
    "(NumPy's quicksort may give another)",
    outputs="a new int64 array",
)(_sort_funcify)  # fmt: skip
