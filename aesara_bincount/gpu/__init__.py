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
from typing import Callable, Dict, Optional

import numpy as np

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
    "gpu_rows",
    "is_available",
    "local_gpu_bincount",
    "rewriting",
    "shared",
]


def gpu_rows(x_np, w_np=None) -> Dict[str, Callable[[], object]]:
    """Timed candidates for the main job (``python -m aesara_bincount``).

    Parameters
    ----------
    x_np : numpy.ndarray, shape ``(N,)``, integer dtype
    w_np : numpy.ndarray, shape ``(N,)``, optional

    Returns
    -------
    dict of str to callable
        Zero-argument callables, each doing one complete bincount and
        waiting for the GPU: the Aesara function with ``GpuBincount`` (data
        in GPU shared variables, result back on the host), the kernel layer
        alone, ``cupy.bincount``, and ``torch.bincount`` when PyTorch with
        CUDA is importable.

    Raises
    ------
    GpuUnavailableError
        No usable GPU.
    """
    ok, why = is_available()
    if not ok:
        raise GpuUnavailableError(why)
    import aesara
    import cupy
    from aesara.tensor.extra_ops import bincount

    x_gpu = cupy.asarray(x_np)
    w_gpu = None if w_np is None else cupy.asarray(w_np)
    gx = shared(x_gpu, borrow=True, name="x_gpu")
    kwargs = {} if w_np is None else {"weights": shared(w_gpu, borrow=True, name="w_gpu")}
    f = aesara.function([], bincount(gx, **kwargs))
    if not any(isinstance(n.op, GpuBincount) for n in f.maker.fgraph.toposort()):
        raise RuntimeError("the GPU rewrite did not fire")
    expected = np.bincount(x_np, weights=w_np)
    if not np.allclose(f(), expected) or not np.allclose(cupy.asnumpy(bincount_cupy(x_gpu, w_gpu)), expected):
        raise RuntimeError("GpuBincount differs from numpy.bincount")
    sync = cupy.cuda.get_current_stream().synchronize

    def run_kernel():
        out = bincount_cupy(x_gpu, w_gpu)
        sync()
        return out

    def run_cupy():
        out = cupy.bincount(x_gpu, weights=w_gpu)
        sync()
        return out

    rows: Dict[str, Callable[[], object]] = {
        "GpuBincount, aesara.function (host out)": f,
        "GpuBincount kernel layer (device out)": run_kernel,
        "cupy.bincount (device out)": run_cupy,
    }
    torch_row = _torch_row(x_gpu, w_gpu)
    if torch_row is not None:
        rows["torch.bincount (device out)"] = torch_row
    return rows


def _torch_row(x_gpu, w_gpu) -> Optional[Callable[[], object]]:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    xt = torch.as_tensor(x_gpu, device="cuda")
    wt = None if w_gpu is None else torch.as_tensor(w_gpu, device="cuda")

    def run_torch():
        out = torch.bincount(xt, weights=wt)
        torch.cuda.synchronize()
        return out

    return run_torch
