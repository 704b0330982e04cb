"""The gather of rows on the GPU: :class:`GpuAdvancedSubtensor1` (``W[idx]``).

The :class:`~aesara_bincount_core.gpu.twin.GpuTwin` of Aesara's
``AdvancedSubtensor1``.  The indices are checked by the index-check kernel of
the scatter-add of rows (``scatter_rows_check_<idx>``, launched with the
"check only" flag of ``c_code/cuda_host/scatter_add_launch.h`` through
:func:`aesara_bincount_core.cuda.launcher.scatter_rows`), so that the gather
and :class:`~aesara_bincount_core.gpu.scatter_add.GpuScatterAdd` accept the
same indices and raise the same ``IndexError``; the rows are then taken with
``cupy.ndarray.take``.  The other twins are in :mod:`.views` and
:mod:`.reduction`; the rewrite is :mod:`aesara_bincount.gpu.lifting`.
"""
from aesara_bincount_core.cuda import launcher, modules, sources
from aesara_bincount_core.gpu.twin import GpuTwin
from aesara_bincount_core.gpu.type import cupy_module

__all__ = ["GpuAdvancedSubtensor1", "check_rows"]


def check_rows(idx, nrows: int, verb: str = "gather") -> None:
    """Raise ``IndexError`` unless every entry of ``idx`` is in ``[-nrows, nrows)``.

    Parameters
    ----------
    idx : cupy.ndarray, shape ``(N,)``, int8 ... uint64, any stride
    nrows : int
    verb : str
        The word the message opens with (``"gather"``, ``"scatter-set"``).

    Raises
    ------
    IndexError
        Naming the first index out of range and its position (the message of
        the scatter-add of rows, ``BC_MSG_ROW_INDEX``, opening with
        ``verb``).  A uint64 index of ``2**64 - k`` is out of
        range (the project's one deliberate difference from Aesara's graph,
        which reads it as ``-k``).
    nvrtc.NvrtcError, driver.CudaDriverError
        The check kernel cannot be compiled or launched.

    Notes
    -----
    Waits once for CuPy's current stream (the kernel's status is read back).
    """
    if idx.shape[0] == 0:
        return
    # The checking kernel depends on the index dtype only; the module's
    # adding kernel of float64 rows is named because the handle pair needs one.
    check, add = sources.rows_kernels(idx.dtype.name, "float64")
    kern = modules.rows_kernels_for(idx.dtype.name, check, add)
    try:
        launcher.scatter_rows(cupy_module(), None, 0, idx, 0, 0, idx, nrows, 1, True, kern)
    except IndexError as exc:  # the rows' message, named for the gather
        raise IndexError(str(exc).replace("scatter-add:", f"{verb}:", 1)) from None


class GpuAdvancedSubtensor1(GpuTwin):
    """Gather rows of a GPU array: ``out[i] = x[idx[i]]``.

    Parameters
    ----------
    host_op : aesara.tensor.subtensor.AdvancedSubtensor1
    checked : bool, optional
        ``idx`` is already checked: int64 rows in ``[0, V)`` that a
        :class:`~aesara_bincount_core.gpu.index_check.GpuIndexCheck` gave
        (the lifting pass builds the gather so, and the call reads the
        check's status when it ends); the gather then only takes the rows,
        with no wait.

    Notes
    -----
    Inputs: GPU ``x`` of shape ``(V, *rest)`` (any dtype and strides) and GPU
    ``idx`` of shape ``(N,)`` (int8 ... uint64, any stride; a negative index
    wraps once, as in NumPy).  Output: a new C-contiguous GPU array of shape
    ``(N, *rest)``.  Waits once for CuPy's current stream (the index check,
    see :func:`check_rows`), unless ``checked``; the copy of the rows is
    queued and not waited for.

    Raises
    ------
    IndexError
        When the function runs: an index outside ``[-V, V)``; nothing is
        computed and the inputs are unchanged.
    GpuUnavailableError
        When the function is compiled without a usable GPU.
    """

    __props__ = ("host_op", "checked")
    gpu_inputs = (0, 1)
    cpu_verb = "gather"
    #: For Ops pickled before the prop existed.
    checked = False

    def __init__(self, host_op, checked: bool = False):
        super().__init__(host_op)
        self.checked = bool(checked)

    def __str__(self):
        return "GpuAdvancedSubtensor1{checked}" if self.checked else "GpuAdvancedSubtensor1"

    def perform(self, node, inputs, output_storage, params=None):
        x, idx = inputs
        if self.checked:
            output_storage[0][0] = x.take(idx, axis=0)
            return
        check_rows(idx, x.shape[0])
        if idx.dtype.name == "uint64":
            idx = idx.astype("int64")  # every entry is below x.shape[0] now
        output_storage[0][0] = x.take(idx, axis=0)
