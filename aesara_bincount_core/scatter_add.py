"""The CPU :class:`ScatterAdd` Op: the scatter-add of rows, onto zeros or onto any base."""
from typing import Optional

import numpy as np
from aesara.gradient import DisconnectedType
from aesara.graph.basic import Apply, Constant
from aesara.tensor import get_vector_length
from aesara.tensor.basic import as_tensor_variable, cast
from aesara.tensor.subtensor import _sum_grad_over_bcasted_dims, advanced_subtensor1
from aesara.tensor.type import TensorType, discrete_dtypes

from aesara_bincount_core.c_file_op import OpenMPCFileOp
from aesara_bincount_core.op import _constant_int, performs_cleanly
from aesara_bincount_core.semantics import (
    INDEX_DTYPES,
    ONTO,
    OUT_DTYPES,
    reference_scatter_add,
)

__all__ = ["ScatterAdd", "scatter_add", "check_scatter_props", "static_length_vector"]


class ScatterAddProps(OpenMPCFileOp):
    """What the scatter-add Ops of the CPU share: the props ``onto`` and
    ``inplace`` (checked by :func:`check_scatter_props`; ``inplace`` destroys
    the base, input 0), their in-place clone and their common macros."""

    def __init__(self, onto: str = "base", inplace: bool = False, openmp: Optional[bool] = None):
        self.onto, self.inplace = check_scatter_props(type(self).__name__, onto, inplace)
        if self.inplace:
            self.destroy_map = {0: [0]}
        OpenMPCFileOp.__init__(self, openmp=openmp)

    def clone_inplace(self):
        """The same Op, adding into its base in place."""
        return type(self)(onto=self.onto, inplace=True, openmp=self.openmp)

    def scatter_flags(self, node) -> dict:
        """The macros of the scatter-add's C code that every such Op sets."""
        return {
            "SA_ONTO_ZEROS": int(self.onto == "zeros"),
            "SA_INPLACE": int(self.inplace),
            "SA_OUT_FLOAT": int(node.outputs[0].dtype.startswith("float")),
        }


class ScatterAdd(ScatterAddProps):
    r"""Add rows of increments into the rows of a base that integer indices name.

    The Op computes::

        out = base.copy()                 # or base itself (inplace=True),
                                          # or zeros(shape) (onto="zeros")
        for i in range(len(idx)):
            out[idx[i]] += increments[i]  # increments broadcast to (N, *rest)

    which is ``advanced_inc_subtensor1(base, increments, idx)``,
    ``inc_subtensor(base[idx], increments)``, ``np.add.at(out, idx,
    increments)`` and ``torch.index_add_(out, 0, idx, increments)``.  It
    replaces Aesara's ``AdvancedIncSubtensor1`` (inc) for rows of any rank:
    the gradient of ``W[idx]`` and sparse updates of ``W``; importing
    :mod:`aesara_bincount` registers the rewrites that put it in.

    Parameters
    ----------
    onto : {"base", "zeros"}
        ``"base"``: input 0 is the base array.  ``"zeros"``: input 0 is the
        shape of a zero-filled base, which the Op allocates itself (so no
        zero-filled array is built or kept in the graph).
    inplace : bool, optional
        Add into the base array itself (``onto="base"`` only).  The Op then
        destroys its input 0 (``destroy_map = {0: [0]}``): no copy, and the
        time follows the number of rows added, not the size of the base.  The
        rewrite ``local_inplace_scatter_add`` sets it where Aesara allows it
        (the update of a shared variable, a temporary).
    openmp : bool, optional
        Run with OpenMP threads.  Defaults to ``aesara.config.openmp``; the
        thread count follows ``OMP_NUM_THREADS``.

    Notes
    -----
    Inputs of the Apply node, in order:

    - ``base``: ``onto="base"``: ``(V, *rest)`` of any dtype of
      :data:`~aesara_bincount_core.semantics.OUT_DTYPES` (int8 ... uint64,
      float32, float64), any strides; ``onto="zeros"``: the shape
      ``(V, *rest)``, an int64 vector of static length (1 or more).
    - ``increments``: the output's dtype, at most as many dimensions as the
      output; broadcast when the function runs, NumPy style, to the indexed
      shape ``(N, *rest)``: a row added at every index, one value per index,
      a scalar.  Any strides.  The rewrite casts the increments to the base's
      dtype, as Aesara's C code does.
    - ``idx``: ``(N,)``, any integer dtype from int8 to uint64, any strides.

    Output: ``(V, *rest)`` of the base's dtype (``onto="zeros"``: of the
    increments' dtype), C-contiguous unless it is the base itself.

    Semantics are those of Aesara's ``AdvancedIncSubtensor1`` (inc) and of
    :func:`numpy.add.at`: duplicate indices accumulate; a negative index
    wraps once, Python style.  Integer sums wrap modulo ``2**bits``.  Float
    sums are taken in the output dtype; one thread, and the split by row
    with OpenMP (wide rows of an output of 32 MiB or more), add in index order, as NumPy does; the split by
    index (narrow rows, few against the increments) adds the blocks of
    ``idx``, dealt out in turn, into one partial sum per thread, so float
    results can then differ from :func:`numpy.add.at` in the last bits, and
    are the same on every call for a fixed thread count, whichever thread
    ran which block and however busy the machine.  The threads are the workers of the pool that
    :class:`~aesara_bincount.Bincount` uses (one per process): a
    call never waits for a worker that has not started (see
    :doc:`thread_safety`).  The algorithm is described in
    ``c_code/cpu/scatter_add.c`` and the three parts it includes
    (``cpu/scatter_add_check.h``, ``_loops.h``, ``_lanes.h``).

    Errors, raised when the compiled function runs (the Op checks every
    index before it writes anything, so an in-place base, such as a shared
    variable being updated, keeps its value; the process stays usable):

    - ``IndexError``: an index outside ``[-V, V)``, naming the first one and
      its position;
    - ``ValueError``: increments that cannot be broadcast to ``(N, *rest)``
      (such as a row count other than ``len(idx)`` or 1), after any
      ``IndexError``; a negative dimension of the zero-filled base;
    - ``MemoryError``: a zero-filled base larger than the machine's memory.

    ``make_node`` raises ``TypeError`` for a base of 0 dimensions or of
    another dtype, increments of another dtype than the output's or with
    more dimensions, an ``idx`` that is not a 1-D integer tensor, and a shape
    (``onto="zeros"``) that is not an integer vector of static length.

    Gradient: as Aesara's ``AdvancedIncSubtensor1``: ``g`` for a float base,
    ``g[idx]`` summed over the broadcast dimensions for float increments, a
    zero gradient for integer dtypes; ``idx`` and the shape are disconnected.

    The call holds the GIL; it runs on the CPU only.

    The GPU version, :class:`~aesara_bincount_core.gpu.scatter_add.GpuScatterAdd`,
    shares this interface: its ``make_node`` is this one, taking its arrays
    through :attr:`as_array` and building the output with
    :attr:`output_type` (GPU ones there; the shape of the zero-filled base
    stays on the host), and it takes ``infer_shape``,
    ``connection_pattern`` and ``L_op`` as they are.  Its host C code reuses
    the checks of ``c_code/common/scatter_checks.h`` and reports a bad index
    through a status that a checking kernel writes, read before the adding
    kernel is queued; that kernel adds wide rows with a warp per row
    (coalesced) and runs of equal indices (hot rows) through running sums in
    registers, with atomics whose order makes float sums nondeterministic.
    """

    __props__ = ("onto", "inplace", "openmp")
    _cop_num_inputs = 3
    _cop_num_outputs = 1
    c_sources = (
        "common/host_helpers.h",
        "cpu/worker_pool.h",
        "common/scatter_checks.h",
        "cpu/scatter_add.c",
    )
    c_function = "cpu_scatter_add"

    def c_flags(self, node):
        return dict(self.scatter_flags(node), SA_IDX_SIGNED=int(node.inputs[2].dtype.startswith("int")))

    # -- graph -------------------------------------------------------------
    #: How the base, the increments and idx become variables, and the
    #: output's Type (a GPU Op, sharing make_node, puts GPU ones here).
    as_array = staticmethod(as_tensor_variable)
    output_type = TensorType

    def make_node(self, base, increments, idx):
        name = type(self).__name__
        idx = self.as_array(idx)
        if idx.type.ndim != 1 or idx.type.dtype not in INDEX_DTYPES:
            raise TypeError(f"{name}: idx must be a 1-D integer tensor, got {idx.type}")
        increments = self.as_array(increments)
        if self.onto == "zeros":
            base, ndim = static_length_vector(base, f"{name}: the shape")
            if ndim < 1:
                raise TypeError(f"{name}: the shape must have at least one dimension")
            if base.type.dtype != "int64":
                base = cast(base, "int64")
            dtype = increments.type.dtype
            static = tuple(_constant_int(base[k]) for k in range(ndim))
            static = tuple(None if s is None or s < 0 else s for s in static)
        else:
            base = self.as_array(base)
            ndim, dtype, static = base.type.ndim, base.type.dtype, base.type.shape
            if ndim < 1:
                raise TypeError(f"{name}: the base must have at least one dimension")
        if dtype not in OUT_DTYPES:
            raise TypeError(f"{name}: unsupported dtype {dtype}; expected one of {OUT_DTYPES}")
        if increments.type.dtype != dtype:
            raise TypeError(f"{name}: increments must have dtype {dtype}, got {increments.type.dtype}")
        if increments.type.ndim > ndim:
            raise TypeError(
                f"{name}: increments have {increments.type.ndim} dimensions, "
                f"more than the output's {ndim}"
            )
        return Apply(self, [base, increments, idx], [self.output_type(dtype, shape=static)()])

    def perform(self, node, inputs, output_storage, params=None):
        base, increments, idx = inputs
        output_storage[0][0] = reference_scatter_add(
            base, increments, idx, onto=self.onto, inplace=self.inplace
        )

    def do_constant_folding(self, fgraph, node):
        # As Bincount: inputs that raise stay in the graph and raise when the
        # function runs, instead of failing the rewrite passes.
        if self.inplace or not all(isinstance(i, Constant) for i in node.inputs):
            return False
        return performs_cleanly(node)

    def infer_shape(self, fgraph, node, input_shapes):
        if self.onto == "zeros":
            shape = node.inputs[0]
            return [tuple(shape[k] for k in range(node.outputs[0].type.ndim))]
        return [input_shapes[0]]

    def connection_pattern(self, node):
        return [[self.onto == "base"], [True], [False]]

    def L_op(self, inputs, outputs, output_grads):
        base, increments, idx = inputs
        (g,) = output_grads
        if outputs[0].type.dtype in discrete_dtypes:
            g_base = base.zeros_like(dtype="floatX")
            g_inc = increments.zeros_like(dtype="floatX")
        else:
            g_base = g
            g_inc = _sum_grad_over_bcasted_dims(increments, advanced_subtensor1(g, idx))
        if self.onto == "zeros":
            g_base = DisconnectedType()()
        return [g_base, g_inc, DisconnectedType()()]


def static_length_vector(v, what: str):
    """``(v as an integer vector, its static length)``; ``TypeError`` naming ``what`` otherwise."""
    v = as_tensor_variable(v)
    if v.type.ndim != 1 or v.type.dtype not in INDEX_DTYPES:
        raise TypeError(f"{what} must be an integer vector, got {v.type}")
    try:
        return v, get_vector_length(v)
    except ValueError:
        raise TypeError(f"{what} must have a static length, got {v.type}")


def check_scatter_props(name: str, onto: str, inplace: bool):
    """Validate the ``onto`` and ``inplace`` of a scatter-add Op named ``name``.

    Returns ``(onto, bool(inplace))``.  Raises ``ValueError`` for an unknown
    ``onto`` and for ``inplace`` with ``onto="zeros"`` (there is no base to
    add into).
    """
    if onto not in ONTO:
        raise ValueError(f"{name}: unknown onto {onto!r}; expected one of {ONTO}")
    if inplace and onto != "base":
        raise ValueError(f"{name}: only onto='base' can be in place")
    return onto, bool(inplace)


def scatter_add(base, increments, idx):
    """Build ``ScatterAdd`` directly: ``base`` with ``increments`` added at the rows ``idx``.

    Most users need not call this: importing :mod:`aesara_bincount` makes
    ``inc_subtensor(base[idx], increments)`` and the gradient of ``W[idx]``
    use :class:`ScatterAdd`.

    Parameters
    ----------
    base : TensorVariable, shape ``(V, *rest)``
        int8 ... uint64, float32 or float64; not modified.
    increments : TensorVariable
        Broadcastable to ``(len(idx), *rest)``; cast to ``base.dtype``.
    idx : TensorVariable, shape ``(N,)``, integer dtype

    Returns
    -------
    TensorVariable, shape ``(V, *rest)``, dtype ``base.dtype``

    Raises
    ------
    TypeError
        When the graph is built: see :class:`ScatterAdd`.
    IndexError, ValueError
        When the function runs: see :class:`ScatterAdd`.
    """
    base = as_tensor_variable(base)
    increments = as_tensor_variable(increments)
    if increments.type.dtype != base.type.dtype:
        increments = cast(increments, base.type.dtype)
    return ScatterAdd("base")(base, increments, idx)
