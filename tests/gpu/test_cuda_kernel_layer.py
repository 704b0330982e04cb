"""The stand-alone kernel layer (``bincount_cupy``) against the NumPy reference.

Runs on a real GPU, on the CPU emulation (``tests/test_gpu_emulated.py``),
or is skipped.  Imports no Aesara, so it also runs on a GPU machine whose
Python has NumPy 2 and CuPy 14 (``scripts/gpu_check.sh``:
``pytest --noconftest tests/gpu/test_cuda_kernel_layer.py``).
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import (  # noqa: E402
    AVAILABLE,
    EMULATED,
    INDEX_DTYPES,
    OUT_DTYPES,
    WHY,
    assert_matches,
    cupy,
    data,
    kernels,
    reference,
    size,
    to_host,
)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


def run(x, weights=None, n=0, mode="bincount", out_dtype=None, **kwargs):
    """bincount_cupy on device copies of NumPy inputs."""
    cp = cupy()
    xd = cp.asarray(x)
    wd = None if weights is None else cp.asarray(weights)
    return kernels.bincount_cupy(xd, wd, n, mode, out_dtype, **kwargs)


def check(x, weights=None, n=0, mode="bincount", out_dtype=None, **kwargs):
    got = run(x, weights, n, mode, out_dtype, **kwargs)
    assert_matches(got, reference(x, weights, n, mode, out_dtype), weights, x)
    return got


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
@pytest.mark.parametrize("kind", ["uniform", "equal", "skewed", "sorted"])
def test_counts_every_dtype(dtype, kind):
    check(data(kind, size(1_000_003, 20_011), 1000, dtype))


@pytest.mark.parametrize("n", [1, 2, 17, 4095, 4096, 4097, 65_537])
def test_sizes_small(n):
    check(data("uniform", n, 300, "int32", seed=n))


@pytest.mark.parametrize(
    "n,bins", [(10**6, 1000), (10**6, 10**6), (10**8, 1000), (10**8, 10**6), (10**7, 10**7)]
)
def test_sizes_large(n, bins):
    if EMULATED:
        pytest.skip("too large for the CPU emulation")
    for kind in ("uniform", "equal"):
        check(data(kind, n, bins, "int32", seed=1))


def test_many_bins():
    """1e7 bins (1e5 emulated): mostly global atomics, and a second pass."""
    bins = size(10**7, 10**5)
    x = data("uniform", size(2 * 10**7, 30_000), bins, "int64", seed=2)
    check(x)
    check(x, n=bins + 5)


@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
def test_count_into_every_out_dtype(out_dtype):
    """Counts wrap in narrow integers and round in floats, as NumPy's astype."""
    x = np.concatenate([np.full(size(70_000, 700), 3), np.arange(50)]).astype("int16")
    check(x, out_dtype=out_dtype)


@pytest.mark.parametrize("wdtype", OUT_DTYPES)
@pytest.mark.parametrize("xdtype", ["int8", "int32", "uint64"])
def test_weights_every_dtype(xdtype, wdtype):
    rng = np.random.default_rng(3)
    n = size(200_001, 5_003)
    x = rng.integers(0, 100, n).astype(xdtype)
    if wdtype.startswith("float"):
        w = rng.standard_normal(n).astype(wdtype)
    else:
        info = np.iinfo(wdtype)
        w = rng.integers(info.min, info.max, n, endpoint=True, dtype=wdtype)
    check(x, w)
    check(x[::3], w[::3])
    check(np.sort(x), w)


def test_minlength():
    x = data("uniform", size(100_000, 3000), 50, "uint8")
    for n in (0, 10, 50, 51, 10_000):
        got = check(x, n=n)
        assert got.shape[0] == max(50, n)


def test_empty():
    for n in (0, 7):
        got = check(np.zeros(0, "int32"), n=n)
        assert got.shape == (n,)
    check(np.zeros(0, "int8"), np.zeros(0, "float32"), n=3)


def test_strided_and_misaligned_views():
    cp = cupy()
    x = data("uniform", size(300_001, 9001), 777, "int64", seed=4)
    w = np.random.default_rng(5).random(x.size)
    xd, wd = cp.asarray(x), cp.asarray(w)
    for sl in (slice(None, None, 2), slice(None, None, -1), slice(1, None), slice(3, -5, 7)):
        got = kernels.bincount_cupy(xd[sl], wd[sl])
        assert_matches(got, reference(x[sl], w[sl]), w[sl], x[sl])
        got = kernels.bincount_cupy(xd[sl])
        assert_matches(got, reference(x[sl]))


def test_scatter_mode():
    rng = np.random.default_rng(6)
    n = 500
    idx = rng.integers(-n, n, size(100_000, 4000)).astype("int32")
    w = rng.standard_normal(idx.size)
    check(idx, None, n, "scatter")
    check(idx, w, n, "scatter")
    check(idx, w[:1], n, "scatter")
    check(idx, np.array(2.5), n, "scatter")
    check(idx.astype("int64") + n, None, 2 * n, "scatter", out_dtype="float32")
    check((np.abs(idx) % n).astype("uint16"), w, n, "scatter")


def test_second_pass_and_hints():
    """Values beyond the first pass's guess, and guesses from earlier calls."""
    x = np.concatenate([np.arange(5000), [123_456], np.arange(100)]).astype("int32")
    check(x)
    check(x, capacity_hint=10)
    check(x, capacity_hint=10**7)
    check(x, n=200_000)
    check(np.arange(10, dtype="uint32"), capacity_hint=10**6)


def test_reliability_two_values_far_apart():
    """[0, 28854311]: one pass of global atomics, no blocks x bins workspace."""
    x = np.array([0, 28854311], dtype="int32")
    got = check(x)
    assert got.shape == (28854312,)


def test_reliability_one_hot_bin():
    check(np.full(size(2**20, 2**16), 2048, dtype="int32"))
    check(np.full(size(2**20, 2**16), 2048, dtype="int32"), np.ones(size(2**20, 2**16), "float32"))


def test_negative_value_error_names_the_first():
    x = data("uniform", size(1_000_000, 20_000), 100, "int16", seed=7)
    x[size(700_001, 12_345)] = -3
    x[size(900_000, 15_000)] = -7
    x[size(10_000, 100) :: 9973] = np.where(np.arange(x[size(10_000, 100) :: 9973].size) % 2, -1, 5)
    first = int(np.flatnonzero(x < 0)[0])
    with pytest.raises(ValueError) as err:
        run(x)
    with pytest.raises(ValueError) as expected:
        reference(x)
    assert str(err.value) == str(expected.value)
    assert f"position {first}" in str(err.value)


def test_scatter_index_error_names_the_first():
    x = np.arange(size(100_000, 5000), dtype="int64") % 50
    x[size(60_000, 3000)] = 50
    x[size(70_000, 4000)] = -51
    with pytest.raises(IndexError) as err:
        run(x, None, 50, "scatter")
    with pytest.raises(IndexError) as expected:
        reference(x, None, 50, "scatter")
    assert str(err.value) == str(expected.value)
    x = np.array([3, 2**64 - 1], dtype="uint64")
    with pytest.raises(IndexError, match="18446744073709551615 at position 1"):
        run(x, None, 10, "scatter")


@pytest.mark.parametrize(
    "x", [np.array([1, 2**63], dtype="uint64"), np.array([5, 2**63 - 1], dtype="int64")]
)
def test_too_large_error(x):
    with pytest.raises(ValueError) as err:
        run(x)
    with pytest.raises(ValueError) as expected:
        reference(x)
    assert str(err.value) == str(expected.value)


def test_output_too_large_is_a_memory_error():
    with pytest.raises(MemoryError, match="does not fit in memory"):
        run(np.array([2**40], dtype="int64"))
    with pytest.raises(MemoryError):
        run(np.array([1], dtype="int64"), n=2**50)


def test_argument_errors():
    cp = cupy()
    x = cp.asarray(np.arange(10, dtype="int32"))
    for args, exc in [
        ((np.arange(3),), TypeError),
        ((cp.asarray(np.zeros((2, 2), "int32")),), ValueError),
        ((cp.asarray(np.zeros(3, "float32")),), TypeError),
        ((x, None, -1), ValueError),
        ((x, cp.asarray(np.ones(9))), ValueError),
        ((x, cp.asarray(np.ones(3)), 10, "scatter"), ValueError),
        ((x, None, 0, "histogram"), ValueError),
    ]:
        with pytest.raises(exc):
            kernels.bincount_cupy(*args)


def test_the_inputs_are_not_written():
    x = data("skewed", size(100_000, 5000), 1000, "int32")
    w = np.random.default_rng(8).random(x.size).astype("float32")
    cp = cupy()
    xd, wd = cp.asarray(x), cp.asarray(w)
    kernels.bincount_cupy(xd, wd)
    kernels.bincount_cupy(xd, wd, 1000, "scatter")
    assert np.array_equal(to_host(xd), x) and np.array_equal(to_host(wd), w)


def test_one_synchronization_per_call():
    """The kernel layer reads the status once; empty inputs need none."""
    if not EMULATED:
        pytest.skip("the CPU emulation counts synchronizations")
    cp = cupy()
    x = cp.asarray(np.concatenate([np.arange(100), [50_000]]).astype("int32"))
    for call in (
        lambda: kernels.bincount_cupy(x),  # needs a second pass
        lambda: kernels.bincount_cupy(x, n=60_000),  # fits the first pass
        lambda: kernels.bincount_cupy(x.astype("int8") % 100, out_dtype="float32"),  # finish kernel
    ):
        before = cp.counters["sync"]
        call()
        assert cp.counters["sync"] - before == 1
    before = cp.counters["sync"]
    kernels.bincount_cupy(cp.asarray(np.zeros(0, "int32")), n=4)
    assert cp.counters["sync"] == before


def test_a_failed_launch_raises_and_the_next_call_works():
    if not EMULATED:
        pytest.skip("the fake driver injects failures")
    import ctypes

    lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
    x = np.arange(1000, dtype="int32") % 17
    lib.fake_cuda_fail_next(0, 2)  # CUDA_ERROR_OUT_OF_MEMORY at the next launch
    with pytest.raises(MemoryError):
        run(x)
    lib.fake_cuda_fail_next(0, 719)  # any other error
    with pytest.raises(RuntimeError, match="cuLaunchKernel"):
        run(x)
    check(x)


def test_a_call_inside_a_cuda_graph_capture_raises():
    """Each call waits for its stream once, which a CUDA graph capture forbids:
    cuStreamIsCapturing is asked first, and nothing is queued."""
    if not EMULATED:
        pytest.skip("the fake driver pretends a capture is under way")
    import ctypes

    lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
    cp = cupy()
    x = cp.asarray(np.arange(100, dtype="int32") % 7)
    base, inc = cp.asarray(np.zeros((7, 2))), cp.asarray(np.ones((100, 2)))
    check(np.arange(100, dtype="int32") % 7)  # the kernels are loaded
    lib.fake_cuda_set_capturing(1)
    try:
        with pytest.raises(RuntimeError, match="captured into a CUDA graph"):
            kernels.bincount_cupy(x)
        with pytest.raises(RuntimeError, match="captured into a CUDA graph"):
            kernels.scatter_add_cupy(base, inc, x, inplace=True)
    finally:
        lib.fake_cuda_set_capturing(0)
    assert not to_host(base).any()
    check(np.arange(100, dtype="int32") % 7)


# -- the scatter-add of rows (scatter_add_cupy) ------------------------------------------


def _rows_reference(base, inc, idx):
    from aesara_bincount_core.semantics import reference_scatter_add

    return reference_scatter_add(base, inc, idx)


@pytest.mark.parametrize(
    "shape, inc_shape, idx_dtype",
    [
        ((6, 5), (40, 5), "int64"),  # narrow rows
        ((4, 70), (30, 70), "uint16"),  # wide rows: a warp per row
        ((5, 2, 3), (3,), "int8"),  # one row for all, broadcast
        ((5, 4), (25, 1), "uint64"),  # one value per row
        ((7,), (), "int32"),  # 1-D base, a scalar added at every index
    ],
)
@pytest.mark.parametrize("inplace", [False, True])
def test_scatter_add_cupy_matches_the_reference(shape, inc_shape, idx_dtype, inplace):
    cp = cupy()
    rng = np.random.default_rng(len(shape) + len(inc_shape))
    base = rng.integers(-9, 9, shape).astype("float64")
    inc = rng.integers(-9, 9, inc_shape).astype("float64")
    n = inc_shape[0] if len(inc_shape) == len(shape) else 25
    lo = 0 if idx_dtype.startswith("u") else -shape[0]
    idx = rng.integers(lo, shape[0], n).astype(idx_dtype)
    db = cp.asarray(base)
    got = kernels.scatter_add_cupy(db, cp.asarray(inc), cp.asarray(idx), inplace=inplace)
    assert (got is db) == inplace
    np.testing.assert_array_equal(to_host(got), _rows_reference(base, inc, idx))


def test_scatter_add_cupy_strided_inputs_and_copied_increments():
    cp = cupy()
    rng = np.random.default_rng(3)
    whole = rng.integers(-9, 9, (6, 8)).astype("float32")
    inc = rng.integers(-9, 9, (10, 8)).astype("float32")
    idx = rng.integers(-6, 6, 20)
    db = cp.asarray(whole)[:, ::2]  # rows not contiguous: a copy, copied back
    got = kernels.scatter_add_cupy(db, cp.asarray(inc)[:, ::-2], cp.asarray(idx)[::2], inplace=True)
    assert got is db
    expected = _rows_reference(whole[:, ::2], inc[:, ::-2], idx[::2])
    np.testing.assert_array_equal(to_host(db), expected)


@pytest.mark.parametrize("inplace", [False, True])
def test_scatter_add_cupy_errors_write_nothing(inplace):
    cp = cupy()
    base = np.arange(12, dtype="float64").reshape(4, 3)
    db = cp.asarray(base)
    with pytest.raises(IndexError, match="index -5 at position 1 is out of bounds for axis 0 with size 4"):
        kernels.scatter_add_cupy(db, cp.asarray(np.ones((3, 3))), cp.asarray(np.array([0, -5, 9])), inplace=inplace)
    with pytest.raises(IndexError, match="index 9 at position 2"):
        kernels.scatter_add_cupy(db, cp.asarray(np.ones((2, 3))), cp.asarray(np.array([0, 1, 9])), inplace=inplace)
    with pytest.raises(ValueError, match=r"increments of shape \(2, 3\) cannot be broadcast"):
        kernels.scatter_add_cupy(db, cp.asarray(np.ones((2, 3))), cp.asarray(np.array([0, 1, 2])), inplace=inplace)
    np.testing.assert_array_equal(to_host(db), base)


def test_rows_plan_keeps_its_promises():
    from aesara_bincount_core.cuda import launcher, sources

    c = sources.CONSTANTS
    for n, d, resident in [(1, 1, 1), (10**6, 8, 264), (100, 300, 4), (10**8, 1, 264), (5, 10**6, 8)]:
        check_blocks, blocks, lanes, chunk, tiles, items = launcher.rows_plan(n, d, resident)
        assert 1 <= check_blocks <= resident and 1 <= blocks <= resident
        assert lanes == min(32, d) and chunk >= 32 // lanes
        assert tiles * lanes * c["ROWS_TILE"] >= d > (tiles - 1) * lanes * c["ROWS_TILE"]
        assert items == -(-n // chunk) * tiles
