"""The Scan lifter (``aesara_bincount.gpu.scan``) on symbolic GPU variables: no GPU, no CuPy.

FAST_RUN's rewrites run on a FunctionGraph (``test_gpu_graph.rewrite``): a
loop over GPU data must become a ``GpuScan`` whose states and stacked
results are GPU arrays, whose body has no transfer, and which takes on the
host what its body reads on the host.  The values are compared on the
emulation (``tests/gpu/test_gpu_scan.py``).
"""
import aesara
import aesara.tensor as at
from aesara.scan.op import Scan

import aesara_bincount  # noqa: F401
from aesara_bincount.gpu import GpuArrayType, GpuFromHost, HostFromGpu
from aesara_bincount.gpu.scan import scan_problem
from aesara_bincount_core.gpu.scan import GpuScan
from test_gpu_graph import rewrite


def _loops(fg):
    return [n for n in fg.toposort() if isinstance(n.op, Scan)]


def _transfers(fgraph):
    return [type(n.op).__name__ for n in fgraph.apply_nodes if isinstance(n.op, (HostFromGpu, GpuFromHost))]


def test_a_recurrence_over_gpu_data_is_a_gpu_scan_with_its_state_on_the_gpu():
    X = GpuArrayType("float32", shape=(None, None, None))("X")
    W = GpuArrayType("float32", shape=(None, None))("W")
    lr = at.scalar("lr", dtype="float32")  # read on the host by the kernels: stays there
    # the state starts from host zeros and is computed on the GPU: it moves there
    h, _ = aesara.scan(lambda x, h: at.tanh(at.dot(x, W) + lr * h), sequences=X,
                       outputs_info=at.zeros((2, 3), dtype="float32"))  # fmt: skip
    fg = rewrite(h.sum(), [X, W, lr])
    (loop,) = _loops(fg)
    assert isinstance(loop.op, GpuScan), loop.op
    assert all(isinstance(o.type, GpuArrayType) for o in loop.outputs), loop.outputs
    inner = loop.op.fgraph
    assert _transfers(inner) == [], _transfers(inner)
    on_host = [v for v in inner.inputs if not isinstance(v.type, GpuArrayType)]
    assert len(inner.inputs) == 4 and len(on_host) == 1, inner.inputs  # x_t, h, W on the GPU
    assert all(s == 1 for s in on_host[0].type.shape), on_host  # lr (a kernel argument) on the host


def test_a_label_read_as_an_index_goes_to_the_loop_on_the_host():
    X = GpuArrayType("float64", shape=(None, None))("X")
    y = GpuArrayType("int64", shape=(None,))("y")
    nll, _ = aesara.scan(lambda x, y_t: -at.log(at.exp(x) / at.exp(x).sum())[y_t], sequences=[X, y])
    fg = rewrite(nll, [X, y])
    (loop,) = _loops(fg)
    x_t, y_t = loop.op.fgraph.inputs[:2]
    assert isinstance(x_t.type, GpuArrayType) and not isinstance(y_t.type, GpuArrayType)
    assert _transfers(loop.op.fgraph) == []
    assert "ScalarFromTensor" in scan_problem(loop) and "one copy per call" in scan_problem(loop)


def test_a_loop_of_host_data_stays_a_scan_and_says_why():
    v = at.dvector("v")
    h, _ = aesara.scan(lambda x, h: 0.5 * h + x, sequences=v, outputs_info=at.zeros(()))
    fg = rewrite(h, [v])
    (loop,) = _loops(fg)
    assert type(loop.op) is Scan
    assert scan_problem(loop) == "no sequence, state or non-sequence of the loop comes from the GPU"


def test_the_gradient_of_a_loop_is_a_gpu_scan_too():
    X = GpuArrayType("float64", shape=(None, None))("X")
    W = GpuArrayType("float64", shape=(None, None))("W")
    h, _ = aesara.scan(lambda x, h: at.tanh(x + at.dot(h, W)), sequences=X, outputs_info=at.zeros(X.shape[1:]))
    fg = rewrite(aesara.grad((h**2).sum(), W), [X, W])
    loops = _loops(fg)
    assert len(loops) == 2 and all(isinstance(n.op, GpuScan) for n in loops), [n.op for n in loops]
    assert all(_transfers(n.op.fgraph) == [] for n in loops), [_transfers(n.op.fgraph) for n in loops]
