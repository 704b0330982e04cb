"""Table entries of ``SpecifyShape``, ``Unbroadcast`` and ``BroadcastTo``: views of the GPU array.

Aesara puts a ``SpecifyShape`` where a graph asserts a shape: on the
increments of a scatter-add onto zeros of shape ``(V, 1)``, and wherever a
static shape is given.  On GPU data the node checks the CuPy array's
shape (a host attribute: no copy, no wait) with the host Op's own check,
so it raises the host Op's ``AssertionError`` with the same message, and
returns the array itself (a view, as the host Op declares).

``Unbroadcast`` only changes the static type (``scan`` puts one on the
initial state of a loop, ``zeros_like`` on a vector of one row): on GPU
data it returns the array itself too.

``BroadcastTo`` (``broadcast_to``; the flatten of a broadcasting
elementwise x of a bincount puts one on each input,
:mod:`aesara_bincount.fusion_views`) is ``cupy.broadcast_to``: a view with
zero strides along the broadcast axes, the shape read on the host; shapes
that do not broadcast raise CuPy's ``ValueError``, as NumPy's does.
"""
from aesara.tensor.extra_ops import BroadcastTo
from aesara.tensor.shape import SpecifyShape, Unbroadcast

from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.type import cupy_module


def _shape_inputs(node):
    return tuple(range(1, len(node.inputs)))


@register(
    SpecifyShape, family="views", cupy="none: the array itself, its shape checked on the host",
    host_inputs=_shape_inputs, view_map={0: [0]},
    accepts_text="any GPU dtype and strides; the shape stays on the host",
    outputs="the input itself (a view); raises the host Op's AssertionError on another shape",
)  # fmt: skip
def _specify_shape_funcify(op, node):
    def specify_shape(x, *shape):
        out = [None]
        op.perform(node, [x, *shape], [out])  # reads x.ndim and x.shape only
        return out

    return specify_shape


@register(
    Unbroadcast, family="views", cupy="none: the array itself", view_map={0: [0]},
    accepts_text="any GPU dtype and strides", outputs="the input itself (a view)",
)  # fmt: skip
def _unbroadcast_funcify(op, node):  # issue 39: the initial states of loops
    def unbroadcast(x):
        return [x]

    return unbroadcast


@register(
    BroadcastTo, family="views", cupy="cupy.broadcast_to", host_inputs=_shape_inputs, view_map={0: [0]},
    accepts_text="any GPU dtype and strides; the shape stays on the host",
    outputs="a view of the input (zero strides along the broadcast axes); ValueError for shapes that do "
    "not broadcast",
)  # fmt: skip
def _broadcast_to_funcify(op, node):
    cp = cupy_module()

    def broadcast(x, *shape):
        return [cp.broadcast_to(x, tuple(int(s) for s in shape))]

    return broadcast
