"""Attacks on the hot buckets' column slices and the streamed adds of the
deterministic scatter-add of rows (issue 31, ``bc_rows_det_slices``,
``rows_det`` and ``det_bucket_streamed`` of
``c_code/scatter_add_cuda_det_bucket.cuh``, ``det_add_lean`` of
``c_code/scatter_add_cuda_det.cuh``).

Every case is past ``BC_CUDA_ROWS_DET_SORT_MIN`` (the bucket pre-pass) and
is compared with np.add.at bit for bit (NaN as NaN): tables of three
dimensions whose row widths give odd slices (9, 65, 300, 1030 columns:
slices streamed and not, slices wider than one column tile); hot rows at
the first and last row of an owner's range, given negative, all indices on
one row; every integer dtype of idx with hot values (small tables for the
small dtypes); idx given reversed; bases given as strided, offset views;
increments given as strided views, transposed, broadcast along rows or
columns, or a scalar; -0.0, subnormals, NaN and inf in the hot row; an
in-place update run twice; one compiled function whose idx switches
between hot, spread, sorted, short, empty and bad (IndexError, the table
bit-identical) or whose table changes shape; bad indices of every dtype
in a hot bucket; idx of two dimensions; increments that are views of the
table updated in place; few rows (fewer owners than blocks); buckets of
40 x 512 +- a few entries (the streamed rounds' edges) and of 4,095 / 4,096
(the hot minimum); below the pre-pass, det_add_staged's 1, 2 and 4 columns
a lane; two hot buckets at once and other devices in random block order
(the emulation's multiprocessors, in a process of their own).

Checked against planted faults (each made tests here fail, then was
undone): slice blocks s > 0 skipping their last column; det_add_lean's
mixed step taking its matches highest lane first; det_bucket_streamed
dropping the last entry of a partial round; det_stage_add taking one
column a lane up to 40 columns.
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

from gpu_cases import AVAILABLE, EMULATED, WHY, cupy  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.cuda import sources  # noqa: E402
from aesara_bincount_core.gpu.transfer import gpu_from_host  # noqa: E402
from test_cuda_deterministic import assert_np_add_at_bits, assert_rows_bits, compile_more, edge_values  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
DET = sources.header_constants("bincount_cuda.h", "BC_CUDA_ROWS_DET_")
SORT_MIN = DET["SORT_MIN"]
TILE_COLUMNS = 32 * sources.header_constants("bincount_cuda.h", "BC_CUDA_ROWS_")["TILE"]
OWNERS = 4  # the emulation's blocks that own rows (2 multiprocessors)


def owner_range(V, b, owners=OWNERS):
    """det_share: the rows [lo, hi) of owner b."""
    each, extra = divmod(V, owners)
    lo = each * b + min(b, extra)
    return lo, lo + each + (1 if b < extra else 0)


def sorted_path(N, D):
    return N * -(-D // TILE_COLUMNS) > SORT_MIN


def hot_idx(rng, V, N, hot, share, dtype="int64"):
    idx = rng.integers(-V if np.dtype(dtype).kind == "i" else 0, V, N)
    on = rng.random(N) < share
    if hot:
        idx[on] = rng.choice(hot, int(on.sum()))
    return idx.astype(dtype)


def incs(rng, N, shape, dtype):
    inc = edge_values(rng, N * int(np.prod(shape)), dtype).reshape(N, *shape)
    flat = inc.reshape(N, -1)
    flat[rng.integers(0, N, 3), rng.integers(0, flat.shape[1], 3)] = [np.nan, np.inf, -np.inf]
    return inc


# -- tables of three dimensions: odd slices ---------------------------------------------------
TABLES = {  # name: (V, A, B, N, hot rows, share)
    # 9 columns: float32 slices 8 + 1, float64 4 + 4 + 1 (all streamed); hot
    # rows first and last of owner 1's range
    "3x3": (2000, 3, 3, SORT_MIN + 5, "edges1", 0.75),
    # 65 columns: float32 16 x 4 + 1 (the last streamed), float64 12 x 5 + 5
    "5x13": (600, 5, 13, SORT_MIN + 3, [-1], 0.8),
    # 300 columns: slices of 40 (float32 and float64), the last of 20
    "2x150": (300, 2, 150, SORT_MIN // 3 + 900, [0], 0.85),
    # 1030 columns: slices of 136 (two column tiles each, the second of 8), the last of 78
    "10x103": (200, 10, 103, 4 * SORT_MIN // 32 + 1500, [-200], 0.9),
}


def table_hot(V, hot):
    if hot == "edges1":
        lo, hi = owner_range(V, 1)
        return [lo, hi - 1 - V]  # first row of owner 1, last given negative
    return hot


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("onto", ["zeros", "base", "in place"])
@pytest.mark.parametrize("case", sorted(TABLES))
def test_three_dim_tables_odd_slices(case, onto, dtype):
    V, A, B, N, hot, share = TABLES[case]
    assert sorted_path(N, A * B)
    rng = np.random.default_rng(A * 100 + B)
    idx = hot_idx(rng, V, N, table_hot(V, hot), share)
    inc = incs(rng, N, (A, B), dtype)
    base = np.zeros((V, A, B), dtype) if onto == "zeros" else rng.standard_normal((V, A, B)).astype(dtype)
    if onto != "zeros":
        base[table_hot(V, hot)[0]] = -0.0  # a hot row starting at -0.0
    assert_rows_bits(base, idx, inc, gpu.shared(idx), gpu.shared(inc), onto)


# -- every dtype of idx, hot values -----------------------------------------------------------
IDX_DTYPES = {  # dtype: (V, hot rows)
    "int8": (100, [-100, -1]),
    "uint8": (250, [249, 0]),
    "int16": (3000, [-3000, 1499]),
    "uint16": (3000, [2999]),
    "int32": (3000, [750]),
    "uint32": (3000, [749]),
    "int64": (3000, [-751]),
}


@pytest.mark.parametrize("width,dtype", [(8, "float32"), (20, "float64")])
@pytest.mark.parametrize("idx_dtype", sorted(IDX_DTYPES))
def test_idx_dtypes_with_hot_values(idx_dtype, width, dtype):
    V, hot = IDX_DTYPES[idx_dtype]
    N = SORT_MIN + 101
    rng = np.random.default_rng(len(idx_dtype) + width)
    idx = hot_idx(rng, V, N, hot, 0.8, idx_dtype)
    inc = incs(rng, N, (width,), dtype)
    base = rng.standard_normal((V, width)).astype(dtype)
    base[hot[0]] = -0.0
    gidx = gpu.shared(np.repeat(idx, 3))[1::3]  # a strided, offset view
    assert_rows_bits(base, idx.astype(np.int64), inc, gidx, gpu.shared(inc), "in place")


def test_reversed_idx_view_hot_row():
    V, D, N = 1000, 12, SORT_MIN + 9
    rng = np.random.default_rng(12)
    idx = hot_idx(rng, V, N, [-1], 0.7)
    inc = incs(rng, N, (D,), "float32")
    base = rng.standard_normal((V, D)).astype("float32")
    gidx = gpu.shared(idx[::-1].copy())[::-1]
    assert_rows_bits(base, idx, inc, gidx, gpu.shared(inc), "base")


# -- views and broadcasts -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("D", [8, 9, 65])
def test_strided_offset_base_view(D, dtype):
    """The base: every other row of a wider table, from column 2 (a
    strided, offset GPU view); the increments: every other row of a wider
    array, from column 1."""
    V, N = 900, SORT_MIN + 17
    rng = np.random.default_rng(D)
    idx = hot_idx(rng, V, N, [owner_range(V, 2)[0]], 0.7)
    big = rng.standard_normal((2 * V + 1, D + 5)).astype(dtype)
    big[1::2][idx[0]] = -0.0
    bigi = incs(rng, 2 * N, (D + 3,), dtype)
    W = gpu.shared(big)
    I = gpu.shared(bigi)
    f = compile_more(gpu_from_host(at.inc_subtensor(W[1::2, 2:2 + D][gpu.shared(idx)], I[::2, 1:1 + D])))
    expected = big[1::2, 2:2 + D].copy()
    np.add.at(expected, idx, bigi[::2, 1:1 + D])
    got = cupy().asnumpy(f())
    assert_np_add_at_bits(got, expected)
    assert got.tobytes() == cupy().asnumpy(f()).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("D", [4, 9, 64])
def test_three_dim_view_base_and_transposed_inc(D, dtype):
    """A 3-d base as a view (every other row, its last axis from 1) and
    increments given transposed (not C-contiguous)."""
    V, A, N = 800, 2, SORT_MIN + 5
    rng = np.random.default_rng(D + 1)
    idx = hot_idx(rng, V, N, [0, -1], 0.8)
    big = rng.standard_normal((2 * V, A, D + 1)).astype(dtype)
    inc = incs(rng, N, (A, D), dtype)
    W = gpu.shared(big)
    It = gpu.shared(np.ascontiguousarray(inc.transpose(2, 1, 0)))
    f = compile_more(gpu_from_host(at.inc_subtensor(W[::2, :, 1:][gpu.shared(idx)], It.transpose(2, 1, 0))))
    expected = big[::2, :, 1:].copy()
    np.add.at(expected, idx, inc)
    assert_np_add_at_bits(cupy().asnumpy(f()), expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["row", "column", "scalar"])
@pytest.mark.parametrize("D", [9, 65])
def test_broadcast_increments_hot_row(D, kind, dtype):
    """One row for every index; one value per index along its row (N, 1);
    one value for every element."""
    V, N = 1200, SORT_MIN + 33
    rng = np.random.default_rng(D * 3 + len(kind))
    idx = hot_idx(rng, V, N, [owner_range(V, 3)[1] - 1], 0.75)
    if kind == "row":
        inc = edge_values(rng, D, dtype)
    elif kind == "column":
        inc = edge_values(rng, N, dtype).reshape(N, 1)
    else:
        inc = np.asarray(0.1, dtype)
    base = rng.standard_normal((V, D)).astype(dtype)
    base[idx[0]] = -0.0
    ginc = gpu.shared(inc) if kind != "scalar" else at.constant(inc)
    assert_rows_bits(base, idx, inc, gpu.shared(idx), ginc, "base")


# -- one row, edge values ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("row", [0, -1])
@pytest.mark.parametrize("D", [2, 8, 16, 40])
def test_all_indices_on_one_row(D, row, dtype):
    V, N = 800, SORT_MIN + 1
    assert sorted_path(N, D)
    rng = np.random.default_rng(D + row)
    idx = np.full(N, row)
    inc = incs(rng, N, (D,), dtype)
    base = rng.standard_normal((V, D)).astype(dtype)
    base[row] = -0.0
    assert_rows_bits(base, idx, inc, gpu.shared(idx), gpu.shared(inc), "base")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hot_row_of_subnormals_and_cancellation(dtype):
    """A hot row whose increments are mostly subnormals and values that
    cancel (x, -x, tiny): the order of the adds decides every bit."""
    V, D, N = 600, 24, SORT_MIN + 7
    rng = np.random.default_rng(77)
    idx = hot_idx(rng, V, N, [5], 0.9)
    tiny = np.finfo(dtype).smallest_subnormal
    big = rng.standard_normal((N, D)).astype(dtype) * np.asarray(1e30, dtype)
    inc = np.where(rng.random((N, D)) < 0.5, big, tiny * rng.integers(-5, 6, (N, D))).astype(dtype)
    inc[1::2] = np.where(rng.random((N // 2, D)) < 0.5, -inc[0::2][: N // 2], inc[1::2])
    base = np.zeros((V, D), dtype)
    base[5] = -0.0
    assert_rows_bits(base, idx, inc, gpu.shared(idx), gpu.shared(inc), "in place")


# -- one compiled function, idx switching -----------------------------------------------------
@pytest.mark.parametrize("dtype,D", [("float32", 9), ("float64", 4), ("float32", 65)])
def test_one_function_idx_switches_hot_spread_sorted_empty_bad(dtype, D):
    V = 1000
    rng = np.random.default_rng(D)
    base = rng.standard_normal((V, D)).astype(dtype)
    table = gpu.shared(base.copy())
    first = hot_idx(rng, V, SORT_MIN + 50, [3], 0.8)
    gidx = gpu.shared(first)
    NMAX = 60_000
    incall = incs(rng, NMAX, (D,), dtype)
    ginc = gpu.shared(incall[: len(first)])
    step = compile_more([], updates={table: at.inc_subtensor(table[gidx], ginc)})
    expected = base.copy()
    hotter = hot_idx(rng, V, 50_000, [-1], 0.9)
    bad_hot = hot_idx(rng, V, SORT_MIN + 60, [owner_range(V, 1)[0]], 0.8)
    bad_hot[len(bad_hot) // 2] = -V - 1
    bad_first = hot_idx(rng, V, SORT_MIN + 60, [2], 0.8)
    bad_first[0] = V
    sequence = [
        first,
        first,  # run twice
        rng.integers(-V, V, SORT_MIN + 3),  # spread: not hot
        np.sort(hot_idx(rng, V, 45_000, [500], 0.7)),  # sorted, hot
        np.sort(rng.integers(0, V, 40_000))[::-1].copy(),  # sorted descending
        hotter,
        np.full(100, 7),  # short: no pre-pass
        first[:0],  # empty
        bad_hot,
        bad_first,
        hotter[: SORT_MIN + 1],
        np.full(NMAX, -3),  # all on one row
    ]
    for k, idx in enumerate(sequence):
        gidx.set_value(idx)
        ginc.set_value(incall[: len(idx)])
        if (idx < -V).any() or (idx >= V).any():
            with pytest.raises(IndexError):
                step()
            assert table.get_value().tobytes() == expected.tobytes(), k
            continue
        step()
        np.add.at(expected, idx, incall[: len(idx)])
        assert_np_add_at_bits(table.get_value(), expected)
        expected = table.get_value()  # NaN payloads aside, the same bits
    assert k == len(sequence) - 1


# -- two hot buckets at once (more owners), in a process of its own ---------------------------
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
@pytest.mark.parametrize("dtype,D", [("float32", 8), ("float32", 9), ("float64", 20), ("float32", 65)])
@pytest.mark.parametrize("V", [3, 4, 5, 7])
def test_few_rows_hot_row(V, D, dtype):
    N = SORT_MIN + 29
    rng = np.random.default_rng(V * 10 + D)
    idx = hot_idx(rng, V, N, [V // 2], 0.8)
    inc = incs(rng, N, (D,), dtype)
    base = rng.standard_normal((V, D)).astype(dtype)
    base[V // 2] = -0.0
    assert_rows_bits(base, idx, inc, gpu.shared(idx), gpu.shared(inc), "in place")


# -- a bucket's size at the rounds' and chunks' edges ---------------------------------------------
@pytest.mark.parametrize("dtype,D", [("float32", 8), ("float64", 4), ("float64", 9), ("float32", 40)])
@pytest.mark.parametrize("extra", [-1, 1, 513])
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
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("D", [9, 32, 33, 129])
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
