"""GpuScatterAdd, the scatter-add of rows on the GPU, through ``aesara.function``.

Every branch of its host code (``c_code/cuda_host/gpu_scatter_add_op.c``) and of
its launcher (``c_code/cuda_host/scatter_add_launch.h``): the three forms (onto
zeros, onto a copy of the base, in place), the layouts of the output and of
the increments (used as they are, or copied), empty inputs, every error
(which leaves the shared variables as they were) and failed driver calls;
and the kernel's cases: narrow, wide (a warp per row, several column tiles)
and hot rows, several blocks, every output dtype, wrapping integer sums and
float32 subnormals.  Results are compared with ``np.add.at``
(``rows_cases.assert_same_rows``: exact for integers, the bound of any
order of summation for floats).  Which path a call took is read off the
fake driver's counters on the CPU emulation (``tests/test_gpu_emulated.py``).
"""
import ctypes
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, EMULATED, WHY, cupy, size  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount.gpu import GpuScatterAdd  # noqa: E402
from aesara_bincount_core.semantics import OUT_DTYPES, reference_scatter_add  # noqa: E402
from backends import GPU  # noqa: E402
from rows_cases import assert_same_rows, expected_rows, rows_case  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
needs_emulation = pytest.mark.skipif(not EMULATED, reason="reads the fake driver's counters")
RNG = np.random.default_rng(14)


def driver():
    return ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])


def counts():
    """The fake driver's counters: launches, syncs, DtoH, memsets, DtoD, loads, waves, shared."""
    out = (ctypes.c_longlong * 8)()
    driver().fake_cuda_counters(out)
    return np.array(out)


def gpu_nodes(case):
    nodes = [n for n in case.fn.maker.fgraph.toposort() if isinstance(n.op, GpuScatterAdd)]
    assert nodes, [type(n.op).__name__ for n in case.fn.maker.fgraph.toposort()]
    return nodes


# -- forms and layouts ------------------------------------------------------------------


@pytest.mark.parametrize("form", ["zeros", "base", "inplace"])
@pytest.mark.parametrize("ndim", [2, 3])
def test_forms_run_on_the_gpu_with_one_wait(form, ndim):
    case = rows_case(GPU, form, "float64", ndim, "float64", ndim, "int64")
    (node,) = gpu_nodes(case)
    assert node.op.onto == ("zeros" if form == "zeros" else "base")
    assert node.op.inplace == (form == "inplace")
    shape = (7,) + (3, 2)[: ndim - 1]
    base = RNG.integers(-9, 9, shape).astype("float64")
    inc = RNG.integers(-9, 9, (9,) + shape[1:]).astype("float64")
    idx = np.array([0, 6, -1, 3, 0, 0, -7, 2, 2])
    before = counts() if EMULATED else None
    got = case.run(np.zeros_like(base) if form == "zeros" else base, inc, idx, nrows=7)
    expected = expected_rows(np.zeros_like(base) if form == "zeros" else base, inc, idx)
    np.testing.assert_array_equal(got, expected)  # small integers: exact in any order
    if EMULATED:
        launches, syncs, _, memsets = (counts() - before)[:4]
        assert launches == 2, "a check and an add"
        assert syncs == 1, "the one wait of the call (the reads of the result are NumPy copies)"
        assert memsets == 1, "the status is zeroed by cuMemsetD32Async"


#: (name, base view, increments given as (array, index), why)
LAYOUTS = [
    ("contiguous rows", None, lambda n, d: (RNG.standard_normal((n, d)), slice(None))),
    ("one value per row", None, lambda n, d: (RNG.standard_normal((n, 1)), slice(None))),
    ("one row for all", None, lambda n, d: (RNG.standard_normal((1, d)), slice(None))),
    ("strided rows", None, lambda n, d: (RNG.standard_normal((2 * n, d)), slice(None, None, 2))),
    ("reversed rows", None, lambda n, d: (RNG.standard_normal((n, d)), slice(None, None, -1))),
    (
        "columns not contiguous: copied",
        None,
        lambda n, d: (RNG.standard_normal((n, 2 * d)), (slice(None), slice(None, None, -2))),
    ),
]


@pytest.mark.parametrize("form", ["zeros", "base", "inplace"])
@pytest.mark.parametrize("layout", [name for name, _, _ in LAYOUTS])
def test_increment_layouts(form, layout):
    make = {name: m for name, _, m in LAYOUTS}[layout]
    case = rows_case(GPU, form, "float64", 2, "float64", 2, "int32")
    n, v, d = 40, 6, 5
    inc = make(n, d)
    inc_value = inc[0][inc[1]]
    base = RNG.standard_normal((v, d)) + 0.0
    idx = RNG.integers(-v, v, n).astype("int32")
    got = case.run(np.zeros((v, d)) if form == "zeros" else base, inc, idx, nrows=v)
    assert_same_rows(got, np.zeros((v, d)) if form == "zeros" else base, inc_value, idx, layout)


@pytest.mark.parametrize("inc_ndim", [0, 1])
def test_lower_rank_increments_broadcast(inc_ndim):
    case = rows_case(GPU, "inplace", "float32", 3, "float32", inc_ndim, "uint8")
    base = RNG.integers(-9, 9, (5, 2, 3)).astype("float32")
    inc = np.float32(2.5) if inc_ndim == 0 else np.arange(3, dtype="float32")
    idx = np.array([4, 4, 0, 1, 4], dtype="uint8")
    got = case.run(base, np.asarray(inc), idx)
    np.testing.assert_array_equal(got, expected_rows(base, inc, idx))


def test_inplace_base_with_rows_not_contiguous_is_copied_back():
    case = rows_case(GPU, "inplace", "int64", 2, "int64", 2, "int16")
    wide = RNG.integers(-99, 99, (6, 8))
    view = (wide, (slice(None, None, -1), slice(None, None, 2)))  # reversed rows, every other column
    inc = RNG.integers(-99, 99, (10, 4))
    idx = np.array([0, 5, 5, -6, 2, 5, 1, 1, 1, 3], dtype="int16")
    got = case.run(view, inc, idx)
    np.testing.assert_array_equal(got, expected_rows(wide[::-1, ::2], inc, idx))


def test_strided_and_reversed_indices():
    case = rows_case(GPU, "base", "float64", 2, "float64", 2, "uint32")
    base = RNG.integers(-9, 9, (4, 3)).astype("float64")
    idx = (np.array([9, 3, 9, 0, 9, 3, 9, 1], dtype="uint32"), slice(None, None, -2))
    inc = RNG.integers(-9, 9, (4, 3)).astype("float64")
    got = case.run(base, inc, idx)
    np.testing.assert_array_equal(got, expected_rows(base, inc, idx[0][idx[1]]))


@pytest.mark.parametrize("form", ["zeros", "base", "inplace"])
@pytest.mark.parametrize("shape, n", [((4, 3), 0), ((4, 0), 5), ((0, 3), 0)])
def test_empty_inputs(form, shape, n):
    case = rows_case(GPU, form, "float32", 2, "float32", 2, "int64")
    base = RNG.integers(-9, 9, shape).astype("float32")
    idx = np.arange(n) % max(shape[0], 1)
    inc = np.ones((n, shape[1]), dtype="float32")
    before = counts() if EMULATED else None
    got = case.run(np.zeros_like(base) if form == "zeros" else base, inc, idx, nrows=shape[0])
    np.testing.assert_array_equal(got, expected_rows(np.zeros_like(base) if form == "zeros" else base, inc, idx))
    if EMULATED:
        launches = (counts() - before)[0]
        assert launches == (1 if n else 0), "empty rows: the indices are still checked, nothing added"


# -- the kernel's cases -----------------------------------------------------------------


@pytest.mark.parametrize(
    "n, v, d, kind",
    [
        (300, 50, 1, "uniform"),  # 32 rows per warp step
        (300, 50, 3, "uniform"),  # 10 rows per step, 2 lanes idle
        (300, 50, 12, "sorted"),  # 2 rows per step, runs of equal indices
        (200, 30, 64, "uniform"),  # a warp per row, 2 columns per lane
        (100, 20, 300, "uniform"),  # a warp per row, 3 column tiles
        (size(20000, 3000), 7, 8, "hot"),  # hot rows: every index one of 2
        (size(20000, 3000), 100, 16, "equal"),  # every index the same row
        (size(40000, 4000), 500, 8, "uniform"),  # several blocks
    ],
)
def test_rows_narrow_wide_and_hot(n, v, d, kind):
    case = rows_case(GPU, "inplace", "float64", 2, "float64", 2, "int64")
    rng = np.random.default_rng(n + v + d)
    idx = {
        "uniform": rng.integers(-v, v, n),
        "sorted": np.sort(rng.integers(0, v, n)),
        "hot": rng.choice([1, -2], n),
        "equal": np.full(n, v // 2),
    }[kind]
    base = rng.standard_normal((v, d)) + 0.0
    inc = rng.standard_normal((n, d))
    got = case.run(base, inc, idx)
    assert_same_rows(got, base, inc, idx, f"{n}x{d} {kind}")


@pytest.mark.parametrize("dtype", OUT_DTYPES)
@pytest.mark.parametrize("idx_dtype", ["int8", "uint16", "int32", "uint64"])
def test_every_output_and_index_dtype(dtype, idx_dtype):
    case = rows_case(GPU, "base", dtype, 2, dtype, 2, idx_dtype)
    info = np.iinfo(dtype) if dtype[0] in "iu" else None
    lo, hi = (max(info.min, -100), min(info.max, 100)) if info else (-100, 100)
    base = RNG.integers(lo, hi, (9, 5)).astype(dtype)
    inc = RNG.integers(lo, hi, (60, 5)).astype(dtype)
    idx = RNG.integers(0 if idx_dtype[0] == "u" else -9, 9, 60).astype(idx_dtype)
    got = case.run(base, inc, idx)
    np.testing.assert_array_equal(got, expected_rows(base, inc, idx))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint64"])
def test_integer_sums_wrap(dtype):
    """8- and 16-bit outputs go through the compare-and-swap on their 32-bit word:
    neighbouring elements, added by other warps, must keep their sums."""
    case = rows_case(GPU, "inplace", dtype, 2, dtype, 2, "int32")
    info = np.iinfo(dtype)
    base = np.full((5, 3), info.max, dtype=dtype)
    inc = np.full((700, 3), info.max // 3 + 1, dtype=dtype)
    idx = (np.arange(700) % 5).astype("int32")
    got = case.run(base, inc, idx)
    np.testing.assert_array_equal(got, expected_rows(base, inc, idx))


def test_float32_subnormals_are_kept():
    case = rows_case(GPU, "zeros", "float32", 2, "float32", 2, "int64")
    tiny = np.float32(1e-40)
    inc = np.full((64, 40), tiny, dtype="float32")
    idx = np.zeros(64, dtype="int64")
    got = case.run(np.zeros((2, 40), dtype="float32"), inc, idx, nrows=2)
    np.testing.assert_allclose(got[0], np.float32(64 * 1e-40), rtol=1e-5)
    assert (got[1] == 0).all()



@pytest.mark.parametrize("path, v, n", [("float64 scratch", 6, 300), ("compare-and-swap", 400, 60)])
def test_float32_rows_paths(path, v, n):
    """float32 rows go through a float64 scratch when the output has at most
    BC_CUDA_ROWS_SCRATCH_ROWS_PER_INDEX rows per index (check and fill, adds,
    finish: 3 launches, one wait), else through the batched compare-and-swap
    (2 launches).  Either way: np.add.at within the float bound, a hot row,
    subnormals kept, -0.0 rows that receive only -0.0 stay -0.0, untouched
    rows (NaN among them) unchanged."""
    case = rows_case(GPU, "inplace", "float32", 2, "float32", 2, "int32")
    rng = np.random.default_rng(v)
    d = 40  # a tile's columns beyond the row end are masked off
    base = rng.standard_normal((v, d)).astype("float32")
    base[0], base[1], base[v - 1, :3] = -0.0, 1e-39, np.nan
    idx = np.where(rng.random(n) < 0.7, 2, rng.integers(2, v - 1, n)).astype("int32")  # hot row 2
    idx[:4] = [0, 0, 1, 1]
    inc = rng.standard_normal((n, d)).astype("float32")
    inc[:2], inc[2:4] = -0.0, 1e-40  # row 0: -0.0 only; row 1: subnormals
    before = counts() if EMULATED else None
    got = case.run(base, inc, idx)
    assert_same_rows(got, base, inc, idx, path)
    assert np.signbit(got[0]).all() and (got[0] == 0).all()
    np.testing.assert_array_equal(got[1], np.float32(1e-39) + np.float32(1e-40) + np.float32(1e-40))
    np.testing.assert_array_equal(got[v - 1], base[v - 1])
    if EMULATED:
        launches, syncs = (counts() - before)[:2]
        assert (launches, syncs) == ((3, 1) if path == "float64 scratch" else (2, 1))


@pytest.mark.parametrize("form,dtype", [("base", "float32"), ("inplace", "float64")])
@pytest.mark.parametrize("d", [1, 3, 40])
def test_signed_zeros_as_np_add_at(form, dtype, d):
    """-0.0 is the additive identity: a -0.0 base that receives only -0.0 stays
    -0.0, one +0.0 among its terms makes it +0.0 (np.add.at; the running sums
    used to start at +0.0, which turned every such row into +0.0)."""
    case = rows_case(GPU, form, dtype, 2, dtype, 2, "int64")
    base = np.full((5, d), -0.0, dtype=dtype)
    base[1] = 0.0
    inc = np.full((8, d), -0.0, dtype=dtype)
    inc[6] = 0.0
    # rows 0 and 2: -0.0 + -0.0 ...; row 1: +0.0 base; row 3: one +0.0 increment; row 4: untouched
    idx = np.array([0, 0, 1, 2, 2, 2, 3, 3])
    got = case.run(base, inc, idx)
    expected = expected_rows(base, inc, idx)
    assert np.signbit(expected[[0, 2, 4]]).all() and not np.signbit(expected[[1, 3]]).any()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    np.testing.assert_array_equal(got, expected)


# -- errors -----------------------------------------------------------------------------


def _fails_and_keeps(case, base, inc, idx, exc_type, nrows=None):
    """Run, expect exc_type with the reference's message, and check W is unchanged."""
    zeros = np.zeros((nrows if nrows is not None else base.shape[0],) + base.shape[1:], dtype=base.dtype)
    with pytest.raises(exc_type) as got:
        case.run(zeros if case.form == "zeros" else base, inc, idx, nrows=nrows)
    with pytest.raises(exc_type) as want:
        reference_scatter_add(
            zeros if case.form == "zeros" else base, inc, idx, onto="base"
        )
    assert str(got.value).splitlines()[0] == str(want.value)
    now = GPU.get(case.W)
    np.testing.assert_array_equal(now, zeros if case.form == "zeros" else base, "the base changed")


@pytest.mark.parametrize("form", ["zeros", "base", "inplace"])
@pytest.mark.parametrize("idx_dtype, bad", [("int64", -8), ("int64", 7), ("uint8", 255), ("int8", -128)])
def test_bad_index_raises_before_anything_is_written(form, idx_dtype, bad):
    case = rows_case(GPU, form, "float64", 2, "float64", 2, idx_dtype)
    base = RNG.integers(-9, 9, (7, 3)).astype("float64")
    idx = np.array([0, 1, 6, bad, 2, bad], dtype=idx_dtype)
    inc = np.ones((6, 3))
    before = counts() if EMULATED else None
    _fails_and_keeps(case, base, inc, idx, IndexError, nrows=7)
    if EMULATED:
        launches, memsets = (counts() - before)[[0, 3]]
        assert launches == 2, "the check and the add, queued together (the add exits at once)"
        assert memsets == 1, "the status is zeroed by cuMemsetD32Async"


@needs_emulation
def test_a_call_inside_a_cuda_graph_capture_raises_and_queues_nothing():
    """The call waits for its stream once, which a CUDA graph capture forbids:
    it checks cuStreamIsCapturing first and raises, with nothing queued."""
    case = rows_case(GPU, "inplace", "float64", 2, "float64", 2, "int64")
    base = RNG.integers(-9, 9, (5, 2)).astype("float64")
    inc, idx = np.ones((3, 2)), np.array([0, 4, 4])
    case.run(base, inc, idx)  # the kernels of this context are loaded
    before = counts()
    driver().fake_cuda_set_capturing(1)
    try:
        with pytest.raises(RuntimeError, match="captured into a CUDA graph"):
            case.run(base, inc, idx)
    finally:
        driver().fake_cuda_set_capturing(0)
    assert (counts() - before)[[0, 1, 3]].tolist() == [0, 0, 0], "nothing queued, no wait"
    np.testing.assert_array_equal(GPU.get(case.W), base)
    np.testing.assert_array_equal(case.run(base, inc, idx), expected_rows(base, inc, idx))


@pytest.mark.parametrize("form", ["zeros", "base", "inplace"])
def test_increments_that_do_not_broadcast_and_index_error_first(form):
    case = rows_case(GPU, form, "float32", 2, "float32", 2, "int64")
    base = np.zeros((4, 3), dtype="float32")
    _fails_and_keeps(case, base, np.ones((3, 3), "float32"), np.array([0, 1]), ValueError, nrows=4)
    _fails_and_keeps(case, base, np.ones((3, 3), "float32"), np.array([0, 9]), IndexError, nrows=4)


def test_negative_shape_of_the_zero_filled_base():
    case = rows_case(GPU, "zeros", "float64", 2, "float64", 2, "int64")
    gpu_nodes(case)
    GPU.set(case.W, np.zeros((1, 3)))
    GPU.set(case.G, np.ones((1, 3)))
    GPU.set(case.I, np.zeros(1, dtype="int64"))
    with pytest.raises(ValueError, match="negative|shape"):
        case.fn(-2)


@needs_emulation
@pytest.mark.parametrize("which, error", [(0, RuntimeError), (3, RuntimeError)])
def test_failed_driver_calls_leave_the_base_unchanged(which, error):
    """A failed launch of the check (0): RuntimeError, the base as it was.  A
    failed wait (3), which comes after the check, the copy of its status and
    the adds were queued: RuntimeError (the adds may have run; on a GPU the
    wait fails only when the context is lost).  Either way the next call works."""
    case = rows_case(GPU, "inplace", "float64", 2, "float64", 2, "int64")
    base = RNG.integers(-9, 9, (5, 2)).astype("float64")
    inc = np.ones((3, 2))
    idx = np.array([0, 4, 4])
    driver().fake_cuda_fail_next(which, 999)
    with pytest.raises(error, match="on the GPU"):
        case.run(base, inc, idx)
    if which == 0:
        np.testing.assert_array_equal(GPU.get(case.W), base)
    np.testing.assert_array_equal(case.run(base, inc, idx), expected_rows(base, inc, idx))


@needs_emulation
@pytest.mark.parametrize("wide", [False, True])
def test_failed_launch_of_the_add_leaves_the_base_unchanged(wide):
    """The check passes, the add's launch fails: RuntimeError and the base as it
    was, also when an in-place base with rows not contiguous goes through a copy."""
    case = rows_case(GPU, "inplace", "float64", 2, "float64", 2, "int64")
    whole = RNG.integers(-9, 9, (5, 4)).astype("float64")
    view = (whole, (slice(None), slice(None, None, 2))) if wide else (whole, slice(None))
    base = whole[view[1]]
    inc = np.ones((3,) + base.shape[1:])
    idx = np.array([0, 4, 4])
    case.run(view, inc, idx)  # the kernels of this context are loaded
    driver().fake_cuda_fail_after(0, 999, 1)  # the check's launch goes through, the add's fails
    with pytest.raises(RuntimeError, match="scatter-add of rows"):
        case.run(view, inc, idx)
    np.testing.assert_array_equal(GPU.get(case.W), base)
    np.testing.assert_array_equal(case.run(view, inc, idx), expected_rows(base, inc, idx))


# -- the graph --------------------------------------------------------------------------


def test_update_of_a_gpu_shared_variable_stays_on_the_gpu():
    """The sparse update ``W <- inc_subtensor(W[idx], -lr * g)``: GpuScatterAdd in
    place on W, no copy of W to the host and back."""
    W = gpu.shared(np.zeros((50, 4), dtype="float32"), name="W")
    idx = at.lvector("idx")
    g = at.fmatrix("g")
    f = aesara.function([idx, g], [], updates={W: at.inc_subtensor(W[idx], np.float32(-0.5) * g)})
    ops = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert "HostFromGpu" not in ops, ops
    (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuScatterAdd)]
    assert node.op.inplace
    storage = W.get_value(borrow=True, return_internal_type=True)
    f(np.array([1, 1, 49]), np.ones((3, 4), dtype="float32"))
    assert W.get_value(borrow=True, return_internal_type=True) is storage
    expected = np.zeros((50, 4), dtype="float32")
    np.add.at(expected, [1, 1, 49], -0.5)
    np.testing.assert_array_equal(W.get_value(), expected)


def test_excluding_gpu_bincount_keeps_the_cpu_op():
    W = gpu.shared(np.zeros((5, 2)), name="W")
    I = gpu.shared(np.array([0, 1]), name="I")
    mode = aesara.compile.mode.get_default_mode().excluding("gpu_bincount")
    f = aesara.function([], at.inc_subtensor(W[I], 1.0), mode=mode)
    names = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert "ScatterAdd" in names and "GpuScatterAdd" not in names, names
    np.testing.assert_array_equal(f(), expected_rows(np.zeros((5, 2)), np.ones(1), [0, 1]))


# -- devices ----------------------------------------------------------------------------


@needs_emulation
def test_two_devices_each_with_its_kernels_and_a_base_on_another_device():
    """A function per device (each context gets its own kernels in the host
    code's table); a base on device 1 used from device 0 is refused, unchanged."""
    cp = cupy()
    base = np.arange(12, dtype="float64").reshape(4, 3)
    fs = []
    for d in range(2):
        with cp.cuda.Device(d):
            W = gpu.shared(base.copy(), name=f"W{d}")
            I = gpu.shared(np.array([0, 3, 3]), name=f"I{d}")
            fs.append((W, aesara.function([], [], updates={W: at.inc_subtensor(W[I], 1.0)})))
    expected = expected_rows(base, np.ones(1), [0, 3, 3])
    for d, (W, f) in enumerate(fs):
        with cp.cuda.Device(d):
            f()
        np.testing.assert_array_equal(W.get_value(), expected)
    W1, f1 = fs[1]
    with pytest.raises(ValueError, match="lives on device 1, but the current device is 0"):
        f1()  # called on device 0
    np.testing.assert_array_equal(W1.get_value(), expected)


@needs_emulation
@pytest.mark.parametrize("with_id", [True, False])
def test_a_context_made_where_a_destroyed_one_was_gets_kernels_of_its_own(with_id, monkeypatch):
    """The kernel tables (the host code's, modules.py's) are keyed by
    cuCtxGetId, not by the CUcontext pointer, which a new context may reuse:
    after the fake driver replaces the context at the same address, both Ops
    load their kernels again (they used to launch the old context's:
    CUDA_ERROR_INVALID_HANDLE).  A driver without the call (FAKE_CUDA_NO_CTX_ID)
    keys them by the pointer, as before."""
    if not with_id:
        monkeypatch.setenv("FAKE_CUDA_NO_CTX_ID", "1")
    W = gpu.shared(np.zeros((4, 3), dtype="float32"), name="W")
    I = gpu.shared(np.array([0, 3, 3]), name="I")
    f = aesara.function([], at.bincount(I), updates={W: at.inc_subtensor(W[I], 1.0)})
    ops = {type(n.op).__name__ for n in f.maker.fgraph.toposort()}
    assert {"GpuBincount", "GpuScatterAdd"} <= ops, ops
    rounds = 2 if with_id else 1
    for r in range(rounds):
        if r:
            driver().fake_cuda_replace_context(0)
        np.testing.assert_array_equal(np.asarray(f()), [1, 0, 0, 2])
    want = expected_rows(np.zeros((4, 3), "float32"), np.ones(1), [0, 3, 3] * rounds)
    np.testing.assert_array_equal(GPU.get(W), want)
