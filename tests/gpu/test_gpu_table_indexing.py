"""The GPU table's entries for indexing and checks (issue 39), through ``aesara.function``.

``AdvancedSubtensor`` and ``AdvancedIncSubtensor`` with a mix of integer
arrays, integers and slices; ``LinearIndex`` (``P[arange(n), y]``);
``ARange``, ``MakeVector``; ``Assert`` and ``CheckAndRaise`` of host and GPU
conditions; ``SoftmaxWithBias``.  Each graph is compiled on GPU shared
variables and on the CPU (``lift_cases.compile_pair``): the entries must run
on the GPU with no transfer inside and give the CPU graph's values; a bad
index or a false condition, checked on the device, must raise the CPU
graph's exception (class and message) when the call ends, and leave every
shared variable as it was.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import AVAILABLE, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.raise_op import Assert, CheckAndRaise  # noqa: E402
from aesara.tensor.nnet import softmax_with_bias  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from lift_cases import assert_same, compile_pair, inner_transfers, op_names  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
RNG = np.random.default_rng(39)


def hosted(f):
    """Names of the host Ops that run on the GPU through the table (GpuTableOp nodes)."""
    return {type(n.op.host_op).__name__ for n in f.maker.fgraph.toposort() if type(n.op).__name__ == "GpuTableOp"}


def _first_line(exc):
    return str(exc).splitlines()[0]


def _raises_as_on_the_cpu(f, ref, shared=(), same_message=True):
    """``f`` and ``ref`` raise the same exception class (and first line: the message
    tables of our own Ops; NumPy's and the GPU gather's differ); ``shared`` keep their values."""
    before = [s.get_value() for s in shared]
    with pytest.raises(Exception) as expected:
        ref()
    with pytest.raises(expected.type) as got:
        f()
    if same_message:
        assert _first_line(got.value) == _first_line(expected.value)
    for s, b in zip(shared, before):
        assert_same(s.get_value(), b)


def test_advanced_indexing_with_arrays_integers_and_slices():
    value = RNG.standard_normal((4, 5, 3))
    value.flat[:2] = [-0.0, np.nan]
    x = gpu.shared(value, name="x")
    idx = gpu.shared(np.array([4, -1, 0, 4], dtype="int32"), name="idx")  # duplicates, a negative
    rows = gpu.shared(np.array([1, 3, 1], dtype="uint8"), name="rows")
    c = gpu.shared(RNG.standard_normal((3, 2, 3)), name="c")
    mask = gpu.shared(np.array([True, False, True, True]), name="mask")
    outs = [
        x[mask, 1],  # a boolean mask (CuPy counts it: one wait), an integer
        x[:, idx],  # a slice, then an array
        x[rows, 1:3],  # an array, then a slice that is not full
        x[2, idx, 1:],  # an integer, an array, a slice
        x[:, idx, -1],  # a slice, an array, an integer
        at.inc_subtensor(x[rows, 1:3], c),  # AdvancedIncSubtensor: duplicates add up
    ]
    f, ref = compile_pair([], outs)
    assert {"AdvancedSubtensor", "AdvancedIncSubtensor"} <= hosted(f), op_names(f)
    assert not inner_transfers(f), op_names(f)
    for got, expected in zip(f(), ref()):
        assert_same(got, expected)
    idx.set_value(np.array([4, 5, 0, 1], dtype="int32"))  # 5: out of bounds for axis 1
    _raises_as_on_the_cpu(f, ref, (x, c), same_message=False)
    idx.set_value(np.array([0, -6, 0, 1], dtype="int32"))
    _raises_as_on_the_cpu(f, ref, (x, c), same_message=False)
    idx.set_value(np.array([0, 1, 2, 3], dtype="int32"))
    rows.set_value(np.array([1, 4, 3], dtype="uint8"))  # the first output's is good, the second's not
    _raises_as_on_the_cpu(f, ref, (x, c), same_message=False)
    rows.set_value(np.array([1, 3, 1], dtype="uint8"))
    idx.set_value(np.array([1, 2, 3, -5], dtype="int32"))
    for got, expected in zip(f(), ref()):
        assert_same(got, expected)
    mask.set_value(np.array([True, False, True]))  # a mask of another length
    _raises_as_on_the_cpu(f, ref, (x, c))


def test_linear_index_arange_make_vector_and_softmax_with_bias():
    P = gpu.shared(RNG.standard_normal((6, 4)).astype("float32"), name="P")
    b = gpu.shared(RNG.standard_normal(4).astype("float32"), name="b")
    y = gpu.shared(np.array([3, 0, -1, 2, 1, 3], dtype="int64"), name="y")
    sm = softmax_with_bias(P, b)
    loss = -(P**2)[at.arange(y.shape[0]), y].mean()  # not a log-softmax: no cross-entropy Op
    outs = [
        sm,
        loss,
        aesara.grad(loss, P),
        at.stack([loss, P.sum()]),  # MakeVector of GPU scalars
        at.stack([P.shape[0], y.sum()]),  # a host scalar and a GPU one
    ]
    f, ref = compile_pair([], outs)
    ops = {"LinearIndex", "ARange", "MakeVector", "SoftmaxWithBias"}
    assert ops <= hosted(f), op_names(f)
    assert not inner_transfers(f), op_names(f)
    for got, expected in zip(f(), ref()):
        assert_same(got, expected, float_ulps=256)
    for bad, pos in (([3, 0, 4, 2, 5, 3], 2), ([3, 0, -5, 2, 1, 3], 2)):  # axis 1's first bad index
        y.set_value(np.array(bad, dtype="int64"))
        # NumPy's fancy indexing on the host, LinearIndex's message on the GPU
        _raises_as_on_the_cpu(f, ref, (P, b), same_message=False)
        with pytest.raises(IndexError, match=f"index {bad[pos]} at position {pos} .* axis 1 with size 4"):
            f()
    y.set_value(np.array([0, 1, 2, 3, 0, 1], dtype="int64"))
    assert_same(f()[1], ref()[1])


@pytest.mark.parametrize("op, error", [(Assert("x must be positive"), AssertionError),
                                       (CheckAndRaise(ValueError, "negative value"), ValueError)])  # fmt: skip
def test_assert_of_host_and_gpu_conditions(op, error):
    x = at.as_tensor_variable(gpu.shared(np.array([1.0, 2.0, 3.0]), name="x"))
    n = at.lscalar("n")
    checked = op(x, at.all(x > 0), at.eq(x.shape[0], n))  # a GPU condition, a host one
    f, ref = compile_pair([n], [checked * 2])
    assert {"Assert", "CheckAndRaise"} & hosted(f), op_names(f)
    assert not inner_transfers(f), op_names(f)
    assert_same(f(3)[0], ref(3)[0])
    with pytest.raises(error, match=op.msg):
        f(4)  # the host condition, read on the host
    x.owner.inputs[0].set_value(np.array([1.0, -2.0, 3.0]))
    for fn in (f, ref):
        with pytest.raises(error, match=op.msg):
            fn(3)  # the GPU condition, read when the call ends
