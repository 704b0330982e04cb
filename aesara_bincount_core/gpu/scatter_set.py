"""The scatter-set of rows on the GPU: :class:`GpuScatterSet` (``set_subtensor(W[idx], v)``).

The GPU twin of :class:`~aesara_bincount_core.scatter_set.ScatterSet`: the
rows are checked by the index-check kernel of the scatter-add of rows
(:func:`~aesara_bincount_core.gpu.gather.check_rows`), then the two kernels
of ``c_code/cuda/scatter_set_kernels.cu`` write them, the last one in index
order winning.  The rewrite is
:func:`aesara_bincount.gpu.rewriting.local_gpu_scatter_set`.
"""
import ctypes

from aesara.gradient import DisconnectedType
from aesara.graph.basic import Apply

from aesara_bincount_core.cuda import driver as _driver
from aesara_bincount_core.cuda import modules
from aesara_bincount_core.cuda.sources import THREADS
from aesara_bincount_core.gpu.gather import check_rows
from aesara_bincount_core.gpu.twin import GpuTwin
from aesara_bincount_core.gpu.type import cupy_module
from aesara_bincount_core.scatter_set import ScatterSet
from aesara_bincount_core.semantics import _check_rows_broadcast

__all__ = ["GpuScatterSet"]


class _SetParams(ctypes.Structure):
    # bc_set_params of c_code/cuda/scatter_set_kernels.cu, field for field.
    _fields_ = [
        ("rows", ctypes.c_ulonglong),
        ("last", ctypes.c_ulonglong),
        ("out", ctypes.c_ulonglong),
        ("values", ctypes.c_ulonglong),
        ("n", ctypes.c_longlong),
        ("nrows", ctypes.c_longlong),
        ("row_elems", ctypes.c_longlong),
        ("out_row_bytes", ctypes.c_longlong),
    ]


def _rows_contiguous(a) -> bool:
    """Whether each row (dimensions 1..) of ``a`` is C-contiguous."""
    expected = a.itemsize
    for d, s in zip(reversed(a.shape[1:]), reversed(a.strides[1:])):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


class GpuScatterSet(GpuTwin):
    r"""Write rows of values into the rows of a GPU base: ``out[rows[i]] = values[i]``.

    With duplicate rows **the last one in index order wins**, as numpy's
    assignment ``out[rows] = values`` (and the CPU ``ScatterSet``) does, on
    every run: the result does not depend on the order in which blocks run.

    Parameters
    ----------
    host_op : aesara_bincount_core.scatter_set.ScatterSet
        The CPU Op it stands for; ``host_op.inplace`` makes this Op write
        into its base (``destroy_map = {0: [0]}``), the update of a GPU
        shared variable with no copy of it.
    call_status : bool, optional
        The rows are already checked on the device (int64 rows in
        ``[0, V)`` from :class:`~aesara_bincount_core.gpu.index_check.GpuIndexCheck`)
        and the call's status (:mod:`~aesara_bincount_core.gpu.call_status`)
        is a fourth input: no check and no wait here; in place, once a check
        of the call failed, the Op writes the base's own rows back (the
        values are chosen on the device), so the base keeps its value.  Set
        by the lifting pass.

    Notes
    -----
    Inputs, all GPU arrays: ``base`` ``(V, *rest)`` of a dtype of
    :data:`~aesara_bincount_core.semantics.SET_DTYPES` (bool, int8 ...
    uint64, float32, float64), any strides; ``values`` of the base's dtype,
    broadcast to ``(N, *rest)``; ``rows`` int64 ``(N,)``, any stride, a
    negative row wrapping once.  Output: GPU ``(V, *rest)``, C-contiguous
    unless it is the base itself.

    Algorithm (``c_code/cuda/scatter_set_kernels.cu``): after the check, a
    first kernel stores for each row of the output one plus the largest
    position that names it (``atomicMax`` on a zero-filled int64 scratch of
    ``V`` words); a second copies row ``i`` of the values only where ``i``
    is its row's last position.  Elements are copied as bytes: ``-0.0`` and
    NaN payloads are kept.  Values that are not C-contiguous ``(N, *rest)``
    (broadcast ones included) are copied into such an array first; an
    in-place base whose rows are not C-contiguous is written through a
    C-contiguous copy, copied back.

    Waits once for CuPy's current stream (the check's status), unless
    ``call_status``; the writes are queued and not waited for.

    Raises
    ------
    IndexError
        When the function runs, a row outside ``[-V, V)``, naming the first
        one and its position; nothing is written (the base and every shared
        variable keep their values).
    ValueError
        When the function runs, values that do not broadcast to
        ``(N, *rest)`` (after any ``IndexError``); nothing is written.
    GpuUnavailableError
        When the function is compiled without a usable GPU.
    """

    __props__ = ("host_op", "call_status")
    gpu_inputs = (0, 1, 2)
    cpu_verb = "set"
    #: For Ops pickled before the prop existed.
    call_status = False

    def __init__(self, host_op: ScatterSet, call_status: bool = False):
        super().__init__(host_op)
        self.call_status = bool(call_status)
        if host_op.inplace:
            self.destroy_map = {0: [0]}

    def __str__(self):
        return f"GpuScatterSet{{inplace={self.inplace}{', call_status' if self.call_status else ''}}}"

    def make_node(self, base, values, rows, *status):
        if len(status) != int(self.call_status):
            raise TypeError(f"GpuScatterSet: the call's status is {'' if self.call_status else 'not '}an input")
        node = super().make_node(base, values, rows)
        return Apply(self, node.inputs + list(status), [o.type() for o in node.outputs])

    def infer_shape(self, fgraph, node, shapes):
        return self.host_op.infer_shape(fgraph, node, shapes[:3])

    @property
    def inplace(self) -> bool:
        """Whether the Op writes into its base."""
        return self.host_op.inplace

    def clone_inplace(self) -> "GpuScatterSet":
        """The same Op, writing into its base in place."""
        return type(self)(self.host_op.clone_inplace(), self.call_status)

    def connection_pattern(self, node):
        return self.host_op.connection_pattern(node) + [[False]] * int(self.call_status)

    def L_op(self, inputs, outputs, output_grads):
        grads = self.host_op.L_op(inputs[:3], outputs, output_grads)
        return list(grads) + [DisconnectedType()()] * int(self.call_status)

    def perform(self, node, inputs, output_storage, params=None):
        cp = cupy_module()
        base, values, rows = inputs[:3]
        nrows, rest = base.shape[0], base.shape[1:]
        target = (rows.shape[0],) + rest
        if not self.call_status:
            check_rows(rows, nrows, "scatter-set")
        _check_rows_broadcast(values, target)
        out = base if self.inplace else base.copy()
        work = out if _rows_contiguous(out) else out.copy()
        row_elems = 1
        for d in rest:
            row_elems *= d
        if rows.shape[0] and row_elems and nrows:
            flat_values = cp.empty(target, dtype=base.dtype)
            flat_values[...] = values
            if self.call_status and self.inplace:  # a failed check: the base's own rows
                failed = inputs[3][1] != 0
                flat_values = cp.where(failed, work.take(rows, axis=0), flat_values)
            self._launch(cp, work, flat_values, rows if rows.flags.c_contiguous else rows.copy(), nrows, row_elems)
        if work is not out:
            out[...] = work
        output_storage[0][0] = out

    @staticmethod
    def _launch(cp, work, values, rows, nrows: int, row_elems: int) -> None:
        last = cp.zeros(nrows, dtype="uint64")
        p = _SetParams(rows.data.ptr, last.data.ptr, work.data.ptr, values.data.ptr,
                       rows.shape[0], nrows, row_elems, work.strides[0] if nrows > 1 else 0)
        first, second, resident = modules.set_kernels(work.itemsize)
        drv, stream = _driver.driver(), cp.cuda.get_current_stream().ptr
        for func, count in ((first, rows.shape[0]), (second, rows.shape[0] * row_elems)):
            blocks = max(1, min(-(-count // THREADS), resident))
            drv.launch(func, blocks, THREADS, stream, p)
