"""GPU support: GPU-resident shared variables and :class:`GpuBincount`.

Importing this package registers, with no GPU needed and without importing
CuPy:

- the shared-variable constructor for CuPy arrays, so ``aesara.shared(cupy_array)``
  gives a :class:`GpuArraySharedVariable` (``aesara_bincount.gpu.shared``
  also takes NumPy arrays);
- the conversion of GPU variables to tensors (a ``HostFromGpu`` transfer), so
  they work in any Aesara expression;
- the GPU rewrites ``local_gpu_bincount``, ``local_gpu_scatter_add``
  (:class:`GpuScatterAdd`, the scatter-add of rows) and
  ``local_gpu_scatter_set`` (:class:`GpuScatterSet`, the scatter-set of
  rows) (tags ``bincount``,
  ``gpu_bincount``), and before them the lifting pass ``gpu_lift``
  (:mod:`aesara_bincount.gpu.lifting`: elementwise work, reductions, views,
  shapes, gathers and every Op of the GPU table run on the GPU, host values
  go to the GPU work (:mod:`aesara_bincount.gpu.placement`); tag
  ``gpu_bincount``, name ``gpu_lift``);
- ``gpu_call_end`` (:mod:`aesara_bincount.gpu.call_end`): the results for
  the host and the call's status come back in one copy, with one wait;
- :func:`report` (``aesara_bincount.gpu.report(f)``): the transfers inside a
  compiled function, the Op that caused each and why it stayed on the host,
  and the GPU nodes that wait inside a call (:func:`inner_waits`).

CuPy is imported only when a GPU value is made or read, so ``import
aesara_bincount`` costs nothing on a machine without CuPy or GPU.  Install the
GPU part with ``pip install "aesara-bincount[cuda12]"`` (CuPy 13 for CUDA 12
and NVRTC 12); :func:`is_available` says whether a usable GPU is there (a bool), and
:func:`availability` what it found or what is missing.

The kernel layer (the package :mod:`aesara_bincount_core.cuda`; its public
functions are in :mod:`aesara_bincount_core.cuda.kernels`) imports neither
Aesara nor CuPy at import time.
"""
from aesara.compile.sharedvalue import shared_constructor
from aesara.tensor import _as_tensor_variable

from aesara_bincount.gpu import call_end, fusion, inplace_guard, lifting, multi_gather, rewriting  # noqa: F401 (registers the rewrites)
from aesara_bincount.gpu import scan  # noqa: F401, E402 (issue 39: the Scan lifter)
from aesara_bincount_core.gpu.transfer import GpuFromHost, HostFromGpu, gpu_from_host, host_from_gpu
from aesara_bincount_core.cuda.kernels import GpuUnavailableError, availability, bincount_cupy, is_available
from aesara_bincount_core.gpu.op import GpuBincount, gpu_bincount
from aesara_bincount.gpu.rewriting import local_gpu_bincount, local_gpu_scatter_add, local_gpu_scatter_set
from aesara_bincount.gpu.transfer_report import inner_waits, report
from aesara_bincount_core.gpu.scatter_add import GpuScatterAdd
from aesara_bincount_core.gpu.scatter_set import GpuScatterSet
from aesara_bincount_core.gpu.type import CupyArray, GpuArrayType
from aesara_bincount_core.gpu.var import (
    GpuArrayConstant,
    GpuArraySharedVariable,
    GpuArrayVariable,
    as_tensor_cupy_array,
    gpu_shared,
)

#: ``aesara_bincount.gpu.shared(value)``: a GPU-resident shared variable.
shared = gpu_shared


def register_cupy_arrays() -> None:
    """Make Aesara take CuPy arrays: ``aesara.shared`` and ``as_tensor_variable``.

    Registers :func:`gpu_shared` with ``aesara.compile.sharedvalue.shared_constructor``
    and :func:`~aesara_bincount_core.gpu.var.as_tensor_cupy_array` with
    ``aesara.tensor.as_tensor_variable`` for ``cupy.ndarray`` (recognised by
    its class, without importing CuPy).  Importing this package calls it;
    calling it again changes nothing.  It lives here, not beside the types,
    so that a process that only unpickles our types from Aesara's compile
    cache keeps Aesara's own behaviour for CuPy arrays.
    """
    shared_constructor.register(CupyArray)(gpu_shared)
    _as_tensor_variable.register(CupyArray)(as_tensor_cupy_array)


register_cupy_arrays()

__all__ = [
    "GpuArrayType",
    "GpuArrayVariable",
    "GpuArrayConstant",
    "GpuArraySharedVariable",
    "GpuFromHost",
    "HostFromGpu",
    "GpuBincount",
    "GpuScatterAdd",
    "GpuScatterSet",
    "GpuUnavailableError",
    "bincount_cupy",
    "gpu_bincount",
    "gpu_from_host",
    "host_from_gpu",
    "is_available",
    "availability",
    "local_gpu_bincount",
    "local_gpu_scatter_add",
    "local_gpu_scatter_set",
    "lifting",
    "rewriting",
    "register_cupy_arrays",
    "inner_waits",
    "report",
    "shared",
]

