"""The multi-index scatter-add in one pass (issue 41, item 1): ``MultiIndexScatterAdd``.

Every form goes through ``aesara.function`` and is compared with
``np.add.at`` (bit for bit: one thread adds in numpy's order; counts are
exact), one case per plan of ``c_code/cpu/multi_scatter_add.c``: per-row
histograms (``mi_count_rows``), counts over out's rows (``mi_count_flat``, its
int64 fold and the generic one), the general blocks (``sa_accumulate``), the
buffer of all rows (threads; ``V`` other than ``prod(dims)``).  Bad indices on
each axis and per plan, negative indices, empty and broadcast index arrays,
-0.0 and NaN, int8 wrap, an in-place shared base left intact, views.
Exhaustive grids are under ``@pytest.mark.long``.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import Mode, get_default_mode

from aesara_bincount import Bincount, LinearIndex, MultiIndexScatterAdd, ScatterAdd

RNG = np.random.default_rng(20261241)
PAIR = get_default_mode().excluding("multi_index_one_pass")


def op_types(f):
    return [type(n.op) for n in f.maker.fgraph.toposort()]


def one_pass(inputs, out, **kw):
    f = aesara.function(inputs, out, **kw)
    types = op_types(f)
    assert MultiIndexScatterAdd in types and LinearIndex not in types and ScatterAdd not in types, types
    return f


def add_at(base, increments, *indices):
    out = np.array(base, copy=True)
    np.add.at(out, tuple(np.asarray(i, dtype=np.int64) for i in indices), np.asarray(increments).astype(out.dtype))
    return out


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def axis_error(axis, value, pos, size):
    return rf"index {value} at position {pos} of the broadcast indices is out of bounds for axis {axis} with size {size}"


# -- per-row histograms (mi_count_rows) ---------------------------------------------
def test_per_row_histograms_against_add_at():
    B, M, K = 6, 40, 10
    x = at.lmatrix("x")
    f = one_pass([x], at.inc_subtensor(at.zeros((B, K), dtype="int64")[at.arange(B)[:, None], x], 1))
    rows = np.arange(B)[:, None]
    xv = RNG.integers(-K, K, (B, M))
    assert_same(f(xv), add_at(np.zeros((B, K), "int64"), 1, rows, xv))
    wide = RNG.integers(0, K, (B, 2 * M))
    assert_same(f(wide[:, ::2]), add_at(np.zeros((B, K), "int64"), 1, rows, wide[:, ::2]))  # a view
    assert_same(f(np.zeros((B, 0), "int64")), np.zeros((B, K), "int64"))  # empty rows
    bad = RNG.integers(0, K, (B, M))  # non-negative: its groups take the fast test
    bad[2, 5] = K  # in [d, cap): passes the group test, caught after the row
    with pytest.raises(IndexError, match=axis_error(1, K, 2 * M + 5, K)):
        f(bad)
    bad[2, 5] = -K - 1
    with pytest.raises(IndexError, match=axis_error(1, -K - 1, 2 * M + 5, K)):
        f(bad)


def test_per_row_histograms_of_small_dtypes_wrap_and_the_first_axis():
    # int8 counts wrap as numpy's do; a value other than 1; the varying axis is
    # the first (a column per row of B: out[x, r], m = B rows apart).
    B, M, K = 3, 300, 4
    x = at.matrix("x", dtype="int8")
    r = at.vector("r", dtype="uint16")
    f = one_pass([x, r], at.inc_subtensor(at.zeros((K, B), dtype="int8")[x, r[None, :]], 3))
    xv = RNG.integers(-K, K, (M, B)).astype("int8")
    rv = np.array([2, 0, 1], dtype="uint16")
    assert_same(f(xv, rv), add_at(np.zeros((K, B), "int8"), 3, xv, rv[None, :]))
    rv_bad = np.array([2, 3, 1], dtype="uint16")  # axis 1, same along a row of B... read once
    with pytest.raises(IndexError, match=axis_error(1, 3, 1, B)):
        f(xv, rv_bad)


def test_per_row_histograms_bad_row_index_first():
    # The index that is the same along a row of B is checked once per row; a
    # bad one there (axis 0) is named before a bad one on axis 1.
    B, M, K = 4, 50, 8
    r, x = at.lvector("r"), at.lmatrix("x")
    f = one_pass([r, x], at.inc_subtensor(at.zeros((B, K), dtype="int64")[r[:, None], x], 1))
    rv, xv = np.array([0, 3, -4, 1]), RNG.integers(0, K, (B, M))
    assert_same(f(rv, xv), add_at(np.zeros((B, K), "int64"), 1, rv[:, None], xv))
    xv[0, 1] = K
    with pytest.raises(IndexError, match=axis_error(0, 4, 3 * M, B)):
        f(np.array([0, 3, -4, 4]), xv)


# -- counts over out's rows (mi_count_flat) -----------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "int32"])  # the int64 fold, the generic one
def test_confusion_matrix_counts(dtype):
    K = 12
    y, p = at.vector("y", dtype=dtype), at.vector("p", dtype=dtype)
    f = one_pass([y, p], at.inc_subtensor(at.zeros((K, K), dtype="int64")[y, p], 2))
    yv = RNG.integers(-K, K, 3000).astype(dtype)
    pv = RNG.integers(-K, K, 6000).astype(dtype)[::2]  # a strided view
    want = add_at(np.zeros((K, K), "int64"), 2, yv, pv)
    assert_same(f(yv, pv), want)
    empty = np.array([], dtype=dtype)
    assert_same(f(empty, empty), np.zeros((K, K), "int64"))
    bad_y, bad_p = yv.copy(), pv.copy()
    bad_p[2000] = K
    bad_y[2500] = -K - 1
    with pytest.raises(IndexError, match=axis_error(0, -K - 1, 2500, K)):
        f(bad_y, bad_p)  # axis 0 first, though axis 1's comes first in B
    with pytest.raises(IndexError, match=axis_error(1, K, 2000, K)):
        f(yv, bad_p)


def test_confusion_matrix_of_int8_counts_wraps():
    y, p = at.lvectors("y", "p")
    f = one_pass([y, p], at.inc_subtensor(at.zeros((2, 2), dtype="int8")[y, p], 1))
    yv, pv = np.zeros(300, "int64"), np.r_[np.zeros(200, "int64"), np.ones(100, "int64")]
    assert_same(f(yv, pv), add_at(np.zeros((2, 2), "int8"), 1, yv, pv))  # 200 wraps to -56


# -- the general plan (sa_accumulate on folded blocks) ------------------------------
def test_float_values_signed_zeros_and_nan_onto_zeros_and_a_base():
    r, c = at.lvectors("r", "c")
    g = at.dvector("g")
    B = at.dmatrix("B")
    f = one_pass([B, r, c, g], at.inc_subtensor(B[r, c], g))
    z = one_pass([r, c, g], at.inc_subtensor(at.zeros((2, 2))[r, c], g))
    Bv = np.array([[-0.0, 0.0], [-0.0, 1.0]])
    rv, cv = np.array([0, 0, 1, 1, -1]), np.array([0, 1, 0, 1, -2])
    gv = np.array([-0.0, -0.0, np.nan, -0.0, 2.5])
    assert_same(f(Bv, rv, cv, gv), add_at(Bv, gv, rv, cv))
    assert_same(z(rv, cv, gv), add_at(np.zeros((2, 2)), gv, rv, cv))
    with pytest.raises(IndexError, match=axis_error(1, 2, 3, 2)):
        z(rv, np.array([0, 1, 0, 2, 0]), gv)


def test_rows_of_a_base_with_broadcast_increments_and_many_blocks():
    # Rows of rest = (3,), increments of one row for all, more positions than a block.
    X = at.dtensor3("X")
    r, c = at.lvectors("r", "c")
    g = at.dvector("g")
    f = one_pass([X, r, c, g], at.inc_subtensor(X[r, c, :], g))
    Xv = RNG.standard_normal((5, 4, 3))
    rv, cv = RNG.integers(-5, 5, 700), RNG.integers(-4, 4, 700)
    gv = RNG.standard_normal(3)
    before = Xv.copy()
    assert_same(f(Xv, rv, cv, gv), add_at(Xv, gv, rv, cv))
    np.testing.assert_array_equal(Xv, before)  # not in place: the input is kept


def test_broadcast_index_arrays_and_increments():
    r, c = at.lvectors("r", "c")
    g = at.dmatrix("g")
    f = one_pass([r, c, g], at.inc_subtensor(at.zeros((4, 6))[r[:, None], c[None, :]], g))
    rv, cv = np.array([0, 3, 0]), np.array([1, -1, 1, 2])
    for gv in (RNG.standard_normal((3, 4)), RNG.standard_normal((1, 4)), RNG.standard_normal((3, 1))):
        assert_same(f(rv, cv, gv), add_at(np.zeros((4, 6)), gv, rv[:, None], cv[None, :]))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        f(rv, cv, RNG.standard_normal((2, 4)))
    with pytest.raises(IndexError, match=axis_error(1, 6, 3, 6)):  # the index error first
        f(rv, np.array([1, -1, 1, 6]), RNG.standard_normal((2, 4)))
    s = at.lscalar("s")
    h = one_pass([s, c], at.inc_subtensor(at.zeros((4, 6), dtype="int64")[s, c], 1))  # a 0-d index
    assert_same(h(np.int64(-1), cv), add_at(np.zeros((4, 6), "int64"), 1, -1, cv))


def test_gradient_of_picked_probabilities_float32():
    P = at.fmatrix("P")
    y = at.lvector("y")
    f = one_pass([P, y], aesara.grad(-at.log(P)[at.arange(P.shape[0]), y].sum(), P))
    Pv = RNG.uniform(0.1, 1.0, (50, 7)).astype("float32")
    yv = RNG.integers(-7, 7, 50)
    want = add_at(np.zeros_like(Pv), -1.0, np.arange(50), yv) / Pv  # Aesara divides the whole gradient
    np.testing.assert_allclose(f(Pv, yv), want, rtol=1e-6)


def test_in_place_update_of_a_shared_base_is_checked_first():
    W = aesara.shared(np.arange(12.0).reshape(4, 3), name="W")
    r, c = at.lvectors("r", "c")
    g = at.dvector("g")
    f = aesara.function([r, c, g], [], updates=[(W, at.inc_subtensor(W[r, c], g))])
    nodes = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, MultiIndexScatterAdd)]
    assert nodes and all(n.op.inplace for n in nodes)
    before = W.get_value()
    n = 3000  # several blocks: the bad index is in the last one
    rv, cv, gv = RNG.integers(-4, 4, n), RNG.integers(-3, 3, n), RNG.standard_normal(n)
    cv[n - 1] = 3
    with pytest.raises(IndexError, match=axis_error(1, 3, n - 1, 3)):
        f(rv, cv, gv)
    np.testing.assert_array_equal(W.get_value(), before)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        f(rv, cv % 3, gv[:5])
    np.testing.assert_array_equal(W.get_value(), before)
    f(rv, cv % 3, gv)
    assert_same(W.get_value(), add_at(before, gv, rv, cv % 3))


def test_in_place_counts_onto_a_shared_table():
    T = aesara.shared(np.zeros((5, 8), dtype="int32"), name="T")
    x = at.lmatrix("x")
    f = aesara.function([x], [], updates=[(T, at.inc_subtensor(T[at.arange(5)[:, None], x], 1))])
    xv = RNG.integers(-8, 8, (5, 60))
    f(xv)
    f(xv)
    want = add_at(add_at(np.zeros((5, 8), "int32"), 1, np.arange(5)[:, None], xv), 1, np.arange(5)[:, None], xv)
    before = T.get_value()
    assert_same(before, want)
    xv[4, 59] = 8
    with pytest.raises(IndexError, match=axis_error(1, 8, 299, 8)):
        f(xv)
    assert_same(T.get_value(), before)


# -- threads, and V other than prod(dims) (the buffer of all rows) -------------------
def test_threads_give_the_sums_of_add_at():
    y, p = at.lvectors("y", "p")
    w = at.lvector("w")
    with aesara.config.change_flags(openmp=True):
        f = one_pass([y, p, w], at.inc_subtensor(at.zeros((50, 50), dtype="int64")[y, p], w))
    n = 200_000
    yv, pv, wv = RNG.integers(-50, 50, n), RNG.integers(-50, 50, n), RNG.integers(-9, 9, n)
    assert_same(f(yv, pv, wv), add_at(np.zeros((50, 50), "int64"), wv, yv, pv))
    pv[n - 3] = 50
    with pytest.raises(IndexError, match=axis_error(1, 50, n - 3, 50)):
        f(yv, pv, wv)


@pytest.mark.parametrize("rows", [7, 5])
def test_rows_other_than_the_product_of_dims_act_as_the_pair(rows):
    # Built by hand (the rewrite always gives V = prod(dims)): the flat rows of
    # dims (2, 3) into 7 rows are all in range; into 5, row 5 (position 2) is not, as
    # ScatterAdd of LinearIndex says.
    y, p = at.lvectors("y", "p")
    dims = at.as_tensor_variable(np.array([2, 3]))
    one = MultiIndexScatterAdd("zeros")(at.as_tensor_variable([rows]), at.constant(1.0), dims, y, p)
    pair = ScatterAdd("zeros")(at.as_tensor_variable([rows]), at.constant(1.0), LinearIndex()(dims, y, p)[0])
    f, g = aesara.function([y, p], one), aesara.function([y, p], pair, mode=PAIR)
    yv, pv = np.array([0, 1, 1, -1]), np.array([2, 1, 2, 0])
    if rows == 7:
        assert_same(f(yv, pv), g(yv, pv))
    else:
        for fn in (f, g):
            with pytest.raises(IndexError, match="index 5 at position 2 is out of bounds for axis 0 with size 5"):
                fn(yv, pv)


# -- the graph ----------------------------------------------------------------------
def test_the_bincount_form_and_excluding_the_pass():
    y, p = at.lvectors("y", "p")
    flat = LinearIndex()(at.as_tensor_variable(np.array([3, 4])), y, p)[0]
    f = one_pass([y, p], Bincount("scatter", out_dtype="int64")(flat, 12).reshape((3, 4)))
    yv, pv = np.array([0, 2, 2, -1]), np.array([3, 0, 0, -4])
    assert_same(f(yv, pv), add_at(np.zeros((3, 4), "int64"), 1, yv, pv))
    out = at.inc_subtensor(at.zeros((3, 4))[y, p], 1.0)
    g = aesara.function([y, p], out, mode=PAIR)
    assert LinearIndex in op_types(g) and ScatterAdd in op_types(g)
    assert_same(g(yv, pv), add_at(np.zeros((3, 4)), 1.0, yv, pv))


def test_python_implementation_and_gradient_of_the_op():
    B = at.dmatrix("B")
    g = at.dvector("g")
    y, p = at.lvectors("y", "p")
    dims = at.as_tensor_variable(np.array([3, 2]))
    out = MultiIndexScatterAdd("base")(B.reshape((6,)), g, dims, y, p)
    f = aesara.function([B, g, y, p], out, mode=Mode(linker="py", optimizer=None))
    Bv, gv = RNG.standard_normal((3, 2)), RNG.standard_normal(4)
    yv, pv = np.array([0, 2, 2, -1]), np.array([1, 0, 0, -2])
    assert_same(f(Bv, gv, yv, pv).reshape(3, 2), add_at(Bv, gv, yv, pv))
    with pytest.raises(IndexError, match=axis_error(0, 3, 1, 3)):
        f(Bv, gv, np.array([0, 3, 0, 0]), pv)
    c = at.dvector("c")
    gB, gg = aesara.grad((out * c).sum(), [B, g])
    grads = aesara.function([B, g, y, p, c], [gB, gg])
    cv = RNG.standard_normal(6)
    want_g = cv.reshape(3, 2)[yv, pv]
    got_B, got_g = grads(Bv, gv, yv, pv, cv)
    np.testing.assert_array_equal(got_B, cv.reshape(3, 2))
    np.testing.assert_array_equal(got_g, want_g)


def test_a_pickled_function_runs():
    import pickle

    y, p = at.lvectors("y", "p")
    f = one_pass([y, p], at.inc_subtensor(at.zeros((3, 4), dtype="int64")[y, p], 1))
    g = pickle.loads(pickle.dumps(f))
    yv, pv = np.array([0, 2, 2, -1]), np.array([3, 0, 0, -4])
    assert_same(g(yv, pv), add_at(np.zeros((3, 4), "int64"), 1, yv, pv))


# -- grids (make test-long) ---------------------------------------------------------
@pytest.mark.long
@pytest.mark.parametrize("seed", range(12))
def test_random_forms_against_add_at(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 4))
    shape = tuple(int(s) for s in rng.integers(1, 6, size=k + int(rng.integers(0, 2))))
    out_dtype = str(rng.choice(["int8", "int32", "int64", "float32", "float64"]))
    idx_dtype = str(rng.choice(["int8", "int16", "int32", "int64", "uint8", "uint32"]))
    bshape = tuple(int(s) for s in rng.integers(1, 40, size=int(rng.integers(1, 3))))
    signed = idx_dtype.startswith("int")
    indices = []
    for a in range(k):
        ishape = tuple(1 if rng.random() < 0.3 else b for b in bshape)
        indices.append(rng.integers(-shape[a] if signed else 0, shape[a], ishape).astype(idx_dtype))
    counts = rng.random() < 0.5
    inc = np.array(2, dtype=out_dtype) if counts else rng.integers(-3, 4, bshape + shape[k:]).astype(out_dtype)
    base = rng.integers(-3, 4, shape).astype(out_dtype)
    ivars = [at.tensor(dtype=idx_dtype, shape=(None,) * len(bshape)) for _ in range(k)]
    bvar = at.tensor(dtype=out_dtype, shape=(None,) * len(shape))
    gvar = at.tensor(dtype=out_dtype, shape=(None,) * inc.ndim)
    for onto_zeros in (True, False):
        target = at.zeros(shape, dtype=out_dtype) if onto_zeros else bvar
        f = one_pass([bvar, gvar, *ivars], at.inc_subtensor(target[tuple(ivars)], gvar), on_unused_input="ignore")
        start = np.zeros(shape, out_dtype) if onto_zeros else base
        assert_same(f(base, inc, *indices), add_at(start, inc, *indices))
        if indices[0].size:
            bad = [i.copy() for i in indices]
            a = int(rng.integers(0, k))
            bad[a].flat[int(rng.integers(0, bad[a].size))] = shape[a]
            with pytest.raises(IndexError):
                f(base, inc, *bad)

