"""The bucket pre-pass of the deterministic scatter-add of rows (issue 31):
``deterministic="more"`` with more than ``BC_CUDA_ROWS_DET_SORT_MIN``
indices times column tiles, where the positions of idx are first sorted,
stably, by the block that owns their row
(``c_code/cuda/scatter_add_det_bucket.cuh``).

Through ``aesara.function`` on GPU shared variables: np.add.at's bits (each
row gets its increments in index order, each add rounded in the output
dtype) onto zeros, onto a base and in place, with hot rows, rows wider than
one column tile, negative indices, broadcast increments, -0.0, subnormals,
NaN and inf; the path taken (the fake driver's launches, on the
emulation); bad indices; an empty idx.  The 20-call check across thread
counts and block orders is in ``test_cuda_deterministic.py`` (the case
``rows_many`` of ``det_cases.py``).
"""
import ctypes
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, EMULATED, WHY, cupy  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.cuda import sources  # noqa: E402
from aesara_bincount_core.gpu.transfer import gpu_from_host  # noqa: E402
from test_cuda_deterministic import assert_np_add_at_bits, assert_rows_case, compile_more, edge_values  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
SORT_MIN = sources.header_constants("cuda/kernel_defs.h", "BC_CUDA_ROWS_DET_")["SORT_MIN"]
TILE_COLUMNS = 32 * sources.header_constants("cuda/kernel_defs.h", "BC_CUDA_ROWS_")["TILE"]


def column_tiles(width):
    return -(-width // TILE_COLUMNS)


CASES = {  # name: (rows V, row width D, indices N, hot rows, their share of the indices)
    # a hot row (three indices in ten), 100,000 rows, narrow rows
    "hot row": (100_000, 8, SORT_MIN + 5000, [7], 0.3),
    # three hot rows (one given as -1), rows of three column tiles (300)
    "wide rows": (500, 300, SORT_MIN // 3 + 700, [0, 1, -1], 0.5),
    # no hot row, few rows per block
    "spread": (300, 3, SORT_MIN + 1, [], 0.0),
    # every index on rows 0-9 of 5,000: the other blocks' buckets are empty
    "empty buckets": (5000, 3, SORT_MIN + 1, list(range(10)), 1.0),
}


def launches():
    """The fake driver's count of kernel launches."""
    out = (ctypes.c_longlong * 8)()
    ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"]).fake_cuda_counters(out)
    return int(out[0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("onto", ["zeros", "base", "in place"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_sorted_rows_are_np_add_at_bit_for_bit(case, onto, dtype):
    V, D, N, hot, share = CASES[case]
    assert N * column_tiles(D) > SORT_MIN  # the pre-pass is taken
    assert_rows_case(V, D, N, hot, share, onto, dtype, seed=len(case) + D)


def test_sorted_rows_broadcast_increments():
    """One row added at every index, and one value for every element."""
    V, D, N = 2000, 5, SORT_MIN + 3
    rng = np.random.default_rng(5)
    idx = rng.integers(-V, V, N)
    idx[::4] = 3
    base = rng.standard_normal((V, D)).astype("float32")
    table = gpu.shared(base)
    for inc in (edge_values(rng, D, "float32"), np.float32(0.1)):
        f = compile_more(gpu_from_host(at.inc_subtensor(table[gpu.shared(idx)], inc)))
        expected = base.copy()
        np.add.at(expected, idx, inc)
        assert_np_add_at_bits(cupy().asnumpy(f()), expected)


@pytest.mark.skipif(not EMULATED, reason="reads the fake driver's counters")
@pytest.mark.parametrize("width", [4, 200])
def test_the_threshold_chooses_the_pre_pass_from_sizes(width):
    """Four more launches (count, reduce, scan, scatter) past the threshold
    than at it; the same bits either way (np.add.at's)."""
    V = 700
    most = SORT_MIN // column_tiles(width)
    rng = np.random.default_rng(width)
    counts = []
    for n in (most, most + 1):
        idx = rng.integers(-V, V, n)
        inc = edge_values(rng, n * width, "float64").reshape(n, width)
        f = compile_more(gpu_from_host(at.inc_subtensor(at.zeros((V, width))[gpu.shared(idx)], gpu.shared(inc))))
        f()
        before = launches()
        got = cupy().asnumpy(f())
        counts.append(launches() - before)
        expected = np.zeros((V, width))
        np.add.at(expected, idx, inc)
        assert_np_add_at_bits(got, expected)
    # at the threshold: the index check's two kernels and the adds (no stage)
    assert counts[0] <= 4 and counts[1] == counts[0] + 4, (counts, width)


def test_sorted_rows_bad_index_and_empty_idx_leave_the_base_as_it_was():
    V, D, N = 400, 4, SORT_MIN + 10
    rng = np.random.default_rng(9)
    base = rng.standard_normal((V, D))
    table = gpu.shared(base)
    idx = rng.integers(-V, V, N)
    idx[N - 5] = -V - 1
    gidx = gpu.shared(idx)
    step = compile_more([], updates={table: at.inc_subtensor(table[gidx], np.float64(1.0))})
    with pytest.raises(IndexError, match=str(-V - 1)):
        step()
    assert table.get_value().tobytes() == base.tobytes()
    idx[N - 5] = V - 1  # the same function, a good idx
    gidx.set_value(idx)
    step()
    expected = base.copy()
    np.add.at(expected, idx, 1.0)
    assert table.get_value().tobytes() == expected.tobytes()
    gidx.set_value(idx[:0])
    step()
    assert table.get_value().tobytes() == expected.tobytes()
