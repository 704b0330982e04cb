"""Aesara's side of the GPU: the GPU array type, its variables, the transfer Ops, :class:`GpuBincount` and :class:`GpuScatterAdd`.

These modules import Aesara.  Importing them registers no rewrite (the GPU
rewrite lives in :mod:`aesara_bincount.gpu`).  Modules, each importing only
those above it:

- :mod:`.type`: :class:`~.type.GpuArrayType`;
- :mod:`.transfer`: ``HostFromGpu`` / ``GpuFromHost``, and the ``"gpu"``
  target of Aesara's transfer registry;
- :mod:`.var`: GPU variables, constants and shared variables, and the
  shared-variable constructor for CuPy arrays (which ``import
  aesara_bincount`` registers with Aesara);
- :mod:`.c_file_op`: :class:`~.c_file_op.GpuCFileOp`, the base of the two GPU Ops;
- :mod:`.op`: :class:`~.op.GpuBincount`;
- :mod:`.scatter_add`: :class:`~.scatter_add.GpuScatterAdd` (the scatter-add of rows).

This package imports the first three, so that a GpuArrayType always has its
variables and transfers, whichever of its modules is imported first.
"""
from aesara_bincount_core.gpu import type, transfer, var  # noqa: F401, E402
