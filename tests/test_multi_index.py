"""Scatter-adds with several integer index arrays (issue 30, item 1), on the CPU.

``inc_subtensor(base[i_0, ..., i_{K-1}], y)`` with K >= 2 compiles to
``LinearIndex`` and ``ScatterAdd`` in ``specialize``, which the one-pass
rewrite (issue 41) then makes one ``MultiIndexScatterAdd`` on the host; every
result is compared with ``np.add.at`` on a copy of the base (one thread: the
same order of sums, so bit for bit, signed zeros included).  The forms the
one-pass Op adds (its plans, errors per plan) are in
``test_multi_index_one_pass.py``.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import Mode, get_default_mode
from aesara.tensor.subtensor import AdvancedIncSubtensor

from aesara_bincount import LinearIndex, MultiIndexScatterAdd, ScatterAdd
from aesara_bincount_core.semantics import reference_linear_index

FAST_RUN = get_default_mode()
RNG = np.random.default_rng(20261202)


def op_types(f):
    return [type(n.op) for n in f.maker.fgraph.toposort()]


def expected(base, increments, *indices):
    out = np.array(base, copy=True)
    np.add.at(out, tuple(indices), np.asarray(increments).astype(out.dtype))
    return out


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def _compile(out, inputs, **kw):
    f = aesara.function(inputs, out, **kw)
    types = op_types(f)
    assert MultiIndexScatterAdd in types and LinearIndex not in types, types
    assert AdvancedIncSubtensor not in types and ScatterAdd not in types, types
    return f


# -- what it computes ----------------------------------------------------------------
def test_confusion_matrix_duplicates_and_negative_indices_on_each_axis():
    y, p = at.lvectors("y", "p")
    f = _compile(at.inc_subtensor(at.zeros((5, 5), dtype="int64")[y, p], 1), [y, p])
    yv = np.array([0, 1, 1, -1, 4, -5, 2, 2, 2], dtype="int64")
    pv = np.array([0, -1, 4, 3, 3, 0, -2, 3, 3], dtype="int64")
    assert_same(f(yv, pv), expected(np.zeros((5, 5), "int64"), 1, yv, pv))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint64"])
def test_index_dtypes(dtype):
    r = at.vector("r", dtype=dtype)
    c = at.vector("c", dtype="int16")
    f = _compile(at.inc_subtensor(at.zeros((7, 3))[r, c], 0.5), [r, c])
    rv = np.array([0, 6, 6, 3, 127 % 7], dtype=dtype)
    if dtype.startswith("int"):
        rv[1] = -1
    cv = np.array([0, -3, 2, 2, 1], dtype="int16")
    assert_same(f(rv, cv), expected(np.zeros((7, 3)), 0.5, rv.astype(np.int64), cv))


def test_onto_a_base_with_trailing_slices_and_rows_of_increments():
    X = at.dtensor3("X")
    r, c = at.lvectors("r", "c")
    g = at.dmatrix("g")
    f = _compile(at.inc_subtensor(X[r, c, :], g), [X, r, c, g])
    Xv = RNG.standard_normal((4, 3, 5))
    rv = np.array([0, 3, 3, -4, 1], dtype="int64")
    cv = np.array([2, 1, 1, 0, -3], dtype="int64")
    gv = RNG.standard_normal((5, 5))
    before = Xv.copy()
    assert_same(f(Xv, rv, cv, gv), expected(Xv, gv, rv, cv))
    np.testing.assert_array_equal(Xv, before)
    # Without the slice: the same rows.
    f2 = _compile(at.inc_subtensor(X[r, c], g), [X, r, c, g])
    assert_same(f2(Xv, rv, cv, gv), expected(Xv, gv, rv, cv))


def test_three_index_arrays_broadcast_one_value():
    X = at.dtensor3("X")
    a, b, c = at.lvectors("a", "b", "c")
    f = _compile(at.inc_subtensor(X[a, b, c], 2.0), [X, a, b, c])
    Xv = RNG.standard_normal((3, 4, 5))
    av, bv, cv = np.array([1, -1, 1]), np.array([3]), np.array([0, 4, 0])
    assert_same(f(Xv, av, bv, cv), expected(Xv, 2.0, av, np.broadcast_to(bv, 3), cv))


def test_broadcast_index_arrays_of_two_dimensions():
    r, c = at.lvectors("r", "c")
    g = at.dmatrix("g")
    f = _compile(at.inc_subtensor(at.zeros((4, 6))[r[:, None], c[None, :]], g), [r, c, g])
    rv, cv = np.array([0, 3, 0]), np.array([1, -1, 1, 2])
    gv = RNG.standard_normal((3, 4))
    assert_same(f(rv, cv, gv), expected(np.zeros((4, 6)), gv, rv[:, None], cv[None, :]))
    gv1 = RNG.standard_normal((1, 4))  # increments broadcast too
    assert_same(f(rv, cv, gv1), expected(np.zeros((4, 6)), gv1, rv[:, None], cv[None, :]))


def test_signed_zeros_nan_and_int8_wrap():
    r, c = at.lvectors("r", "c")
    g = at.dvector("g")
    B = at.dmatrix("B")
    f = _compile(at.inc_subtensor(B[r, c], g), [B, r, c, g])
    Bv = np.array([[-0.0, 0.0], [-0.0, 1.0]])
    rv, cv = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    gv = np.array([-0.0, -0.0, np.nan, -0.0])
    assert_same(f(Bv, rv, cv, gv), expected(Bv, gv, rv, cv))
    z = _compile(at.inc_subtensor(at.zeros((2, 2))[r, c], g), [r, c, g])
    assert_same(z(rv, cv, gv), expected(np.zeros((2, 2)), gv, rv, cv))
    b8 = at.matrix("b8", dtype="int8")
    g8 = at.vector("g8", dtype="int8")
    f8 = _compile(at.inc_subtensor(b8[r, c], g8), [b8, r, c, g8])
    b8v = np.array([[120, -128], [0, 5]], dtype="int8")
    g8v = np.array([100, -1, 7, 127], dtype="int8")
    rv8, cv8 = np.array([0, 0, 0, 1]), np.array([0, 1, 0, 1])
    assert_same(f8(b8v, rv8, cv8, g8v), expected(b8v, g8v, rv8, cv8))


def test_empty_index_arrays():
    r, c = at.lvectors("r", "c")
    B = at.dmatrix("B")
    f = _compile(at.inc_subtensor(B[r, c], 1.0), [B, r, c])
    Bv = RNG.standard_normal((3, 2))
    e = np.array([], dtype="int64")
    assert_same(f(Bv, e, e), Bv)
    # Empty indices onto an empty axis are fine too.
    assert_same(f(np.zeros((0, 2)), e, e), np.zeros((0, 2)))


def test_gradient_of_picked_log_probabilities():
    P = at.dmatrix("P")
    y = at.lvector("y")
    n = y.shape[0]
    loss = -at.log(P)[at.arange(n), y].sum()
    f = _compile(aesara.grad(loss, P), [P, y])
    Pv = RNG.uniform(0.1, 1.0, size=(6, 4))
    yv = np.array([0, 3, 3, 1, -1, 2])
    want = np.zeros_like(Pv)
    np.add.at(want, (np.arange(6), yv), -1.0)
    want /= Pv
    np.testing.assert_allclose(f(Pv, yv), want, rtol=0, atol=0)


def test_in_place_update_of_a_shared_variable():
    W = aesara.shared(np.zeros((4, 3)), name="W")
    r, c = at.lvectors("r", "c")
    g = at.dvector("g")
    f = aesara.function([r, c, g], [], updates=[(W, at.inc_subtensor(W[r, c], g))])
    nodes = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, MultiIndexScatterAdd)]
    assert nodes and all(n.op.inplace for n in nodes), [n.op for n in nodes]
    rv, cv, gv = np.array([1, 1, -1]), np.array([2, 2, 0]), np.array([1.0, 2.0, 4.0])
    f(rv, cv, gv)
    f(rv, cv, gv)
    want = expected(expected(np.zeros((4, 3)), gv, rv, cv), gv, rv, cv)
    assert_same(W.get_value(), want)


# -- errors: nothing is written -----------------------------------------------------
def test_out_of_range_on_the_second_axis_only_writes_nothing():
    W = aesara.shared(np.arange(12.0).reshape(4, 3), name="W")
    r, c = at.lvectors("r", "c")
    f = aesara.function([r, c], [], updates=[(W, at.inc_subtensor(W[r, c], 1.0))])
    before = W.get_value()
    with pytest.raises(IndexError, match=r"index 3 at position 2 .* axis 1 with size 3"):
        f(np.array([0, 1, 2, 3]), np.array([0, 2, 3, -4]))
    with pytest.raises(IndexError, match=r"index -4 at position 1 .* axis 1 with size 3"):
        f(np.array([0, 1]), np.array([0, -4]))
    with pytest.raises(IndexError, match=r"index 4 at position 0 .* axis 0 with size 4"):
        f(np.array([4, 1]), np.array([5, 0]))  # axis 0 first, as numpy
    with pytest.raises(IndexError, match=r"index 9 at position 1 .* axis 0 with size 4"):
        f(np.array([0, 9]), np.array([7, 0]))  # axis 0's, though axis 1's comes first
    big = np.zeros(5000, dtype="int64")
    big[4500] = -5  # in a later block of the one pass
    with pytest.raises(IndexError, match=r"index -5 at position 4500 .* axis 0 with size 4"):
        f(big, np.zeros(5000, dtype="int64"))
    np.testing.assert_array_equal(W.get_value(), before)
    f(np.array([3]), np.array([-1]))  # the function still works
    before[3, 2] += 1.0
    np.testing.assert_array_equal(W.get_value(), before)


def test_index_arrays_that_do_not_broadcast():
    r, c = at.lvectors("r", "c")
    f = _compile(at.inc_subtensor(at.zeros((4, 4))[r, c], 1.0), [r, c])
    with pytest.raises(IndexError, match=r"could not be broadcast together with shapes \(2,\) \(3,\)"):
        f(np.array([0, 1]), np.array([0, 1, 2]))


@pytest.mark.parametrize("seed", range(20))
def test_random_against_numpy_and_the_reference(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 5, size=3))
    n = int(rng.integers(0, 30))
    idx = [rng.integers(-d, d, size=n) for d in shape[:2]]
    if n and rng.random() < 0.3:
        axis = int(rng.integers(0, 2))
        idx[axis][int(rng.integers(0, n))] = shape[axis] + int(rng.integers(0, 3))
    Xv = rng.standard_normal(shape)
    gv = rng.standard_normal((n, shape[2]))
    X = at.dtensor3("X")
    r, c = at.lvectors("r", "c")
    g = at.dmatrix("g")
    f = _compile(at.inc_subtensor(X[r, c], g), [X, r, c, g])
    try:
        want = expected(Xv, gv, *idx)
    except IndexError:
        with pytest.raises(IndexError):
            reference_linear_index(shape[:2], idx)
        with pytest.raises(IndexError):
            f(Xv, *idx, gv)
        return
    assert_same(f(Xv, *idx, gv), want)
    flat, _ = reference_linear_index(shape[:2], idx)
    np.testing.assert_array_equal(flat, np.ravel_multi_index([i % d for i, d in zip(idx, shape)], shape[:2]))


def test_the_python_implementation_matches():
    # perform (the NumPy reference) gives the same answer and errors.
    y, p = at.lvectors("y", "p")
    out = at.inc_subtensor(at.zeros((3, 3))[y, p], 1.0)
    f = _compile(out, [y, p], mode=Mode(linker="py", optimizer=FAST_RUN.optimizer))
    yv, pv = np.array([0, -1, 2]), np.array([1, 1, -3])
    assert_same(f(yv, pv), expected(np.zeros((3, 3)), 1.0, yv, pv))
    with pytest.raises(IndexError, match=r"index -4 at position 1 .* axis 1 with size 3"):
        f(np.array([0, 1]), np.array([0, -4]))


@pytest.mark.parametrize("set_", [False, True])
def test_aesaras_advinc_cases(set_):
    """The index and increment shapes of Aesara's own test_advinc_subtensor
    (scalar indices among arrays, 2-D index arrays, increments of every rank
    that broadcasts), for inc and set, against np.add.at and numpy assignment."""
    from aesara.tensor.subtensor import AdvancedIncSubtensor

    x_shp = (6, 5, 4, 3)
    cases = [((0, [1, 3, 4], 1), (3, 3)), (([0, 1, 2], 0, [0, 1, 2]), (3, 4, 3)),
             (([[0, 1], [2, 3]], [[0, 1], [2, 3]]), (2, 2, 4, 3)), (([1, -1, 1], [2, 2, -3]), (3, 4, 3))]
    checked = 0
    for idx, y_shps in cases:
        for i in range(len(y_shps) + 1):
            y_shp = y_shps[i:]
            x_val = np.arange(np.prod(x_shp), dtype="float32").reshape(x_shp) + 1
            y_val = np.arange(np.prod(y_shp), dtype="float32").reshape(y_shp) + 1
            want = x_val.copy()
            try:
                if set_:
                    want[idx] = y_val
                else:
                    np.add.at(want, idx, y_val)
            except ValueError:
                continue
            y = at.tensor(dtype="float32", shape=(None,) * len(y_shp))
            x = at.tensor(dtype="float32", shape=(None,) * 4)
            expr = AdvancedIncSubtensor(set_instead_of_inc=set_)(x, y, *[at.as_tensor_variable(ix) for ix in idx])
            f = aesara.function([x, y], expr)
            assert (LinearIndex if set_ else MultiIndexScatterAdd) in op_types(f), op_types(f)
            assert_same(f(x_val, y_val), want)
            checked += 1
    assert checked >= 12
