"""Table entries of softmax and the cross-entropy Ops, with their gradients.

Each follows its host Op's ``perform`` step by step with CuPy's array
operations (the maximum is subtracted before ``exp``; the same sums and
divisions), so the results differ from the host's only where CuPy's
``exp``, ``log`` and sums round differently (a few ulp: libdevice's
documented bounds, and another order of addition).  Aesara 2.9.4 has no
``LogSoftmaxGrad`` Op: the gradient of ``LogSoftmax`` is an expression of
``Softmax`` and elementwise Ops, which the table and ``GpuElemwise`` cover.

Class indices ``y_idx`` are checked on the GPU, without a wait: the first bad
one is recorded in the call's status and raised when the call ends
(:mod:`aesara_bincount_core.gpu.call_status`), with the host Ops' errors: ``ValueError`` for the one-hot cross-entropy Ops (their C
code checks ``0 <= y < n``), ``IndexError`` for ``CrossentropyCategorical1Hot``
(its ``perform`` indexes as NumPy does: a negative index wraps once).
"""
from aesara.tensor.nnet.basic import (
    CrossentropyCategorical1Hot,
    CrossentropyCategorical1HotGrad,
    CrossentropySoftmax1HotWithBiasDx,
    CrossentropySoftmaxArgmax1HotWithBias,
    SoftmaxWithBias,
)
from aesara.tensor.special import LogSoftmax, Softmax, SoftmaxGrad

from aesara_bincount_core.gpu.entries._common import FLOATS, checked, dtype_problem, one_host_element
from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.type import CupyArray, cupy_module

_ROUNDING = "float32, float64; float bits: CuPy's exp, log and sums"


def _floats(node):
    return dtype_problem(node, FLOATS + ("int8", "int16", "int32", "int64", "uint8", "uint16",
                                         "uint32", "uint64"))  # fmt: skip


def _float_x(node):
    if node.outputs[0].type.dtype not in FLOATS:
        return f"dtype {node.outputs[0].type.dtype} (the GPU entry takes float32, float64)"
    return _floats(node)


def _softmax_funcify(op, node):
    """Softmax, or its log (``LogSoftmax``), along ``op.axis``, as scipy.special computes them."""
    cp = cupy_module()
    log = isinstance(op, LogSoftmax)

    def softmax(x):
        shifted = x - x.max(axis=op.axis, keepdims=True)
        e = cp.exp(shifted)
        total = e.sum(axis=op.axis, keepdims=True)
        return [shifted - cp.log(total) if log else e / total]

    return softmax


for _softmax, _calls in ((Softmax, "cupy.exp"), (LogSoftmax, "cupy.exp, cupy.log")):
    register(
        _softmax, family="nnet", cupy=_calls + ", cupy.ndarray.max and sum", accepts=_float_x,
        accepts_text=_ROUNDING + "; any axis", outputs="a new array",
    )(_softmax_funcify)  # fmt: skip


@register(
    SoftmaxWithBias, family="nnet", cupy="cupy.exp, cupy.ndarray.max and sum", accepts=_float_x,
    accepts_text=_ROUNDING + "; x a matrix, b a vector (the output layer of Lasagne and Keras "
    "models; its gradient is SoftmaxGrad's)",
    outputs="a new matrix",
)  # fmt: skip
def _softmax_with_bias_funcify(op, node):
    cp = cupy_module()

    def softmax_with_bias(x, b):
        if b.shape[0] != x.shape[1]:
            raise ValueError("b must have same number of columns as x")
        if x.size == 0:
            return [cp.zeros(x.shape, dtype=x.dtype)]
        row = x + b
        e = cp.exp(row - row.max(axis=1, keepdims=True))
        e *= 1.0 / e.sum(axis=1, keepdims=True)
        return [e]

    return softmax_with_bias


@register(
    SoftmaxGrad, family="nnet", cupy="cupy.ndarray.sum and arithmetic", accepts=_float_x,
    accepts_text=_ROUNDING + "; any axis", outputs="a new array",
)  # fmt: skip
def _softmax_grad_funcify(op, node):
    def softmax_grad(dy, sm):
        dy_sm = dy * sm
        return [dy_sm - dy_sm.sum(axis=op.axis, keepdims=True) * sm]

    return softmax_grad


@register(
    CrossentropySoftmaxArgmax1HotWithBias, family="nnet",
    cupy="cupy.ndarray.argmax, cupy.exp, cupy.log, cupy.take_along_axis", accepts=_floats,
    accepts_text=_ROUNDING + "; y_idx of any integer dtype, checked on the device", checks=True,
    outputs="three new arrays: the losses, the softmax, the argmax (y_idx's dtype)",
)  # fmt: skip
def _crossentropy_softmax_argmax_funcify(op, node):
    cp = cupy_module()

    def crossentropy_softmax_argmax(x, b, y_idx, status):
        if b.shape[0] != x.shape[1]:
            raise ValueError("b must have same number of columns as x")
        if y_idx.shape[0] != x.shape[0]:
            raise ValueError("y_idx must have same number of rows as x")
        am_dtype = y_idx.dtype
        y_idx = checked(status, y_idx, x.shape[1], ValueError, "y_i value out of bounds")
        row = x + b
        am = row.argmax(axis=1)
        m = cp.take_along_axis(row, am[:, None], axis=1)
        sm = cp.exp(row - m)
        total = sm.sum(axis=1, keepdims=True)
        sm *= 1.0 / total
        picked = cp.take_along_axis(row, y_idx[:, None], axis=1)
        nll = (-picked + m + cp.log(total))[:, 0]
        return [nll, sm, am.astype(am_dtype)]

    return crossentropy_softmax_argmax


def _dy_on_host(node):
    """``dy`` stays on the host when it is one host value (``1 / n`` of a mean)."""
    return (0,) if one_host_element(node.inputs[0]) else ()


@register(
    CrossentropySoftmax1HotWithBiasDx, family="nnet", cupy="cupy arithmetic and an indexed subtraction",
    host_inputs=_dy_on_host, accepts=_floats,
    accepts_text=_ROUNDING + "; dy 0-d or 1-d (one host value stays on the host); y_idx checked "
    "on the device", checks=True,
    outputs="a new matrix",
)  # fmt: skip
def _crossentropy_softmax_dx_funcify(op, node):
    cp = cupy_module()

    def crossentropy_softmax_dx(dy, sm, y_idx, status):
        y_idx = checked(status, y_idx, sm.shape[1], ValueError, "y_i >= dx dimensions[1] or y_i < 0.")
        rows = sm.shape[0]
        dy = dy.reshape(1) if dy.ndim == 0 else dy
        if dy.shape[0] not in (1, rows) or y_idx.shape[0] != rows:
            raise ValueError(
                f"dy ({dy.shape[0]}), sm ({rows}) and y_idx ({y_idx.shape[0]}) have different rows"
            )
        if not isinstance(dy, CupyArray):  # one host value: a scalar of its dtype
            dy = dy[0]
            dx = sm * dy
        else:
            dy = cp.broadcast_to(dy, (rows,))
            dx = dy[:, None] * sm
        dx[cp.arange(rows), y_idx] -= dy
        return [dx]

    return crossentropy_softmax_dx


def _wrapped(status, idx, n):
    """Indices checked into ``[-n, n)`` on the device (IndexError when the call ends), negative
    ones wrapped."""
    return checked(status, idx, n, IndexError, "index out of bounds for axis 1 with size {n}", wrap=True)


@register(
    CrossentropyCategorical1Hot, family="nnet", cupy="cupy.log of an indexed gather",
    accepts=_floats, accepts_text=_ROUNDING + "; the classes checked into [-n, n) on the device",
    checks=True, outputs="a new vector",
)  # fmt: skip
def _crossentropy_categorical_funcify(op, node):
    cp = cupy_module()

    def crossentropy_categorical(coding, one_of_n, status):
        rows = coding.shape[0]
        if one_of_n.shape[0] != rows:
            raise IndexError(f"{one_of_n.shape[0]} classes for {rows} rows")
        cols = _wrapped(status, one_of_n, coding.shape[1])
        return [-cp.log(coding[cp.arange(rows), cols])]

    return crossentropy_categorical


@register(
    CrossentropyCategorical1HotGrad, family="nnet", cupy="cupy.zeros and an indexed assignment",
    accepts=_floats, accepts_text=_ROUNDING + "; the classes checked into [-n, n) on the device",
    checks=True, outputs="a new matrix",
)  # fmt: skip
def _crossentropy_categorical_grad_funcify(op, node):
    cp = cupy_module()

    def crossentropy_categorical_grad(g_y, coding, one_of_n, status):
        rows = g_y.shape[0]
        if one_of_n.shape[0] < rows or coding.shape[0] < rows:
            raise IndexError(f"{rows} gradients for {coding.shape[0]} rows and {one_of_n.shape[0]} classes")
        cols = _wrapped(status, one_of_n[:rows], coding.shape[1])
        out = cp.zeros(coding.shape, dtype=coding.dtype)
        r = cp.arange(rows)
        out[r, cols] = -g_y / coding[r, cols]
        return [out]

    return crossentropy_categorical_grad
