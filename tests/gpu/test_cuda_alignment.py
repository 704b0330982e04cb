"""Arrays not aligned to their elements, on the GPU: a clear ValueError, never a fault.

A GPU loads an element only at an address that is a multiple of its size;
anything else fails with ``CUDA_ERROR_MISALIGNED_ADDRESS``, a sticky error
that leaves the CUDA context unusable for the rest of the process.  Such
arrays come from ``cupy.ndarray(memptr=buf.data + k)``, DLPack imports and
byte strides that are not whole elements.  Both launchers check every array
a kernel reads or writes (``bc_cuda_check_aligned``), and the Ops and the
kernel layer check what CuPy would copy or cast first; each case here,
through ``aesara.function`` (``GpuBincount``, ``GpuScatterAdd``) and through
the kernel layer, must raise ``ValueError`` naming the array, write nothing,
and leave the context usable (the fake driver of the CPU emulation fails a
misaligned access as a GPU would, with a sticky error, which the tests read).
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, EMULATED, WHY, cupy, sticky  # noqa: E402

from aesara_bincount_core.cuda import kernels  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
needs_emulation = pytest.mark.skipif(not EMULATED, reason="reads the fake driver's sticky error")


@pytest.fixture(autouse=True)
def no_sticky_error():
    """Every test starts and must end with a usable context."""
    sticky(clear=True)
    yield
    assert sticky(clear=True) == 0, "a kernel made a misaligned access (the context would be lost)"


def misaligned(values: np.ndarray, offset: int, stride: int = 0):
    """A cupy view of ``values`` whose element 0 sits ``offset`` bytes past an
    aligned address, with a byte stride of ``stride`` (default: contiguous)."""
    cp = cupy()
    values = np.ascontiguousarray(values)
    step = stride or values.itemsize
    n = len(values)
    buf = cp.zeros(offset + max(n, 1) * max(step, values.itemsize) + 16, dtype=cp.uint8)
    host = np.zeros(buf.shape, dtype=np.uint8)
    for i in range(n):
        at = offset + i * step
        host[at : at + values.itemsize] = values[i : i + 1].view(np.uint8)
    buf[...] = cp.asarray(host)
    view = cp.ndarray(values.shape, values.dtype, memptr=buf.data + offset, strides=(step,))
    assert cp.asnumpy(view).tolist() == values.tolist()
    return view


#: (dtype, byte offset, byte stride): misaligned starts, and strides that are not whole elements.
BAD_LAYOUTS = [("int64", 1, 0), ("int32", 2, 0), ("int16", 1, 0), ("int32", 0, 6), ("int64", 0, 12)]


# -- the kernel layer ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype,offset,stride", BAD_LAYOUTS)
def test_kernel_layer_refuses_misaligned_x(dtype, offset, stride):
    x = misaligned(np.array([3, 1, 4, 1, 5], dtype=dtype), offset, stride)
    with pytest.raises(ValueError, match=r"x is not aligned to its \d-byte elements"):
        kernels.bincount_cupy(x)
    # The context still works.
    cp = cupy()
    aligned = cp.asarray(np.array([3, 1, 4, 1, 5], dtype=dtype))
    assert cp.asnumpy(kernels.bincount_cupy(aligned)).tolist() == [0, 2, 0, 1, 1, 1]


@pytest.mark.parametrize("offset", [4, 1])
def test_kernel_layer_refuses_misaligned_weights(offset):
    cp = cupy()
    x = cp.asarray(np.array([0, 2, 2], dtype="int32"))
    w = misaligned(np.array([0.5, 1.0, -2.0]), offset)
    with pytest.raises(ValueError, match="weights is not aligned"):
        kernels.bincount_cupy(x, w)


@pytest.mark.parametrize("what", ["base", "increments", "idx"])
def test_kernel_layer_refuses_misaligned_rows(what):
    cp = cupy()
    base_np = np.arange(12, dtype="int16").reshape(6, 2)
    inc_np = np.ones((3, 2), dtype="int16")
    idx_np = np.array([5, 0, 5], dtype="int64")
    base, inc, idx = cp.asarray(base_np), cp.asarray(inc_np), cp.asarray(idx_np)
    if what == "base":  # an int16 at an odd address: the narrow add's word would be wrong
        base = misaligned(base_np.reshape(-1), 1).reshape(6, 2)
    elif what == "increments":
        inc = misaligned(inc_np.reshape(-1), 1).reshape(3, 2)
    else:
        idx = misaligned(idx_np, 4)
    before = cp.asnumpy(base)
    with pytest.raises(ValueError, match="not aligned"):
        kernels.scatter_add_cupy(base, inc, idx, inplace=True)
    np.testing.assert_array_equal(cp.asnumpy(base), before)


@needs_emulation
def test_the_fake_driver_fails_a_misaligned_kernel_as_a_gpu_would():
    """The emulation's own check: a kernel launched on a misaligned x (the
    benchmarks' histogram pass, which skips the launcher's checks) leaves the
    sticky CUDA_ERROR_MISALIGNED_ADDRESS, which every later call returns."""
    x = misaligned(np.arange(64, dtype="int64"), 4)
    run = kernels.histogram_pass(x, 64)
    run()  # queued; the fault shows at the next call
    assert sticky() == 716
    with pytest.raises(RuntimeError, match="CUDA_ERROR_MISALIGNED_ADDRESS"):
        kernels.bincount_cupy(cupy().asarray(np.arange(3)))
    assert sticky(clear=True) == 716


@needs_emulation
@pytest.mark.parametrize("what", ["check idx", "set out", "set values"])
def test_the_fake_driver_fails_misaligned_check_and_set_kernels(what):
    """The index check and the scatter-set, launched past the Python layer's own
    refusals on a misaligned array, leave the sticky fault too (the fake driver
    checked only the histogram and rows kernels' arrays before)."""
    from aesara_bincount_core.cuda import driver as _driver, modules
    from aesara_bincount_core.cuda.sources import THREADS
    from aesara_bincount_core.gpu.index_check import _CheckParams
    from aesara_bincount_core.gpu.scatter_set import _SetParams

    cp = cupy()
    drv, stream = _driver.driver(), cp.cuda.get_current_stream().ptr
    rows = cp.zeros(4, dtype="int64")
    if what == "check idx":
        idx = misaligned(np.array([3, 0, 2, 1], dtype="int32"), 2)
        status = cp.zeros(16, dtype="int64")
        check, _, _ = modules.check_kernels("int32")
        drv.launch(check, 1, THREADS, stream, _CheckParams(idx.data.ptr, rows.data.ptr, status.data.ptr,
                                                           4, 1, 4, 1, 0, 0))  # fmt: skip
    else:
        out = misaligned(np.zeros(8, dtype="int32"), 2) if what == "set out" else cp.zeros(8, dtype="int32")
        values = misaligned(np.ones(8, dtype="int32"), 2) if what == "set values" else cp.asarray(np.ones(8, dtype="int32"))
        last = cp.zeros(4, dtype="uint64")
        _, write, _ = modules.set_kernels(4)
        drv.launch(write, 1, THREADS, stream, _SetParams(rows.data.ptr, last.data.ptr, out.data.ptr,
                                                         values.data.ptr, 4, 4, 2, 8))  # fmt: skip
    assert sticky(clear=True) == 716


# -- through aesara.function -----------------------------------------------------------


aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402


@pytest.fixture(scope="module")
def counted():
    x = gpu.shared(np.zeros(1, dtype="int64"), name="x")
    return x, aesara.function([], bincount(x))


@pytest.fixture(scope="module")
def weighted():
    x = gpu.shared(np.zeros(1, dtype="int32"), name="x")
    w = gpu.shared(np.zeros(1, dtype="float64"), name="w")
    return x, w, aesara.function([], bincount(x, w))


@pytest.mark.parametrize("offset,stride", [(1, 0), (4, 0), (0, 12)])
def test_gpu_bincount_refuses_misaligned_x(counted, offset, stride):
    x, f = counted
    values = np.array([2, 0, 2, 7], dtype="int64")
    x.set_value(misaligned(values, offset, stride), borrow=True)
    with pytest.raises(ValueError, match="x is not aligned to its 8-byte elements"):
        f()
    x.set_value(cupy().asarray(values), borrow=True)
    np.testing.assert_array_equal(f(), np.bincount(values))


def test_gpu_bincount_refuses_misaligned_weights(weighted):
    x, w, f = weighted
    x.set_value(cupy().asarray(np.array([1, 1, 3], dtype="int32")), borrow=True)
    w.set_value(misaligned(np.array([0.25, 0.5, 2.0]), 4), borrow=True)
    with pytest.raises(ValueError, match="weights is not aligned"):
        f()


@pytest.fixture(scope="module")
def rows_update():
    W = gpu.shared(np.zeros((1, 1), dtype="int16"), name="W")
    G = gpu.shared(np.zeros((1, 1), dtype="int16"), name="G")
    I = gpu.shared(np.zeros(1, dtype="int32"), name="I")
    return W, G, I, aesara.function([], [], updates={W: at.inc_subtensor(W[I], G)})


@pytest.mark.parametrize("what", ["base", "increments", "idx"])
def test_gpu_scatter_add_refuses_misaligned_arrays(rows_update, what):
    cp = cupy()
    W, G, I, f = rows_update
    base_np = np.arange(10, dtype="int16").reshape(5, 2)
    inc_np = np.full((4, 2), 3, dtype="int16")
    idx_np = np.array([4, 4, 0, 1], dtype="int32")
    base = misaligned(base_np.reshape(-1), 1).reshape(5, 2) if what == "base" else cp.asarray(base_np)
    inc = misaligned(inc_np.reshape(-1), 1).reshape(4, 2) if what == "increments" else cp.asarray(inc_np)
    idx = misaligned(idx_np, 2) if what == "idx" else cp.asarray(idx_np)
    W.set_value(base, borrow=True)
    G.set_value(inc, borrow=True)
    I.set_value(idx, borrow=True)
    with pytest.raises(ValueError, match="not aligned"):
        f()
    np.testing.assert_array_equal(cp.asnumpy(W.get_value(borrow=True)), base_np)
    # Aligned arrays then work, in the same process and context.
    W.set_value(cp.asarray(base_np), borrow=True)
    G.set_value(cp.asarray(inc_np), borrow=True)
    I.set_value(cp.asarray(idx_np), borrow=True)
    f()
    expected = base_np.copy()
    np.add.at(expected, idx_np, inc_np)
    np.testing.assert_array_equal(cp.asnumpy(W.get_value(borrow=True)), expected)


@pytest.mark.parametrize("graph", ["elemwise", "fused weights"])
def test_a_misaligned_view_of_one_element_raises(graph):
    """One element broadcast against longer arrays is loaded too: a misaligned
    one-element view raises ValueError (issue 28: GpuElemwise and the fused
    bincount skipped the check for one element and lost the context)."""
    gx = gpu.shared(np.array([1, 0, 3, 1], dtype="int64"), name="gx")
    gv = gpu.shared(np.array([0.5, 1.5, 2.0, -1.0]), name="gv")
    gs = gpu.shared(np.array([3.0]), name="gs")
    out = gv * gs if graph == "elemwise" else bincount(gx, weights=gv * gs)
    f = aesara.function([], out)
    names = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
    assert ("GpuElemwise" if graph == "elemwise" else "GpuFusedBincount") in names, names
    gs.set_value(misaligned(np.array([3.0]), 4), borrow=True)
    with pytest.raises(ValueError, match="not aligned"):
        f()
    gs.set_value(cupy().asarray(np.array([3.0])), borrow=True)
    want = np.array([0.5, 1.5, 2.0, -1.0]) * 3.0
    if graph != "elemwise":
        want = np.bincount([1, 0, 3, 1], weights=want)
    np.testing.assert_array_equal(f(), want)
