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

__all__ = ["all_scalar_ops", "cases", "values", "operands", "safe_for"]


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
    if name not in ("int_div", "floor_div", "mod", "floor_divide") or a.dtype.kind not in "iu":
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
