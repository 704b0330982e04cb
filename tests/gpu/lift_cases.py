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

from aesara_bincount.gpu import GpuFromHost, HostFromGpu
from aesara_bincount_core.gpu.type import host_value

CPU_MODE = get_default_mode().excluding("gpu_bincount")


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
    got, expected = host_value(got), host_value(expected)  # either may be a GPU array
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


def waits_and_copies(f, *args):
    """``(waits, device-to-host copies, host-to-device copies)`` of one call of ``f(*args)``.

    On the emulation: the fake CuPy's and the fake driver's counters (waits:
    every synchronization; device-to-host: CuPy's and the driver's copies;
    host-to-device: CuPy's copies of host data).  ``(None, None, None)`` on a
    real GPU, which has no such counters.
    """
    import ctypes
    import os

    import cupy as cp

    if "h2d" not in getattr(cp, "counters", {}):
        return None, None, None
    lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
    lib.fake_cuda_counter.restype = ctypes.c_longlong
    before = cp.counters["sync"], cp.counters["d2h"] + lib.fake_cuda_counter(2), cp.counters["h2d"]
    f(*args)
    after = cp.counters["sync"], cp.counters["d2h"] + lib.fake_cuda_counter(2), cp.counters["h2d"]
    return tuple(a - b for a, b in zip(after, before))
