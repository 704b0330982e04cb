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
  does not check for negative values, until the pass refreshes it.  For a
  constant ``x`` Aesara has already folded that length into the output's
  static type when the graph was built; the pass replaces such a node and
  makes again the nodes that use it (:func:`_replace_static_lengths`).
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
from aesara.tensor.subtensor import AdvancedIncSubtensor, AdvancedIncSubtensor1

from aesara_bincount_core.op import Bincount
from aesara_bincount_core.semantics import INDEX_DTYPES, OUT_DTYPES

__all__ = ["BincountMatch", "match_bincount", "local_bincount", "BincountEarlyRewriter"]


@dataclass
class BincountMatch:
    """What :func:`match_bincount` found in a scatter-add node.

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
        Increments cast to ``out_dtype``: shape ``(N,)``, or ``()`` for one
        increment added for every element (in the scatter form also
        ``(1,)``); ``None`` for a count (the increment is 1).
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
    canonicalize makes of an ``Alloc`` under an ``add``) and constants count,
    also under a cast (``zeros(n, "float32").astype("float64")``: the node
    must not wait for a later rewrite to fold the cast, as ``ScatterAdd``'s
    rewrite, which takes every other scatter-add, would take it first).
    """
    if base.type.ndim != 1:
        return None
    base = _strip_casts(base)
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

    Matches ``AdvancedIncSubtensor1{inc}(base, y, idx)``, and
    ``AdvancedIncSubtensor{inc}(base, y, idx)`` with its one integer vector
    index (what ``inc_subtensor(base[idx], y)`` builds; Aesara makes it an
    ``AdvancedIncSubtensor1`` in ``specialize``), where ``base`` is a 1-D
    array of zeros (``Alloc(0, n)`` or a constant), ``y`` has at most one
    dimension and the output dtype is one of :data:`~aesara_bincount_core.semantics.OUT_DTYPES`.
    It is the bincount form when ``n`` is ``cast(max(idx) + 1)``, possibly
    under ``maximum(., minlength)``: the graph of
    :func:`aesara.tensor.extra_ops.bincount` (``MaxAndArgmax`` as built,
    ``Max`` after canonicalize), whatever the increment ``y``.  A ``y`` whose
    type is broadcastable, 0-d or ``(1,)`` (what canonicalize makes of
    ``fill(x, k)``), is added for every element of ``idx``, as
    the scatter-add broadcasts it; in the bincount form it becomes
    a 0-d weight, so that the length and the checks of the bincount form
    still apply.

    Parameters
    ----------
    node : Apply
        Any node; only a scatter-add that increments can match.

    Returns
    -------
    BincountMatch or None
        What the node computes, or None when it is not a scatter-add onto
        zeros that :class:`~aesara_bincount_core.op.Bincount` can replace.
    """
    op = node.op
    if not isinstance(op, (AdvancedIncSubtensor1, AdvancedIncSubtensor)) or op.set_instead_of_inc:
        return None
    if isinstance(op, AdvancedIncSubtensor) and (op.ignore_duplicates or len(node.inputs) != 3):
        return None
    base, y, idx = node.inputs
    out_dtype = node.outputs[0].type.dtype
    if (
        out_dtype not in OUT_DTYPES
        or y.type.ndim > 1
        or getattr(idx.type, "ndim", None) != 1
        or getattr(idx.type, "dtype", None) not in INDEX_DTYPES
    ):
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
    if minlength is not None:
        # What the graph computes is a bincount, whatever the shape of y: a
        # y typed (1,) is broadcast by the scatter-add, and is passed
        # as the 0-d weight that Bincount broadcasts in this mode.
        mode, n = "bincount", minlength
        if weights is not None and weights.type.ndim == 1 and weights.type.shape[0] == 1:
            weights = weights.dimshuffle()
    else:
        mode, n = "scatter", length
    if n.type.dtype != "int64":
        n = cast(n, "int64")
    return BincountMatch(mode, idx, n, weights, out_dtype)


@register_specialize("bincount", "cxx_only", name="local_bincount")
@node_rewriter([AdvancedIncSubtensor1, AdvancedIncSubtensor])
def local_bincount(fgraph, node):
    """Replace ``advanced_inc_subtensor1(zeros(n), w, x)`` by ``Bincount``.

    A node rewriter on ``AdvancedIncSubtensor1`` and ``AdvancedIncSubtensor``, registered under the tags
    ``fast_run`` and ``bincount`` in ``optdb`` at position 0.03 (through
    :class:`BincountEarlyRewriter`) and in ``optdb["specialize"]`` (position 2); the
    module docstring says why twice.  The forms it recognises are those of
    :func:`match_bincount`; the replacement has the type of the replaced
    output (dtype and static shape), so the rest of the graph is unchanged.
    It raises nothing itself: the errors of
    :class:`~aesara_bincount_core.op.Bincount` come when the function runs.
    """
    match = match_bincount(node)
    if match is None or _needs_retype(node, match):
        # A static length that the result will not have is replaced, with
        # the types that follow from it, by BincountEarlyRewriter.
        return False
    old = node.outputs[0]
    return replacement_for(old, _bincount_of(match, old))


def replacement_for(old: Variable, out: Variable) -> list:
    """A node rewriter's answer: ``[out]`` of ``old``'s type (converted where the
    types differ only in what is known statically), with ``old``'s stack trace."""
    if out.type != old.type:
        out = old.type.filter_variable(out, allow_convert=True)
    copy_stack_trace(old, out)
    return [out]


def _bincount_of(match: BincountMatch, old: Variable) -> Variable:
    """The output of a new ``Bincount`` node for ``match``, in place of ``old``."""
    out = Bincount(match.mode, out_dtype=match.out_dtype)(*match.inputs())
    copy_stack_trace(old, out)
    return out


def _constant_bincount_length(match: BincountMatch) -> Optional[int]:
    """The length of a bincount of a constant x and minlength, else None.

    None too when the bincount raises (a negative value).
    """
    n = _constant_value(match.n)
    if not isinstance(match.x, Constant) or n is None:
        return None
    x = np.asarray(match.x.data)
    if x.size == 0:
        return int(n)
    if int(x.min()) < 0:
        return None
    return max(int(x.max()) + 1, int(n))


def _needs_retype(node, match: BincountMatch) -> bool:
    """Does the output's static length differ from the one of ``Bincount``?

    Aesara computes the static length of ``zeros(max(x) + 1)`` when it can
    fold ``max(x) + 1``, that is for a constant ``x``, in ``x``'s dtype: a
    constant ``x`` at the top of its dtype (int8 127, int64 ``2**63 - 1``)
    gets a negative length, or, under ``maximum(., minlength)``, a wrong
    positive one.  A constant negative length in the scatter form (no
    output can have it) is one too.  No variable of ``Bincount``'s type can
    stand in for such an output.
    """
    static = node.outputs[0].type.shape[0]
    if static is None:
        return False
    if match.mode == "scatter":
        return static < 0
    return static != _constant_bincount_length(match)


def _replace_retyped(fgraph, old: Variable, new: Variable) -> bool:
    """Replace ``old`` by ``new``, of a type that ``old``'s does not accept.

    The nodes that depend on ``old`` are made again from the new inputs
    (``make_node``), so that their types follow from ``new``'s, and the
    outputs of ``fgraph`` they lead to are replaced.  Returns False, having
    changed nothing, when a node does not accept its new inputs.
    """
    memo = {old: new}
    try:
        for node in fgraph.toposort():
            if any(i in memo for i in node.inputs):
                remade = node.clone_with_new_inputs([memo.get(i, i) for i in node.inputs], strict=False)
                for o, r in zip(node.outputs, remade.outputs):
                    r.name = o.name
                    copy_stack_trace(o, r)
                    memo[o] = r
    except (TypeError, ValueError):
        return False
    for i, out in enumerate(list(fgraph.outputs)):
        if out in memo:
            # The output's type changes (from a length no array can have, or
            # a wrong one): Aesara's type check is what must be skipped.
            fgraph.change_node_input("output", i, memo[out], reason="pre_local_bincount", check=False)
    return True


def _replace_static_lengths(fgraph) -> int:
    """Put ``Bincount`` where the output's static length is wrong; the count."""
    count = 0
    while True:
        for node in fgraph.toposort():
            match = match_bincount(node)
            if match is not None and _needs_retype(node, match):
                old = node.outputs[0]
                if _replace_retyped(fgraph, old, _bincount_of(match, old)):
                    count += 1
                    break
        else:
            return count


class BincountEarlyRewriter(GraphRewriter):
    """:func:`local_bincount` on the graph as the user built it (optdb 0.03).

    First it replaces the scatter-adds whose static length ``Bincount``'s
    output will not have (a constant ``x`` at the top of its dtype), with
    the nodes that use them made again (:func:`_replace_static_lengths`);
    then it walks the graph with :func:`local_bincount` (Aesara's ``in2out``).
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
        replaced = _replace_static_lengths(fgraph)
        replaced += self._walk.apply(fgraph)[1]  # the walk's profile: (rewriter, count, ...)
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
