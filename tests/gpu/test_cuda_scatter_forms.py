"""Scatter forms of issue 30 on GPU data: several index arrays (item 1), host indices (item 3).

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


def test_confusion_matrix_of_gpu_weights():
    w = gpu.shared(np.array([1.0, 2.0, -0.0, 4.0, np.nan, 1.0], dtype="float32"), name="w")
    y, p = at.lvectors("y", "p")
    f = aesara.function([y, p], at.inc_subtensor(at.zeros((3, 3), dtype="float32")[y, p], w))
    ops = names(f)
    assert "GpuScatterAdd" in ops and "LinearIndex" in ops and "ScatterAdd" not in ops, ops
    yv, pv = np.array([0, 2, 2, -1, 1, 0]), np.array([0, -3, 0, 1, 1, 0])
    want = np.zeros((3, 3), dtype="float32")
    np.add.at(want, (yv, pv), w.get_value())
    got = to_host(f(yv, pv))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(IndexError, match=r"index 3 at position 1 .* axis 1 with size 3"):
        f(np.array([0, 1]), np.array([0, 3]))


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
        f(np.array([0, 1]), np.array([0, 3]))
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
    A, B = gpu.shared(Av, name="A"), gpu.shared(Bv, name="B")
    f = aesara.function([], bincount((A * 3 + B).flatten()))
    ops = names(f)
    assert "GpuFusedBincount" in ops and "GpuElemwise" not in ops, ops
    np.testing.assert_array_equal(to_host(f()), np.bincount((Av * 3 + Bv).ravel()))
