"""The fusion through broadcasting and reshape (issue 41, item 2).

``bincount(f(a, b).ravel())`` and ``bincount(x.ravel(), weights=g(m).ravel())``
with ``f`` and ``g`` elementwise over inputs of several dimensions that
broadcast (``base[:, None] + idx``, ``arange(B)[:, None] * K + x``,
``w[:, None] * v``) compile to one ``FusedBincount``, which reads the inputs
per row (``c_code/cpu/fused_bincount_nd.h``).  Each graph is compared with the
unfused one (``mode.excluding("bincount_fusion")``: an ``Elemwise``, a
``Reshape``, ``Bincount``) and with numpy: bit for bit (one thread adds in
the same order), the same exception and message for bad values.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import Mode
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.extra_ops import bincount
from aesara.tensor.shape import Reshape

from aesara_bincount import FusedBincount
from test_fusion import FUSED, UNFUSED, _assert_same_outcome

RNG = np.random.default_rng(20261242)


def _fused(inputs, out, **kw):
    f = aesara.function(inputs, out, mode=FUSED, **kw)
    nodes = f.maker.fgraph.toposort()
    ops = [type(n.op) for n in nodes]
    assert ops.count(FusedBincount) == 1 and Elemwise not in ops, ops
    # A reshape left is the flatten of a plain x (a view), not of an Elemwise.
    assert all(n.inputs[0].owner is None for n in nodes if isinstance(n.op, Reshape)), ops
    return f, aesara.function(inputs, out, mode=UNFUSED, **kw)


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_per_row_offsets_in_every_flatten():
    base, idx = at.lvector("base"), at.lmatrix("idx")
    flats = [(base[:, None] + idx).ravel(), (base[:, None] + idx).flatten(),
             (base[:, None] + idx).reshape((-1,))]
    fused, unfused = _fused([base, idx], [bincount(v, minlength=7) for v in flats])
    bv, iv = np.array([0, 10, 30, 20]), RNG.integers(0, 10, (4, 9))
    want = np.bincount((bv[:, None] + iv).ravel(), minlength=7)
    for got in fused(bv, iv):
        _same(got, want)
    iv_view = RNG.integers(0, 10, (9, 4)).T  # a transposed view
    _assert_same_outcome(fused, unfused, bv, iv_view)
    _assert_same_outcome(fused, unfused, bv[:0], iv[:0])  # no rows
    _assert_same_outcome(fused, unfused, bv, iv[:, :0])  # empty rows
    bad = iv.copy()
    bad[2, 3] = -31  # -1 after the offset: named at its flat position
    _assert_same_outcome(fused, unfused, bv, bad)
    with pytest.raises(ValueError, match="negative value -1 at position 21"):
        fused(bv, bad)
    with pytest.raises(ValueError):  # shapes that do not broadcast, as the Elemwise
        fused(bv[:3], iv)
    _assert_same_outcome(fused, unfused, bv, iv[:, :1])  # rows of one position


def test_lengths_of_one_that_only_the_values_have():
    # A matrix whose last axis has length 1 when the function runs (its type
    # says nothing): broadcast against the other's rows, as the Elemwise does
    # (c[None, :] broadcasts by its type, so the flatten stays for this fusion).
    a, b, c = at.lmatrix("a"), at.lmatrix("b"), at.lvector("c")
    fused, unfused = _fused([a, b, c], bincount((c[None, :] + a * 4 + b).ravel()))
    av, bv, cv = RNG.integers(0, 3, (5, 1)), RNG.integers(0, 4, (5, 6)), RNG.integers(0, 2, 6)
    _same(fused(av, bv, cv), np.bincount((cv[None, :] + av * 4 + bv).ravel()))
    _assert_same_outcome(fused, unfused, bv[:1], av, cv[:1])  # and along the first axis


def test_batched_histogram_written_as_a_flat_bincount():
    B, K = 5, 8
    x = at.matrix("x", dtype="int32")
    fused, unfused = _fused([x], bincount((at.arange(B)[:, None] * K + x).ravel(), minlength=B * K))
    xv = RNG.integers(0, K, (B, 300)).astype("int32")
    _same(fused(xv), np.bincount((np.arange(B)[:, None] * K + xv).ravel(), minlength=B * K))
    xv[4, 299] = K + 3  # beyond minlength: the output grows, as numpy's
    _same(fused(xv), np.bincount((np.arange(B)[:, None] * K + xv).ravel(), minlength=B * K))
    xv[0, 0] = 200  # beyond the power of two above minlength (64): counted again, the general way
    _same(fused(xv), np.bincount((np.arange(B)[:, None] * K + xv).ravel(), minlength=B * K))
    _assert_same_outcome(fused, unfused, xv)
    xv[1, 7] = -9
    _assert_same_outcome(fused, unfused, xv)  # -1: the error, from the one-thread pass


def test_broadcast_weights_with_signed_zeros_and_nan():
    x = at.lmatrix("x")
    w, v = at.dvector("w"), at.dmatrix("v")
    fused, unfused = _fused([x, w, v], bincount(x.ravel(), weights=(w[:, None] * v).ravel()))
    xv = RNG.integers(0, 6, (4, 50))
    wv, vv = RNG.standard_normal(4), RNG.standard_normal((4, 50))
    wv[1], vv[2, :3], vv[3, 0] = -0.0, [-0.0, np.nan, -0.0], np.inf
    xv[1, :], xv[2, 1] = 5, 4
    _same(fused(xv, wv, vv), np.bincount(xv.ravel(), weights=(wv[:, None] * vv).ravel()))
    _assert_same_outcome(fused, unfused, xv, wv, vv[:, :49])  # a length error, as unfused


def test_both_groups_of_several_dimensions_with_other_rows():
    # x over (B, M), the weights over (M, B) transposed by the user: the
    # segments end where either group's row ends.  Columns broadcast too.
    x, c = at.lmatrix("x"), at.lvector("c")
    v, u = at.dmatrix("v"), at.dvector("u")
    out = bincount((x + c[None, :]).ravel(), weights=(v * u[None, :] + 1.0).ravel())
    fused, unfused = _fused([x, c, v, u], out)
    xv, cv = RNG.integers(0, 5, (6, 4)), RNG.integers(0, 3, 4)
    vv, uv = RNG.standard_normal((4, 6)), RNG.standard_normal(6)
    want = np.bincount((xv + cv[None, :]).ravel(), weights=(vv * uv[None, :] + 1.0).ravel())
    _same(fused(xv, cv, vv, uv), want)
    _assert_same_outcome(fused, unfused, xv, cv, vv[:3], uv)  # 24 values, 18 weights


def test_three_dimensions_small_ints_and_the_scatter_form():
    a, b = at.vector("a", dtype="int8"), at.vector("b", dtype="int8")
    c = at.tensor(dtype="int8", shape=(None, None, None))
    x = (a[:, None, None] + b[None, :, None] + c).ravel()  # int8 sums wrap
    fused, unfused = _fused([a, b, c], bincount(x))
    av, bv = np.array([0, 100], "int8"), np.array([0, 27, 1], "int8")
    cv = RNG.integers(0, 3, (2, 3, 4)).astype("int8")
    _assert_same_outcome(fused, unfused, av, bv, cv)  # 100 + 27 + 2 wraps: negative, the same error
    _assert_same_outcome(fused, unfused, av, bv[[0, 2, 2]], cv)
    got = fused(av, bv[[0, 2, 2]], cv)  # int8 counts, as Aesara's bincount of int8 x gives
    np.testing.assert_array_equal(
        got, np.bincount((av[:, None, None] + bv[[0, 2, 2]][None, :, None] + cv).ravel()).astype(got.dtype))
    # The scatter-add form: onto zeros of n, a negative index wraps once.
    base, idx = at.lvector("base"), at.lmatrix("idx")
    g = at.dvector("g")
    scat = at.inc_subtensor(at.zeros(12)[(base[:, None] + idx).ravel()], (g[:, None] + idx * 0.5).ravel())
    fused, unfused = _fused([base, idx, g], scat)
    bv2, iv = np.array([0, -6]), RNG.integers(0, 6, (2, 7))
    gv = RNG.standard_normal(2)
    want = np.zeros(12)
    np.add.at(want, (bv2[:, None] + iv).ravel(), (gv[:, None] + iv * 0.5).ravel())
    _same(fused(bv2, iv, gv), want)
    iv[1, 6] = -7  # -13 is outside [-12, 12)
    _assert_same_outcome(fused, unfused, bv2, iv, gv)


def test_gradient_of_broadcast_weights_and_the_python_implementation():
    x = at.lmatrix("x")
    w, v = at.dvector("w"), at.dmatrix("v")
    out = bincount(x.ravel(), weights=(w[:, None] * v).ravel(), minlength=6)
    r = at.dvector("r")
    cost = (out * r).sum()
    grads = [aesara.function([x, w, v, r], aesara.grad(cost, [w, v]), mode=m) for m in (FUSED, UNFUSED)]
    xv, wv, vv, rv = RNG.integers(0, 6, (3, 5)), RNG.standard_normal(3), RNG.standard_normal((3, 5)), RNG.standard_normal(6)
    for got, want in zip(grads[0](xv, wv, vv, rv), grads[1](xv, wv, vv, rv)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    py = aesara.function([x, w, v], out, mode=Mode(linker="py", optimizer=FUSED.optimizer))
    assert any(isinstance(n.op, FusedBincount) for n in py.maker.fgraph.toposort())
    _same(py(xv, wv, vv), np.bincount(xv.ravel(), weights=(wv[:, None] * vv).ravel(), minlength=6))
    with pytest.raises(ValueError):
        py(xv, wv[:2], vv)


@pytest.mark.long
@pytest.mark.parametrize("seed", range(10))
def test_random_broadcast_shapes_against_unfused(seed):
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(2, 4))
    shape = tuple(int(s) for s in rng.integers(0 if seed == 0 else 1, 6, nd))
    pats = [tuple(bool(b) for b in rng.random(nd) < 0.4) for _ in range(2)]
    a = at.tensor(dtype="int64", shape=tuple(1 if p else None for p in pats[0]))
    b = at.tensor(dtype="int64", shape=tuple(1 if p else None for p in pats[1]))
    wv_t = at.tensor(dtype="float64", shape=(None,) * nd)
    out = bincount((a * 3 + b).ravel(), weights=(wv_t * 2.0).ravel(), minlength=4)
    # (Without broadcasting, fusion_views moves the flatten onto the inputs.)
    fused = aesara.function([a, b, wv_t], out, mode=FUSED)
    unfused = aesara.function([a, b, wv_t], out, mode=UNFUSED)
    assert any(isinstance(n.op, FusedBincount) for n in fused.maker.fgraph.toposort())
    av = rng.integers(0, 3, tuple(1 if p else s for p, s in zip(pats[0], shape)))
    bv = rng.integers(0, 3, tuple(1 if p else s for p, s in zip(pats[1], shape)))
    wv = rng.standard_normal(shape)
    _assert_same_outcome(fused, unfused, av, bv, wv)
