"""Small public programs ported as a new user would port them (``ported_programs.py``), on the GPU.

A DQN update (``q_vals[arange(n), actions]``), a latent SVM's hinge loss
and Keras' fastText example: each compiled on GPU shared variables must
have no transfer inside (every Op they use has a GPU implementation), wait
once per call and copy nothing inside it (on the emulation), and give the
same graph's values on the CPU after two steps.  A bad index raises the
CPU's exception class and leaves every parameter as it was.
"""
import io
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import AVAILABLE, EMULATED, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

from aesara_bincount import gpu  # noqa: E402
from lift_cases import CPU_MODE, assert_same, inner_transfers, op_names, waits_and_copies  # noqa: E402
from ported_programs import PORTED  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


@pytest.mark.parametrize("name", sorted(PORTED))
def test_ported_program_stays_on_the_gpu(name):
    g_in, g_out, g_upd, g_params, args = PORTED[name](gpu.shared)
    h_in, h_out, h_upd, h_params, _ = PORTED[name](aesara.shared)
    f = aesara.function(g_in, g_out, updates=g_upd)
    ref = aesara.function(h_in, h_out, updates=h_upd, mode=CPU_MODE)
    assert not inner_transfers(f), op_names(f)
    assert gpu.report(f, file=io.StringIO()) == []
    waits = waits_and_copies(f, *args)
    ref(*args)
    if EMULATED:
        assert waits == (1, 1, 0), (waits, op_names(f))
    for _ in range(2):
        for got, expected in zip(f(*args), ref(*args)):
            assert_same(got, expected, float_ulps=4096)
    for g, h in zip(g_params, h_params):
        assert_same(g.get_value(), h.get_value(), float_ulps=4096)
    if name == "latent svm":  # a label out of range: the gathers and the set of the margins
        y = [v for v in f.maker.fgraph.inputs if getattr(v, "name", None) == "y"][0]
        hy = [v for v in ref.maker.fgraph.inputs if getattr(v, "name", None) == "y"][0]
        bad = y.get_value()
        bad[2] = 4
        y.set_value(bad)
        hy.set_value(bad)
        before = [p.get_value() for p in g_params]
        with pytest.raises(Exception) as expected:
            ref(*args)
        with pytest.raises(expected.type):
            f(*args)
        for p, b in zip(g_params, before):
            assert_same(p.get_value(), b)


def test_a_failed_check_leaves_a_base_set_in_place_as_it_was():
    W = gpu.shared(np.arange(10, dtype="float32").reshape(5, 2), name="W")
    V = gpu.shared(np.ones(4, dtype="float32"), name="V")
    rows = gpu.shared(np.array([0, 3], dtype="int64"), name="rows")
    sel = gpu.shared(np.array([1, 2], dtype="int64"), name="sel")
    values = aesara.tensor.ones((2, 2), dtype="float32") * V[sel].sum()
    f = aesara.function([], [], updates={W: aesara.tensor.set_subtensor(W[rows], values)})
    sets = [n.op for n in f.maker.fgraph.toposort() if type(n.op).__name__ == "GpuScatterSet"]
    assert len(sets) == 1 and sets[0].inplace and sets[0].call_status, op_names(f)
    f()
    expected = np.arange(10, dtype="float32").reshape(5, 2)
    expected[[0, 3]] = 2.0
    assert_same(W.get_value(), expected)
    W.set_value(np.arange(10, dtype="float32").reshape(5, 2))
    sel.set_value(np.array([1, 7], dtype="int64"))
    with pytest.raises(IndexError, match="gather: index 7 at position 1"):
        f()
    assert_same(W.get_value(), np.arange(10, dtype="float32").reshape(5, 2))
