"""GpuElemwise, the generated elementwise kernels, through ``aesara.function``.

Against the same graph on the CPU (Aesara's C backend, FAST_RUN):

- every scalar op and dtype that the inline rule accepts for CUDA, packed
  into multi-output Composites (one kernel for up to 36 ops), on edge
  values (signed zeros, infinities, NaN, subnormals, the ends of each
  integer dtype);
- broadcasting (static lengths of 1, lower ranks, 0-d host scalars as kernel
  arguments), strided inputs (transposed, reversed, offset views), the
  contiguous fast path, a fused Composite with a host theta;
- integer division by constants (the divisors the Op takes), empty inputs.

And: one launch and no sync per call, the errors of bad calls (the process
and the GPU stay usable).  On the CPU emulation the device's math functions
are the host's libm; the per-op ulp bounds this measures are in
``docs/semantics.rst``.
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

import aesara.scalar as aes  # noqa: E402
import aesara.tensor as at  # noqa: E402
from aesara.tensor.elemwise import Elemwise  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount_core import scalar_codegen  # noqa: E402
from aesara_bincount_core.gpu.elemwise import GpuElemwise  # noqa: E402
from aesara_bincount_core.gpu.transfer import host_from_gpu  # noqa: E402
from aesara_bincount_core.gpu.type import GpuArrayType  # noqa: E402
import scalar_cases  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
needs_emulation = pytest.mark.skipif(not EMULATED, reason="reads the fake driver's counters")
QUICK_DTYPES = ("bool", "int64", "float32", "float64")
DTYPE_PARAMS = [d if d in QUICK_DTYPES else pytest.param(d, marks=pytest.mark.slow)
                for d in scalar_codegen.DTYPES]  # fmt: skip


def counts():
    """The fake driver's counters: launches, syncs, ..."""
    out = (ctypes.c_longlong * 8)()
    ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"]).fake_cuda_counters(out)
    return np.array(out)


def ulps(got, want):
    """Distance in units in the last place of ``want``'s dtype (NaN == NaN;
    zeros of different signs are 1 apart)."""
    same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        step = np.spacing(np.abs(want)).astype(np.float64)
        d = np.abs(got.astype(np.float64) - want.astype(np.float64)) / step
    return np.where(same, 0.0, np.nan_to_num(d, nan=np.inf, posinf=np.inf))


def gpu_inputs(arrays):
    cp = cupy()
    return [GpuArrayType(a.dtype.name, (None,) * a.ndim)() for a in arrays], [cp.asarray(a) for a in arrays]


def _both(build, host_arrays, gpu_arrays, scalars=()):
    """The graph ``build(*inputs)`` on the GPU (array inputs on the GPU) and on the host."""
    host_vs = [at.tensor(a.dtype.name, shape=(None,) * a.ndim) for a in host_arrays]
    gpu_vs = [GpuArrayType(a.dtype.name, (None,) * a.ndim)() for a in host_arrays]
    sc_vs = [at.scalar(dtype=np.asarray(s).dtype.name) for s in scalars]
    cpu = aesara.function(host_vs + sc_vs, build(*host_vs, *sc_vs, gpu=False))
    gpu = aesara.function(gpu_vs + sc_vs, host_from_gpu(build(*gpu_vs, *sc_vs, gpu=True)))
    return gpu(*gpu_arrays, *scalars), cpu(*host_arrays, *scalars)


def test_broadcasting_strides_and_host_scalars():
    cp = cupy()
    rng = np.random.default_rng(3)
    m = rng.normal(size=(5, 6)).astype("float32")
    m[0, 0], m[1, 1] = -0.0, np.inf
    row = rng.normal(size=6).astype("float32")
    theta = np.float64(-0.75)
    gm = cp.asarray(m)
    views = {
        "contiguous": (m, gm),
        "transposed": (m.T.copy(), gm.T),
        "reversed": (m[:, ::-1].copy(), gm[:, ::-1]),
        "offset": (m[1:, 1:].copy(), gm[1:, 1:]),
        "every other": (m[::2, ::2].copy(), gm[::2, ::2]),
    }
    th, x, y = aes.float64(), aes.float32(), aes.float32()
    comp = aes.Composite([x, y, th], [aes.exp(-th * x) + y])

    def build(a, r, t, gpu):
        if gpu:
            return GpuElemwise(comp)(a, r, t)
        return Elemwise(comp)(a, r.dimshuffle("x", 0) if r.ndim == 1 else r, t)

    for name, (host, dev) in views.items():
        r_host = row[: host.shape[1]]
        r_dev = cp.asarray(r_host)
        got, want = _both(build, [host, r_host], [dev, r_dev], [theta])
        np.testing.assert_array_equal(got, want, err_msg=name)
    # a column (static length 1) against a matrix, and a 0-d host constant
    col = rng.normal(size=(5, 1)).astype("float64")
    gcol = GpuArrayType("float64", (None, 1))()
    gmat = GpuArrayType("float32", (None, None))()
    out = GpuElemwise(aes.mul)(gmat, gcol)
    f = aesara.function([gmat, gcol], host_from_gpu(GpuElemwise(aes.add)(out, at.constant(2.5))))
    np.testing.assert_array_equal(f(gm, cp.asarray(col)), (m * col) + 2.5)


def test_integer_division_by_constants():
    cp = cupy()
    x = np.array([0, 1, 9, 10, 11, -1, -9, -10, -11, 2**31 - 1, -(2**31)], dtype="int32")
    for divisor in (10, -3, 1):
        for op in (aes.int_div, aes.mod):
            gx = GpuArrayType("int32", (None,))()
            f = aesara.function([gx], host_from_gpu(GpuElemwise(op)(gx, at.constant(np.int32(divisor)))))
            hx = at.ivector()
            want = aesara.function([hx], Elemwise(op)(hx, at.constant(np.int32(divisor))))(x)
            np.testing.assert_array_equal(f(cp.asarray(x)), want)
    # a Composite with its divisor inside: (x // 4) % 3
    s = aes.int32()
    comp = aes.Composite([s], [aes.mod(aes.int_div(s, aes.constant(np.int32(4))), aes.constant(np.int32(3)))])
    gx = GpuArrayType("int32", (None,))()
    f = aesara.function([gx], host_from_gpu(GpuElemwise(comp)(gx)))
    want = aesara.function([hx], Elemwise(comp)(hx))(x)
    np.testing.assert_array_equal(f(cp.asarray(x)), want)
    np.testing.assert_array_equal(want, np.floor_divide(x, 4) % 3)  # the graph is what it says


def test_integer_division_by_a_gpu_constant_array_runs_on_the_gpu():
    # m // np.array([1, 2, 3]): the lifting makes the divisor a GPU constant,
    # which the rule reads through a host copy (issue 28: np.asarray on it
    # raised TypeError under CuPy 13 and the node stayed on the host).
    from aesara_bincount import gpu
    from lift_cases import compile_pair, op_names

    value = np.array([[7, -7, 0], [100, -101, 2**31 - 1]], dtype="int32")
    m = gpu.shared(value, name="m")
    outs = [m // np.array([1, 2, 3], dtype="int32"), m % np.array([-3, 5, 7], dtype="int32")]
    f, ref = compile_pair([], outs)
    assert "GpuElemwise" in op_names(f) and "Elemwise" not in op_names(f), op_names(f)
    for got, want in zip(f(), ref()):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ref()[0], value // np.array([1, 2, 3]))


@needs_emulation
def test_one_launch_no_sync():
    cp = cupy()
    gv = GpuArrayType("float64", (None,))()
    theta = at.dscalar()
    f = aesara.function([gv, theta], GpuElemwise(aes.mul)(gv, theta))
    v = cp.asarray(np.arange(2000.0))
    f(v, 2.0)
    before, syncs = counts(), cp.counters["sync"]
    out = f(v, 3.0)
    assert counts()[0] - before[0] == 1 and cp.counters["sync"] == syncs
    assert isinstance(out, cp.ndarray) and out.get()[-1] == 3 * 1999.0


def test_empty_and_errors():
    cp = cupy()
    ga, gb = GpuArrayType("float32", (None,))(), GpuArrayType("float32", (None,))()
    f = aesara.function([ga, gb], GpuElemwise(aes.add)(ga, gb))
    assert f(cp.zeros(0, "float32"), cp.zeros(0, "float32")).shape == (0,)
    with pytest.raises(ValueError, match="do not broadcast"):
        f(cp.zeros(3, "float32"), cp.zeros(4, "float32"))
    # a length of 1 broadcasts at run time, as in Aesara's Elemwise, and the
    # inferred shape follows
    out = GpuElemwise(aes.add)(ga, gb)
    g = aesara.function([ga, gb], [host_from_gpu(out), out.shape])
    one, three = cp.asarray(np.array([1.5], "float32")), cp.asarray(np.arange(3, dtype="float32"))
    value, shape = g(one, three)
    assert value.tolist() == [1.5, 2.5, 3.5] and shape.tolist() == [3]
    assert f(cp.asarray(np.ones(3, "float32")), cp.asarray(np.ones(3, "float32"))).get().tolist() == [2, 2, 2]  # still usable
    with cp.cuda.Device(1):
        other = cp.asarray(np.ones(3, "float32"))
    with pytest.raises(ValueError, match="on GPU 1"):
        f(other, cp.asarray(np.ones(3, "float32")))
    with pytest.raises(TypeError, match="neither a GPU array"):
        GpuElemwise(aes.add)(ga, at.fvector())
    with pytest.raises(TypeError, match="cannot run on the GPU"):
        GpuElemwise(aes.int_div)(GpuArrayType("int32", (None,))(), GpuArrayType("int32", (None,))())


def test_kernel_name_changes_with_the_source_and_the_options(monkeypatch):
    """The kernel's name (the key of every kernel cache) hashes all that NVRTC
    compiles: an edit of the lines around the scalar code, or of the compiler
    options, gives a new kernel, never the cached old one (issue 28)."""
    from aesara_bincount_core.gpu import elemwise

    cp, v = cupy(), np.array([0.0, -1.5, 2.0])

    def kernel_name():
        gv = GpuArrayType("float64", (None,))()
        f = aesara.function([gv], host_from_gpu(GpuElemwise(aes.exp)(gv)))
        np.testing.assert_array_equal(f(cp.asarray(v)), np.exp(v))
        node = next(n for n in f.maker.fgraph.toposort() if isinstance(n.op, GpuElemwise))
        return node.op.kernel_source(node)[0]

    names = [kernel_name()]
    monkeypatch.setattr(elemwise, "_ELEMENT_HEAD", elemwise._ELEMENT_HEAD + " /* edited */")
    names.append(kernel_name())
    monkeypatch.setattr(elemwise, "_NVRTC_OPTIONS", elemwise._NVRTC_OPTIONS + ("-DBC_EDITED=1",))
    names.append(kernel_name())
    assert len(set(names)) == 3, names


# The exhaustive comparison last: the cheap tests above come first in a
# short selection.
@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_every_scalar_op_and_dtype(dtype):
    expected, _ = scalar_cases.cpu_reference("cuda", dtype, divisions=False)
    worst = {}
    for comp, names, arrays in scalar_cases.chunks("cuda", divisions=False):
        if arrays[0].dtype != dtype:
            continue
        vs, values = gpu_inputs(arrays)
        outs = GpuElemwise(comp)(*vs)
        outs = outs if isinstance(outs, list) else [outs]
        f = aesara.function(vs, [host_from_gpu(o) for o in outs])
        for name, got in zip(names, f(*values)):
            want = expected[name]
            assert got.dtype == want.dtype and got.shape == want.shape, name
            if want.dtype.kind == "f":
                worst[name] = float(ulps(got, want).max())
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{name} {dtype}")
    # The emulation runs the same C code against the same libm: bit for bit.
    # (A GPU's libdevice is within the bounds of docs/semantics.rst.)
    limit = 0 if EMULATED else 4
    assert {k: v for k, v in worst.items() if v > limit} == {}
