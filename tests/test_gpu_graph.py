"""The GPU rewrite on symbolic GPU variables: no GPU, no CuPy, no compilation.

The default FAST_RUN rewrites run on a FunctionGraph; the result must hold
GpuBincount and none of the host-side Max, AdvancedIncSubtensor1 or
Bincount, with the output types of the CPU graph.
"""
import aesara.tensor as at
import pytest
from aesara.compile.function.types import std_fgraph
from aesara.compile.io import SymbolicInput, SymbolicOutput
from aesara.compile.mode import get_default_mode
from aesara.graph.basic import Constant
from aesara.raise_op import Assert
from aesara.tensor.extra_ops import bincount
from aesara.tensor.subtensor import advanced_inc_subtensor1
from aesara.tensor.type import TensorType

import aesara_bincount  # noqa: F401
from aesara_bincount import Bincount
from aesara_bincount.gpu import GpuArrayType, GpuBincount, GpuFromHost, HostFromGpu

HOST_ONLY = {"Max", "MaxAndArgmax", "AdvancedIncSubtensor1", "Bincount", "Alloc"}


def rewrite(outputs, inputs, mode=None):
    """The FunctionGraph that FAST_RUN would compile (rewritten, not linked)."""
    mode = mode or get_default_mode()
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    inputs = [i for i in inputs if not isinstance(i, Constant)]
    fg, _ = std_fgraph([SymbolicInput(i) for i in inputs], [SymbolicOutput(o) for o in outputs])
    mode.optimizer.rewrite(fg)
    return fg


def op_names(fg):
    return [type(node.op).__name__ for node in fg.toposort()]


def gpu_vector(dtype, name="x"):
    return GpuArrayType(dtype, shape=(None,))(name)


def gpu_node(fg):
    nodes = [n for n in fg.toposort() if isinstance(n.op, GpuBincount)]
    assert len(nodes) == 1, op_names(fg)
    return nodes[0]


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_bincount_of_a_gpu_vector(dtype):
    x = gpu_vector(dtype)
    fg = rewrite(bincount(x), [x])
    names = op_names(fg)
    assert not HOST_ONLY & set(names), names
    node = gpu_node(fg)
    assert node.inputs[0] is fg.inputs[0]
    assert node.op.mode == "bincount"
    (out,) = fg.outputs
    # The copy to the host is the Op's own (to_host: bins and status in one copy).
    assert node.op.to_host and out is node.outputs[0] and "HostFromGpu" not in names
    # Same output type as the CPU graph.
    tx = TensorType(dtype, shape=(None,))("tx")
    assert out.type == rewrite(bincount(tx), [tx]).outputs[0].type


@pytest.mark.parametrize("wdtype", ["float32", "float64", "int8", "uint64"])
def test_gpu_weights_are_used_in_place(wdtype):
    x, w = gpu_vector("int32"), gpu_vector(wdtype, "w")
    fg = rewrite(bincount(x, weights=w), [x, w])
    node = gpu_node(fg)
    assert node.inputs[2] is fg.inputs[1]
    assert "GpuFromHost" not in op_names(fg) and not HOST_ONLY & set(op_names(fg))
    assert node.outputs[0].type.dtype == wdtype


def test_host_weights_are_moved_once():
    x, w = gpu_vector("int64"), at.dvector("w")
    fg = rewrite(bincount(x, weights=w), [x, w])
    node = gpu_node(fg)
    moved = node.inputs[2].owner
    assert isinstance(moved.op, GpuFromHost) and moved.inputs[0] is fg.inputs[1]
    assert op_names(fg).count("GpuFromHost") == 1


def test_minlength_and_assert_nonneg():
    x, m = gpu_vector("uint16"), at.lscalar("m")
    fg = rewrite(bincount(x, minlength=m, assert_nonneg=True), [x, m])
    node = gpu_node(fg)
    assert fg.inputs[1] in set(a for n in fg.toposort() for a in n.inputs)
    # extra_ops.bincount asserts on x itself, here a GPU variable: the check stays.
    checked = node.inputs[0].owner
    assert isinstance(checked.op, Assert) and checked.inputs[0] is fg.inputs[0]
    assert not {"Bincount", "AdvancedIncSubtensor1", "Max", "MaxAndArgmax"} & set(op_names(fg))


def test_asserts_of_gpu_values_run_on_the_gpu():
    # Issue 39: the Assert of a GPU condition runs on the GPU (its condition
    # read with the call's status), no longer on the host after a copy.
    x = gpu_vector("int64")
    hx = HostFromGpu()(x)
    checked = Assert("negative!")(hx, at.all(hx >= 0))
    fg = rewrite(bincount(checked), [x])
    node = gpu_node(fg)
    asserted = node.inputs[0].owner
    assert type(asserted.op).__name__ == "GpuTableOp" and asserted.op.host_op.msg == "negative!"
    assert asserted.inputs[0] is fg.inputs[0] and asserted.op.status
    assert "HostFromGpu" not in op_names(fg)[:-1] and "Assert" not in op_names(fg)


def test_scatter_add_form():
    idx, w = gpu_vector("int64", "idx"), gpu_vector("float32", "w")
    n = at.lscalar("n")
    out = advanced_inc_subtensor1(at.zeros(n, dtype="float32"), w, idx)
    fg = rewrite(out, [idx, w, n])
    node = gpu_node(fg)
    assert node.op.mode == "scatter"
    assert not HOST_ONLY & set(op_names(fg))
    assert fg.outputs[0].type.dtype == "float32"


def test_scatter_add_with_a_constant_length_keeps_its_static_shape():
    idx = gpu_vector("int32", "idx")
    out = advanced_inc_subtensor1(at.zeros(7), 1.0, idx)
    fg = rewrite(out, [idx])
    assert gpu_node(fg).op.mode == "scatter"
    assert fg.outputs[0].type.shape == (7,)


def test_excluding_gpu_bincount_keeps_the_cpu_op():
    x = gpu_vector("int64")
    fg = rewrite(bincount(x), [x], get_default_mode().excluding("gpu_bincount"))
    names = op_names(fg)
    assert "Bincount" in names and "HostFromGpu" in names and "GpuBincount" not in names


def test_excluding_bincount_turns_both_off():
    x = gpu_vector("int64")
    fg = rewrite(bincount(x), [x], get_default_mode().excluding("bincount"))
    names = op_names(fg)
    assert "Bincount" not in names and "GpuBincount" not in names
    assert "AdvancedIncSubtensor1" in names


def test_host_data_stays_on_the_cpu():
    x = at.lvector("x")
    fg = rewrite(bincount(x), [x])
    assert any(type(n.op) is Bincount for n in fg.toposort())
    assert "GpuBincount" not in op_names(fg)


def test_bincount_used_with_other_host_work_keeps_one_transfer():
    x = gpu_vector("int32")
    fg = rewrite([bincount(x), x.sum()], [x])
    gpu_node(fg)
    # one for the sum; the result's is the GpuBincount's own (to_host)
    assert op_names(fg).count("HostFromGpu") == 1 and gpu_node(fg).op.to_host
