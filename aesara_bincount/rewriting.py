"""Graph rewrites that put :class:`~aesara_bincount_core.op.Bincount` into graphs.

Importing :mod:`aesara_bincount` registers :func:`local_bincount` twice in
Aesara's optimizer database, under the tags ``fast_run`` and ``bincount``
(``mode.excluding("bincount")`` switches both off), and ``cxx_only``: like
Aesara's other rewrites to C Ops, they stay out of the JAX and Numba modes
and of a configuration without a C compiler (``cxx=""``), which keep
Aesara's own graph:

- ``pre_local_bincount`` (:class:`BincountEarlyRewriter`), at position
  0.03: on the graph as the user built it, after the first merge (0) and
  before Aesara's passes that would hide the graph or its length:
  ``pre_local_IncSubtensor_serialize`` (0.99) moves the other terms of
  ``bincount(x) + acc`` into the zeros, which then no longer match;
  canonicalize (1) folds ``max(x) + 1`` of a constant ``x``; and Aesara's
  record of lengths (its ``ShapeFeature``) takes the output's length from
  ``max(x) + 1``, which overflows in small dtypes (int8 127 gives -128) and
  does not check for negative values, until the pass refreshes it.
- ``local_bincount`` in ``specialize`` (position 2, after canonicalize and
  before fusion at 49 and the in-place rewrites at 60-75): for scatter-adds
  whose zeros only appear in canonicalize, such as ``zeros_like(v)``.

:func:`match_bincount` is the pattern matcher shared with the GPU rewrite.
"""
from dataclasses import dataclass
from typing import Optional

import numpy as np
from aesara.compile import optdb
from aesara.graph.basic import Constant, Variable
from aesara.graph.rewriting.basic import GraphRewriter, copy_stack_trace, in2out, node_rewriter
from aesara.scalar import basic as aes
from aesara.tensor.basic import Alloc, cast, constant, get_scalar_constant_value
from aesara.tensor.elemwise import CAReduce, Elemwise
from aesara.tensor.extra_ops import BroadcastTo
from aesara.tensor.exceptions import NotScalarConstantError
from aesara.tensor.math import MaxAndArgmax
from aesara.tensor.rewriting.basic import register_specialize
from aesara.tensor.subtensor import AdvancedIncSubtensor1

from aesara_bincount_core.op import Bincount
from aesara_bincount_core.semantics import OUT_DTYPES

__all__ = ["BincountMatch", "match_bincount", "local_bincount", "BincountEarlyRewriter"]


@dataclass
class BincountMatch:
    """What :func:`match_bincount` found in an ``AdvancedIncSubtensor1`` node.

    Attributes
    ----------
    mode : str
        ``"bincount"`` (the length is ``max(max(x) + 1, minlength)``) or
        ``"scatter"`` (a fixed length ``n``).
    x : Variable
        The indices, shape ``(N,)``, integer dtype.  In the bincount form with
        ``assert_nonneg=True`` this is the ``Assert`` output, so the assertion
        still runs.
    n : Variable
        int64 scalar: ``minlength`` (0 if none) or the fixed length.
    weights : Variable or None
        Increments cast to ``out_dtype``, shape ``(N,)``, or ``()``/``(1,)``
        in the scatter form; ``None`` for a count (the increment is 1).
    out_dtype : str
        dtype of the replaced output.
    """

    mode: str
    x: Variable
    n: Variable
    weights: Optional[Variable]
    out_dtype: str

    def inputs(self):
        """Inputs of the Bincount node, in order.

        Returns
        -------
        list of Variable
            ``[x, n]``, then ``weights`` when there are weights.
        """
        return [self.x, self.n] + ([self.weights] if self.weights is not None else [])


def _constant_value(v: Variable):
    try:
        return get_scalar_constant_value(v)
    except NotScalarConstantError:
        return None


def _strip_casts(v: Variable) -> Variable:
    while (
        v.owner is not None
        and isinstance(v.owner.op, Elemwise)
        and isinstance(v.owner.op.scalar_op, aes.Cast)
    ):
        v = v.owner.inputs[0]
    return v


def _is_elemwise(v: Variable, scalar_op_type) -> bool:
    return (
        v.owner is not None
        and isinstance(v.owner.op, Elemwise)
        and isinstance(v.owner.op.scalar_op, scalar_op_type)
        and len(v.owner.inputs) == 2
    )


def _is_max_of(m: Variable, x: Variable) -> bool:
    """Is ``m`` the maximum of all of the vector ``x``?"""
    node = m.owner
    if node is None or node.inputs[0] is not x:
        return False
    if isinstance(node.op, MaxAndArgmax):
        return m is node.outputs[0] and tuple(node.op.axis) in ((0,), (-1,))
    if isinstance(node.op, CAReduce) and isinstance(node.op.scalar_op, aes.ScalarMaximum):
        return node.op.axis is None or tuple(node.op.axis) in ((0,), (-1,))
    return False


def _is_max_plus_one(v: Variable, x: Variable) -> bool:
    """Is ``v`` ``cast(max(x) + 1)``, as ``extra_ops.bincount`` builds it?"""
    v = _strip_casts(v)
    if not _is_elemwise(v, aes.Add):
        return False
    a, b = v.owner.inputs
    for one, top in ((a, b), (b, a)):
        if _constant_value(one) == 1 and _is_max_of(_strip_casts(top), x):
            return True
    return False


def _bincount_minlength(length: Variable, x: Variable) -> Optional[Variable]:
    """``minlength`` if ``length`` is the bincount length of ``x``, else None."""
    if _is_max_plus_one(length, x):
        return constant(0, dtype="int64")
    if _is_elemwise(length, aes.ScalarMaximum):
        a, b = length.owner.inputs
        if _is_max_plus_one(a, x):
            return b
        if _is_max_plus_one(b, x):
            return a
    return None


def _is_plus_zero(value) -> bool:
    """Is the scalar constant ``value`` a zero other than -0.0?"""
    # -0.0 is kept out: np.add.at with no increment would keep its sign.
    return value is not None and value == 0 and not np.signbit(value)


def _zeros_length(base: Variable) -> Optional[Variable]:
    """The length of ``base`` if it is a 1-D array of zeros, else None.

    ``Alloc(0, n)`` (what ``zeros`` builds), ``BroadcastTo(0, n)`` (what
    canonicalize makes of an ``Alloc`` under an ``add``) and constants count.
    """
    if base.type.ndim != 1:
        return None
    if base.owner is not None and isinstance(base.owner.op, (Alloc, BroadcastTo)):
        value, *shape = base.owner.inputs
        if len(shape) == 1 and _is_plus_zero(_constant_value(value)):
            return shape[0]
        return None
    if isinstance(base, Constant):
        data = np.asarray(base.data)
        if data.ndim == 1 and not data.any() and not np.signbit(data).any():
            return constant(data.shape[0], dtype="int64")
    return None


def match_bincount(node) -> Optional[BincountMatch]:
    """Recognise a scatter-add onto zeros, and whether it is a bincount.

    Matches ``AdvancedIncSubtensor1{inc}(base, y, idx)`` where ``base`` is a
    1-D array of zeros (``Alloc(0, n)`` or a constant), ``y`` has at most one
    dimension and the output dtype is one of :data:`~aesara_bincount_core.semantics.OUT_DTYPES`.
    It is the bincount form when ``n`` is ``cast(max(idx) + 1)``, possibly
    under ``maximum(., minlength)``, and ``y`` is the constant 1 or a vector:
    the graph of :func:`aesara.tensor.extra_ops.bincount` as it stands in
    ``specialize`` (``MaxAndArgmax`` there, ``Max`` later).

    Parameters
    ----------
    node : Apply
        Any node; only an ``AdvancedIncSubtensor1`` that increments can match.

    Returns
    -------
    BincountMatch or None
        What the node computes, or None when it is not a scatter-add onto
        zeros that :class:`~aesara_bincount_core.op.Bincount` can replace.
    """
    if not isinstance(node.op, AdvancedIncSubtensor1) or node.op.set_instead_of_inc:
        return None
    base, y, idx = node.inputs
    out_dtype = node.outputs[0].type.dtype
    if out_dtype not in OUT_DTYPES or y.type.ndim > 1 or idx.type.ndim != 1:
        return None
    length = _zeros_length(base)
    if length is None:
        return None

    # A constant 1, as a scalar or a broadcast (1,) vector, is a count.
    counting = (y.type.ndim == 0 or y.type.shape == (1,)) and _constant_value(y) == 1
    weights = None
    if not counting:
        weights = y if y.type.dtype == out_dtype else cast(y, out_dtype)

    minlength = _bincount_minlength(length, idx)
    # Weights in the bincount form have one value per element of idx.  A
    # vector of static length 1 (what canonicalize makes of fill(x, k)) is
    # broadcast by AdvancedIncSubtensor1, which the scatter form does too.
    per_element = y.type.ndim == 1 and y.type.shape[0] != 1
    if minlength is not None and (counting or per_element):
        mode, n = "bincount", minlength
    else:
        mode, n = "scatter", length
    if n.type.dtype != "int64":
        n = cast(n, "int64")
    return BincountMatch(mode, idx, n, weights, out_dtype)


@register_specialize("bincount", "cxx_only", name="local_bincount")
@node_rewriter([AdvancedIncSubtensor1])
def local_bincount(fgraph, node):
    """Replace ``advanced_inc_subtensor1(zeros(n), w, x)`` by ``Bincount``.

    A node rewriter on ``AdvancedIncSubtensor1``, registered under the tags
    ``fast_run`` and ``bincount`` in ``optdb`` at position 0.03 (through
    :class:`BincountEarlyRewriter`) and in ``optdb["specialize"]`` (position 2); the
    module docstring says why twice.  The forms it recognises are those of
    :func:`match_bincount`; the replacement has the type of the replaced
    output (dtype and static shape), so the rest of the graph is unchanged.
    It raises nothing itself: the errors of
    :class:`~aesara_bincount_core.op.Bincount` come when the function runs.
    """
    match = match_bincount(node)
    if match is None:
        return False
    old = node.outputs[0]
    if old.type.shape[0] is not None and old.type.shape[0] < 0:
        # Aesara computed a negative static length (max(x) + 1 of a constant
        # x overflowed in x's dtype): no output of this type can exist, so
        # the graph keeps Aesara's own error.
        return False
    out = Bincount(match.mode, out_dtype=match.out_dtype)(*match.inputs())
    if out.type != old.type:
        out = old.type.filter_variable(out, allow_convert=True)
    copy_stack_trace(old, out)
    return [out]


class BincountEarlyRewriter(GraphRewriter):
    """:func:`local_bincount` on the graph as the user built it (optdb 0.03).

    It walks the graph with :func:`local_bincount` (Aesara's ``in2out``).
    Aesara attaches its ``ShapeFeature`` before the first pass runs, so it
    has already recorded the length of each
    replaced output as Aesara's ``max(x) + 1``, computed in ``x``'s dtype
    (-128 for an int8 ``x`` holding 127) and blind to negative values; and it
    keeps such a record over the replacement's own.  When a node was
    replaced, the feature is therefore attached afresh, so that every length
    in the graph comes from the Ops now in it: the length of a bincount is
    read off ``Bincount``'s output (see :meth:`Bincount.infer_shape
    <aesara_bincount_core.op.Bincount.infer_shape>`).
    """

    def __init__(self):
        super().__init__()
        # Aesara's own walk: topological order, failures logged, not raised.
        self._walk = in2out(local_bincount, name="pre_local_bincount")

    def add_requirements(self, fgraph):
        self._walk.add_requirements(fgraph)

    def apply(self, fgraph):
        replaced = self._walk.apply(fgraph)[1]  # the walk's profile: (rewriter, count, ...)
        shape_feature = getattr(fgraph, "shape_feature", None)
        if replaced and shape_feature is not None:
            fgraph.remove_feature(shape_feature)
            fgraph.attach_feature(type(shape_feature)())
        return replaced


optdb.register(
    "pre_local_bincount",
    BincountEarlyRewriter(),
    "fast_run",
    "bincount",
    "cxx_only",
    position=0.03,
)
