"""The rewrite ``bincount_fusion``: an elementwise x or weights inlined into ``Bincount``.

:func:`local_bincount_fusion` replaces ``Bincount(Elemwise(...), n,
Elemwise(...))`` by :class:`~aesara_bincount_core.fused.FusedBincount`, whose C
loop computes each value of ``x`` or of the weights from the Elemwise's inputs
(``c_code/cpu/fused_bincount.c``), so that the intermediate array is never
written.  It is registered in ``optdb`` (in :data:`fusion_db`, with the GPU
pass of :mod:`aesara_bincount.gpu.fusion`) at position 49.2, after Aesara's
``elemwise_fusion`` (49), which has then made one ``Composite`` of each
elementwise graph, and before the destroy handler (49.5) and the in-place
rewrites, under the tags ``fast_run``, ``bincount`` and ``cxx_only``;
``mode.excluding("bincount_fusion")`` (its name) switches it off alone.
Neighbours: :mod:`aesara_bincount.rewriting` (which puts ``Bincount`` in),
:mod:`aesara_bincount_core.scalar_codegen` (which decides what can be
inlined).
"""
from typing import List, Optional, Tuple

import numpy as np
from aesara.compile import optdb
from aesara.graph.basic import Constant, Variable, clone_replace
from aesara.graph.rewriting.basic import in2out, node_rewriter
from aesara.graph.rewriting.db import SequenceDB
from aesara.scalar import basic as aes
from aesara.tensor.basic import get_scalar_constant_value
from aesara.tensor.elemwise import DimShuffle, Elemwise
from aesara.tensor.exceptions import NotScalarConstantError

from aesara_bincount.rewriting import replacement_for
from aesara_bincount_core.fused import FusedBincount, scalar_problem
from aesara_bincount_core.op import Bincount

__all__ = ["local_bincount_fusion", "fusion_problem", "fusion_db"]


def _only_client(fgraph, v: Variable, node) -> bool:
    clients = fgraph.clients.get(v, [])
    return len(clients) == 1 and clients[0][0] is node


def _scalar_input(v: Variable):
    """A broadcast (1,) input of the Elemwise as a 0-d variable or constant."""
    if isinstance(v, Constant):
        try:
            value = np.asarray(get_scalar_constant_value(v), dtype=v.type.dtype)
        except NotScalarConstantError:
            return None
        # A literal (Aesara writes str(value) into the C code) only where C
        # reads it as the same value of the same type: a non-negative int32
        # (Aesara's scalar code writes "(-y)", which a literal -3 turns into
        # "--3"; larger ones would change type or signedness) or a finite
        # non-negative float64 (its repr is exact).  Anything else, float32 in
        # particular ("0.1" is a double: float32 v * 0.1 would be computed in
        # double, and 0.1f > 0.1), is a 0-d input of the fused node.
        small_int = value.dtype.kind in "iu" and 0 <= int(value) < 2**31
        plain_double = value.dtype == np.float64 and np.isfinite(value) and not np.signbit(value)
        if value.dtype.kind == "b" or small_int or plain_double:
            return aes.constant(value.item(), dtype=v.type.dtype)
        return v.dimshuffle()
    if v.owner is not None and isinstance(v.owner.op, DimShuffle):
        inner = v.owner.inputs[0]
        if inner.type.ndim == 0 and v.owner.op.new_order == ("x",):
            return inner
    return v.dimshuffle()


def fusion_problem(fgraph, node, v: Variable) -> Optional[str]:
    """Why the value ``v`` of the ``Bincount`` ``node`` is not fused, or None.

    Parameters
    ----------
    fgraph : FunctionGraph
    node : Apply
        A ``Bincount`` node.
    v : Variable
        Its ``x`` or its weights.

    Returns
    -------
    str or None
        The reason: not an ``Elemwise`` with one output, other clients than
        ``node`` (the array is needed anyway), no vector input, or the
        reason of :func:`~aesara_bincount_core.fused.scalar_problem` (no C
        code, C code that calls Python, a complex or float16 value).
    """
    if v.owner is None or not isinstance(v.owner.op, Elemwise) or len(v.owner.outputs) != 1:
        return "not an Elemwise"
    if v.type.ndim != 1 or v.type.shape[0] == 1:
        return "not a vector"
    if not _only_client(fgraph, v, node):
        return "the Elemwise has other clients"
    if v.owner.op.inplace_pattern:
        return "the Elemwise works in place"
    return None


def _absorb(fgraph, node, v: Variable) -> Optional[Tuple[aes.Composite, List[Variable]]]:
    """``(composite, inputs)`` that compute ``v`` inline, or None."""
    if fusion_problem(fgraph, node, v) is not None:
        return None
    enode = v.owner
    inputs: List[Variable] = []
    inner_of = {}
    args = []
    for e in enode.inputs:
        if e.type.ndim != 1:
            return None
        if e.type.shape[0] == 1:
            s = _scalar_input(e)
            if s is None:
                return None
            if isinstance(s, Constant):
                args.append(s)
                continue
            e = s
        if e not in inner_of:
            inner_of[e] = aes.get_scalar_type(e.type.dtype)()
            inputs.append(e)
        args.append(inner_of[e])
    if not any(i.type.ndim == 1 for i in inputs):
        return None
    sop = enode.op.scalar_op
    if isinstance(sop, aes.Composite):
        (out,) = clone_replace(sop.fgraph.outputs, replace=dict(zip(sop.fgraph.inputs, args)))
    else:
        out = sop(*args)
    if out.type.dtype != v.type.dtype:
        return None
    composite = aes.Composite([inner_of[e] for e in inputs], [out])
    if scalar_problem(composite) is not None:
        return None
    return composite, inputs


@node_rewriter([Bincount])
def local_bincount_fusion(fgraph, node):
    """Replace ``Bincount(Elemwise(...), n[, Elemwise(...)])`` by ``FusedBincount``.

    ``x``, the weights, or both are absorbed when they are the one output of
    an ``Elemwise`` (a ``Composite`` of Aesara's fusion included) whose only
    client is this node, whose scalar graph
    :func:`~aesara_bincount_core.fused.scalar_problem` accepts, and that has
    a vector input.  Finite non-negative constants of the Elemwise become
    literals of the scalar graph (so that ``x // 4`` divides by a literal 4),
    other constants and DimShuffled 0-d inputs are taken as 0-d inputs, and
    an input used twice is read once.  Only the CPU ``Bincount`` is taken (not
    the GPU Op); the replacement has the type of the replaced output.
    """
    if type(node.op) is not Bincount:
        return False
    x, n = node.inputs[:2]
    w = node.inputs[2] if len(node.inputs) > 2 else None
    x_part = _absorb(fgraph, node, x)
    w_part = _absorb(fgraph, node, w) if w is not None and w.type.ndim == 1 else None
    if x_part is None and w_part is None:
        return False
    x_op, x_ins = x_part if x_part is not None else (None, [x])
    w_op, w_ins = w_part if w_part is not None else (None, [w] if w is not None else [])
    op = FusedBincount(
        node.op.mode,
        out_dtype=node.outputs[0].type.dtype,
        openmp=node.op.openmp,
        x_op=x_op,
        w_op=w_op,
        weighted=w is not None,
    )
    out = op(*x_ins, n, *w_ins)
    old = node.outputs[0]
    return replacement_for(old, out)


#: The passes of ``bincount_fusion``: this CPU one, and the GPU one that
#: :mod:`aesara_bincount.gpu.fusion` registers here (so that
#: ``mode.excluding("bincount_fusion")`` switches both off).
fusion_db = SequenceDB()
optdb.register("bincount_fusion", fusion_db, "fast_run", "bincount", "cxx_only", position=49.2)
fusion_db.register(
    "local_bincount_fusion",
    in2out(local_bincount_fusion, name="bincount_fusion"),
    "fast_run",
    "bincount",
    position=0,
)
