"""Table entries of ``IncSubtensor`` (``x[slices] += y``, ``x[slices] = y``) and of advanced indexing.

The output is a copy of ``x`` with the indexed part incremented or set
(``cupy.ndarray.copy``, then CuPy's in-place ``+=`` or assignment on the
view); ``y`` broadcasts as on the host.  Basic indices only: a slice or
integer selects each element at most once, so there are no duplicates and
no atomics.  The scatter-add of rows (``inc_subtensor(x[idx], y)``, integer
vectors) is :class:`~aesara_bincount_core.gpu.scatter_add.GpuScatterAdd`'s.

``AdvancedSubtensor`` and ``AdvancedIncSubtensor`` (inc) take any mix of
integer arrays, integers, slices and ``None`` (``x[:, idx]``, ``x[idx, 1:3]``,
``x[i, :, j]``): each integer array is checked against the length of the
axis it indexes on the device (recorded in the call's status, raised when
the call ends, with NumPy's ``IndexError`` message), then CuPy indexes.
Two or more integer arrays on the leading axes followed by full slices
(``P[arange(n), y]``) are rewritten before, into ``LinearIndex`` and a
gather or scatter-add of rows (:mod:`aesara_bincount.gpu.multi_gather`,
:mod:`aesara_bincount.multi_index`).
"""
from aesara.tensor.subtensor import AdvancedIncSubtensor, AdvancedSubtensor, IncSubtensor, get_idx_list
from aesara.tensor.type import TensorType

from aesara_bincount_core.gpu.entries._common import one_host_element
from aesara_bincount_core.gpu.index_check import check_indices
from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.type import CupyArray
from aesara_bincount_core.gpu.views import _basic
from aesara_bincount_core.semantics import INDEX_DTYPES


def _index_inputs(node):
    return tuple(range(2, len(node.inputs)))


@register(
    IncSubtensor, family="subtensor", cupy="cupy.ndarray.copy, then += or = on a view",
    host_inputs=_index_inputs,
    accepts_text="any GPU dtype; slices and integers (on the host); inc and set",
    outputs="a new array (x is never overwritten)",
)  # fmt: skip
def _inc_subtensor_funcify(op, node):
    def inc_subtensor(x, y, *scalars):
        index = tuple(_basic(e) for e in get_idx_list((x,) + scalars, op.idx_list)) + (Ellipsis,)
        out = x.copy()
        if op.set_instead_of_inc:
            out[index] = y
        else:
            view = out[index]
            view += y
        return [out]

    return inc_subtensor


# -- advanced indexing: any mix of integer arrays, integers, slices and None ---------------------


def _index_host_inputs(first):
    """Host inputs of an advanced index node whose indices start at ``first``: the slices,
    ``None`` and integers of one element (the integer arrays and the masks go to the GPU)."""

    def host_inputs(node):
        return tuple(
            k for k in range(first, len(node.inputs))
            if not isinstance(node.inputs[k].type, TensorType)
            or (one_host_element(node.inputs[k]) and node.inputs[k].type.dtype != "bool")
        )  # fmt: skip

    return host_inputs


#: The dtypes CuPy 13's scatter-add takes (its atomics), float16 aside (the table's rule).
_SCATTER_ADD_DTYPES = ("int32", "uint32", "uint64", "float32", "float64")


def _advanced_problem(first):
    def accepts(node):
        for v in node.inputs[first:]:
            if isinstance(v.type, TensorType) and v.type.dtype == "bool" and (first == 2 or v.type.ndim == 0):
                return "boolean mask index of an increment, or of no dimension"
            if isinstance(v.type, TensorType) and v.type.dtype not in INDEX_DTYPES + ("bool",):
                return f"index of dtype {v.type.dtype}"
        op = node.op
        if getattr(op, "set_instead_of_inc", False) or getattr(op, "ignore_duplicates", False):
            return "set (or inc ignoring duplicates): which duplicate wins is not defined on the GPU"
        if first == 2 and node.outputs[0].type.dtype not in _SCATTER_ADD_DTYPES:
            return (f"dtype {node.outputs[0].type.dtype} (cupyx.scatter_add takes "
                    f"{', '.join(_SCATTER_ADD_DTYPES)})")  # fmt: skip
        return None

    return accepts


def _axis_error(unsigned):
    def builder(position, value, size, axis, *unused):
        text = value % 2**64 if unsigned else value
        return IndexError(f"index {text} is out of bounds for axis {axis} with size {size}")

    return ("advanced", unsigned), builder


def _advanced_key(x, indices, status):
    """The CuPy key of ``x[indices]``: integer arrays checked on the device (int64 rows),
    integers checked on the host, slices with Python ints, ``None`` as it is."""
    key, axis = [], 0
    for v in indices:
        if v is None:
            key.append(None)
            continue
        if isinstance(v, slice):
            key.append(_basic(v))
        elif getattr(v, "dtype", None) == "bool" and v.ndim > 0:  # a mask: its axes, as they are
            for k, length in enumerate(v.shape):
                if length != x.shape[axis + k]:
                    raise IndexError(
                        f"boolean index did not match indexed array along dimension {axis + k}; "
                        f"dimension is {x.shape[axis + k]} but corresponding boolean dimension is {length}"
                    )
            key.append(v)
            axis += v.ndim
            continue
        elif isinstance(v, CupyArray):
            k, builder = _axis_error(v.dtype.kind == "u")
            key.append(check_indices(status, v, x.shape[axis], k, builder, extra=(axis,)))
        else:  # a host integer
            i = int(v)
            if not -x.shape[axis] <= i < x.shape[axis]:
                raise _axis_error(False)[1](0, i, x.shape[axis], axis)
            key.append(i)
        axis += 1
    return tuple(key)


@register(
    AdvancedSubtensor, family="subtensor", cupy="cupy.ndarray.__getitem__ (advanced indexing)",
    host_inputs=_index_host_inputs(1), accepts=_advanced_problem(1), checks=True,
    accepts_text="any GPU dtype; any mix of integer arrays (int8 ... uint64, checked on the device), "
    "boolean masks (CuPy counts them: one wait), integers, slices and None",
    outputs="a new array (CuPy's advanced indexing, NumPy's rules for the order of the axes); "
    "waits once with a boolean mask (the length of the result)",
)  # fmt: skip
def _advanced_subtensor_funcify(op, node):
    def advanced_subtensor(x, *indices):
        *indices, status = indices
        key = _advanced_key(x, indices, status)
        out = x[key]
        return [out if any(isinstance(k, CupyArray) for k in key) else out.copy()]

    return advanced_subtensor


@register(
    AdvancedIncSubtensor, family="subtensor", cupy="cupy.ndarray.copy, then cupyx.scatter_add",
    host_inputs=_index_host_inputs(2), accepts=_advanced_problem(2), checks=True,
    accepts_text="int32, uint32, uint64, float32, float64 (CuPy's atomics); inc (np.add.at: duplicates "
    "add up) with any mix of integer arrays (checked on the device), integers, slices and None; set and "
    "ignore_duplicates stay on the host",
    outputs="a new array (x is never overwritten); float sums of duplicates in any order (atomics)",
)  # fmt: skip
def _advanced_inc_subtensor_funcify(op, node):
    import cupyx

    def advanced_inc_subtensor(x, y, *indices):
        *indices, status = indices
        key = _advanced_key(x, indices, status)
        out = x.copy()
        cupyx.scatter_add(out, key, y)
        return [out]

    return advanced_inc_subtensor
