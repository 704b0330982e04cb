"""Every path of the GPU launcher, through ``aesara.function``, and the faults of issue 10.

The host code of GpuBincount (``c_code/cuda_host/gpu_bincount_op.c`` and the one
launcher, ``c_code/cuda_host/bincount_launch.h``) is driven through compiled
Aesara functions for every dtype of x, with counts and with weights: first
pass only, second pass, finish kernel, compact copy, the result as a view of
the buffer, empty x, and each error.  Which path a call took is read off the
fake driver's counters, so most of these tests need the CPU emulation
(``tests/test_gpu_emulated.py``); on a real GPU the results are still checked.

Faults of issue 10, each with a test that failed before its fix:

- a buffer released before the copy that reads it was queued (the second
  pass): the fake CuPy poisons freed memory (``test_second_pass_*``,
  ``test_the_emulation_catches_a_use_after_release``);
- float32 subnormals flushed by the global float atomic
  (``test_float32_subnormals_are_kept``);
- the GIL held while the stream is waited for, and one pinned status buffer
  for all calls (``test_*_while_the_stream_is_waited_for``);
- one static state for all devices (``test_two_devices_*``);
- an NVRTC newer than the driver (``test_nvrtc_newer_than_the_driver_*``);
- a launch plan that ignores the shared memory the driver reserves per block
  (``test_the_plan_fits_the_occupancy_calculator``);
- unaligned views sent entirely to scalar loads (``test_unaligned_views_*``).
"""
import ctypes
import os
import sys
import threading

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import (  # noqa: E402
    AVAILABLE, EMULATED, INDEX_DTYPES, WHY, assert_matches, cupy, reference, run_while_waiting,
)

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.compile.mode import Mode  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount.gpu import GpuArrayType, GpuBincount  # noqa: E402
from aesara_bincount_core.cuda import kernels, sources  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
needs_emulation = pytest.mark.skipif(not EMULATED, reason="reads the fake driver's counters")

C_MODE = Mode(linker="cvm", optimizer="fast_run")

#: (x dtype, weights dtype): every dtype of x, every dtype of the weights.
WEIGHTED = [
    ("int8", "float32"), ("int16", "float64"), ("int32", "int32"), ("int64", "int16"),
    ("uint8", "uint16"), ("uint16", "int64"), ("uint32", "uint8"), ("uint64", "uint32"),
    ("int32", "int8"), ("uint32", "uint64"),
]  # fmt: skip


# -- helpers --------------------------------------------------------------------


def driver():
    return ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])


def counts():
    """The fake driver's counters: launches, syncs, DtoH, memsets, DtoD, loads, waves, shared."""
    out = (ctypes.c_longlong * 8)()
    driver().fake_cuda_counters(out)
    return np.array(out)


def load_counts():
    out = (ctypes.c_longlong * 17)()
    driver().fake_cuda_load_counts(out)
    return np.array(out)


def compile_op(x_dtype, w_dtype=None, mode="bincount", out_dtype=None, w_ndim=1, linker="cvm"):
    """aesara.function(x, n[, w]) -> GpuBincount(x, n[, w]), GPU in, GPU out."""
    x = GpuArrayType(x_dtype, shape=(None,))("x")
    n = at.lscalar("n")
    inputs = [x, n]
    if w_dtype is not None:
        inputs.append(GpuArrayType(w_dtype, shape=(None,) * w_ndim)("w"))
    out = GpuBincount(mode, out_dtype=out_dtype)(*inputs)
    f = aesara.function(inputs, out, mode=C_MODE.clone(linker=linker))
    assert [type(node.op).__name__ for node in f.maker.fgraph.toposort()] == ["GpuBincount"]
    return f


def call(f, x_np, n=0, w_np=None, mode="bincount", out_dtype=None, path=None, finish=0):
    """Run f on device copies and check the result against the NumPy reference;
    with ``path`` (on the emulation), check which path the launcher took."""
    cp = cupy()
    args = [cp.asarray(x_np), n] + ([] if w_np is None else [cp.asarray(w_np)])
    before = counts() if EMULATED else None
    got = f(*args)
    expected = reference(x_np, w_np, n, mode, out_dtype or (None if w_np is None else w_np.dtype))
    assert isinstance(got, cp.ndarray)
    assert_matches(got, expected, w_np, x_np)
    if path is not None and EMULATED:
        delta = counts() - before
        launches, syncs, dtod = delta[0], delta[1], delta[4]
        expected_counts = {
            "first": (1 + finish, 1, 0),
            "second": (2 + finish, 1, 1),
            "compact": (1, 1, 1),
            "view": (1, 1, 0),
            "empty": (0, 0, 0),
        }[path]
        assert (launches, syncs, dtod) == expected_counts, (path, launches, syncs, dtod)
    return got


def weights_of(dtype, size, seed=0):
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        return rng.standard_normal(size).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size, endpoint=True, dtype=dtype)


def top_of(dtype, want):
    return min(want, np.iinfo(dtype).max)


# -- every path, every dtype ------------------------------------------------------------


def prime(f, length, x_dtype, w_dtype=None):
    """Make ``length`` the next guess of the first pass (the length of a call)."""
    cp = cupy()
    args = [cp.asarray(np.array([length - 1], dtype=x_dtype)), 0]
    if w_dtype is not None:
        args.append(cp.asarray(np.ones(1, dtype=w_dtype)))
    f(*args)


def _run_paths(x_dtype, w_dtype):
    """First pass only, second pass, compact copy (where reachable), empty x."""
    f = compile_op(x_dtype, w_dtype)
    out_dtype = w_dtype or x_dtype
    finish = int(sources.accumulation(out_dtype, w_dtype is not None).finish is not None)
    w = (lambda size, seed=0: weights_of(w_dtype, size, seed)) if w_dtype else (lambda *a, **k: None)

    # First pass only: values below the guess (100 bins), with and without minlength.
    prime(f, 100, x_dtype, w_dtype)
    x = (np.arange(300) % 100).astype(x_dtype)
    call(f, x, 0, w(x.size), path="first", finish=finish)
    call(f, x, 110, w(x.size, 1), path="first", finish=finish)
    # The guess is now 110: a larger max(x) needs a second pass, whose buffer
    # starts with a copy of the first one (read before the first is released).
    x = np.concatenate([np.arange(200) % 100, [top_of(x_dtype, 12_345)]]).astype(x_dtype)
    call(f, x, 0, w(x.size, 2), path="second", finish=finish)
    # Empty x: zeros(n), no launch, no wait.
    call(f, np.zeros(0, x_dtype), 7, None if w_dtype is None else np.zeros(0, w_dtype), path="empty")
    # Compact copy: a guess of 10**6 bins from a long result, then a short result:
    # reachable for x of 32 or 64 bits and outputs without conversion.
    if np.iinfo(x_dtype).max >= 10**6 and not finish:
        big = np.array([3, 999_999], dtype=x_dtype)
        call(f, big, 0, w(2, 3), path="second", finish=0)
        call(f, x, 0, w(x.size, 4), path="compact", finish=0)


@pytest.mark.parametrize("x_dtype", INDEX_DTYPES)
def test_every_path_counts(x_dtype):
    _run_paths(x_dtype, None)


@pytest.mark.parametrize("x_dtype,w_dtype", WEIGHTED)
def test_every_path_weights(x_dtype, w_dtype):
    _run_paths(x_dtype, w_dtype)


@pytest.mark.parametrize("out_dtype", ["float32", "float64", "int8", "uint16"])
def test_counts_converted_by_the_finish_kernel(out_dtype):
    f = compile_op("int16", out_dtype=out_dtype)
    prime(f, 100, "int16")
    x = np.concatenate([np.full(700, 3), np.arange(50)]).astype("int16")
    call(f, x, 0, out_dtype=out_dtype, path="first", finish=1)
    call(f, np.append(x, 9000).astype("int16"), 0, out_dtype=out_dtype, path="second", finish=1)


@pytest.mark.parametrize("x_dtype,w", [("int8", None), ("int64", "float32"), ("uint16", "float64")])
def test_scatter_add_form(x_dtype, w):
    f = compile_op(x_dtype, w, mode="scatter")
    finish = int(sources.accumulation(w or x_dtype, w is not None).finish is not None)
    n = 100
    rng = np.random.default_rng(5)
    lo = -n if x_dtype.startswith("int") else 0
    x = rng.integers(lo, n, 2000).astype(x_dtype)
    call(f, x, n, None if w is None else weights_of(w, x.size), mode="scatter", path="first", finish=finish)
    call(f, np.zeros(0, x_dtype), n, None if w is None else np.zeros(0, w), mode="scatter", path="empty")
    if w is not None:  # a broadcast increment, () or (1,)
        g = compile_op(x_dtype, w, mode="scatter", w_ndim=0)
        call(g, x, n, np.array(2.5, dtype=w), mode="scatter")
        call(f, x, n, np.array([2.5], dtype=w), mode="scatter")


@pytest.mark.parametrize(
    "x_dtype,value", [("int32", 12345), ("int16", 12345), ("int64", 5000), ("uint8", 200)]
)
def test_second_pass_reads_the_first_buffer_before_releasing_it(x_dtype, value):
    """Issue 10: the first buffer was released before the copy that reads it."""
    x_np = np.array([value], dtype=x_dtype)
    gx = gpu.shared(x_np)
    f = aesara.function([], bincount(gx))
    cp = cupy()
    small = gpu.shared(np.array([1, 2], dtype=x_dtype))
    aesara.function([], bincount(small))()  # the next guess: 3 bins
    for _ in range(2):
        got = f()
        assert np.array_equal(got, np.bincount(x_np).astype(x_dtype))
    assert isinstance(gx.get_value(borrow=True, return_internal_type=True), cp.ndarray)


@needs_emulation
def test_the_emulation_catches_a_use_after_release():
    """The fake CuPy poisons a block when its last array goes, and reuses it."""
    cp = cupy()
    a = cp.zeros(1000, dtype="int32")
    view = a[10:]
    ptr = a.data.ptr
    del a
    assert ctypes.string_at(ptr, 4) == b"\0\0\0\0"  # a view keeps the block
    del view
    assert ctypes.string_at(ptr, 4) == bytes([cp.POISON] * 4)
    b = cp.zeros(1000, dtype="int32")
    assert b.data.ptr == ptr and not b.any()  # the same stream reuses it


# -- errors ------------------------------------------------------------------------------


def _raises_like_the_reference(f, x_np, n=0, w_np=None, mode="bincount", exc=ValueError):
    cp = cupy()
    args = [cp.asarray(x_np), n] + ([] if w_np is None else [cp.asarray(w_np)])
    with pytest.raises(exc) as got:
        f(*args)
    with pytest.raises(exc) as expected:
        reference(x_np, w_np, n, mode, None if w_np is None else w_np.dtype)
    assert str(got.value).splitlines()[0] == str(expected.value), got.value


@pytest.mark.parametrize("x_dtype", ["int8", "int16", "int32", "int64"])
def test_errors_negative_value(x_dtype):
    f = compile_op(x_dtype)
    x = (np.arange(3000) % 50).astype(x_dtype)
    x[1234], x[2000] = -3, -7
    _raises_like_the_reference(f, x)
    call(f, np.abs(x), 0)


def test_errors_of_the_bincount_form():
    f = compile_op("int64")
    _raises_like_the_reference(f, np.array([5, 2**63 - 1], dtype="int64"))
    _raises_like_the_reference(f, np.arange(4, dtype="int64"), -1)
    with pytest.raises(MemoryError, match="does not fit in memory"):
        f(cupy().asarray(np.array([2**40], dtype="int64")), 0)  # after the status
    with pytest.raises(MemoryError, match="does not fit in memory"):
        f(cupy().asarray(np.array([1], dtype="int64")), 2**50)  # before any launch
    g = compile_op("uint64")
    _raises_like_the_reference(g, np.array([1, 2**63], dtype="uint64"))
    h = compile_op("int32", "float64")
    _raises_like_the_reference(h, np.arange(10, dtype="int32"), 0, np.ones(9))
    call(f, np.arange(4, dtype="int64"), 0)


def test_errors_of_the_scatter_add_form():
    f = compile_op("int32", "float32", mode="scatter")
    x = np.array([0, 3, 9, -11, 2], dtype="int32")
    w = np.ones(5, dtype="float32")
    _raises_like_the_reference(f, x, 10, w, "scatter", IndexError)
    _raises_like_the_reference(f, x % 10, -1, w, "scatter")
    _raises_like_the_reference(f, x % 10, 10, np.ones(3, dtype="float32"), "scatter")
    g = compile_op("uint64", mode="scatter")
    with pytest.raises(IndexError, match="18446744073709551615 at position 1"):
        g(cupy().asarray(np.array([3, 2**64 - 1], dtype="uint64")), 10)
    call(f, x % 10, 10, w, "scatter")


@needs_emulation
def test_errors_of_the_device_and_driver_leave_everything_usable():
    x_np = np.concatenate([np.arange(100), [6000]]).astype("int32")
    gx = gpu.shared(x_np)
    counter = aesara.shared(np.int64(0))
    f = aesara.function([], bincount(gx), updates=[(counter, counter + 1)])
    expected = np.bincount(x_np).astype("int32")
    assert np.array_equal(f(), expected)
    fake = driver()
    for which, code, exc, match in [
        (0, 2, MemoryError, "CUDA_ERROR_OUT_OF_MEMORY"),  # a launch
        (0, 719, RuntimeError, "histogram pass"),
        (2, 999, RuntimeError, "cuMemcpyDtoHAsync"),  # the read-back
        (3, 999, RuntimeError, "cuStreamSynchronize"),
    ]:
        fake.fake_cuda_fail_next(which, code)
        with pytest.raises(exc, match=match):
            f()
        assert counter.get_value() == 1 and np.array_equal(gx.get_value(), x_np)
    assert np.array_equal(f(), expected) and counter.get_value() == 2

    cp = cupy()
    with cp.cuda.Device(1):
        other = gpu.shared(x_np)
    g = aesara.function([], bincount(other))
    with pytest.raises(ValueError, match="x lives on device 1, but the current device is 0"):
        g()
    with cp.cuda.Device(1):
        assert np.array_equal(g(), expected)


@needs_emulation
@pytest.mark.parametrize("which", [1, 2, 3], ids=["first-buffer", "second-buffer", "output"])
def test_out_of_device_memory_at_each_allocation(which):
    """CuPy's out-of-memory error at the first buffer, the second, the converted output."""
    cp = cupy()
    f = compile_op("uint16")
    x = np.concatenate([np.arange(100), [6000]]).astype("uint16")
    seen = []

    def out_of_memory():
        seen.append(None)
        if len(seen) == which:
            raise cp.cuda.memory.OutOfMemoryError("fake: out of memory")

    prime(f, 100, "uint16")
    xd = cp.asarray(x)
    cp.alloc_hooks.append(out_of_memory)
    try:
        with pytest.raises(MemoryError, match="does not fit in memory"):
            f(xd, 0)
    finally:
        cp.alloc_hooks.remove(out_of_memory)
    prime(f, 100, "uint16")
    call(f, x, 0, path="second", finish=1)


@needs_emulation
def test_a_failing_allocation_raises_its_own_error():
    cp = cupy()
    f = compile_op("int32")
    x = cp.asarray(np.arange(10, dtype="int32"))

    def broken():
        raise KeyError("the allocator broke")

    cp.alloc_hooks.append(broken)
    try:
        with pytest.raises(KeyError, match="the allocator broke"):
            f(x, 0)
        with pytest.raises(KeyError, match="the allocator broke"):
            kernels.bincount_cupy(x)
    finally:
        cp.alloc_hooks.remove(broken)
    call(f, np.arange(10, dtype="int32"), 0)


def test_python_linker_is_the_reference():
    """perform runs the NumPy reference on host copies: the same results as the C code."""
    x = (np.arange(5000) * 7 % 1234).astype("int16")
    w = weights_of("int32", x.size)
    for args in [(x, 0), (x, 2000)]:
        c = compile_op("int16")(cupy().asarray(args[0]), args[1])
        py = compile_op("int16", linker="py")(cupy().asarray(args[0]), args[1])
        assert np.array_equal(cupy().asnumpy(c), cupy().asnumpy(py))
    c = compile_op("int16", "int32")(cupy().asarray(x), 0, cupy().asarray(w))
    py = compile_op("int16", "int32", linker="py")(cupy().asarray(x), 0, cupy().asarray(w))
    assert np.array_equal(cupy().asnumpy(c), cupy().asnumpy(py))


# -- float32 subnormals -------------------------------------------------------------------


def test_float32_subnormals_are_kept():
    """atom.global.add.f32 flushes subnormals (so does the emulation's global float add)."""
    tiny = np.float32(1e-40)
    assert 0 < tiny < np.finfo("float32").tiny
    gx, gw = gpu.shared(np.array([0], dtype="int32")), gpu.shared(np.array([tiny], dtype="float32"))
    f = aesara.function([], bincount(gx, weights=gw))
    assert f()[0] == tiny  # merged from shared memory into global memory
    f = compile_op("int32", "float32")
    x = np.array([0, 5000, 5000, 3], dtype="int32")
    w = np.full(4, tiny, dtype="float32")
    got = cupy().asnumpy(f(cupy().asarray(x), 6000, cupy().asarray(w)))  # bin 5000: global atomics
    assert got[0] == tiny and got[5000] == 2 * tiny and got[3] == tiny
    got = kernels.bincount_cupy(cupy().asarray(x), cupy().asarray(w), 6000)
    assert cupy().asnumpy(got)[5000] == 2 * tiny


# -- the GIL, the status read-back, devices ------------------------------------------------


def test_a_host_callback_runs_while_the_stream_is_waited_for():
    """A host function queued on the stream needs the GIL; the call must let it run."""
    cp = cupy()
    x_np = np.arange(1000, dtype="int32") % 17
    gx = gpu.shared(x_np)
    f = aesara.function([], bincount(gx))
    called = []
    for run in (f, lambda: kernels.bincount_cupy(gx.get_value(borrow=True, return_internal_type=True))):
        cp.cuda.get_current_stream().launch_host_func(called.append, len(called))
        got = run()
        assert np.array_equal(cp.asnumpy(got) if not isinstance(got, np.ndarray) else got, np.bincount(x_np))
    assert called == [0, 1]


@needs_emulation
def test_other_threads_run_while_the_stream_is_waited_for():
    """Two calls wait at once (the GIL is free, and each reads its status into a
    slot of its own); the main thread runs meanwhile and lets them go."""
    fake = driver()
    small = np.array([1, 2, 10], dtype="int32")
    large = np.array([5, 3000, 3000], dtype="int32")
    fs = [aesara.function([], bincount(gpu.shared(v))) for v in (small, large)]
    for f in fs:
        f()  # compiled and loaded before the syncs are held
    results, errors, waiting = run_while_waiting(fake, fs)
    assert waiting == 2 and not errors, errors
    assert np.array_equal(results[0], np.bincount(small).astype("int32"))
    assert np.array_equal(results[1], np.bincount(large).astype("int32"))


@needs_emulation
def test_two_devices_python_code_in_the_middle_of_a_call():
    """A call on device 0 runs Python code (here an allocation hook) that makes a
    call on device 1: the first call still launches its own context's kernels."""
    cp = cupy()
    x0 = np.array([1, 1, 7], dtype="int32")
    x1 = np.array([2, 5, 5, 5], dtype="int32")
    with cp.cuda.Device(1):
        g1 = gpu.shared(x1)
    # Results kept on the GPU: the call allocates its output (with the result
    # on the host it allocates only the first time, the staging).
    f0 = aesara.function([], gpu.gpu_from_host(bincount(gpu.shared(x0))))
    f1 = aesara.function([], gpu.gpu_from_host(bincount(g1)))
    inner = []

    def other_device():
        if not inner:
            inner.append(None)
            with cp.cuda.Device(1):
                inner.append(f1())

    cp.alloc_hooks.append(other_device)
    try:
        got = f0()
    finally:
        cp.alloc_hooks.remove(other_device)
    assert np.array_equal(cp.asnumpy(got), np.bincount(x0).astype("int32"))
    assert np.array_equal(cp.asnumpy(inner[1]), np.bincount(x1).astype("int32"))


@needs_emulation
def test_two_devices_from_two_threads():
    cp = cupy()
    data = [np.arange(500, dtype="int64") % (7 + d) for d in range(2)]
    fs = []
    for d in range(2):
        with cp.cuda.Device(d):
            fs.append(aesara.function([], bincount(gpu.shared(data[d]))))
    bad = []

    def work(d):
        with cp.cuda.Device(d):
            for _ in range(4):
                if not np.array_equal(fs[d](), np.bincount(data[d])):
                    bad.append(d)

    threads = [threading.Thread(target=work, args=(d,)) for d in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not bad


# -- NVRTC, occupancy: fresh processes with another fake device ------------------------------

_CHILD = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
import cupy, aesara
from aesara.tensor.extra_ops import bincount
import aesara_bincount
from aesara_bincount import gpu
from aesara_bincount_core.cuda import kernels
"""


def _child(code, **env):
    from procs import run_python

    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return run_python(_CHILD.format(tests=tests) + code, timeout=600, env={k: str(v) for k, v in env.items()})


@needs_emulation
def test_nvrtc_newer_than_the_driver_is_unavailable():
    out = _child(
        """
ok, why = kernels.availability()
print("AVAILABLE", ok, why)
try:
    aesara.function([], bincount(gpu.shared(np.arange(3, dtype="int32"))))
except kernels.GpuUnavailableError as exc:
    print("COMPILE", exc)
import aesara.tensor as at
W = gpu.shared(np.zeros(3))
try:  # a GPU twin that launches the package's kernels: GpuScatterSet
    aesara.function([], at.set_subtensor(W[np.array([0, 0])], 1.0))
except kernels.GpuUnavailableError as exc:
    print("SET", exc)
""",
        FAKE_CUDA_DRIVER_VERSION=11080,
    )
    assert "AVAILABLE False" in out.stdout and "newer than the CUDA driver" in out.stdout, out.stdout
    assert "COMPILE GpuBincount cannot run here" in out.stdout, out.stdout
    assert "SET GpuScatterSet cannot run here" in out.stdout and "to set on the CPU" in out.stdout, out.stdout


@needs_emulation
@pytest.mark.parametrize("env", [{"FAKE_CUDA_BLOCK_RESERVE": 4096}, {"FAKE_CUDA_MAX_BLOCKS_PER_SM": 1}])
def test_the_plan_fits_the_occupancy_calculator(env):
    """Every histogram launch runs in one wave, whatever the driver reserves per
    block or the registers allow (the fake device: 16 KiB of shared memory per SM)."""
    out = _child(
        """
import ctypes, os
lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
x = (np.arange(20_000) % 2000).astype("int32")
f = aesara.function([], bincount(gpu.shared(x)))
assert np.array_equal(f(), np.bincount(x).astype("int32"))
assert np.array_equal(cupy.asnumpy(kernels.bincount_cupy(cupy.asarray(x))), np.bincount(x))
c = (ctypes.c_longlong * 8)()
lib.fake_cuda_counters(c)
print("WAVES", c[6], "SHARED", c[7])
""",
        FAKE_CUDA_SHARED_PER_SM=16384,
        FAKE_CUDA_SHARED_OPTIN=16384,
        **env,
    )
    waves, shared = (int(v) for v in out.stdout.split("WAVES")[1].split()[::2])
    assert waves == 0, out.stdout
    per_sm = env.get("FAKE_CUDA_MAX_BLOCKS_PER_SM", 2)
    assert 0 < shared <= 16384 // per_sm - env.get("FAKE_CUDA_BLOCK_RESERVE", 1024), out.stdout


# -- unaligned views ------------------------------------------------------------------------


@pytest.mark.parametrize("x_dtype", INDEX_DTYPES)
def test_unaligned_views_are_right_and_keep_vector_loads(x_dtype):
    cp = cupy()
    f = compile_op(x_dtype)
    fw = compile_op(x_dtype, "float64")
    base = (np.arange(3001) * 13 % top_of(x_dtype, 250)).astype(x_dtype)
    w = weights_of("float64", base.size)
    xd, wd = cp.asarray(base), cp.asarray(w)
    itemsize = base.itemsize
    vector = 16 if itemsize >= 4 else 4 * itemsize
    for start in (1, 2, 3):
        before = load_counts() if EMULATED else None
        got = f(xd[start:], 0)
        assert_matches(got, reference(base[start:]))
        if EMULATED:
            loads = load_counts() - before
            assert loads[vector] >= (base.size - start) // (vector // itemsize) - 1, loads
            assert loads[itemsize] <= 2 * (vector // itemsize), loads  # head and tail only
        got = fw(xd[start:], 0, wd[start:])
        assert_matches(got, reference(base[start:], w[start:]), w[start:], base[start:])
    got = f(xd[::-1], 0)
    assert_matches(got, reference(base[::-1]))


def test_the_kernel_alone_for_benchmarks():
    """histogram_pass queues the first pass only, into one buffer, without waiting."""
    cp = cupy()
    x_np = (np.arange(5000) % 300).astype("int32")
    run = kernels.histogram_pass(cp.asarray(x_np), 300)
    before = counts() if EMULATED else None
    run()
    run()
    cp.cuda.get_current_stream().synchronize()
    if EMULATED:
        delta = counts() - before
        assert (delta[0], delta[1], delta[2]) == (2, 0, 0)  # two launches, no wait, no copy back
    assert np.array_equal(cp.asnumpy(run.buffer[:300]).view("uint32"), 2 * np.bincount(x_np))
