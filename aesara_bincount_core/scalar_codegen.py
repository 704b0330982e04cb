"""C code from Aesara's scalar ops, for loops of ours that inline them.

Stand-in of cpu-fusion for the C target only, written to the interface
agreed with gpu-elemwise (whose generator, for C and CUDA, replaces this
file): :func:`inline_problem` says whether a scalar op can be inlined,
:func:`scalar_code` writes it.  The code is the scalar ops' own
(``c_code``, ``Composite.c_code``, ``c_support_code``), as Aesara's
``Elemwise`` uses it.  Neighbours: :mod:`aesara_bincount_core.fused` (the
fused CPU bincount that calls this), ``c_code/bincount_fused_cpu.c``.

The body of the C target may contain the statement macro ``BC_SCALAR_FAIL``
where Aesara's code has ``%(fail)s`` (after a ``PyErr_SetString`` such as
integer division's "integer division by zero"); the caller defines it.
"""
import hashlib
import re
from collections import namedtuple
from typing import Optional, Sequence

from aesara.graph.utils import MethodNotDefined
from aesara.scalar import basic as aes

__all__ = ["ScalarCode", "inline_problem", "scalar_code", "TARGETS"]

#: The targets of the generated code.
TARGETS = ("c",)

ScalarCode = namedtuple("ScalarCode", "support body version")
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
"""

# Calls into Python allowed in a body: an error message just before the
# failure (integer division by zero); the caller defers it.
_ALLOWED_PY = {"PyErr_SetString", "PyErr_Format"}
_PY_CALL = re.compile(r"\b(Py[A-Za-z_]\w*|_Py\w*)\s*\(")
_PY_NAME = re.compile(r"\b(PyObject|PyArrayObject|PyArray_\w+|NPY_BEGIN_THREADS\w*)\b")
_FAIL = "BC_SCALAR_FAIL;"


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


def _resolve_kernel_ifdefs(body: str) -> str:
    """Keep the host branch of ``#ifdef KERNEL`` / ``#else`` / ``#endif``."""
    out, stack = [], []  # stack of "keep this branch?" per #ifdef level
    for line in body.splitlines():
        s = line.strip()
        if re.match(r"#\s*ifdef\s+KERNEL\b", s):
            stack.append(False)
        elif re.match(r"#\s*ifndef\s+KERNEL\b", s):
            stack.append(True)
        elif re.match(r"#\s*else\b", s) and stack:
            stack[-1] = not stack[-1]
        elif re.match(r"#\s*endif\b", s) and stack:
            stack.pop()
        elif all(stack):
            out.append(line)
    return "\n".join(out)


def _strip_line_comments(code: str) -> str:
    lines = []
    for line in code.splitlines():
        pos = line.find("//")
        if pos >= 0 and line.count('"', 0, pos) % 2 == 0:
            line = line[:pos]
        lines.append(line)
    return "\n".join(lines)


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
    name = "bc_s" + hashlib.sha256(repr((str(scalar_op), tuple(in_dtypes))).encode()).hexdigest()[:12]
    support, body, node = _generate(scalar_op, name, inputs, outputs, in_dtypes)
    got = [o.type.dtype for o in node.outputs]
    if got != list(out_dtypes):
        raise ValueError(f"scalar_code: {scalar_op} gives {got}, not {list(out_dtypes)}")
    body = _strip_line_comments(_resolve_kernel_ifdefs(body))
    version = hashlib.sha256((support + "\0" + body).encode()).hexdigest()
    return ScalarCode(support, body, version)
