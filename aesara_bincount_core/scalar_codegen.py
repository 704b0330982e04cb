"""The one generator of C and CUDA code from Aesara's scalar ops.

Both the CPU loops that compute a bincount's inputs inline (the fused
``Bincount``) and the GPU elementwise kernels (:mod:`.gpu.elemwise`) take
their element code from here, so that the CPU and the GPU compute what
Aesara's own C backend computes: the code is the scalar ops' own
``c_code`` (``Composite.c_code`` for fused nodes) and ``c_support_code``, as
Theano's GPU backend built its ``GpuElemwise`` kernels
(``theano/gpuarray/elemwise.py``: the scalar op's C code as the kernel body,
its support code as the kernel's preamble).

- :func:`inline_problem` says whether a scalar op can be inlined for a target
  (``"c"`` or ``"cuda"``), by a rule on the code it would generate (see
  :data:`MATH_FUNCTIONS` and the function's Notes), never by a compile error.
- :func:`scalar_code` generates the code: file-scope ``support`` and the
  statements of the ``body``, plus a ``version`` hash for cache keys.
- :mod:`aesara_bincount_core.vector_codegen` writes, for the graphs that
  have one, the same computation on GCC's vector types (the CPU fused loop's
  weights, several elements an instruction).

For CUDA, what NVRTC lacks (NumPy's ``npy_*`` types, ``M_PI``, ``NAN``) comes
from ``c_code/cuda/scalar_preamble.cuh`` (:data:`CUDA_PREAMBLE`), which the
code that includes the body must include first; the GPU kernel template,
``c_code/cuda/elemwise_kernel.cu``, does.

Errors: of Aesara's scalar ops only integer ``//`` and ``%`` report one (a
division by zero raises ``ZeroDivisionError`` through Python).  The
generator turns that report into ``BC_SCALAR_FAIL(code);``, a macro the code
around the body defines, with ``code`` an index into :data:`SCALAR_ERRORS`
(1-based), so that no Python is called from inlined code and each caller
decides how to stop and what to raise.
"""
import hashlib
import re
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from aesara.scalar.basic import Cast, Composite, ScalarOp, get_scalar_type

from aesara_bincount_core import _c_code

__all__ = [
    "TARGETS",
    "DTYPES",
    "CUDA_PREAMBLE",
    "FAIL_MACRO",
    "SCALAR_ERRORS",
    "MATH_FUNCTIONS",
    "DEVICE_CASTS",
    "ScalarCode",
    "inline_problem",
    "scalar_code",
]

#: The targets: C (C++ compiled by Aesara's compiler) and CUDA (NVRTC).
TARGETS = ("c", "cuda")
#: dtypes the generated code may read and write.
DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64",
)  # fmt: skip
#: The header, in ``c_code/``, that CUDA code must include before the support code.
CUDA_PREAMBLE = "cuda/scalar_preamble.cuh"
#: The macro the body calls to report an error: ``BC_SCALAR_FAIL(code);``.
FAIL_MACRO = "BC_SCALAR_FAIL"
#: ``(Python exception, message)`` of each error code ``1, 2, ...`` the body may report.
SCALAR_ERRORS = (
    ("ZeroDivisionError", "integer division by zero"),
    ("ZeroDivisionError", "integer modulo by zero"),
)

#: Functions the scalar code may call: those of C99's <math.h> (and C's abs)
#: that CUDA also provides as device functions (CUDA Math API, "Mathematical
#: Functions" of the CUDA C++ Programming Guide), in double and float forms.
MATH_FUNCTIONS = frozenset(
    f + suffix
    for f in (
        "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign",
        "cos", "cosh", "erf", "erfc", "exp", "exp2", "expm1", "fabs", "fdim", "floor", "fma",
        "fmax", "fmin", "fmod", "hypot", "ldexp", "lgamma", "log", "log10", "log1p", "log2",
        "nan", "nearbyint", "pow", "remainder", "rint", "round", "sin", "sinh", "sqrt", "tan", "tanh",
        "tgamma", "trunc",
    )
    for suffix in ("", "f")
) | frozenset(("abs", "labs", "llabs", "isnan", "isinf", "isfinite", "signbit"))  # fmt: skip

#: Float-to-integer casts on the CUDA target: ``bc_float_to_<dtype>`` of the
#: preamble, which gives x86-64's values (see :class:`_DeviceCast`); to these
#: dtypes no cast of floats is inlined for CUDA (NumPy and Aesara's C code
#: disagree on their values out of range, see ``docs/semantics.rst``).
DEVICE_CASTS = frozenset(f"bc_float_to_{d}" for d in ("int8", "int16", "int32", "int64", "uint8", "uint16"))
_UNMATCHED_CASTS = ("uint32", "uint64")

# Words that look like calls but are not: C keywords, the npy_* casts.
_NOT_CALLS = frozenset(("if", "while", "for", "switch", "return", "sizeof", "defined"))
_CAST_TYPES = re.compile(r"^(npy_\w+|double|float|int|long|unsigned|char|short|signed|bool)$")
_SENTINEL = "BC_SCALAR_FAIL_SENTINEL"
_ERROR_RE = re.compile(
    r'PyErr_SetString\(\s*PyExc_(\w+)\s*,\s*"((?:[^"\\]|\\.)*)"\s*\)\s*;\s*' + _SENTINEL
)
_PYTHON_RE = re.compile(r"\b_?(Py[A-Z_]\w*|NPY_\w+|PyArray\w*)\b")
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')
_COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_DEFINED_RE = re.compile(r"#\s*define\s+(\w+)|\b(\w+)\s*\([^;{}()]*\)\s*\{")


@dataclass(frozen=True)
class ScalarCode:
    """Generated code of one scalar op.

    Attributes
    ----------
    support : str
        File-scope code (the scalar ops' ``c_support_code`` and
        ``c_support_code_apply``); for CUDA it follows an
        ``#include`` of :data:`CUDA_PREAMBLE`.
    body : str
        Statements, in a block of their own, that read the input
        expressions once each and assign every output lvalue.
    version : str
        SHA-256 of the target, the support code, the body and (for CUDA) the
        preamble: a key for caches and Op cache versions.
    errors : tuple of int
        The codes (:data:`SCALAR_ERRORS`) the body may report through
        ``BC_SCALAR_FAIL(code);``; empty for most ops.
    """

    support: str
    body: str
    version: str
    errors: Tuple[int, ...]


class _DeviceCast(Cast):
    """A cast whose CUDA code converts floats to integers as x86-64 does.

    CUDA's conversion saturates (NaN gives 0, -1.0 gives 0 in uint8), where
    NumPy and Aesara's C code on x86-64 give the "integer indefinite" value
    (the most negative int32 or int64, then wrapped to the dtype): the
    preamble's ``bc_float_to_<dtype>`` computes the latter without an
    out-of-range conversion.  Other casts are Aesara's.
    """

    def c_code(self, node, name, inputs, outputs, sub):
        out = node.outputs[0].type.dtype
        if node.inputs[0].type.dtype.startswith("float") and f"bc_float_to_{out}" in DEVICE_CASTS:
            return f"{outputs[0]} = bc_float_to_{out}({inputs[0]});"
        return super().c_code(node, name, inputs, outputs, sub)


def _device_ops(scalar_op: ScalarOp) -> ScalarOp:
    """``scalar_op`` for the CUDA target: its casts (in a Composite too) are
    :class:`_DeviceCast`; the op itself when it has none."""
    if type(scalar_op) is Cast:
        return _DeviceCast(scalar_op.o_type, name=scalar_op.name)
    if not isinstance(scalar_op, Composite):
        return scalar_op
    fgraph = scalar_op.fgraph
    if not any(type(n.op) is Cast or isinstance(n.op, Composite) for n in fgraph.apply_nodes):
        return scalar_op
    new = {v: v.type() for v in fgraph.inputs}
    for node in fgraph.toposort():
        made = _device_ops(node.op).make_node(*[new.get(v, v) for v in node.inputs])
        new.update(zip(node.outputs, made.outputs))
    return Composite([new[v] for v in fgraph.inputs], [new[v] for v in fgraph.outputs])


def _unmatched_cast(scalar_op: ScalarOp, node) -> Optional[str]:
    """Why a cast of floats in ``node`` (its inner nodes for a Composite) cannot
    give the CPU's values on the GPU, or None."""
    nodes = scalar_op.fgraph.toposort() if isinstance(scalar_op, Composite) else [node]
    for n in nodes:
        if isinstance(n.op, Composite):
            problem = _unmatched_cast(n.op, n)
            if problem:
                return problem
        elif isinstance(n.op, Cast) and n.inputs[0].type.dtype.startswith("float"):
            if n.outputs[0].type.dtype in _UNMATCHED_CASTS:
                return (
                    f"a cast of {n.inputs[0].type.dtype} to {n.outputs[0].type.dtype}: NumPy and "
                    "Aesara's C code disagree on its values for NaN, infinities and values out of range"
                )
    return None


def _strip(code: str) -> str:
    return _STRING_RE.sub('""', _COMMENT_RE.sub(" ", code))


def _scalar_node(scalar_op: ScalarOp, in_dtypes: Optional[Sequence[str]]):
    if in_dtypes is None:
        if isinstance(scalar_op, Composite):
            in_dtypes = [i.type.dtype for i in scalar_op.inputs]
        else:
            in_dtypes = ["float64"] * max(scalar_op.nin, 1)
    return scalar_op.make_node(*[get_scalar_type(dtype=d)() for d in in_dtypes])


def _generate(scalar_op, node, inputs, outputs, name):
    """(support, body, errors, problem) of ``node``: the raw code of the op with
    the error reports replaced; ``problem`` is why it cannot be inlined."""
    in_names = [f"bc_sc_in{j}" for j in range(len(node.inputs))]
    out_names = [f"bc_sc_out{j}" for j in range(len(node.outputs))]
    try:
        raw = scalar_op.c_code(node, name, in_names, out_names, {"fail": _SENTINEL, "id": "0"})
        support = "\n".join(
            s for s in (scalar_op.c_support_code(), scalar_op.c_support_code_apply(node, name)) if s
        )
    except NotImplementedError as exc:  # also aesara's MethodNotDefined
        return "", "", (), f"{scalar_op} has no C code for these dtypes ({type(exc).__name__}: {exc})"
    errors = []

    def report(match):
        key = (match.group(1), match.group(2))
        if key not in SCALAR_ERRORS:
            return match.group(0)  # left as is: the Python rule below refuses it
        code = SCALAR_ERRORS.index(key) + 1
        errors.append(code)
        return f"{FAIL_MACRO}({code});"

    raw = _ERROR_RE.sub(report, raw)
    lines = [
        f"const {t.type.dtype_specs()[1]} {n} = ({e});" for t, n, e in zip(node.inputs, in_names, inputs)
    ]
    lines += [f"{t.type.dtype_specs()[1]} {n};" for t, n in zip(node.outputs, out_names)]
    lines.append(raw.strip())
    lines += [f"{e} = {n};" for n, e in zip(out_names, outputs)]
    body = "{\n" + "\n".join(lines) + "\n}"
    return support, body, tuple(sorted(set(errors))), None


def _code_problem(scalar_op, node, support: str, body: str, target: str) -> Optional[str]:
    """The rule: why this generated code cannot be inlined, or None."""
    ops = [scalar_op]
    if isinstance(scalar_op, Composite):
        ops += [n.op for n in scalar_op.fgraph.toposort()]
    for op in ops:
        if op.c_header_dirs():
            return f"{op} needs header files of its own ({op.c_header_dirs()})"
    code = _strip(support + "\n" + body)
    if _SENTINEL in code:
        return f"{scalar_op} reports an error that the generator does not know"
    found = _PYTHON_RE.search(code)
    if found:
        return f"{scalar_op}'s C code calls Python or the NumPy C API ({found.group(1)})"
    defined = {a or b for a, b in _DEFINED_RE.findall(code)}
    for call in _CALL_RE.findall(code):
        if call in _NOT_CALLS or _CAST_TYPES.match(call) or call in MATH_FUNCTIONS:
            continue
        if call in defined or call == FAIL_MACRO or (target == "cuda" and call in DEVICE_CASTS):
            continue
        return f"{scalar_op}'s C code calls {call}(), which is not a C99 math function"
    if target == "cuda" and re.search(r"\)\s*\{", _strip(support)) and "WITHIN_KERNEL" not in support:
        return f"{scalar_op}'s support code defines functions that are not marked for the device"
    return None


def inline_problem(scalar_op: ScalarOp, target: str, in_dtypes: Optional[Sequence[str]] = None) -> Optional[str]:
    """Why ``scalar_op`` cannot be inlined for ``target``, or None when it can.

    Parameters
    ----------
    scalar_op : aesara.scalar.ScalarOp
        Any scalar op, a ``Composite`` included.
    target : {"c", "cuda"}
    in_dtypes : sequence of str, optional
        dtypes of the inputs; by default a ``Composite``'s own input types,
        and float64 for any other op (whose C code may depend on them: give
        them).

    Returns
    -------
    str or None
        The reason, for messages and for tests.

    Raises
    ------
    ValueError
        An unknown target.

    Notes
    -----
    The rule, tested on every scalar op of Aesara and every dtype
    (``tests/test_scalar_codegen.py``): every input and output dtype is one
    of :data:`DTYPES` (no complex, no float16); the op has C code for these
    dtypes; it needs no header folders of its own; its code and support
    code, once the known error reports are replaced (see the module
    docstring), name no Python or NumPy C API (``Py*``, ``NPY_*``) and call
    nothing but :data:`MATH_FUNCTIONS` and what the support code defines;
    for CUDA, functions defined in the support code are marked
    ``WITHIN_KERNEL``, and no float is cast to uint32 or uint64 (casts of
    floats to other integers become the preamble's ``bc_float_to_<dtype>``,
    which gives x86-64's values: :data:`DEVICE_CASTS`).
    """
    if target not in TARGETS:
        raise ValueError(f"scalar_codegen: unknown target {target!r}; use one of {TARGETS}")
    if not isinstance(scalar_op, ScalarOp):
        return f"{scalar_op} is not a scalar op"
    if target == "cuda":
        scalar_op = _device_ops(scalar_op)
    try:
        node = _scalar_node(scalar_op, in_dtypes)
    except Exception as exc:  # the op refuses these types
        return f"{scalar_op} does not take {list(in_dtypes or [])} ({type(exc).__name__}: {exc})"
    for var in list(node.inputs) + list(node.outputs):
        if var.type.dtype not in DTYPES:
            return f"{scalar_op} works on {var.type.dtype}, which is not one of {DTYPES}"
    if isinstance(scalar_op, Composite):
        for var in scalar_op.fgraph.variables:
            if getattr(var.type, "dtype", None) not in DTYPES:
                return f"{scalar_op} works on {var.type.dtype} inside, which is not one of {DTYPES}"
    names_in = [f"in{j}" for j in range(len(node.inputs))]
    names_out = [f"out{j}" for j in range(len(node.outputs))]
    support, body, _, problem = _generate(scalar_op, node, names_in, names_out, "bc_scalar")
    problem = problem or _code_problem(scalar_op, node, support, body, target)
    return problem or (_unmatched_cast(scalar_op, node) if target == "cuda" else None)


def scalar_code(
    scalar_op: ScalarOp,
    inputs: Sequence[str],
    outputs: Sequence[str],
    target: str,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    name: str = "bc_scalar",
) -> ScalarCode:
    """Generate the code of ``scalar_op`` for ``target``.

    Parameters
    ----------
    scalar_op : aesara.scalar.ScalarOp
        The op, a ``Composite`` included.
    inputs : sequence of str
        One C expression per input, of the input's dtype (or convertible to
        it); each is evaluated once, before any output is written, so an
        output may alias an input.
    outputs : sequence of str
        One C lvalue per output.
    target : {"c", "cuda"}
    in_dtypes, out_dtypes : sequence of str
        dtypes of the inputs and of the outputs (those of the ``Elemwise``
        node); the outputs must be those the op gives for these inputs.
    name : str
        A C identifier, unique in the translation unit, for the op's
        per-node support code (``c_support_code_apply``).

    Returns
    -------
    ScalarCode

    Raises
    ------
    ValueError
        An unknown target, wrong numbers of expressions, output dtypes the
        op does not give, or an op that :func:`inline_problem` refuses (the
        message holds the reason).
    """
    problem = inline_problem(scalar_op, target, in_dtypes)
    if problem:
        raise ValueError(f"scalar_codegen: cannot inline: {problem}")
    if target == "cuda":
        scalar_op = _device_ops(scalar_op)
    node = _scalar_node(scalar_op, in_dtypes)
    if len(inputs) != len(node.inputs) or len(outputs) != len(node.outputs):
        raise ValueError(
            f"scalar_codegen: {scalar_op} takes {len(node.inputs)} inputs and gives "
            f"{len(node.outputs)} outputs; got {len(inputs)} and {len(outputs)} expressions"
        )
    given = [o.type.dtype for o in node.outputs]
    if list(out_dtypes) != given:
        raise ValueError(f"scalar_codegen: {scalar_op} gives {given} for {list(in_dtypes)}, not {list(out_dtypes)}")
    support, body, errors, _ = _generate(scalar_op, node, inputs, outputs, name)
    h = hashlib.sha256()
    for part in (target, support, body, _c_code.read_source(CUDA_PREAMBLE) if target == "cuda" else ""):
        h.update(part.encode())
        h.update(b"\0")
    return ScalarCode(support=support, body=body, version=h.hexdigest(), errors=errors)

