"""Integer-index sets, ``set_subtensor(W[idx], v)``, become :class:`~aesara_bincount_core.scatter_set.ScatterSet`.

Importing :mod:`aesara_bincount` registers a rewrite (tags ``fast_run``,
``bincount``, ``cxx_only``):

- ``local_scatter_set`` in ``optdb["specialize"]`` (position 2): Aesara's
  ``AdvancedIncSubtensor1`` (set) and ``AdvancedIncSubtensor`` (set) with
  one or more integer index arrays on the leading axes, then only full
  slices, of a dtype of :data:`~aesara_bincount_core.semantics.SET_DTYPES`
  (bool included: a segmentation mask; Aesara's C code refuses booleans when
  the function runs).  The indices are checked and made rows by
  :class:`~aesara_bincount_core.linear_index.LinearIndex` (each axis's
  negative index wraps once, ``IndexError`` naming the axis, value and
  position), then ``ScatterSet`` writes the rows of the base reshaped to
  ``(prod(leading), *rest)`` (a view), in index order: with duplicate
  indices the last one wins, as numpy's assignment does, and nothing is
  written on error.
- :func:`~aesara_bincount.scatter_rewriting.local_inplace_scatter_add`
  (position 60, tag ``inplace`` too) makes ``ScatterSet`` write into its
  base where Aesara's destroy handler allows it.
"""
from aesara.graph.rewriting.basic import node_rewriter
from aesara.tensor.basic import cast
from aesara.tensor.rewriting.basic import register_specialize
from aesara.tensor.subtensor import AdvancedIncSubtensor, AdvancedIncSubtensor1

from aesara_bincount.multi_index import MultiIndexMatch, match_multi_index, rows_of_multi_index
from aesara_bincount.rewriting import replacement_for
from aesara_bincount_core.scatter_set import ScatterSet
from aesara_bincount_core.semantics import INDEX_DTYPES, SET_DTYPES

__all__ = ["match_scatter_set", "local_scatter_set"]


def match_scatter_set(node):
    """A :class:`~aesara_bincount.multi_index.MultiIndexMatch` of a set that ``ScatterSet`` takes, else None."""
    op = node.op
    if isinstance(op, AdvancedIncSubtensor1):
        base, y, idx = node.inputs
        out_dtype = node.outputs[0].type.dtype
        if (
            not op.set_instead_of_inc
            or out_dtype not in SET_DTYPES
            or idx.type.ndim != 1
            or idx.type.dtype not in INDEX_DTYPES
            or y.type.ndim > base.type.ndim
            or y.type.dtype.startswith("complex")
        ):
            return None
        values = y if y.type.dtype == out_dtype else cast(y, out_dtype)
        return MultiIndexMatch(base, values, [idx], True)
    match = match_multi_index(node, min_indices=1, dtypes=SET_DTYPES)
    if match is None or not match.set:
        return None
    return match


@register_specialize("bincount", "cxx_only", name="local_scatter_set")
@node_rewriter([AdvancedIncSubtensor1, AdvancedIncSubtensor])
def local_scatter_set(fgraph, node):
    """Replace an integer-index ``set_subtensor`` by ``LinearIndex`` and ``ScatterSet`` (see the module notes)."""
    match = match_scatter_set(node)
    if match is None:
        return False
    shape, rows_shape, values, flat = rows_of_multi_index(match, zeros_base=False)
    if len(match.indices) == 1:  # the rows are the base's own
        out = ScatterSet()(match.base, values, flat)
    else:
        view = match.base.reshape(rows_shape, ndim=len(rows_shape))
        out = ScatterSet()(view, values, flat).reshape(shape, ndim=len(shape))
    return replacement_for(node.outputs[0], out)
