"""GpuBincount through Aesara: GPU shared variables, the rewrite, C and Python linkers.

Runs on a real GPU, on the CPU emulation (``tests/test_gpu_emulated.py``),
or is skipped.
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
    WHY,
    assert_matches,
    cupy,
    data,
    reference,
    size,
)

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.compile.mode import get_default_mode  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402
from aesara.tensor.subtensor import advanced_inc_subtensor1  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import Bincount  # noqa: E402
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount.gpu import GpuBincount  # noqa: E402
from aesara_bincount_core.cuda import kernels  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]

LINKERS = ["cvm", "py"]


def compile_fn(outputs, linker="cvm", inputs=(), **kwargs):
    mode = get_default_mode().clone(linker=linker)
    return aesara.function(list(inputs), outputs, mode=mode, **kwargs)


def op_types(f):
    return [type(node.op).__name__ for node in f.maker.fgraph.toposort()]


def fake_driver():
    import ctypes

    return ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])


def fake_syncs() -> int:
    import ctypes

    counts = (ctypes.c_longlong * 8)()
    fake_driver().fake_cuda_counters(counts)
    return counts[1]


@pytest.mark.parametrize("linker", LINKERS)
def test_seed_case(linker):
    x_np = np.random.default_rng(0).integers(0, 1000, size(1_000_000, 20_000))
    gx = gpu.shared(x_np, name="x")
    f = compile_fn(bincount(gx), linker)
    types = op_types(f)
    assert "GpuBincount" in types
    assert not {"Max", "MaxAndArgmax", "AdvancedIncSubtensor1", "Bincount"} & set(types)
    for _ in range(3):
        got = f()
        assert isinstance(got, np.ndarray)
        assert_matches(got, np.bincount(x_np))


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_every_x_dtype(dtype):
    x_np = data("skewed", size(300_000, 6000), 200, dtype)
    f = compile_fn(bincount(gpu.shared(x_np)))
    assert_matches(f(), reference(x_np))


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("wdtype", ["float32", "float64", "int8", "int64", "uint32"])
def test_weights_on_the_gpu_and_on_the_host(linker, wdtype):
    rng = np.random.default_rng(1)
    n = size(200_000, 5000)
    x_np = rng.integers(0, 300, n).astype("int32")
    w_np = (rng.standard_normal(n) * 100).astype(wdtype)
    expected = reference(x_np, w_np, 400)
    for w in (gpu.shared(w_np), aesara.shared(w_np)):
        f = compile_fn(bincount(gpu.shared(x_np), weights=w, minlength=400), linker)
        types = op_types(f)
        assert "GpuBincount" in types
        # GPU weights are used in place, host weights moved once.
        assert types.count("GpuFromHost") == (0 if isinstance(w, gpu.GpuArraySharedVariable) else 1)
        assert_matches(f(), expected, w_np, x_np)


@pytest.mark.parametrize("linker", LINKERS)
def test_scatter_add_form(linker):
    rng = np.random.default_rng(2)
    idx_np = rng.integers(-50, 50, size(100_000, 3000)).astype("int64")
    w_np = rng.random(idx_np.size)
    gidx, gw = gpu.shared(idx_np), gpu.shared(w_np)
    out = advanced_inc_subtensor1(at.zeros(50), gw, gidx)
    f = compile_fn(out, linker)
    assert "GpuBincount" in op_types(f)
    expected = np.zeros(50)
    np.add.at(expected, idx_np, w_np)
    assert_matches(f(), expected, w_np, idx_np)


def test_assert_nonneg_is_kept():
    x_np = np.arange(10, dtype="int32")
    gx = gpu.shared(x_np)
    f = compile_fn(bincount(gx, assert_nonneg=True))
    assert "GpuBincount" in op_types(f)
    assert_matches(f(), np.bincount(x_np).astype("int32"))
    gx.set_value(np.array([1, -1, 2], dtype="int32"))
    with pytest.raises(AssertionError):
        f()


def test_gpu_input_variable():
    x = gpu.GpuArrayType("int16", shape=(None,))("x")
    f = compile_fn(bincount(x, minlength=5), inputs=[x])
    x_np = np.array([1, 1, 3], dtype="int16")
    assert_matches(f(cupy().asarray(x_np)), np.array([0, 2, 0, 1, 0], dtype="int16"))
    assert_matches(f(x_np), np.array([0, 2, 0, 1, 0], dtype="int16"))  # filter uploads it


@pytest.mark.parametrize("linker", LINKERS)
def test_errors_match_the_cpu_op(linker):
    """Same exception types and messages as the CPU Bincount Op."""
    x_np = np.arange(size(10_000, 2000), dtype="int64") % 7
    x_np[size(5000, 1500)] = -2
    gx = gpu.shared(x_np)
    f_gpu = compile_fn(bincount(gx), linker)
    f_cpu = compile_fn(bincount(aesara.shared(x_np)), linker)
    assert "Bincount" in op_types(f_cpu)
    with pytest.raises(ValueError) as cpu_err:
        f_cpu()
    with pytest.raises(ValueError) as gpu_err:
        f_gpu()
    assert str(gpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]

    idx = gpu.shared(np.array([0, 3, 9, -11], dtype="int32"))
    f = compile_fn(advanced_inc_subtensor1(at.zeros(10), 1.0, idx), linker)
    with pytest.raises(IndexError, match="index -11 at position 3 is out of bounds"):
        f()

    gx.set_value(np.array([2**40], dtype="int64"))
    with pytest.raises(MemoryError):
        f_gpu()


def test_failed_call_leaves_state_and_next_call_works():
    x_np = np.array([3, 1, 4, 1, 5], dtype="int32")
    gx = gpu.shared(x_np)
    counter = aesara.shared(np.int64(0))
    f = compile_fn(bincount(gx), updates=[(counter, counter + 1)])
    assert_matches(f(), np.bincount(x_np).astype("int32"))
    bad = np.array([3, -1, 4], dtype="int32")
    gx.set_value(bad)
    with pytest.raises(ValueError):
        f()
    assert counter.get_value() == 1
    assert np.array_equal(gx.get_value(), bad)
    gx.set_value(x_np)
    assert_matches(f(), np.bincount(x_np).astype("int32"))
    assert counter.get_value() == 2


def test_shared_variables_of_every_dtype():
    cp = cupy()
    for dtype in INDEX_DTYPES + ("float32", "float64"):
        value = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
        for v in (gpu.shared(value), aesara.shared(cp.asarray(value))):
            assert isinstance(v, gpu.GpuArraySharedVariable)
            assert v.type.dtype == dtype and v.type.ndim == 2
            host = v.get_value()
            assert isinstance(host, np.ndarray) and np.array_equal(host, value)
            internal = v.get_value(borrow=True, return_internal_type=True)
            assert isinstance(internal, cp.ndarray)
            assert v.get_value(borrow=True, return_internal_type=True) is internal
            copy = v.get_value(return_internal_type=True)
            assert isinstance(copy, cp.ndarray) and copy is not internal
            v.set_value(value * 0)
            assert not v.get_value().any()
            new = cp.asarray(value)
            v.set_value(new, borrow=True)
            assert v.get_value(borrow=True, return_internal_type=True) is new
            v.set_value(new)
            assert v.get_value(borrow=True, return_internal_type=True) is not new


def test_gpu_variables_in_ordinary_expressions():
    x_np = np.array([4, 0, 9, 2], dtype="int64")
    gx = gpu.shared(x_np)
    f = compile_fn([gx.max(), gx + 1, (gx * 2).sum(), gx.shape[0]])
    top, plus, total, length = f()
    assert top == 9 and np.array_equal(plus, x_np + 1) and total == 30 and length == 4


def test_gradient_through_gpu_weights():
    x_np = np.array([0, 2, 2, 1], dtype="int32")
    w_np = np.array([0.5, 1.0, 2.0, 4.0])
    gw = gpu.shared(w_np)
    y = bincount(gpu.shared(x_np), weights=gw)
    g = aesara.grad((y * np.array([1.0, 10.0, 100.0])).sum(), gw)
    f = compile_fn(g)
    got = f()
    assert np.allclose(cupy().asnumpy(got) if not isinstance(got, np.ndarray) else got, [1.0, 100.0, 100.0, 10.0])


def test_is_available_is_a_bool_and_availability_says_what_it_found():
    # issue 28: is_available() was a (flag, reason) tuple, always true in an if.
    assert gpu.is_available() is True
    ok, why = gpu.availability()
    assert ok is True and "CUDA device" in why and "NVRTC" in why, why


def test_no_gpu_is_a_clear_error_at_compile_time(monkeypatch):
    monkeypatch.setattr(kernels, "availability", lambda: (False, "no CUDA driver on this test"))
    gx = gpu.shared(np.arange(4, dtype="int32"))
    with pytest.raises(kernels.GpuUnavailableError, match="no CUDA driver on this test"):
        compile_fn(bincount(gx))


def test_excluding_the_gpu_rewrite_keeps_the_cpu_op():
    x_np = np.array([1, 2, 2], dtype="int64")
    gx = gpu.shared(x_np)
    mode = get_default_mode()
    f = aesara.function([], bincount(gx), mode=mode.excluding("gpu_bincount"))
    types = op_types(f)
    assert "Bincount" in types and "HostFromGpu" in types and "GpuBincount" not in types
    assert np.array_equal(f(), np.bincount(x_np))
    f = aesara.function([], bincount(gx), mode=mode.excluding("bincount"))
    assert not {"Bincount", "GpuBincount"} & set(op_types(f))
    assert np.array_equal(f(), np.bincount(x_np))


def test_c_code_synchronizes_once_per_call():
    if not EMULATED:
        pytest.skip("the fake driver counts synchronizations")
    x_np = np.concatenate([np.arange(50), [9000]]).astype("int32")
    f = compile_fn(gpu.gpu_bincount(gpu.shared(x_np)))
    assert op_types(f) == ["GpuBincount"]
    for _ in range(3):  # first pass too small (second pass), then guessed right
        before = fake_syncs()
        out = f()
        assert fake_syncs() - before == 1
        assert_matches(out, np.bincount(x_np).astype("int32"))


def test_c_code_reports_driver_failures():
    if not EMULATED:
        pytest.skip("the fake driver injects failures")
    x_np = np.arange(100, dtype="int32")
    gx = gpu.shared(x_np)
    f = compile_fn(bincount(gx))
    f()
    fake_driver().fake_cuda_fail_next(0, 2)
    with pytest.raises(MemoryError, match="CUDA_ERROR_OUT_OF_MEMORY"):
        f()
    fake_driver().fake_cuda_fail_next(3, 999)
    with pytest.raises(RuntimeError, match="cuStreamSynchronize"):
        f()
    assert np.array_equal(f(), np.bincount(x_np).astype("int32"))


def test_cpu_bincount_class_is_untouched():
    """The CPU Op still serves host data in the same process."""
    x_np = np.array([2, 2, 0], dtype="uint8")
    f = compile_fn(bincount(aesara.shared(x_np)))
    assert any(isinstance(n.op, Bincount) for n in f.maker.fgraph.toposort())
    assert not any(isinstance(n.op, GpuBincount) for n in f.maker.fgraph.toposort())


def test_bincount_in_a_sum_and_an_update_runs_on_the_gpu():
    # Aesara's pre_local_IncSubtensor_serialize would fold "+ 1" and
    # "hist +" into the zeros; the early registration gets there first.
    x_np = np.array([3, 0, 3, 7], dtype="int32")
    gx = gpu.shared(x_np)
    f = compile_fn([bincount(gx) + 1, bincount(gx, minlength=10) * 2])
    assert op_types(f).count("GpuBincount") >= 1 and "AdvancedIncSubtensor1" not in op_types(f)
    plus, twice = f()
    # Counts have x's dtype, as in Aesara's graph.
    assert_matches(plus, (np.bincount(x_np) + 1).astype("int32"))
    assert_matches(twice, (np.bincount(x_np, minlength=10) * 2).astype("int32"))
    hist = aesara.shared(np.zeros(10, dtype="int32"))
    g = compile_fn([], updates={hist: hist + bincount(gx, minlength=10)})
    assert "GpuBincount" in op_types(g)
    g()
    g()
    assert_matches(hist.get_value(), (2 * np.bincount(x_np, minlength=10)).astype("int32"))
    gx.set_value(np.array([1, -4], dtype="int32"))
    with pytest.raises(ValueError, match="negative value -4"):
        g()
    assert_matches(hist.get_value(), (2 * np.bincount(x_np, minlength=10)).astype("int32"))


def test_length_of_a_gpu_bincount_at_the_top_of_int8():
    x_np = np.array([127, 0], dtype="int8")
    c = bincount(gpu.shared(x_np))
    f = compile_fn([c.shape[0], c.mean()])
    assert "GpuBincount" in op_types(f)
    length, mean = f()
    assert length == 128
    assert np.isclose(mean, np.bincount(x_np).mean())
