"""Load the stand-alone GPU kernel layer, with or without a working Aesara.

``aesara_bincount/__init__.py`` imports Aesara, which needs NumPy 1.  On a
Python with NumPy 2 and CuPy 14 (a GPU machine's own stack), :func:`load`
registers ``aesara_bincount`` and ``aesara_bincount.gpu`` as bare packages
(their ``__init__`` files do not run), so that the kernel layer
(``aesara_bincount.gpu.kernels``, ``nvrtc``, ``driver``), which imports
neither Aesara nor CuPy at import time, loads on its own.  Used by
``benchmarks/bench_gpu.py`` and ``tests/gpu/test_cuda_kernel_layer.py``.
"""
import importlib
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def aesara_works() -> bool:
    """Whether ``import aesara`` succeeds here (it fails under NumPy 2)."""
    if "aesara_bincount" in sys.modules and not hasattr(sys.modules["aesara_bincount"], "__file__"):
        return False  # already loaded bare
    try:
        import aesara  # noqa: F401
    except Exception:
        return False
    return True


def load():
    """The module ``aesara_bincount.gpu.kernels``, imported with Aesara or without."""
    if aesara_works():
        return importlib.import_module("aesara_bincount.gpu.kernels")
    package = os.path.join(ROOT, "aesara_bincount")
    for name, path in (("aesara_bincount", package), ("aesara_bincount.gpu", os.path.join(package, "gpu"))):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [path]
            sys.modules[name] = module
    return importlib.import_module("aesara_bincount.gpu.kernels")
