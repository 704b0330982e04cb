"""The CPU :class:`Bincount` Op."""
from typing import Optional

import numpy as np
from aesara.gradient import DisconnectedType
from aesara.graph.basic import Apply, Constant
from aesara.tensor.basic import as_tensor_variable, cast, constant
from aesara.tensor.shape import Shape_i
from aesara.tensor.subtensor import advanced_subtensor1
from aesara.tensor.type import TensorType

from aesara_bincount_core import cpu_plan
from aesara_bincount_core.c_file_op import OpenMPCFileOp
from aesara_bincount_core.semantics import (
    INDEX_DTYPES,
    MODES,
    OUT_DTYPES,
    reference_bincount,
)

__all__ = ["Bincount", "bincount", "FOLD_MAX_BYTES"]

#: Largest output, in bytes, that constant folding computes while compiling.
FOLD_MAX_BYTES = 1 << 20


class Bincount(OpenMPCFileOp):
    r"""Count, or sum weights, into integer-indexed bins: a fast scatter-add.

    The Op computes, for ``i`` in ``range(len(x))``::

        out[x[i]] += 1            # without weights
        out[x[i]] += weights[i]   # with weights

    on a zero-filled ``out`` whose length depends on ``mode``.  It replaces the
    graph that :func:`aesara.tensor.extra_ops.bincount` builds
    (``advanced_inc_subtensor1(zeros(max(x) + 1), 1, x)``), and the general
    scatter-add ``advanced_inc_subtensor1(zeros(n), w, idx)``; importing
    :mod:`aesara_bincount` registers the rewrite that puts it in.

    Parameters
    ----------
    mode : {"bincount", "scatter"}
        ``"bincount"``: ``out`` has ``max(max(x) + 1, n)`` bins, where the
        input ``n`` is ``minlength``; a negative value of ``x`` raises
        ``ValueError``, as :func:`numpy.bincount` does.
        ``"scatter"``: ``out`` has exactly ``n`` bins; negative indices wrap
        once, Python style, and an index outside ``[-n, n)`` raises
        ``IndexError``, as :func:`numpy.add.at` does.
    out_dtype : str, optional
        dtype of ``out``.  Defaults to the dtype of the weights, or to the
        dtype of ``x`` without weights, which is what Aesara's own graph
        produces (:func:`numpy.bincount` returns ``intp`` / ``float64``
        instead).  One of int8 ... uint64, float32, float64.
    openmp : bool, optional
        Run with OpenMP threads.  Defaults to ``aesara.config.openmp``; the
        thread count follows ``OMP_NUM_THREADS``.

    Notes
    -----
    Inputs of the Apply node, in order:

    - ``x``: ``(N,)``, any integer dtype from int8 to uint64, any strides.
    - ``n``: ``()``, integer: ``minlength`` (``"bincount"``) or the exact
      length (``"scatter"``); it is cast to int64.
    - ``weights`` (optional): ``(N,)`` or ``()`` of dtype ``out_dtype``; a
      0-d weight is added for every element of ``x`` (broadcast).  In
      ``"scatter"`` mode a ``(1,)`` vector is broadcast too, as
      :func:`numpy.add.at` does; in ``"bincount"`` mode a vector must have
      the length of ``x``, as for :func:`numpy.bincount` (the rewrite passes
      weights typed ``(1,)`` as a 0-d weight).

    Output: ``(n_bins,)`` of dtype ``out_dtype``.

    Integer sums wrap modulo ``2**bits`` of ``out_dtype`` (an int8 count of
    128 reads -128), exactly as Aesara's graph does.  Float sums are taken in
    ``out_dtype`` (float32 weights accumulate in float32); the order of the
    additions differs from the sequential loop of NumPy (interleaved copies
    and, with OpenMP, one partial histogram per thread), so float results can
    differ from :func:`numpy.add.at` in the last bits.  For a fixed input and
    thread count the result is the same on every call.

    Errors, raised when the compiled function runs (the Op leaves all its
    inputs unchanged and the process usable):

    - ``ValueError``: a negative value of ``x`` in ``"bincount"`` mode, naming
      the first one; ``max(x) + 1`` that no array length can hold (int64
      ``2**63 - 1``, uint64 values from ``2**63``); vector weights whose
      length differs from ``x`` (``"bincount"``) or cannot be broadcast to
      it (``"scatter"``); a negative ``n``.
    - ``IndexError``: in ``"scatter"`` mode, an index outside ``[-n, n)``,
      naming the first one.
    - ``MemoryError``: an output larger than the machine's physical memory,
      e.g. ``x = [2**40]``.

    ``make_node`` raises ``TypeError`` for an ``x`` that is not a 1-D integer
    tensor, an ``n`` that is not an integer scalar, and weights of another
    dtype than ``out_dtype`` or the wrong number of dimensions.

    Gradient: with respect to float ``weights`` it is ``g[x]`` (summed over
    ``x`` for a broadcast ``()``/``(1,)`` increment), where ``g`` is the
    gradient of the output; integer weights get a zero gradient, and ``x``
    and ``n`` are disconnected.

    The algorithm (one pass over ``x`` with privatized, interleaved
    histograms, or a direct path for many bins) is described in
    ``c_code/cpu/bincount.c`` (the driver) and in the file of each counting
    regime it includes, ``c_code/bincount_cpu_*.h``.  The call holds the GIL;
    it runs on the CPU only and never synchronises with a device.  Counts
    into many bins (an output of 1 MiB or more, one counting thread) are
    counted into the output itself, allocated a sixteenth above the sampled
    length: that output is then a C-contiguous, writeable view whose
    ``base`` is the whole block.
    """

    __props__ = ("mode", "out_dtype", "openmp")
    _cop_num_inputs = 3
    _cop_num_outputs = 1
    # The regime files bincount_cpu_*.h are per-instantiation headers that
    # cpu/bincount.c includes: the include closure hashes them (CFileOp).
    c_sources = ("common/host_helpers.h", "cpu/worker_pool.h", "cpu/bincount.c")
    c_function = "cpu_bincount"

    def __init__(
        self,
        mode: str = "bincount",
        out_dtype: Optional[str] = None,
        openmp: Optional[bool] = None,
    ):
        self.mode, self.out_dtype = check_props(type(self).__name__, mode, out_dtype)
        OpenMPCFileOp.__init__(self, openmp=openmp)

    def c_flags(self, node):
        return {
            "BC_SCATTER": int(self.mode == "scatter"),
            "BC_OUT_FLOAT": int(node.outputs[0].dtype.startswith("float")),
        }

    def prepare_node(self, node, storage_map, compute_map, impl):
        super().prepare_node(node, storage_map, compute_map, impl)
        if impl == "c":
            # The CPU plan, which the C code reads at each call: made once per
            # process, by the first compiled function (cpu_plan.current).
            cpu_plan.current()

    # -- graph -------------------------------------------------------------
    #: How ``x`` and ``weights`` become variables, and the output's Type
    #: (the GPU Op, which shares make_node, puts GPU ones here).
    as_array = staticmethod(as_tensor_variable)
    output_type = TensorType

    def make_node(self, x, n, weights=None):
        name = type(self).__name__
        x = self.as_array(x)
        if x.type.ndim != 1:
            raise TypeError(f"{name}: x must be a 1-D tensor, got {x.type.ndim} dimensions")
        if x.type.dtype not in INDEX_DTYPES:
            raise TypeError(f"{name}: x must have an integer dtype, got {x.type.dtype}")
        n = _as_length(n, name)
        inputs = [x, n]
        out_dtype = self.out_dtype
        if weights is not None:
            weights = self.as_array(weights)
            out_dtype = out_dtype or weights.type.dtype
            if weights.type.ndim not in (0, 1):
                raise TypeError(
                    f"{name}: weights must have 0 or 1 dimension(s), got {weights.type.ndim}"
                )
            if weights.type.dtype != out_dtype:
                raise TypeError(
                    f"{name}: weights must have dtype {out_dtype}, got {weights.type.dtype}"
                )
            inputs.append(weights)
        out_dtype = out_dtype or x.type.dtype
        if out_dtype not in OUT_DTYPES:
            raise TypeError(f"{name}: unsupported output dtype {out_dtype}")
        length = _constant_int(n) if self.mode == "scatter" else None
        if length is not None and length < 0:
            length = None  # the C code raises ValueError when it runs
        return Apply(self, inputs, [self.output_type(out_dtype, shape=(length,))()])

    def perform(self, node, inputs, output_storage, params=None):
        x, n = inputs[:2]
        weights = inputs[2] if len(inputs) > 2 else None
        output_storage[0][0] = reference_bincount(
            x, int(n), weights, mode=self.mode, out_dtype=node.outputs[0].dtype
        )

    def do_constant_folding(self, fgraph, node):
        # Aesara folds a node whose inputs are all constants by running it
        # while it compiles.  Inputs that raise (a negative value, an index
        # out of range) would make every rewrite pass log a "Rewrite failure"
        # traceback; such a node is left in the graph and raises when the
        # function is called, as it does for inputs that are not constants.
        # A large output is not folded either: it would be computed (and its
        # memory held) while compiling, and stored in the compiled function.
        if not all(isinstance(i, Constant) for i in node.inputs):
            return False
        x, n = node.inputs[0].data, int(node.inputs[1].data)
        nbins = n
        if self.mode == "bincount" and x.size:
            nbins = max(int(x.max()) + 1, n)
        if nbins * node.outputs[0].type.numpy_dtype.itemsize > FOLD_MAX_BYTES:
            return False
        return performs_cleanly(node)

    def infer_shape(self, fgraph, node, input_shapes):
        if self.mode == "scatter":
            return [(node.inputs[1],)]
        # The bincount length depends on the data (max(x) + 1), so the shape
        # is read off the output itself, as Aesara's own Unique does for its
        # data-dependent outputs.  A shape graph of its own would read x a
        # second time (and on the GPU copy it to the host), and would skip
        # the checks: a negative value must raise even when only the length
        # of the result is used.
        return [(Shape_i(0)(node.outputs[0]),)]

    def connection_pattern(self, node):
        return [[False], [False]] + ([[True]] if len(node.inputs) > 2 else [])

    def L_op(self, inputs, outputs, output_grads):
        x, n = inputs[:2]
        grads = [DisconnectedType()(), DisconnectedType()()]
        if len(inputs) > 2:
            weights = inputs[2]
            (g,) = output_grads
            if weights.type.dtype.startswith("float"):
                gw = advanced_subtensor1(g, x)
                if weights.type.ndim == 0:
                    gw = gw.sum()
                elif weights.type.shape[0] == 1:
                    gw = gw.sum(keepdims=True)
            else:
                gw = weights.zeros_like().astype("floatX")
            grads.append(gw)
        return grads


def check_props(name: str, mode: str, out_dtype: Optional[str]):
    """Validate the ``mode`` and ``out_dtype`` of a bincount Op named ``name``.

    Returns ``(mode, out_dtype)`` with ``out_dtype`` normalized to a dtype
    name (or None).  Raises ``ValueError`` for an unknown mode and
    ``TypeError`` for an unsupported dtype.
    """
    if mode not in MODES:
        raise ValueError(f"{name}: unknown mode {mode!r}; expected one of {MODES}")
    if out_dtype is not None:
        out_dtype = np.dtype(out_dtype).name
        if out_dtype not in OUT_DTYPES:
            raise TypeError(
                f"{name}: unsupported out_dtype {out_dtype!r}; expected one of {OUT_DTYPES}"
            )
    return mode, out_dtype


def performs_cleanly(node) -> bool:
    """Whether ``node.op.perform`` runs on the constant inputs of ``node`` without raising.

    ``ValueError``, ``IndexError`` and ``MemoryError`` (what the Ops raise for
    bad input) give False, so that the constant-folding checks of the Ops
    leave such a node in the graph, to raise when the function runs.
    """
    try:
        node.op.perform(node, [i.data for i in node.inputs], [[None]])
    except (ValueError, IndexError, MemoryError):
        return False
    return True


def _as_length(n, name: str):
    """The length input ``n`` of a bincount Op as an int64 scalar variable.

    Raises
    ------
    TypeError
        If ``n`` is not an integer scalar (``name`` is the Op's, for the message).
    """
    n = as_tensor_variable(n)
    if n.type.ndim != 0 or n.type.dtype not in INDEX_DTYPES:
        raise TypeError(f"{name}: n must be an integer scalar, got {n.type}")
    return n if n.type.dtype == "int64" else cast(n, "int64")


def _constant_int(v) -> Optional[int]:
    """The value of a constant integer scalar graph, else None."""
    from aesara.tensor.basic import get_scalar_constant_value
    from aesara.tensor.exceptions import NotScalarConstantError

    try:
        return int(get_scalar_constant_value(v))
    except NotScalarConstantError:
        return None


def bincount(x, weights=None, minlength=None):
    """Build a :class:`Bincount` graph directly (``numpy.bincount`` semantics).

    Most users need not call this: importing :mod:`aesara_bincount` makes
    :func:`aesara.tensor.extra_ops.bincount` use :class:`Bincount`.

    Parameters
    ----------
    x : TensorVariable, shape ``(N,)``, integer dtype
        Non-negative values to count.
    weights : TensorVariable, shape ``(N,)`` or ``()``, optional
        Added to the bin of the matching ``x``; int or float dtype.  A 0-d
        weight is added for every element.
    minlength : int or integer scalar TensorVariable, optional
        Least number of bins; must be non-negative.

    Returns
    -------
    TensorVariable, shape ``(max(max(x) + 1, minlength),)``
        dtype ``weights.dtype``, or ``x.dtype`` without weights (as in
        Aesara's graph; wraps on overflow of small integer dtypes).

    Raises
    ------
    TypeError
        When the graph is built: ``x`` is not a 1-D integer tensor.
    ValueError, MemoryError
        When the function runs: see :class:`Bincount`.
    """
    if minlength is None:
        minlength = constant(0, dtype="int64")
    if weights is None:
        return Bincount("bincount")(x, minlength)
    return Bincount("bincount")(x, minlength, weights)
