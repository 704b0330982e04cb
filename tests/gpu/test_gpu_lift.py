"""The lifting pass on the GPU, through ``aesara.function``: reductions, views, gather, the five graphs.

Each graph is built on GPU shared variables and compiled twice
(``lift_cases.compile_pair``): with the default rewrites, where its work
must run on the GPU with no transfer inside, and with
``mode.excluding("gpu_bincount")``, the CPU graph whose results it must
give.  The data have the values that break code: signed zeros, NaN,
top-of-dtype integers, negative and odd indices, views at odd offsets.
The five graphs of issue 18 also need ``GpuElemwise`` (gpu-elemwise's Op):
their weights, divisions and updates are elementwise.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import AVAILABLE, WHY, cupy  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from lift_cases import assert_same, compile_pair, inner_transfers, op_names  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
RNG = np.random.default_rng(18)


def _matrix(dtype, shape=(5, 7)):
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.startswith("float"):
        a = RNG.standard_normal(shape).astype(dtype)
        a.flat[:3] = [-0.0, 0.0, np.finfo(dtype).max / 4]
        return a
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    a.flat[:2] = [info.min, info.max]
    return a


def _host_nodes_of_gpu_data(f):
    """Host nodes that take an array straight from a HostFromGpu (other than the user's outputs)."""
    return [
        n for n in f.maker.fgraph.toposort()
        if type(n.op).__name__ not in ("DeepCopyOp", "HostFromGpu")
        and any(i.owner is not None and type(i.owner.op).__name__ == "HostFromGpu" for i in n.inputs)
    ]


def _no_inner_transfers(f):
    assert not inner_transfers(f), op_names(f)


@pytest.mark.parametrize("dtype", ["int8", "uint32", "int64", "float32", "float64", "bool"])
def test_reductions_over_each_axis(dtype):
    value = _matrix(dtype)
    x = gpu.shared(value)
    cases = [(name, axis) for axis in (None, 0, 1, (0, 1), -1) for name in ("sum", "prod", "max", "min")]
    if dtype == "bool":
        cases += [("all", 1), ("any", 0), ("all", None), ("any", None)]
    outs = [getattr(at, name)(x, axis=axis) for name, axis in cases]
    f, ref = compile_pair([], outs)
    # Dtypes from the CPU graph, values from NumPy (as the CPU graph gives them).
    for (name, axis), got, cpu in zip(cases, f(), ref()):
        kwargs = {"dtype": cpu.dtype} if name in ("sum", "prod") else {}
        assert_same(got, np.asarray(getattr(np, name)(value, axis=axis, **kwargs)).astype(cpu.dtype))
    assert op_names(f).count("GpuCAReduce") >= 9, op_names(f)
    # The minimum of unsigned integers and bools is rewritten by Aesara into a
    # maximum of their complement: an Elemwise, lifted too.
    assert not _host_nodes_of_gpu_data(f), op_names(f)


@pytest.mark.parametrize("dtype", ["int16", "float32"])
def test_mean_and_reductions_of_views(dtype):
    x = gpu.shared(_matrix(dtype, (6, 9)))
    view = x[1:, ::-2].T  # odd offset, negative stride, transposed
    outs = [view.sum(axis=0), view.max(axis=-1), x.mean(), x.mean(axis=1)]
    f, ref = compile_pair([], outs)
    assert {"GpuCAReduce", "GpuSubtensor", "GpuDimShuffle"} <= set(op_names(f)), op_names(f)
    for got, expected in zip(f(), ref()):
        assert_same(got, expected)
    _no_inner_transfers(f)


def test_views_and_shapes_stay_on_the_gpu():
    value = _matrix("float64", (4, 6))
    x = gpu.shared(value)
    k = at.lscalar("k")
    outs = [
        gpu.gpu_from_host(x.T[1:, k]),
        gpu.gpu_from_host(x[:, None, ::3]),
        gpu.gpu_from_host(x.reshape((3, -1))[-1]),
        gpu.gpu_from_host(x[k, k]),
        x.shape,
        x.shape[1],
    ]
    f, ref = compile_pair([k], outs)
    names = op_names(f)
    assert "HostFromGpu" not in names and "GpuFromHost" not in names, names
    got, expected = f(2), ref(2)
    cp = cupy()
    for g, e in zip(got[:4], expected[:4]):
        assert isinstance(g, cp.ndarray)
        assert_same(g, e)
    for g, e in zip(got[4:], expected[4:]):
        assert_same(g, e)


def test_bad_views_raise_and_leave_the_function_usable():
    value = _matrix("int32", (3, 4))
    x = gpu.shared(value)
    k = at.lscalar("k")
    shape = at.lvector("shape")
    f = aesara.function([k, shape], [gpu.gpu_from_host(x[k]), gpu.gpu_from_host(x.reshape(shape, ndim=2))])
    assert {"GpuSubtensor", "GpuReshape"} <= set(op_names(f)), op_names(f)
    with pytest.raises(IndexError):
        f(3, [4, 3])
    with pytest.raises(ValueError):
        f(-3, [5, 3])
    row, reshaped = f(-3, [2, 6])
    assert_same(row, value[-3])
    assert_same(reshaped, value.reshape(2, 6))
    np.testing.assert_array_equal(x.get_value(), value)


@pytest.mark.parametrize("idx_dtype", ["int8", "int64", "uint64"])
def test_gather_of_rows(idx_dtype):
    W = gpu.shared(_matrix("float32", (9, 3)))
    values = np.array([0, 8, 3, 3, 1] + ([-1, -9] if idx_dtype.startswith("int") else []), dtype=idx_dtype)
    idx = gpu.shared(values)
    f, ref = compile_pair([], [W[idx], W[:, 1][idx], gpu.gpu_from_host(W[idx][::2])])
    assert "GpuAdvancedSubtensor1" in op_names(f)
    _no_inner_transfers(f)
    for got, expected in zip(f(), ref()):
        assert_same(got, expected)


def test_constant_arrays_become_gpu_constants():
    value = _matrix("float64", (6, 3))
    W = gpu.shared(value)
    rows = np.array([5, -6, 2], dtype="int64")
    scale = (np.arange(18.0).reshape(6, 3) - 7.5) / 8  # no zero factor: no inf * 0
    f, ref = compile_pair([], [W[rows], W * scale])
    names = op_names(f)
    assert "GpuFromHost" not in names and "GpuAdvancedSubtensor1" in names, names
    _no_inner_transfers(f)
    for got, expected in zip(f(), ref()):
        assert_same(got, expected)


@pytest.mark.parametrize("bad", [9, -10, 2**64 - 1])
def test_gather_index_out_of_range_raises_index_error(bad):
    value = _matrix("float64", (9, 2))
    W = gpu.shared(value)
    dtype = "uint64" if bad > 2**63 else "int64"
    idx = gpu.shared(np.array([0, bad, 1], dtype=dtype))
    f = aesara.function([], W[idx])
    message = r"gather: index .* at position 1 is out of bounds for axis 0 with size 9"
    with pytest.raises(IndexError, match=message):
        f()
    np.testing.assert_array_equal(W.get_value(), value)
    idx.set_value(np.array([8, 0], dtype=dtype))
    assert_same(f(), value[[8, 0]])  # the function and the GPU context still work


# -- the five graphs of issue 18 --------------------------------------------------------
N = 1000


def _data():
    gx = gpu.shared(RNG.integers(0, 200, N).astype("int64"), name="gx")
    gv = gpu.shared(RNG.standard_normal(N), name="gv")
    return gx, gv


def test_seed_loop_weights_recomputed_on_the_gpu():
    gx, gv = _data()
    theta = at.dscalar("theta")
    f, ref = compile_pair([theta], bincount(gx, weights=at.exp(-theta * gv)))
    # one kernel: the weights computed in the histogram pass (issue 20)
    assert "GpuFusedBincount" in op_names(f) and "GpuElemwise" not in op_names(f), op_names(f)
    assert_same(f(0.5), ref(0.5))
    _no_inner_transfers(f)


def test_bincount_of_computed_integers():
    gx, _ = _data()
    f, ref = compile_pair([], bincount(gx // 10))
    # one kernel: x computed in the histogram pass (issue 20)
    assert "GpuFusedBincount" in op_names(f) and "GpuElemwise" not in op_names(f), op_names(f)
    assert_same(f(), ref())
    _no_inner_transfers(f)


def test_normalized_histogram():
    gx, _ = _data()
    h = bincount(gx)
    f, ref = compile_pair([], h / h.sum())
    assert "GpuBincount" in op_names(f) and "GpuCAReduce" in op_names(f), op_names(f)
    assert_same(f(), ref())
    _no_inner_transfers(f)


def test_accumulated_histogram_update_stays_on_the_gpu():
    gx, gv = _data()
    theta = at.dscalar("theta")
    start = RNG.standard_normal(1000)
    accs = [gpu.shared(start, name="acc"), gpu.shared(start, name="acc_cpu")]
    w = theta * gv
    upd = [{a: a + bincount(gx, weights=w, minlength=1000)} for a in accs]
    f, ref = compile_pair([theta], [], updates=upd[0], cpu_updates=upd[1])
    assert "GpuFusedBincount" in op_names(f), op_names(f)
    for t in (0.25, -2.0):
        f(t)
        ref(t)
    # Atomics add in any order: an absolute bound of the sum of |weights| per bin.
    np.testing.assert_allclose(accs[0].get_value(), accs[1].get_value(), rtol=0, atol=1e-12 * N * 2.25)
    _no_inner_transfers(f)


def test_embedding_sgd_step():
    V, D, B = 50, 8, 32
    W0 = RNG.standard_normal((V, D)).astype("float32")
    idx = gpu.shared(RNG.integers(-V, V, B).astype("int32"), name="idx")
    t = gpu.shared(RNG.standard_normal((B, D)).astype("float32"), name="t")
    lr = at.scalar("lr", dtype="float32")
    Ws = [gpu.shared(W0, name="W"), gpu.shared(W0, name="W_cpu")]
    upd = []
    for W in Ws:
        loss = ((W[idx] - t) ** 2).sum()
        upd.append({W: W - lr * aesara.grad(loss, W)})
    f, ref = compile_pair([lr], [], updates=upd[0], cpu_updates=upd[1])
    names = op_names(f)
    assert "GpuAdvancedSubtensor1" in names, names
    for _ in range(2):
        f(np.float32(0.1))
        ref(np.float32(0.1))
    assert_same(Ws[0].get_value(), Ws[1].get_value(), float_ulps=256)
    scatter = [n for n in f.maker.fgraph.toposort() if type(n.op).__name__ == "GpuScatterAdd"]
    assert scatter, names
    assert all(type(i.owner.op).__name__ != "GpuFromHost" for i in scatter[0].inputs if i.owner), names
    _no_inner_transfers(f)
