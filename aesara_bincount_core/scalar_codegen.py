"""C code from Aesara's scalar ops, for loops of ours that inline them.

Stand-in of cpu-fusion for the C target only, written to the interface
agreed with gpu-elemwise (whose generator, for C and CUDA, replaces this
file): :func:`inline_problem` says whether a scalar op can be inlined,
:func:`scalar_code` writes it.  The code is the scalar ops' own
(``c_code``, ``Composite.c_code``, ``c_support_code``), as Aesara's
``Elemwise`` uses it.  Neighbours: :mod:`aesara_bincount_core.fused` (the
fused CPU bincount that calls this), ``c_code/bincount_fused_cpu.c``.

The body never calls Python: the one error Aesara's scalar code reports
(integer division or modulo by zero, a ``PyErr_SetString`` then ``%(fail)s``)
becomes ``BC_SCALAR_FAIL(code);``, a macro the caller defines, with ``code``
an index into :data:`SCALAR_ERRORS`.
"""
import hashlib
import re
from collections import namedtuple
from typing import Optional, Sequence

from aesara.graph.utils import MethodNotDefined
from aesara.scalar import basic as aes

__all__ = ["ScalarCode", "SCALAR_ERRORS", "inline_problem", "scalar_code", "TARGETS"]

#: The targets of the generated code.
TARGETS = ("c",)

ScalarCode = namedtuple("ScalarCode", "support body version errors")
ScalarCode.__doc__ = """Generated code of one scalar op.

Attributes
----------
support : str
    File-scope code (the scalar ops' support code), to put before the body.
body : str
    C statements reading the input expressions and writing the output
    lvalues; no preprocessor line, no ``//`` comment, so it can sit in a
    macro.
version : str
    SHA-256 of ``support`` and ``body``, for cache versions.
errors : tuple of int
    The codes (:data:`SCALAR_ERRORS`, from 1) the body may report with
    ``BC_SCALAR_FAIL(code);``.
"""

#: ``(Python exception, message)`` of each error code 1, 2, ... of a body.
SCALAR_ERRORS = (
    ("ZeroDivisionError", "integer division by zero"),
    ("ZeroDivisionError", "integer modulo by zero"),
)

# Calls into Python allowed in a body: an error message just before the
# failure (integer division by zero); the caller defers it.
_ALLOWED_PY = set()
_PY_CALL = re.compile(r"\b(Py[A-Za-z_]\w*|_Py\w*)\s*\(")
_PY_NAME = re.compile(r"\b(PyObject|PyArrayObject|PyArray_\w+|NPY_BEGIN_THREADS\w*)\b")
_FAIL = "BC_SCALAR_FAIL_SENTINEL"
_ERROR_RE = re.compile(r'PyErr_SetString\(\s*PyExc_(\w+)\s*,\s*"([^"]*)"\s*\)\s*;\s*' + _FAIL)


def _nodes(scalar_op):
    if isinstance(scalar_op, aes.Composite):
        return list(scalar_op.fgraph.toposort())
    return None


def inline_problem(scalar_op, target: str) -> Optional[str]:
    """Why ``scalar_op`` cannot be inlined for ``target``, or None if it can.

    Parameters
    ----------
    scalar_op : aesara.scalar.ScalarOp
        A scalar op; a :class:`~aesara.scalar.basic.Composite` is judged by
        the nodes of its graph, with their dtypes.  A plain op is judged by
        its class only (its dtypes are not known here): callers that know
        them wrap it in a ``Composite``.
    target : {"c"}
        Where the code runs.

    Returns
    -------
    str or None
        The reason (no C code, a complex or float16 value, a call into
        Python other than an error message before a failure, a preprocessor
        line other than ``#ifdef KERNEL``), or None.

    Raises
    ------
    ValueError
        For an unknown ``target``.
    """
    if target not in TARGETS:
        raise ValueError(f"inline_problem: unknown target {target!r}; expected one of {TARGETS}")
    nodes = _nodes(scalar_op)
    if nodes is None:
        if type(scalar_op).c_code is aes.ScalarOp.c_code:
            return f"{scalar_op} has no C code"
        return None
    for node in nodes:
        if isinstance(node.op, aes.Composite):
            problem = inline_problem(node.op, target)
            if problem:
                return problem
            continue
        for v in node.inputs + node.outputs:
            if v.type.dtype.startswith("complex") or v.type.dtype == "float16":
                return f"{node.op} works on {v.type.dtype}"
    try:
        support, body, _ = _generate(scalar_op, "bc_probe")
    except (MethodNotDefined, NotImplementedError, TypeError, ValueError) as err:
        return f"{scalar_op} has no C code for these dtypes ({type(err).__name__}: {err})"
    body = _ERROR_RE.sub(
        lambda m: "" if (m.group(1), m.group(2)) in SCALAR_ERRORS else m.group(0), body
    )
    return _text_problem(support + "\n" + body)


def _text_problem(code: str) -> Optional[str]:
    for m in _PY_CALL.finditer(code):
        if m.group(1) not in _ALLOWED_PY:
            return f"its C code calls {m.group(1)}"
    m = _PY_NAME.search(code)
    if m:
        return f"its C code uses {m.group(1)}"
    for line in code.splitlines():
        s = line.strip()
        if s.startswith("#") and not re.match(r"#\s*(ifdef|ifndef|else|endif|define|undef)\b", s):
            return f"its C code has the preprocessor line {s!r}"
    return None


def _generate(scalar_op, name: str, inputs=None, outputs=None, in_dtypes=None):
    if in_dtypes is None:
        if not isinstance(scalar_op, aes.Composite):
            raise TypeError("dtypes are needed for a plain scalar op")
        in_dtypes = [i.type.dtype for i in scalar_op.fgraph.inputs]
    node = scalar_op.make_node(*[aes.get_scalar_type(dt)() for dt in in_dtypes])
    inputs = inputs or [f"i{k}" for k in range(len(node.inputs))]
    outputs = outputs or [f"o{k}" for k in range(len(node.outputs))]
    body = scalar_op.c_code(node, name, list(inputs), list(outputs), dict(fail=_FAIL, id=name))
    support = "\n".join(
        s for s in (scalar_op.c_support_code(), scalar_op.c_support_code_apply(node, name)) if s
    )
    return support, body, node


def scalar_code(
    scalar_op,
    inputs: Sequence[str],
    outputs: Sequence[str],
    target: str,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    name: str = "bc_scalar",
) -> ScalarCode:
    """The code of ``scalar_op`` applied to C expressions.

    Parameters
    ----------
    scalar_op : aesara.scalar.ScalarOp
        The op (a ``Composite`` for a fused graph).
    inputs : sequence of str
        C expressions of the inputs; each may be evaluated several times, so
        pass plain variables.
    outputs : sequence of str
        C lvalues the outputs are written to.
    target : {"c"}
        Where the code runs.
    in_dtypes, out_dtypes : sequence of str
        dtypes of the inputs and outputs.

    Returns
    -------
    ScalarCode

    Raises
    ------
    ValueError
        For an unknown target, dtypes that do not match the op's outputs,
        or an op that :func:`inline_problem` refuses.
    """
    problem = inline_problem(scalar_op, target)
    if problem:
        raise ValueError(f"scalar_code: {scalar_op} cannot be inlined: {problem}")
    support, body, node = _generate(scalar_op, name, inputs, outputs, in_dtypes)
    got = [o.type.dtype for o in node.outputs]
    if got != list(out_dtypes):
        raise ValueError(f"scalar_code: {scalar_op} gives {got}, not {list(out_dtypes)}")
    errors = []

    def report(m):
        code = SCALAR_ERRORS.index((m.group(1), m.group(2))) + 1
        errors.append(code)
        return f"BC_SCALAR_FAIL({code});"

    body = _ERROR_RE.sub(report, body)
    version = hashlib.sha256((support + "\0" + body).encode()).hexdigest()
    return ScalarCode(support, body, version, tuple(sorted(set(errors))))
