"""Helpers of the table's entries: dtype rules, host scalars, the index check.

Nothing here registers an entry.
"""
from typing import Optional

from aesara_bincount_core.gpu import deferred_checks
from aesara_bincount_core.gpu.type import _is_cupy, cupy_module

__all__ = ["FLOATS", "check_range", "dtype_problem", "from_gpu", "host_scalar", "one_host_element"]

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


def check_range(idx, low: int, high: int, exc: type, message: str) -> None:
    """Raise ``exc(message)`` unless every entry of the GPU array ``idx`` is in ``[low, high)``.

    Waits once for CuPy's current stream (the answer is read back), unless
    inside a :func:`~aesara_bincount_core.gpu.deferred_checks.deferred` block
    (a scan's loop), which reads it later with the others.
    """
    if idx.size == 0:
        return
    cp = cupy_module()
    bad = idx >= high
    if idx.dtype.kind == "i":
        bad |= idx < low
    if deferred_checks.record(bad.any(), exc, message):  # issue 39: no wait per scan step
        return
    if bool(cp.asnumpy(bad.any())):
        raise exc(message)


def one_host_element(v) -> bool:
    """Whether ``v`` is a host value of one element known statically (0-d, or every length 1)
    that does not come from the GPU: an entry may take it as a NumPy value, with no copy."""
    return not from_gpu(v) and all(s == 1 for s in getattr(v.type, "shape", (None,)))


def from_gpu(v) -> bool:
    """Whether the host variable ``v`` is a copy of a GPU array (``HostFromGpu``)."""
    from aesara_bincount_core.gpu.transfer import HostFromGpu

    return v.owner is not None and isinstance(v.owner.op, HostFromGpu)
