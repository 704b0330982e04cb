"""Loops on the GPU (issue 39, item 2): ``scan`` programs with no copy inside a call, the CPU graph's values.

The Elman RNN, the LSTM and CTC trained with scan (a forward loop, its
gradient, a second loop, and SGD updates of GPU shared weights) and the
foldl metric
are built by ``benchmarks/gpu_scan_programs.py`` (the GPU benchmark times
the same graphs), once on GPU shared variables and once on host shared
variables compiled without the GPU rewrites; after a few calls the results
and the weights must agree.  On the emulation, the fake CuPy's and the fake
driver's counters show that a call copies nothing to the device and waits
once, for the loss it returns, whatever the number of steps.  The loops'
own cases (the taps of a mit-sot, the circular buffer of the last states, a
reversed sequence, no step at all, a truncated gradient, a while loop, a
bad index inside the loop) each run once against the CPU graph.
"""
import ctypes
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
from aesara.scan.utils import until  # noqa: E402
from aesara.tensor.extra_ops import fill_diagonal  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from lift_cases import CPU_MODE, assert_same  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


def _programs():
    path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks", "gpu_scan_programs.py")
    spec = importlib.util.spec_from_file_location("_gpu_scan_programs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROGRAMS = _programs().SCAN_PROGRAMS


def _counts():
    """(waits, device-to-host copies, host-to-device copies) so far, on the emulation."""
    import cupy as cp

    lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
    lib.fake_cuda_counter.restype = ctypes.c_longlong
    return np.array([cp.counters["sync"], cp.counters["d2h"] + lib.fake_cuda_counter(2), cp.counters["h2d"]])


def _per_call(f, *args):
    before = _counts()
    out = f(*args)
    return _counts() - before, out


def _loops(f):
    return [type(n.op).__name__ for n in f.maker.fgraph.toposort() if "Scan" in type(n.op).__name__]


def _no_copy(f):
    buf = io.StringIO()
    assert gpu.report(f, file=buf) == [], buf.getvalue()


@pytest.mark.parametrize(
    "name, loops", [("rnn step", 2), ("lstm step", 2), ("ctc step", 2), ("foldl metric", 1)]
)
def test_scan_program_stays_on_the_gpu_and_gives_the_cpu_values(name, loops):
    build, sizes, args = PROGRAMS[name]
    g_in, g_out, g_upd, g_params = build(gpu.shared, sizes["small"])
    h_in, h_out, h_upd, h_params = build(aesara.shared, sizes["small"])
    f = aesara.function(g_in, g_out, updates=g_upd)
    ref = aesara.function(h_in, h_out, updates=h_upd, mode=CPU_MODE)
    assert _loops(f) == ["GpuScan"] * loops, _loops(f)
    _no_copy(f)
    for _ in range(2):
        for got, expected in zip(f(*args), ref(*args)):
            assert_same(got, expected, float_ulps=4096)
    for g, h in zip(g_params, h_params):
        assert_same(g.get_value(), h.get_value(), float_ulps=4096)
    if EMULATED:  # one wait and one copy, for the loss the call returns
        counts, _ = _per_call(f, *args)
        assert counts.tolist() == [1, 1, 0], counts


def _gather_loop(E, w, acc, nested):
    def rows(w):
        out, _ = aesara.scan(lambda w_t: E[w_t].sum(axis=0), sequences=[w])
        return out

    if nested:  # a loop of loops: the inner loop gets the call's status from the outer one
        out, _ = aesara.scan(rows, sequences=[w.reshape((2, 2, 2))])
    else:
        out = rows(w)
    return out, {acc: acc + out.sum()}


@pytest.mark.parametrize("nested", [False, True])
def test_an_index_checked_inside_a_loop_is_read_once_per_call(nested):
    E0 = np.arange(12, dtype="float32").reshape(6, 2)
    w0 = np.array([[0, 1], [5, -6], [2, 2], [3, 4]], dtype="int64")
    E, w, acc = gpu.shared(E0, name="E"), gpu.shared(w0, name="w"), gpu.shared(np.float32(0), name="acc")
    out, updates = _gather_loop(E, w, acc, nested)
    f = aesara.function([], out, updates=updates)
    hE, hw, hacc = aesara.shared(E0), aesara.shared(w0), aesara.shared(np.float32(0))
    ref = aesara.function([], _gather_loop(hE, hw, hacc, nested)[0], mode=CPU_MODE)
    _no_copy(f)
    assert_same(f(), ref())
    if EMULATED:  # the steps' checks and the result come back in one copy
        counts, _ = _per_call(f)
        assert counts.tolist() == [1, 1, 0], counts
    w.set_value(np.array([[0, 1], [5, 6], [2, 2], [3, 4]], dtype="int64"))
    kept = acc.get_value()
    with pytest.raises(IndexError, match="6 .*out of bounds"):
        f()
    assert acc.get_value() == kept  # the call raised before its update
    np.testing.assert_array_equal(E.get_value(), E0)


def _mit_sot(X, last):
    # s_t = x_t + 0.5 * s_{t-2} - s_{t-1}, the taps of a mit-sot, and a stacked result x_t * s_{t-2}
    s0 = at.zeros((2, X.shape[1]), dtype=X.dtype)
    (s, r), _ = aesara.scan(lambda x, a, b: (x + 0.5 * a - b, x * a), sequences=X,
                            outputs_info=[dict(initial=s0, taps=[-2, -1]), None])  # fmt: skip
    return s[-1] + r[-1] if last else [s, r]


def _reversed(X, last):
    s, _ = aesara.scan(lambda x, h: at.tanh(x[::-1] + h), sequences=X.T, outputs_info=at.zeros_like(X[:, 0]),
                       go_backwards=True)  # fmt: skip
    return s[-1] if last else s


def _truncated(X, last):
    h, _ = aesara.scan(lambda x, h: at.tanh(x * h + x), sequences=X, outputs_info=at.ones_like(X[0]),
                       truncate_gradient=1)  # fmt: skip
    return aesara.grad(h.sum(), X)


def _until(X, last):
    # stop once the running sum passes 2: the condition is read on the host at every step
    s, _ = aesara.scan(lambda x, s: (s + x.sum(), until(s + x.sum() > 2.0)),
                       sequences=X, outputs_info=at.constant(np.float32(0)))  # fmt: skip
    return s


def _label_index(X, last):
    # a tagger's loss inside the loop, p_t[y_t]: the labels are read on the host, copied once per call
    shared = gpu.shared if isinstance(X, gpu.GpuArraySharedVariable) else aesara.shared
    y = shared(np.arange(X.get_value().shape[0]) % 3, name="y")
    nll, _ = aesara.scan(lambda x, y_t: -at.log(at.special.softmax(x, axis=-1)[y_t]), sequences=[X, y])
    return nll


LOOPS = {"mit-sot taps": _mit_sot, "reversed sequence": _reversed, "truncated gradient": _truncated,
         "while loop": _until, "label index": _label_index}  # fmt: skip
#: The copies each case's report lists, by their reasons.
REASONS = {"while loop": ["a while loop reads its condition on the host at every step"],
           "label index": ["the loop's body reads it on the host only (ScalarFromTensor): one copy per call "
                           "instead of one at every step"]}  # fmt: skip


@pytest.mark.parametrize("case, last, rows", [
    ("mit-sot taps", False, 5), ("mit-sot taps", True, 5), ("reversed sequence", True, 4),
    ("mit-sot taps", False, 0), ("truncated gradient", False, 4), ("while loop", False, 6),
    ("label index", False, 4),
])  # fmt: skip
@pytest.mark.filterwarnings("ignore:Softmax no longer converts a vector")
def test_loop_case_against_the_cpu(case, last, rows):
    X0 = (np.arange(rows * 3, dtype="float32").reshape(rows, 3) - 4) / 8
    X = gpu.shared(X0, name="X")
    f = aesara.function([], LOOPS[case](X, last))
    ref = aesara.function([], LOOPS[case](aesara.shared(X0), last), mode=CPU_MODE)
    assert _loops(f)[0] == "GpuScan", _loops(f)
    got, expected = f(), ref()
    for g, e in zip(got, expected) if isinstance(got, list) else [(got, expected)]:
        assert_same(g, e)
    found = gpu.report(f, file=io.StringIO())
    assert [t.reason for t in found] == REASONS.get(case, []), [str(t) for t in found]


def test_report_names_the_copies_of_each_step_and_a_loop_left_on_the_host():
    X = gpu.shared(np.arange(12.0).reshape(3, 2, 2) / 12, name="X")
    # the body's exp runs on the GPU, its FillDiagonal on the host: one copy at every step
    s, _ = aesara.scan(lambda x, h: fill_diagonal(at.exp(x + h), 0.0).sum(), sequences=X,
                       outputs_info=at.zeros(()))  # fmt: skip
    f = aesara.function([], s)
    buf = io.StringIO()
    found = gpu.report(f, file=buf)
    assert [t.direction for t in found] == ["GPU -> host"], buf.getvalue()
    assert found[0].loop is not None and "at every step" in buf.getvalue(), buf.getvalue()
    assert "FillDiagonal: no GPU entry for FillDiagonal" in buf.getvalue(), buf.getvalue()
    assert_same(f(), aesara.function([], s, mode=CPU_MODE)())
    # a body that reads its GPU sequence on the host only: the loop stays there, one copy per call
    s, _ = aesara.scan(lambda x: fill_diagonal(x, 0.0).sum(), sequences=at.exp(X))
    found = gpu.report(aesara.function([], s), file=buf)
    assert [(t.direction, t.loop) for t in found] == [("GPU -> host", None)], buf.getvalue()
    assert found[0].reason.startswith("the loop's body reads it on the host only (FillDiagonal)"), found
    v = at.dvector("v")
    h, _ = aesara.scan(lambda x, h: 0.5 * h + x, sequences=v, outputs_info=at.zeros(()))  # on the host
    g = aesara.function([v], at.dot(X[0], X[1]) + h[:2, None])
    found = gpu.report(g, file=buf)
    assert [t.direction for t in found] == ["host -> GPU"], buf.getvalue()
    assert found[0].reason == "no sequence, state or non-sequence of the loop comes from the GPU", found
