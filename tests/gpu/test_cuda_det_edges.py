"""Hostile edges of ``deterministic="more"`` (issue 31): the bucket path of
the bincount past ``BC_CUDA_DET_PASS_MAX_BINS`` bins and the bucket
pre-pass of the rows' scatter-add past ``BC_CUDA_ROWS_DET_SORT_MIN``.

Through ``aesara.function`` on GPU shared variables.  Bincount against
``numpy.bincount`` within the float tolerance, the same bits on a second
call: output lengths around 4,096 bins, around a window (1,024 float64,
2,048 float32 bins), at 32 and 33 windows (the scan inside the scatter or
its own stage); a ``minlength`` above or below ``max(x) + 1``; a second
call whose x needs more or fewer windows than the previous call's length
(the recount); the top values of small index dtypes; a bad value in the
last element, also when the first count guessed other windows (ValueError,
a GPU shared variable left as it was); an empty x; float32 edge weights;
the fused seed's loop and scatter form; a symbolic minlength; views of x
and the weights; 33 windows on 1 and 3 emulated threads.  Rows against ``np.add.at``, bit for bit: indices
times column tiles at and one past the threshold for several row widths;
every index on one row, on the last row (as -1), one row only; strided
idx and increments; rows of a 3-D table, computed indices, the gradient
of ``W[idx]``; idx of int32, int64 and uint8 (and a bad last index).
Planted faults these tests catch: the scan inside the scatter taken for 33
windows, a bucket of rows read one entry short, no recount when x needs
more windows than counted, the count not refusing x's last value.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, EMULATED, WHY, assert_matches, cupy  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount.gpu import GpuBincount, GpuScatterAdd  # noqa: E402
from aesara_bincount_core.cuda import sources  # noqa: E402
from aesara_bincount_core.gpu.fused import GpuFusedBincount  # noqa: E402
from aesara_bincount_core.gpu.transfer import gpu_from_host  # noqa: E402
from test_cuda_deterministic import (  # noqa: E402
    assert_np_add_at_bits, assert_rows_bits, compile_more, edge_values, ops, run_cases)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
DET = sources.header_constants("cuda/bincount_det_defs.h", "BC_CUDA_DET_")
PASS_MAX = DET["PASS_MAX_BINS"]
WINDOW = {"float64": DET["WINDOW_BYTES"] // 8, "float32": DET["WINDOW_BYTES"] // 4}
SORT_MIN = sources.header_constants("cuda/kernel_defs.h", "BC_CUDA_ROWS_DET_")["SORT_MIN"]
TILE_COLUMNS = 32 * sources.header_constants("cuda/kernel_defs.h", "BC_CUDA_ROWS_")["TILE"]


def host(v):
    return cupy().asnumpy(v) if not isinstance(v, np.ndarray) else v


def assert_bincount(got, x, w, minlength=0):
    """numpy.bincount's result (in float64, rounded once) within the
    tolerance; bins whose sum is not finite exactly (NaN as NaN)."""
    expected = np.bincount(x, weights=w.astype(np.float64), minlength=minlength).astype(w.dtype)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got.shape, expected.shape)
    odd = ~np.isfinite(expected)
    np.testing.assert_array_equal(got[odd], expected[odd])
    keep = np.isfinite(w)
    finite = np.bincount(x[keep], weights=w[keep].astype(np.float64), minlength=len(expected))
    assert_matches(np.where(odd, 0, got), np.where(odd, 0, finite.astype(w.dtype)), weights=np.where(keep, w, 0), x=x)


def more_bincount(gx, gw, minlength=0):
    f = compile_more(gpu_from_host(bincount(gx, weights=gw, minlength=minlength)))
    assert any(isinstance(op, GpuBincount) and op.deterministic == "more" for op in ops(f)), ops(f)
    return f


def call_twice(f):
    first, second = host(f()), host(f())
    assert first.tobytes() == second.tobytes()
    return first


# -- bincount: lengths around the bucket path, its windows and its scan ------------------------
def lengths(dtype):
    b = WINDOW[dtype]
    return [PASS_MAX - 1, PASS_MAX, PASS_MAX + 1, 5 * b - 1, 5 * b, 5 * b + 1, 32 * b, 32 * b + 1, 33 * b]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("how", ["max", "minlength"])
def test_output_lengths_around_windows_and_the_scan(dtype, how):
    """Each length L once as max(x) + 1 (the last bin of the last window
    holds a value) and once as a minlength past max(x) + 1 (the last
    windows empty); the first and last bins of every window are hot."""
    rng = np.random.default_rng(len(dtype))
    for L in lengths(dtype):
        edges = np.arange(0, L, WINDOW[dtype])
        top = L if how == "max" else max(L // 3, 1)
        ends = np.minimum(edges + WINDOW[dtype] - 1, top - 1)
        x = np.concatenate([rng.integers(0, top, 3000), edges[edges < top], ends])
        x = np.concatenate([x, np.full(500, top - 1)])
        rng.shuffle(x)
        w = (rng.standard_normal(len(x)) * 10.0 ** rng.uniform(-3, 3, len(x))).astype(dtype)
        minlength = L if how == "minlength" else L // 2  # smaller than max(x) + 1 for "max"
        got = call_twice(more_bincount(gpu.shared(x), gpu.shared(w), minlength))
        assert len(got) == L, (L, len(got))
        assert_bincount(got, x, w, minlength)


def test_the_recount_when_x_needs_more_or_fewer_windows():
    """One function, x of other lengths and tops call after call: the
    previous call's length is the count's guess, wrong every time."""
    rng = np.random.default_rng(7)
    gx, gw = gpu.shared(np.zeros(1, dtype="int64")), gpu.shared(np.zeros(1))
    f = more_bincount(gx, gw)
    for n, top in ((3000, 5000), (5000, 40_000), (2000, 33_000), (4000, 4097), (100, 90), (7000, 70_000),
                   (6000, 70_000), (1, 33_792), (3000, 33_793), (0, 0), (2500, 10_000)):
        x = rng.integers(0, max(top, 1), n)
        if n:
            x[rng.integers(0, n)] = top - 1
        w = rng.standard_normal(n)
        gx.set_value(x)
        gw.set_value(w)
        got = call_twice(f)
        assert_bincount(got, x, w)


@pytest.mark.parametrize("dtype, top", [("int8", 127), ("uint8", 255), ("int16", 32767), ("uint16", 65535),
                                        ("uint64", 40_000)])  # fmt: skip
def test_small_index_dtypes_at_their_top(dtype, top):
    """int16's top, 32,767, is exactly 32 float64 windows; uint16's 65,535
    is 32 float32 windows."""
    rng = np.random.default_rng(top)
    x = rng.integers(0, top + 1, 5000).astype(dtype)
    x[[0, -1]] = top
    for wdtype in ("float64", "float32"):
        w = rng.standard_normal(5000).astype(wdtype)
        got = call_twice(more_bincount(gpu.shared(x), gpu.shared(w), minlength=PASS_MAX + 1))
        assert_bincount(got, x.astype(np.int64), w, PASS_MAX + 1)


@pytest.mark.parametrize("where", ["last", "first count", "recount"])
def test_a_bad_value_raises_and_leaves_the_shared_variable(where):
    """A negative value in the last element of x: with a minlength past
    PASS_MAX (the count checks it); after a call of few bins (the first
    pass is a window pass, then x needs many bins); after a call of many
    bins whose windows x overruns (the count of other windows)."""
    rng = np.random.default_rng(11)
    n, L = 6000, 12_000
    gx, gw = gpu.shared(rng.integers(0, 100, n)), gpu.shared(rng.standard_normal(n))
    acc = gpu.shared(np.zeros(2 * L))
    b = bincount(gx, weights=gw, minlength=L if where == "last" else 0)
    step = compile_more([], updates={acc: at.inc_subtensor(acc[: b.shape[0]], b)})
    if where == "recount":
        gx.set_value(rng.integers(0, 5000, n))
    step()
    before = acc.get_value()
    x = rng.integers(0, L, n)
    x[-1] = -5
    if where == "recount":
        x[0] = L - 1 + 3 * 1024
    gx.set_value(x)
    with pytest.raises(ValueError, match="-5"):
        step()
    assert acc.get_value().tobytes() == before.tobytes()
    x[-1] = L - 1
    gx.set_value(x)
    acc.set_value(np.zeros(2 * L))
    step()
    assert_matches(acc.get_value(), np.bincount(x, weights=gw.get_value(), minlength=2 * L),
                   weights=gw.get_value(), x=x)  # fmt: skip


@pytest.mark.parametrize("dtype, bad", [("int8", -128), ("int16", -32768), ("int32", -1)])
def test_the_most_negative_value_last_in_a_small_dtype(dtype, bad):
    rng = np.random.default_rng(-bad)
    x = rng.integers(0, 100, 5000).astype(dtype)
    x[-1] = bad
    f = more_bincount(gpu.shared(x), gpu.shared(np.ones(5000, dtype="float32")), minlength=33 * 1024)
    with pytest.raises(ValueError, match=str(bad)):
        f()


def test_a_computed_x_with_a_bad_value():
    """bincount(gx // 3 - 1, weights=gw) past PASS_MAX bins: the count
    computes x and refuses its -1 (gx's 0 in the last element)."""
    rng = np.random.default_rng(15)
    x = rng.integers(3, 40_000, 7000)
    gx, gw = gpu.shared(x), gpu.shared(rng.standard_normal(7000))
    f = compile_more(gpu_from_host(bincount(gx // 3 - 1, weights=gw)))
    assert_bincount(call_twice(f), x // 3 - 1, gw.get_value())
    x[-1] = 0
    gx.set_value(x)
    with pytest.raises(ValueError, match="-1"):
        f()


@pytest.mark.parametrize("length", [32 * 1024, 33 * 1024 + 1])
def test_lengths_of_x_around_its_tiles(length):
    """x of 1, 127, 128, 129, 4,096, 4,097 and 8,193 values (one, two and
    three tiles of 128-value rounds) into 32 or 34 float64 windows."""
    rng = np.random.default_rng(16)
    gx, gw = gpu.shared(np.zeros(1, dtype="int64")), gpu.shared(np.zeros(1))
    f = more_bincount(gx, gw, minlength=length)
    for n in (1, 127, 128, 129, 4096, 4097, 8193):
        x = rng.integers(0, length, n)
        x[-1] = length - 1
        x[: n // 2] = rng.integers(0, 1024, n // 2)
        w = rng.standard_normal(n)
        gx.set_value(x)
        gw.set_value(w)
        assert_bincount(call_twice(f), x, w, length)


def test_a_symbolic_minlength_above_and_below_max_x():
    rng = np.random.default_rng(20)
    x = rng.integers(0, 9000, 6000)
    w = rng.standard_normal(6000).astype("float32")
    m = at.lscalar("m")
    with aesara.config.change_flags(deterministic="more"):
        f = aesara.function([m], gpu_from_host(bincount(gpu.shared(x), weights=gpu.shared(w), minlength=m)))
    assert any(isinstance(op, GpuBincount) and op.deterministic == "more" for op in ops(f)), ops(f)
    for minlength in (40_000, 10, 33 * 2048, 9000, 0, 4097, 65_537):
        got = host(f(minlength))
        assert got.tobytes() == host(f(minlength)).tobytes()
        assert_bincount(got, x, w, minlength)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_fused_scatter_form_with_negative_indices(dtype):
    """inc_subtensor(zeros(n)[gidx], exp(-theta * gv)), n of 33 windows,
    indices in [-n, n); then a bad last index raises IndexError."""
    n = 33 * WINDOW[dtype]
    rng = np.random.default_rng(21)
    idx = rng.integers(-n, n, 7000)
    idx[:2000] = -1
    v = rng.uniform(0, 5, 7000).astype(dtype)
    theta = aesara.shared(np.asarray(0.3, dtype=dtype))
    gidx = gpu.shared(idx)
    f = compile_more(gpu_from_host(at.inc_subtensor(at.zeros(n, dtype=dtype)[gidx], at.exp(-theta * gpu.shared(v)))))
    assert any(isinstance(op, GpuFusedBincount) and op.deterministic == "more" for op in ops(f)), ops(f)
    w = np.exp(-np.asarray(0.3, dtype=dtype) * v)
    expected = np.zeros(n)
    np.add.at(expected, idx, w.astype(np.float64))
    assert_matches(call_twice(f), expected.astype(dtype), weights=w, x=idx)
    idx[-1] = -n - 1
    gidx.set_value(idx)
    with pytest.raises(IndexError, match=str(-n - 1)):
        f()


def test_a_bad_index_in_the_last_element_of_the_scatter_form():
    rng = np.random.default_rng(12)
    n = 3 * 1024 + 5000
    idx = rng.integers(-n, n, 6000)
    idx[-1] = n
    gidx = gpu.shared(idx)
    table = gpu.shared(rng.standard_normal(n))
    before = table.get_value()
    step = compile_more([], updates={table: table + at.inc_subtensor(at.zeros(n)[gidx], gpu.shared(np.ones(6000)))})
    with pytest.raises(IndexError, match=str(n)):
        step()
    assert table.get_value().tobytes() == before.tobytes()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_bucket_entries_around_a_chunk(dtype):
    """Windows holding 4,095, 4,096, 4,097, 1 and 8,192 values (chunks of
    4,096 bucket entries end inside, at and past a window), from reversed
    and step-3 views of x and the weights."""
    rng = np.random.default_rng(18)
    b = WINDOW[dtype]
    sizes = [4095, 4096, 4097, 1, 8192]
    x = np.concatenate([rng.integers(k * b, (k + 1) * b, m) for k, m in enumerate(sizes)] + [[len(sizes) * b]])
    rng.shuffle(x)
    w = (rng.standard_normal(len(x)) * 10.0 ** rng.uniform(-4, 4, len(x))).astype(dtype)
    got = call_twice(more_bincount(gpu.shared(x[::-1].copy())[::-1], gpu.shared(np.repeat(w, 3))[1::3]))
    assert_bincount(got, x, w)


def test_an_empty_x_gives_zeros_also_after_many_bins():
    gx, gw = gpu.shared(np.arange(9000)), gpu.shared(np.ones(9000, dtype="float32"))
    f = more_bincount(gx, gw, minlength=PASS_MAX + 10)
    assert_bincount(call_twice(f), np.arange(9000), np.ones(9000, dtype="float32"), PASS_MAX + 10)
    gx.set_value(np.arange(0))
    gw.set_value(np.ones(0, dtype="float32"))
    got = call_twice(f)
    assert got.dtype == "float32" and got.tobytes() == bytes(4 * (PASS_MAX + 10))


def test_float32_edge_weights_in_the_bucket_path():
    """-0.0 (a bin of only -0.0 is +0.0, numpy.bincount's), subnormals kept,
    NaN and inf, a hot bin, over windows and the chunks of a bucket."""
    rng = np.random.default_rng(13)
    n = 12_000
    x = rng.integers(0, 3 * WINDOW["float32"] + 1, n)
    x[: n // 3] = 2047  # a hot bin at a window's end: three chunks
    w = edge_values(rng, n, "float32")
    x[:4] = [5000, 5000, 5001, 5002]
    w[:4] = [-0.0, -0.0, np.float32(1e-45), np.nan]
    got = call_twice(more_bincount(gpu.shared(x), gpu.shared(w)))
    assert_bincount(got, x, w)
    sub = x == 5001
    if w[sub].sum() == np.float32(1e-45) and np.all(w[sub][1:] == 0):
        assert got[5001] == np.float32(1e-45)
    if np.all(w[x == 5000] == 0):
        assert not np.signbit(got[5000]) and got[5000] == 0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_fused_seed_loop_across_lengths(dtype):
    """bincount(x, weights=exp(-theta * v)) with x and v GPU shared
    variables, lengths crossing PASS_MAX and 32 windows call after call."""
    rng = np.random.default_rng(14)
    gx, gv = gpu.shared(np.zeros(1, dtype="int64")), gpu.shared(np.zeros(1, dtype=dtype))
    theta = aesara.shared(np.asarray(0.5, dtype=dtype))
    f = compile_more(gpu_from_host(bincount(gx, weights=at.exp(-theta * gv))))
    for top in (1000, 40 * WINDOW[dtype], PASS_MAX + 1, 32 * WINDOW[dtype] + 1):
        x = rng.integers(0, top, 8000)
        x[:2000] = top - 1
        v = rng.uniform(0, 5, 8000).astype(dtype)
        gx.set_value(x)
        gv.set_value(v)
        got = call_twice(f)
        assert_bincount(got, x, np.exp(-np.asarray(0.5, dtype=dtype) * v))


@pytest.mark.skipif(not EMULATED, reason="varies the emulation's threads and block order")
def test_33_windows_same_bits_across_thread_counts():
    """det_cases' ``many`` into 33,792 bins (33 float64 windows: the scan
    stage) on 1 and 3 threads of the emulation, blocks in a random order."""
    env = dict(DET_CASES_MANY_BINS=str(33 * WINDOW["float64"]), DET_CASES_ONLY="many",
               FAKE_CUDA_BLOCK_ORDER="random")  # fmt: skip
    one, three = (run_cases("more", 2, FAKE_CUDA_RUNNERS=r, **env) for r in ("1", "3"))
    assert list(one) == ["many"] and one == three, (one, three)
    assert all(len(set(d)) == 1 for d in one.values()), one


# -- rows: the pre-pass's threshold, hot rows, views, index dtypes ----------------------------
def tiles(width):
    return -(-width // TILE_COLUMNS)


def rows_case(V, idx, inc, onto, dtype, strided=False):
    """np.add.at's bits onto zeros, onto a base or in place; idx and
    increments given as step-2 views when ``strided``."""
    rng = np.random.default_rng(len(idx))
    gidx = gpu.shared(np.repeat(idx, 2))[::2] if strided else gpu.shared(idx)
    ginc = gpu.shared(np.repeat(inc, 2, axis=0))[::2] if strided else gpu.shared(inc)
    shape = (V,) + inc.shape[1:]
    base = np.zeros(shape, dtype) if onto == "zeros" else rng.standard_normal(shape).astype(dtype)
    if onto != "zeros":
        base[-1] = -0.0
    assert_rows_bits(base, idx, inc, gidx, ginc, onto)


@pytest.mark.parametrize("width, dtype", [(1, "float64"), (31, "float32"), (128, "float64"), (129, "float32"),
                                          (300, "float64"), (300, "float32")])  # fmt: skip
@pytest.mark.parametrize("past", [0, 1])
def test_rows_at_and_past_the_threshold(width, past, dtype):
    most = SORT_MIN // tiles(width)
    n = most + past
    V = 3000
    rng = np.random.default_rng(width + past)
    idx = rng.integers(-V, V, n)
    idx[rng.random(n) < 0.3] = V - 1  # a hot last row
    inc = edge_values(rng, n * width, dtype).reshape(n, width)
    rows_case(V, idx, inc, ["zeros", "base", "in place"][(width + past) % 3], dtype, strided=width == 31)


@pytest.mark.parametrize("shape", ["one row of many", "last row as -1", "one row only", "two rows"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rows_all_on_one_row(shape, dtype):
    V = {"one row of many": 5000, "last row as -1": 700, "one row only": 1, "two rows": 2}[shape]
    n, width = SORT_MIN + 7, 3
    rng = np.random.default_rng(V)
    idx = {"one row of many": np.full(n, 4321), "last row as -1": np.full(n, -1),
           "one row only": rng.choice([0, -1], n), "two rows": rng.choice([-2, -1, 0, 1], n)}[shape]  # fmt: skip
    # values near 1 (not edge_values' spread of magnitudes, whose large
    # ones hide a lost or repeated add when a row takes every index)
    inc = rng.standard_normal((n, width)).astype(dtype)
    inc[rng.random((n, width)) < 0.05] = -0.0
    inc[rng.random((n, width)) < 0.02] = np.finfo(dtype).smallest_subnormal
    for onto in ("zeros", "base", "in place"):
        rows_case(V, idx, inc, onto, dtype, strided=shape == "two rows")


def test_rows_reversed_and_column_strided_views():
    V, D, n = 500, 7, SORT_MIN + 3
    rng = np.random.default_rng(19)
    idx = rng.integers(-V, V, n)
    inc = edge_values(rng, 2 * n * D, "float32").reshape(n, 2 * D)
    base = rng.standard_normal((V, D)).astype("float32")
    for gi, gv, i, v in ((gpu.shared(idx)[::-1], gpu.shared(inc)[::-1, ::2], idx[::-1], inc[::-1, ::2]),
                         (gpu.shared(idx), gpu.shared(inc)[:, 1::2], idx, inc[:, 1::2])):  # fmt: skip
        f = compile_more(gpu_from_host(at.inc_subtensor(gpu.shared(base)[gi], gv)))
        expected = base.copy()
        np.add.at(expected, i, v)
        assert_np_add_at_bits(call_twice(f), expected)


@pytest.mark.parametrize("idx_dtype", ["int32", "int64", "uint8"])
def test_rows_index_dtypes_past_the_threshold(idx_dtype):
    V, width, n = 256, 2, SORT_MIN + 100
    rng = np.random.default_rng(21)
    low = 0 if idx_dtype == "uint8" else -V
    idx = rng.integers(low, V, n).astype(idx_dtype)
    idx[-1] = V - 1
    inc = edge_values(rng, n * width, "float32").reshape(n, width)
    rows_case(V, idx, inc, "base", "float32")
    # a bad last index (255 of 200 rows for uint8): IndexError, W as it was
    table = gpu.shared(np.ones((200, width), dtype="float32"))
    idx[(idx >= 200) | (idx < -200)] = 7
    idx[-1] = 255 if idx_dtype == "uint8" else -201
    step = compile_more([], updates={table: at.inc_subtensor(table[gpu.shared(idx)], gpu.shared(inc))})
    with pytest.raises(IndexError, match=str(idx[-1])):
        step()
    assert table.get_value().tobytes() == np.ones((200, width), dtype="float32").tobytes()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rows_of_a_3d_table_and_the_gradient(dtype):
    """Rows of (3, 50) (150 elements: two column tiles), 16,385 indices
    (32,770 index-tiles), computed indices (gidx % V - 1), and the gradient
    of ``(W[idx] ** 2).sum()``, a scatter-add onto zeros."""
    V, n = 900, SORT_MIN // 2 + 1
    rng = np.random.default_rng(17)
    raw = rng.integers(0, 5 * V, n)
    raw[rng.random(n) < 0.4] = 3 * V  # a hot row: 3V % V - 1 = -1, the last
    inc = rng.standard_normal((n, 3, 50)).astype(dtype)
    base = rng.standard_normal((V, 3, 50)).astype(dtype)
    f = compile_more(gpu_from_host(at.inc_subtensor(gpu.shared(base)[gpu.shared(raw) % V - 1], gpu.shared(inc))))
    expected = base.copy()
    np.add.at(expected, raw % V - 1, inc)
    assert_np_add_at_bits(call_twice(f), expected)
    W, gidx = gpu.shared(base), gpu.shared(raw % V)
    g = compile_more(gpu_from_host(aesara.grad((W[gidx] ** 2).sum(), W)))
    assert any(isinstance(op, GpuScatterAdd) and op.deterministic == "more" for op in ops(g)), ops(g)
    expected = np.zeros_like(base)
    np.add.at(expected, raw % V, 2 * base[raw % V])
    assert_np_add_at_bits(call_twice(g), expected)
