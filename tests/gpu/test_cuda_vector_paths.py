"""The vector paths of the generated kernels at every alignment, through ``aesara.function``.

``GpuElemwise`` loads and stores ``BC_EW_VEC`` elements at once when every
array is contiguous and aligned to the width of its vector
(``min(16, 4 * itemsize)`` bytes), and ``GpuFusedBincount`` loads the
inputs of a computed ``x`` and of computed weights so when they are
aligned at the head of the loop; every other layout takes the element
loops.  The fake driver of the CPU emulation fails a load or store at an
address that its width does not divide, as a GPU does
(``CUDA_ERROR_MISALIGNED_ADDRESS``, a sticky error that the tests read):
so a wrong alignment rule fails here.  Each case is a view at an offset of
0 ... 4 elements, of lengths 0 ... 9 (around the 4 elements of a vector and
its tail), of dtypes of 1, 2, 4 and 8 bytes, against the same graph on
the CPU (Aesara's C backend); the values must be the same bits.
"""
import ctypes
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, EMULATED, WHY, cupy, sticky  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.scalar as aes  # noqa: E402
import aesara.tensor as at  # noqa: E402
from aesara.tensor.elemwise import Elemwise  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.gpu import elemwise_layout  # noqa: E402
from aesara_bincount_core.gpu.elemwise import GpuElemwise  # noqa: E402
from aesara_bincount_core.gpu.transfer import host_from_gpu  # noqa: E402
from aesara_bincount_core.gpu.type import GpuArrayType  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
needs_emulation = pytest.mark.skipif(not EMULATED, reason="reads the fake driver's counters")
#: One dtype of each size.
DTYPES = ("int8", "int16", "float32", "float64")
LENGTHS = range(10)
RNG = np.random.default_rng(28)


def _driver():
    return ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])


def accesses(width: int = 4) -> int:
    """Vector loads and stores (__ldcs, __stwb) of ``width`` bytes or more
    that the kernels made so far (emulation; 0 on a GPU)."""
    if not EMULATED:
        return 0
    loads, stores = (ctypes.c_longlong * 17)(), (ctypes.c_longlong * 17)()
    _driver().fake_cuda_load_counts(loads)
    _driver().fake_cuda_store_counts(stores)
    return sum(loads[width:]) + sum(stores[width:])


@pytest.fixture(autouse=True)
def no_sticky_error():
    sticky(clear=True)
    yield
    assert sticky(clear=True) == 0, "a kernel made a misaligned access (the context would be lost)"


def values(dtype: str, n: int) -> np.ndarray:
    """Values that break code: signed zeros, NaN, inf for floats; the ends of the range for integers."""
    if dtype.startswith("float"):
        v = RNG.standard_normal(n).astype(dtype)
        v[: min(n, 4)] = np.array([-0.0, np.nan, np.inf, 0.0], dtype)[: min(n, 4)]
        return v
    info = np.iinfo(dtype)
    v = RNG.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    v[: min(n, 2)] = np.array([info.min, info.max], dtype)[: min(n, 2)]
    return v


def same_bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=str(what))


#: (offset of a, of b, of c) in elements: each array misaligned alone, all
#: aligned, and all at an offset that keeps them aligned for the small dtypes.
OFFSETS = [(0, 0, 0)] + [(o, 0, 0) for o in (1, 2, 3)] + [(0, o, 0) for o in (1, 2, 3)] + \
    [(0, 0, o) for o in (1, 2, 3)] + [(4, 4, 2)]


def _elemwise_pair(dtype):
    """The GPU and CPU functions of a Composite of three inputs (a, b of
    ``dtype``; c float64) and three outputs of 1, ``dtype``'s and 8 bytes."""
    a, b, c = aes.get_scalar_type(dtype)(), aes.get_scalar_type(dtype)(), aes.float64()
    # no product feeds a sum: the CPU's C code may contract one into a fused
    # multiply-add (gcc, -march=native), which the GPU's never does
    comp = aes.Composite([a, b, c], [a * b, aes.lt(a, b), aes.cast(a, "float64") / c])
    gvs = [GpuArrayType(d, (None,))() for d in (dtype, dtype, "float64")]
    hvs = [at.vector(dtype=d) for d in (dtype, dtype, "float64")]
    gpu_f = aesara.function(gvs, [host_from_gpu(o) for o in GpuElemwise(comp)(*gvs)])
    cpu_f = aesara.function(hvs, Elemwise(comp)(*hvs))
    return gpu_f, cpu_f


@pytest.mark.parametrize("dtype", DTYPES)
def test_elemwise_at_every_offset_and_length(dtype):
    cp = cupy()
    gpu_f, cpu_f = _elemwise_pair(dtype)
    assert GpuElemwise.vector_width(gpu_f.maker.fgraph.toposort()[0]) == 4
    host = [values(dtype, 16), values(dtype, 16), values("float64", 16)]
    dev = [cp.asarray(h) for h in host]
    assert all(d.data.ptr % 16 == 0 for d in dev)
    for offsets in OFFSETS:
        for n in LENGTHS:
            ins_h = [h[o : o + n] for h, o in zip(host, offsets)]
            ins_d = [d[o : o + n] for d, o in zip(dev, offsets)]
            before = accesses()
            got = gpu_f(*ins_d)
            aligned = all(o * h.itemsize % min(16, 4 * h.itemsize) == 0 for o, h in zip(offsets, host))
            if EMULATED and n >= 4:
                # the vector path when (and only when) every array is aligned
                assert (accesses() > before) == aligned, (offsets, n)
            for k, (g, w) in enumerate(zip(got, cpu_f(*ins_h))):
                same_bits(g, w, (offsets, n, k))
            assert sticky() == 0, (offsets, n)


@needs_emulation
def test_a_wrong_alignment_rule_faults_on_the_emulation(monkeypatch):
    """The check above can fail: with the host's rule replaced by one that
    always takes the vector path, a view at an odd offset makes a misaligned
    vector access, which the fake driver reports as a GPU would."""
    cp = cupy()
    gpu_f, _ = _elemwise_pair("float32")
    host = [values("float32", 16), values("float32", 16), values("float64", 16)]
    dev = [cp.asarray(h) for h in host]
    monkeypatch.setattr(elemwise_layout, "vector_aligned", lambda args, width: True)
    gpu_f(dev[0][1:9], dev[1][:8], dev[2][:8])
    assert sticky(clear=True) != 0


def _fused_cases(x_dtype, w_dtype):
    """(name, build(x, v, w2), fused op expected): bincount graphs with a
    computed x, computed weights, or both, of 1-D views."""
    theta = np.asarray(0.5, dtype=w_dtype)
    return [
        ("weights", lambda x, v, u: at.extra_ops.bincount(x, weights=v * theta + u)),
        ("x", lambda x, v, u: at.extra_ops.bincount(x // 2)),
        ("both", lambda x, v, u: at.extra_ops.bincount(x // 3, weights=at.exp(v) - u)),
    ]


@pytest.mark.parametrize("x_dtype, w_dtype", [("uint8", "float32"), ("int64", "float64"),
                                              pytest.param("uint16", "float64", marks=pytest.mark.long),
                                              pytest.param("int32", "float32", marks=pytest.mark.long)])
def test_fused_bincount_at_every_offset_and_length(x_dtype, w_dtype):
    """x of every size (1 to 8 bytes: 4 elements a vector, 2 for int64) and
    the two weights inputs (make test: 1- and 8-byte x, float32 and float64
    weights; make test-long: the 2- and 4-byte x too), each at offsets 0 ... 3 and 4 (aligned again for
    the narrow dtypes), lengths 0 ... 9, against the CPU graph."""
    n_all = 16
    xh = RNG.integers(0, 60, n_all).astype(x_dtype)
    vh, uh = values(w_dtype, n_all), values(w_dtype, n_all)
    vh[np.isinf(vh)] = 1.5  # exp(inf) - inf would be NaN in one bin and compare anyway
    gx, gv, gu = (gpu.shared(a, name=nm) for a, nm in ((xh, "gx"), (vh, "gv"), (uh, "gu")))
    hx, hv, hu = (aesara.shared(a) for a in (xh, vh, uh))
    ox, ov, ou, n = (at.iscalar(s) for s in ("ox", "ov", "ou", "n"))
    combos = [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0), (0, 1, 0), (0, 2, 0), (0, 3, 0),
              (0, 0, 1), (1, 1, 1), (3, 3, 3), (4, 4, 4), (2, 2, 2)]
    for name, build in _fused_cases(x_dtype, w_dtype):
        def graph(x, v, u):
            return build(x[ox : ox + n], v[ov : ov + n], u[ou : ou + n])

        gpu_f = aesara.function([ox, ov, ou, n], graph(gx, gv, gu), on_unused_input="ignore")
        cpu_f = aesara.function([ox, ov, ou, n], graph(hx, hv, hu), on_unused_input="ignore")
        names = [type(node.op).__name__ for node in gpu_f.maker.fgraph.toposort()]
        assert "GpuFusedBincount" in names, (name, names)
        for offsets in combos:
            for length in LENGTHS:
                width = 16 if name == "weights" else 4
                before = accesses(width)
                got, want = gpu_f(*offsets, length), cpu_f(*offsets, length)
                if offsets == (0, 0, 0) and length >= 8 and (name != "weights" or x_dtype in ("uint8", "uint16")):
                    # the computed x, or the weights of a narrow x, from vector loads
                    # (16 bytes: wider than a vector of x, in the second case)
                    assert not EMULATED or accesses(width) > before, (name, length)
                if w_dtype == "float32" and name != "x":
                    # float32 bins are summed in float64 on the GPU, in
                    # float32 on the CPU; integer counts are exact
                    np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=str((name, offsets, length)))
                else:
                    same_bits(got, want, (name, offsets, length))
                assert sticky() == 0, (name, offsets, length)
