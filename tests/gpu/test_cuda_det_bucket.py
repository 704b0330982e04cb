"""The bucket path of ``deterministic="more"`` (issue 31): float-weighted
bincounts into more than ``BC_CUDA_DET_PASS_MAX_BINS`` bins
(``c_code/cuda/bincount_det_bucket.cuh``).

Through ``aesara.function`` on GPU shared variables: results against
``numpy.bincount`` within the float tolerance (several windows, a hot window
split into chunks, empty windows, a handful of values into many bins, the
scatter-add form with negative indices, the fused seed's loop, float32
subnormals, signed zeros, NaN and inf), the same bits on every call, range
errors as in the window passes, and, on the emulation, the same bits when
the windows' counters no longer fit in shared memory (a small emulated
device).  The 20-call check across thread counts and block orders, and the
default mode's drift, are in ``test_cuda_deterministic.py`` (the cases
``many`` and ``seed_many`` of ``det_cases.py``).
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
from aesara_bincount.gpu import GpuBincount  # noqa: E402
from aesara_bincount_core.cuda import sources  # noqa: E402
from aesara_bincount_core.gpu.fused import GpuFusedBincount  # noqa: E402
from aesara_bincount_core.gpu.transfer import gpu_from_host  # noqa: E402
from test_cuda_deterministic import compile_more, ops, run_cases  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
RNG = np.random.default_rng(3131)
DET = sources.header_constants("cuda/bincount_det_defs.h", "BC_CUDA_DET_")
PASS_MAX = DET["PASS_MAX_BINS"]


def weighted(x, w, minlength=0):
    """The deterministic bincount of x and w on the GPU, as host arrays of
    two calls (which must be the same bits)."""
    f = compile_more(gpu_from_host(bincount(gpu.shared(x), weights=gpu.shared(w), minlength=minlength)))
    assert any(isinstance(op, GpuBincount) and op.deterministic == "more" for op in ops(f))
    first, second = cupy().asnumpy(f()), cupy().asnumpy(f())
    assert first.tobytes() == second.tobytes()
    return first


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", ["spread", "hot_window", "empty_windows", "few_values", "many_windows"])
def test_many_bins_match_numpy(dtype, shape):
    """Past PASS_MAX bins: several windows (1024 float64, 2048 float32 bins
    each); a hot window of 40,000 values (ten chunks of 4,096 entries);
    windows with no value; 5 values into 50,000 bins; 20,000 values into
    50,000 bins (49 float64 windows: the SCAN stage over 5 tiles, where up
    to 32 windows are scanned by each scatter block)."""
    n, top = {"few_values": (5, 50_000), "many_windows": (20_000, 50_000)}.get(shape, (20_000, 3 * PASS_MAX))
    x = RNG.integers(0, top, n)
    if shape == "hot_window":
        x = np.concatenate([x, RNG.integers(3000, 3000 + 900, 40_000)])
        x[RNG.random(len(x)) < 0.2] = 3001  # a hot bin inside it
    elif shape == "empty_windows":
        x = x[(x < 2000) | (x > 9000)]
    w = (RNG.standard_normal(len(x)) * 10.0 ** RNG.uniform(-8, 8, len(x))).astype(dtype)
    minlength = top if shape == "few_values" else 0
    got = weighted(x, w, minlength)
    expected = np.bincount(x, weights=w.astype(np.float64), minlength=minlength).astype(dtype)
    assert len(expected) > PASS_MAX
    assert_matches(got, expected, weights=w, x=x)
    if shape == "empty_windows":
        assert got[2000:9001].tobytes() == bytes(7001 * np.dtype(dtype).itemsize)  # +0.0


def test_many_bins_scatter_form_strided_indices_and_weights():
    n = 3 * PASS_MAX + 7
    idx = RNG.integers(-n, n, 18002)
    w = RNG.standard_normal(18002)
    f = compile_more(gpu_from_host(at.inc_subtensor(at.zeros(n)[gpu.shared(idx)[1::2]], gpu.shared(w)[::2])))
    got = cupy().asnumpy(f())
    expected = np.zeros(n)
    np.add.at(expected, idx[1::2], w[::2])
    assert_matches(got, expected, weights=w[::2], x=idx[1::2])
    assert got.tobytes() == cupy().asnumpy(f()).tobytes()


def test_many_bins_computed_x():
    """A fused x (``bincount(gx // 3 + 7, weights=gw)``): the count and
    scatter stages compute it again (the count also checks it)."""
    x = RNG.integers(0, 30_000, 12_000)
    w = RNG.standard_normal(12_000)
    f = compile_more(gpu_from_host(bincount(gpu.shared(x) // 3 + 7, weights=gpu.shared(w))))
    assert any(isinstance(op, GpuFusedBincount) for op in ops(f)), ops(f)
    got = cupy().asnumpy(f())
    assert_matches(got, np.bincount(x // 3 + 7, weights=w), weights=w, x=x // 3 + 7)
    assert got.tobytes() == cupy().asnumpy(f()).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_many_bins_seed_loop_matches_the_cpu(dtype):
    x = RNG.integers(0, 20_000, 30_000)
    x[:10_000] = RNG.integers(5000, 5100, 10_000)  # a hot window
    v = RNG.uniform(0, 5, 30_000).astype(dtype)
    theta = aesara.shared(np.asarray(0.7, dtype=dtype))
    f = compile_more(gpu_from_host(bincount(gpu.shared(x), weights=at.exp(-theta * gpu.shared(v)))))
    fused = [op for op in ops(f) if isinstance(op, GpuFusedBincount)]
    assert fused and fused[0].deterministic == "more", ops(f)
    w = np.exp(-np.asarray(0.7, dtype=dtype) * v)
    got = cupy().asnumpy(f())
    assert got.dtype == dtype and got.tobytes() == cupy().asnumpy(f()).tobytes()
    assert_matches(got, np.bincount(x, weights=w.astype(np.float64)).astype(dtype), weights=w, x=x)


def test_many_bins_float32_keeps_subnormals_signed_zeros_nan_and_inf():
    x = np.array([0, 0, 1, 2, 2, 3, 4, 4, 5, 9000, 9000, 9001])
    w = np.array([1e-40, 1e-40, -0.0, np.inf, 1.0, np.nan, np.inf, -np.inf, -1e-45, -0.0, -0.0, 1e-44],
                 dtype="float32")  # fmt: skip
    got = weighted(x, w, minlength=2 * PASS_MAX + 100)
    expected = np.zeros(len(got), dtype="float32")
    np.add.at(expected, x, w)
    np.testing.assert_array_equal(got, expected)
    assert not np.signbit(got[1]) and not np.signbit(got[9000]) and got[5] == -np.float32(1e-45)
    assert got[0] == np.float32(1e-40) * 2 and got[9001] == np.float32(1e-44)


def test_many_bins_range_errors_as_in_the_window_passes():
    x = RNG.integers(0, 10_000, 5000)
    x[4321] = -3
    f = compile_more(bincount(gpu.shared(x), weights=gpu.shared(np.ones(5000)), minlength=10_000))
    with pytest.raises(ValueError, match="-3"):
        f()
    idx = RNG.integers(0, 9000, 5000)
    idx[17] = 9000
    g = compile_more(at.inc_subtensor(at.zeros(9000)[gpu.shared(idx)], gpu.shared(np.ones(5000))))
    with pytest.raises(IndexError, match="9000"):
        g()
    x[4321] = 3  # the same function, fixed input, still works
    ok = compile_more(bincount(gpu.shared(x), weights=gpu.shared(np.ones(5000)), minlength=10_000))
    np.testing.assert_array_equal(ok(), np.bincount(x, minlength=10_000).astype("float64"))


@pytest.mark.long
@pytest.mark.skipif(not EMULATED, reason="needs the emulation's device settings")
def test_windows_counters_in_global_memory_give_the_same_bits():
    """With 8 KB of shared memory per block, 2,200,000 float64 bins (2,149
    windows) put the windows' counters and cursors in global memory and the
    sums in sub-windows of 64 bins, most of them skipped (no entry); with
    64 KB the scatter's offsets come from the cursors in turn: the bits of
    ``many`` are those of the default emulated device, where all of that is
    in shared memory (the offsets from the warps' rows of counts) and whole
    windows."""
    env = dict(DET_CASES_MANY_BINS="2200000", DET_CASES_ONLY="many", FAKE_CUDA_RUNNERS="2",
               FAKE_CUDA_BLOCK_ORDER="random")  # fmt: skip
    small = dict(FAKE_CUDA_SHARED_PER_SM="16384", FAKE_CUDA_SHARED_OPTIN="8192")
    # 64 KB: the cursors in shared memory but not the warps' rows of counts,
    # so the scatter's warps take their offsets in turn
    turns = dict(FAKE_CUDA_SHARED_PER_SM="65536", FAKE_CUDA_SHARED_OPTIN="65536")
    got = [run_cases("more", 1, **env, **extra) for extra in ({}, small, turns)]
    assert list(got[0]) == ["many"] and got[0]["many"] == got[1]["many"] == got[2]["many"], got


def test_the_previous_length_chooses_the_first_pass_either_way():
    """A call after one of many bins starts with a pass that only checks
    (its guess is the bucket path); when x then needs few bins, the window
    passes still count every bin, and the reverse."""
    x = RNG.integers(0, 9000, 6000)
    w = RNG.standard_normal(6000)
    gx = gpu.shared(x)
    f = compile_more(gpu_from_host(bincount(gx, weights=gpu.shared(w))))
    for values in (x, x % 100, x, x % 5000, x % 3):
        gx.set_value(values)
        assert_matches(cupy().asnumpy(f()), np.bincount(values, weights=w), weights=w, x=values)


def test_a_bad_value_found_by_the_count_raises_and_leaves_the_shared_variable():
    """Past PASS_MAX bins the first pass is the bucket path's count, which
    checks x as it counts (with a minlength of many bins, or after a call of
    many bins): a negative value raises ValueError naming it and the update
    of a GPU shared variable is not applied; x whose values pass the length
    the count guessed is counted again with more windows."""
    x = RNG.integers(0, 10_000, 9000)
    w = RNG.standard_normal(9000)
    gx, acc = gpu.shared(x), gpu.shared(np.zeros(12_000))
    step = compile_more([], updates={acc: acc + bincount(gx, weights=gpu.shared(w), minlength=12_000)})
    step()
    before = acc.get_value()
    assert_matches(before, np.bincount(x, weights=w, minlength=12_000), weights=w, x=x)
    bad = x.copy()
    bad[[4321, 8000]] = [-7, -9]
    gx.set_value(bad)
    with pytest.raises(ValueError, match="-7"):
        step()
    assert acc.get_value().tobytes() == before.tobytes()
    # the same after a call of many bins (the previous length's guess)
    f = compile_more(gpu_from_host(bincount(gx, weights=gpu.shared(w))))
    gx.set_value(x)
    assert_matches(cupy().asnumpy(f()), np.bincount(x, weights=w), weights=w, x=x)
    gx.set_value(bad)
    with pytest.raises(ValueError, match="-7"):
        f()
    grown = x * 3 + 1  # past the guessed windows: a second count
    gx.set_value(grown)
    assert_matches(cupy().asnumpy(f()), np.bincount(grown, weights=w), weights=w, x=grown)
