"""GPU support: GPU-resident shared variables and :class:`GpuBincount`.

Importing this package registers, with no GPU needed and without importing
CuPy:

- the shared-variable constructor for CuPy arrays, so ``aesara.shared(cupy_array)``
  gives a :class:`GpuArraySharedVariable` (``aesara_bincount.gpu.shared``
  also takes NumPy arrays);
- the conversion of GPU variables to tensors (a ``HostFromGpu`` transfer), so
  they work in any Aesara expression;
- the GPU rewrite ``local_gpu_bincount`` (tags ``bincount``, ``gpu_bincount``).

CuPy is imported only when a GPU value is made or read, so ``import
aesara_bincount`` costs nothing on a machine without CuPy or GPU.  Install the
GPU part with ``pip install "aesara-bincount[cuda12]"`` (CuPy 13 for CUDA 12
and NVRTC 12); :func:`is_available` says whether a usable GPU is there.

The kernel layer (the package :mod:`aesara_bincount_core.cuda`; its public
functions are in :mod:`aesara_bincount_core.cuda.kernels`) imports neither
Aesara nor CuPy at import time.
"""
from aesara_bincount.gpu import rewriting
from aesara_bincount_core.gpu.transfer import GpuFromHost, HostFromGpu, gpu_from_host, host_from_gpu
from aesara_bincount_core.cuda.kernels import GpuUnavailableError, bincount_cupy, is_available
from aesara_bincount_core.gpu.op import GpuBincount, gpu_bincount
from aesara_bincount.gpu.rewriting import local_gpu_bincount
from aesara_bincount_core.gpu.type import GpuArrayType
from aesara_bincount_core.gpu.var import (
    GpuArrayConstant,
    GpuArraySharedVariable,
    GpuArrayVariable,
    gpu_shared,
)

#: ``aesara_bincount.gpu.shared(value)``: a GPU-resident shared variable.
shared = gpu_shared

__all__ = [
    "GpuArrayType",
    "GpuArrayVariable",
    "GpuArrayConstant",
    "GpuArraySharedVariable",
    "GpuFromHost",
    "HostFromGpu",
    "GpuBincount",
    "GpuUnavailableError",
    "bincount_cupy",
    "gpu_bincount",
    "gpu_from_host",
    "host_from_gpu",
    "is_available",
    "local_gpu_bincount",
    "rewriting",
    "shared",
]

