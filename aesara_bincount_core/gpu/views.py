"""Views of GPU arrays: :class:`GpuDimShuffle`, :class:`GpuReshape`, :class:`GpuSubtensor`.

Each is the :class:`~aesara_bincount_core.gpu.twin.GpuTwin` of an Aesara
host Op (``DimShuffle``, ``Reshape``, ``Subtensor``: basic slicing and
integer indexing) and returns a view of its GPU input: no copy (except a
reshape of an array whose strides allow no view, which CuPy copies, as NumPy
does) and no transfer.  ``Shape`` and ``Shape_i`` need no twin: Aesara's own
Ops take GPU variables and read the shape on the host.  The rewrite that puts
these Ops in graphs is :mod:`aesara_bincount.gpu.lifting`; the other twins
are in :mod:`.reduction` and :mod:`.gather`.
"""
from aesara.tensor.subtensor import get_idx_list

from aesara_bincount_core.gpu.twin import GpuTwin

__all__ = ["GpuDimShuffle", "GpuReshape", "GpuSubtensor"]


class GpuDimShuffle(GpuTwin):
    """``DimShuffle`` of a GPU array: a transposed view with length-1 axes dropped or added.

    Parameters
    ----------
    host_op : aesara.tensor.elemwise.DimShuffle

    Notes
    -----
    Input: GPU, any dtype and strides; output: a GPU view of it
    (``view_map = {0: [0]}``), of the shape the host Op gives.  Nothing is
    queued on the device.
    """

    view_map = {0: [0]}

    def perform(self, node, inputs, output_storage, params=None):
        op = self.host_op
        res = inputs[0].transpose(tuple(op.transposition))
        shape = list(res.shape[: len(op.shuffle)])
        for axis in op.augment:
            shape.insert(axis, 1)
        output_storage[0][0] = res.reshape(tuple(shape))


class GpuReshape(GpuTwin):
    """``Reshape`` of a GPU array to a shape given on the host.

    Parameters
    ----------
    host_op : aesara.tensor.shape.Reshape

    Notes
    -----
    Inputs: GPU ``x`` (any dtype) and a host int64 vector ``shape`` of
    ``host_op.ndim`` entries (one may be ``-1``).  Output: a GPU view of
    ``x`` when its strides allow one (always for a C-contiguous ``x``),
    else a C-contiguous copy, as ``cupy.ndarray.reshape`` gives.

    Raises
    ------
    ValueError
        When the function runs: ``shape`` has the wrong length, or its
        product differs from ``x.size``.
    """

    view_map = {0: [0]}

    def perform(self, node, inputs, output_storage, params=None):
        x, shape = inputs
        if len(shape) != self.host_op.ndim:
            raise ValueError(
                f"Shape argument to Reshape has incorrect length: {len(shape)}, "
                f"should be {self.host_op.ndim}"
            )
        output_storage[0][0] = x.reshape(tuple(int(s) for s in shape))


class GpuSubtensor(GpuTwin):
    """Basic indexing of a GPU array (slices and integers): ``x[2:, 1, ::-1]``.

    Parameters
    ----------
    host_op : aesara.tensor.subtensor.Subtensor

    Notes
    -----
    Inputs: GPU ``x`` (any dtype and strides), then the host integer scalars
    of the slices and indices (as for ``Subtensor``).  Output: a GPU view of
    ``x`` (``view_map = {0: [0]}``); an integer index of every axis gives a
    0-d view.  Nothing is queued on the device.

    Raises
    ------
    IndexError
        When the function runs: an integer index outside ``[-n, n)``, as
        NumPy and the host Op raise.
    """

    view_map = {0: [0]}

    def perform(self, node, inputs, output_storage, params=None):
        index = tuple(_basic(e) for e in get_idx_list(inputs, self.host_op.idx_list))
        # The trailing Ellipsis keeps a 0-d result a view, not a scalar.
        output_storage[0][0] = inputs[0][index + (Ellipsis,)]


def _basic(entry):
    """An index entry with Python ints: a NumPy integer could read as an advanced index to CuPy."""
    if isinstance(entry, slice):
        return slice(*(None if v is None else int(v) for v in (entry.start, entry.stop, entry.step)))
    return int(entry)
