"""Scalar ops and input values for the tests of the code generator (C and CUDA).

Shared by ``tests/test_scalar_codegen.py`` (the C target, NVRTC) and
``tests/gpu/test_cuda_elemwise.py`` (the GPU Op on the emulation): every
scalar op instance of ``aesara.scalar`` with every dtype it takes, and
values that include what breaks element code (signed zeros, infinities,
NaN, the ends of each integer dtype, subnormals).
"""
import numpy as np
from aesara.scalar import basic, math as scalar_math
from aesara.scalar.basic import Composite, ScalarOp

from aesara_bincount_core import scalar_codegen

__all__ = ["all_scalar_ops", "cases", "values", "operands", "safe_for", "DIVISIONS", "chunks",
           "cpu_reference"]

#: The ops whose integer forms raise ZeroDivisionError on a zero divisor.
DIVISIONS = ("floor_divide", "mod")


def all_scalar_ops():
    """Every scalar op instance defined in ``aesara.scalar`` (casts included), by name."""
    found = {}
    for mod in (basic, scalar_math):
        for name, op in sorted(vars(mod).items()):
            if isinstance(op, ScalarOp) and not isinstance(op, Composite) and op not in found.values():
                found[name] = op
    return found


def cases(target):
    """``[(name, op, dtype)]`` for every op and input dtype (all inputs of that
    dtype) that :func:`scalar_codegen.inline_problem` accepts for ``target``,
    and the list of ``(name, dtype, reason)`` it refuses."""
    ok, refused = [], []
    for name, op in all_scalar_ops().items():
        nin = op.nin if op.nin > 0 else 2
        for dtype in scalar_codegen.DTYPES:
            problem = scalar_codegen.inline_problem(op, target, [dtype] * nin)
            if problem is None:
                ok.append((name, op, dtype))
            else:
                refused.append((name, dtype, problem))
    return ok, refused


def values(dtype):
    """A vector of edge values of ``dtype``."""
    if dtype == "bool":
        return np.array([False, True])
    if dtype.startswith("float"):
        info = np.finfo(dtype)
        v = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 0.1, 7.25, -100.0, 1e3,
             info.max, -info.max, info.tiny, info.tiny / 4, np.inf, -np.inf, np.nan, 0.9999, 2.0]
        return np.array(v, dtype=dtype)
    info = np.iinfo(dtype)
    v = {0, 1, 2, 3, 7, 100, int(info.max), int(info.max) - 1, int(info.min), int(info.min) + 1}
    if info.min < 0:
        v |= {-1, -2, -3, -7, -100}
    return np.array(sorted(v), dtype=dtype)


def safe_for(name, a, b):
    """Mask of the operand pairs on which Aesara's own C code is defined: no
    integer division or modulo by zero (it raises) or of the most negative
    value by -1 (a trap on x86)."""
    if name not in DIVISIONS or a.dtype.kind not in "iub":
        return np.ones(a.shape, dtype=bool)
    ok = b != 0
    if a.dtype.kind == "i":
        ok &= ~((a == np.iinfo(a.dtype).min) & (b == -1))
    return ok


def operands(name, op, dtype):
    """The input arrays of one case: every pair of values for binary ops."""
    v = values(dtype)
    nin = op.nin if op.nin > 0 else 2
    if nin == 1:
        return [v]
    if nin == 2:
        a, b = np.meshgrid(v, v, indexing="ij")
        a, b = a.ravel(), b.ravel()
        keep = safe_for(name, a, b)
        return [a[keep], b[keep]]
    rng = np.random.default_rng(nin)
    return [rng.permutation(np.resize(v, 64)) for _ in range(nin)]


def chunks(target, size=36, divisions=True):
    """The accepted cases of :func:`cases` packed into multi-output ``Composite``
    ops, one dtype each, at most ``size`` outputs: ``[(composite, names,
    arrays)]``.  Every composite takes four inputs of its dtype, ``a``, ``b``,
    ``c`` and ``d`` (``b`` with no zero and no -1 facing the most negative
    value: the divisor of the integer divisions); unary ops read ``a``,
    binary ones ``a`` and ``b`` (every pair of edge values), others ``a, b, c``.
    ``divisions=False`` leaves the integer divisions out (the GPU Op only
    takes them with constant divisors)."""
    import aesara.scalar as aes

    ok, _ = cases(target)
    out = []
    for dtype in scalar_codegen.DTYPES:
        mine = [(n, op) for n, op, d in ok if d == dtype
                and (divisions or n not in DIVISIONS or dtype[0] not in "iub")]  # fmt: skip
        v = values(dtype)
        a, b = (x.ravel() for x in np.meshgrid(v, v, indexing="ij"))
        c = np.random.default_rng(len(v)).permutation(a)
        d = b.copy()
        if dtype[0] in "iub":
            d[d == 0] = 1
            if dtype[0] == "i":
                d[(a == np.iinfo(dtype).min) & (d == -1)] = 1
        for start in range(0, len(mine), size):
            part = mine[start:start + size]
            ins = [aes.get_scalar_type(dtype)() for _ in range(4)]
            outs = []
            for name, op in part:
                nin = op.nin if op.nin > 0 else 2
                args = [ins[0], ins[3]] if name in DIVISIONS else ins[:nin]
                outs.append(op(*args))
            out.append((aes.Composite(ins, outs), [n for n, _ in part], [a, b, c, d]))
    return out


def cpu_reference(target, dtype, divisions=True):
    """``({name: output}, arrays)`` of every accepted case of ``dtype``: one
    ``Composite`` of them all, its ``Elemwise`` compiled by Aesara (FAST_RUN,
    the C backend) and run on the inputs of :func:`chunks` (one compile per
    dtype, cached in Aesara's compile folder)."""
    import aesara
    import aesara.tensor as at
    from aesara.tensor.elemwise import Elemwise

    found = {}
    for comp, names, arrays in chunks(target, size=10**6, divisions=divisions):
        if arrays[0].dtype != dtype:
            continue
        vs = [at.tensor(dtype, shape=(None,)) for _ in arrays]
        outs = Elemwise(comp)(*vs)
        f = aesara.function(vs, outs if isinstance(outs, list) else [outs])
        found.update(zip(names, f(*arrays)))
        return found, arrays
    return found, None
