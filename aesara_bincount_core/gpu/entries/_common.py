"""Helpers of the table's entries: dtype rules, host scalars, the index check.

Nothing here registers an entry.
"""
from typing import Optional

from aesara_bincount_core.gpu.index_check import check_indices
from aesara_bincount_core.gpu.type import _is_cupy

__all__ = ["FLOATS", "checked", "dtype_problem", "from_gpu", "host_scalar", "one_host_element"]

#: The float dtypes the float entries take: float16 stays on the host (its
#: arithmetic is done in float32 by cuBLAS and CuPy, in float16 by NumPy).
FLOATS = ("float32", "float64")


def dtype_problem(node, allowed, what="inputs") -> Optional[str]:
    """The first dtype of ``node``'s inputs (or ``"outputs"``) outside ``allowed``, as a reason."""
    for v in node.inputs if what == "inputs" else node.outputs:
        dtype = getattr(v.type, "dtype", None)
        if dtype is not None and dtype not in allowed:
            return f"dtype {dtype} (the GPU entry takes {', '.join(allowed)})"
    return None


def host_scalar(value):
    """A host 0-d array as a NumPy scalar of its dtype (CuPy takes scalars, not NumPy arrays)."""
    return value[()] if getattr(value, "ndim", None) == 0 and not _is_cupy(value) else value


def checked(status, idx, n: int, exc: type, message: str, wrap: bool = False):
    """``idx`` checked on the device into ``[0, n)`` (``[-n, n)``, wrapped once, with ``wrap``).

    The first bad index is recorded in the call's ``status``, raised as
    ``exc(message.format(n=n))`` when the call reads it (no wait here); the result is
    int64, each bad index replaced by 0 (:func:`~aesara_bincount_core.gpu.index_check.check_indices`).
    """

    def builder(position, value, n, *unused):
        return exc(message.format(n=n))

    return check_indices(status, idx, n, ("entry", exc, message, wrap), builder, wrap=wrap)


def one_host_element(v) -> bool:
    """Whether ``v`` is a host value of one element known statically (0-d, or every length 1)
    that does not come from the GPU: an entry may take it as a NumPy value, with no copy."""
    return not from_gpu(v) and all(s == 1 for s in getattr(v.type, "shape", (None,)))


def from_gpu(v) -> bool:
    """Whether the host variable ``v`` is a copy of a GPU array (``HostFromGpu``)."""
    from aesara_bincount_core.gpu.transfer import HostFromGpu

    return v.owner is not None and isinstance(v.owner.op, HostFromGpu)
