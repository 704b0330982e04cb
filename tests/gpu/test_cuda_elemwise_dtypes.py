"""GpuElemwise on inputs of mixed dtypes and on casts, through ``aesara.function``.

Against the same graph on the CPU (``lift_cases.compile_pair``: the
lifting's GPU graph and the graph with ``gpu_bincount`` excluded):

- the graphs of issue 28 whose ``pow`` or ``%`` NVRTC could not compile
  (``gx ** 3`` on int64, ``gv ** gk``, float32 by int8, ``x ** 2.5``, a
  float64 by a float32 constant, ``uint64 % int64``, a bincount of them);
- every binary op that the inline rule accepts, for representative pairs of
  dtypes (``scalar_cases.mixed_pair``; NVRTC compiles every pair in
  ``tests/test_scalar_codegen.py``);
- float-to-integer casts of NaN, infinities, out-of-range and negative
  values (``docs/semantics.rst``, "Casts on the GPU").
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, EMULATED, WHY, cupy  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.tensor.elemwise import Elemwise  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.gpu.elemwise import GpuElemwise  # noqa: E402
from aesara_bincount_core.gpu.transfer import host_from_gpu  # noqa: E402
from aesara_bincount_core.gpu.type import GpuArrayType  # noqa: E402
from lift_cases import assert_same, compile_pair, op_names  # noqa: E402
import scalar_cases  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
RNG = np.random.default_rng(28)
#: The emulation runs the host's libm: bit for bit; a GPU's libdevice within
#: the bounds of docs/semantics.rst.
ULPS = 0 if EMULATED else 4


def test_mixed_dtype_pow_and_mod_of_the_issue():
    gx = gpu.shared(RNG.integers(-40, 40, 50).astype("int64"), name="gx")
    gv = gpu.shared(np.abs(RNG.standard_normal(50)) + 0.5, name="gv")
    gk = gpu.shared(RNG.integers(-3, 4, 50).astype("int64"), name="gk")
    g8 = gpu.shared(RNG.integers(-3, 4, 50).astype("int8"), name="g8")
    g32 = gpu.shared(RNG.integers(-3, 4, 50).astype("int32"), name="g32")
    gf = gpu.shared(RNG.standard_normal(50).astype("float32") * 3, name="gf")
    gu = gpu.shared(RNG.integers(0, 2**64, 50, dtype="uint64", endpoint=False), name="gu")
    sd = gpu.shared(np.abs(RNG.standard_normal(50)) + 0.1, name="sd")
    outs = [
        gx**3,  # int64 by int8: pow(long, signed char)
        gv**gk,  # float64 by int64
        gf**g8,  # float32 by int8
        gf**g32,  # float32 by int32: float64 on the CPU, so not CUDA's pow(float, int)
        gv**2.5,  # float64 by a float32 constant (Aesara types 2.5 as float32)
        sd ** np.float32(-3.0),  # PyMC3's Normal log-density gradient
        gu % np.int64(7),  # uint64 by int64: float64 fmod
        gu // np.int64(-7),
        gf % gv,  # float32 by float64
        bincount(gx * gx, weights=gv**gk),
        bincount((gx**3) % 50),
    ]
    f, ref = compile_pair([], outs)
    assert "GpuElemwise" in op_names(f) and "Elemwise" not in op_names(f), op_names(f)
    for k, (got, want) in enumerate(zip(f(), ref())):
        # 4 ulps: the CPU graph computes sd ** -3 as 1 / (sd * sd * sd) (Aesara's
        # pow specialization), the GPU graph as pow(sd, -3.0)
        assert_same(got, want, float_ulps=4), k


@pytest.mark.parametrize(
    "first, second",
    [("int64", "int8"), ("float64", "int64"), ("float32", "int8"), ("float32", "int32"),
     ("float64", "float32"), ("uint64", "int64"), ("bool", "float32"), ("uint8", "int16")],
)  # fmt: skip
def test_every_binary_op_on_mixed_dtypes(first, second):
    comp, names, arrays = scalar_cases.mixed_pair(first, second)
    gvs = [GpuArrayType(a.dtype.name, (None,))() for a in arrays]
    hvs = [at.tensor(a.dtype.name, shape=(None,)) for a in arrays]
    f = aesara.function(gvs, [host_from_gpu(o) for o in GpuElemwise(comp)(*gvs)])
    cpu = aesara.function(hvs, Elemwise(comp)(*hvs))
    for name, got, want in zip(names, f(*[cupy().asarray(a) for a in arrays]), cpu(*arrays)):
        assert got.dtype == want.dtype, name
        if want.dtype.kind == "f":
            assert_same(got, want, float_ulps=ULPS)
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {first} {second}")


#: Values whose cast to an integer is out of range, NaN, or negative to unsigned.
CAST_EDGES = [np.nan, np.inf, -np.inf, -1.0, -1.5, -0.0, 0.75, 300.0, -300.0, 1e10, -1e10, 3e9, 1e20,
              -1e20, 2.0**63, -(2.0**63), 2.0**64, 2**31 - 0.5, -(2**31) - 0.5, 65535.9, -129.5]  # fmt: skip


@pytest.mark.parametrize("source", ["float64", "float32"])
def test_float_to_integer_casts_give_the_cpu_values(source):
    """NaN, infinities, out-of-range and negative-to-unsigned casts: x86-64's
    values (NumPy's and Aesara's C code's) on the GPU; casts to uint32 and
    uint64, on which those two disagree, stay on the host."""
    with np.errstate(over="ignore"):
        value = np.array(CAST_EDGES, dtype=source)
    gv = gpu.shared(value, name="gv")
    targets = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]
    f, ref = compile_pair([], [at.cast(gv, d) for d in targets])
    for d, got, want in zip(targets, f(), ref()):
        assert_same(got, want), d
    with np.errstate(invalid="ignore"):
        assert_same(ref()[0], value.astype("int8"))  # the CPU graph is NumPy's
    on_host = [n for n in f.maker.fgraph.toposort() if type(n.op).__name__ == "Elemwise"]
    assert sorted(str(n.outputs[0].type.dtype) for n in on_host) == ["uint32", "uint64"], op_names(f)


def test_histogram_of_floats_with_a_nan_raises_as_on_the_cpu():
    # bincount(cast(floor(v * 10), "int64")): NaN casts to INT64_MIN, a negative value.
    value = np.array([0.05, 0.31, np.nan, 0.99], "float64")
    gv = gpu.shared(value, name="gv")
    f, ref = compile_pair([], bincount(at.cast(at.floor(gv * 10), "int64")))
    assert "Elemwise" not in op_names(f), op_names(f)
    for g in (f, ref):
        with pytest.raises(ValueError, match="negative"):
            g()
    gv.set_value(value[[0, 1, 3]])
    assert_same(f(), ref())
