"""The end of a call on the GPU: :class:`GpuCallEnd`, the one wait of a call.

A function on GPU data ends with the copies of the results that the user
reads on the host and, when its Ops checked indices or values on the device,
the read of the call's status (:mod:`.call_status`).  :class:`GpuCallEnd`
does all of them at once: it packs the call's statuses and those results
into one GPU buffer, copies it to the host in one device-to-host copy (the
call's one wait), raises the failure a status records (before the function
stores any update), and unpacks the results.  Each separate
``HostFromGpu`` would wait once.

It also passes every other output of the function through, as a view, so
that it runs after every node of the call: every check has written its
status before it is read.  The rewrite that puts it in graphs is
:mod:`aesara_bincount.gpu.call_end`.
"""
import numpy as np
from aesara.graph.basic import Apply
from aesara.graph.op import Op
from aesara.tensor.type import TensorType

from aesara_bincount_core.gpu.call_status import raise_recorded
from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module

__all__ = ["GpuCallEnd"]

#: Each piece of the packed buffer starts at a multiple of this many bytes.
_ALIGN = 16


class GpuCallEnd(Op):
    """Copy GPU results to the host and read the call's statuses, with one wait.

    Parameters
    ----------
    n_status : int
        How many inputs, first, are statuses of the call (int64 GPU vectors).
    n_host : int
        How many inputs, after them, are GPU arrays to copy to the host.
    n_keep : int
        How many inputs, last, are values passed through.

    Notes
    -----
    Inputs: the statuses, the ``n_host`` GPU arrays (any dtype, shape and
    strides), then the ``n_keep`` values (GPU or host) passed through.
    Outputs: ``n_host`` host tensors (new NumPy arrays, C-contiguous, of the
    dtype and static shape of their GPU inputs), then each value passed
    through, itself (``view_map``).

    Each piece goes into one GPU buffer of uint8 at a multiple of 16 bytes
    (a copy on the device of each array), the buffer comes back in one
    device-to-host copy, which waits for CuPy's current stream (the call's
    one wait), and each result is copied out of the host buffer.

    Raises
    ------
    Exception
        The failure a status records (:func:`~.call_status.raise_recorded`):
        the exception of the host Op whose check failed, with its message.
    """

    __props__ = ("n_status", "n_host", "n_keep")

    def __init__(self, n_status: int, n_host: int, n_keep: int = 0):
        self.n_status, self.n_host, self.n_keep = int(n_status), int(n_host), int(n_keep)
        first = self.n_status + self.n_host
        self.view_map = {self.n_host + j: [first + j] for j in range(self.n_keep)}

    def make_node(self, *inputs):
        first = self.n_status + self.n_host
        if len(inputs) != first + self.n_keep:
            raise TypeError(
                f"GpuCallEnd: {len(inputs)} inputs for {self.n_status} + {self.n_host} + {self.n_keep}"
            )
        for v in inputs[:first]:
            if not isinstance(v.type, GpuArrayType):
                raise TypeError(f"GpuCallEnd: expected a GPU variable, got {v.type}")
        outputs = [TensorType(v.type.dtype, shape=v.type.shape)() for v in inputs[self.n_status:first]]
        outputs += [v.type() for v in inputs[first:]]
        return Apply(self, list(inputs), outputs)

    def perform(self, node, inputs, output_storage, params=None):
        first = self.n_status + self.n_host
        pieces = list(inputs[:first])
        host = _fetch(pieces)
        for record in host[: self.n_status]:
            raise_recorded(record)
        for storage, value in zip(output_storage, host[self.n_status:] + list(inputs[first:])):
            storage[0] = value

    def infer_shape(self, fgraph, node, shapes):
        return list(shapes[self.n_status:])

    def do_constant_folding(self, fgraph, node):
        return False

    def __str__(self):
        return f"GpuCallEnd{{{self.n_status}, {self.n_host}, {self.n_keep}}}"


def _fetch(arrays):
    """Host copies of the GPU ``arrays``, through one packed device-to-host copy."""
    cp = cupy_module()
    if not arrays:
        return []
    flats, offsets, total = [], [], 0
    for a in arrays:
        flat = a.reshape(-1)  # a C-contiguous copy when the strides allow no view
        flats.append(flat.view("uint8"))
        offsets.append(total)
        total += -(-a.nbytes // _ALIGN) * _ALIGN
    buf = cp.empty(max(total, 1), dtype="uint8")
    for flat, off in zip(flats, offsets):
        if flat.size:
            buf[off:off + flat.size] = flat
    packed = buf.get()  # the call's one wait
    out = []
    for a, off in zip(arrays, offsets):
        piece = packed[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
        out.append(np.array(piece, copy=True))
    return out
