"""The entries of the GPU table (:mod:`aesara_bincount_core.gpu.table`), one family of Ops per module.

Importing this package fills the table.  Modules, grouped as Aesara groups
its Ops (``aesara/link/jax/dispatch/`` has one module per group too):

- :mod:`.twins`: the views, reductions and gather, which have GpuTwin
  classes of their own (:mod:`..views`, :mod:`..reduction`, :mod:`..gather`);
- :mod:`.blas`: ``Dot``, ``Dot22``, ``Dot22Scalar``, ``Gemm``, ``Gemv``,
  ``Ger``, ``BatchedDot`` (cuBLAS through CuPy);
- :mod:`.basic`: ``Alloc``, ``AllocEmpty``, ``Eye``, ``ARange``, ``MakeVector``, ``Join``, ``Split``,
  ``ExtractDiag``, ``AllocDiag``, ``Nonzero``;
- :mod:`.argmax`: ``Argmax``, ``MaxAndArgmax``;
- :mod:`.nnet`: softmax and the cross-entropy Ops with their gradients;
- :mod:`.extra_ops`: ``SearchsortedOp``, ``CumOp``, ``Repeat``, ``SortOp``,
  ``ArgSortOp``;
- :mod:`.subtensor`: ``IncSubtensor`` (inc and set, slices and integers),
  ``AdvancedSubtensor`` and ``AdvancedIncSubtensor`` (any mix of integer
  arrays and slices, checked on the device);
- :mod:`.shape`: ``SpecifyShape`` (the array itself, its shape checked), ``Unbroadcast``;
- :mod:`.raise_op`: ``Assert``, ``CheckAndRaise`` (host conditions on the
  host, GPU conditions on the device, read with the call's status);
- :mod:`.linear_index`: ``LinearIndex`` (several index arrays made one,
  checked on the device);
- :mod:`.notes`: the Ops served by rewrites of their own and those that
  stay on the host, for the documentation page.
"""
from aesara_bincount_core.gpu.entries import (  # noqa: F401 (each registers its entries)
    argmax,
    basic,
    blas,
    extra_ops,
    linear_index,
    nnet,
    notes,
    raise_op,
    shape,
    subtensor,
    twins,
)
