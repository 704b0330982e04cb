"""The scatter-add of rows: which graphs become ScatterAdd, and what they compute.

Every result is compared with ``np.add.at`` (``rows_cases.assert_same_rows``),
and where our Op adds in index order (one thread) also with Aesara's own
graph, bit for bit.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import Mode, get_default_mode
from aesara.tensor.subtensor import AdvancedIncSubtensor1

from aesara_bincount import Bincount, ScatterAdd, ScatterSet
from aesara_bincount_core.semantics import INDEX_DTYPES, OUT_DTYPES
from backends import BACKENDS, CPU
from rows_cases import assert_same_rows, check_rows_graph, expected_rows, rows_case, scatter_nodes

FAST_RUN = get_default_mode()
NO_BINCOUNT = FAST_RUN.excluding("bincount")
RNG = np.random.default_rng(20261130)


def op_types(f):
    return [type(node.op) for node in f.maker.fgraph.toposort()]


# -- the gradient of W[idx] ------------------------------------------------------
def _cost(name, W, idx):
    if name == "sum":
        return W[idx].sum()
    if name == "square":
        return (W[idx] ** 2).sum()
    if name == "mean":
        return W[idx].mean()
    # W indexed twice: Aesara chains the two scatter-adds onto one base.
    return (W[idx] ** 2).sum() + 3 * W[idx[::-1]].sum()


def _expected_grad(name, Wv, iv):
    zeros = np.zeros_like(Wv)
    if name == "sum":
        return expected_rows(zeros, np.ones(1), iv)
    if name == "square":
        return expected_rows(zeros, 2 * Wv[iv], iv)
    if name == "mean":
        return expected_rows(zeros, np.full(1, 1.0 / (len(iv) * Wv[0].size)), iv)
    return expected_rows(expected_rows(zeros, 2 * Wv[iv], iv), np.full(1, 3.0), iv[::-1])


@pytest.mark.parametrize("cost", ["sum", "square", "mean", "twice"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_gradient_of_indexing_is_rewritten(rank, cost):
    Wv = RNG.random((6,) + (3,) * (rank - 1))
    W = aesara.shared(Wv, name="W")
    idx = at.lvector("idx")
    gW = aesara.grad(_cost(cost, W, idx), W)
    f = aesara.function([idx], gW)
    types = op_types(f)
    assert AdvancedIncSubtensor1 not in types, types
    if rank == 1:
        # A 1-D scatter-add onto zeros is a Bincount (a FusedBincount where the
        # increments are an elementwise graph of this one use); onto a base, ScatterAdd.
        assert any(issubclass(t, Bincount) for t in types), types
    else:
        check_rows_graph(f, onto="zeros")
    if cost == "twice":
        # The second scatter-add runs in place on the first one's result.
        check_rows_graph(f, onto="base", inplace=True)
    iv = np.array([0, 5, -1, 2, 0, 0, -6])
    got = f(iv)
    np.testing.assert_allclose(got, _expected_grad(cost, Wv, iv), rtol=1e-15, atol=0)
    ref = aesara.function([idx], gW, mode=NO_BINCOUNT)
    assert not scatter_nodes(ref) and Bincount not in op_types(ref)
    np.testing.assert_array_equal(got, ref(iv))


def test_gradient_wrt_a_matrix_input():
    W = at.fmatrix("W")
    idx = at.bvector("idx")
    gW = aesara.grad(at.tanh(W[idx]).sum(), W)
    f = aesara.function([W, idx], gW)
    check_rows_graph(f, onto="zeros")
    Wv = RNG.random((4, 5)).astype("float32")
    iv = np.array([3, 3, -4, 1], dtype="int8")
    expected = expected_rows(np.zeros_like(Wv), 1 - np.tanh(Wv[iv]) ** 2, iv)
    np.testing.assert_allclose(f(Wv, iv), expected, rtol=1e-6)
    np.testing.assert_array_equal(f(Wv, iv), aesara.function([W, idx], gW, mode=NO_BINCOUNT)(Wv, iv))


# -- increments of every shape Aesara broadcasts ----------------------------------
#: (increments' shape with N for len(idx), dimensions in the graph)
BROADCASTS = [
    (("N", 3, 2), 3),  # one row per index
    ((1, 3, 2), 3),  # one row for all indices, broadcast at run time
    (("N", 1, 2), 3),
    (("N", 3, 1), 3),
    ((1, 1, 1), 3),
    ((3, 2), 2),  # one row added at every index
    ((1, 2), 2),
    ((2,), 1),
    ((1,), 1),
    ((), 0),  # a scalar
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["zeros", "base", "inplace"])
@pytest.mark.parametrize("shape, inc_ndim", BROADCASTS, ids=[str(s) for s, _ in BROADCASTS])
def test_broadcast_increments(backend, form, shape, inc_ndim):
    case = rows_case(backend, form, "float64", 3, "float64", inc_ndim, "int64")
    iv = np.array([4, 0, -1, 4, 2])
    shape = tuple(len(iv) if s == "N" else s for s in shape)
    gv = RNG.integers(-9, 10, size=shape).astype("float64")
    base = np.zeros((5, 3, 2)) if form == "zeros" else RNG.integers(-9, 10, (5, 3, 2)).astype("float64")
    got = case.run(base, gv, iv, nrows=5)
    assert_same_rows(got, base, gv, iv, f"{form} {shape}")


def test_direct_scatter_add_onto_zeros_and_constant_zeros():
    g = at.dmatrix("g")
    idx = at.lvector("idx")
    n = at.lscalar("n")
    outs = [
        at.inc_subtensor(at.zeros((n, 3))[idx], g),
        at.inc_subtensor(at.zeros((4, 3))[idx], g),  # a constant shape
        at.inc_subtensor(at.constant(np.zeros((4, 3)))[idx], g),
        at.inc_subtensor(at.zeros_like(g)[idx], g[:1]),
    ]
    f = aesara.function([n, g, idx], outs, on_unused_input="ignore")
    nodes = check_rows_graph(f, onto="zeros")
    # The two constant-shape forms are merged into one node.
    assert len(nodes) == 3 and all(node.op.onto == "zeros" for node in nodes)
    gv, iv = RNG.random((3, 3)), np.array([1, -1, 1])
    for got in f(4, gv, iv)[:3]:
        assert_same_rows(got, np.zeros((4, 3)), gv, iv)
    assert_same_rows(f(4, gv, iv)[3], np.zeros((3, 3)), gv[:1], iv)


# -- any base ---------------------------------------------------------------------
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_input_base_is_never_overwritten(rank):
    W = at.tensor("float64", shape=(None,) * rank, name="W")
    g = at.tensor("float64", shape=(None,) * rank, name="g")
    idx = at.lvector("idx")
    f = aesara.function([W, g, idx], at.inc_subtensor(W[idx], g))
    check_rows_graph(f, onto="base", inplace=False)
    Wv = RNG.random((5,) + (2,) * (rank - 1))
    gv = RNG.random((3,) + (2,) * (rank - 1))
    iv = np.array([1, 1, -5])
    kept = Wv.copy()
    got = f(Wv, gv, iv)
    np.testing.assert_array_equal(Wv, kept)
    assert_same_rows(got, Wv, gv, iv)
    np.testing.assert_array_equal(got, aesara.function([W, g, idx], at.inc_subtensor(W[idx], g), mode=NO_BINCOUNT)(Wv, gv, iv))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rank", [1, 2])
def test_shared_update_runs_in_place(backend, rank):
    backend.require()
    Wv = RNG.integers(-5, 5, (1000,) + (16,) * (rank - 1)).astype("float32")
    W = backend.shared(Wv, name="W")
    idx = at.lvector("idx")
    g = at.tensor("float32", shape=(None,) * rank, name="g")
    lr = np.float32(0.5)
    f = aesara.function([idx, g], [], updates={W: at.inc_subtensor(W[idx], -lr * g)})
    check_rows_graph(f, onto="base", inplace=True)
    storage = W.get_value(borrow=True, return_internal_type=True)
    iv = np.array([3, 999, 3, -1000])
    gv = RNG.integers(-4, 4, (4,) + (16,) * (rank - 1)).astype("float32")
    f(iv, gv)
    assert W.get_value(borrow=True, return_internal_type=True) is storage, "the update made a new array"
    assert_same_rows(backend.get(W), Wv, -lr * gv, iv)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_on_a_strided_shared_view(backend):
    case = rows_case(backend, "inplace", "float64", 2, "float64", 2, "int32")
    base = RNG.integers(-9, 9, (12, 8)).astype("float64")
    view = (base, (slice(None, None, 2), slice(None, None, -2)))  # neither dimension contiguous
    gv = RNG.integers(-9, 9, (6, 8)).astype("float64")
    inc = (gv, (slice(None), slice(1, None, 2)))  # strided increments
    iv = np.array([0, 5, 5, -6, 2, 5], dtype="int32")
    expected = expected_rows(base[view[1]], gv[inc[1]], iv)
    got = case.run(view, inc, iv)
    assert_same_rows(got, base[view[1]], gv[inc[1]], iv)
    np.testing.assert_array_equal(got, expected)


# -- dtypes -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", OUT_DTYPES)
@pytest.mark.parametrize("inc_dtype", ["float64", "int16", "same"])
def test_base_dtypes_and_cast_increments(dtype, inc_dtype):
    """Increments are cast to the base's dtype, as Aesara's C code casts them."""
    inc_dtype = dtype if inc_dtype == "same" else inc_dtype
    W = at.tensor(dtype, shape=(None, None), name="W")
    g = at.tensor(inc_dtype, shape=(None, None), name="g")
    idx = at.lvector("idx")
    out = at.inc_subtensor(W[idx], g)
    assert out.dtype == dtype
    f = aesara.function([W, g, idx], out)
    check_rows_graph(f, onto="base")
    Wv = RNG.integers(0, 50, (4, 3)).astype(dtype)
    gv = RNG.integers(0, 20, (5, 3)).astype(inc_dtype)
    iv = np.array([0, 3, 3, 1, 3])
    got = f(Wv, gv, iv)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, expected_rows(Wv, gv, iv))
    np.testing.assert_array_equal(got, aesara.function([W, g, idx], out, mode=NO_BINCOUNT)(Wv, gv, iv))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint64"])
def test_integer_sums_wrap(dtype):
    info = np.iinfo(dtype)
    W = aesara.shared(np.full((2, 3), info.max, dtype=dtype), name="W")
    idx = at.lvector("idx")
    f = aesara.function([idx], [], updates={W: at.inc_subtensor(W[idx], np.ones(3, dtype=dtype))})
    check_rows_graph(f, inplace=True)
    f([0, 0, 1])
    expected = np.full((2, 3), info.max, dtype=dtype)
    np.add.at(expected, [0, 0, 1], np.ones(3, dtype=dtype))
    np.testing.assert_array_equal(W.get_value(), expected)


@pytest.mark.parametrize("idx_dtype", INDEX_DTYPES)
def test_index_dtypes(idx_dtype):
    W = aesara.shared(RNG.random((100, 4)), name="W")
    idx = at.vector("idx", dtype=idx_dtype)
    g = at.dmatrix("g")
    f = aesara.function([idx, g], at.inc_subtensor(W[idx], g))
    check_rows_graph(f, onto="base")
    signed = idx_dtype.startswith("int")
    iv = np.array([0, 99, 7, -1, -100, 7] if signed else [0, 99, 7, 7, 99, 1]).astype(idx_dtype)
    gv = RNG.random((6, 4))
    np.testing.assert_array_equal(f(iv, gv), expected_rows(W.get_value(), gv, iv))


# -- what stays Aesara's, and switching off -----------------------------------------
def test_excluding_bincount_switches_it_off():
    W = aesara.shared(np.zeros((5, 2)), name="W")
    idx = at.lvector("idx")
    out = [aesara.grad(W[idx].sum(), W), at.inc_subtensor(W[idx], 1.0)]
    f = aesara.function([idx], out, mode=NO_BINCOUNT)
    assert not scatter_nodes(f)
    assert AdvancedIncSubtensor1 in op_types(f)
    g = aesara.function([idx], out, updates={W: out[1]}, mode=FAST_RUN.excluding("inplace"))
    assert all(not node.op.inplace for node in check_rows_graph(g))


def test_set_subtensor_is_not_a_scatter_add():
    # Issue 30: a set becomes ScatterSet (tests/test_scatter_set.py), in place here.
    W = aesara.shared(np.zeros((5, 2)), name="W")
    idx = at.lvector("idx")
    f = aesara.function([idx], [], updates={W: at.set_subtensor(W[idx], 1.0)})
    assert not scatter_nodes(f)
    assert AdvancedIncSubtensor1 not in op_types(f)
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, ScatterSet)]
    assert node.op.inplace


def test_one_dimensional_scatter_onto_zeros_stays_bincount():
    idx = at.lvector("idx")
    w = at.dvector("w")
    f = aesara.function([idx, w], at.inc_subtensor(at.zeros(5)[idx], w))
    assert Bincount in op_types(f) and not scatter_nodes(f)


def test_one_dimensional_scatter_onto_a_base_is_scatter_add():
    v = aesara.shared(np.arange(5.0), name="v")
    idx = at.lvector("idx")
    w = at.dvector("w")
    f = aesara.function([idx, w], [], updates={v: at.inc_subtensor(v[idx], w)})
    (node,) = check_rows_graph(f, onto="base", inplace=True)
    assert node.op.onto == "base"
    f([4, -1, 0], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(v.get_value(), [3.0, 1.0, 2.0, 3.0, 7.0])


def test_unsupported_dtypes_stay_aesaras(caplog):
    W = at.tensor("float16", shape=(None, None), name="W")
    idx = at.lvector("idx")
    f = aesara.function([W, idx], at.inc_subtensor(W[idx], 1.0))
    assert not scatter_nodes(f) and AdvancedIncSubtensor1 in op_types(f)
    # Complex increments of a real base: Aesara's C code drops the imaginary
    # part, which a graph cast refuses to do; no rewrite failure is logged.
    D = at.dmatrix("D")
    z = at.zmatrix("z")
    g = aesara.function([D, z, idx], at.inc_subtensor(D[idx], z))
    assert not scatter_nodes(g) and AdvancedIncSubtensor1 in op_types(g)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    b = aesara.function([D, idx], at.inc_subtensor(D[idx], at.ones((1, 1), dtype="bool")))
    check_rows_graph(b)
    np.testing.assert_array_equal(b(np.zeros((2, 2)), [1, 1]), [[0, 0], [2, 2]])


# -- the Python implementation, shapes ------------------------------------------------
def test_perform_matches_the_c_code():
    W = at.dtensor3("W")
    g = at.dmatrix("g")
    idx = at.lvector("idx")
    outs = [at.inc_subtensor(W[idx], g), aesara.grad((W[idx] * g).sum(), W)]
    c = aesara.function([W, g, idx], outs)
    py = aesara.function([W, g, idx], outs, mode=Mode(linker="py", optimizer=FAST_RUN.optimizer))
    assert scatter_nodes(c) and scatter_nodes(py)
    Wv, gv, iv = RNG.random((4, 3, 2)), RNG.random((3, 2)), np.array([1, 1, -4, 3])
    for a, b in zip(c(Wv, gv, iv), py(Wv, gv, iv)):
        np.testing.assert_array_equal(a, b)


def test_shape_of_the_result():
    W = at.dtensor3("W")
    g = at.dvector("g")
    idx = at.lvector("idx")
    n = at.lscalar("n")
    onto_zeros = at.inc_subtensor(at.zeros((n, 4, 2))[idx], g)
    onto_base = at.inc_subtensor(W[idx], g)
    f = aesara.function([W, g, idx, n], [onto_zeros.shape, onto_base.shape])
    assert not scatter_nodes(f), "the shape needs no scatter-add"
    shapes = f(np.zeros((3, 4, 2)), np.zeros(2), np.array([0]), 7)
    assert [tuple(s) for s in shapes] == [(7, 4, 2), (3, 4, 2)]


def test_static_shape_of_zeros_form():
    g = at.dmatrix("g")
    idx = at.lvector("idx")
    out = ScatterAdd("zeros")(at.as_tensor_variable([5, 3]), g, idx)
    assert out.type.shape == (5, 3)


# -- the C code's paths ----------------------------------------------------------------
#: (N, V, row length, increments' row layout, expected split with OpenMP on 2 threads)
PATHS = [
    (1000, 100, 8, "rows", "serial"),  # too little work to split
    (100_000, 100, 8, "rows", "by thread"),  # few rows: private copies
    (20_000, 20_000, 64, "rows", "serial"),  # many wide rows, 10 MB of them: one thread
    (100_000, 20, 64, "rows", "serial"),  # few wide rows, in cache: one thread
    (100_000, 10, 64, "rows", "by thread"),  # too few to deal out
    (20_000, 70_000, 64, "one value per index", "by row"),
    (20_000, 70_000, 64, "strided", "by row"),
    (100_000, 100_000, 2, "rows", "serial"),  # many narrow rows
    (100_000, 10, 1, "rows", "by thread"),
    (100_000, 1000, 8, "one row for all", "by thread"),
    (20_000, 70_000, 64, "rows", "by row"),  # 36 MB of rows: prefetched, dealt out in blocks
]


@pytest.mark.cpu_only(
    "the paths of the CPU C code, at sizes that choose them; "
    "tests/gpu/test_cuda_rows.py drives every path of the GPU host code"
)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["base", "inplace"])
@pytest.mark.parametrize("n, nrows, rowlen, layout, split", PATHS)
def test_paths_of_the_c_code(backend, form, n, nrows, rowlen, layout, split, openmp):
    """Every path gives np.add.at's values; in index order, bit for bit."""
    case = rows_case(backend, form, "float64", 2, "float64", 2, "int64", openmp)
    rng = np.random.default_rng(n + nrows + rowlen)
    base = rng.standard_normal((nrows, rowlen)) + 0.0
    idx = rng.integers(-nrows, nrows, n)
    if layout == "rows":
        inc = rng.standard_normal((n, rowlen))
    elif layout == "one value per index":
        inc = rng.standard_normal((n, 1))
    elif layout == "one row for all":
        inc = rng.standard_normal((1, rowlen))
    else:
        inc = (rng.standard_normal((n, 2 * rowlen)), (slice(None), slice(None, None, -2)))
    view = base
    if form == "inplace" and layout == "strided":
        # An in-place base that is not C-contiguous: the strided path of out.
        wide = rng.standard_normal((nrows, 2 * rowlen)) + 0.0
        view = (wide, (slice(None), slice(None, None, 2)))
        base = wide[:, ::2]
    inc_value = inc if isinstance(inc, np.ndarray) else inc[0][inc[1]]
    got = case.run(view, inc, idx)
    assert_same_rows(got, base, inc_value, idx, f"{split}, {layout}")
    if split != "by thread" or not openmp:
        # One thread, or rows split by row: every row gets its increments in
        # index order, as np.add.at adds them.
        np.testing.assert_array_equal(got, expected_rows(base, inc_value, idx))


def test_update_whose_increments_are_the_table_itself():
    """The destroy handler keeps the Op out of place when the base is also read."""
    Wv = RNG.integers(-5, 5, (3, 2)).astype("float64")
    W = aesara.shared(Wv.copy(), name="W")
    idx = at.lvector("idx")
    f = aesara.function([idx], [], updates={W: at.inc_subtensor(W[idx], W)})
    check_rows_graph(f)
    f([2, 2, 0])
    np.testing.assert_array_equal(W.get_value(), expected_rows(Wv, Wv, [2, 2, 0]))


def _scatter_constant(name):
    """A #define of ScatterAdd's C code (read from the files it hashes)."""
    import re

    from aesara_bincount_core import _c_code

    text = "\n".join(_c_code.read_source(f) for f in ScatterAdd.hashed_sources())
    return int(re.search(rf"^#define {name} (\d+)", text, re.M).group(1))


@pytest.mark.cpu_only("a threshold of the CPU C code's plain loop")
@pytest.mark.parametrize("dtype, rowlen", [("float64", 16), ("float64", 32), ("float64", 64),
                                           ("float32", 32), ("float32", 64)])
def test_plain_loop_prefetches_increments_at_its_thresholds(dtype, rowlen, openmp):
    """The plain serial loop prefetches the increment rows SA_INC_AHEAD_ROWS
    ahead when a row has SA_INC_AHEAD_MIN_BYTES or more (on both sides of
    it here): every length of idx around the last group that prefetches,
    and a row past it, gives np.add.at's values (bit for bit on one
    thread)."""
    ahead = _scatter_constant("SA_INC_AHEAD_ROWS")
    assert _scatter_constant("SA_INC_AHEAD_MIN_BYTES") == 256  # the row lengths above straddle it
    case = rows_case(CPU, "base", dtype, 2, dtype, 2, "int64", openmp)
    rng = np.random.default_rng(rowlen)
    for n in (1, 4, ahead + 3, ahead + 4, ahead + 5, ahead + 8, 4 * ahead + 7, 3001):
        base = rng.standard_normal((50, rowlen)).astype(dtype) + 0
        inc = rng.standard_normal((n, rowlen)).astype(dtype)
        idx = rng.integers(-50, 50, n)
        got = case.run(base, inc, idx)
        assert_same_rows(got, base, inc, idx, f"N={n}")
        if not openmp:  # one thread: index order, bit for bit (OpenMP may split by thread)
            np.testing.assert_array_equal(got, expected_rows(base, inc, idx), err_msg=f"N={n}")
