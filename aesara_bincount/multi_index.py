"""Scatter-adds with several integer index arrays: ``inc_subtensor(z[rows, cols], v)``.

Importing :mod:`aesara_bincount` registers :func:`local_multi_index_scatter_add`
in ``optdb["specialize"]`` (position 2; tags ``fast_run``, ``bincount``,
``cxx_only``).  It takes Aesara's ``AdvancedIncSubtensor`` (inc) whose
indices are two or more integer arrays on the leading axes, optionally
followed by full slices ``:``, onto zeros or onto any base: confusion
matrices ``zeros((K, K))[y, p] += 1``, batched histograms
``zeros((B, K))[row, x] += 1``, 2-D histograms, sparse assembly, and the
gradient of ``x[arange(n), y]`` (which Aesara builds as such a node onto
``zeros_like(x)``).  The node becomes::

    flat, bshape = LinearIndex()(base.shape[:K], idx_0, ..., idx_{K-1})
    rows = base.reshape((prod(base.shape[:K]), *rest))        # a view
    out = ScatterAdd(...)(rows, increments, flat).reshape(base.shape)

so the indices are checked (each axis's negative index wraps once; an index
out of range on any axis raises ``IndexError`` naming the axis, the value
and its position) before anything is written, and the rows are added by
the C ``ScatterAdd``, in place where Aesara allows it (the reshape of the
base is a view, which ``local_inplace_scatter_add`` makes the Op add into).
Index arrays of two or more dimensions, which broadcast to a block, have the
increments broadcast to the indexed shape ``(*B, *rest)`` and flattened to
``(prod(B), *rest)`` first.

Aesara's ``AdvancedIncSubtensor`` keeps every other form: boolean masks,
``None`` (new axes), slices that are not full, index arrays after a slice,
``ignore_duplicates``, complex dtypes.
"""
from dataclasses import dataclass
from typing import List, Optional

from aesara.graph.basic import Constant, Variable
from aesara.graph.rewriting.basic import node_rewriter
from aesara.tensor.basic import as_tensor_variable, cast, stack
from aesara.tensor.extra_ops import broadcast_to
from aesara.tensor.math import prod
from aesara.tensor.rewriting.basic import register_specialize
from aesara.tensor.subtensor import AdvancedIncSubtensor
from aesara.tensor.type import TensorType
from aesara.tensor.type_other import SliceType

from aesara_bincount.rewriting import replacement_for
from aesara_bincount.scatter_rewriting import zeros_shape
from aesara_bincount_core.linear_index import LinearIndex
from aesara_bincount_core.scatter_add import ScatterAdd
from aesara_bincount_core.semantics import INDEX_DTYPES, OUT_DTYPES

__all__ = ["MultiIndexMatch", "leading_index_arrays", "match_multi_index", "rows_of_multi_index", "local_multi_index_scatter_add"]


@dataclass
class MultiIndexMatch:
    """What :func:`match_multi_index` found in an ``AdvancedIncSubtensor`` node.

    Attributes
    ----------
    base : Variable
        The array indexed, shape ``(d_0, ..., d_{K-1}, *rest)``.
    increments : Variable
        Cast to the output's dtype.
    indices : list of Variable
        The K integer index arrays, for the K leading axes.
    set : bool
        ``set_subtensor`` (True) or ``inc_subtensor`` (False).
    """

    base: Variable
    increments: Variable
    indices: List[Variable]
    set: bool


def _is_full_slice(v: Variable) -> bool:
    if not isinstance(v.type, SliceType) or not isinstance(v, Constant):
        return False
    s = v.data
    return s.start is None and s.stop is None and s.step is None


def leading_index_arrays(entries, min_indices: int = 2) -> Optional[List[Variable]]:
    """The integer index tensors that lead ``entries`` (the index inputs of an
    advanced indexing node), when at least ``min_indices`` of them are followed
    by full slices only; else None."""
    k = 0
    while k < len(entries) and isinstance(entries[k].type, TensorType) and entries[k].type.dtype in INDEX_DTYPES:
        k += 1
    if k < min_indices or not all(_is_full_slice(e) for e in entries[k:]):
        return None
    return list(entries[:k])


def match_multi_index(node, min_indices: int = 2, dtypes=OUT_DTYPES) -> Optional[MultiIndexMatch]:
    """Recognise ``AdvancedIncSubtensor(base, y, idx_0, ..., idx_{K-1}, :, ..., :)``.

    Matches K >= ``min_indices`` integer index tensors (int8 ... uint64, any
    number of dimensions) on the leading axes, then only full slices, an
    output dtype of ``dtypes`` (:data:`~aesara_bincount_core.semantics.OUT_DTYPES`), an
    increment ``y`` that is not complex, and not ``ignore_duplicates``.

    Returns
    -------
    MultiIndexMatch or None
    """
    op = node.op
    if not isinstance(op, AdvancedIncSubtensor) or op.ignore_duplicates:
        return None
    base, y, *entries = node.inputs
    indices = leading_index_arrays(entries, min_indices)
    if indices is None:
        return None
    out_dtype = node.outputs[0].type.dtype
    if out_dtype not in dtypes or y.type.dtype.startswith("complex") or len(indices) > base.type.ndim:
        return None
    increments = y if y.type.dtype == out_dtype else cast(y, out_dtype)
    return MultiIndexMatch(base, increments, indices, bool(op.set_instead_of_inc))


def rows_of_multi_index(match: MultiIndexMatch, zeros_base: bool = True):
    """The flat-row form of ``match``: what a scatter or gather of rows needs.

    Returns
    -------
    (shape, rows_shape, increments, flat)
        ``shape``: the base's shape, one scalar per dimension (its zeros'
        shape when the base is zeros and ``zeros_base``); ``rows_shape``: ``(prod(shape[:K]),
        *shape[K:])``; ``increments``: broadcastable to ``(len(flat),
        *shape[K:])``; ``flat``: the checked int64 rows of
        :class:`~aesara_bincount_core.linear_index.LinearIndex`.
    """
    base, k = match.base, len(match.indices)
    zshape = zeros_shape(base) if zeros_base else None
    if zshape is None:
        zshape = [base.shape[d] for d in range(base.type.ndim)]
    shape = [as_tensor_variable(s) for s in zshape]
    shape = [s if s.type.dtype == "int64" else cast(s, "int64") for s in shape]
    rest = shape[k:]
    flat, bshape = LinearIndex()(stack(shape[:k]), *match.indices)
    inc = match.increments
    bnd = max(i.type.ndim for i in match.indices)
    if bnd >= 2 and inc.type.ndim > len(rest):
        # Broadcast to the indexed shape (*B, *rest), then one row per index
        # (increments of at most len(rest) dimensions broadcast as they are).
        full = [bshape[j] for j in range(bnd)] + rest
        inc = broadcast_to(inc, full).reshape([flat.shape[0]] + rest, ndim=1 + len(rest))
    rows_shape = [prod(stack(shape[:k]), dtype="int64")] + rest
    return shape, rows_shape, inc, flat


@register_specialize("bincount", "cxx_only", name="local_multi_index_scatter_add")
@node_rewriter([AdvancedIncSubtensor])
def local_multi_index_scatter_add(fgraph, node):
    """Replace ``inc_subtensor(base[idx_0, ..., idx_{K-1}], y)``, K >= 2, by ``ScatterAdd`` of rows.

    See the module notes for the graph it builds, and
    :func:`match_multi_index` for the forms it takes.  It raises nothing
    itself: ``LinearIndex`` and ``ScatterAdd`` raise when the function runs.
    """
    match = match_multi_index(node)
    if match is None or match.set:
        return False
    shape, rows_shape, inc, flat = rows_of_multi_index(match)
    ndim = len(shape)
    if zeros_shape(match.base) is not None:
        rows = ScatterAdd("zeros")(stack(rows_shape), inc, flat)
    else:
        view = match.base.reshape(rows_shape, ndim=len(rows_shape))
        rows = ScatterAdd("base")(view, inc, flat)
    out = rows.reshape(shape, ndim=ndim)
    return replacement_for(node.outputs[0], out)
