"""Hot buckets of the deterministic scatter-add of rows (issue 31): past
``BC_CUDA_ROWS_DET_SORT_MIN``, a block whose bucket holds at least
``BC_CUDA_ROWS_DET_HOT_MIN`` entries and more than ``HOT_SHARE`` times the
mean (a hot row's) has its columns cut into slices (``bc_rows_det_slices``,
``c_code/cuda/scatter_add_det_defs.h``), each added by a block of its own; a
slice or a row of at most 32 bytes is added from a stream of rounds whose
next round loads while this one is added (``det_bucket_streamed``,
``c_code/cuda/scatter_add_det_bucket.cuh``).

Through ``aesara.function`` on GPU shared variables: np.add.at's bits onto
zeros, onto a base and in place, for hot rows first, last and in pairs,
slices of 1 to 40 columns, two-column and three-column rows without a hot
row (streamed, not sliced), float32 and float64 increments with -0.0,
subnormals, NaN and inf; the grid of the adds (owners times slices, from
the fake driver); a bad index in a hot bucket.  On the emulation, whose 4
blocks own rows, a bucket is hot above half of the indices.  The 20-call
check across thread counts and block orders takes ``rows_many`` of
``det_cases.py``, whose bucket of rows 0 and 1 is sliced.
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
DET = sources.header_constants("cuda/kernel_defs.h", "BC_CUDA_ROWS_DET_")
THREADS = sources.header_constants("cuda/kernel_defs.h", "BC_CUDA_")["THREADS"]
SORT_MIN = DET["SORT_MIN"]


def slices(width, itemsize):
    """bc_rows_det_slices: (slices, columns of each but the last)."""
    least = DET["STAGE_BYTES"] // (THREADS * DET["PER_THREAD"] * itemsize)
    each = -(-width // DET["SLICES"])
    each = max(1, -(-each // least) * least)
    return (-(-width // each) if width > each else 1), each


def test_slices_are_whole_sectors_and_cover_the_row():
    """Each slice but the last is a multiple of 32 bytes; at most SLICES of
    them; together they cover the row, the last one not empty."""
    for itemsize in (4, 8):
        for width in (1, 3, 8, 9, 31, 64, 65, 128, 300, 1000, 4097):
            s, each = slices(width, itemsize)
            assert 1 <= s <= DET["SLICES"], (width, itemsize)
            assert (each * itemsize) % 32 == 0, (width, itemsize)
            assert (s - 1) * each < width <= s * each or s == 1, (width, itemsize)
    assert slices(64, 4) == (8, 8) and slices(64, 8) == (8, 8) and slices(6, 8) == (2, 4)


CASES = {  # name: (rows V, row width D, indices N, hot rows, their share of the indices)
    # a hot row of 64 columns: eight slices of 8 (float32; float64: of 8)
    "hot row, 64 columns": (20_000, 64, SORT_MIN + 3000, [7], 0.7),
    # the last row hot, 9 columns: slices of 8 and 1 (float64: 4, 4, 1)
    "hot last row, 9 columns": (5000, 9, SORT_MIN + 1, [-1], 0.8),
    # two hot rows in one bucket, 300 columns: slices of 40, not streamed
    "two hot rows, 300 columns": (600, 300, SORT_MIN // 3 + 50, [0, 1], 0.9),
    # two columns, a hot row: one slice, streamed (one column onto zeros
    # stays on the CPU)
    "hot row, two columns": (9000, 2, SORT_MIN + 77, [2], 0.6),
    # three columns and no hot row: streamed, each warp's rows mixed
    "no hot row, three columns": (50_000, 3, SORT_MIN + 7, [], 0.0),
}


# each case in both dtypes, the three targets in turn (the emulated suite is
# CI's longest step)
@pytest.mark.parametrize("case,onto,dtype", [
    (case, ["zeros", "base", "in place"][(k + j) % 3], dtype)
    for k, case in enumerate(sorted(CASES)) for j, dtype in enumerate(["float32", "float64"])])
def test_hot_buckets_are_np_add_at_bit_for_bit(case, onto, dtype):
    V, D, N, hot, share = CASES[case]
    assert N * -(-D // 128) > SORT_MIN  # the pre-pass is taken
    assert_rows_case(V, D, N, hot, share, onto, dtype, seed=len(case) * 7 + D)


def last_grid():
    """The fake driver's grid of the last launch of a kernel of the package."""
    lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
    lib.fake_cuda_counter.restype = ctypes.c_longlong
    return int(lib.fake_cuda_counter(12))


@pytest.mark.skipif(not EMULATED, reason="reads the fake driver's grids")
@pytest.mark.parametrize("dtype,width", [("float32", 64), ("float64", 64), ("float64", 9), ("float32", 300)])
def test_the_adds_grid_is_owners_times_slices_and_bits_do_not_change(dtype, width):
    """The adds' grid is owners x slices (rows of 8 float32 columns take one
    slice, and as many owners); the sliced hot bucket and the same call
    onto rows of one slice give np.add.at's bits."""
    V, N = 3000, SORT_MIN + 11
    rng = np.random.default_rng(width)
    idx = rng.integers(-V, V, N)
    idx[rng.random(N) < 0.7] = 5
    grids = {}
    for d, dt in ((8, "float32"), (width, dtype)):
        inc = edge_values(rng, N * d, dt).reshape(N, d)
        f = compile_more(gpu_from_host(at.inc_subtensor(at.zeros((V, d), dtype=dt)[gpu.shared(idx)],
                                                        gpu.shared(inc))))
        got = cupy().asnumpy(f())
        grids[d] = last_grid()
        expected = np.zeros((V, d), dt)
        np.add.at(expected, idx, inc)
        assert_np_add_at_bits(got, expected)
    owners = grids[8]
    assert 1 <= owners <= V
    assert grids[width] == owners * slices(width, np.dtype(dtype).itemsize)[0] > owners


def test_bad_index_in_a_hot_bucket_leaves_the_base_as_it_was():
    V, D, N = 400, 24, SORT_MIN + 10
    rng = np.random.default_rng(3)
    base = rng.standard_normal((V, D)).astype("float32")
    table = gpu.shared(base)
    idx = rng.integers(-V, V, N)
    idx[rng.random(N) < 0.8] = -2
    idx[N - 1] = V
    gidx = gpu.shared(idx)
    inc = gpu.shared(edge_values(rng, N * D, "float32").reshape(N, D))
    step = compile_more([], updates={table: at.inc_subtensor(table[gidx], inc)})
    with pytest.raises(IndexError, match=str(V)):
        step()
    assert table.get_value().tobytes() == base.tobytes()
    idx[N - 1] = V - 1
    gidx.set_value(idx)
    step()
    expected = base.copy()
    np.add.at(expected, idx, inc.get_value())
    assert_np_add_at_bits(table.get_value(), expected)
