"""How GpuElemwise launches (issue 28, items 3 and 4): parameters built once per
node and context, the grid sized by the driver's occupancy calculator.

The kernel parameters (``bc_ew_params``) are a block built once per node and
CUDA context, of which each call rewrites the fields it uses; so a call after
another of a different layout (contiguous, strided, broadcast, another
length, another device) must not see the last call's fields.  The grid is the
multiprocessors times the blocks ``cuOccupancyMaxActiveBlocksPerMultiprocessor``
grants (the emulation models the registers: ``FAKE_CUDA_EW_REGISTERS``).
"""
import ctypes
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, EMULATED, WHY, cupy  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.scalar import basic as aes  # noqa: E402

from aesara_bincount_core.gpu import elemwise  # noqa: E402
from aesara_bincount_core.gpu.elemwise import GpuElemwise  # noqa: E402
from aesara_bincount_core.gpu.transfer import host_from_gpu  # noqa: E402
from aesara_bincount_core.gpu.type import GpuArrayType  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
needs_emulation = pytest.mark.skipif(not EMULATED, reason="reads the fake driver's counters")
THREADS = elemwise.THREADS


def last_grid():
    lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
    lib.fake_cuda_counter.restype = ctypes.c_longlong
    return lib.fake_cuda_counter(11)


def axpy():
    """f(a, b, theta) = a * theta + b on the GPU, result on the host."""
    a, b = GpuArrayType("float64", (None,))(), GpuArrayType("float64", (None,))()
    theta = at.dscalar()
    s = [aes.float64() for _ in range(3)]
    comp = aes.Composite(s, [s[0] * s[2] + s[1]])
    return aesara.function([a, b, theta], host_from_gpu(GpuElemwise(comp)(a, b, theta)))


def test_calls_of_every_layout_in_turn():
    cp = cupy()
    f = axpy()
    rng = np.random.default_rng(0)
    big, other = rng.standard_normal(3000), rng.standard_normal(3000)
    gbig, gother = cp.asarray(big), cp.asarray(other)
    cases = [
        (np.s_[:], np.s_[:], 2.0),  # contiguous
        (np.s_[::3], np.s_[1::3], -1.5),  # strided
        (np.s_[:1], np.s_[:], 0.5),  # a length of 1 broadcasts
        (np.s_[:7], np.s_[:7], 3.0),  # contiguous again, another length
        (np.s_[::2], np.s_[:1], 1.0),  # strided and broadcast
    ]
    for i, j, t in cases + cases[::-1]:
        np.testing.assert_array_equal(f(gbig[i], gother[j], t), big[i] * t + other[j])
    with cp.cuda.Device(1):
        np.testing.assert_array_equal(f(cp.asarray(big), cp.asarray(other), 2.0), big * 2.0 + other)
    np.testing.assert_array_equal(f(gbig, gother, 4.0), big * 4.0 + other)


def test_no_parameter_struct_built_per_call(monkeypatch):
    built = []

    class Counted(elemwise._Params):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(elemwise, "_Params", Counted)
    cp = cupy()
    f = axpy()
    a = cp.asarray(np.arange(100.0))
    f(a, a, 1.0)
    first = len(built)
    for t in range(5):
        np.testing.assert_array_equal(f(a, a, float(t)), np.arange(100.0) * t + np.arange(100.0))
    assert first <= 1 and len(built) == first


@needs_emulation
@pytest.mark.parametrize("registers, per_sm", [(40, 3), (64, 2), (16, 4)])
def test_grid_from_the_occupancy_calculator(monkeypatch, registers, per_sm):
    """sm count (FAKE_CUDA_SMS, 2) times the blocks the registers allow:
    65536 / (registers * 512) blocks of 512 threads, at most 2048 threads."""
    monkeypatch.setenv("FAKE_CUDA_EW_REGISTERS", str(registers))
    cp = cupy()
    f = axpy()  # a new node: its launch is planned at its first call
    n = 100 * THREADS
    a = cp.asarray(np.ones(n))
    np.testing.assert_array_equal(f(a, a, 2.0), np.full(n, 3.0))
    assert last_grid() == int(os.environ.get("FAKE_CUDA_SMS", "2")) * per_sm
    small = cp.asarray(np.ones(THREADS + 1))
    f(small, small, 1.0)
    assert last_grid() == 2
