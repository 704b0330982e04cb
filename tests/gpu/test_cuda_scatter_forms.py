"""Scatter forms of issue 30 on GPU data: several index arrays (item 1), sets (item 2), host indices (item 3).

``LinearIndex`` checks the indices and makes them flat rows on the host
(one pass, one copy of the rows to the GPU); the rows of the reshaped GPU
base are added by ``GpuScatterAdd`` and gathered by
``GpuAdvancedSubtensor1``.  Compared with ``np.add.at`` and numpy indexing.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, WHY, to_host  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


def names(f):
    return [type(n.op).__name__ for n in f.maker.fgraph.toposort()]


def strs(f):
    return [str(n.op) for n in f.maker.fgraph.toposort()]


def test_confusion_matrix_of_gpu_weights():
    w = gpu.shared(np.array([1.0, 2.0, -0.0, 4.0, np.nan, 1.0], dtype="float32"), name="w")
    y, p = at.lvectors("y", "p")
    f = aesara.function([y, p], at.inc_subtensor(at.zeros((3, 3), dtype="float32")[y, p], w))
    ops = names(f)
    # the host index arrays are copied at the start of the call, LinearIndex runs on the GPU (issue 39)
    assert "GpuScatterAdd" in ops and "GpuLinearIndex" in strs(f) and "ScatterAdd" not in ops, ops
    yv, pv = np.array([0, 2, 2, -1, 1, 0]), np.array([0, -3, 0, 1, 1, 0])
    want = np.zeros((3, 3), dtype="float32")
    np.add.at(want, (yv, pv), w.get_value())
    got = to_host(f(yv, pv))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(IndexError, match=r"index 3 at position 1 .* axis 1 with size 3"):
        f(np.array([0, 1, 0, 0, 0, 0]), np.array([0, 3, 0, 0, 0, 0]))  # as many as the weights


@pytest.mark.parametrize("width", [1, 2])
def test_scatter_add_onto_constant_zeros_stays_on_the_gpu(width):
    """Onto zeros of a constant shape: for one column Aesara asserts the
    increments' shape (SpecifyShape, lifted through the table), and the
    result, whose static shape the host graph found, needs no copy back to
    the GPU; np.add.at's values, -0.0 and NaN included."""
    from aesara_bincount_core.gpu.transfer import gpu_from_host
    from lift_cases import inner_transfers

    idx = np.array([1, 4, 4, -1, 0, 2])
    inc = np.array([1.5, -0.0, 2.0, np.nan, -3.0, 0.25], "float32").repeat(width).reshape(6, width)
    out = at.inc_subtensor(at.zeros((5, width), dtype="float32")[gpu.shared(idx)], gpu.shared(inc))
    f = aesara.function([], gpu_from_host(out))
    ops = names(f)
    assert "GpuScatterAdd" in ops and "ScatterAdd" not in ops and not inner_transfers(f), ops
    assert "HostFromGpu" not in ops and "GpuFromHost" not in ops, ops
    want = np.zeros((5, width), "float32")
    np.add.at(want, idx, inc)
    got = to_host(f())
    np.testing.assert_array_equal(got, want)
    assert got.shape == (5, width)


def test_update_of_a_gpu_matrix_in_place_and_errors_write_nothing():
    W = gpu.shared(np.zeros((4, 3), dtype="float32"), name="W")
    r, c = at.lvectors("r", "c")
    g = at.fvector("g")
    f = aesara.function([r, c, g], [], updates={W: at.inc_subtensor(W[r, c], g)})
    ops = names(f)
    assert "GpuScatterAdd" in ops and "HostFromGpu" not in ops, ops
    rv, cv, gv = np.array([1, 1, -1]), np.array([2, 2, 0]), np.array([1.0, 2.0, 4.0], dtype="float32")
    f(rv, cv, gv)
    want = np.zeros((4, 3), dtype="float32")
    np.add.at(want, (rv, cv), gv)
    np.testing.assert_array_equal(W.get_value(), want)
    with pytest.raises(IndexError, match="axis 0 with size 4"):
        f(np.array([4]), np.array([0]), gv[:1])
    np.testing.assert_array_equal(W.get_value(), want)


def test_gradient_of_picked_log_probabilities_of_a_gpu_matrix():
    Pv = np.linspace(0.1, 0.9, 12).reshape(4, 3)
    P = gpu.shared(Pv, name="P")
    y = at.lvector("y")
    loss = -at.log(P)[at.arange(y.shape[0]), y].sum()
    f = aesara.function([y], aesara.grad(loss, P))
    # Zeros shaped like the GPU P: the scatter-add runs on the GPU, its rows copied
    # there, not the dense (n, K) result.
    ops = names(f)
    assert "GpuScatterAdd" in ops and "ScatterAdd" not in ops and "HostFromGpu" not in ops, ops
    yv = np.array([0, 2, -1, 1])
    want = np.zeros_like(Pv)
    np.add.at(want, (np.arange(4), yv), -1.0)
    np.testing.assert_allclose(to_host(f(yv)), want / Pv, rtol=1e-12)


# -- a 1-D scatter-add of GPU increments with host indices (item 3) ------------------
# grad(sum(B[i] ** 2), B), B a GPU vector, i a host lvector (a BPR recommender):
# the indices are copied to the GPU once, not HostFromGpu, Bincount, GpuFromHost.


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_of_a_gpu_vector_with_host_indices_stays_on_the_gpu(dtype):
    Bv = np.arange(6, dtype=dtype) - 2
    B = gpu.shared(Bv.copy(), name="B")
    i = at.lvector("i")
    f = aesara.function([i], aesara.grad((B[i] ** 2).sum(), B))
    ops = names(f)
    assert any(o.startswith("Gpu") and o.endswith("Bincount") for o in ops), ops
    assert "Bincount" not in ops and "HostFromGpu" not in ops, ops
    assert ops.count("GpuFromHost") == 1, ops  # the one copy of i
    iv = np.array([0, 5, 5, -1, 2, -6])
    want = np.zeros(6, dtype=dtype)
    np.add.at(want, iv, 2 * Bv[iv])
    got = to_host(f(iv))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(IndexError, match="out of bounds"):
        f(np.array([0, 6]))
    np.testing.assert_array_equal(B.get_value(), Bv)
    np.testing.assert_allclose(to_host(f(np.array([], dtype="int64"))), np.zeros(6, dtype=dtype))


def test_update_of_a_gpu_vector_with_host_indices():
    """The sparse SGD step ``B <- B - lr * grad``: no copy of B to the host."""
    B = gpu.shared(np.ones(5, dtype="float32"), name="B")
    i = at.ivector("i")
    cost = (B[i] ** 2).sum()
    f = aesara.function([i], [], updates={B: B - np.float32(0.25) * aesara.grad(cost, B)})
    ops = names(f)
    assert "Bincount" not in ops and "ScatterAdd" not in ops, ops
    f(np.array([1, 1, 4], dtype="int32"))
    want = np.ones(5, dtype="float32")
    want[1] -= 0.25 * 4
    want[4] -= 0.25 * 2
    np.testing.assert_allclose(B.get_value(), want)


# -- the multi-index gather W[rows, cols] of GPU data (item 1) -------------------------


def test_multi_index_gather_of_a_gpu_matrix_runs_on_the_gpu():
    Wv = np.arange(24, dtype="float32").reshape(4, 3, 2) - 5
    W = gpu.shared(Wv, name="W")
    r, c = at.lvectors("r", "c")
    f = aesara.function([r, c], W[r, c] * 2)
    ops = names(f)
    assert "GpuAdvancedSubtensor1" in ops and "AdvancedSubtensor" not in ops, ops
    rv, cv = np.array([0, 3, -1, 3]), np.array([2, -3, 0, 2])
    np.testing.assert_array_equal(to_host(f(rv, cv)), Wv[rv, cv] * 2)
    with pytest.raises(IndexError, match=r"index 3 at position 1 .* axis 1 with size 3"):
        f(np.array([0, 1, 0, 0, 0, 0]), np.array([0, 3, 0, 0, 0, 0]))  # as many as the weights
    g = aesara.function([r, c], W[r[:, None], c[None, :], :])  # 2-D broadcast indices
    np.testing.assert_array_equal(to_host(g(rv[:2], cv)), Wv[rv[:2, None], cv[None, :], :])
    e = np.array([], dtype="int64")
    assert to_host(f(e, e)).shape == (0, 2)


def test_gradient_of_a_sum_of_a_gpu_vector_gather_with_host_indices():
    """grad(B[i].sum(), B): constant increments onto zeros as long as B, on the GPU."""
    B = gpu.shared(np.zeros(5, dtype="float32"), name="B")
    i = at.lvector("i")
    f = aesara.function([i], aesara.grad(B[i].sum(), B) * 3)
    ops = names(f)
    assert "Bincount" not in ops and "GpuBincount" in ops, ops  # the result to the host at the end
    iv = np.array([4, -1, 0, 2])
    want = np.zeros(5, dtype="float32")
    np.add.at(want, iv, 3.0)
    np.testing.assert_array_equal(to_host(f(iv)), want)


# -- the GPU fusion through a flatten (item 4) ---------------------------------------


def test_gpu_fusion_through_a_flatten_of_an_elementwise_x():
    from aesara.tensor.extra_ops import bincount

    Av = np.arange(12, dtype="int64").reshape(3, 4) % 5
    Bv = (np.arange(12, dtype="int64").reshape(3, 4) * 7) % 3
    # static shapes that show A and B alike (else an axis of length 1 at run time may broadcast)
    A, B = gpu.shared(Av, name="A", shape=Av.shape), gpu.shared(Bv, name="B", shape=Bv.shape)
    f = aesara.function([], bincount((A * 3 + B).flatten()))
    ops = names(f)
    assert "GpuFusedBincount" in ops and "GpuElemwise" not in ops, ops
    np.testing.assert_array_equal(to_host(f()), np.bincount((Av * 3 + Bv).ravel()))
    # An axis of length 1 when the function runs broadcasts, as in Aesara's Elemwise.
    Cv = np.arange(3, dtype="int64").reshape(3, 1)
    C = gpu.shared(Cv, name="C")
    g = aesara.function([], bincount((C * 3 + B).flatten()))
    np.testing.assert_array_equal(to_host(g()), np.bincount((Cv * 3 + Bv).ravel()))


# -- integer-index sets of GPU data (item 2): GpuScatterSet ------------------------


def numpy_set(base, index, values):
    want = base.copy()
    want[index] = values  # numpy: the last of duplicate indices wins
    return want


def same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "bool", "uint16"])
def test_update_of_a_gpu_matrix_last_one_wins(dtype):
    rng = np.random.default_rng(0)
    Wv = (rng.integers(0, 2, (7, 5)) if dtype == "bool" else rng.integers(-100, 100, (7, 5))).astype(dtype)
    W = gpu.shared(Wv.copy(), name="W")
    idx = at.lvector("idx")
    v = at.matrix("v", dtype=dtype)
    f = aesara.function([idx, v], [], updates={W: at.set_subtensor(W[idx], v)})
    ops = names(f)
    assert "GpuScatterSet" in ops and "HostFromGpu" not in ops and "ScatterSet" not in ops, ops
    (node,) = [n for n in f.maker.fgraph.toposort() if type(n.op).__name__ == "GpuScatterSet"]
    assert node.op.inplace, "the update writes into W"
    iv = np.array([3, -1, 3, 0, 6, 3, -7], dtype="int64")  # duplicates, negative: 6 == -1, 0 == -7
    vv = rng.integers(-128, 127, (7, 5)).astype(dtype)
    f(iv, vv)
    want = numpy_set(Wv, iv, vv)
    same_bits(W.get_value(), want)
    # Out of range: IndexError, nothing written, W intact.
    with pytest.raises(IndexError, match="out of bounds"):
        f(np.array([1, 7]), vv[:2])
    same_bits(W.get_value(), want)
    with pytest.raises(IndexError):
        f(np.array([-8]), vv[:1])
    same_bits(W.get_value(), want)
    # Empty indices: nothing changes.
    f(np.array([], dtype="int64"), vv[:0])
    same_bits(W.get_value(), want)


def test_signed_zeros_nan_and_broadcast_values():
    Wv = np.arange(12, dtype="float64").reshape(4, 3)
    W = gpu.shared(Wv.copy(), name="W")
    idx = at.lvector("idx")
    row = at.dvector("row")
    f = aesara.function([idx, row], at.set_subtensor(W[idx], row))  # row broadcast to (N, 3)
    assert "GpuScatterSet" in names(f)
    nan = np.frombuffer(np.uint64(0x7FF8000000000123).tobytes(), dtype="float64")[0]
    rv = np.array([-0.0, nan, 2.5])
    iv = np.array([2, 0, 2])
    same_bits(to_host(f(iv, rv)), numpy_set(Wv, iv, rv))
    same_bits(W.get_value(), Wv)  # not an update: W is not written
    s = at.dscalar("s")
    g = aesara.function([idx, s], at.set_subtensor(W[idx], s))
    same_bits(to_host(g(np.array([1, 1, -4]), -0.0)), numpy_set(Wv, [1, 1, -4], -0.0))
    m = at.dmatrix("m")
    h = aesara.function([idx, m], [], updates={W: at.set_subtensor(W[idx], m)})
    assert "GpuScatterSet" in names(h)
    with pytest.raises(ValueError, match="broadcast"):
        h(np.array([0, 1]), np.zeros((3, 3)))  # values of 3 rows for 2 indices
    same_bits(W.get_value(), Wv)


def test_two_index_arrays_onto_a_gpu_matrix_in_place():
    rng = np.random.default_rng(1)
    Mv = rng.standard_normal((5, 4)).astype("float32")
    M = gpu.shared(Mv.copy(), name="M")
    r, c = at.lvectors("r", "c")
    v = at.fvector("v")
    f = aesara.function([r, c, v], [], updates={M: at.set_subtensor(M[r, c], v)})
    ops = names(f)
    assert "GpuScatterSet" in ops and "GpuLinearIndex" in strs(f) and "HostFromGpu" not in ops, ops
    rv, cv = np.array([1, 4, 1, -5, 0]), np.array([2, -1, 2, 3, 3])  # (1,2) twice, (0,3) twice
    vv = np.array([1.0, -0.0, np.nan, 4.0, 5.0], dtype="float32")
    f(rv, cv, vv)
    want = numpy_set(Mv, (rv, cv), vv)
    same_bits(M.get_value(), want)
    with pytest.raises(IndexError, match="axis 1 with size 4"):
        f(np.array([0, 1]), np.array([0, 4]), vv[:2])  # out of range on the second axis only
    same_bits(M.get_value(), want)
    f(np.array([], dtype="int64"), np.array([], dtype="int64"), vv[:0])
    same_bits(M.get_value(), want)


def test_many_duplicates_across_blocks_last_wins():
    """More positions than one block holds, all naming a few rows."""
    n, V = 5000, 3
    Wv = np.zeros((V, 2), dtype="int64")
    W = gpu.shared(Wv.copy(), name="W")
    idx = at.lvector("idx")
    v = at.lmatrix("v")
    f = aesara.function([idx, v], at.set_subtensor(W[idx], v))
    iv = np.random.default_rng(2).integers(-V, V, n)
    vv = np.arange(2 * n, dtype="int64").reshape(n, 2)
    same_bits(to_host(f(iv, vv)), numpy_set(Wv, iv, vv))
