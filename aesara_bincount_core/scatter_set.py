"""The CPU :class:`ScatterSet` Op: the scatter-set of rows, the last one in index order wins."""
from aesara.gradient import DisconnectedType
from aesara.graph.basic import Apply, Constant
from aesara.tensor.basic import as_tensor_variable
from aesara.tensor.subtensor import _sum_grad_over_bcasted_dims, advanced_subtensor1, set_subtensor
from aesara.tensor.type import TensorType, discrete_dtypes

from aesara_bincount_core.c_file_op import CFileOp
from aesara_bincount_core.op import performs_cleanly
from aesara_bincount_core.semantics import SET_DTYPES, reference_scatter_set

__all__ = ["ScatterSet"]


class ScatterSet(CFileOp):
    r"""Write rows of values into the rows of a base that int64 row numbers name.

    The Op computes::

        out = base.copy()             # or base itself (inplace=True)
        for i in range(len(rows)):    # in index order: the last one wins
            out[rows[i]] = values[i]  # values broadcast to (N, *rest)

    which is numpy's ``out[rows] = values`` with the order of duplicate rows
    defined: **the last one in index order wins**, deterministically.  It
    replaces Aesara's ``AdvancedIncSubtensor1`` (set) and
    ``AdvancedIncSubtensor`` (set) with integer index arrays on the leading
    axes (``set_subtensor(W[idx], v)``, ``set_subtensor(M[rows, cols], v)``),
    whose indices the rewrite first checks and turns into rows with
    :class:`~aesara_bincount_core.linear_index.LinearIndex`; importing
    :mod:`aesara_bincount` registers that rewrite
    (:mod:`aesara_bincount.scatter_set_rewriting`).

    Parameters
    ----------
    inplace : bool, optional
        Write into the base itself (``destroy_map = {0: [0]}``); the rewrite
        ``local_inplace_scatter_add`` (position 60) sets it where Aesara
        allows it.

    Notes
    -----
    Inputs of the Apply node:

    - ``base``: ``(V, *rest)``, any dtype of
      :data:`~aesara_bincount_core.semantics.SET_DTYPES` (int8 ... uint64,
      float32, float64, bool), any strides;
    - ``values``: the base's dtype, at most as many dimensions, broadcast
      when the function runs to ``(N, *rest)``;
    - ``rows``: int64 ``(N,)``, any strides; a negative row wraps once.

    Output: ``(V, *rest)``, the base's dtype; C-contiguous unless in place.

    Errors, raised when the function runs, before anything is written (an
    in-place base keeps its value): ``IndexError`` for a row outside
    ``[-V, V)`` (the first one and its position); ``ValueError`` for values
    that do not broadcast to ``(N, *rest)``.  ``make_node`` raises
    ``TypeError`` for other dtypes, a 0-d base, values with more dimensions
    than the base, rows that are not an int64 vector.

    One thread, holding the GIL; elements are copied as bytes, so ``-0.0``
    and NaN payloads are kept.  Gradient as Aesara's set: the base gets
    ``g`` with the rows set to 0, the values ``g[rows]`` (summed over
    broadcast dimensions); rows are disconnected.  C code:
    ``c_code/cpu/scatter_set.c``.
    """

    __props__ = ("inplace",)
    c_sources = ("common/host_helpers.h", "common/scatter_checks.h", "cpu/scatter_set.c")
    c_function = "cpu_scatter_set"

    def __init__(self, inplace: bool = False):
        self.inplace = bool(inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}
        CFileOp.__init__(self)

    def clone_inplace(self) -> "ScatterSet":
        """The same Op, writing into its base in place."""
        return type(self)(inplace=True)

    def c_flags(self, node):
        return {"SS_INPLACE": int(self.inplace)}

    def make_node(self, base, values, rows):
        name = type(self).__name__
        base, values, rows = (as_tensor_variable(v) for v in (base, values, rows))
        if base.type.ndim < 1 or base.type.dtype not in SET_DTYPES:
            raise TypeError(f"{name}: the base must be an array of one of {SET_DTYPES}, got {base.type}")
        if values.type.dtype != base.type.dtype or values.type.ndim > base.type.ndim:
            raise TypeError(f"{name}: values must have dtype {base.type.dtype} and at most "
                            f"{base.type.ndim} dimensions, got {values.type}")
        if rows.type.ndim != 1 or rows.type.dtype != "int64":
            raise TypeError(f"{name}: rows must be an int64 vector, got {rows.type}")
        return Apply(self, [base, values, rows], [TensorType(base.type.dtype, shape=base.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        base, values, rows = inputs
        output_storage[0][0] = reference_scatter_set(base, values, rows, inplace=self.inplace)

    def do_constant_folding(self, fgraph, node):
        if self.inplace or not all(isinstance(i, Constant) for i in node.inputs):
            return False
        return performs_cleanly(node)

    def infer_shape(self, fgraph, node, input_shapes):
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[True], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        base, values, rows = inputs
        (g,) = output_grads
        if outputs[0].type.dtype in discrete_dtypes or outputs[0].type.dtype == "bool":
            return [base.zeros_like(dtype="floatX"), values.zeros_like(dtype="floatX"), DisconnectedType()()]
        g_base = set_subtensor(g[rows], 0)
        g_values = _sum_grad_over_bcasted_dims(values, advanced_subtensor1(g, rows))
        return [g_base, g_values, DisconnectedType()()]
