"""ScatterAdd: bad input raises the reference's exception, and nothing is lost.

For each case: the exception type and message are those of
:func:`aesara_bincount.reference_scatter_add` (the contract shared with a GPU
Op), the shared variables, the one updated in place included, keep their
values, and the same function then gives the right answer.  Also: the Op's
graph-time errors, its gradient, pickling and cache version.
"""
import pickle

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.gradient import verify_grad
from aesara.graph.rewriting.utils import rewrite_graph
from aesara.tensor.subtensor import advanced_inc_subtensor1

from aesara_bincount import ScatterAdd, reference_scatter_add, scatter_add
from aesara_bincount_core import _c_code
from aesara_bincount_core._c_code import messages
from backends import BACKENDS
from rows_cases import assert_same_rows, expected_rows, rows_case, scatter_nodes

RNG = np.random.default_rng(7)


def first_line(exc: BaseException) -> str:
    return str(exc).split("\n")[0]


def reference_error(*args, **kwargs) -> BaseException:
    with pytest.raises(Exception) as info:
        reference_scatter_add(*args, **kwargs)
    return info.value


def fails_then_recovers(case, bad, good, nrows=None):
    """Run ``case`` on ``bad = (base, inc, idx)``: the reference's error, nothing changed.

    Then run it on ``good`` and compare with ``np.add.at``.
    """
    base, inc, idx = bad
    onto = "zeros" if case.form == "zeros" else "base"
    ref_base = (nrows,) + base.shape[1:] if onto == "zeros" else base
    expected = reference_error(ref_base, inc, idx, onto=onto)
    shared = {"W": case.W, "G": case.G, "I": case.I}
    with pytest.raises(type(expected)) as info:
        case.run(base, inc, idx, nrows=nrows)
    assert first_line(info.value) == str(expected)
    for name, value in zip("WGI", bad):
        now = case.backend.get(shared[name])
        np.testing.assert_array_equal(now, value, err_msg=f"shared {name} changed")
    base, inc, idx = good
    got = case.run(base, inc, idx, nrows=nrows)
    zero = np.zeros((nrows,) + base.shape[1:], dtype=base.dtype) if onto == "zeros" else base
    assert_same_rows(got, zero, inc, idx)
    return info.value


FORMS = ["zeros", "base", "inplace"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("bad_value", [10, -11, 2**40])
def test_index_out_of_range(backend, form, bad_value):
    case = rows_case(backend, form, "float32", 2, "float32", 2, "int64")
    base = RNG.integers(-5, 5, (10, 3)).astype("float32")
    inc = np.ones((4, 3), dtype="float32")
    idx = np.array([0, -10, bad_value, 9])
    exc = fails_then_recovers(case, (base, inc, idx), (base, inc, np.array([0, -10, 3, 9])), nrows=10)
    assert isinstance(exc, IndexError)
    assert first_line(exc) == messages()["BC_MSG_ROW_INDEX"] % (str(bad_value), 2, 10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("size", [100_000, 1_000_000])
def test_late_bad_index_in_a_large_update(backend, form, size, openmp):
    """The last of many indices is bad: nothing was written before it was found."""
    case = rows_case(backend, form, "float64", 2, "float64", 2, "int32", openmp)
    nrows = 50 if size == 100_000 else 5000
    base = RNG.integers(-5, 5, (nrows, 8)).astype("float64")
    idx = RNG.integers(-nrows, nrows, size).astype("int32")
    inc = np.ones((size, 8))
    bad = idx.copy()
    bad[-1] = nrows
    bad[size // 2 + 1] = -nrows - 1
    exc = fails_then_recovers(case, (base, inc, bad), (base, inc, idx), nrows=nrows)
    assert first_line(exc) == messages()["BC_MSG_ROW_INDEX"] % (str(-nrows - 1), size // 2 + 1, nrows)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("idx_dtype", ["uint64", "int8", "uint8"])
def test_index_at_the_top_of_its_dtype(backend, idx_dtype):
    info = np.iinfo(idx_dtype)
    case = rows_case(backend, "inplace", "float64", 2, "float64", 1, idx_dtype)
    base = np.zeros((3, 2))
    exc = fails_then_recovers(
        case,
        (base, np.ones(2), np.array([1, info.max], dtype=idx_dtype)),
        (base, np.ones(2), np.array([1, 2], dtype=idx_dtype)),
    )
    assert str(info.max) in first_line(exc)
    if info.min < 0:
        fails_then_recovers(
            case,
            (base, np.ones(2), np.array([info.min], dtype=idx_dtype)),
            (base, np.ones(2), np.array([-3], dtype=idx_dtype)),
        )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("inc_shape", [(3, 4), (5, 3), (4, 2), (2, 4), (0, 4)])
def test_increments_that_do_not_broadcast(backend, form, inc_shape):
    case = rows_case(backend, form, "float64", 2, "float64", 2, "uint16")
    base = RNG.integers(-5, 5, (6, 4)).astype("float64")
    idx = np.array([0, 5, 5, 1], dtype="uint16")
    inc = np.ones(inc_shape)
    exc = fails_then_recovers(case, (base, inc, idx), (base, np.ones((4, 4)), idx), nrows=6)
    assert isinstance(exc, ValueError)
    want = messages()["BC_MSG_ROWS_BCAST"] % (str(inc_shape), str((4, 4)))
    assert first_line(exc) == want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", FORMS)
def test_index_error_comes_before_value_error(backend, form):
    """As in Aesara's graph, a bad index is reported before bad increments."""
    case = rows_case(backend, form, "float64", 2, "float64", 2, "int64")
    base = np.zeros((3, 2))
    exc = fails_then_recovers(
        case,
        (base, np.ones((5, 2)), np.array([0, 3])),
        (base, np.ones((2, 2)), np.array([0, 2])),
        nrows=3,
    )
    assert isinstance(exc, IndexError)
    if form != "inplace":
        return
    ref = aesara.function(
        [], [], updates={case.W: at.inc_subtensor(case.W[case.I], case.G)},
        mode=aesara.compile.mode.get_default_mode().excluding("bincount"),
    )
    case.backend.set(case.W, np.zeros((3, 2)))
    case.backend.set(case.G, np.ones((5, 2)))
    case.backend.set(case.I, np.array([0, 3]))
    with pytest.raises(IndexError):
        ref()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", FORMS)
def test_bad_index_in_rows_of_length_zero(backend, form):
    """Rows of no element: nothing to add, and the indices are still checked."""
    case = rows_case(backend, form, "float64", 2, "float64", 2, "int64")
    base = np.zeros((3, 0))
    fails_then_recovers(
        case, (base, np.ones((2, 0)), np.array([0, -4])), (base, np.ones((2, 0)), np.array([0, -3])),
        nrows=3,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_shape_of_zeros(backend):
    case = rows_case(backend, "zeros", "float64", 2, "float64", 2, "int64")
    ref = reference_error((-2, 3), np.ones((1, 3)), np.array([0]), onto="zeros")
    assert first_line(ref) == messages()["BC_MSG_ZEROS_SHAPE"] % "(-2, 3)"
    with pytest.raises(ValueError) as info:
        case.run(np.zeros((1, 3)), np.ones((1, 3)), np.array([0]), nrows=-2)
    assert first_line(info.value) == str(ref)


def test_zeros_too_large_for_memory():
    g = at.dmatrix("g")
    idx = at.lvector("idx")
    n = at.lscalar("n")
    out = ScatterAdd("zeros")(at.as_tensor_variable([n, 2**20]), g, idx)
    f = aesara.function([n, g, idx], out)
    big = 2**45
    ref = reference_error(np.array([big, 2**20]), np.ones((1, 2**20)), np.array([0]), onto="zeros")
    assert isinstance(ref, MemoryError)
    with pytest.raises(MemoryError) as info:
        f(big, np.ones((1, 1)), np.array([0]))
    assert first_line(info.value) == str(ref)


# -- graph-time errors --------------------------------------------------------------
@pytest.mark.parametrize(
    "args, what",
    [
        ((at.dscalar(), at.dscalar(), at.lvector()), "at least one dimension"),
        ((at.dmatrix(), at.fmatrix(), at.lvector()), "increments must have dtype float64"),
        ((at.dmatrix(), at.dtensor3(), at.lvector()), "more than the output's"),
        ((at.dmatrix(), at.dmatrix(), at.dvector()), "idx must be a 1-D integer"),
        ((at.dmatrix(), at.dmatrix(), at.lmatrix()), "idx must be a 1-D integer"),
        ((at.tensor("float16", shape=(None,)), at.tensor("float16", shape=(None,)), at.lvector()), "unsupported dtype"),
    ],
)
def test_make_node_type_errors(args, what):
    with pytest.raises(TypeError, match=what):
        ScatterAdd("base")(*args)


def test_zeros_make_node_type_errors():
    with pytest.raises(TypeError, match="static length"):
        ScatterAdd("zeros")(at.lvector(), at.dmatrix(), at.lvector())
    with pytest.raises(TypeError, match="integer vector"):
        ScatterAdd("zeros")(at.dvector(), at.dmatrix(), at.lvector())
    with pytest.raises(ValueError, match="only onto='base'"):
        ScatterAdd("zeros", inplace=True)
    with pytest.raises(ValueError, match="unknown onto"):
        ScatterAdd("ones")


# -- gradient ---------------------------------------------------------------------------
def test_gradient_is_aesaras():
    W = at.dmatrix("W")
    g = at.dvector("g")  # one row added at every index: summed over indices
    idx = at.lvector("idx")
    C = at.dmatrix("C")
    ours = (scatter_add(W, g, idx) * C).sum()
    theirs = (advanced_inc_subtensor1(W, g, idx) * C).sum()
    grads = aesara.function([W, g, idx, C], aesara.grad(ours, [W, g]) + aesara.grad(theirs, [W, g]))
    Wv, gv, iv, Cv = RNG.random((4, 3)), RNG.random(3), np.array([0, 3, 3, -1]), RNG.random((4, 3))
    a_W, a_g, b_W, b_g = grads(Wv, gv, iv, Cv)
    np.testing.assert_allclose(a_W, b_W)
    np.testing.assert_allclose(a_g, b_g)
    verify_grad(lambda W, g: scatter_add(W, g, iv), [Wv, RNG.random((4, 3))], rng=RNG)
    verify_grad(lambda g: ScatterAdd("zeros")(at.as_tensor_variable([5, 3]), g, iv), [RNG.random((4, 3))], rng=RNG)


def test_gradient_through_the_rewritten_graph():
    """aesara.grad of a graph the rewrite has changed equals Aesara's."""
    W = at.dtensor3("W")
    g = at.dmatrix("g")
    idx = at.lvector("idx")
    out = at.inc_subtensor(W[idx], g) * 2
    rewritten = rewrite_graph(out, include=("canonicalize", "specialize"))
    assert any(isinstance(v.owner.op, ScatterAdd) for v in aesara.graph.basic.ancestors([rewritten]) if v.owner)
    args = (RNG.random((3, 2, 4)), RNG.random((2, 4)), np.array([2, 2, 0]))
    ours = aesara.function([W, g, idx], aesara.grad((rewritten**2).sum(), [W, g]))(*args)
    theirs = aesara.function([W, g, idx], aesara.grad((out**2).sum(), [W, g]))(*args)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b)


def test_integer_gradient_is_zero():
    W = at.lmatrix("W")
    g = at.lmatrix("g")
    idx = at.lvector("idx")
    gW, gg = aesara.grad(scatter_add(W, g, idx).sum(), [W, g])
    f = aesara.function([W, g, idx], [gW, gg], on_unused_input="ignore")
    a, b = f(np.ones((2, 2), dtype="int64"), np.ones((1, 2), dtype="int64"), np.array([1]))
    assert not a.any() and not b.any()


# -- the Op itself -----------------------------------------------------------------------
@pytest.mark.parametrize("op", [ScatterAdd("base"), ScatterAdd("base", inplace=True), ScatterAdd("zeros", openmp=True)])
def test_pickle_round_trip(op):
    again = pickle.loads(pickle.dumps(op))
    assert again == op and hash(again) == hash(op)
    assert again.c_code_cache_version() == op.c_code_cache_version()
    assert again.destroy_map == op.destroy_map


def test_cache_version_covers_every_source(monkeypatch):
    base = ScatterAdd().c_code_cache_version()
    assert set(ScatterAdd.c_sources) == {
        "common/host_helpers.h", "cpu/worker_pool.h", "common/scatter_checks.h", "cpu/scatter_add.c",
    }
    # The parts of cpu/scatter_add.c are found through its #include lines.
    assert set(ScatterAdd.hashed_sources()) == set(ScatterAdd.c_sources) | {
        "cpu/scatter_add_check.h", "cpu/scatter_add_loops.h", "cpu/scatter_add_lanes.h",
    }
    original = _c_code.read_source
    for name in ScatterAdd.hashed_sources():
        monkeypatch.setattr(
            _c_code, "read_source", lambda n, name=name: original(n) + ("\n/* edit */" if n == name else "")
        )
        assert ScatterAdd().c_code_cache_version() != base, name
    monkeypatch.setattr(_c_code, "read_source", original)


def test_expected_rows_is_np_add_at():
    """The test oracle itself: duplicates accumulate, negatives wrap."""
    got = expected_rows(np.zeros((3, 2)), np.array([[1.0, 2.0]]), np.array([0, -3, 2]))
    np.testing.assert_array_equal(got, [[2.0, 4.0], [0.0, 0.0], [1.0, 2.0]])
    assert not scatter_nodes(aesara.function([], at.constant(1)))


def test_uint64_index_near_two_to_the_64_is_the_one_deliberate_difference():
    # Aesara's graph casts a uint64 index to int64, so 2**64 - 1 is -1 and
    # adds into the last row; ScatterAdd takes the index at its value and
    # raises (docs/semantics.rst, the last row of the rows table).
    W, i = at.dmatrix("W"), at.vector("i", dtype="uint64")
    out = at.inc_subtensor(W[i], 1.0)
    base, idx = np.zeros((5, 2)), np.array([2**64 - 1], dtype="uint64")
    aesaras = aesara.function([W, i], out, mode=aesara.compile.mode.get_default_mode().excluding("bincount"))
    np.testing.assert_array_equal(aesaras(base, idx)[4], [1.0, 1.0])
    ours = aesara.function([W, i], out)
    assert scatter_nodes(ours)
    with pytest.raises(IndexError, match="18446744073709551615 at position 0"):
        ours(base, idx)
