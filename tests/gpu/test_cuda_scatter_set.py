"""The integer-index set of GPU data runs on the GPU (issue 30, item 2): ``GpuScatterSet``.

``set_subtensor(W[idx], v)`` and ``set_subtensor(M[rows, cols], v)`` of a
GPU array: ``LinearIndex`` checks the indices on the host, the rows go to the
GPU, ``GpuScatterSet`` writes them (the last one in index order wins), and
the base never comes to the host.  Compared with numpy's assignment.
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
    assert "GpuScatterSet" in ops and "LinearIndex" in ops and "HostFromGpu" not in ops, ops
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
