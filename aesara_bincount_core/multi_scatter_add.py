"""The CPU :class:`MultiIndexScatterAdd` Op: a scatter-add with several index arrays in one pass."""

from aesara.gradient import DisconnectedType
from aesara.graph.basic import Apply
from aesara.tensor.basic import as_tensor_variable, cast
from aesara.tensor.subtensor import _sum_grad_over_bcasted_dims, advanced_subtensor1
from aesara.tensor.type import TensorType, discrete_dtypes

from aesara_bincount_core.linear_index import LinearIndex
from aesara_bincount_core.scatter_add import ScatterAdd, ScatterAddProps, static_length_vector
from aesara_bincount_core.semantics import INDEX_DTYPES, index_dtype_mask, reference_multi_index_scatter_add

__all__ = ["MultiIndexScatterAdd"]


class MultiIndexScatterAdd(ScatterAddProps):
    r"""``ScatterAdd(base, inc, LinearIndex(dims, idx_0, ...).flat)`` in one pass.

    ``MultiIndexScatterAdd(onto)(base, increments, dims, idx_0, ...,
    idx_{K-1})`` computes::

        out = base.copy()          # or base itself (inplace), or zeros (onto="zeros")
        rows = out.reshape(prod(dims), *rest)           # base is (V, *rest)
        for p in positions of B:   # B: the index arrays broadcast together, C order
            rows[ravel_multi_index((i_0[p] % d_0, ..., i_{K-1}[p] % d_{K-1}), dims)] += increments[p]

    where ``increments`` broadcast, NumPy style, to ``(*B, *rest)``: what
    :class:`~aesara_bincount_core.scatter_add.ScatterAdd` computes at the rows
    that :class:`~aesara_bincount_core.linear_index.LinearIndex` names, that
    is ``inc_subtensor(base.reshape(dims + rest)[idx_0, ..., idx_{K-1}],
    increments)`` (``np.add.at``).  The flat row of each position is computed
    inside the scatter's loop, a block of positions at a time in the L1 cache,
    instead of written to an array and read back.  The rewrite
    ``multi_index_one_pass`` (:mod:`aesara_bincount.multi_index_one_pass`) puts
    it in graphs where the ``LinearIndex`` and ``ScatterAdd`` of
    :mod:`aesara_bincount.multi_index` stayed on the host; there is no reason
    to build it by hand.

    Parameters
    ----------
    onto : {"base", "zeros"}
        As for ``ScatterAdd``: input 0 is the base ``(V, *rest)``, or the
        shape of a zero-filled one (an int64 vector of static length).
    inplace : bool, optional
        Add into the base itself (``onto="base"`` only; destroys input 0).
    openmp : bool, optional
        As for ``ScatterAdd``: with OpenMP and enough work, the flat rows are
        written to a buffer and added by ``ScatterAdd``'s threaded plans.

    Notes
    -----
    Inputs of the Apply node: the base (or its shape), the increments (the
    output's dtype, at most ``len(B) + len(rest)`` dimensions, any strides),
    ``dims`` (an integer vector of static length K >= 1: the sizes
    ``d_0 .. d_{K-1}``, whose product should be ``V``), then the K index
    arrays (int8 ... uint64, any shapes that broadcast together, any strides).
    Output: ``(V, *rest)``, the base's dtype (:data:`OUT_DTYPES
    <aesara_bincount_core.semantics.OUT_DTYPES>`).

    Semantics are those of the unfused pair: duplicate rows accumulate; a
    negative index wraps once on its own axis; integer sums wrap modulo
    ``2**bits``.  Float sums are taken in C order of ``B`` on one thread (so
    they are :func:`numpy.add.at`'s, bit for bit, -0.0 and NaN included);
    with OpenMP they follow ``ScatterAdd``'s threaded plans.  Integer counts
    (one value added at every position, rows of one element: confusion
    matrices, per-row histograms) are first counted into private 32-bit
    histograms, which gives the same sums.  The C code is
    ``c_code/cpu/multi_scatter_add.c`` with ``cpu/multi_scatter_add_loops.h``; the
    indices are checked and folded by ``cpu/index_fold.h``, the code that
    ``LinearIndex`` runs.

    Errors, raised when the compiled function runs, in the order of the
    unfused pair (the Op checks every index before it writes anything into a
    base in place, such as a shared variable being updated, which then keeps
    its value; a fresh output is dropped):

    - ``IndexError``: index shapes that do not broadcast; an index outside
      ``[-d_a, d_a)`` on axis ``a``, naming the value, its position in C order
      of ``B`` and the axis (the first bad one of the first axis that has
      one); where ``V`` is not ``prod(dims)``, a flat row outside ``[0, V)``,
      as ``ScatterAdd`` names it;
    - ``ValueError``: increments that do not broadcast to ``(*B, *rest)``;
      a negative dimension of the zero-filled base;
    - ``MemoryError``: a zero-filled base larger than the machine's memory.

    ``make_node`` raises ``TypeError`` for the forms ``ScatterAdd`` refuses,
    index arrays that are not integer tensors, and ``dims`` that is not an
    integer vector of length K.

    Gradient: as ``ScatterAdd``'s: ``g`` for a float base, ``g`` at the rows
    (summed over the broadcast dimensions) for float increments, zero for
    integer dtypes; ``dims`` and the indices are disconnected.  The call holds
    the GIL and runs on the CPU only.
    """

    __props__ = ("onto", "inplace", "openmp")
    c_sources = ("common/host_helpers.h", "cpu/worker_pool.h", "common/scatter_checks.h", "cpu/multi_scatter_add.c")
    c_function = "cpu_multi_scatter_add"

    def c_flags(self, node):
        return dict(self.scatter_flags(node), LI_NIDX=len(node.inputs) - 3,
                    LI_DTYPE_MASK=index_dtype_mask(i.type.dtype for i in node.inputs[3:]))

    def make_node(self, base, increments, dims, *indices):
        name = type(self).__name__
        indices = [as_tensor_variable(i) for i in indices]
        for i in indices:
            if i.type.dtype not in INDEX_DTYPES:
                raise TypeError(f"{name}: index arrays must have an integer dtype, got {i.type}")
        dims, k = static_length_vector(dims, f"{name}: dims")
        if k < 1 or k != len(indices):
            raise TypeError(f"{name}: dims has length {k} for {len(indices)} index arrays")
        if dims.type.dtype != "int64":
            dims = cast(dims, "int64")
        increments = as_tensor_variable(increments)
        # The base (or its shape), the dtype rules and the output: as
        # ScatterAdd has them, with one increment for a probe.
        probe = ScatterAdd(self.onto).make_node(
            base, TensorType(increments.type.dtype, shape=())(), TensorType("int64", shape=(None,))()
        )
        base, out_type = probe.inputs[0], probe.outputs[0].type
        indexed = max(i.type.ndim for i in indices) + out_type.ndim - 1
        if increments.type.ndim > indexed:
            raise TypeError(
                f"{name}: increments have {increments.type.ndim} dimensions, more than the "
                f"indexed shape's {indexed}"
            )
        return Apply(self, [base, increments, dims, *indices], [out_type()])

    def perform(self, node, inputs, output_storage, params=None):
        base, increments, dims, *indices = inputs
        output_storage[0][0] = reference_multi_index_scatter_add(
            base, increments, dims, indices, onto=self.onto, inplace=self.inplace
        )

    def infer_shape(self, fgraph, node, input_shapes):
        if self.onto == "zeros":
            shape = node.inputs[0]
            return [tuple(shape[k] for k in range(node.outputs[0].type.ndim))]
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[self.onto == "base"], [True]] + [[False]] * (len(node.inputs) - 2)

    def L_op(self, inputs, outputs, output_grads):
        base, increments, dims, *indices = inputs
        (g,) = output_grads
        rest = [g.shape[k] for k in range(1, g.type.ndim)]
        if outputs[0].type.dtype in discrete_dtypes:
            g_base = base.zeros_like(dtype="floatX")
            g_inc = increments.zeros_like(dtype="floatX")
        else:
            # As ScatterAdd's: g for the base, g at the rows for the increments.
            flat, bshape = LinearIndex()(dims, *indices)
            rows = advanced_subtensor1(g, flat)
            rows = rows.reshape([bshape[j] for j in range(bshape.type.shape[0])] + rest,
                                ndim=bshape.type.shape[0] + len(rest))
            g_base = g
            g_inc = _sum_grad_over_bcasted_dims(increments, rows)
        if self.onto == "zeros":
            g_base = DisconnectedType()()
        return [g_base, g_inc] + [DisconnectedType()() for _ in range(len(inputs) - 2)]
