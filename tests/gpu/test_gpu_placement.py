"""Programs that stay on the GPU (issue 39): placement that follows the data, one wait per call.

Each program is compiled on GPU shared variables and, the same graph, on the
CPU (``mode.excluding("gpu_bincount")``); the GPU function must have no
transfer inside (``report`` lists none), wait at most once per call and
make no copy inside the call (the emulation's counters: one device-to-host
copy, for the results and the call's status together; a host-to-device
copy only for each host input, at the call's start), and give the CPU's
values.  A bad index, checked on the device, raises the CPU graph's
exception when the call ends and leaves the shared variables as they were.
"""
import importlib.util
import io
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gpu_cases import AVAILABLE, EMULATED, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from lift_cases import CPU_MODE, assert_same, inner_transfers, op_names, waits_and_copies  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


def _no_copy_inside(f, args=(), host_inputs=0):
    """No transfer node inside ``f``, an empty report, and (emulation) one wait,
    one device-to-host copy and ``host_inputs`` host-to-device copies per call."""
    assert not inner_transfers(f), op_names(f)
    assert gpu.report(f, file=io.StringIO()) == []
    waits, d2h, h2d = waits_and_copies(f, *args)
    if EMULATED:
        assert (waits, d2h, h2d) == (1, 1, host_inputs), (waits, d2h, h2d, op_names(f))


def _logreg_step():
    """``logreg_step`` of ``benchmarks/gpu_programs.py`` (the GPU benchmark times the same graph)."""
    path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks", "gpu_programs.py")
    spec = importlib.util.spec_from_file_location("_gpu_programs_39", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.logreg_step, module.LOGREG["small"]


@pytest.mark.parametrize("form", ["constant", "shape"])
def test_logistic_regression_step_and_errors(form):
    # issue 39's step: -mean(log(p)[arange(batch_size), y]), or arange(y.shape[0])
    build, sizes = _logreg_step()
    _, (g_cost, g_err), g_upd, (W, b, y) = build(gpu.shared, sizes, form=form)
    _, (h_cost, h_err), h_upd, (hW, hb, hy) = build(aesara.shared, sizes, form=form)
    step = aesara.function([], [g_cost], updates=g_upd)
    errors = aesara.function([], g_err)
    ref = aesara.function([], [h_cost], updates=h_upd, mode=CPU_MODE)
    ref_errors = aesara.function([], h_err, mode=CPU_MODE)
    _no_copy_inside(step)
    _no_copy_inside(errors)
    ref()
    for _ in range(2):
        assert_same(step()[0], ref()[0], float_ulps=256)
    assert_same(W.get_value(), hW.get_value(), float_ulps=256)
    assert_same(errors(), ref_errors())
    bad = y.get_value()
    bad[3] = 7
    y.set_value(bad)
    hy.set_value(bad)
    before = W.get_value(), b.get_value()
    with pytest.raises(Exception) as expected:
        ref()
    with pytest.raises(expected.type):
        step()
    assert_same(W.get_value(), before[0])
    assert_same(b.get_value(), before[1])


def test_sampler_logp_and_dlogp_of_a_host_vector_gathered_by_a_gpu_index():
    # PyMC3's NUTS calls logp(q) and dlogp(q) with a NumPy q: one copy of q per call
    rng = np.random.default_rng(1)
    team = gpu.shared(np.array([0, 3, 1, 2, 3, 0, 1, 1, 2, -4], dtype="int64"), name="team")
    goals = gpu.shared(rng.standard_normal(10), name="goals")
    q = at.dvector("q")
    logp = -0.5 * ((goals - q[team]) ** 2).sum() - 0.5 * (q**2).sum()
    outs = [logp, aesara.grad(logp, q)]
    f = aesara.function([q], outs)
    ref = aesara.function([q], outs, mode=CPU_MODE)
    value = np.array([0.5, -0.0, np.float64(1e-300), -2.0])
    _no_copy_inside(f, (value,), host_inputs=1)
    for got, expected in zip(f(value), ref(value)):
        assert_same(got, expected)
    with pytest.raises(IndexError):
        f(value[:3])  # team holds 3: out of range for a q of 3


def test_confusion_matrix_of_gpu_labels():
    truth = gpu.shared(np.array([0, 2, 1, 2, 2, 0, 1], dtype="int8"), name="truth")
    guess = gpu.shared(np.array([0, 2, 2, 2, 1, 0, -1], dtype="int64"), name="guess")
    conf = at.inc_subtensor(at.zeros((3, 3), dtype="int64")[truth, guess], 1)
    f = aesara.function([], conf)
    _no_copy_inside(f)
    assert_same(f(), aesara.function([], conf, mode=CPU_MODE)())


def test_host_constant_weights_and_the_softmax_output_layer():
    rng = np.random.default_rng(2)
    x = gpu.shared(rng.standard_normal((4, 5)).astype("float32"), name="x")
    b = gpu.shared(rng.standard_normal(3).astype("float32"), name="b")
    weights = at.constant(rng.standard_normal((5, 3)).astype("float32"))  # copied once, at compile time
    out = at.special.softmax(at.dot(at.tanh(x), weights) + b, axis=-1)
    f = aesara.function([], out)
    names = [str(n.op) for n in f.maker.fgraph.toposort()]
    assert "GpuSoftmaxWithBias" in names, names
    _no_copy_inside(f)
    assert_same(f(), aesara.function([], out, mode=CPU_MODE)())


def test_a_failed_check_leaves_a_base_updated_in_place_as_it_was():
    # The gather of V fails (checked on the device, raised when the call ends);
    # the scatter-add into W in place, queued after it, must add nothing.
    W = gpu.shared(np.zeros((5, 2), dtype="float32"), name="W")
    V = gpu.shared(np.ones(4, dtype="float32"), name="V")
    idx = gpu.shared(np.array([0, 2, 2], dtype="int64"), name="idx")
    sel = gpu.shared(np.array([1, 3], dtype="int64"), name="sel")
    inc = at.ones((3, 2), dtype="float32") * V[sel].sum()
    f = aesara.function([], [], updates={W: at.inc_subtensor(W[idx], inc)})
    scatter = [n.op for n in f.maker.fgraph.toposort() if type(n.op).__name__ == "GpuScatterAdd"]
    assert len(scatter) == 1 and scatter[0].inplace and scatter[0].call_status, op_names(f)
    _no_copy_inside(f)  # the call's status is read even with no result for the host
    expected = np.zeros((5, 2), dtype="float32")
    np.add.at(expected, [0, 2, 2], 2.0)
    assert_same(W.get_value(), expected)  # the call of _no_copy_inside
    sel.set_value(np.array([1, 9], dtype="int64"))
    with pytest.raises(IndexError, match="gather: index 9 at position 1"):
        f()
    assert_same(W.get_value(), expected)


def test_the_report_gives_the_true_reason_of_each_copy():
    x16 = gpu.shared(np.linspace(-1, 1, 6).reshape(2, 3).astype("float16"), name="x16")
    x = gpu.shared(np.linspace(-1, 1, 6).reshape(2, 3), name="x")
    host = at.dmatrix("host")
    outs = [
        at.special.softmax(x16, axis=-1) * 2,  # float16: refused by the entry, with its reason
        x * at.extra_ops.fill_diagonal(host, 0.0),  # computed on the host (no entry), copied to the GPU
    ]
    f = aesara.function([host], outs)
    text = io.StringIO()
    reasons = {(t.direction, str(t.reason)) for t in gpu.report(f, file=text)}
    assert ("GPU -> host", "Softmax refused: dtype float16 (the GPU entry takes float32, float64)") in reasons, text.getvalue()
    assert ("host -> GPU", "no GPU entry for FillDiagonal") in reasons, text.getvalue()
    value = np.arange(6.0).reshape(2, 3)
    for got, expected in zip(f(value), aesara.function([host], outs, mode=CPU_MODE)(value)):
        assert_same(got, expected, float_ulps=8)


def test_an_update_and_givens_with_a_more_precise_static_shape():
    # issue 39, item 4: refused with a TypeError before GpuArrayType.in_same_class
    W = gpu.shared(np.ones((3, 2), "float32"), name="W")
    x = at.vector("x", dtype="float32")
    g = at.reshape(x, (-1, 3)).T  # static shape (3, ?)
    f = aesara.function([x], [], updates=[(W, W - g)])
    value = np.arange(6, dtype="float32")
    f(value)
    assert_same(W.get_value(), 1 - value.reshape(2, 3).T)
    h = aesara.function([x], (W * 2).sum(), givens={W: gpu.gpu_from_host(g)})
    assert_same(h(value), np.float32(30.0))
