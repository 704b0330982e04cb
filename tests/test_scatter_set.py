"""Integer-index sets (issue 30, item 2) on the CPU: ``LinearIndex`` and ``ScatterSet``.

Expected values are numpy's assignment with the order of duplicates made
explicit: a loop in index order, so that the last one wins.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import Mode, get_default_mode
from aesara.tensor.subtensor import AdvancedIncSubtensor, AdvancedIncSubtensor1

from aesara_bincount import LinearIndex, ScatterSet

FAST_RUN = get_default_mode()
RNG = np.random.default_rng(20261203)


def expected_set(base, values, *indices):
    out = np.array(base, copy=True)
    idx = np.broadcast_arrays(*[np.asarray(i) for i in indices])
    shape = idx[0].shape
    vals = np.broadcast_to(np.asarray(values).astype(out.dtype), shape + out.shape[len(indices):])
    for pos in np.ndindex(*shape):
        out[tuple(int(i[pos]) for i in idx)] = vals[pos]
    return out


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def _compile(out, inputs, **kw):
    f = aesara.function(inputs, out, **kw)
    types = [type(n.op) for n in f.maker.fgraph.toposort()]
    assert ScatterSet in types and LinearIndex in types, types
    assert AdvancedIncSubtensor not in types and AdvancedIncSubtensor1 not in types, types
    return f


def test_one_index_array_last_one_wins():
    W = at.dmatrix("W")
    i = at.lvector("i")
    v = at.dmatrix("v")
    f = _compile(at.set_subtensor(W[i], v), [W, i, v])
    Wv = RNG.standard_normal((5, 3))
    iv = np.array([1, -4, 3, 1, 4, -1])  # 1 three times (-4 is 1), 4 twice
    vv = RNG.standard_normal((6, 3))
    got = f(Wv, iv, vv)
    assert_same(got, expected_set(Wv, vv, iv))
    np.testing.assert_array_equal(got[1], vv[3])
    np.testing.assert_array_equal(got[4], vv[5])


def test_several_index_arrays_with_slices_and_broadcast_values():
    X = at.dtensor3("X")
    r, c = at.lvectors("r", "c")
    f = _compile(at.set_subtensor(X[r, c, :], at.constant(np.array([-0.0, np.nan, 7.0]))), [X, r, c])
    Xv = RNG.standard_normal((3, 4, 3))
    rv, cv = np.array([0, 2, -3, 1]), np.array([-1, 0, 3, 1])
    assert_same(f(Xv, rv, cv), expected_set(Xv, [-0.0, np.nan, 7.0], rv, cv))
    m = at.dmatrix("m")
    g = _compile(at.set_subtensor(m[r[:, None], c[None, :]], 5.0), [m, r, c])
    mv = RNG.standard_normal((3, 4))
    assert_same(g(mv, rv[:2], cv), expected_set(mv, 5.0, rv[:2, None], cv[None, :]))


def test_boolean_mask_and_int8_and_empty():
    r, c = at.lvectors("r", "c")
    b = at.vector("b", dtype="bool")
    f = _compile(at.set_subtensor(at.zeros((3, 4), dtype="bool")[r, c], b), [r, c, b])
    rv, cv = np.array([0, 0, 2, 2]), np.array([1, 1, -1, 0])
    bv = np.array([True, False, True, True])
    assert_same(f(rv, cv, bv), expected_set(np.zeros((3, 4), bool), bv, rv, cv))
    B8 = at.matrix("B8", dtype="int8")
    f8 = _compile(at.set_subtensor(B8[r, c], -128), [B8, r, c])
    B8v = np.arange(12, dtype="int8").reshape(3, 4)
    assert_same(f8(B8v, rv, cv), expected_set(B8v, -128, rv, cv))
    e = np.array([], dtype="int64")
    assert_same(f8(B8v, e, e), B8v)


def test_errors_write_nothing_and_in_place_update():
    W = aesara.shared(np.arange(12.0).reshape(4, 3), name="W")
    r, c = at.lvectors("r", "c")
    v = at.dvector("v")
    f = aesara.function([r, c, v], [], updates=[(W, at.set_subtensor(W[r, c], v))])
    nodes = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, ScatterSet)]
    assert nodes and all(n.op.inplace for n in nodes), [n.op for n in nodes]
    before = W.get_value()
    with pytest.raises(IndexError, match=r"index 3 at position 1 .* axis 1 with size 3"):
        f(np.array([0, 1]), np.array([0, 3]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"cannot be broadcast"):
        f(np.array([0, 1]), np.array([0, 2]), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(W.get_value(), before)
    f(np.array([0, 0]), np.array([1, 1]), np.array([5.0, 6.0]))
    before[0, 1] = 6.0
    np.testing.assert_array_equal(W.get_value(), before)
    one = aesara.function([r, v], [], updates=[(W, at.set_subtensor(W[r], v[0]))])
    with pytest.raises(IndexError, match=r"index -5 at position 2 .* axis 0 with size 4"):
        one(np.array([0, 1, -5]), np.array([9.0]))
    np.testing.assert_array_equal(W.get_value(), before)


@pytest.mark.parametrize("seed", range(15))
def test_random_against_numpy(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 5, size=2))
    n = int(rng.integers(0, 25))
    rv = rng.integers(-shape[0], shape[0], size=n)
    cv = rng.integers(-shape[1], shape[1], size=n)
    mv = rng.standard_normal(shape)
    vv = rng.standard_normal(n)
    m = at.dmatrix("m")
    r, c = at.lvectors("r", "c")
    v = at.dvector("v")
    f = _compile(at.set_subtensor(m[r, c], v), [m, r, c, v])
    assert_same(f(mv, rv, cv, vv), expected_set(mv, vv, rv, cv))


def test_python_implementation_and_gradient():
    m = at.dmatrix("m")
    r, c = at.lvectors("r", "c")
    v = at.dvector("v")
    out = at.set_subtensor(m[r, c], v)
    f = _compile(out, [m, r, c, v], mode=Mode(linker="py", optimizer=FAST_RUN.optimizer))
    mv, rv, cv, vv = np.zeros((2, 2)), np.array([1, 1, 0]), np.array([0, 0, -1]), np.array([1.0, 2.0, 3.0])
    assert_same(f(mv, rv, cv, vv), expected_set(mv, vv, rv, cv))
    w = aesara.shared(np.array([1.0, 2.0, 3.0]))
    i = at.lvector("i")
    x = at.dvector("x")
    cost = (at.set_subtensor(x[i], w[: i.shape[0]]) ** 2).sum()
    gx, gw = aesara.function([x, i], aesara.grad(cost, [x, w]))(np.array([1.0, 2.0, 3.0]), np.array([2, 0]))
    np.testing.assert_array_equal(gx, [0.0, 4.0, 0.0])
    np.testing.assert_array_equal(gw, [2.0, 4.0, 0.0])
