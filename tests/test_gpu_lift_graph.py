"""The lifting pass (``aesara_bincount.gpu.lifting``) on symbolic GPU variables: no GPU, no CuPy.

FAST_RUN's rewrites run on a FunctionGraph (``test_gpu_graph.rewrite``):
views, shapes, reductions and gathers of GPU variables must become their
GPU twins, with the only ``HostFromGpu`` on the outputs; the tags turn the
pass off.  The values are compared on the emulation
(``tests/gpu/test_gpu_lift.py``).
"""
import aesara.tensor as at
import pytest
from aesara.compile.mode import get_default_mode
from aesara.tensor.extra_ops import bincount

import aesara_bincount  # noqa: F401
from aesara_bincount.gpu import GpuArrayType, HostFromGpu, lifting
from test_gpu_graph import op_names, rewrite

TWINS = {"GpuDimShuffle", "GpuReshape", "GpuSubtensor", "GpuCAReduce", "GpuAdvancedSubtensor1"}


def gpu_matrix(dtype="float64", name="W"):
    return GpuArrayType(dtype, shape=(None, None))(name)


def transfers_inside(fg):
    """HostFromGpu nodes whose result feeds another node (not only the outputs)."""
    return [
        n for n in fg.toposort()
        if isinstance(n.op, HostFromGpu) and any(c != "output" for c, _ in fg.clients[n.outputs[0]])
    ]


@pytest.mark.parametrize(
    "build, twin",
    [
        (lambda W, i: W.T, "GpuDimShuffle"),
        (lambda W, i: W[:, None, :], "GpuDimShuffle"),
        (lambda W, i: W.reshape((-1,)), "GpuReshape"),
        (lambda W, i: W[1:, ::-2], "GpuSubtensor"),
        (lambda W, i: W[2], "GpuSubtensor"),
        (lambda W, i: W.sum(axis=0), "GpuCAReduce"),
        (lambda W, i: W.prod(), "GpuCAReduce"),
        (lambda W, i: W.max(axis=1), "GpuCAReduce"),
        (lambda W, i: at.max(W.T[1:], axis=0), "GpuCAReduce"),
        (lambda W, i: W[i], "GpuAdvancedSubtensor1"),
        (lambda W, i: W[i].sum(axis=0), "GpuAdvancedSubtensor1"),
    ],
)
def test_lifted_to_the_gpu(build, twin):
    W, i = gpu_matrix(), GpuArrayType("int32", shape=(None,))("i")
    out = build(W, i)
    fg = rewrite(out, [W, i])
    names = op_names(fg)
    assert twin in names, names
    assert not transfers_inside(fg), names
    assert "GpuFromHost" not in names, names
    assert fg.outputs[0].type == out.type  # the host type the user built


def test_shapes_read_without_a_transfer():
    W = gpu_matrix()
    fg = rewrite([W.shape, W.shape[0] * W.shape[1]], [W])
    assert "HostFromGpu" not in op_names(fg), op_names(fg)


def test_all_and_any_of_bools():
    b = gpu_matrix("bool", "b")
    fg = rewrite([at.all(b, axis=0), at.any(b)], [b])
    assert op_names(fg).count("GpuCAReduce") == 2 and not transfers_inside(fg), op_names(fg)


def test_bitwise_reduction_of_integers_stays_on_the_host():
    from aesara.scalar import and_
    from aesara.tensor.elemwise import CAReduce

    x = gpu_matrix("int32", "x")
    fg = rewrite(CAReduce(and_, axis=(0,))(x), [x])
    assert "GpuCAReduce" not in op_names(fg) and "HostFromGpu" in op_names(fg)


def test_nodes_after_gpu_bincount_see_its_gpu_result():
    x = GpuArrayType("int64", shape=(None,))("x")
    h = bincount(x)
    fg = rewrite([h.sum(), h[1:].max()], [x])
    names = op_names(fg)
    assert "GpuBincount" in names and names.count("GpuCAReduce") == 2, names
    assert not transfers_inside(fg), names


def test_host_tensors_are_not_lifted():
    W, i = at.dmatrix("W"), at.lvector("i")
    fg = rewrite([W.T.sum(axis=0), W[i]], [W, i])
    assert not TWINS & set(op_names(fg))


def test_excluding_gpu_bincount_gives_the_host_graph():
    W, i = gpu_matrix(), GpuArrayType("int64", shape=(None,))("i")
    mode = get_default_mode().excluding("gpu_bincount")
    fg = rewrite([W.T.sum(axis=0), W[i], bincount(i)], [W, i], mode)
    names = op_names(fg)
    assert not TWINS & set(names) and "GpuBincount" not in names, names
    assert {"Sum", "AdvancedSubtensor1", "Bincount"} <= set(names), names


def test_excluding_gpu_lift_keeps_the_gpu_bincount_only():
    x = GpuArrayType("int64", shape=(None,))("x")
    h = bincount(x)
    fg = rewrite([h / h.sum()], [x], get_default_mode().excluding("gpu_lift"))
    names = op_names(fg)
    assert "GpuBincount" in names and "GpuCAReduce" not in names and "Sum" in names, names


def test_one_decorator_per_lifter_and_one_pass():
    from aesara.compile import optdb

    # the table's lifter (every entry of aesara_bincount_core.gpu.table), shapes, Elemwise,
    # and Scan (aesara_bincount.gpu.scan, issue 39)
    assert [r.fn.__name__ for r in lifting.LIFTERS] == [
        "local_gpu_lift_table", "local_gpu_lift_shape", "local_gpu_lift_elemwise", "local_gpu_lift_scan"]  # fmt: skip
    assert optdb["gpu_lift"] is lifting.gpu_lift and optdb.__position__["gpu_lift"] == 48.4


def test_checks_write_one_call_status_that_the_end_of_the_call_reads():
    # issue 39: the gather's index check and the scatter-add of its gradient
    # write into one status (merged), which one GpuCallEnd reads with both
    # outputs; an inner graph can take the status as an input instead.
    from aesara.graph.fg import FunctionGraph

    from aesara_bincount_core.gpu.call_status import GpuCallStatus, status_type, use_call_status

    W, i = gpu_matrix(dtype="float32"), GpuArrayType("int64", shape=(None,))("i")
    loss = (W[i] ** 2).sum()
    fg = rewrite([loss, at.grad(loss, W)], [W, i])
    names = op_names(fg)
    assert names.count("GpuCallStatus") == 1 and names[-1] == "GpuCallEnd", names
    assert {"GpuIndexCheck", "GpuAdvancedSubtensor1", "GpuScatterAdd"} <= set(names), names
    assert "HostFromGpu" not in names, names  # the loss comes back through GpuCallEnd
    end = fg.outputs[0].owner  # the gradient of a GPU W stays on the GPU, passed through
    assert (end.op.n_status, end.op.n_host, end.op.n_keep) == (1, 1, 1) and fg.outputs[1].owner is end

    inner = FunctionGraph([W, i], [W[i].sum()], clone=False)
    lifting.lift_fgraph(inner)
    outer_status = status_type()("status")
    assert use_call_status(inner, outer_status)
    assert not any(isinstance(n.op, GpuCallStatus) for n in inner.apply_nodes)
    assert any(outer_status in n.inputs for n in inner.apply_nodes)


def test_multi_index_gather_of_data_the_lifting_put_on_the_gpu():
    # issue 39: dot(X, W) is on the GPU only once lifted; the multi-index
    # gather walks with the lifting and sees it (DQN's q_vals[arange(n), a])
    X, W = gpu_matrix(dtype="float32", name="X"), gpu_matrix(dtype="float32", name="W")
    a = GpuArrayType("int32", shape=(None,))("a")
    out = at.dot(X, W)[at.arange(a.shape[0]), a]
    fg = rewrite(out, [X, W, a])
    names = op_names(fg)
    assert "GpuAdvancedSubtensor1" in names and "AdvancedSubtensor" not in names, names
    assert any(type(n.op).__name__ == "GpuTableOp" and type(n.op.host_op).__name__ == "LinearIndex"
               for n in fg.toposort()), names  # fmt: skip
    assert "ARange" not in names and not transfers_inside(fg) and "GpuFromHost" not in names, names
