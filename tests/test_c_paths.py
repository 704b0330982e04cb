"""Each C path of Bincount and ScatterAdd once, at a small size: the cases of the sanitized run.

``tests/test_sanitize.py`` runs this file under AddressSanitizer and
UndefinedBehaviorSanitizer (``tests/sanitizer.py``) inside ``make test``: its
CPU tests, and its GPU variants on the CPU emulation (the host C code of
``GpuBincount`` and ``GpuScatterAdd``, and the kernel layer's library).  Run
as it is, it is an ordinary test against :func:`numpy.bincount` and
:func:`numpy.add.at` (a bad input against the message of the NumPy
reference), through ``aesara.function``.

The paths, by what picks them (``c_code/cpu/bincount.c``,
``c_code/cpu/scatter_add*.{c,h}``): few bins (a private histogram; runs of
equal values; skewed values), many bins (the direct path, prefetched), with
float64 weights, the scatter-add form (negative indices wrap), each with
OpenMP threads where the input is large enough (the pool's tasks); rows of
fixed and other lengths, broadcast and strided increments, onto zeros, onto
a copy, in place, split by row and by thread; each error.  Inputs take
strided views at odd offsets, the top bin, the last row, ``-0.0`` weights
and the extreme negative index.  Every CPU function is compiled with OpenMP
on: a small input takes the one-thread loops of the same module, which
keeps the compiles (the slow part of a sanitized run) few: seven modules.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount

import aesara_bincount  # noqa: F401  (registers the rewrites)
from aesara_bincount import reference_bincount
from aesara_bincount_core.semantics import reference_scatter_add
from backends import BACKENDS
from rows_cases import assert_same_rows, check_rows_graph, rows_case

#: Elements from which the CPU Ops use threads (above cpu/bincount.c's
#: BC_OMP_MIN_N and cpu/scatter_add_check.h's SA_OMP_MIN_WORK).
BIG = 200_000

_FUNCTIONS = {}


def cpu_only(backend, case):
    """Skip the GPU variant of a case that sizes a path of the CPU's threads."""
    if backend.name == "gpu" and ("threaded" in case or "lanes" in case):
        pytest.skip("CPU only: a size that picks a threaded path of the CPU code")


def compiled(backend, kind):
    """The function of one kind of Bincount graph on ``backend``, compiled once."""
    key = (backend.name, kind)
    if key not in _FUNCTIONS:
        x = at.vector("x", dtype="int64")
        w = at.vector("w", dtype="float64")
        m = at.lscalar("m")
        if kind == "count":
            inputs, out = [x, m], bincount(x, minlength=m)
        elif kind == "weighted":
            inputs, out = [x, w, m], bincount(x, weights=w, minlength=m)
        else:  # the scatter-add form
            inputs, out = [x, w, m], at.inc_subtensor(at.zeros(m, dtype="float64")[x], w)
        with aesara.config.change_flags(openmp=backend.name == "cpu"):
            fn = backend.function(inputs, out, check=False)
        names = [type(node.op).__name__ for node in fn.maker.fgraph.toposort()]
        assert any("Bincount" in name for name in names), names
        _FUNCTIONS[key] = fn
    return _FUNCTIONS[key]


def strided(values, step=3, offset=1):
    """``values`` as a strided view at an odd offset of a larger array."""
    values = np.asarray(values)
    base = np.full(len(values) * step + offset, -7, dtype=values.dtype)
    base[offset::step] = values
    return base[offset::step]


def bincount_inputs(case, rng):
    """``(kind, args)`` of a case: the function's arguments."""
    n = BIG if case.endswith("threaded") else 3000
    if case.startswith("few-bins"):
        x = rng.integers(0, 1000, n)
        x[-1] = 999  # the top bin
        return "count", (strided(x), 0)
    if case.startswith("many-bins"):
        x = rng.integers(0, 1_000_000, n)
        return "count", (x, 1_000_001)
    if case == "runs":
        return "count", (np.sort(rng.integers(0, 500, n)), 0)
    if case == "skewed":
        return "count", (np.minimum(rng.zipf(1.3, n), 900) - 1, 0)
    if case.startswith("weighted"):
        top = 1_000_000 if "many" in case else 1000
        x, w = rng.integers(0, top, n), rng.standard_normal(n)
        w[::7] = -0.0
        return "weighted", (x, strided(w), 0)
    if case.startswith("scatter"):
        x, w = rng.integers(-500, 500, n), rng.standard_normal(n)
        x[0] = -500  # the extreme negative index
        return "scatter", (x, w, 500)
    raise AssertionError(case)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "case",
    ["few-bins", "few-bins-threaded", "many-bins", "many-bins-threaded", "runs", "skewed",
     "weighted", "weighted-threaded", "weighted-many-bins", "scatter", "scatter-threaded"],
)  # fmt: skip
def test_bincount_path(backend, case, rng):
    cpu_only(backend, case)
    kind, args = bincount_inputs(case, rng)
    got = compiled(backend, kind)(*args)
    x = np.asarray(args[0])
    if kind == "scatter":
        expected = np.zeros(args[2])
        np.add.at(expected, x, args[1])
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    elif kind == "weighted":
        np.testing.assert_allclose(got, np.bincount(x, args[1], args[2]), rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, np.bincount(x, minlength=args[1]))


#: Bad inputs: (kind, args), each raising the exception of the NumPy reference.
BINCOUNT_ERRORS = {
    "negative": ("count", (np.array([0, 3, -3, 2]), 0)),
    "negative-threaded": ("count", (np.r_[np.zeros(BIG - 5, np.int64), -1, 2, 3, 4, 5], 0)),
    "minlength": ("count", (np.array([1, 2]), -1)),
    "too-large": ("count", (np.array([3, 2**40, 1]), 0)),
    "weights-length": ("weighted", (np.array([1, 2, 3]), np.ones(2), 0)),
    "scatter-index": ("scatter", (np.array([0, 499, 500]), np.ones(3), 500)),
    "scatter-index-threaded": ("scatter", (np.r_[np.zeros(BIG, np.int64), -501], np.ones(BIG + 1), 500)),
    "scatter-length": ("scatter", (np.array([0, 1]), np.ones(2), -4)),
    "scatter-broadcast": ("scatter", (np.array([0, 1, 2]), np.ones(2), 5)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(BINCOUNT_ERRORS))
def test_bincount_error(backend, case):
    cpu_only(backend, case)
    kind, args = BINCOUNT_ERRORS[case]
    if kind == "count":
        x, n, w = args[0], args[1], None
    else:
        x, w, n = args
    mode = "scatter" if kind == "scatter" else "bincount"
    out_dtype = "int64" if kind == "count" else "float64"
    with pytest.raises(Exception) as ref:
        reference_bincount(x, n, w, mode=mode, out_dtype=out_dtype)
    fn = compiled(backend, kind)
    with pytest.raises(type(ref.value)) as info:
        fn(*args)
    assert str(info.value).split("\n")[0] == str(ref.value)
    # The process and the function stay usable.
    np.testing.assert_array_equal(compiled(backend, "count")(np.array([1, 1]), 3), [0, 2, 0])


#: Rows cases: (form, dtype, V, row shape, N, increments layout, openmp).
ROWS = {
    "zeros-plain-8": ("zeros", "float64", 50, (8,), 400, "rows", True),
    "zeros-general-5": ("zeros", "int32", 50, (5,), 400, "rows", True),
    "base-broadcast-row": ("base", "float64", 30, (12,), 200, "per-index", True),
    "base-strided-increments": ("base", "float64", 30, (6,), 200, "transposed", True),
    "inplace-64": ("inplace", "float64", 40, (64,), 300, "rows", True),
    "lanes-by-row": ("zeros", "float64", 65536, (64,), 2000, "rows", True),  # 32 MiB of rows
    "lanes-by-thread": ("zeros", "float64", 64, (4,), 40_000, "rows", True),
    "lanes-by-row-inplace": ("inplace", "float64", 65536, (96,), 1500, "rows", True),
    "wide-rows-in-cache": ("zeros", "float64", 300, (96,), 3000, "rows", True),  # one thread
}


def rows_inputs(form, dtype, nrows, rest, n, layout, rng):
    base = rng.standard_normal((nrows, *rest)).astype(dtype)
    idx = rng.integers(-nrows, nrows, n)
    idx[:2] = [-nrows, nrows - 1]  # the extreme negative index, the last row
    if layout == "rows":
        inc = rng.standard_normal((n, *rest)).astype(dtype)
        inc[::5] = -0.0
    elif layout == "per-index":
        inc = rng.standard_normal((n,) + (1,) * len(rest)).astype(dtype)
    else:  # a transposed copy: strided rows
        inc = np.asfortranarray(rng.standard_normal((n, *rest)).astype(dtype))
    return base, inc, idx


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(ROWS))
def test_rows_path(backend, case, rng):
    cpu_only(backend, case)
    form, dtype, nrows, rest, n, layout, openmp = ROWS[case]
    base, inc, idx = rows_inputs(form, dtype, nrows, rest, n, layout, rng)
    rc = rows_case(backend, form, dtype, base.ndim, dtype, inc.ndim, "int64", openmp)
    check_rows_graph(rc.fn, inplace=True if form == "inplace" else None)
    if form == "zeros":
        base = np.zeros_like(base)
    got = rc.run(base, inc, strided(idx), nrows)
    assert_same_rows(got, base, inc, idx, case)


#: Bad rows inputs: (form, V, idx, increments shape), each raising the reference's exception.
ROWS_ERRORS = {
    "index-zeros": ("zeros", 10, [0, 10, 3], (3, 4)),
    "index-negative-base": ("base", 10, [0, -11], (2, 4)),
    "index-inplace": ("inplace", 10, [1, 2, 12], (3, 4)),
    "index-threaded": ("zeros", 10, [0] * (BIG // 4) + [10], (1, 4)),
    "broadcast-zeros": ("zeros", 10, [0, 1, 2], (2, 4)),
    "broadcast-inplace": ("inplace", 10, [0, 1, 2], (3, 5)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(ROWS_ERRORS))
def test_rows_error(backend, case, rng):
    cpu_only(backend, case)
    form, nrows, idx, inc_shape = ROWS_ERRORS[case]
    idx = np.array(idx, dtype="int64")
    base = rng.standard_normal((nrows, 4))
    inc = rng.standard_normal(inc_shape)
    ref_base = (nrows, 4) if form == "zeros" else base
    with pytest.raises(Exception) as ref:
        reference_scatter_add(ref_base, inc, idx, onto="zeros" if form == "zeros" else "base")
    rc = rows_case(backend, form, "float64", 2, "float64", 2, "int64", True)
    with pytest.raises(type(ref.value)) as info:
        rc.run(base, inc, idx, nrows)
    assert str(info.value).split("\n")[0] == str(ref.value)
    if form == "inplace":  # a failed update leaves the shared variable as it was
        np.testing.assert_array_equal(rc.backend.get(rc.W), base)
