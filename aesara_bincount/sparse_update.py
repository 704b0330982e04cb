"""The sparse update: ``W - lr * grad(cost, W)`` adds into the touched rows of ``W`` in place.

The gradient of a gather ``W[idx]`` is a scatter-add onto zeros of ``W``'s
shape (``ScatterAdd(onto="zeros")`` after ``specialize``; ``Bincount`` in
its scatter form for a vector ``W``).  The update most Theano and Aesara
code writes, ``updates=[(W, W - lr * g)]`` (the tutorials' list of pairs,
Lasagne's ``sgd``), then fills a table-sized array with zeros, adds a few
rows into it, and reads and writes the whole table once more to subtract
it.  :class:`SparseUpdate` rewrites the update to the scatter-add of
``-lr * increments`` onto ``W`` itself, ``ScatterAdd(W, -lr * g_rows,
idx)``; ``local_inplace_scatter_add`` (position 60) then makes it add in
place, and on GPU data the GPU rewrites (48.4 to 48.52) make it a
``GpuScatterAdd`` that adds into the GPU shared variable.  Only the touched
rows are read and written.

What it matches, in an update ``(W, new)`` of the compiled function
(``fgraph.update_mapping``; ``new`` may be ``GpuFromHost(...)`` of a host
graph that reads ``HostFromGpu(W)``):

- ``new`` is ``W + T``, ``T + W`` or ``W - T``;
- ``T`` is ``S``, or a chain of elementwise ``mul`` (any order, any number
  of factors), ``neg`` and ``true_div`` (``S`` the numerator) above ``S``,
  whose other inputs have a static length of 1 along axis 0 (a learning
  rate, a scalar shared variable or input, a constant, a ``(1, D)`` row of
  per-column rates): ``lr * S``, ``S * lr``, ``-lr * S``, ``S / n``;
- ``S`` is a scatter-add onto zeros of ``W``'s shape (Aesara's
  ``ShapeFeature`` says so): ``ScatterAdd(onto="zeros")``, ``Bincount`` in
  its scatter form, or a chain of ``ScatterAdd(onto="base")`` above one
  (the gradient of a ``W`` gathered twice, which
  ``pre_local_IncSubtensor_serialize`` chains);
- every dtype is ``W``'s.

It keeps Aesara's dense form where the dense array is needed or where the
in-place add would be refused (Aesara's destroy-handler rules, checked
here beforehand): ``S`` or a node between ``S`` and ``new`` has another
client (the gradient is also an output, or reused); ``W`` is not an update
target or is protected (an input that is not mutable); ``W`` or a view of
it is an output of the function; a node that reads ``W`` or a view of it
depends on ``new`` (it would have to run both before and after the add);
an increment, index or factor is a view of ``W``.

The rounding (the rule on :doc:`semantics`): where no index repeats, each
touched element gets ``w + (-(lr * g))``, which is ``w - lr * g``, bit for
bit.  Where an index repeats, the rows are added one after the other,
``(w - lr*g1) - lr*g2``, instead of ``w - lr*(g1 + g2)``: the result is
``np.add.at(W, idx, -lr * g)``.  Rows no index names are left as they are,
where the dense form computes ``w - lr*0``: they differ only in the sign of
a zero ``w`` (``w + lr*0`` makes -0.0 into 0.0) and when ``lr`` is infinite
or NaN (the dense form then gives NaN everywhere).  Several scatter-adds
(a chain) become one, of the concatenated increments and indices, so that
every index is checked before anything is written: a bad index raises
``IndexError`` and leaves ``W`` as it was.

Registered once in ``optdb`` at position 48.35: after ``specialize`` (2),
where ``ScatterAdd`` and ``Bincount`` are made, and before the GPU lifting
pass (48.4), which runs Aesara's elementwise fusion on graphs with GPU
data, Aesara's own fusion (49), which would hide ``W - lr * S`` in a
``Composite``, and the in-place rewrites (60, 75).  Name ``sparse_update``,
tags ``fast_run``, ``bincount`` and ``cxx_only``:
``mode.excluding("sparse_update")`` keeps the dense form (as does
``mode.excluding("bincount")``).
"""
from typing import List, Optional, Tuple

import numpy as np
from aesara.compile import optdb
from aesara.graph.basic import Variable
from aesara.graph.features import InconsistencyError
from aesara.graph.rewriting.basic import GraphRewriter, copy_stack_trace
from aesara.scalar import basic as aes
from aesara.tensor.basic import cast, concatenate, constant
from aesara.tensor.elemwise import DimShuffle, Elemwise
from aesara.tensor.extra_ops import broadcast_to
from aesara.tensor.rewriting.shape import ShapeFeature

from aesara_bincount_core.gpu.transfer import GpuFromHost, HostFromGpu
from aesara_bincount_core.op import Bincount
from aesara_bincount_core.scatter_add import ScatterAdd
from aesara_bincount_core.semantics import OUT_DTYPES

__all__ = ["SparseUpdate", "match_sparse_update", "sparse_update"]

#: The scalar ops a path from ``S`` up to ``T`` may go through, and which of
#: their inputs may be the path (the others are broadcast along axis 0).
_LINEAR = {aes.Mul: None, aes.Neg: (0,), aes.TrueDivide: (0,)}


def _single_client(fgraph, v: Variable) -> bool:
    return len(fgraph.clients.get(v, [])) == 1


def _aliases(fgraph, root: Variable) -> set:
    """``root`` and every variable that shares its memory: views (an Op's
    ``view_map``, ``DimShuffle``), and the transfers of them, ``HostFromGpu``
    and ``GpuFromHost``: the lifting and the removal of round trips (48.4 to
    48.52) make ``GpuFromHost(DimShuffle(HostFromGpu(W)))`` a view of the GPU
    array ``W`` itself."""
    seen, todo = {root}, [root]
    while todo:
        v = todo.pop()
        for node, pos in fgraph.clients.get(v, []):
            if node == "output":
                continue
            outs = []
            if isinstance(node.op, (HostFromGpu, GpuFromHost, DimShuffle)):
                outs = list(node.outputs)
            else:
                for o, ins in getattr(node.op, "view_map", {}).items():
                    if pos in ins:
                        outs.append(node.outputs[o])
            for o in outs:
                if o not in seen:
                    seen.add(o)
                    todo.append(o)
    return seen


def _descendant_nodes(fgraph, v: Variable) -> set:
    """The nodes that depend on ``v``."""
    seen, todo = set(), [v]
    while todo:
        for node, _ in fgraph.clients.get(todo.pop(), []):
            if node != "output" and node not in seen:
                seen.add(node)
                todo.extend(node.outputs)
    return seen


def _destroy_refused(fgraph, root: Variable, new: Variable, ours: set, inputs: List[Variable]) -> bool:
    """Would Aesara's destroy handler refuse an Op that adds into ``root`` in place,
    giving ``new``?  ``ours``: the nodes the rewrite replaces; ``inputs``: the
    other inputs of the new Op (see the module docstring)."""
    if root in getattr(fgraph, "_supervisor_protected", ()):
        return True
    aliases = _aliases(fgraph, root)
    if any(o in aliases for o in fgraph.outputs):
        return True
    if any(v in aliases for v in inputs):
        return True
    later = _descendant_nodes(fgraph, new)
    for v in aliases:
        for node, _ in fgraph.clients.get(v, []):
            if node != "output" and node not in ours and node in later:
                return True
    return False


def _is_elemwise(v: Variable, scalar_ops) -> bool:
    return (
        v.owner is not None
        and type(v.owner.op) is Elemwise
        and isinstance(v.owner.op.scalar_op, scalar_ops)
    )


def _row_constant(v: Variable) -> bool:
    """Whether ``v`` (an input of an ``Elemwise`` as long as ``W`` has dimensions)
    is the same for every row: a static length of 1 along axis 0."""
    return v.type.ndim == 0 or v.type.shape[0] == 1


def _linear_path(fgraph, term: Variable) -> Tuple[Variable, list]:
    """Go down from ``term`` through ``mul``, ``neg``, ``true_div`` to the one
    input that is not a row constant: ``(bottom, path)``, the path a list of
    ``(node, position)`` from the bottom up."""
    path = []
    v = term
    while _is_elemwise(v, tuple(_LINEAR)):
        node = v.owner
        allowed = _LINEAR[type(node.op.scalar_op)]
        positions = range(len(node.inputs)) if allowed is None else allowed
        below = [k for k in positions if not _row_constant(node.inputs[k])]
        others = [k for k in range(len(node.inputs)) if k not in below]
        if len(below) != 1 or not all(_row_constant(node.inputs[k]) for k in others):
            break
        k = below[0]
        if not _single_client(fgraph, node.inputs[k]):
            break
        path.append((node, k))
        v = node.inputs[k]
    return v, path[::-1]


def _through_round_trips(fgraph, v: Variable) -> Variable:
    """``x`` for ``HostFromGpu(GpuFromHost(x))`` (the gradient of a GPU ``W``,
    which Aesara moves to the GPU and back), each read by the next only."""
    while (
        v.owner is not None
        and isinstance(v.owner.op, HostFromGpu)
        and v.owner.inputs[0].owner is not None
        and isinstance(v.owner.inputs[0].owner.op, GpuFromHost)
        and _single_client(fgraph, v.owner.inputs[0])
        and _single_client(fgraph, v.owner.inputs[0].owner.inputs[0])
    ):
        v = v.owner.inputs[0].owner.inputs[0]
    return v


def _scatter_terms(fgraph, s: Variable, dtype: str) -> Optional[List[Tuple[Variable, Variable]]]:
    """The ``(increments, idx)`` of each scatter-add of the chain ``s`` onto zeros, in order."""
    node = s.owner
    if node is None or s.type.dtype != dtype:
        return None
    op = node.op
    if type(op) is ScatterAdd and not op.inplace:
        base, inc, idx = node.inputs
        if op.onto == "zeros":
            return [(inc, idx)]
        below = _scatter_terms(fgraph, base, dtype)
        return None if below is None else below + [(inc, idx)]
    if type(op) is Bincount and op.mode == "scatter":
        idx, _, *weights = node.inputs
        inc = weights[0] if weights else constant(np.ones((), dtype=dtype))
        return [(inc, idx)]
    return None


def _rebuild(path, bottom: Variable) -> Variable:
    """The path's Ops applied again, with ``bottom`` in place of ``S``.

    A product takes the path first, ``(bottom * f1) * f2``: Aesara's fusion
    (``local_add_mul_fusion``) flattens a product of a product, and
    ``bottom`` is often one (``2 * (W[idx] - t)``); first, its factors are
    multiplied in before the others, which the dense form also does
    (``f1 * S``, ``(f1 * S) * f2``, ``f1 * (f2 * S)``; not ``(f1 * f2) * S``).
    """
    v = bottom
    for node, k in path:
        inputs = list(node.inputs)
        if isinstance(node.op.scalar_op, aes.Mul):
            inputs = [v] + inputs[:k] + inputs[k + 1:]
        else:
            inputs[k] = v
        v = node.op(*inputs)
    return v


def _joined(terms, base: Variable) -> Tuple[Variable, Variable]:
    """One ``(increments, idx)`` for several scatter-adds onto ``base``: each
    increment broadcast to its rows, concatenated; ``None`` if the index dtypes
    have no common type that keeps every value (uint64 with another one)."""
    dtypes = {idx.type.dtype for _, idx in terms}
    if len(dtypes) > 1 and "uint64" in dtypes:
        return None
    idx_dtype = dtypes.pop() if len(dtypes) == 1 else "int64"
    rest = [base.shape[k] for k in range(1, base.type.ndim)]
    incs = [broadcast_to(inc, [idx.shape[0], *rest]) for inc, idx in terms]
    idxs = [idx if idx.type.dtype == idx_dtype else cast(idx, idx_dtype) for _, idx in terms]
    return concatenate(incs, axis=0), concatenate(idxs)


def match_sparse_update(fgraph, root: Variable, new: Variable):
    """The replacement of the update ``(root, new)`` by a scatter-add into ``root``, or None.

    Parameters
    ----------
    fgraph : FunctionGraph
        The function's graph, with a ``ShapeFeature``.
    root : Variable
        The updated input (a shared variable, on the host or the GPU).
    new : Variable
        Its update (an output of ``fgraph``).

    Returns
    -------
    tuple or None
        ``(old, replacement)``: the host variable to replace (``new``, or the
        input of its ``GpuFromHost``) and the ``ScatterAdd`` output that
        replaces it; None when the update is not one of the module's forms,
        or when the dense form is kept.
    """
    host = new
    if new.owner is not None and isinstance(new.owner.op, GpuFromHost):
        host = new.owner.inputs[0]
    node = host.owner
    w_host = root
    if not _is_elemwise(host, (aes.Add, aes.Sub)) or len(node.inputs) != 2:
        return None
    dtype = host.type.dtype
    if dtype not in OUT_DTYPES or root.type.dtype != dtype or host.type.ndim < 1:
        return None
    a, b = node.inputs

    def is_w(v):
        return v is root or (
            v.owner is not None and isinstance(v.owner.op, HostFromGpu) and v.owner.inputs[0] is root
        )

    sign = -1 if isinstance(node.op.scalar_op, aes.Sub) else 1
    if is_w(a) and not is_w(b):
        w_host, term = a, b
    elif sign == 1 and is_w(b) and not is_w(a):
        w_host, term = b, a
    else:
        return None
    if term.type.dtype != dtype or not _single_client(fgraph, term):
        return None
    s, path = _linear_path(fgraph, term)
    s = _through_round_trips(fgraph, s)
    terms = _scatter_terms(fgraph, s, dtype)
    if terms is None:
        return None
    shape_feature = getattr(fgraph, "shape_feature", None)
    if shape_feature is None or s.type.ndim != w_host.type.ndim or not shape_feature.same_shape(s, w_host):
        return None

    if len(terms) == 1:
        inc, idx = terms[0]
    else:
        joined = _joined(terms, w_host)
        if joined is None:
            return None
        inc, idx = joined
    inc = _rebuild(path, inc)
    if sign < 0:
        inc = -inc
    if inc.type.dtype != dtype:
        inc = cast(inc, dtype)
    if inc.type.ndim > w_host.type.ndim:
        return None

    ours = {node} | {n for n, _ in path}
    factors = [i for n, k in path for j, i in enumerate(n.inputs) if j != k]
    extra = [idx, inc] + factors + [i for t in terms for i in t]
    if _destroy_refused(fgraph, root, host, ours, extra):
        return None
    out = ScatterAdd("base")(w_host, inc, idx)
    if out.type != host.type:
        out = host.type.filter_variable(out, allow_convert=True)
    copy_stack_trace(host, out)
    return host, out


class SparseUpdate(GraphRewriter):
    """The pass (see the module docstring): each update of the function, in turn."""

    def add_requirements(self, fgraph):
        if not hasattr(fgraph, "shape_feature"):
            fgraph.attach_feature(ShapeFeature())

    def apply(self, fgraph):
        mapping = getattr(fgraph, "update_mapping", None) or {}
        count = 0
        for out_idx, in_idx in sorted(mapping.items()):
            root, new = fgraph.inputs[in_idx], fgraph.outputs[out_idx]
            found = match_sparse_update(fgraph, root, new)
            if found is None:
                continue
            try:
                fgraph.replace_all_validate([found], reason="sparse_update")
            except InconsistencyError:  # a feature refused it: the dense form stays
                continue
            count += 1
        return count


#: The pass, registered once in ``optdb`` (see the module docstring).
sparse_update = SparseUpdate()
sparse_update.name = "sparse_update"

optdb.register(
    "sparse_update",
    sparse_update,
    "fast_run",
    "bincount",
    "cxx_only",
    position=48.35,
)
