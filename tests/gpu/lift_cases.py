"""Helpers of the tests of the lifting pass (``aesara_bincount.gpu.lifting``) on the GPU.

A graph is compiled twice from the same GPU shared variables: with the
default rewrites (the GPU graph) and with ``mode.excluding("gpu_bincount")``
(the CPU graph: every array is moved to the host and computed there).
:func:`compile_pair` gives both, :func:`assert_same` compares their results,
:func:`inner_transfers` lists the transfers that are neither a host input
moved to the GPU nor a result moved to the host for the user.
"""
import aesara
import numpy as np
from aesara.compile.mode import get_default_mode
from aesara.graph.basic import Apply
from aesara.graph.op import Op
from aesara.tensor.elemwise import Elemwise

from aesara_bincount.gpu import GpuFromHost, HostFromGpu
from aesara_bincount_core.gpu.type import GPU_DTYPES, GpuArrayType, cupy_module, host_value

CPU_MODE = get_default_mode().excluding("gpu_bincount")


class StandInGpuElemwise(Op):
    """A test stand-in of gpu-elemwise's ``GpuElemwise`` with the agreed interface.

    ``StandInGpuElemwise(scalar_op)(*args)``: GPU arrays and host 0-d tensors
    in, GPU arrays of the host Elemwise's output types out.  It computes on
    host copies with Aesara's own ``Elemwise.perform``: a GPU Op for the graph,
    not for speed.  Used until the real Op is on this branch, so that the
    lifting of the five graphs is tested now.
    """

    __props__ = ("scalar_op",)

    def __init__(self, scalar_op):
        self.scalar_op = scalar_op

    def _host_node(self, inputs):
        ndim = max(v.type.ndim for v in inputs)
        stand_ins = []
        for v in inputs:
            t = v.type.host_type() if isinstance(v.type, GpuArrayType) else v.type
            h = t()
            stand_ins.append(h if h.type.ndim == ndim else h.dimshuffle(("x",) * ndim))
        return Elemwise(self.scalar_op).make_node(*stand_ins)

    def make_node(self, *inputs):
        host = self._host_node(inputs)
        outs = [GpuArrayType(o.type.dtype, shape=o.type.shape)() for o in host.outputs]
        return Apply(self, list(inputs), outs)

    def perform(self, node, inputs, output_storage, params=None):
        cp = cupy_module()
        host = self._host_node(node.inputs)
        ndim = len(host.outputs[0].type.shape)
        args = [host_value(a).reshape((1,) * ndim) if np.ndim(a) < ndim else host_value(a) for a in inputs]
        storage = [[None] for _ in host.outputs]
        host.op.perform(host, args, storage)
        for out, (value,) in zip(output_storage, storage):
            out[0] = cp.asarray(value)


def stand_in_problem(node):
    """The stand-in's rule: every Elemwise of GPU dtypes can run."""
    dtypes = [v.type.dtype for v in node.inputs + node.outputs]
    return None if all(d in GPU_DTYPES for d in dtypes) else "dtype"


def compile_pair(inputs, outputs, updates=None, cpu_updates=None):
    """``(GPU function, CPU function)`` of the same graph (CPU updates: ``cpu_updates``)."""
    gpu = aesara.function(inputs, outputs, updates=updates)
    cpu = aesara.function(inputs, outputs, updates=cpu_updates, mode=CPU_MODE)
    return gpu, cpu


def op_names(f):
    return [type(n.op).__name__ for n in f.maker.fgraph.toposort()]


def inner_transfers(f):
    """Transfers inside ``f``: a GpuFromHost of anything but a graph input, a
    HostFromGpu whose result feeds anything but the function's outputs."""
    fg = f.maker.fgraph
    outputs = set(fg.outputs)
    bad = []
    for node in fg.toposort():
        if isinstance(node.op, GpuFromHost) and node.inputs[0].owner is not None:
            bad.append(node)
        elif isinstance(node.op, HostFromGpu):
            out = node.outputs[0]
            users = [c for c, _ in fg.clients[out] if c != "output"]
            # DeepCopyOp of an output is the function's own copy, not a transfer.
            if any(type(c.op).__name__ != "DeepCopyOp" for c in users) or (
                not users and out not in outputs
            ):
                bad.append(node)
    return bad


def assert_same(got, expected, float_ulps=64):
    """Same dtype, shape and values (floats to ``float_ulps`` of their scale; NaN == NaN;
    the sign of a zero counts)."""
    got, expected = host_value(got), np.asarray(expected)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected)
        return
    same = (got == expected) & (np.signbit(got) == np.signbit(expected))
    same |= np.isnan(got) & np.isnan(expected)
    scale = np.maximum(np.abs(expected.astype(np.float64)), np.finfo(expected.dtype).tiny)
    close = np.abs(got.astype(np.float64) - expected) <= float_ulps * np.finfo(expected.dtype).eps * scale
    bad = np.flatnonzero(~(same | (close & (expected != 0))))
    assert bad.size == 0, (got.ravel()[bad[:5]], expected.ravel()[bad[:5]])
