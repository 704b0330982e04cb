"""Table entry of ``IncSubtensor``: ``x[slices] += y`` and ``x[slices] = y`` with slices and integers.

The output is a copy of ``x`` with the indexed part incremented or set
(``cupy.ndarray.copy``, then CuPy's in-place ``+=`` or assignment on the
view); ``y`` broadcasts as on the host.  Basic indices only: a slice or
integer selects each element at most once, so there are no duplicates and
no atomics.  The scatter-add of rows (``inc_subtensor(x[idx], y)``, integer
vectors) is :class:`~aesara_bincount_core.gpu.scatter_add.GpuScatterAdd`'s.
"""
from aesara.tensor.subtensor import IncSubtensor, get_idx_list

from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.views import _basic


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
