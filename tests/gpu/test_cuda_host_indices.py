"""Scatter-adds onto GPU data with host indices (issue 30, item 3), through ``aesara.function``.

``grad(sum(B[i] ** 2), B)`` with ``B`` a GPU vector and ``i`` a host lvector
(a BPR recommender) runs on the GPU: ``GpuBincount`` of the indices, copied
once (``GpuFromHost``), not ``HostFromGpu, Bincount, GpuFromHost``.
Compared with ``np.add.at``.
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
