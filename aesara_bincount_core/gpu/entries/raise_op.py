"""Table entries of ``Assert`` and ``CheckAndRaise``: a shape condition checked on the host, a value condition on the device.

``Assert(x, *conds)`` passes ``x`` through (a view) when every condition
holds.  A condition computed on the host (from shapes: Aesara's broadcast
and shape checks) stays on the host and is read there, at no cost; a
condition computed on the GPU (a value of the data) is reduced on the
device and recorded in the call's status
(:mod:`aesara_bincount_core.gpu.call_status`), raised when the call ends, as
the host Op raises it (its exception class and message).
"""
import numpy as np
from aesara.raise_op import Assert, CheckAndRaise

from aesara_bincount_core.gpu.call_status import failure_code, record_failure
from aesara_bincount_core.gpu.entries._common import from_gpu
from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.type import CupyArray


def _host_conditions(node):
    return tuple(k for k, v in enumerate(node.inputs) if k > 0 and not from_gpu(v))


def _gpu_conditions(node):
    return any(from_gpu(v) for v in node.inputs[1:])


def _assert_funcify(op, node):
    exc, msg = op.exc_type, op.msg

    def builder(*numbers):
        return exc(msg)

    code = failure_code(("assert", exc, msg), builder)
    with_status = node.op.status  # the GPU node: its last input is the call's status

    def check_and_raise(x, *conds):
        status = conds[-1] if with_status else None
        conds = conds[:-1] if with_status else conds
        if not all(np.all(c) for c in conds if not isinstance(c, CupyArray)):
            raise exc(msg)
        for c in conds:
            if isinstance(c, CupyArray):
                record_failure(status, ~c.all(), code, 0, 0)
        return [x]

    return check_and_raise


for _op_class in (Assert, CheckAndRaise):
    register(
        _op_class, family="arrays", cupy="none: the array itself; cupy.ndarray.all of a GPU condition",
        host_inputs=_host_conditions, checks=_gpu_conditions, view_map={0: [0]}, trigger=(0,),
        accepts_text="any GPU dtype; host conditions are read on the host, GPU conditions on the "
        "device (raised when the call ends)",
        outputs="the input itself (a view); raises the host Op's exception when a condition is false",
    )(_assert_funcify)  # fmt: skip
