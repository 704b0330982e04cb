"""Table entries of Aesara's basic array Ops: Alloc, AllocEmpty, Eye, ARange, MakeVector, Join, Split, ExtractDiag, AllocDiag, Nonzero.

``Alloc``, ``AllocEmpty``, ``Eye``, ``ARange`` and ``MakeVector`` make
arrays from host values (shapes, a fill value, the bounds of a range, host
scalars): they are *sources*, lifted when every user of their result runs
on the GPU, so that ``zeros_like(W)``, a broadcast ``Alloc`` of a GPU value
or ``arange(n)`` beside a GPU index costs no copy (the host values are
kernel arguments).  The shapes, axes and split lengths stay on the host.
"""
from aesara.tensor.basic import (
    Alloc,
    AllocDiag,
    AllocEmpty,
    ARange,
    ExtractDiag,
    Eye,
    Join,
    MakeVector,
    Nonzero,
    Split,
)

from aesara_bincount_core.gpu.entries._common import one_host_element
from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.type import CupyArray, cupy_module


def _all_inputs(node):
    return tuple(range(len(node.inputs)))


def _alloc_host_inputs(node):
    """The shape, and the fill value when it is a host value of one element."""
    shape = tuple(range(1, len(node.inputs)))
    return (0,) + shape if one_host_element(node.inputs[0]) else shape


@register(
    Alloc, family="arrays", cupy="cupy.full, or cupy.empty then a broadcast copy",
    host_inputs=_alloc_host_inputs, source=True,
    accepts_text="any GPU dtype; a fill value of one element from the host is a kernel argument, "
    "a GPU value is broadcast",
    outputs="a new C-contiguous array",
)  # fmt: skip
def _alloc_funcify(op, node):
    cp = cupy_module()
    dtype = node.outputs[0].type.dtype

    def alloc(value, *shape):
        shape = tuple(int(s) for s in shape)
        if not isinstance(value, CupyArray):  # a host value of one element
            return [cp.full(shape, value.reshape(-1)[0], dtype=dtype)]
        out = cp.empty(shape, dtype=dtype)
        out[...] = value
        return [out]

    return alloc


def _from_host_values_funcify(op, node):
    """``cupy.empty(shape)`` (AllocEmpty) or ``cupy.eye(n, m, k)`` (Eye), of ``op.dtype``."""
    cp = cupy_module()
    if isinstance(op, Eye):
        def make(n, m, k):
            return cp.eye(n, m, k, dtype=op.dtype)
    else:
        def make(*shape):
            return cp.empty(shape, dtype=op.dtype)

    def from_host_values(*values):
        return [make(*(int(v) for v in values))]

    return from_host_values


for _op_class, _call, _out in ((AllocEmpty, "cupy.empty", "a new uninitialised C-contiguous array"),
                               (Eye, "cupy.eye", "a new C-contiguous matrix")):  # fmt: skip
    register(
        _op_class, family="arrays", cupy=_call, host_inputs=_all_inputs, source=True,
        accepts_text="any GPU dtype", outputs=_out,
    )(_from_host_values_funcify)  # fmt: skip


def _all_host(node):
    return tuple(range(len(node.inputs)))


@register(
    ARange, family="arrays", cupy="cupy.arange", host_inputs=_all_host, source=True,
    accepts_text="any GPU dtype; start, stop and step stay on the host (kernel arguments)",
    outputs="a new vector",
)  # fmt: skip
def _arange_funcify(op, node):
    cp = cupy_module()

    def arange(start, stop, step):
        return [cp.arange(start.item(), stop.item(), step.item(), dtype=op.dtype)]

    return arange


def _host_scalars(node):
    """The inputs that are host values (each one element): kernel arguments."""
    return tuple(k for k, v in enumerate(node.inputs) if one_host_element(v))


@register(
    MakeVector, family="arrays", cupy="cupy.empty, then one element set per input",
    host_inputs=_host_scalars, source=True,
    accepts_text="any GPU dtype; host scalars are kernel arguments, GPU scalars are copied on the device",
    outputs="a new vector",
)  # fmt: skip
def _make_vector_funcify(op, node):
    cp = cupy_module()
    dtype = node.outputs[0].type.dtype

    def make_vector(*scalars):
        out = cp.empty(len(scalars), dtype=dtype)
        for k, v in enumerate(scalars):
            out[k] = v if isinstance(v, CupyArray) else v.item()
        return [out]

    return make_vector


@register(
    Join, family="arrays", cupy="cupy.concatenate", host_inputs=(0,),
    accepts_text="any GPU dtypes (upcast as in Aesara); the axis stays on the host",
    outputs="a new C-contiguous array (never a view of an input)",
)  # fmt: skip
def _join_funcify(op, node):
    cp = cupy_module()
    dtype = node.outputs[0].type.dtype

    def join(axis, *tensors):
        axis = int(axis)
        if axis < -tensors[0].ndim:  # the host Op's message
            raise IndexError(f"Join axis {axis} out of bounds [0, {tensors[0].ndim})")
        return [cp.concatenate([t.astype(dtype, copy=False) for t in tensors], axis=axis)]

    return join


@register(
    Split, family="arrays", cupy="cupy.ndarray.__getitem__ and copy", host_inputs=(1, 2),
    accepts_text="any GPU dtype; the axis and the lengths stay on the host",
    outputs="new C-contiguous arrays, one per piece",
)  # fmt: skip
def _split_funcify(op, node):
    def split(x, axis, splits):
        axis = int(axis)
        length = x.shape[axis]
        total = int(sum(int(s) for s in splits))
        if len(splits) != op.len_splits:
            raise ValueError("Length of `splits` is not equal to `len_splits`")
        if total != length:
            raise ValueError(f"The splits sum to {total}; expected {length}")
        if any(int(s) < 0 for s in splits):
            raise ValueError("Attempted to make an array with a negative number of elements")
        key = [slice(None)] * x.ndim
        out, low = [], 0
        for s in splits:
            key[axis] = slice(low, low + int(s))
            out.append(x[tuple(key)].copy())
            low += int(s)
        return out

    return split


@register(
    ExtractDiag, family="arrays", cupy="cupy.ndarray.diagonal, then a copy",
    accepts_text="any GPU dtype, any offset and pair of axes",
    outputs="a new array (a copy, also for view=True)",
)  # fmt: skip
def _extract_diag_funcify(op, node):
    def extract_diag(x):
        return [x.diagonal(op.offset, op.axis1, op.axis2).copy()]

    return extract_diag


@register(
    AllocDiag, family="arrays", cupy="cupy.zeros, then a scatter of the diagonal",
    accepts_text="any GPU dtype, any offset and pair of axes", outputs="a new C-contiguous array",
)  # fmt: skip
def _alloc_diag_funcify(op, node):
    cp = cupy_module()
    axis1, axis2 = min(op.axis1, op.axis2), max(op.axis1, op.axis2)
    offset = op.offset

    def alloc_diag(x):
        n = x.shape[-1]
        shape = x.shape[:-1] + (n + abs(offset),) * 2
        result = cp.zeros(shape, dtype=x.dtype)
        idx = cp.arange(n)
        result[(Ellipsis, idx + max(0, -offset), idx + max(0, offset))] = x
        if x.ndim > 1:
            axes = list(range(x.ndim - 1))
            last = axes[-1]
            axes = axes[:axis1] + [last + 1] + axes[axis1:]
            axes = axes[:axis2] + [last + 2] + axes[axis2:]
            result = result.transpose(axes).copy()
        return [result]

    return alloc_diag


@register(
    Nonzero, family="arrays", cupy="cupy.nonzero",
    accepts_text="any GPU dtype, 1 or more dimensions",
    outputs="new int64 vectors, one per dimension; waits once (the count of non-zeros is read back)",
)  # fmt: skip
def _nonzero_funcify(op, node):
    cp = cupy_module()

    def nonzero(a):
        return [r.astype("int64", copy=False) for r in cp.nonzero(a)]

    return nonzero

