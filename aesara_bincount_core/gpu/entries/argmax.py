"""Table entries of the arg-reductions: Argmax and MaxAndArgmax (argmin is Aesara's argmax of -x).

As the host Ops do, the reduced axes are moved to the end and flattened
into one, then ``cupy.ndarray.argmax`` takes the last axis (CuPy's argmax
takes one axis, as NumPy's does).  NaN is the maximum (the first NaN wins,
as in NumPy); among equal values the first index wins.
"""
import math

from aesara.tensor.math import Argmax, MaxAndArgmax

from aesara_bincount_core.gpu.table import register

_ACCEPTS = "any GPU dtype but bool, over any set of axes; NaN and ties as in NumPy"


def _numbers(node):
    if node.inputs[0].type.dtype == "bool":
        return "argmax of bool stays on the host"
    return None


def _flat_argmax(x, axes):
    """Argmax over ``axes`` (a tuple) of ``x``: int64, of the shape of the kept axes."""
    keep = [d for d in range(x.ndim) if d not in axes]
    moved = x.transpose(keep + list(axes))
    kept_shape = moved.shape[: len(keep)]
    flat = moved.reshape(kept_shape + (math.prod(moved.shape[len(keep):]),))
    return flat.argmax(axis=-1).astype("int64", copy=False)


def _axes(op, x):
    return tuple(range(x.ndim)) if op.axis is None else tuple(int(a) for a in op.axis)


@register(
    Argmax, family="reductions", cupy="cupy.ndarray.argmax (after a transpose and reshape)",
    accepts=_numbers, accepts_text=_ACCEPTS,
    outputs="a new int64 array; an empty reduced axis raises ValueError, as on the host",
)  # fmt: skip
def _argmax_funcify(op, node):
    def argmax(x):
        return [_flat_argmax(x, _axes(op, x))]

    return argmax


@register(
    MaxAndArgmax, family="reductions", cupy="cupy.ndarray.max and argmax", accepts=_numbers,
    accepts_text=_ACCEPTS, outputs="two new arrays: the maximum (the input's dtype) and int64 indices",
)  # fmt: skip
def _max_and_argmax_funcify(op, node):
    def max_and_argmax(x):
        axes = _axes(op, x)
        return [x.max(axis=axes), _flat_argmax(x, axes)]

    return max_and_argmax
