"""Differential fuzzing: the rewritten graphs against NumPy and Aesara's own graph.

Hypothesis draws the dtype of ``x``, its length (0 to 1e5), the distribution
of its values, the weights (dtype and values, NaN, infinities and -0.0
included), ``minlength``, the strides of the views, and whether OpenMP is on.
Every result is compared with NumPy (``numpy.bincount`` for counts and float
weights, ``np.add.at`` for integer weights and the scatter-add form) and,
where Aesara's graph is defined on the same input, with that graph compiled
with ``excluding("bincount")``.  Invalid draws (a negative value, an index out
of range) must raise the exact error of
:func:`aesara_bincount.reference_bincount`.

Large arrays are not drawn element by element: Hypothesis draws their shape
(length, kind of distribution, range, seed) and NumPy fills them; short
arrays are drawn element by element, so that failures shrink well.

Two strategies draw the inputs of issue 12: weights whose type says length
1 (a ``(1,)`` vector or a 0-d scalar, added for every element), and constant
inputs (``x``, weights and ``minlength`` known when the graph is built, at
the top of the dtype, negative or empty included), each in the two forms
treated as a bincount: ``extra_ops.bincount`` and the hand-written
``inc_subtensor(zeros(maximum(x.max() + 1, minlength))[x], w)``.

Each configuration (dtypes, OpenMP) is compiled once and cached
(``backends.py``).  With the ``ci`` profile the dtype pairs of the weighted
and scatter-add tests come from a covering list (every dtype of ``x`` and of
the output appears, OpenMP alternates) so that CI compiles a bounded number of
modules; a profile of 500 or more examples (``--hypothesis-profile=long``)
draws from all pairs.
"""
import itertools
import logging
from contextlib import contextmanager
from typing import NamedTuple, Optional

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount
from hypothesis import example, given, note, settings
from hypothesis import strategies as st

from aesara_bincount import reference_bincount
from aesara_bincount_core.semantics import INDEX_DTYPES, OUT_DTYPES
from backends import BACKENDS, GPU, Case, bincount_case, scatter_case
from expect import assert_same_histogram

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: Largest value drawn for dtypes wider than 16 bits (an output of 2**21 bins).
BIG_TOP = 2**21
MAX_LEN = 100_000


def _full_search() -> bool:
    return settings.default.max_examples >= 500


def _covering(xs, ys):
    """Pairs in which every element of ``xs`` and of ``ys`` appears, with
    alternating OpenMP flags."""
    n = max(len(xs), len(ys))
    return [(xs[i % len(xs)], ys[i % len(ys)], bool(i % 2)) for i in range(n)] + [
        (xs[(i + 3) % len(xs)], ys[i % len(ys)], not bool(i % 2)) for i in range(0, n, 3)
    ]


def _configs(xs, ys):
    if _full_search():
        return [(a, b, omp) for a, b in itertools.product(xs, ys) for omp in (False, True)]
    return _covering(xs, ys)


# -- values ------------------------------------------------------------------
KINDS = ("uniform", "equal", "zipf", "near_top", "sorted", "late_outlier", "runs", "hot_edge")


def _fill(kind: str, size: int, lo: int, hi: int, rng) -> np.ndarray:
    """``size`` int64 values in ``[lo, hi]`` of the given kind of distribution."""
    width = hi - lo + 1
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    if kind == "uniform":
        return rng.integers(lo, hi + 1, size=size)
    if kind == "equal":
        return np.full(size, rng.integers(lo, hi + 1))
    if kind == "zipf":
        return lo + (rng.zipf(1.3, size=size) - 1) % width
    if kind == "near_top":
        return hi - rng.integers(0, min(width, 16), size=size)
    if kind == "sorted":
        return np.sort(rng.integers(lo, hi + 1, size=size))
    if kind == "late_outlier":
        # Few bins, then one large value at the end: private histograms grow,
        # or give up for the direct path, after counting most of x.
        v = rng.integers(lo, min(hi, lo + 100) + 1, size=size)
        v[-1] = hi
        return v
    if kind == "runs":
        return np.repeat(rng.integers(lo, hi + 1, size=size // 64 + 1), 64)[:size]
    if kind == "hot_edge":
        # Repeats within a few elements (no runs) of the values around 1024,
        # the hot bins of the output-histogram's skewed loop
        # (cpu/bincount_grow.h), among uniform values.
        edge = np.clip(rng.integers(1020, 1029, size=size), lo, hi)
        return np.where(rng.random(size) < 0.4, edge, rng.integers(lo, hi + 1, size=size))
    raise AssertionError(kind)


@st.composite
def int_values(draw, dtype: str, lo: int, hi: int):
    """int64 values in ``[lo, hi]``: drawn one by one when short, else generated."""
    if draw(st.integers(0, 3)) == 0:
        return np.array(draw(st.lists(st.integers(lo, hi), max_size=40)), dtype=np.int64)
    size = draw(st.one_of(st.integers(0, 5000), st.integers(30_000, MAX_LEN)))
    kind = draw(st.sampled_from(KINDS))
    seed = draw(st.integers(0, 2**32 - 1))
    note(f"values: kind={kind} size={size} range=[{lo}, {hi}] seed={seed}")
    return _fill(kind, size, lo, hi, np.random.default_rng(seed))


def _junk(dtype) -> object:
    """A value for the gaps of a strided view, which the Op must never read."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "i":
        return -1  # a negative value would raise, or land in a wrong bin
    return np.iinfo(dtype).max  # a huge value would raise or change the length


@st.composite
def views(draw, values: np.ndarray, dtype: str):
    """``values`` as ``(base, slice)``: a contiguous array or a strided view."""
    step = draw(st.sampled_from([1, 1, 1, 2, 3, -1, -2]))
    base = np.full(max(values.size * abs(step), 0), _junk(dtype), dtype=dtype)
    sl = slice(None, None, step)
    base[sl] = values.astype(dtype)
    assert base[sl].shape == values.shape
    return base, sl


def _top_for(dtype: str, data) -> int:
    info = np.iinfo(dtype)
    cap = min(int(info.max), BIG_TOP)
    # 2**17 bins of 8 bytes: BC_GROW_MIN_BYTES, where counts and sums take
    # the output-histogram (cpu/bincount_grow.h).
    edges = [e for e in (0, 1, 255, 256, 4095, 4096, 4097, 25_000, 2**17 - 1, 2**17) if e < cap] + [cap]
    return data.draw(
        st.one_of(st.integers(0, min(cap, 300)), st.integers(0, cap), st.sampled_from(edges)),
        label="top",
    )


@st.composite
def weights_for(draw, size: int, dtype: str):
    """Weights of ``dtype``: integer-valued, real, wide-ranging, or with specials."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if draw(st.booleans()):
            return rng.integers(max(info.min, -100), min(info.max, 100) + 1, size=size).astype(dt)
        # The whole range: integer sums wrap, as in Aesara's graph.
        return rng.integers(info.min, info.max, size=size, dtype=dt, endpoint=True)
    kind = draw(st.sampled_from(["ints", "real", "wide", "special", "zeros"]))
    note(f"weights: kind={kind}")
    # Keep every finite partial sum far below the dtype's maximum.
    big = 1e30 if dt == np.float32 else 1e300
    if kind == "ints":
        w = rng.integers(-100, 101, size=size).astype(np.float64)
    elif kind == "real":
        w = rng.uniform(-1e3, 1e3, size=size)
    elif kind == "wide":
        w = np.exp(rng.uniform(-np.log(big) * 1.3, np.log(big), size=size))
        w *= rng.choice([-1.0, 1.0], size=size)
    elif kind == "zeros":
        w = rng.choice([0.0, -0.0], size=size)
    else:
        w = rng.uniform(-1e3, 1e3, size=size)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0])
        where = rng.random(size) < draw(st.sampled_from([0.001, 0.05, 0.5]))
        w[where] = rng.choice(specials, size=int(where.sum()))
    return w.astype(dt)


def _bad_bincount_values(dtype: str):
    """Values the bincount form refuses: negative, or ``max + 1`` too large."""
    info = np.iinfo(dtype)
    bad = []
    if info.min < 0:
        bad.append(st.integers(max(int(info.min), -(2**40)), -1))
    if dtype == "int64":
        bad.append(st.sampled_from([2**40, 2**62, 2**63 - 1]))
    if dtype == "uint64":
        bad.append(st.one_of(st.integers(2**63, 2**64 - 1), st.sampled_from([2**40, 2**62])))
    return st.one_of(*bad) if bad else None


def _bad_indices(dtype: str, n: int):
    """Indices the scatter-add form refuses: outside ``[-n, n)``."""
    info = np.iinfo(dtype)
    bad = []
    if info.min < -n:
        bad.append(st.integers(int(info.min), -n - 1))
    if info.max >= n:
        bad.append(st.integers(n, int(info.max)))
    return st.one_of(*bad) if bad else None


def _plant(values: np.ndarray, dtype: str, data, bad) -> np.ndarray:
    """``values`` in ``dtype``, where 1 to 3 elements may be replaced by ``bad`` draws."""
    values = values.astype(dtype)
    if bad is None or values.size == 0 or data.draw(st.integers(0, 4), label="plant?") != 0:
        return values
    for _ in range(data.draw(st.integers(1, 3), label="how many")):
        pos = data.draw(st.integers(0, values.size - 1), label="position")
        values[pos] = data.draw(bad, label="planted")
    return values


def _refused(values: np.ndarray, lo: int, hi: int) -> bool:
    """Does ``values`` hold anything outside ``[lo, hi]``?  (Python ints: no overflow.)"""
    return values.size > 0 and (int(values.min()) < lo or int(values.max()) > hi)


def _expect_error(case, x, w, n, mode, out_dtype, backend):
    """Run ``case`` on an input that ``reference_bincount`` refuses; compare."""
    base, sl = x
    with pytest.raises(Exception) as ref:
        reference_bincount(
            base[sl], n, None if w is None else w[0][w[1]], mode=mode, out_dtype=out_dtype
        )
    with pytest.raises(type(ref.value)) as got:
        case.run(x, w, n)
    assert str(got.value).split("\n")[0] == str(ref.value), "not the reference message"
    # The shared variables keep the values of the failed call, unchanged.
    np.testing.assert_array_equal(backend.get(case.x), base[sl])
    if w is not None:
        np.testing.assert_array_equal(backend.get(case.w), w[0][w[1]])


def _aesara_sums_defined(weights, out_dtype: str, size: int) -> bool:
    """Can Aesara's graph add these increments without undefined behaviour?

    Its C scatter-add sums signed integers of 32 and 64 bits in their own C
    type, where an overflow is undefined (UBSan reports it); Bincount wraps
    them in unsigned arithmetic.  Where a partial sum could overflow, only
    NumPy serves as the reference.
    """
    dt = np.dtype(out_dtype)
    if weights is None or dt.kind != "i" or dt.itemsize < 4:
        return True
    w = np.abs(np.asarray(weights, dtype=np.float64))
    total = float(w.sum()) * (size if w.ndim == 0 else 1)  # a 0-d increment is added size times
    return total < np.iinfo(dt).max / 2


# -- the tests -----------------------------------------------------------------
def _fuzz_bincount(backend, data, dtype, w_dtype, openmp):
    """One example of ``extra_ops.bincount(x, weights, minlength=m)``."""
    top = _top_for(dtype, data)
    values = data.draw(int_values(dtype, 0, top), label="x values")
    values = _plant(values, dtype, data, _bad_bincount_values(dtype))
    x = data.draw(views(values, dtype), label="x view")
    weights = w = None
    if w_dtype is not None:
        weights = data.draw(weights_for(values.size, w_dtype), label="weights")
        w = data.draw(views(weights, w_dtype), label="weights view")
    minlength = data.draw(st.one_of(st.integers(0, 300), st.integers(0, 2**20)), label="minlength")
    out_dtype = w_dtype or dtype
    case = bincount_case(backend, dtype, w_dtype, openmp)
    if _refused(values, 0, BIG_TOP):
        _expect_error(case, x, w, minlength, "bincount", out_dtype, backend)
        return
    got = case.run(x, w, minlength)
    nbins = max(int(values.max()) + 1 if values.size else 0, minlength)
    assert_same_histogram(got, values, weights, nbins, out_dtype, "Bincount vs numpy")
    # Aesara's graph is defined for a non-empty x whose max + 1 fits its dtype.
    if (
        backend.aesara_reference
        and values.size
        and values.max() < np.iinfo(dtype).max
        and _aesara_sums_defined(weights, out_dtype, values.size)
    ):
        ref = case.run_reference(x, w, minlength)
        assert_same_histogram(ref, values, weights, nbins, out_dtype, "Aesara's graph vs numpy")
        if np.dtype(out_dtype).kind in "iu":
            np.testing.assert_array_equal(got, ref, err_msg="Bincount vs Aesara's graph")


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_bincount_counts(backend, data):
    """``extra_ops.bincount(x, minlength=m)`` against numpy.bincount and Aesara."""
    backend.require()
    dtype = data.draw(st.sampled_from(INDEX_DTYPES), label="x dtype")
    openmp = data.draw(st.booleans(), label="openmp")
    _fuzz_bincount(backend, data, dtype, None, openmp)


WEIGHTED_CONFIGS = _configs(INDEX_DTYPES, OUT_DTYPES)


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_bincount_weighted(backend, data):
    """``extra_ops.bincount(x, weights=w, minlength=m)`` against NumPy and Aesara."""
    backend.require()
    dtype, w_dtype, openmp = data.draw(st.sampled_from(WEIGHTED_CONFIGS), label="config")
    _fuzz_bincount(backend, data, dtype, w_dtype, openmp)


SCATTER_CONFIGS = _configs(INDEX_DTYPES, OUT_DTYPES)


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_scatter_add(backend, data):
    """``inc_subtensor(zeros(n)[idx], w)`` against ``np.add.at`` and Aesara.

    Negative indices wrap once; one outside ``[-n, n)`` raises ``IndexError``.
    """
    backend.require()
    dtype, out_dtype, openmp = data.draw(st.sampled_from(SCATTER_CONFIGS), label="config")
    w_ndim = data.draw(st.sampled_from([None, 0, 1]), label="increment ndim")
    info = np.iinfo(dtype)
    n = data.draw(
        st.one_of(st.integers(1, 300), st.integers(1, 2**20), st.sampled_from([1, 4096, 4097])),
        label="n",
    )
    lo = max(int(info.min), -n)
    hi = min(int(info.max), n - 1)
    values = data.draw(int_values(dtype, lo, hi), label="indices")
    values = _plant(values, dtype, data, _bad_indices(dtype, n))
    x = data.draw(views(values, dtype), label="indices view")
    if w_ndim is None:
        w, weights = None, None
    elif w_ndim == 0:
        weights = data.draw(weights_for(1, out_dtype), label="increment").reshape(())
        w = (weights, ...)
    else:
        weights = data.draw(weights_for(values.size, out_dtype), label="increments")
        w = data.draw(views(weights, out_dtype), label="increments view")
    case = scatter_case(backend, dtype, out_dtype, w_ndim, openmp)
    if _refused(values, -n, n - 1):
        _expect_error(case, x, w, n, "scatter", out_dtype, backend)
        if backend.aesara_reference and _aesara_sums_defined(weights, out_dtype, values.size):
            with pytest.raises(IndexError):
                case.run_reference(x, w, n)
        return
    got = case.run(x, w, n)
    values = values.astype(np.int64)
    idx = np.where(values < 0, values + n, values)
    assert_same_histogram(got, idx, weights, n, out_dtype, "scatter-add vs np.add.at")
    if backend.aesara_reference and _aesara_sums_defined(weights, out_dtype, values.size):
        ref = case.run_reference(x, w, n)
        assert_same_histogram(ref, idx, weights, n, out_dtype, "Aesara's graph vs np.add.at")
        if np.dtype(out_dtype).kind in "iu":
            np.testing.assert_array_equal(got, ref, err_msg="scatter-add vs Aesara's graph")


def test_covering_configs_cover_every_dtype():
    """The CI subset of configurations still names every dtype, both OpenMP flags."""
    pairs = _covering(INDEX_DTYPES, OUT_DTYPES)
    assert {p[0] for p in pairs} == set(INDEX_DTYPES)
    assert {p[1] for p in pairs} == set(OUT_DTYPES)
    assert {p[2] for p in pairs} == {False, True}


# -- weights typed length 1, and constant inputs (issue 12) ---------------------------
FORMS = ("extra_ops", "hand-written")
LENGTH_ONE = ("(1,)", "0-d")


def _bincount_form(form, x, w, n):
    """The bincount of ``x`` in ``form``, with ``minlength=n`` (None: none)."""
    if form == "extra_ops":
        return bincount(x, weights=w, minlength=n)
    length = x.max() + 1
    if length.dtype.startswith("float"):  # uint64 + 1 is a float64 in Aesara
        length = at.cast(length, "int64")
    if n is not None:
        length = at.maximum(length, n)
    dtype = x.dtype if w is None else w.dtype
    return at.inc_subtensor(at.zeros(length, dtype=dtype)[x], 1 if w is None else w)


def _length_one_shared(backend, dtype, kind):
    """A shared weight on the backend's device, typed ``(1,)`` or 0-d."""
    value = np.zeros((1,) if kind == "(1,)" else (), dtype=dtype)
    shape = (1,) if kind == "(1,)" else ()
    if backend is GPU:
        from aesara_bincount import gpu

        return gpu.shared(value, shape=shape, name="w")
    return aesara.shared(value, shape=shape, name="w")


_LENGTH_ONE_CASES = {}


def _length_one_case(backend, form, kind, x_dtype, w_dtype, openmp) -> Case:
    key = (backend.name, form, kind, x_dtype, w_dtype, openmp)
    case = _LENGTH_ONE_CASES.get(key)
    if case is None:
        x = backend.shared(np.zeros(3, dtype=x_dtype), name="x")
        w = _length_one_shared(backend, w_dtype, kind)
        n = at.lscalar("n")

        def build(x, w, n):
            return _bincount_form(form, x, w, n)

        with aesara.config.change_flags(openmp=openmp and backend is not GPU):
            fn = aesara.function([n], build(x, w, n))
        backend.check_graph(fn)
        case = _LENGTH_ONE_CASES[key] = Case(backend, fn, x, w, n, build)
    return case


def _length_one_configs():
    """(x dtype, weights dtype, OpenMP, form, kind): forms and kinds alternate."""
    return [
        pair + (FORMS[i % 2], LENGTH_ONE[(i // 2) % 2])
        for i, pair in enumerate(_configs(INDEX_DTYPES, OUT_DTYPES))
    ]


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_bincount_weights_typed_length_one(backend, data):
    """Weights typed ``(1,)`` or 0-d keep every bincount rule, in both forms.

    One weight is added for every element; a negative value raises, the top
    of the dtype works, an empty x gives ``zeros(minlength)``.
    """
    backend.require()
    dtype, w_dtype, openmp, form, kind = data.draw(
        st.sampled_from(_length_one_configs()), label="config"
    )
    top = _top_for(dtype, data)
    values = data.draw(int_values(dtype, 0, top), label="x values")
    values = _plant(values, dtype, data, _bad_bincount_values(dtype))
    x = data.draw(views(values, dtype), label="x view")
    weight = data.draw(weights_for(1, w_dtype), label="weight").reshape(())
    w = (weight.reshape((1,)), slice(None)) if kind == "(1,)" else (weight, ...)
    minlength = data.draw(st.one_of(st.integers(0, 300), st.integers(0, 2**20)), label="minlength")
    case = _length_one_case(backend, form, kind, dtype, w_dtype, openmp)
    base, sl = x
    if _refused(values, 0, BIG_TOP):
        with pytest.raises(Exception) as ref:
            reference_bincount(base[sl], minlength, weight, out_dtype=w_dtype)
        with pytest.raises(type(ref.value)) as got:
            case.run(x, w, minlength)
        assert str(got.value).split("\n")[0] == str(ref.value), "not the reference message"
        np.testing.assert_array_equal(backend.get(case.x), base[sl])
        return
    got = case.run(x, w, minlength)
    nbins = max(int(values.max()) + 1 if values.size else 0, minlength)
    assert_same_histogram(got, values, weight, nbins, w_dtype, "Bincount vs numpy")
    if (
        backend.aesara_reference
        and values.size
        and values.max() < np.iinfo(dtype).max
        and _aesara_sums_defined(weight, w_dtype, values.size)
    ):
        ref = case.run_reference(x, w, minlength)
        assert_same_histogram(ref, values, weight, nbins, w_dtype, "Aesara's graph vs numpy")
        if np.dtype(w_dtype).kind in "iu":
            np.testing.assert_array_equal(got, ref, err_msg="Bincount vs Aesara's graph")


class _Errors(logging.Handler):
    """Collects the ERROR records of Aesara's loggers (rewrite failures)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextmanager
def _no_logged_errors():
    handler = _Errors()
    logger = logging.getLogger("aesara")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert not handler.messages, handler.messages[:4]


@contextmanager
def logging_disabled():
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


@st.composite
def constant_values(draw, dtype: str):
    """A short x for a constant: small values, the top of small dtypes, bad ones."""
    info = np.iinfo(dtype)
    good = [st.integers(0, min(int(info.max), 300))]
    if info.bits <= 16:
        good.append(st.sampled_from([int(info.max), int(info.max) - 1]))
    else:
        good.append(st.integers(0, BIG_TOP))
    elements = st.one_of(*good)
    bad = _bad_bincount_values(dtype)
    if bad is not None and draw(st.integers(0, 3)) == 0:
        elements = st.one_of(elements, bad)
    return np.array(draw(st.lists(elements, max_size=20)), dtype=dtype)


def _as_constant(backend, value):
    if backend is GPU:
        import cupy

        return at.as_tensor_variable(cupy.asarray(value))
    return at.as_tensor_variable(value)


class ConstantCase(NamedTuple):
    """The inputs of :func:`test_bincount_of_constants`, all constants of the graph."""

    form: str
    dtype: str
    values: np.ndarray
    w_kind: Optional[str]  # None, "(N,)", "(1,)" or "0-d"
    weights: Optional[np.ndarray]
    minlength: Optional[int]


#: A weight of one element is drawn among these too: 1 is read as a count
#: (issue 32), -0.0 and 0.0 keep or lose their sign.
ONE_WEIGHT_EDGES = (1.0, -0.0, 0.0, 2.0, np.nan)


@st.composite
def constant_cases(draw):
    form = draw(st.sampled_from(FORMS))
    dtype = draw(st.sampled_from(INDEX_DTYPES))
    values = draw(constant_values(dtype))
    # One weights dtype keeps the number of compiled modules small.
    w_kind = draw(st.sampled_from([None, "(N,)", "(1,)", "0-d"]))
    weights = None
    if w_kind is not None:
        size = values.size if w_kind == "(N,)" else 1
        weights = draw(weights_for(size, "float64"))
        if size == 1 and draw(st.booleans()):
            weights = np.array([draw(st.sampled_from(ONE_WEIGHT_EDGES))])
        weights = weights.reshape(()) if w_kind == "0-d" else weights
    minlength = draw(st.one_of(st.none(), st.integers(0, 300)))
    return ConstantCase(form, dtype, values, w_kind, weights, minlength)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(case=constant_cases())
# Found by Hypothesis in CI (issue 32): a constant float weight of 1 failed to compile.
@example(case=ConstantCase("extra_ops", "int8", np.array([], dtype="int8"), "(1,)", np.array([1.0]), None))
@example(case=ConstantCase("hand-written", "uint64", np.array([3, 0, 3], dtype="uint64"), "0-d",
                           np.array(1.0), 5))
@example(case=ConstantCase("extra_ops", "int8", np.array([127, -1], dtype="int8"), None, None, None))
@example(case=ConstantCase("hand-written", "int16", np.array([32767, 0], dtype="int16"), "(1,)",
                           np.array([-0.0]), 40000))
def test_bincount_of_constants(backend, case):
    """Constant ``x``, weights and ``minlength``: the reference's result or error.

    Aesara folds ``max(x) + 1`` of a constant ``x`` in ``x``'s dtype when it
    builds the graph, so the top of small dtypes gives it a negative or wrong
    static length.  Compiling and calling log no rewrite failure.
    """
    backend.require()
    form, dtype, values, w_kind, weights, minlength = case
    x = _as_constant(backend, values)
    w = None if weights is None else at.as_tensor_variable(weights)
    if w_kind == "(1,)":
        assert w.type.shape == (1,)
    with logging_disabled():  # Aesara's own failures while it builds the graph
        out = _bincount_form(form, x, w, minlength)
    with _no_logged_errors():
        fn = aesara.function([], out)
    out_dtype = dtype if weights is None else "float64"
    # Weights typed length 1 are one weight for every element.
    ref_weights = weights if w_kind in (None, "(N,)") else weights.reshape(())
    try:
        reference_bincount(values, minlength or 0, ref_weights, out_dtype=out_dtype)
    except (ValueError, MemoryError) as exc:
        with _no_logged_errors():
            with pytest.raises(type(exc)) as got:
                fn()
        assert str(got.value).split("\n")[0] == str(exc)
        return
    with _no_logged_errors():
        got = backend.to_numpy(fn())
    nbins = max(int(values.max()) + 1 if values.size else 0, minlength or 0)
    assert_same_histogram(got, values, weights, nbins, out_dtype, "constants vs numpy")

