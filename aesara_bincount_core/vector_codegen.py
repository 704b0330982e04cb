"""The vector form of Aesara scalar graphs: several elements an instruction.

The companion of :mod:`aesara_bincount_core.scalar_codegen`, which writes a
scalar graph's C code for one element from the scalar ops' own ``c_code``.
For the graphs whose every op's C code is one IEEE operation of its inputs
(:data:`VECTOR_OPS`), :func:`vector_code` writes the same operations on
GCC's vector types (``__attribute__((vector_size(N)))``, which GCC and Clang
compile to SIMD instructions where the target has them, and to scalar ones
where it has not), so that a CPU loop computes a vector of elements with
each instruction and every lane gets the scalar code's bits: the fused
``Bincount``'s weights (``c_code/cpu/fused_bincount_fast.h``).  Imports
Aesara's scalar module only.
"""
import math
from typing import Optional, Sequence

from aesara.scalar.basic import Add, Composite, Mul, Neg, ScalarConstant, ScalarOp, Sub, TrueDivide

__all__ = ["VECTOR_OPS", "vector_code"]
#: The scalar ops :func:`vector_code` writes on vectors, with their operator:
#: for inputs and output of one float dtype, the C code of each is that one
#: IEEE operation of its inputs, left to right (``z = i0 + i1 + i2;``;
#: ``tests/test_scalar_codegen.py`` checks it against the ops' own
#: ``c_code``), which the vector instruction computes on every lane to the
#: same bits.
VECTOR_OPS = {Add: "+", Mul: "*", Sub: "-", TrueDivide: "/", Neg: "-"}


def vector_code(
    scalar_op: ScalarOp, inputs: Sequence[str], output: str, dtype: str, scalars: Sequence[bool] = ()
) -> Optional[str]:
    """The statements of ``scalar_op`` on GCC vectors, or None when it has none.

    A graph has a vector form when it is a ``Composite`` whose every node is
    one of :data:`VECTOR_OPS` and every variable has the float ``dtype``
    (``float64``; ``float32`` without constants: Aesara writes a constant as
    a ``double`` literal, whose product with a float is computed in double
    by the scalar code but would be rounded to float first on a vector).
    Constants must be finite.  The code is then the same operations as the
    scalar code, on vectors of lanes, so every lane gets the scalar code's
    bits (the caller compiles it without contracting a product and a sum into
    a fused multiply-add, as it does the scalar code).

    Parameters
    ----------
    scalar_op : aesara.scalar.ScalarOp
        The graph.
    inputs : sequence of str
        One C expression per input: a vector of ``dtype`` lanes (GCC's
        ``vector_size`` types), or a scalar of ``dtype``, which GCC
        broadcasts to every lane.
    output : str
        The C lvalue, a vector, that receives the result.
    dtype : str
        The dtype of every variable of the graph.
    scalars : sequence of bool, optional
        Which inputs are scalars (none by default); a graph whose output
        depends on none of the vectors has no vector form.

    Returns
    -------
    str or None
        A block of statements (GCC's ``__typeof__`` declares the temporaries,
        valid C and C++ for GCC and Clang), or None.
    """
    if not isinstance(scalar_op, Composite) or dtype not in ("float64", "float32"):
        return None
    fgraph = scalar_op.fgraph
    if len(inputs) != len(fgraph.inputs) or len(fgraph.outputs) != 1:
        return None
    names = dict(zip(fgraph.inputs, [f"({e})" for e in inputs]))
    is_scalar = {v: bool(k < len(scalars) and scalars[k]) for k, v in enumerate(fgraph.inputs)}
    lines = []
    for k, node in enumerate(fgraph.toposort()):
        op = VECTOR_OPS.get(type(node.op))
        if op is None or any(v.type.dtype != dtype for v in node.inputs + node.outputs):
            return None
        args = []
        for v in node.inputs:
            if isinstance(v, ScalarConstant):
                value = float(v.data)
                if dtype != "float64" or not math.isfinite(value):
                    return None
                args.append(f"({value!r})")
                is_scalar[v] = True
            elif v in names:
                args.append(names[v])
            else:
                return None
        if type(node.op) is Neg:
            if len(args) != 1:
                return None
            expr = f"-{args[0]}"
        else:
            if len(args) < 2 or (op in "-/" and len(args) != 2):
                return None
            expr = f" {op} ".join(args)
        tmp = f"bc_vt{k}"
        lines.append(f"const __typeof__({expr}) {tmp} = {expr};")
        names[node.outputs[0]] = tmp
        is_scalar[node.outputs[0]] = all(is_scalar[v] for v in node.inputs)
    out = fgraph.outputs[0]
    if not lines or out not in names or is_scalar[out]:
        return None
    return "{\n" + "\n".join(lines + [f"{output} = {names[out]};"]) + "\n}"
