"""Aesara's side of the GPU: the GPU array type, the transfer Ops and :class:`GpuBincount`.

These modules import Aesara.  Importing them registers no rewrite (the GPU
rewrite lives in :mod:`aesara_bincount.gpu`); importing
:mod:`~aesara_bincount_core.gpu.type` registers Aesara's shared-variable
constructor for CuPy arrays.  This module itself imports nothing.
"""
