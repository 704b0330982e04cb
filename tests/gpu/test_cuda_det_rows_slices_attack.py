"""Attacks on the hot buckets' column slices and the streamed adds of the
deterministic scatter-add of rows (issue 31, ``bc_rows_det_slices``,
``rows_det`` and ``det_bucket_streamed`` of
``c_code/cuda/scatter_add_det_bucket.cuh``, ``det_add_lean`` of
``c_code/cuda/scatter_add_det.cuh``), part one; part two, which takes its
helpers from here, is ``test_cuda_det_rows_slices_edges.py``.

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
bit-identical).

The two files were checked against planted faults (each made tests fail,
then was undone): slice blocks s > 0 skipping their last column;
det_add_lean's mixed step taking its matches highest lane first;
det_bucket_streamed dropping the last entry of a partial round;
det_stage_add taking one column a lane up to 40 columns.
"""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from gpu_cases import AVAILABLE, WHY, cupy  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.cuda import sources  # noqa: E402
from aesara_bincount_core.gpu.transfer import gpu_from_host  # noqa: E402
from test_cuda_deterministic import assert_np_add_at_bits, assert_rows_bits, compile_more, edge_values  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
DET = sources.header_constants("cuda/kernel_defs.h", "BC_CUDA_ROWS_DET_")
SORT_MIN = DET["SORT_MIN"]
TILE_COLUMNS = 32 * sources.header_constants("cuda/kernel_defs.h", "BC_CUDA_ROWS_")["TILE"]
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


# each table in both dtypes, the three targets in turn (the run's time: the
# emulated suite is CI's longest step)
@pytest.mark.parametrize("case,onto,dtype", [
    (case, ["zeros", "base", "in place"][(k + j) % 3], dtype)
    for k, case in enumerate(sorted(TABLES)) for j, dtype in enumerate(["float32", "float64"])])
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


@pytest.mark.parametrize("idx_dtype,width,dtype", [
    (idx_dtype, *[(8, "float32"), (20, "float64")][k % 2]) for k, idx_dtype in enumerate(sorted(IDX_DTYPES))])
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


@pytest.mark.parametrize("D,kind,dtype", [
    (D, kind, ["float32", "float64"][(k + j) % 2])
    for j, D in enumerate([9, 65]) for k, kind in enumerate(["row", "column", "scalar"])])
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
@pytest.mark.parametrize("D,row,dtype", [(2, 0, "float32"), (8, -1, "float64"), (16, 0, "float64"),
                                         (40, -1, "float32"), (8, 0, "float32")])
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
