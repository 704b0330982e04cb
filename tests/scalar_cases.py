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

__all__ = [
    "all_scalar_ops", "cases", "dtype_tuples", "mixed_cases", "mixed_pair", "values", "DIVISIONS", "chunks",
    "special_args", "cpu_reference",
]  # fmt: skip

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


def dtype_tuples(nin):
    """Input dtype tuples of an op of ``nin`` inputs: every dtype for one input,
    every pair for two, and for more, every pair with one input of the first
    dtype and the others of the second (each position in turn)."""
    dtypes = scalar_codegen.DTYPES
    if nin == 1:
        return [(d,) for d in dtypes]
    found = []
    for a in dtypes:
        for b in dtypes:
            for k in range(nin if nin > 2 else 1):
                t = (a, b) if nin == 2 else tuple(a if j == k else b for j in range(nin))
                if t not in found:
                    found.append(t)
    return found


def mixed_cases(target):
    """``[(name, op, in_dtypes)]``: every op with every input dtype tuple of
    :func:`dtype_tuples` (mixed dtypes: ``int64 ** int8``, ``float32 %
    float64``) that :func:`scalar_codegen.inline_problem` accepts."""
    ok = []
    for name, op in all_scalar_ops().items():
        for dtypes in dtype_tuples(op.nin if op.nin > 0 else 2):
            if scalar_codegen.inline_problem(op, target, list(dtypes)) is None:
                ok.append((name, op, dtypes))
    return ok


def mixed_pair(first, second):
    """``(composite, names, arrays)``: every binary op the rule accepts for CUDA
    with inputs of ``first`` and ``second``, in one multi-output ``Composite``
    of four inputs: ``a``, ``b`` (every pair of edge values of the two dtypes)
    and ``s1``, ``s2`` (small values: :func:`special_args`' ops read them,
    and so does ``pow`` with an integer input).  Integer divisions are left
    out (the GPU Op only takes them with constant divisors)."""
    import aesara.scalar as aes

    va, vb = values(first), values(second)
    a, b = (x.ravel() for x in np.meshgrid(va, vb, indexing="ij"))
    s1, s2 = _small(first, len(a))[0], _small(second, len(a))[1]
    ins = [aes.get_scalar_type(d)() for d in (first, second, first, second)]
    names, outs = [], []
    for name, op in all_scalar_ops().items():
        if op.nin not in (2, -1) or scalar_codegen.inline_problem(op, "cuda", [first, second]):
            continue
        if name in DIVISIONS and second[0] in "iub":
            continue
        small = special_args(name, first, [None] * 6) is not None or special_args(name, second, [None] * 6)
        small = small or (name == "pow" and "f" not in first[0] + second[0])
        names.append(name)
        outs.append(op(*(ins[2:] if small else ins[:2])))
    return aes.Composite(ins, outs), names, [a, b, s1, s2]


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


def special_args(name, dtype, ins):
    """The inputs of ops whose C code is undefined on some edge values, else None.

    Aesara's C code (and so ours) is undefined in C for: an integer division
    by zero (it raises) or of the most negative value by -1 (a trap on x86);
    a float converted to an integer it does not fit (NaN, infinities, out of
    range: x86 gives the "integer indefinite" value, CUDA saturates), which
    integer ``pow`` and float-to-integer casts do, and so do ``maximum`` and
    ``minimum`` of 64-bit integers (Aesara's C code gives its result the type
    of ``nan("")``, a double, so values past 2**53 round and past the top of
    the dtype are undefined).  Those get inputs without such values: the
    divisor ``d``, and the small values ``s1``, ``s2``.
    """
    a, b, c, d, s1, s2 = ins
    if name in DIVISIONS:
        return [a, d]
    if name == "pow" and dtype[0] in "iub":
        return [s1, s2]
    if name.startswith("convert_to_") and dtype[0] == "f" and name[11:][0] in "iu":
        return [s1]
    if name in ("scalar_maximum", "scalar_minimum") and dtype in ("int64", "uint64"):
        return [s1, s2]  # Aesara's C code takes them through a double
    return None


def _small(dtype, n):
    """``s1`` (non-negative, from 1 for integers: pow bases; fractional for
    floats: casts) and ``s2`` (small exponents, negative ones if signed)."""
    if dtype == "bool":
        s1, s2 = [True], [False, True]
    elif dtype[0] == "f":
        s1 = [0.0, -0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 99.9, 127.0]
        s2 = [-2.0, -0.5, 0.0, 0.5, 3.0]
    else:
        s1 = list(range(1, 7))
        s2 = list(range(-3, 4)) if dtype[0] == "i" else list(range(0, 7))
    return np.resize(np.array(s1, dtype=dtype), n), np.resize(np.array(s2, dtype=dtype)[::-1], n)


def chunks(target, size=34, divisions=True):
    """The accepted cases of :func:`cases` packed into multi-output ``Composite``
    ops, one dtype each, at most ``size`` outputs: ``[(composite, names,
    arrays)]``.  Every composite takes six inputs of its dtype: ``a``, ``b``
    (every pair of edge values), ``c`` (``a`` shuffled), ``d`` (``b`` with no
    zero and no -1 facing the most negative value) and ``s1``, ``s2``
    (:func:`special_args`); unary ops read ``a``, binary ones ``a`` and
    ``b``, others ``a, b, c``.
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
        s1, s2 = _small(dtype, len(a))
        for start in range(0, len(mine), size):
            part = mine[start:start + size]
            ins = [aes.get_scalar_type(dtype)() for _ in range(6)]
            outs = []
            for name, op in part:
                nin = op.nin if op.nin > 0 else 2
                outs.append(op(*(special_args(name, dtype, ins) or ins[:nin])))
            out.append((aes.Composite(ins, outs), [n for n, _ in part], [a, b, c, d, s1, s2]))
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
