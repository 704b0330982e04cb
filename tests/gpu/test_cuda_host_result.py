"""A GPU bincount whose result goes to the host: one copy, one wait, no allocation (issue 28, item 2).

``HostFromGpu(GpuBincount(...))`` becomes ``GpuBincount(..., to_host=True)``
(the rewrite ``local_gpu_bincount_to_host``): the bins and the status come
back in one device-to-host copy into page-locked memory, behind the call's
one wait, on device and page-locked memory kept from call to call.  The
counts of waits, copies and allocations are read off the emulation (the fake
driver and the fake CuPy); the results are checked against NumPy on a real
GPU too.  When the result stays on the GPU, a call waits once (for its
length and errors) and its buffer is cleared by ``cuMemsetD32Async``.
"""
import ctypes
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, EMULATED, WHY, cupy, run_while_waiting  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.gpu.op import GpuBincount  # noqa: E402
from aesara_bincount_core.gpu.transfer import host_from_gpu  # noqa: E402
from aesara_bincount_core.semantics import reference_bincount  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
needs_emulation = pytest.mark.skipif(not EMULATED, reason="reads the emulation's counters")


def _driver():
    lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
    lib.fake_cuda_counter.restype = ctypes.c_longlong
    return lib


def activity():
    """What the device has been asked so far: waits (stream synchronizations,
    CuPy's own, copies into pageable memory), device-to-host copies, CuPy
    allocations, page-locked allocations, memsets."""
    lib, c = _driver(), cupy().counters
    return np.array([
        c["sync"] + lib.fake_cuda_counter(9),
        lib.fake_cuda_counter(2) + c["d2h"],
        c["alloc"],
        lib.fake_cuda_counter(8),
        lib.fake_cuda_counter(3),
    ])  # fmt: skip


def per_call(fn, calls=3):
    """activity() per call of fn, after one call; and fn's last result."""
    out = fn()
    before = activity()
    for _ in range(calls):
        out = fn()
    return (activity() - before) / calls, out


def op_names(f):
    return [str(node.op) if "Bincount" in type(node.op).__name__ else type(node.op).__name__
            for node in f.maker.fgraph.toposort()]  # fmt: skip


def seed_data(n=2000, bins=300):
    x = np.arange(n, dtype="int64") * 7919 % bins
    v = np.linspace(0.0, 1.0, n)
    return x, v


def seed_function(x, v, out=lambda r: r):
    gx, gv = gpu.shared(cupy().asarray(x)), gpu.shared(cupy().asarray(v))
    theta = at.dscalar("theta")
    return aesara.function([theta], out(bincount(gx, weights=at.exp(-theta * gv))))


# -- the seed's loop -------------------------------------------------------------


def test_seed_loop_result_on_the_host():
    x, v = seed_data()
    f = seed_function(x, v)
    names = op_names(f)
    assert "HostFromGpu" not in names and any("to_host=True" in n for n in names), names
    for theta in (0.5, -1.25):
        got = f(theta)
        assert type(got) is np.ndarray
        np.testing.assert_allclose(got, np.bincount(x, np.exp(-theta * v)), rtol=1e-12)


@needs_emulation
def test_seed_loop_one_wait_one_copy_no_allocation():
    x, v = seed_data()
    f = seed_function(x, v)
    counts, got = per_call(lambda: f(0.5))
    waits, d2h, cupy_allocs, pinned_allocs, memsets = counts
    assert (waits, d2h, cupy_allocs, pinned_allocs) == (1, 1, 0, 0), counts
    assert memsets == 1  # the kept buffer is cleared on the stream, by the driver
    np.testing.assert_allclose(got, np.bincount(x, np.exp(-0.5 * v)), rtol=1e-12)
    f.trust_input = True
    counts, _ = per_call(lambda: f(np.array(0.5)))
    assert tuple(counts[:4]) == (1, 1, 0, 0), counts


@needs_emulation
def test_result_on_the_gpu_waits_once_and_clears_from_c():
    """A gpu_from_host output and an update of a GPU shared variable: one wait
    (the length and the error check), no copy of the result, the buffer
    cleared by cuMemsetD32Async, not by cupy.zeros."""
    cp = cupy()
    x, v = seed_data()
    f = seed_function(x, v, gpu.gpu_from_host)
    counts, got = per_call(lambda: f(0.5))
    waits, d2h, _, pinned_allocs, memsets = counts
    assert (waits, d2h, pinned_allocs, memsets) == (1, 1, 0, 1), counts  # the copy: the status
    np.testing.assert_allclose(cp.asnumpy(got), np.bincount(x, np.exp(-0.5 * v)), rtol=1e-12)

    gx, gv = gpu.shared(cp.asarray(x)), gpu.shared(cp.asarray(v))
    acc = gpu.shared(cp.zeros(300, dtype="float64"))
    theta = at.dscalar("theta")
    g = aesara.function([theta], [], updates={acc: acc + bincount(gx, weights=at.exp(-theta * gv), minlength=300)})
    counts, _ = per_call(lambda: g(0.5), calls=2)
    assert counts[0] == 1 and counts[3] == 0, counts
    np.testing.assert_allclose(cp.asnumpy(acc.get_value(borrow=True)),
                               3 * np.bincount(x, np.exp(-0.5 * v)), rtol=1e-12)  # fmt: skip


# -- every conversion, growth, errors ----------------------------------------------------


@pytest.mark.parametrize(
    "out_dtype, weighted",
    [("int8", False), ("uint16", False), ("int32", False), ("int64", False), ("float32", False),
     ("float64", False), ("int16", True), ("uint8", True), ("float32", True), ("uint64", True)],
)  # fmt: skip
def test_host_output_of_every_accumulation(out_dtype, weighted):
    """The conversions the finish kernels make (counts in 32 or 64 bits to a
    narrow or float output, float32 sums kept in float64) done on the host:
    int8 counts wrap (300 ones give 44), float32 rounds once."""
    cp = cupy()
    rng = np.random.default_rng(3)
    x = np.concatenate([np.ones(300, dtype="int32"), rng.integers(0, 40, 500).astype("int32")])
    gx = gpu.shared(cp.asarray(x))
    if weighted:
        w = (rng.standard_normal(x.size) * 100).astype(out_dtype) if out_dtype.startswith("float") else (
            rng.integers(0, 250, x.size).astype(out_dtype))
        out = GpuBincount("bincount", out_dtype)(gx, 50, gpu.shared(cp.asarray(w)))
    else:
        w = None
        out = GpuBincount("bincount", out_dtype)(gx, 50)
    f = aesara.function([], host_from_gpu(out))
    assert any("to_host=True" in n for n in op_names(f)), op_names(f)
    got = f()
    expected = reference_bincount(x, 50, w, out_dtype=out_dtype)
    assert got.dtype == expected.dtype
    if out_dtype.startswith("float") and weighted:
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    else:
        np.testing.assert_array_equal(got, expected)


def test_larger_values_than_the_last_call_and_empty_x():
    cp = cupy()
    gx = gpu.shared(cp.asarray(np.array([3, 1, 3], dtype="int64")))
    f = aesara.function([], bincount(gx))
    np.testing.assert_array_equal(f(), [0, 1, 0, 2])
    big = np.array([5, 70_000, 2, 70_000], dtype="int64")  # beyond the kept bins: a second round
    gx.set_value(cp.asarray(big))
    np.testing.assert_array_equal(f(), np.bincount(big))
    gx.set_value(cp.asarray(np.array([0, 0, 4], dtype="int64")))
    np.testing.assert_array_equal(f(), [2, 0, 0, 0, 1])
    gx.set_value(cp.asarray(np.zeros(0, dtype="int64")))
    got = f()
    assert type(got) is np.ndarray and got.shape == (0,)


@needs_emulation
def test_a_second_round_waits_twice_then_once():
    cp = cupy()
    gx = gpu.shared(cp.asarray(np.array([1, 2], dtype="int64")))
    f = aesara.function([], bincount(gx))
    f()
    gx.set_value(cp.asarray(np.array([9000, 1], dtype="int64")))
    before = activity()
    got = f()
    assert (activity() - before)[0] == 2 and got.shape == (9001,)
    counts, got = per_call(f)
    assert counts[0] == 1 and got[9000] == 1


def test_output_too_large_for_the_staging_takes_the_device_path():
    cp = cupy()
    x = np.array([0, 2_200_000, 7], dtype="int64")  # 17.6 MB of int64 bins
    gx = gpu.shared(cp.asarray(x))
    f = aesara.function([], bincount(gx))
    got = f()
    assert type(got) is np.ndarray and got.shape == (2_200_001,)
    assert got.sum() == 3 and got[7] == 1 and got[-1] == 1


def test_errors_leave_the_function_usable():
    cp = cupy()
    gx = gpu.shared(cp.asarray(np.array([1, 2], dtype="int32")))
    f = aesara.function([], bincount(gx))
    np.testing.assert_array_equal(f(), [0, 1, 1])
    gx.set_value(cp.asarray(np.array([4, -3, 1], dtype="int32")))
    with pytest.raises(ValueError, match="-3"):
        f()
    gx.set_value(cp.asarray(np.array([2, 2], dtype="int32")))
    np.testing.assert_array_equal(f(), [0, 0, 2])


@needs_emulation
def test_two_threads_at_once_share_no_staging_and_leak_none():
    """Two calls of one compiled module wait at the same time: the second finds
    the kept staging taken and uses its own, which it frees at its end (the
    page-locked allocations alive stay the same from round to round)."""
    cp, lib = cupy(), _driver()
    xs = [np.array([1, 2, 10], dtype="int32"), np.array([5, 3000, 3000, 7], dtype="int32")]
    fs = [aesara.function([], bincount(gpu.shared(cp.asarray(x)))) for x in xs]
    for f in fs:
        f()
    live = []
    for _ in range(3):
        results, errors, waiting = run_while_waiting(lib, fs)
        assert waiting == 2 and not errors, errors
        for i, x in enumerate(xs):
            np.testing.assert_array_equal(results[i], np.bincount(x))
        live.append(lib.fake_cuda_counter(10))
    assert live[0] == live[-1], live


# -- the deterministic sum (issue 40): one wait per call too ------------------------


def _det_pair(x, v):
    """The seed's loop under deterministic="more" with its result to the host
    (one wait) and on the GPU (the device path), on the same shared data;
    and the shared variables."""
    gx, gv = gpu.shared(cupy().asarray(x)), gpu.shared(cupy().asarray(v))
    theta = at.dscalar("theta")
    out = bincount(gx, weights=at.exp(-theta * gv))
    with aesara.config.change_flags(deterministic="more"):
        return aesara.function([theta], out), aesara.function([theta], gpu.gpu_from_host(out)), gx, gv


@needs_emulation
def test_deterministic_seed_loop_waits_once_launches_twice_allocates_nothing():
    """The window pass and its finish are queued behind no wait, then one copy
    of the bins and the status into the kept page-locked staging: per call 1
    wait, 1 copy, 1 memset (the status), 2 launches, no allocation; the bits
    those of the device path."""
    x, v = seed_data()
    f, on_gpu, _, _ = _det_pair(x, v)
    assert any("to_host=True" in n and "more" in n for n in op_names(f)), op_names(f)
    f(0.5)
    launches = _driver().fake_cuda_counter(0)
    counts, got = per_call(lambda: f(0.5), calls=2)
    launches = (_driver().fake_cuda_counter(0) - launches) / 3
    waits, d2h, cupy_allocs, pinned_allocs, memsets = counts
    assert (waits, d2h, cupy_allocs, pinned_allocs, memsets) == (1, 1, 0, 0, 1), counts
    assert launches == 2, launches
    assert got.tobytes() == cupy().asnumpy(on_gpu(0.5)).tobytes()
    np.testing.assert_allclose(got, np.bincount(x, np.exp(-0.5 * v)), rtol=1e-12)


@needs_emulation
def test_deterministic_windows_longer_outputs_and_the_bucket_path_keep_the_bits():
    """More bins than one window (the emulated device's window is 1,816
    float64 bins, as an H100's: two passes and two finishes before the one
    wait), values past the guessed length (that call waits once in vain,
    then redoes the sum on the device path, which waits for the length and
    for the copy; later calls wait once) and more than 4,096 bins (the
    bucket path: the device path, two waits): the device path's bits each
    time, and NumPy's sums."""
    cp, lib = cupy(), _driver()
    x, v = seed_data(n=6000, bins=3000)
    f, on_gpu, gx, gv = _det_pair(x, v)
    f(0.5)
    for top, waits in ((3000, (1, 1)), (3600, (3, 1)), (9000, (3, 2))):
        xs = x * top // 3000
        xs[-1] = top - 1
        gx.set_value(cp.asarray(xs))
        first = activity()[0]
        got = f(0.5)
        second, launches = activity()[0], lib.fake_cuda_counter(0)
        f(0.5)
        assert (second - first, activity()[0] - second) == waits, (top, waits)
        if top == 3000:
            assert lib.fake_cuda_counter(0) - launches == 4  # a pass and a finish per window
        assert got.shape == (top,) and got.tobytes() == cp.asnumpy(on_gpu(0.5)).tobytes(), top
        np.testing.assert_allclose(got, np.bincount(xs, np.exp(-0.5 * v)), rtol=1e-12)
