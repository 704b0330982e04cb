"""GpuFusedBincount: the weights of a GPU bincount computed in its histogram kernel.

Through ``aesara.function`` on GPU shared variables, against the same graph
on the CPU (``numpy.bincount`` of the weights Aesara computes): the seed's
loop ``bincount(gx, weights=exp(-theta * gv))`` compiles to one fused node,
with no ``GpuElemwise`` and no transfer inside; float32 and float64
weights, int32 and int64 x, strided, offset (``gv[1:]``) and length-1
broadcast inputs, host scalar inputs; the cases that are not fused (other
clients of the weights, ``mode.excluding("bincount_fusion")``), and a
negative x still raising ``ValueError``.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.gpu.transfer import gpu_from_host  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
RNG = np.random.default_rng(20)


def op_names(f):
    return [type(node.op).__name__ for node in f.maker.fgraph.toposort()]


def inner_transfers(f):
    """Transfers other than the final one to the host."""
    nodes = f.maker.fgraph.toposort()
    return [n for n in nodes if type(n.op).__name__ == "GpuFromHost" or (
        type(n.op).__name__ == "HostFromGpu" and n.outputs[0] not in f.maker.fgraph.outputs)]


def check(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype.startswith("float"):
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "x_dtype, w_dtype, view",
    [("int64", "float64", "plain"), ("int32", "float32", "offset"), ("int64", "float32", "strided")],
)
def test_seed_loop_is_one_fused_node(x_dtype, w_dtype, view):
    n = 3001
    xv = RNG.integers(0, 300, n + 2).astype(x_dtype)
    vv = RNG.standard_normal(2 * n + 2).astype(w_dtype)
    gx, gv = gpu.shared(xv, name="gx"), gpu.shared(vv, name="gv")
    theta = at.scalar("theta", dtype=w_dtype)
    pick = {"plain": lambda a: a[:n], "offset": lambda a: a[1:n + 1], "strided": lambda a: a[: 2 * n : 2]}[view]
    out = at.extra_ops.bincount(gx[1:n + 1], weights=at.exp(-theta * pick(gv)))
    f = aesara.function([theta], out)
    names = op_names(f)
    assert "GpuFusedBincount" in names, names
    assert "GpuElemwise" not in names and "Elemwise" not in names, names
    assert not inner_transfers(f), names
    t = np.asarray(0.25, dtype=w_dtype)
    want = np.bincount(xv[1:n + 1], weights=np.exp(-t * pick(vv)).astype(w_dtype)).astype(w_dtype)
    check(f(t), want, w_dtype)


def test_broadcast_and_integer_weights():
    """A length-1 GPU input broadcasts, a host scalar and a constant are
    kernel arguments; integer weights are exact."""
    n = 2000
    xv = RNG.integers(0, 50, n).astype("int64")
    uv = RNG.integers(-9, 9, n).astype("int32")
    gx, gu, g1 = gpu.shared(xv), gpu.shared(uv), gpu.shared(np.array([7], dtype="int32"))
    k = at.scalar("k", dtype="int32")
    out = at.extra_ops.bincount(gx, weights=gu * k + g1 // 2)
    f = aesara.function([k], out)
    assert "GpuFusedBincount" in op_names(f) and "GpuElemwise" not in op_names(f), op_names(f)
    want = np.bincount(xv, weights=uv * 3 + 3).astype("int32")
    check(f(np.int32(3)), want, "int32")


def test_not_fused_when_the_weights_have_other_clients():
    n = 500
    xv = RNG.integers(0, 40, n).astype("int64")
    vv = RNG.standard_normal(n)
    gx, gv = gpu.shared(xv), gpu.shared(vv)
    w = at.exp(-gv)
    f = aesara.function([], [at.extra_ops.bincount(gx, weights=w), gpu_from_host(w)])
    assert "GpuFusedBincount" not in op_names(f) and "GpuElemwise" in op_names(f), op_names(f)
    got, _ = f()
    check(got, np.bincount(xv, weights=np.exp(-vv)), "float64")
    off = aesara.function([], at.extra_ops.bincount(gx, weights=at.exp(-gv)),
                          mode=aesara.compile.get_default_mode().excluding("bincount_fusion"))
    assert "GpuFusedBincount" not in op_names(off), op_names(off)
    check(off(), np.bincount(xv, weights=np.exp(-vv)), "float64")


def test_negative_x_and_bad_lengths_raise():
    xv = np.array([0, 3, -4, 2], dtype="int64")
    gx, gv = gpu.shared(xv), gpu.shared(np.ones(4))
    f = aesara.function([], at.extra_ops.bincount(gx, weights=at.exp(gv)))
    assert "GpuFusedBincount" in op_names(f)
    with pytest.raises(ValueError, match="-4"):
        f()
    gv.set_value(np.ones(5))
    with pytest.raises(ValueError):
        f()
    gx.set_value(np.array([0, 3, 1, 2, 2], dtype="int64"))
    check(f(), np.bincount([0, 3, 1, 2, 2], weights=np.exp(np.ones(5))), "float64")
    # Inputs of the weights graph that do not broadcast: the CPU's message.
    gu = gpu.shared(np.ones(3))
    g = aesara.function([], at.extra_ops.bincount(gx, weights=gv * gu))
    assert "GpuFusedBincount" in op_names(g)
    with pytest.raises(ValueError, match="inputs of the elementwise weights have lengths 5 and 3"):
        g()


@pytest.mark.parametrize("x_dtype", ["int64", "int32"])
def test_computed_x_and_weights_are_one_fused_node(x_dtype):
    """``bincount(gx // 10)`` and ``bincount(gx[::3] // 10, weights=2 * gv)``:
    x computed in the kernel (strided input), counts and weights exact."""
    n = 2500
    xv = RNG.integers(0, 5000, 3 * n).astype(x_dtype)
    uv = RNG.integers(-5, 5, n).astype("int64")
    gx, gu = gpu.shared(xv), gpu.shared(uv)
    f = aesara.function([], [at.extra_ops.bincount(gx // 10),
                             at.extra_ops.bincount(gx[::3] // 10, weights=2 * gu)])
    names = op_names(f)
    assert names.count("GpuFusedBincount") == 2 and "GpuElemwise" not in names, names
    assert not inner_transfers(f), names
    counts, sums = f()
    check(counts, np.bincount(xv // 10).astype(x_dtype), x_dtype)
    check(sums, np.bincount(xv[::3] // 10, weights=2 * uv).astype("int64"), "int64")


def test_computed_negative_x_raises_naming_it():
    xv = np.array([7, 9, 2, 8], dtype="int64")
    gx = gpu.shared(xv)
    f = aesara.function([], at.extra_ops.bincount(gx - 5))
    assert "GpuFusedBincount" in op_names(f), op_names(f)
    with pytest.raises(ValueError, match="-3"):
        f()
    gx.set_value(xv + 3)
    check(f(), np.bincount(xv - 2), "int64")


def test_scatter_form_with_computed_indices_and_weights():
    """``inc_subtensor(zeros(50)[gi // 2], exp(gv))``: the scatter-add form,
    negative computed indices wrapping once; an empty x gives zeros."""
    iv = RNG.integers(-100, 100, 700).astype("int32")
    vv = RNG.standard_normal(700)
    gi, gv = gpu.shared(iv), gpu.shared(vv)
    f = aesara.function([], at.inc_subtensor(at.zeros(50)[gi // 2], at.exp(gv)))
    names = op_names(f)
    assert "GpuFusedBincount" in names and "GpuElemwise" not in names, names
    want = np.zeros(50)
    np.add.at(want, iv // 2, np.exp(vv))
    check(f(), want, "float64")
    gi.set_value(np.zeros(0, dtype="int32"))
    gv.set_value(np.zeros(0))
    check(f(), np.zeros(50), "float64")
