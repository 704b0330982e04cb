"""Index checks on the device, read with the call's status: :func:`check_indices`, :class:`GpuIndexCheck`.

:func:`check_indices` is the one index check of the GPU Ops that read
indices without kernels of their own (the gather of rows, ``LinearIndex``,
the cross-entropy's classes, advanced indexing): it compares every index
with the length it indexes, on the device, records the first bad one in
the call's status (:mod:`.call_status`), and returns the indices as int64
row numbers in ``[0, n)``, each bad one replaced by 0, so that the work that
follows reads no memory out of bounds.  Nothing is waited for: the call
raises the host Op's exception when it reads its status, at its end.  It
runs two small kernels of ours (``c_code/cuda/call_check_kernels.cu``; CuPy
has no check that records its first failure on the device), where a
composition of CuPy's array operations would take some twenty launches.

:class:`GpuIndexCheck` is the check as an Op, for the rows of a gather or
scatter-add (``GpuAdvancedSubtensor1`` and ``GpuScatterAdd`` then take the
checked rows as they are); the merge pass joins two checks of the same
indices against the same length, so ``W[idx]`` and its gradient's
scatter-add check ``idx`` once.
"""
import ctypes

from aesara.gradient import DisconnectedType
from aesara.graph.basic import Apply
from aesara.graph.op import Op
from aesara.tensor.basic import as_tensor_variable

from aesara_bincount_core.cuda import driver as _driver
from aesara_bincount_core.cuda.errors import align_error, device_error
from aesara_bincount_core.cuda import modules
from aesara_bincount_core.cuda.sources import THREADS
from aesara_bincount_core.gpu.call_status import failure_code, raise_recorded
from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module
from aesara_bincount_core.linear_index import LinearIndex
from aesara_bincount_core.semantics import INDEX_DTYPES, _msg

__all__ = ["HISTOGRAM", "GpuIndexCheck", "check_indices", "checked_rows", "row_index_error"]


def _as_text(value: int, unsigned: bool) -> str:
    return str(value % 2**64 if unsigned else value)


class _CheckParams(ctypes.Structure):
    # bc_check_params of c_code/cuda/call_check_kernels.cu, field for field.
    _fields_ = [
        ("idx", ctypes.c_ulonglong),
        ("rows", ctypes.c_ulonglong),
        ("status", ctypes.c_ulonglong),
        ("n", ctypes.c_longlong),
        ("idx_stride", ctypes.c_longlong),
        ("len", ctypes.c_longlong),
        ("wrap", ctypes.c_longlong),
        ("code", ctypes.c_longlong),
        ("extra", ctypes.c_longlong),
    ]


def check_indices(status, idx, n: int, key, builder, wrap: bool = True, extra=()):
    """``idx`` checked into ``[-n, n)`` (``wrap``) or ``[0, n)``, as int64 row numbers in ``[0, n)``.

    Parameters
    ----------
    status : cupy.ndarray
        The call's status (:class:`~.call_status.GpuCallStatus`).
    idx : cupy.ndarray, any shape, int8 ... uint64, any strides
    n : int
        The length indexed (a host value).
    key, builder
        The failure's entry in the message table (:func:`~.call_status.failure_code`);
        ``builder(position, value, n, extra, 0)`` gets the position of the
        first bad index in C order of ``idx``, its value (the bits of a
        uint64 as an int64), ``n`` and ``extra``.
    wrap : bool
        Negative indices from ``-n`` wrap once, as in NumPy; else they are bad.
    extra : tuple of int, optional
        At most one number, recorded with the failure after ``n`` (an axis).

    Returns
    -------
    cupy.ndarray, int64, the shape of ``idx``
        Negative indices wrapped, bad ones replaced by 0.

    Raises
    ------
    ValueError
        At once: ``idx`` is on another device than the current one, or its
        address or a stride is not a multiple of its itemsize.
    Exception
        At once, only when ``n`` is 0 and ``idx`` is not empty (no row 0 to
        read instead): the failure recorded before in the call, else this
        one (a wait, on this error path only).
    nvrtc.NvrtcError, driver.CudaDriverError
        The kernels cannot be compiled or launched.

    Notes
    -----
    Two kernels of ours (``c_code/cuda/call_check_kernels.cu``), queued on
    CuPy's current stream: the check (one pass over ``idx``) and the record
    of its first bad index (one thread).  No wait, no copy from the host; an
    ``idx`` whose strides give no 1-D view is copied first.
    """
    cp = cupy_module()
    # An index array on another device, or misaligned, would end the CUDA
    # context in the check kernel (and in a copy of CuPy's): refused before
    # any launch, with the messages of the Ops' own C checks.
    device = cp.cuda.runtime.getDevice()
    if idx.data.device_id != device:
        raise device_error("the index array", idx.data.device_id, device)
    stride = next((st for st, n in zip(idx.strides, idx.shape) if n > 1 and st % idx.itemsize), 0)
    if idx.size and (idx.data.ptr % idx.itemsize or stride):
        raise align_error("the index array", idx.itemsize, idx.data.ptr % 256, stride or idx.itemsize)
    flat = idx.reshape(-1)  # a copy only when the strides give no 1-D view
    rows = cp.empty(flat.shape[0], dtype="int64")
    if flat.shape[0] == 0:
        return rows.reshape(idx.shape)
    if n == 0:
        raise_recorded(cp.asnumpy(status))
        raise builder(0, int(flat[0].get()), n, *extra, *(0,) * (2 - len(extra)))
    check, record, resident = modules.check_kernels(idx.dtype.name)
    p = _CheckParams(flat.data.ptr, rows.data.ptr, status.data.ptr, flat.shape[0],
                     flat.strides[0] // flat.itemsize, n, int(wrap), failure_code(key, builder),
                     extra[0] if extra else 0)  # fmt: skip
    drv, stream = _driver.driver(), cp.cuda.get_current_stream().ptr
    drv.launch(check, max(1, min(-(-flat.shape[0] // THREADS), resident)), THREADS, stream, p)
    drv.launch(record, 1, THREADS, stream, p)
    return rows.reshape(idx.shape)


#: The verb of the check of a scatter-add onto a vector (``GpuBincount``'s
#: "scatter" mode): its message is the histogram's (``BC_MSG_INDEX``), as the
#: CPU ``Bincount`` and ``numpy.add.at`` of a vector word it.
HISTOGRAM = "scatter-add onto a vector"


def row_index_error(verb: str, unsigned: bool):
    """``(key, builder)`` of the row-index failure of the Op that does ``verb`` ("gather",
    "scatter-add"): ``IndexError`` with the message of the scatter-add of rows
    (``BC_MSG_ROW_INDEX``), opening with ``verb``; for :data:`HISTOGRAM`, the
    message of the scatter-add onto a vector (``BC_MSG_INDEX``)."""

    def builder(position, value, n, *unused):
        if verb == HISTOGRAM:
            return IndexError(_msg("BC_MSG_INDEX", _as_text(value, unsigned), position, n))
        text = _msg("BC_MSG_ROW_INDEX", _as_text(value, unsigned), position, n)
        return IndexError(text.replace("scatter-add:", f"{verb}:", 1))

    return ("rows", verb, unsigned), builder


def checked_rows(idx, verb: str, nrows, status):
    """``idx`` (a GPU integer vector) as rows checked against ``nrows``: itself when it is
    already (the rows of a GPU ``LinearIndex``, in ``[0, prod(dims))``, which the
    multi-index rewrites index a base reshaped to ``prod(dims)`` rows with),
    else a :class:`GpuIndexCheck` of it."""
    owner = idx.owner
    if (
        owner is not None
        and type(getattr(owner.op, "host_op", None)) is LinearIndex
        and idx is owner.outputs[0]
    ):
        return idx
    return GpuIndexCheck(verb)(idx, nrows, status)


class GpuIndexCheck(Op):
    """Check row indices against a length on the device: the rows of a gather or scatter-add.

    Parameters
    ----------
    verb : str
        What the Op that reads the rows does ("gather", "scatter-add"): the
        first word of the message.

    Notes
    -----
    Inputs: ``idx`` (GPU ``(N,)``, int8 ... uint64, any stride), ``n`` (host
    integer scalar: the rows indexed), ``status`` (the call's status).
    Output: GPU int64 ``(N,)`` in ``[0, n)`` (:func:`check_indices`, with
    negative indices wrapped once).  No wait: an index outside ``[-n, n)``
    (a uint64 from ``n`` up) is raised when the call reads its status, as
    ``IndexError`` naming the first bad index and its position.
    """

    __props__ = ("verb",)

    def __init__(self, verb: str = "gather"):
        self.verb = verb

    def make_node(self, idx, n, status):
        n = as_tensor_variable(n)
        if not isinstance(idx.type, GpuArrayType) or idx.type.ndim != 1 or idx.type.dtype not in INDEX_DTYPES:
            raise TypeError(f"GpuIndexCheck: idx must be a GPU integer vector, got {idx.type}")
        if n.type.ndim != 0 or n.type.dtype not in INDEX_DTYPES:
            raise TypeError(f"GpuIndexCheck: n must be an integer scalar, got {n.type}")
        return Apply(self, [idx, n, status], [GpuArrayType("int64", idx.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        idx, n, status = inputs
        key, builder = row_index_error(self.verb, idx.dtype.kind == "u")
        output_storage[0][0] = check_indices(status, idx, int(n), key, builder)

    def infer_shape(self, fgraph, node, shapes):
        return [shapes[0]]

    def do_constant_folding(self, fgraph, node):
        return False

    def L_op(self, inputs, outputs, output_grads):
        return [DisconnectedType()() for _ in inputs]

    def connection_pattern(self, node):
        return [[False] for _ in node.inputs]

    def __str__(self):
        return f"GpuIndexCheck{{{self.verb}}}"
