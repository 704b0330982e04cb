"""Differential fuzzing of the scatter-add of rows against ``np.add.at``.

Hypothesis draws a configuration (the form: onto zeros, onto a base, the
in-place update of a shared variable; the base's dtype and rank; the dtype
and rank of the increments, which the graph casts to the base's; the index
dtype; OpenMP), then the shape of a row, the number of rows and of indices,
the indices (distributions of ``test_fuzz.py``, with out-of-range ones planted
now and then), increments whose dimensions broadcast (or, now and then, do
not), their values (NaN, infinities and -0.0 included for floats, the whole
range for integers, whose sums wrap), a base that may hold signed zeros
(-0.0 stays -0.0 where only -0.0 is added), and strided views of the
indices, the increments and the in-place base.  Each result is compared with
``np.add.at``; a refused input must raise the exception and message of
:func:`aesara_bincount.reference_scatter_add` and leave every shared
variable as it was.

With the ``ci`` profile the configurations come from a covering list (every
form, dtype, rank, index dtype and both OpenMP flags appear), so that CI
compiles a bounded number of modules.
"""
import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from aesara_bincount import reference_scatter_add
from aesara_bincount_core.semantics import INDEX_DTYPES, OUT_DTYPES
from backends import BACKENDS
from rows_cases import assert_same_rows, rows_case
from test_fuzz import _fill, _junk, weights_for

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

KINDS = ("uniform", "equal", "zipf", "near_top", "sorted", "runs")
#: Elements of the increments (len(idx) * row length) at most.
MAX_ELEMENTS = 200_000


def _configs():
    """(form, dtype, ndim, inc_dtype, inc_ndim, idx_dtype, openmp): a covering list."""
    forms = ("zeros", "base", "inplace")
    configs = []
    for i in range(24):
        form = forms[i % 3]
        dtype = OUT_DTYPES[i % len(OUT_DTYPES)]
        ndim = 1 + (i // 3) % 3
        if form == "zeros" and ndim == 1:
            ndim = 2  # a 1-D scatter-add onto zeros is Bincount's (tests/test_fuzz.py)
        inc_ndim = (i * 5) % (ndim + 1)
        # Now and then increments of another dtype, cast by the graph.
        inc_dtype = {0: "float64", 1: "int32"}.get(i % 5, dtype)
        idx_dtype = INDEX_DTYPES[(i * 3) % len(INDEX_DTYPES)]
        configs.append((form, dtype, ndim, inc_dtype, inc_ndim, idx_dtype, bool(i % 2)))
    return configs


CONFIGS = _configs()


def test_configs_cover_everything():
    assert {c[0] for c in CONFIGS} == {"zeros", "base", "inplace"}
    assert {c[1] for c in CONFIGS} == set(OUT_DTYPES)
    assert {c[2] for c in CONFIGS} == {1, 2, 3}
    assert {c[4] for c in CONFIGS} == {0, 1, 2, 3}
    assert {c[5] for c in CONFIGS} == set(INDEX_DTYPES)
    assert {c[6] for c in CONFIGS} == {False, True}


@st.composite
def _indices(draw, dtype: str, nrows: int, size: int):
    """``size`` indices in ``[-nrows, nrows)`` of ``dtype``; maybe a few outside."""
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -nrows), min(int(info.max), nrows - 1)
    if size <= 30 and draw(st.booleans()):
        values = np.array(draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size)), dtype=np.int64)
    else:
        kind = draw(st.sampled_from(KINDS))
        seed = draw(st.integers(0, 2**32 - 1))
        note(f"indices: kind={kind} seed={seed}")
        values = _fill(kind, size, lo, hi, np.random.default_rng(seed))
    values = values.astype(dtype)
    bad = []
    if info.min < -nrows:
        bad.append(st.integers(int(info.min), -nrows - 1))
    if info.max >= nrows:
        bad.append(st.integers(nrows, int(info.max)))
    if size and bad and draw(st.integers(0, 5)) == 0:
        for _ in range(draw(st.integers(1, 3))):
            values[draw(st.integers(0, size - 1))] = draw(st.one_of(*bad))
    return values


@st.composite
def _strided(draw, values: np.ndarray):
    """``values`` as ``(array, index)``: itself, or a strided view along axis 0."""
    if values.ndim == 0:
        return values, ...
    step = draw(st.sampled_from([1, 1, 2, -1, -3]))
    base = np.full((values.shape[0] * abs(step),) + values.shape[1:], _junk(values.dtype), dtype=values.dtype)
    index = (slice(None, None, step),)
    base[index] = values
    return base, index


def _increment_shape(draw, target, inc_ndim):
    """A shape of ``inc_ndim`` dimensions that broadcasts to ``target`` (or not)."""
    shape = list(target[len(target) - inc_ndim:])
    for k in range(inc_ndim):
        if draw(st.integers(0, 3)) == 0:
            shape[k] = 1
    if inc_ndim and draw(st.integers(0, 12)) == 0:
        k = draw(st.integers(0, inc_ndim - 1))
        shape[k] += draw(st.integers(1, 3))  # cannot broadcast
    return tuple(shape)


def _values(draw, shape, dtype, base_dtype):
    """Increments of ``dtype`` that the cast to ``base_dtype`` keeps defined."""
    size = int(np.prod(shape, dtype=np.int64))
    dt, to = np.dtype(dtype), np.dtype(base_dtype)
    if dt.kind == "f" and to.kind in "iu":
        # A float cast to an integer is defined for integer values in range.
        info = np.iinfo(to)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        w = rng.integers(max(info.min, -1000), min(info.max, 1000), size=size, endpoint=True)
        return w.astype(dt).reshape(shape)
    if dt.kind in "iu" and to.kind in "iu" and dt.itemsize > to.itemsize:
        info = np.iinfo(to)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        return rng.integers(max(info.min, -100), min(info.max, 100), size=size, endpoint=True).astype(dt).reshape(shape)
    if dt.kind == "f" and to.kind == "f" and dt.itemsize > to.itemsize:
        # Values of the narrower dtype: no finite sum overflows after the cast.
        return draw(weights_for(size, base_dtype)).astype(dt).reshape(shape)
    return draw(weights_for(size, dtype)).reshape(shape)


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_rows(backend, data):
    """``inc_subtensor(base[idx], inc)`` in every form against ``np.add.at``."""
    backend.require()
    draw = data.draw
    form, dtype, ndim, inc_dtype, inc_ndim, idx_dtype, openmp = draw(st.sampled_from(CONFIGS), label="config")
    rest = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 8, 16, 33]), min_size=ndim - 1, max_size=ndim - 1)))
    rowlen = int(np.prod(rest, dtype=np.int64))
    nrows = draw(st.one_of(st.integers(1, 40), st.integers(1, 5000)), label="rows")
    most = MAX_ELEMENTS // max(rowlen, 1)
    size = draw(st.one_of(st.integers(0, 40), st.integers(0, most)), label="indices")
    idx = draw(_indices(idx_dtype, nrows, size), label="idx")
    target = (size,) + rest
    shape = _increment_shape(draw, target, inc_ndim)
    note(f"shape {(nrows,) + rest}, increments {shape}")
    inc = _values(draw, shape, inc_dtype, dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if np.dtype(dtype).kind == "f":
        base = (rng.integers(-50, 50, (nrows,) + rest) * rng.choice([1.0, 0.37], (nrows,) + rest)).astype(dtype)
        signed = draw(st.sampled_from(["none", "base", "all"]), label="signed zeros")
        if signed != "none":
            # Signed zeros: an element whose base and increments are all -0.0
            # stays -0.0 (-0.0 is the additive identity), else it is +0.0.
            zeros = rng.random(base.shape) < (0.5 if signed == "base" else 1.0)
            base[zeros] = rng.choice([0.0, -0.0], size=int(zeros.sum()))
        if signed == "all" and np.dtype(inc_dtype).kind == "f":
            inc = rng.choice([-0.0, -0.0, -0.0, 0.0], size=inc.shape).astype(inc_dtype)
    else:
        info = np.iinfo(dtype)
        base = rng.integers(info.min, info.max, (nrows,) + rest, dtype=dtype, endpoint=True)
    base_view = draw(_strided(base), label="base view") if form == "inplace" else base
    case = rows_case(backend, form, dtype, ndim, inc_dtype, inc_ndim, idx_dtype, openmp)
    idx_view = draw(_strided(idx), label="idx view")
    inc_view = draw(_strided(inc), label="increments view")

    onto = "zeros" if form == "zeros" else "base"
    start = np.zeros((nrows,) + rest, dtype=dtype) if onto == "zeros" else base
    try:
        reference_scatter_add(
            (nrows,) + rest if onto == "zeros" else base, inc.astype(dtype), idx, onto=onto
        )
    except (IndexError, ValueError) as exc:
        with pytest.raises(type(exc)) as got:
            case.run(base_view, inc_view, idx_view, nrows=nrows)
        assert str(got.value).split("\n")[0] == str(exc)
        for var, value in ((case.W, base), (case.G, inc), (case.I, idx)):
            np.testing.assert_array_equal(backend.get(var), value, err_msg=f"{var} changed")
        return
    got = case.run(base_view, inc_view, idx_view, nrows=nrows)
    assert_same_rows(got, start, inc, idx, f"{form} vs np.add.at")
