"""The CPU :class:`FusedBincount` Op: a bincount with its elementwise x or weights inlined.

Neighbours: :mod:`aesara_bincount_core.op` (the plain :class:`Bincount`, whose
forms and errors this Op keeps), :mod:`aesara_bincount_core.scalar_codegen`
(the C code of the scalar graphs), ``c_code/cpu/fused_bincount.c`` (the
loop's driver; its loops are in ``c_code/cpu/fused_bincount_loops.h``), :mod:`aesara_bincount.fusion_rewriting` (the rewrite that puts the Op
in graphs).
"""
import hashlib
import re
from typing import List, Optional, Tuple

import numpy as np
from aesara.gradient import DisconnectedType, grad
from aesara.graph.basic import Apply
from aesara.scalar import basic as aes
from aesara.tensor.basic import as_tensor_variable
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.shape import Shape_i
from aesara.tensor.type import TensorType

from aesara_bincount_core import scalar_codegen, vector_codegen
from aesara_bincount_core.op import Bincount, _as_length, _constant_int
from aesara_bincount_core.semantics import INDEX_DTYPES, reference_bincount

__all__ = ["FusedBincount", "scalar_problem"]


def _macro_body(body: str) -> Optional[str]:
    """``body`` as the lines of one C macro, or None if it cannot be one.

    The host branch of ``#ifdef KERNEL`` / ``#ifndef KERNEL`` is kept (Aesara's
    scalar code marks its GPU variants so), comments are removed; any other
    preprocessor line makes it None.
    """
    body = re.sub(r"/\*.*?\*/", " ", body, flags=re.S)
    out, keep = [], []
    for line in body.splitlines():
        s = line.strip()
        if re.match(r"#\s*ifdef\s+KERNEL\b", s):
            keep.append(False)
        elif re.match(r"#\s*ifndef\s+KERNEL\b", s):
            keep.append(True)
        elif re.match(r"#\s*else\b", s) and keep:
            keep[-1] = not keep[-1]
        elif re.match(r"#\s*endif\b", s) and keep:
            keep.pop()
        elif s.startswith("#"):
            return None
        elif all(keep):
            pos = line.find("//")
            if pos >= 0 and line.count('"', 0, pos) % 2 == 0:
                line = line[:pos]
            if line.strip():
                out.append(line)
    return None if keep else out


def scalar_problem(sop) -> Optional[str]:
    """Why the scalar graph ``sop`` cannot be inlined by this Op, or None."""
    problem = scalar_codegen.inline_problem(sop, "c")
    if problem:
        return problem
    ins = [i.type.dtype for i in sop.fgraph.inputs]
    outs = [o.type.dtype for o in sop.fgraph.outputs]
    code = scalar_codegen.scalar_code(sop, [f"i{k}" for k in range(len(ins))], ["o0"], "c", ins, outs)
    if _macro_body(code.body) is None:
        return "its C code has preprocessor lines"
    return None


def _c_type(dtype: str) -> str:
    return aes.get_scalar_type(dtype).dtype_specs()[1]


class FusedBincount(Bincount):
    r"""``Bincount`` of an ``x``, or of weights, computed inline by a scalar graph.

    The Op computes what ``Bincount(mode, out_dtype)(x, n, weights)`` computes,
    where ``x = Elemwise(x_op)(*x_inputs)`` and ``weights =
    Elemwise(w_op)(*w_inputs)``, without storing ``x`` or ``weights``: the C
    loop (``c_code/cpu/fused_bincount.c``) computes each value from the
    inputs with the scalar ops' own C code, reading each input once.  The
    rewrite ``bincount_fusion`` (:mod:`aesara_bincount.fusion_rewriting`)
    puts it in graphs; there is no reason to build it by hand.

    Parameters
    ----------
    mode : {"bincount", "scatter"}
        As for :class:`~aesara_bincount_core.op.Bincount`.
    out_dtype : str
        dtype of the output (and of the weights).
    openmp : bool, optional
        As for :class:`~aesara_bincount_core.op.Bincount`.
    x_op : aesara.scalar.Composite, optional
        Scalar graph computing ``x``, with one integer output; None when ``x``
        is an input as such.
    w_op : aesara.scalar.Composite, optional
        Scalar graph computing the weights, whose output dtype is
        ``out_dtype``; None when the weights are an input as such, or absent.
    weighted : bool, optional
        Whether there are weights; defaults to ``w_op is not None``.

    Notes
    -----
    Inputs of the Apply node: the ``x_op.nin`` inputs of ``x`` (``x`` itself
    without ``x_op``), then ``n``, then the ``w_op.nin`` inputs of the
    weights (the weights themselves without ``w_op``; nothing when
    unweighted).  Each input of a scalar graph is a vector, ``(N,)``, or a
    0-d scalar, broadcast to every element; its dtype is the one of the
    graph's input.  The vectors of one graph must have one length, where a
    vector of length 1 broadcasts to the others' length as in Aesara's
    ``Elemwise`` (a copy of ``N`` elements); other lengths that differ raise
    ``ValueError``, as ``Elemwise`` does.  The inputs of a scalar graph may
    instead have one number D >= 2 of dimensions (and 0-d ones): they
    broadcast among themselves, NumPy style, to a shape ``S``, and the
    graph's values are those of the flattened (C order) result, ``N =
    prod(S)``: the flatten of an elementwise result (``bincount((base[:,
    None] + idx).ravel())``) without writing it.  An input whose last axis
    has length 1 by its type (``base[:, None]``) is read once per row of
    ``S``; shapes that do not broadcast raise ``ValueError``.  ``x`` (and
    the weights) given as such are vectors.

    The results, errors and sum-order notes are those of ``Bincount`` applied
    to the computed ``x`` and weights: a computed negative value raises
    ``ValueError`` naming it, values at the top of their dtype work, and
    Aesara's dtype rules for the computed values hold (integer division,
    casts, wrap-around), since the code is Aesara's own.  A failure of the
    scalar code (integer division by zero) raises its own error
    (``ZeroDivisionError``) before any range error, as the unfused graph
    does.  The call holds the GIL; the scalar code runs on the worker pool
    like ``Bincount``'s loop and never calls Python there.
    """

    __props__ = ("mode", "out_dtype", "openmp", "x_op", "w_op", "weighted")
    _cop_num_inputs = None
    c_sources = ("common/host_helpers.h", "cpu/worker_pool.h", "cpu/fused_bincount.c")
    c_function = "cpu_bincount_fused"
    #: Bump by hand only for changes outside the C files and generated code.
    version = 1

    def __init__(
        self,
        mode: str = "bincount",
        out_dtype: Optional[str] = None,
        openmp: Optional[bool] = None,
        x_op: Optional[aes.Composite] = None,
        w_op: Optional[aes.Composite] = None,
        weighted: Optional[bool] = None,
    ):
        super().__init__(mode, out_dtype, openmp)
        for name, sop in (("x_op", x_op), ("w_op", w_op)):
            if sop is not None and (not isinstance(sop, aes.Composite) or sop.nout != 1):
                raise TypeError(f"FusedBincount: {name} must be a Composite with one output, got {sop}")
        self.x_op, self.w_op = x_op, w_op
        self.weighted = bool(w_op is not None if weighted is None else weighted)
        if w_op is not None and not self.weighted:
            raise ValueError("FusedBincount: w_op given with weighted=False")

    def __str__(self):
        parts = [f"mode={self.mode!r}", f"out_dtype={self.out_dtype!r}", f"openmp={bool(self.openmp)}"]
        if self.x_op is not None:
            parts.append(f"x={self.x_op}")
        if self.w_op is not None:
            parts.append(f"weights={self.w_op}")
        return f"{type(self).__name__}{{{', '.join(parts)}}}"

    # -- layout of the inputs ------------------------------------------------
    @property
    def nx(self) -> int:
        """Number of inputs of ``x``."""
        return self.x_op.nin if self.x_op is not None else 1

    def _nw(self) -> int:
        if self.w_op is not None:
            return self.w_op.nin
        return int(self.weighted)

    def split_inputs(self, inputs) -> Tuple[list, object, list]:
        """``(x_inputs, n, w_inputs)`` of a list of node inputs."""
        return list(inputs[: self.nx]), inputs[self.nx], list(inputs[self.nx + 1 :])

    # -- graph -------------------------------------------------------------
    def make_node(self, *inputs):
        name = type(self).__name__
        if len(inputs) != self.nx + 1 + self._nw():
            raise TypeError(f"{name}: expected {self.nx + 1 + self._nw()} inputs, got {len(inputs)}")
        x_ins, n, w_ins = self.split_inputs([as_tensor_variable(i) for i in inputs])
        x_dtype = self._check_group(name, "x", self.x_op, x_ins)
        if x_dtype not in INDEX_DTYPES:
            raise TypeError(f"{name}: x must have an integer dtype, got {x_dtype}")
        n = _as_length(n, name)
        out_dtype = self.out_dtype or x_dtype
        if self.weighted:
            w_dtype = self._check_group(name, "weights", self.w_op, w_ins)
            if self.out_dtype is None or w_dtype != self.out_dtype:
                raise TypeError(f"{name}: weights must have dtype {self.out_dtype}, got {w_dtype}")
        length = _constant_int(n) if self.mode == "scatter" else None
        if length is not None and length < 0:
            length = None
        return Apply(self, x_ins + [n] + w_ins, [TensorType(out_dtype, shape=(length,))()])

    @staticmethod
    def _check_group(name, what, sop, ins) -> str:
        dims = {v.type.ndim for v in ins} - {0}
        several = sop is not None and len(dims) == 1 and min(dims) >= 2
        if not (dims <= {1} or several):
            raise TypeError(
                f"{name}: the inputs of {what} must have 0 or 1 dimension(s) (or, for an "
                f"elementwise graph, 0 or one number of two or more), got {[v.type for v in ins]}"
            )
        if sop is None:
            if ins[0].type.ndim != 1 and what == "x":
                raise TypeError(f"{name}: x must be a 1-D tensor, got {ins[0].type}")
            return ins[0].type.dtype
        want = [i.type.dtype for i in sop.fgraph.inputs]
        got = [v.type.dtype for v in ins]
        if want != got:
            raise TypeError(f"{name}: the inputs of {what} must have dtypes {want}, got {got}")
        if not any(v.type.ndim >= 1 for v in ins):
            raise TypeError(f"{name}: the inputs of {what} must include a vector")
        return sop.fgraph.outputs[0].type.dtype

    def unfused(self, inputs) -> Tuple[object, object, Optional[object]]:
        """``(x, n, weights)`` as the elementwise graphs of symbolic ``inputs``."""
        x_ins, n, w_ins = self.split_inputs(inputs)

        def build(sop, ins):
            # One Elemwise per node of the scalar graph (a Composite has no
            # gradient in Aesara 2.9; its nodes do).
            if sop is None:
                return ins[0]
            nd = max(v.type.ndim for v in ins)
            memo = dict(zip(sop.fgraph.inputs, [v if v.type.ndim else v.dimshuffle(*["x"] * nd) for v in ins]))
            for node in sop.fgraph.toposort():
                args = [memo[i] if i in memo else as_tensor_variable(np.asarray(i.data, i.type.dtype))
                        for i in node.inputs]
                for o, r in zip(node.outputs, Elemwise(node.op)(*args, return_list=True)):
                    memo[o] = r
            out = memo[sop.fgraph.outputs[0]]
            return out.flatten() if nd > 1 else out

        x = build(self.x_op, x_ins)
        w = build(self.w_op, w_ins) if self.weighted else None
        return x, n, w

    def perform(self, node, inputs, output_storage, params=None):
        x_ins, n, w_ins = self.split_inputs(inputs)

        def compute(sop, arrays, variables):
            if sop is None:
                return arrays[0]
            nd = max(v.type.ndim for v in variables)
            if nd > 1:
                # Several dimensions: broadcast NumPy style, flattened in C order.
                enode = Elemwise(sop).make_node(
                    *[TensorType(v.type.dtype, shape=v.type.shape if v.type.ndim else (1,) * nd)()
                      for v in variables]
                )
                arrays = [np.asarray(a).reshape((1,) * nd) if np.ndim(a) == 0 else np.asarray(a) for a in arrays]
                try:
                    np.broadcast_shapes(*[a.shape for a in arrays])
                except ValueError as exc:
                    raise ValueError(f"{type(self).__name__}: the inputs of an elementwise graph do not broadcast: {exc}")
                storage = [[None]]
                enode.op.perform(enode, arrays, storage)
                return np.asarray(storage[0][0]).reshape(-1)
            enode = Elemwise(sop).make_node(
                *[TensorType(v.type.dtype, shape=(None,) if v.type.ndim else (1,))() for v in variables]
            )
            lengths = {a.shape[0] for a in arrays if np.ndim(a) == 1} - {1}  # a length of 1 broadcasts
            if len(lengths) > 1:
                raise ValueError(f"{type(self).__name__}: the inputs of an elementwise graph differ in length {sorted(lengths)}")
            storage = [[None]]
            enode.op.perform(enode, [np.asarray(a).reshape(-1) for a in arrays], storage)
            return storage[0][0]

        v_x, _, v_w = self.split_inputs(node.inputs)
        x = compute(self.x_op, x_ins, v_x)
        w = compute(self.w_op, w_ins, v_w) if self.weighted else None
        output_storage[0][0] = reference_bincount(
            x, int(n), w, mode=self.mode, out_dtype=node.outputs[0].dtype
        )

    def do_constant_folding(self, fgraph, node):
        return False

    def infer_shape(self, fgraph, node, input_shapes):
        if self.mode == "scatter":
            return [(node.inputs[self.nx],)]
        return [(Shape_i(0)(node.outputs[0]),)]

    def connection_pattern(self, node):
        x_ins, _, w_ins = self.split_inputs(node.inputs)
        return [[False]] * (len(x_ins) + 1) + [[True]] * len(w_ins)

    def L_op(self, inputs, outputs, output_grads):
        x, n, w = self.unfused(inputs)
        x_ins, _, w_ins = self.split_inputs(inputs)
        grads = [DisconnectedType()() for _ in range(len(x_ins) + 1)]
        if not w_ins:
            return grads
        plain = Bincount(self.mode, self.out_dtype)
        (gw,) = plain.L_op([x, n, w], outputs, output_grads)[2:]
        if self.w_op is None:
            return grads + [gw]
        return grads + list(grad(None, w_ins, known_grads={w: gw}, disconnected_inputs="ignore"))

    # -- C code ------------------------------------------------------------
    def _codes(self, node, name="bc_fused"):
        """Generated ``(defines, undefs, support, versions)`` for ``node``
        (``name``: a C identifier unique to the node in its module)."""
        x_ins, _, w_ins = self.split_inputs(node.inputs)
        x_dtype = self._check_group("", "x", self.x_op, x_ins)
        defs = {
            "BC_NX": len(x_ins),
            "BC_NIN": len(node.inputs),
            "BC_FX_T": _c_type(x_dtype),
            "BC_FX_SIZE": np.dtype(x_dtype).itemsize,
            "BC_FX_FUSED": int(self.x_op is not None),
            "BC_WEIGHTED": int(self.weighted),
            "BC_FW_FUSED": int(self.w_op is not None),
        }
        support, versions = [], []
        for sop, ins, first, tag in ((self.x_op, x_ins, 0, "X"), (self.w_op, w_ins, len(x_ins) + 1, "W")):
            if sop is None:
                continue
            code = _scalar_group(sop, ins, first, tag.lower(), f"{name}_{tag.lower()}")
            defs[f"BC_F{tag}_LOCALS(in)"] = code[0]
            defs[f"BC_FUSED_{tag}(i, dst)"] = code[1]
            support.append(code[2].support)
            versions.append(code[2].version)
            if tag == "W" and code[3] is not None:
                defs["BC_FW_VEC"] = 1
                defs["BC_FUSED_WV(i, dst)"] = code[3]
                versions.append(hashlib.sha256(code[3].encode()).hexdigest())
        defs["BC_F_ROW_SCALARS"] = "{" + ", ".join(str(int(_row_scalar(v))) for v in node.inputs) + "}"
        defs["BC_SCALAR_ERRORS"] = "{" + ", ".join(
            f'{{&PyExc_{exc}, "{msg}"}}' for exc, msg in scalar_codegen.SCALAR_ERRORS
        ) + "}"
        define = "\n".join(f"#define {k} {v}" for k, v in defs.items())
        undef = "\n".join(f"#undef {k.split('(')[0]}" for k in defs)
        return define, undef, support, versions

    def c_support_code_apply(self, node, name):
        define, undef, support, _ = self._codes(node, name)
        base = super().c_support_code_apply(node, name)
        return "\n".join(["", *support, define, base, undef])

    def c_headers(self, **kwargs):
        headers = super().c_headers(**kwargs)
        for sop in (self.x_op, self.w_op):
            if sop is not None:
                headers += [h for h in sop.c_headers(**kwargs) if h not in headers]
        return headers

    def c_compile_args(self, **kwargs):
        # Aesara's scalar code wraps signed integers around, as NumPy does
        # (int64 2**62 * 2 is -2**63); in C that is undefined behaviour, which
        # -fwrapv defines as the same wrap-around (and UBSan then accepts).
        return super().c_compile_args(**kwargs) + ["-fwrapv"]

    def c_code(self, node, name, inp, out, sub):
        define, undef = self.get_c_macros(node, name, check_input=False)
        return (
            f"{define}\n{{ PyArrayObject *bc_ins[] = {{{', '.join(inp)}}}; "
            f"if (APPLY_SPECIFIC(cpu_bincount_fused)(bc_ins, &{out[0]}) != 0) {{ {sub['fail']} }} }}\n{undef}\n"
        )

    def c_code_cache_version_apply(self, node):
        _, _, _, versions = self._codes(node)
        return self.c_code_cache_version() + tuple(versions)


def _row_scalar(v) -> bool:
    """Is ``v`` an input of several dimensions read once per row (its last axis
    has length 1 by its type: ``base[:, None]``)?"""
    return v.type.ndim >= 2 and v.type.broadcastable[-1]


def _scalar_group(sop, ins, first: int, tag: str, name: str):
    """``(locals, body macro text, ScalarCode, vector macro text or None)`` of a
    scalar graph whose inputs are node inputs ``first ...``; ``tag`` ("x" or
    "w") prefixes variables, ``name`` is the scalar code's per-node name.

    The vector macro (``BC_FUSED_WV(i, dst)`` of ``c_code/cpu/fused_bincount.c``)
    computes the values of elements ``i ..`` into the vector ``dst`` of type
    ``BC_FWV``: each vector input is loaded (``memcpy``, any alignment), each
    0-d input is the scalar GCC broadcasts; only for graphs with a vector form
    (:func:`~aesara_bincount_core.vector_codegen.vector_code`)."""
    decls, reads = [], []
    for k, v in enumerate(ins):
        j, t = first + k, _c_type(v.type.dtype)
        if v.type.ndim >= 1 and not _row_scalar(v):
            decls.append(f"const {t} *BC_RESTRICT bc_{tag}p{j} = (const {t} *)(in)[{j}];")
            reads.append(f"const {t} bc_{tag}a{k} = bc_{tag}p{j}[i];")
        else:
            decls.append(f"const {t} bc_{tag}s{j} = *(const {t} *)(in)[{j}];")
            reads.append(f"const {t} bc_{tag}a{k} = bc_{tag}s{j};")
    out_dtype = sop.fgraph.outputs[0].type.dtype
    code = scalar_codegen.scalar_code(
        sop,
        [f"bc_{tag}a{k}" for k in range(len(ins))],
        [f"bc_{tag}r"],
        "c",
        [v.type.dtype for v in ins],
        [out_dtype],
        name=name,
    )
    body_lines = (
        ["do {"] + reads + [f"{_c_type(out_dtype)} bc_{tag}r;", "{"]
        + _macro_body(code.body)
        + ["}", f"(dst) = bc_{tag}r;", "} while (0)"]
    )
    vec_reads, vec_ins = [], []
    for k, v in enumerate(ins):
        j = first + k
        if v.type.ndim >= 1 and not _row_scalar(v):  # as the scalar code reads it: bc_{tag}p{j}[i]
            vec_reads.append(f"BC_FWV bc_{tag}v{k}; memcpy(&bc_{tag}v{k}, bc_{tag}p{j} + (i), sizeof(bc_{tag}v{k}));")
            vec_ins.append(f"bc_{tag}v{k}")
        else:
            vec_ins.append(f"bc_{tag}s{j}")
    vec = vector_codegen.vector_code(
        sop, vec_ins, "(dst)", out_dtype, scalars=[v.type.ndim == 0 or _row_scalar(v) for v in ins]
    )
    vec_macro = None
    if vec is not None and all(v.type.dtype == out_dtype for v in ins):
        vec_macro = " \\\n    ".join(["do {"] + vec_reads + vec.splitlines() + ["} while (0)"])
    return " ".join(decls), " \\\n    ".join(body_lines), code, vec_macro
