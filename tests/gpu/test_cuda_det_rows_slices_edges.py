"""Attacks on the hot buckets' slices and the streamed adds, part two (part
one, with the helpers, is ``test_cuda_det_rows_slices_attack.py``): two hot
buckets at once and other emulated devices in random block order (each in
a process of its own); few rows (fewer owners than blocks); buckets of
40 x 512 +- a few entries (the streamed rounds' edges) and of 4,095 / 4,096
(the hot minimum); bad indices of every dtype in a hot bucket; idx of two
dimensions; one compiled function whose table changes shape; increments
that are views of the table updated in place; below the pre-pass,
det_add_staged's 1, 2 and 4 columns a lane.  Each result is compared with
np.add.at bit for bit (NaN as NaN); a bad index must raise IndexError and
leave the table bit-identical.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from gpu_cases import AVAILABLE, EMULATED, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from test_cuda_det_rows_slices_attack import SORT_MIN, hot_idx, incs, owner_range, sorted_path  # noqa: E402
from test_cuda_deterministic import assert_np_add_at_bits, assert_rows_bits, compile_more  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


TWO_HOT = r"""
import os, sys, ctypes
sys.path.insert(0, {here!r}); sys.path.insert(0, os.path.dirname({here!r}))
import numpy as np
import aesara.tensor as at
import aesara_bincount
from aesara_bincount import gpu
from aesara_bincount_core.gpu.transfer import gpu_from_host
from gpu_cases import cupy
from test_cuda_deterministic import assert_np_add_at_bits, compile_more, edge_values
lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
lib.fake_cuda_counter.restype = ctypes.c_longlong
for dtype, D, V, hot in {cases!r}:
    rng = np.random.default_rng(D)
    N = 40_000
    idx = rng.integers(-V, V, N)
    r = rng.random(N)
    idx[r < 0.4] = hot[0]
    idx[(r >= 0.4) & (r < 0.8)] = hot[1]
    inc = edge_values(rng, N * D, dtype).reshape(N, D)
    base = rng.standard_normal((V, D)).astype(dtype)
    f = compile_more(gpu_from_host(at.inc_subtensor(gpu.shared(base)[gpu.shared(idx)], gpu.shared(inc))))
    got = cupy().asnumpy(f())
    grid = int(lib.fake_cuda_counter(12))
    expected = base.copy()
    np.add.at(expected, idx, inc)
    assert_np_add_at_bits(got, expected)
    print("OK", dtype, D, grid)
"""


@pytest.mark.skipif(not EMULATED, reason="sets the emulation's multiprocessors")
def test_two_hot_buckets_with_more_owners():
    """FAKE_CUDA_SMS=4: more owners, so two buckets of 40% each are hot."""
    cases = [("float32", 9, 3000, [10, -1]), ("float64", 65, 800, [0, 401]), ("float32", 8, 3000, [-3000, 2999])]
    code = textwrap.dedent(TWO_HOT).format(here=HERE, cases=cases)
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, FAKE_CUDA_SMS="4"),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines = [line.split() for line in proc.stdout.splitlines() if line.startswith("OK")]
    assert len(lines) == len(cases), proc.stdout
    assert int(lines[0][3]) > 8 and int(lines[1][3]) > 8  # more owners than 4, times slices


# -- few rows: fewer owners than blocks ---------------------------------------------------------
@pytest.mark.parametrize("V,dtype,D", [(3, "float32", 8), (4, "float32", 9), (5, "float64", 20),
                                       (7, "float32", 65), (3, "float64", 20)])
def test_few_rows_hot_row(V, D, dtype):
    N = SORT_MIN + 29
    rng = np.random.default_rng(V * 10 + D)
    idx = hot_idx(rng, V, N, [V // 2], 0.8)
    inc = incs(rng, N, (D,), dtype)
    base = rng.standard_normal((V, D)).astype(dtype)
    base[V // 2] = -0.0
    assert_rows_bits(base, idx, inc, gpu.shared(idx), gpu.shared(inc), "in place")


# -- a bucket's size at the rounds' and chunks' edges ---------------------------------------------
# every edge on the streamed widths (8 float32, 4 float64), one on the staged ones
@pytest.mark.parametrize("extra,dtype,D", [
    *[(e, dt, d) for e in (-1, 1, 513) for dt, d in (("float32", 8), ("float64", 4))],
    (-1, "float64", 9), (1, "float32", 40)])
def test_hot_bucket_sizes_at_round_edges(extra, D, dtype):
    """Owner 1's bucket holds exactly 40 x 512 + extra entries (rounds of
    512 of the streamed adds, chunks of 1,024), most on one row, the first
    and last of them at positions 0 and N - 1 of idx."""
    V, N = 1000, SORT_MIN + 400
    lo, hi = owner_range(V, 1)
    rng = np.random.default_rng(extra + 1000 + D)
    entries = 40 * 512 + extra
    outside = np.concatenate([np.arange(0, lo), np.arange(hi, V)])
    idx = outside[rng.integers(0, len(outside), N)]
    where = np.sort(rng.choice(np.arange(1, N - 1), entries - 2, replace=False))
    where = np.concatenate([[0], where, [N - 1]])
    mine = rng.integers(lo, hi, entries)
    mine[rng.random(entries) < 0.85] = lo + 3
    idx[where] = mine
    idx[rng.random(N) < 0.5] -= V  # half given negative
    assert ((idx % V >= lo) & (idx % V < hi)).sum() == entries
    inc = incs(rng, N, (D,), dtype)
    base = rng.standard_normal((V, D)).astype(dtype)
    base[lo + 3] = -0.0
    assert_rows_bits(base, idx, inc, gpu.shared(idx), gpu.shared(inc), "base")


@pytest.mark.parametrize("entries", [4095, 4096])
def test_hot_min_edge_wide_rows(entries):
    """1030 columns (9 column tiles: the pre-pass from 3,642 indices): a
    bucket of 4,095 entries is not hot, of 4,096 is."""
    V, D, N = 400, 1030, 4300
    lo, hi = owner_range(V, 2)
    rng = np.random.default_rng(entries)
    outside = np.concatenate([np.arange(0, lo), np.arange(hi, V)])
    idx = outside[rng.integers(0, len(outside), N)]
    where = rng.choice(N, entries, replace=False)
    idx[where] = np.where(rng.random(entries) < 0.9, hi - 1, rng.integers(lo, hi, entries))
    inc = incs(rng, N, (D,), "float32")
    base = rng.standard_normal((V, D)).astype("float32")
    assert_rows_bits(base, idx, inc, gpu.shared(idx), gpu.shared(inc), "in place")


# -- other devices, random block order, in a process of its own -------------------------------------
DEVICES = r"""
import os, sys
sys.path.insert(0, {here!r}); sys.path.insert(0, os.path.dirname({here!r}))
import numpy as np
import aesara.tensor as at
import aesara_bincount
from aesara_bincount import gpu
from aesara_bincount_core.gpu.transfer import gpu_from_host
from gpu_cases import cupy
from test_cuda_deterministic import assert_np_add_at_bits, compile_more, edge_values
for dtype, D, V, share in {cases!r}:
    rng = np.random.default_rng(D + V)
    N = 36_000
    idx = rng.integers(-V, V, N)
    idx[rng.random(N) < share] = V // 3
    inc = edge_values(rng, N * D, dtype).reshape(N, D)
    base = rng.standard_normal((V, D)).astype(dtype)
    f = compile_more(gpu_from_host(at.inc_subtensor(gpu.shared(base)[gpu.shared(idx)], gpu.shared(inc))))
    expected = base.copy()
    np.add.at(expected, idx, inc)
    for call in range(2):
        assert_np_add_at_bits(cupy().asnumpy(f()), expected)
    print("OK", dtype, D)
"""


@pytest.mark.skipif(not EMULATED, reason="sets the emulation's device")
@pytest.mark.parametrize("sms,runners", [("3", "3"), ("1", "2")])
def test_hot_slices_on_other_devices_random_block_order(sms, runners):
    """3 multiprocessors (6 owners: a bucket above a third is hot) or 1,
    blocks in a random order on several threads: np.add.at's bits."""
    cases = [("float32", 9, 2000, 0.5), ("float64", 65, 700, 0.6), ("float32", 8, 1500, 0.9)]
    code = textwrap.dedent(DEVICES).format(here=HERE, cases=cases)
    env = dict(os.environ, FAKE_CUDA_SMS=sms, FAKE_CUDA_RUNNERS=runners, FAKE_CUDA_BLOCK_ORDER="random")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stdout.count("OK") == len(cases), proc.stdout


# -- bad indices of every dtype inside a hot bucket ------------------------------------------
BAD = {  # dtype: (V, bad values)
    "int8": (100, [100, -101, 127, -128]),
    "uint8": (200, [200, 255]),
    "int16": (3000, [3000, -3001, 32767, -32768]),
    "uint16": (3000, [3000, 65535]),
    "int32": (3000, [2**31 - 1, -(2**31), -6000]),
    "uint32": (3000, [2**32 - 1, 2**31, 3000]),
    "int64": (3000, [2**63 - 1, -(2**63), -6000, 2**32]),
}


@pytest.mark.parametrize("idx_dtype", sorted(BAD))
def test_bad_index_of_every_dtype_in_a_hot_bucket(idx_dtype):
    V, bads = BAD[idx_dtype]
    D, N = 8, SORT_MIN + 101
    rng = np.random.default_rng(len(idx_dtype))
    idx = hot_idx(rng, V, N, [V // 2], 0.8, idx_dtype)
    base = rng.standard_normal((V, D)).astype("float32")
    table = gpu.shared(base.copy())
    gidx = gpu.shared(idx)
    inc = incs(rng, N, (D,), "float32")
    step = compile_more([], updates={table: at.inc_subtensor(table[gidx], gpu.shared(inc))})
    for k, bad in enumerate(bads):
        wrong = idx.copy()
        wrong[[N // 2, N - 1, 0][k % 3]] = np.array(bad).astype(idx_dtype)
        gidx.set_value(wrong)
        with pytest.raises(IndexError, match=str(bad)):
            step()
        assert table.get_value().tobytes() == base.tobytes(), bad
    gidx.set_value(idx)
    step()
    expected = base.copy()
    np.add.at(expected, idx.astype(np.int64), inc)
    assert_np_add_at_bits(table.get_value(), expected)


# -- idx of two dimensions, the table's shape changing between calls --------------------------------
@pytest.mark.parametrize("view", ["contiguous", "transposed"])
def test_two_dim_idx_hot_row(view):
    """idx of shape (180, 200) (or its transpose, a view), hot; the
    increments of shape idx.shape + (D,)."""
    V, D = 700, 9
    rng = np.random.default_rng(len(view))
    idx = hot_idx(rng, V, 180 * 200, [-7], 0.75).reshape(180, 200)
    inc = incs(rng, idx.size, (D,), "float32").reshape(*idx.shape, D)
    base = rng.standard_normal((V, D)).astype("float32")
    if view == "transposed":
        gidx = gpu.shared(np.ascontiguousarray(idx.T)).T
    else:
        gidx = gpu.shared(idx)
    assert_rows_bits(base, idx, inc, gidx, gpu.shared(inc), "base")


def test_one_function_table_shape_changes():
    """The same in-place function while the table's rows and width change:
    hot on 1,000 rows of 9, on 4 rows of 9 (a row an owner), on 5 rows of
    65, on 2,000 rows of 8, on one row of 4 (no pre-pass)."""
    rng = np.random.default_rng(4)
    table = gpu.shared(np.zeros((10, 9), "float32"))
    gidx = gpu.shared(np.zeros(1, np.int64))
    ginc = gpu.shared(np.zeros((1, 9), "float32"))
    step = compile_more([], updates={table: at.inc_subtensor(table[gidx], ginc)})
    for V, D, hot in ((1000, 9, [0]), (4, 9, [-1]), (5, 65, [2]), (2000, 8, [1999]), (1, 4, [0]), (1000, 9, [500])):
        N = SORT_MIN + 123
        idx = hot_idx(rng, V, N, hot, 0.8)
        inc = incs(rng, N, (D,), "float32")
        base = rng.standard_normal((V, D)).astype("float32")
        table.set_value(base)
        gidx.set_value(idx)
        ginc.set_value(inc)
        step()
        expected = base.copy()
        np.add.at(expected, idx, inc)
        assert_np_add_at_bits(table.get_value(), expected)


# -- increments that alias the table ----------------------------------------------------------
@pytest.mark.parametrize("dtype,D", [("float32", 8), ("float64", 9), ("float32", 65)])
def test_in_place_increments_view_of_the_table(dtype, D):
    """table[idx] += table[1:N + 1] (a view of the table being updated),
    then the result's rows [idx2] += its own rows reversed: np.add.at's
    bits from the old values."""
    V, N = SORT_MIN + 200, SORT_MIN + 50
    rng = np.random.default_rng(D)
    idx = hot_idx(rng, V, N, [1, V - 1], 0.7)
    base = incs(rng, V, (D,), dtype)
    table = gpu.shared(base.copy())
    gidx = gpu.shared(idx)
    step = compile_more([], updates={table: at.inc_subtensor(table[gidx], table[1:N + 1])})
    step()
    expected = base.copy()
    np.add.at(expected, idx, base[1:N + 1].copy())
    assert_np_add_at_bits(table.get_value(), expected)
    idx2 = idx[::-1].copy()
    gidx.set_value(idx2)
    step2 = compile_more([], updates={table: at.inc_subtensor(table[gidx], table[::-1][:N])})
    before = table.get_value()
    step2()
    np.add.at(before_exp := before.copy(), idx2, before[::-1][:N].copy())
    assert_np_add_at_bits(table.get_value(), before_exp)


# -- below the pre-pass: det_add_staged's widths (one, two and four columns a lane) -------------------
@pytest.mark.parametrize("D,dtype", [(9, "float32"), (32, "float64"), (33, "float32"), (129, "float64"),
                                     (33, "float64")])
def test_below_the_pre_pass_mixed_steps(D, dtype):
    """Few rows, so that most steps of 32 matches mix rows, and a hot row:
    no pre-pass (N x column tiles at most SORT_MIN)."""
    V, N = 50, 3000
    assert not sorted_path(N, D)
    rng = np.random.default_rng(D + 5)
    idx = hot_idx(rng, V, N, [0, -1], 0.3)
    inc = incs(rng, N, (D,), dtype)
    base = rng.standard_normal((V, D)).astype(dtype)
    base[0] = -0.0
    assert_rows_bits(base, idx, inc, gpu.shared(idx), gpu.shared(inc), "in place")
