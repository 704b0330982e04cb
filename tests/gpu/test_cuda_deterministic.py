"""``aesara.config.deterministic = "more"`` on the GPU Ops (issue 31).

Through ``aesara.function`` on GPU shared variables: under ``"more"`` at
compile time, ``GpuBincount`` and ``GpuFusedBincount`` sum float weights
with the deterministic kernels (``c_code/cuda/bincount_det.cuh``) and
``GpuScatterAdd`` adds float rows in index order
(``c_code/cuda/scatter_add_det.cuh``).  Checked here: the bits of the
float sums of ``det_cases.py`` differ from call to call in the default mode
and are identical under ``"more"``, across calls and across processes with
another thread count of the emulation (FAKE_CUDA_RUNNERS), another
emulated device (multiprocessors, shared memory) and a random order of its
blocks (FAKE_CUDA_BLOCK_ORDER=random); the results against
NumPy (``numpy.bincount`` within the float tolerance; ``np.add.at`` bit for
bit for rows), with several windows of bins, the scatter-add form, float32
subnormals, signed zeros, NaN and inf; the errors; the props, dprint and
the cache key.
"""
import hashlib
import json
import os
import subprocess
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
from aesara_bincount_core.gpu.fused import GpuFusedBincount  # noqa: E402
from aesara_bincount_core.gpu.transfer import gpu_from_host  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
RNG = np.random.default_rng(31)
HERE = os.path.dirname(os.path.abspath(__file__))


def compile_more(outputs, updates=None, deterministic="more"):
    with aesara.config.change_flags(deterministic=deterministic):
        return aesara.function([], outputs, updates=updates)


def ops(f):
    return [node.op for node in f.maker.fgraph.toposort()]


def run_cases(mode, calls, **env):
    """det_cases.py in a process of its own (the emulation reads its thread
    count and block order once): ``{case: [digest per call]}``."""
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "det_cases.py"), mode, str(calls)],
        env=dict(os.environ, **env), capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the same bits every call, every run --------------------------------------------------
def _same_bits_under_more(calls):
    """``calls`` calls of each case under "more": the same bits every call,
    whatever the thread count and the device's multiprocessors and shared
    memory, and the rows are ``np.add.at``'s bits."""
    # On the emulation, also another device: 5 multiprocessors and less
    # shared memory (so other windows of bins); the bits must not change.
    devices = [dict(FAKE_CUDA_RUNNERS="1"),
               dict(FAKE_CUDA_RUNNERS="3", FAKE_CUDA_SMS="5", FAKE_CUDA_SHARED_PER_SM="102400",
                    FAKE_CUDA_SHARED_OPTIN="101376")] if EMULATED else [{}]  # fmt: skip
    runs = {i: run_cases("more", calls, FAKE_CUDA_BLOCK_ORDER="random", **env) for i, env in enumerate(devices)}
    first = next(iter(runs.values()))
    for runners, got in runs.items():
        for case, digests in got.items():
            assert len(set(digests)) == 1, (case, runners, digests)
            assert digests[0] == first[case][0], (case, runners)
    import det_cases  # and the rows are np.add.at's bits

    data = det_cases.inputs()
    for case, prefix in (("rows_hot", "hot"), ("rows_many", "many")):
        expected = data[f"{prefix}_base"].copy()
        np.add.at(expected, data[f"{prefix}_idx"], data[f"{prefix}_inc"])
        assert first[case][0] == hashlib.sha256(expected.tobytes()).hexdigest(), case


def test_more_gives_the_same_bits_every_call_and_run():
    """Issue 31's check at the short tier's size: 3 calls of each case, on
    two emulated devices (``make test-long`` makes 20, and checks that the
    default mode's bits change)."""
    _same_bits_under_more(3)


@pytest.mark.long
def test_more_gives_the_same_bits_every_call_and_run_where_default_does_not():
    """Done-when of issue 31: 20 calls of each case; in the default mode the
    bits change (on the emulation, whose blocks run in a random order on 4
    threads), under "more" they do not, whatever the thread count and the
    device's multiprocessors and shared memory."""
    _same_bits_under_more(20)
    if EMULATED:
        default = run_cases("default", 20, FAKE_CUDA_RUNNERS="4", FAKE_CUDA_BLOCK_ORDER="random")
        for case, digests in default.items():
            assert len(set(digests)) > 1, f"{case}: the default mode gave the same bits 20 times"


def test_the_cases_take_the_deterministic_ops():
    import det_cases

    for deterministic in ("default", "more"):
        fns = det_cases.functions(deterministic)
        kinds = {case: [type(op) for op in ops(f)] for case, f in fns.items()}
        assert GpuBincount in kinds["bincount"] and GpuFusedBincount in kinds["seed"], kinds
        assert all(GpuScatterAdd in kinds[c] for c in ("rows", "rows_hot", "rows_many")), kinds
        for f in fns.values():
            for op in ops(f):
                if isinstance(op, (GpuBincount, GpuScatterAdd)):
                    assert op.deterministic == deterministic, op


# -- against NumPy --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("top", [7, 1000, 5000])  # 5000: three windows of float64 on the emulation
def test_more_bincount_matches_numpy(dtype, top):
    x = RNG.integers(0, top, 9000)
    x[:3000] = 3  # a hot bin
    w = RNG.standard_normal(9000).astype(dtype)
    f = compile_more(gpu_from_host(bincount(gpu.shared(x), weights=gpu.shared(w), minlength=top // 2)))
    assert any(isinstance(op, GpuBincount) and op.deterministic == "more" for op in ops(f))
    got = cupy().asnumpy(f())
    expected = np.bincount(x, weights=w.astype(np.float64), minlength=top // 2).astype(dtype)
    assert_matches(got, expected, weights=w, x=x)
    assert got.tobytes() == cupy().asnumpy(f()).tobytes()


def test_more_scatter_form_and_strided_inputs():
    idx = RNG.integers(-50, 50, 7001)
    w = RNG.standard_normal(14002)
    gw = gpu.shared(w)[::2]  # strided weights
    zeros = at.zeros(50)
    f = compile_more(gpu_from_host(at.inc_subtensor(zeros[gpu.shared(idx)], gw)))
    got = cupy().asnumpy(f())
    expected = np.zeros(50)
    np.add.at(expected, idx, w[::2])
    assert_matches(got, expected, weights=w[::2], x=idx)


def test_more_float32_keeps_subnormals_signed_zeros_nan_and_inf():
    x = np.array([0, 0, 1, 2, 2, 3, 4, 4, 5])
    w = np.array([1e-40, 1e-40, -0.0, np.inf, 1.0, np.nan, np.inf, -np.inf, -1e-45], dtype="float32")
    f = compile_more(bincount(gpu.shared(x), weights=gpu.shared(w)))
    got = f()
    expected = np.zeros(6, dtype="float32")
    np.add.at(expected, x, w)
    np.testing.assert_array_equal(got, expected)
    assert not np.signbit(got[1]) and got[0] == np.float32(1e-40) * 2 and got[5] == -np.float32(1e-45)


def test_more_seed_loop_matches_the_cpu():
    x = RNG.integers(0, 1000, 20000)
    v = RNG.uniform(0, 5, 20000)
    theta = aesara.shared(0.7)
    f = compile_more(gpu_from_host(bincount(gpu.shared(x), weights=at.exp(-theta * gpu.shared(v)))))
    fused = [op for op in ops(f) if isinstance(op, GpuFusedBincount)]
    assert fused and fused[0].deterministic == "more", ops(f)
    w = np.exp(-0.7 * v)
    assert_matches(cupy().asnumpy(f()), np.bincount(x, weights=w), weights=w, x=x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("width", [1, 5, 40, 300])  # 300: three column tiles
def test_more_rows_are_np_add_at_bit_for_bit(dtype, width):
    """Index order, one rounding per add: np.add.at's bits, hot row included."""
    import det_cases

    idx = det_cases.hot_indices(RNG, 3000, 64) - 32  # negative indices wrap
    inc = det_cases.wide_values(RNG, 3000 * width, dtype).reshape(3000, width)
    base = RNG.standard_normal((64, width)).astype(dtype)
    base[5] = -0.0
    table = gpu.shared(base)
    f = compile_more(gpu_from_host(at.inc_subtensor(table[gpu.shared(idx)], gpu.shared(inc))))
    expected = base.copy()
    np.add.at(expected, idx, inc)
    assert cupy().asnumpy(f()).tobytes() == expected.tobytes()
    # in place, the update of a shared variable; broadcast increments
    step = compile_more([], updates={table: at.inc_subtensor(table[gpu.shared(idx)], gpu.shared(inc[0]))})
    assert [op for op in ops(step) if isinstance(op, GpuScatterAdd)][0].inplace
    step()
    np.add.at(base, idx, inc[0])
    assert table.get_value().tobytes() == base.tobytes()


def edge_values(rng, n, dtype):
    """Increments of both signs spread over many magnitudes, with -0.0,
    subnormals (float32: 1e-40, -1e-45; float64: 5e-324), inf and NaN."""
    import det_cases

    v = det_cases.wide_values(rng, n, dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    v[rng.random(n) < 0.05] = -0.0
    some = rng.random(n) < 0.05
    v[some] = tiny * rng.integers(-3, 4, int(some.sum()))
    v[rng.random(n) < 0.02] = tiny
    return v


def assert_np_add_at_bits(got, expected):
    """The bits of np.add.at, NaN aside: a GPU gives every NaN one bit
    pattern, NumPy keeps the payload of the first, so NaN is compared as NaN."""
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    assert got[~nan].tobytes() == expected[~nan].tobytes()


HOT_ROWS = {  # name: (rows V, row width D, indices N, hot rows, their share of the indices)
    # one row takes 9 indices in 10: it is added by one warp, from the stage
    "one hot row": (3000, 64, 5000, [7], 0.9),
    # three hot rows, one given as -1 (the last), two in one block's range;
    # 300 columns: two full tiles and one of 44
    "several hot rows, wide": (500, 300, 2500, [0, 1, -1], 0.8),
    # fewer rows than blocks and warps, two columns: 1,024 matches a stage
    "few rows, two columns": (3, 2, 7000, [1], 0.6),
}


def assert_rows_case(V, D, N, hot, share, onto, dtype, seed):
    """A float scatter-add of N indices onto V rows of D (``onto``: "zeros",
    "base" or "in place"), ``share`` of the indices on the rows ``hot``,
    the others in [-V, V), increments with edge values: np.add.at's bits,
    and the same bits on a second call."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(-V, V, N)
    on_hot = rng.random(N) < share
    if hot:
        idx[on_hot] = rng.choice(hot, int(on_hot.sum()))
    inc = edge_values(rng, N * D, dtype).reshape(N, D)
    inc[rng.integers(0, N, 2), rng.integers(0, D, 2)] = [np.nan, np.inf]
    base = np.zeros((V, D), dtype) if onto == "zeros" else rng.standard_normal((V, D)).astype(dtype)
    base[1] = -0.0 if onto != "zeros" else 0.0  # a hot row starting at -0.0
    gidx, ginc = gpu.shared(np.repeat(idx, 2))[::2], gpu.shared(inc)  # idx: a strided view
    assert_rows_bits(base, idx, inc, gidx, ginc, onto)


def assert_rows_bits(base, idx, inc, gidx, ginc, onto):
    """The scatter-add of ginc at gidx (the GPU's idx and inc) onto zeros
    of base's shape, onto base or into a shared base in place (``onto``):
    np.add.at's bits, and the same bits on a second call."""
    dtype = base.dtype
    V, D = base.shape[0], base.shape[1:]
    expected = base.copy()
    np.add.at(expected, idx, inc)
    if onto == "in place":
        table = gpu.shared(base)
        step = compile_more([], updates={table: at.inc_subtensor(table[gidx], ginc)})
        assert [op for op in ops(step) if isinstance(op, GpuScatterAdd)][0].inplace
        step()
        assert_np_add_at_bits(table.get_value(), expected)
        return
    target = at.zeros((V, *D), dtype=dtype) if onto == "zeros" else gpu.shared(base)
    f = compile_more(gpu_from_host(at.inc_subtensor(target[gidx], ginc)))
    node_ops = [op for op in ops(f) if isinstance(op, GpuScatterAdd)]
    assert node_ops and node_ops[0].onto == ("zeros" if onto == "zeros" else "base"), ops(f)
    assert node_ops[0].deterministic == "more", node_ops
    got = cupy().asnumpy(f())
    assert_np_add_at_bits(got, expected)
    assert got.tobytes() == cupy().asnumpy(f()).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("onto", ["zeros", "base", "in place"])
@pytest.mark.parametrize("case", sorted(HOT_ROWS))
def test_more_hot_rows_are_np_add_at_bit_for_bit(case, onto, dtype):
    """Hot rows (most indices on one or a few rows), negative indices,
    signed zeros, subnormals, inf and NaN: np.add.at's bits, and the same
    bits on a second call (issue 31)."""
    V, D, N, hot, share = HOT_ROWS[case]
    assert_rows_case(V, D, N, hot, share, onto, dtype, seed=len(case) + D)


def test_more_rows_broadcast_increments_and_many_rows_per_warp():
    """One row added at every index, and a scalar (one value for every
    element); 20,000 rows, so that each warp owns several and its run goes
    back and forth between them across chunks of idx."""
    import det_cases

    V, D, N = 20_000, 3, 6000
    idx = RNG.integers(0, V, N)
    idx[::3] = RNG.integers(0, 40, len(idx[::3]))
    base = RNG.standard_normal((V, D)).astype("float32")
    table = gpu.shared(base)
    for inc in (det_cases.wide_values(RNG, D, "float32"), np.float32(0.1)):
        f = compile_more(gpu_from_host(at.inc_subtensor(table[gpu.shared(idx)], inc)))
        assert any(isinstance(op, GpuScatterAdd) for op in ops(f)), ops(f)
        expected = base.copy()
        np.add.at(expected, idx, inc)
        assert cupy().asnumpy(f()).tobytes() == expected.tobytes()


def test_more_errors_leave_everything_as_it_was():
    base = np.ones((4, 3), dtype="float32")
    table = gpu.shared(base)
    gidx = gpu.shared(np.array([0, 1, 4]))
    step = compile_more([], updates={table: at.inc_subtensor(table[gidx], np.float32(1.0))})
    with pytest.raises(IndexError, match="4"):
        step()
    assert table.get_value().tobytes() == base.tobytes()
    f = compile_more(bincount(gpu.shared(np.array([1, -2, 3])), weights=gpu.shared(np.ones(3))))
    with pytest.raises(ValueError, match="-2"):
        f()


# -- props, dprint, cache key ---------------------------------------------------------------
def test_props_dprint_and_cache_key():
    a, b = GpuBincount("bincount", "float64", "default"), GpuBincount("bincount", "float64", "more")
    assert a != b and hash(a) != hash(b)
    assert str(a) == "GpuBincount{mode='bincount', out_dtype='float64'}"
    assert str(b) == "GpuBincount{mode='bincount', out_dtype='float64', deterministic='more'}"
    assert GpuScatterAdd("base", True, "more").clone_inplace().deterministic == "more"
    with pytest.raises(ValueError, match="deterministic"):
        GpuBincount("bincount", "float64", "always")
    x, w = gpu.shared(np.array([0, 1])), gpu.shared(np.array([1.0, 2.0]))
    texts = {}
    for mode in ("default", "more"):
        f = compile_more(bincount(x, weights=w), deterministic=mode)
        node = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuBincount)][0]
        texts[mode] = (aesara.printing.debugprint(f, file="str"), node.op.c_flags(node))
    assert "deterministic='more'" in texts["more"][0] and "deterministic" not in texts["default"][0]
    assert texts["more"][1]["BC_DETERMINISTIC"] == 1 and texts["default"][1]["BC_DETERMINISTIC"] == 0
    assert texts["more"][1]["BC_HIST_KERNEL"] == '"bincount_hist_det_i64_f64"'
