"""The stand-alone GPU kernel layer: NVRTC, the CUDA driver API and the launcher.

Imports neither Aesara nor CuPy at import time (CuPy is imported on first
use), so ``import aesara_bincount_core.cuda.kernels`` works on a Python with
NumPy 2 and CuPy 14, where Aesara cannot be imported.  Its public functions
(``bincount_cupy``, ``histogram_pass``, ``is_available``, ``availability``,
``GpuUnavailableError``) are in :mod:`.kernels`, whose docstring lists the
modules by job.  This module itself imports nothing.
"""
