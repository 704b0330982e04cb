"""The call's status and its one wait (issue 39), through ``aesara.function``.

``GpuCallEnd`` brings every result for the host back in one copy: results
of every dtype and layout (bool, 0-d, empty, strided views, float16) must
come back as the CPU graph gives them.  The scatter-add of rows on the
call's status (the lifting pass's form) checks its rows on the device,
queues its kernels with no wait and no clearing of a status of its own, and
raises a bad index when the call ends, with nothing written.
"""
import ctypes
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import AVAILABLE, EMULATED, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from lift_cases import CPU_MODE, assert_same, op_names, waits_and_copies  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


def _driver_counts():
    """The fake driver's launches, stream synchronizations and memsets."""
    out = (ctypes.c_longlong * 8)()
    ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"]).fake_cuda_counters(out)
    return np.array([out[0], out[1], out[3]])


def test_every_result_comes_back_in_one_copy():
    x = gpu.shared(np.arange(24, dtype="float64").reshape(4, 6) - 11.5, name="x")
    h = gpu.shared(np.array([-0.0, 1.5, np.nan], dtype="float16"), name="h")
    outs = [
        x > 0,  # bool
        x.sum(),  # 0-d
        x[:0],  # empty
        x[::2, ::-3],  # a strided view
        x.T.astype("int8"),  # another dtype
        gpu.gpu_from_host(x * 2),  # kept on the GPU
        h + 0,  # float16: on the host, from a copy
    ]
    f = aesara.function([], outs)
    assert sum(type(n.op).__name__ == "GpuCallEnd" for n in f.maker.fgraph.toposort()) == 1, op_names(f)
    waits, d2h, _ = waits_and_copies(f)
    if EMULATED:
        assert waits <= 2 and d2h <= 2  # the end of the call, and the copy of h for the host's float16
    for got, expected in zip(f(), aesara.function([], outs, mode=CPU_MODE)()):
        assert_same(got, expected)


@pytest.mark.parametrize("form", ["zeros", "base", "inplace"])
def test_scatter_add_on_the_call_status(form):
    W = gpu.shared(np.arange(12, dtype="float64").reshape(6, 2), name="W")
    G = gpu.shared(np.ones((5, 2)), name="G")
    idx = gpu.shared(np.array([0, 5, -1, 2, 2], dtype="int32"), name="idx")
    if form == "zeros":
        f = aesara.function([], at.inc_subtensor(at.zeros_like(W)[idx], G))
    elif form == "base":
        f = aesara.function([], at.inc_subtensor(W[idx], G))
    else:
        f = aesara.function([], [], updates={W: at.inc_subtensor(W[idx], G)})
    (node,) = [n for n in f.maker.fgraph.toposort() if type(n.op).__name__ == "GpuScatterAdd"]
    assert node.op.call_status and node.op.inplace == (form == "inplace"), node.op
    base = np.zeros((6, 2)) if form == "zeros" else W.get_value()
    expected = base.copy()
    np.add.at(expected, [0, 5, -1, 2, 2], 1.0)
    before = _driver_counts() if EMULATED else None
    waits, d2h, h2d = waits_and_copies(f)
    if EMULATED:
        launches, syncs, memsets = _driver_counts() - before
        # the index check and its record (GpuIndexCheck), the rows' own check kernel and the
        # adds, queued; no wait
        assert (launches, syncs, memsets) == (4, 0, 0)
        assert (waits, d2h, h2d) == (1, 1, 0), "the call's one wait, at its end"
    got = W.get_value() if form == "inplace" else f()
    if form == "inplace":  # waits_and_copies made the call
        assert_same(got, expected)
        W.set_value(base)
    else:
        assert_same(got, expected)
    idx.set_value(np.array([0, 6, 1, 1, 1], dtype="int32"))
    w_before = W.get_value()
    with pytest.raises(IndexError, match="scatter-add: index 6 at position 1 is out of bounds for axis 0 with size 6"):
        f()
    assert_same(W.get_value(), w_before)  # nothing written, in place too
