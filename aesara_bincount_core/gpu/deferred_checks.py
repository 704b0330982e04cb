"""Index and value checks of GPU Ops, read back together: :func:`deferred`, :func:`record`.

A GPU Op that checks its indices or values (the gather's rows, the class
indices of the cross-entropy) learns the answer on the device; reading it
back is a wait for the stream.  In a loop (:class:`~aesara_bincount_core.gpu.scan.GpuScan`
runs its inner graph once per step) that is one wait per step.  Inside a
``with deferred():`` block a check does not read its answer back: it hands
its flag, a 0-d boolean GPU array, to :func:`record`, which ORs it on the
device into the flag of its check site (one per exception class and
message).  When the outermost block ends, every site's flag comes back in
one copy (one wait), and the exception of the first site whose flag is set
is raised, sites taken in the order they first ran.  Blocks nest: an inner
block leaves its flags to the outer one.

Between the check and the read, the Op's work goes on with the bad values:
the Ops that defer their checks must keep that work inside their arrays
(CuPy's gathers wrap an index out of range; see each Op).  When an
exception leaves the block, the flags are read at once: a recorded error
is raised in its place (chained to it), as it is the first cause.

This is the minimal interface the scan needs (issue 39); the per-call
status read of the issue may take its place, keeping :func:`deferred` and
:func:`record` as they are.
"""
import contextlib
import threading
from typing import Optional

from aesara_bincount_core.gpu.type import cupy_module

__all__ = ["active", "deferred", "record"]

_local = threading.local()


class _Sites:
    """The flags of one outermost block: (exception class, message) -> [flag, detail]."""

    def __init__(self):
        self.flags = {}

    def add(self, flag, exc: type, message: str, detail) -> None:
        cp = cupy_module()
        key = (exc, message)
        old = self.flags.get(key)
        if old is None:
            self.flags[key] = [flag, detail]
            return
        if detail is not None:  # keep the detail of the first step whose flag was set
            old[1] = cp.where(old[0], old[1], detail)
        old[0] = old[0] | flag

    def raise_first(self) -> None:
        """Read every flag (one copy, one wait) and raise the first site's exception."""
        if not self.flags:
            return
        cp = cupy_module()
        rows = [cp.stack([f.astype("int64"), (f if d is None else d).astype("int64")])
                for f, d in self.flags.values()]  # fmt: skip
        got = cp.asnumpy(cp.stack(rows))
        for (exc, message), (flag, detail) in zip(self.flags, got):
            if flag:
                raise exc(message.format(int(detail)) if "{}" in message else message)


def active() -> bool:
    """Whether this thread is inside a :func:`deferred` block."""
    return getattr(_local, "sites", None) is not None


def record(flag, exc: type, message: str, detail=None) -> bool:
    """Defer a check: ``flag`` (0-d bool GPU array) set means ``exc(message)``.

    Parameters
    ----------
    flag : cupy.ndarray, shape ``()``, bool
        Set when the check fails (queued on CuPy's current stream, not read).
    exc : type
        The exception class to raise.
    message : str
        Its message; a ``{}`` in it is replaced by ``detail``'s value.
    detail : cupy.ndarray, shape ``()``, integer, optional
        A value named by the message (the position of the first bad index);
        the one of the first failing step is kept.

    Returns
    -------
    bool
        True when recorded (inside a :func:`deferred` block), False when the
        caller must read its answer itself.
    """
    sites: Optional[_Sites] = getattr(_local, "sites", None)
    if sites is None:
        return False
    sites.add(flag, exc, message, detail)
    return True


@contextlib.contextmanager
def deferred():
    """A block whose checks are read back together when the outermost one ends.

    Raises
    ------
    Exception
        The exception of the first recorded check that failed (its class and
        message as the Op gives them when it checks at once), when the
        outermost block ends; one wait for the stream, and none when no check
        was recorded.
    """
    if active():
        yield
        return
    sites = _local.sites = _Sites()
    try:
        yield
    except Exception as exc:
        _local.sites = None
        try:
            sites.raise_first()
        except Exception as first:
            raise first from exc
        raise
    else:
        _local.sites = None
        sites.raise_first()
    finally:
        _local.sites = None
