"""The layout of one :class:`~aesara_bincount_core.gpu.elemwise.GpuElemwise`
launch, from the arrays of a call: their broadcast shape, their byte strides
over it, the checks before a kernel may touch them (device, alignment to
their elements) and whether the vector path may load and store them
(``c_code/cuda/elemwise_kernel.cu``).  No GPU work here; the arrays are
CuPy arrays (only their shapes, strides, pointers and devices are read).
"""
from typing import List, Sequence

__all__ = ["check_arrays", "broadcast_shape", "strides", "vector_aligned"]


def check_arrays(op, arrays: Sequence, device: int) -> None:
    """ValueError for arrays the kernel must not touch: on another device than
    the current one, or not aligned to their itemsize (a misaligned access
    would end the CUDA context)."""
    for a in arrays:
        if a.data.device_id != device:
            raise ValueError(f"{op}: an input is on GPU {a.data.device_id}, the current device is {device}")
        # one element is loaded too (its address counts, not its strides)
        if a.size and (a.data.ptr % a.itemsize or any(st % a.itemsize for st, n in zip(a.strides, a.shape) if n > 1)):
            raise ValueError(f"{op}: an input is not aligned to its itemsize ({a.itemsize} bytes)")


def vector_aligned(args, width: int) -> bool:
    """Whether the vector path of ``width`` elements may load and store the
    ``(k, array)`` pairs of a contiguous launch: each array of more than one
    element starts on a multiple of ``min(16, width * itemsize)`` bytes (the
    width of its vector loads and stores, ``c_code/cuda/elemwise_kernel.cu``);
    an array of one element is loaded alone."""
    return all(a.size == 1 or a.data.ptr % min(16, width * a.itemsize) == 0 for _, a in args)


def broadcast_shape(op, ndim: int, arrays: Sequence) -> tuple:
    """The shape of ``ndim`` dimensions the arrays broadcast to (lengths of 1
    broadcast, as in Aesara's Elemwise); ValueError naming the shapes when
    they do not."""
    shape = [1] * ndim
    for a in arrays:
        padded = (1,) * (ndim - a.ndim) + tuple(a.shape)
        for d, s in enumerate(padded):
            if s != 1:
                if shape[d] not in (1, s):
                    raise ValueError(
                        f"{op}: input shapes {[tuple(x.shape) for x in arrays]} do not broadcast "
                        f"(dimension {d}: {shape[d]} and {s})"
                    )
                shape[d] = s
    return tuple(shape)


def strides(shape, a) -> List[int]:
    """Byte strides of ``a`` over the output ``shape`` (0 where it broadcasts)."""
    pad = len(shape) - a.ndim
    out = [0] * pad
    for d in range(a.ndim):
        out.append(0 if a.shape[d] == 1 and shape[pad + d] != 1 else a.strides[d])
    return out
