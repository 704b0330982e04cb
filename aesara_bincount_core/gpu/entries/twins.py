"""Table entries of the GPU twins written before the table: views, reductions, gather.

Each has a :class:`~aesara_bincount_core.gpu.twin.GpuTwin` class of its own
(:mod:`..views`, :mod:`..reduction`, :mod:`..gather`); the table names it, so
the lifting pass and the documentation page treat them as the other entries.
"""
from aesara.tensor.elemwise import CAReduce, DimShuffle
from aesara.tensor.math import All, Any, Max, Min, Prod, Sum
from aesara.tensor.shape import Reshape, Shape_i
from aesara.tensor.subtensor import AdvancedSubtensor1, Subtensor

from aesara_bincount_core.gpu.call_status import call_status
from aesara_bincount_core.gpu.gather import GpuAdvancedSubtensor1
from aesara_bincount_core.gpu.index_check import checked_rows
from aesara_bincount_core.gpu.reduction import GpuCAReduce, gpu_reduction_problem
from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.views import GpuDimShuffle, GpuReshape, GpuSubtensor


def _all_but_first(node):
    return tuple(range(1, len(node.inputs)))


register(
    DimShuffle, family="views", twin=GpuDimShuffle, cupy="cupy.ndarray.transpose, reshape",
    accepts_text="any dtype and strides", outputs="a view of the input",
)  # fmt: skip
register(
    Reshape, family="views", twin=GpuReshape, host_inputs=(1,), cupy="cupy.ndarray.reshape",
    accepts_text="any dtype; the shape stays on the host",
    outputs="a view when the strides allow one, else a C-contiguous copy",
)  # fmt: skip
register(
    Subtensor, family="views", twin=GpuSubtensor, host_inputs=_all_but_first,
    cupy="cupy.ndarray.__getitem__ (slices and integers)",
    accepts_text="any dtype and strides; the indices stay on the host", outputs="a view of the input",
)  # fmt: skip
def _gather_of_checked_rows(node, inputs):
    """``x[idx]`` on the GPU: the rows checked on the device (GpuIndexCheck), then taken."""
    x, idx = inputs
    rows = checked_rows(idx, "gather", Shape_i(0)(x), call_status())
    return [GpuAdvancedSubtensor1(node.op, checked=True)(x, rows)]


register(
    AdvancedSubtensor1, family="gather", twin=GpuAdvancedSubtensor1, build=_gather_of_checked_rows,
    cupy="cupy.ndarray.take, the indices checked on the device (GpuIndexCheck)",
    accepts_text="rows of any dtype, indices int8 ... uint64; lifted when the rows or the indices "
    "live on the GPU (host rows go to the GPU: a host vector gathered by GPU indices)",
    outputs="a new C-contiguous array; no wait (a bad index is raised when the call ends)",
)  # fmt: skip
for _reduction in (CAReduce, Sum, Prod, Max, Min, All, Any):
    register(
        _reduction, family="reductions", twin=GpuCAReduce, accepts=gpu_reduction_problem,
        cupy="cupy.ndarray.sum, prod, max, min, all, any",
        accepts_text="Add, Mul, Maximum, Minimum of any GPU dtype; AND, OR of bool; the host Op's "
        "accumulation dtype",
        outputs="a new array of the host Op's output dtype",
    )  # fmt: skip
