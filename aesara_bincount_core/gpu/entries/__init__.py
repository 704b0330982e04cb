"""The entries of the GPU table (:mod:`aesara_bincount_core.gpu.table`), one family of Ops per module.

Importing this package fills the table.  Modules, grouped as Aesara groups
its Ops (``aesara/link/jax/dispatch/`` has one module per group too):

- :mod:`.twins`: the views, reductions and gather, which have GpuTwin
  classes of their own (:mod:`..views`, :mod:`..reduction`, :mod:`..gather`);
- :mod:`.blas`: ``Dot``, ``Dot22``, ``Dot22Scalar``, ``Gemm``, ``Gemv``,
  ``Ger``, ``BatchedDot`` (cuBLAS through CuPy);
- :mod:`.basic`: ``Alloc``, ``AllocEmpty``, ``Eye``, ``Join``, ``Split``,
  ``ExtractDiag``, ``AllocDiag``, ``Nonzero``;
- :mod:`.argmax`: ``Argmax``, ``MaxAndArgmax``;
- :mod:`.nnet`: softmax and the cross-entropy Ops with their gradients;
- :mod:`.extra_ops`: ``SearchsortedOp``, ``CumOp``, ``Repeat``, ``SortOp``,
  ``ArgSortOp``;
- :mod:`.subtensor`: ``IncSubtensor`` (inc and set, slices and integers);
- :mod:`.shape`: ``SpecifyShape`` (the array itself, its shape checked);
- :mod:`.notes`: the Ops served by rewrites of their own and those that
  stay on the host, for the documentation page.
"""
from aesara_bincount_core.gpu.entries import (  # noqa: F401 (each registers its entries)
    argmax,
    basic,
    blas,
    extra_ops,
    nnet,
    notes,
    shape,
    subtensor,
    twins,
)
