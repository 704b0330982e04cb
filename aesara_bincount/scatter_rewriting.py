"""Graph rewrites that put :class:`~aesara_bincount_core.scatter_add.ScatterAdd` into graphs.

Importing :mod:`aesara_bincount` registers two rewrites, under the tags
``fast_run``, ``bincount`` (``mode.excluding("bincount")`` switches them
off, with :func:`~aesara_bincount.rewriting.local_bincount`) and
``cxx_only`` (the JAX and Numba modes, and a configuration without a C
compiler, keep Aesara's graph):

- ``local_scatter_add`` in ``optdb["specialize"]`` (position 2): every
  ``AdvancedIncSubtensor1`` that increments (not sets) becomes
  ``ScatterAdd`` (see :func:`match_scatter_add`), except the 1-D scatter-adds
  onto zeros, which :func:`~aesara_bincount.rewriting.local_bincount` turns
  into ``Bincount``.
- ``local_inplace_scatter_add``, a pass of its own at position 60 (tag
  ``inplace`` too), where Aesara makes its own ``AdvancedIncSubtensor1`` in
  place: ``ScatterAdd`` onto a base adds into the base itself wherever
  Aesara's destroy handler allows it (the update of a shared variable, an
  intermediate result no one else reads).

Unlike ``local_bincount``, ``local_scatter_add`` is not also run at
position 0.03, on the graph as built: nothing before ``specialize`` hides a
scatter-add of rows, and three of Aesara's rewrites before it need the
original node.  ``pre_local_IncSubtensor_serialize`` (0.99) turns a sum of
scatter-adds onto zeros (the gradient of a ``W`` indexed twice,
``W[i] + W[j]``) into a chain of scatter-adds onto one base, which then runs
in place, instead of one zero-filled array per term and an addition;
canonicalize turns ``zeros_like(W)`` into the ``Alloc`` matched here and
simplifies ``inc_subtensor(zeros[idx], y)[idx]``; and
``local_useless_inc_subtensor_alloc`` removes the ``Alloc`` that broadcasts
an increment (which ``local_scatter_add`` waits for: an increment that is an
``Alloc`` is left to it, and the node it builds is then replaced).  The
gradient of ``W[idx]``, ``AdvancedIncSubtensor`` before ``specialize``,
only becomes ``AdvancedIncSubtensor1`` there.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
from aesara.compile import optdb
from aesara.graph.basic import Constant, Variable
from aesara.graph.rewriting.basic import WalkingGraphRewriter, copy_stack_trace, node_rewriter
from aesara.scalar import basic as aes
from aesara.tensor.basic import Alloc, as_tensor_variable, cast, constant
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.extra_ops import BroadcastTo
from aesara.tensor.rewriting.basic import register_specialize
from aesara.tensor.subtensor import AdvancedIncSubtensor1

from aesara_bincount.rewriting import _constant_value, _is_plus_zero, match_bincount, replacement_for
from aesara_bincount_core.gpu.scatter_add import GpuScatterAdd
from aesara_bincount_core.gpu.scatter_set import GpuScatterSet
from aesara_bincount_core.multi_scatter_add import MultiIndexScatterAdd
from aesara_bincount_core.scatter_add import ScatterAdd
from aesara_bincount_core.scatter_set import ScatterSet
from aesara_bincount_core.semantics import OUT_DTYPES

__all__ = ["ScatterAddMatch", "match_scatter_add", "local_scatter_add", "local_inplace_scatter_add"]


@dataclass
class ScatterAddMatch:
    """What :func:`match_scatter_add` found in an ``AdvancedIncSubtensor1`` node.

    Attributes
    ----------
    onto : str
        ``"zeros"`` (the base is a zero-filled array) or ``"base"``.
    base : Variable
        ``"base"``: the base array, shape ``(V, *rest)``.  ``"zeros"``: its
        shape, an int64 vector of static length.
    increments : Variable
        Cast to the output's dtype; at most as many dimensions as the base.
    idx : Variable
        The indices, shape ``(N,)``, integer dtype.
    """

    onto: str
    base: Variable
    increments: Variable
    idx: Variable

    def inputs(self) -> List[Variable]:
        """Inputs of the ``ScatterAdd`` node, in order: base (or shape), increments, idx."""
        return [self.base, self.increments, self.idx]


def zeros_shape(base: Variable) -> Optional[List[Variable]]:
    """The shape of ``base``, one scalar per dimension, if it is all zeros, else None.

    Zeros are ``Alloc(0, *shape)`` (what ``zeros`` and, after canonicalize,
    ``zeros_like`` build), ``BroadcastTo(0, shape)``, ``second(v, 0)`` (what
    ``zeros_like(v)`` is before canonicalize) and constant arrays of zeros.
    -0.0 does not count: ``np.add.at`` would keep its sign where nothing is
    added.
    """
    node = base.owner
    if node is not None and isinstance(node.op, Alloc):
        value, *shape = node.inputs
        if len(shape) == base.type.ndim and _is_plus_zero(_constant_value(value)):
            return shape
        return None
    if node is not None and isinstance(node.op, BroadcastTo):
        value, *shape = node.inputs
        if len(shape) == base.type.ndim and _is_plus_zero(_constant_value(value)):
            return shape
        return None
    if (
        node is not None
        and isinstance(node.op, Elemwise)
        and isinstance(node.op.scalar_op, aes.Second)
    ):
        like, value = node.inputs
        if like.type.ndim == base.type.ndim and _is_plus_zero(_constant_value(value)) and all(
            value.type.broadcastable
        ):
            return [like.shape[k] for k in range(like.type.ndim)]
        return None
    if isinstance(base, Constant):
        data = np.asarray(base.data)
        if data.ndim >= 1 and not data.any() and not np.signbit(data).any():
            return [constant(d, dtype="int64") for d in data.shape]
    return None


def match_scatter_add(node) -> Optional[ScatterAddMatch]:
    """Recognise a scatter-add of rows that :class:`ScatterAdd` can replace.

    Matches ``AdvancedIncSubtensor1{inc}(base, y, idx)`` of an output dtype
    in :data:`~aesara_bincount_core.semantics.OUT_DTYPES`, for a base of any
    rank and an increment ``y`` of any rank up to the base's (broadcast when
    the function runs) and any dtype but complex, unless

    - :func:`~aesara_bincount.rewriting.match_bincount` matches it (a 1-D
      scatter-add onto zeros: that is ``Bincount``'s), or
    - ``y`` is an ``Alloc``, which Aesara's ``local_useless_inc_subtensor_alloc``
      removes in the same pass; the node it builds is matched then.

    Parameters
    ----------
    node : Apply
        Any node.

    Returns
    -------
    ScatterAddMatch or None
        ``onto="zeros"`` when the base is a zero-filled array
        (:func:`zeros_shape`), else ``onto="base"``.
    """
    if not isinstance(node.op, AdvancedIncSubtensor1) or node.op.set_instead_of_inc:
        return None
    base, y, idx = node.inputs
    out_dtype = node.outputs[0].type.dtype
    if out_dtype not in OUT_DTYPES or idx.type.ndim != 1 or y.type.ndim > base.type.ndim:
        return None
    if y.type.dtype.startswith("complex"):
        return None  # Aesara's C code drops the imaginary part; cast() refuses to
    if y.owner is not None and isinstance(y.owner.op, Alloc):
        return None
    if match_bincount(node) is not None:
        return None
    increments = y if y.type.dtype == out_dtype else cast(y, out_dtype)
    shape = zeros_shape(base)
    if shape is None:
        return ScatterAddMatch("base", base, increments, idx)
    shape = [as_tensor_variable(s) for s in shape]
    shape = as_tensor_variable([s if s.type.dtype == "int64" else cast(s, "int64") for s in shape])
    return ScatterAddMatch("zeros", shape, increments, idx)


@register_specialize("bincount", "cxx_only", name="local_scatter_add")
@node_rewriter([AdvancedIncSubtensor1])
def local_scatter_add(fgraph, node):
    """Replace ``advanced_inc_subtensor1(base, y, idx)`` (inc) by ``ScatterAdd``.

    A node rewriter on ``AdvancedIncSubtensor1`` in ``optdb["specialize"]``
    (position 2), tags ``fast_run``, ``bincount`` and ``cxx_only``; the forms
    it takes are those of :func:`match_scatter_add`.  The replacement has the
    type of the replaced output, so the rest of the graph is unchanged.  It
    raises nothing itself: the errors of ``ScatterAdd`` come when the
    function runs.
    """
    match = match_scatter_add(node)
    if match is None:
        return False
    old = node.outputs[0]
    out = ScatterAdd(match.onto)(*match.inputs())
    return replacement_for(old, out)


_IN_PLACE_OPS = (ScatterAdd, GpuScatterAdd, ScatterSet, GpuScatterSet, MultiIndexScatterAdd)


@node_rewriter(list(_IN_PLACE_OPS), inplace=True)
def local_inplace_scatter_add(fgraph, node):
    """Make ``ScatterAdd`` (or ``GpuScatterAdd``) onto a base add into the base in place.

    ``ScatterSet`` (the scatter-set of rows) is made to write into its base
    the same way, and so is ``MultiIndexScatterAdd`` (the one-pass scatter
    with several index arrays).

    Registered at position 60 of ``optdb`` (tags ``fast_run``, ``inplace``,
    ``bincount``, ``cxx_only``), as Aesara's
    ``local_inplace_AdvancedIncSubtensor1``: after ``add_destroy_handler``
    (49.5), whose destroy handler refuses the change where the base is still
    needed (a constant, an input that is not updated, a variable read
    elsewhere).
    """
    op = node.op
    if not isinstance(op, _IN_PLACE_OPS) or op.inplace:
        return False
    if getattr(op, "onto", "base") != "base":
        return False
    new = op.clone_inplace()(*node.inputs)
    copy_stack_trace(node.outputs, new)
    return [new]


optdb.register(
    "local_inplace_scatter_add",
    WalkingGraphRewriter(local_inplace_scatter_add, failure_callback=WalkingGraphRewriter.warn_inplace),
    "fast_run",
    "inplace",
    "bincount",
    "cxx_only",
    position=60,
)
