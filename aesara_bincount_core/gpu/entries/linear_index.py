"""Table entry of ``LinearIndex``: several integer index arrays made one flat row index, checked on the device.

The GPU form of :class:`~aesara_bincount_core.linear_index.LinearIndex`,
which the multi-index gathers and scatters are built on (``P[arange(n), y]``,
``z[y, p] += 1`` and the gradient of the gather): the index arrays are
broadcast together (their shapes are read on the host, so a mismatch raises
at once, as on the host), each axis is checked against its length on the
device (:func:`~aesara_bincount_core.gpu.index_check.check_indices`, in
axis order: the first bad index of the first axis that has one is the one
recorded, as the host Op reports it) and the flat row numbers are
``((i_0 * d_1 + i_1) * d_2 + i_2) ...`` in C order of the broadcast shape.
A bad index is raised when the call reads its status, with the host Op's
``IndexError`` and message; the rows that follow use row 0 in its place.
The shape of the broadcast indices (``bshape``) stays on the host.
"""
import numpy as np

from aesara_bincount_core.gpu.index_check import check_indices
from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.type import cupy_module
from aesara_bincount_core.linear_index import LinearIndex
from aesara_bincount_core.semantics import _msg, shape_text


def _axis_error(unsigned: bool):
    def builder(position, value, size, axis, *unused):
        text = str(value % 2**64 if unsigned else value)
        return IndexError(_msg("BC_MSG_AXIS_INDEX", text, position, axis, size))

    return ("axis", unsigned), builder


@register(
    LinearIndex, family="subtensor", cupy="cupy.broadcast_to and arithmetic; the indices checked on "
    "the device", host_inputs=(0,), host_outputs=(1,), checks=True,
    accepts_text="index arrays int8 ... uint64 of any shapes that broadcast; the lengths of the axes "
    "stay on the host",
    outputs="a new int64 vector of rows (on the GPU) and the broadcast shape (on the host); no wait",
)  # fmt: skip
def _linear_index_funcify(op, node):
    cp = cupy_module()

    def linear_index(dims, *indices):
        *indices, status = indices
        shapes = [i.shape for i in indices]
        try:
            bshape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise IndexError(_msg("BC_MSG_INDEX_BCAST", " ".join(shape_text(s) for s in shapes))) from None
        flat = cp.zeros(int(np.prod(bshape, dtype=np.int64)), dtype="int64")
        for axis, (d, ix) in enumerate(zip(dims, indices)):
            d = int(d)
            key, builder = _axis_error(ix.dtype.kind == "u")
            rows = check_indices(status, cp.broadcast_to(ix, bshape), d, key, builder, extra=(axis,))
            flat = flat * d + rows.reshape(-1)
        return [flat, np.asarray(bshape, dtype="int64")]

    return linear_index
