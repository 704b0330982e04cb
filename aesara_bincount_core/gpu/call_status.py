"""The call's status: every index and value check of a call on the GPU, read once, with its results.

A function compiled on GPU data checks indices (the gather and the
scatter-add of rows, ``LinearIndex``, the cross-entropy's classes) and
values (``Assert`` of a GPU condition) on the device, without waiting for
it: each check writes what it found into the *call's status*, a small int64
GPU array that :class:`GpuCallStatus` makes, zeroed, when the call starts,
and the call reads it once, at its end, in the same device-to-host copy as
the results the user reads on the host
(:class:`~aesara_bincount_core.gpu.call_end.GpuCallEnd`).  A check that
fails replaces the bad entries by harmless ones (row 0), so that the rest of
the call touches no memory out of bounds, and the call raises the host Op's
exception, with its message, when it ends.  Theano's GPU Ops checked their
indices with a wait each; one read per call is what PyTorch's and CuPy's
kernels would need as well to report a bad index without a wait per Op.

Layout (:data:`STATUS_WORDS` int64 words):

- words 0-3, the header, laid out as ``bc_status`` of ``c_code/cuda/kernel_defs.h``:
  word 1 (``bad_pos_inv``) is not zero once a check of the call failed.
  The adding kernels of the scatter-add of rows read it before they add
  (``GpuScatterAdd`` with ``call_status``), so an in-place base (a shared
  variable) is left as it was;
- words 4-9: the first failure, in the order the work was queued (the order
  in which the host graph would have raised): its code in the message table
  (:func:`failure_code`), the position, the value, and up to three more
  numbers (a length, an axis);
- word 10: the first bad position (as ``~position``) that the index check
  running now found (``c_code/cuda/call_check_kernels.cu``, whose record
  kernel then writes words 4-9).

The message table is one per process: a code stands for a key that names
the message (``("rows", "gather", False)``) and the function that builds the
exception from the numbers recorded.  Ops hold keys (their props), never
codes, so a pickled Op means the same in another process.
"""
import threading
from typing import Callable, Dict, Hashable, List

import numpy as np
from aesara.graph.basic import Apply
from aesara.graph.op import Op

from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module

__all__ = [
    "GpuCallStatus",
    "STATUS_WORDS",
    "call_status",
    "failure_code",
    "raise_recorded",
    "record_failure",
    "status_type",
    "use_call_status",
]

#: int64 words of the call's status: the ``bc_status`` header, the first failure, a word of the index check.
STATUS_WORDS = 11
_EXTRAS = 3
_FLAG, _CODE = 1, 4

_lock = threading.Lock()
_codes: Dict[Hashable, int] = {}
_builders: List[Callable[..., Exception]] = []


def status_type() -> GpuArrayType:
    """The type of the call's status: a GPU int64 vector of :data:`STATUS_WORDS`."""
    return GpuArrayType("int64", (STATUS_WORDS,))


def failure_code(key: Hashable, builder: Callable[..., Exception]) -> int:
    """The code of the failure ``key`` in this process's message table (1, 2, ...).

    Parameters
    ----------
    key : hashable
        Names the message and everything ``builder`` depends on.
    builder : callable
        ``builder(position, value, *extra) -> Exception`` (the numbers
        :func:`record_failure` recorded, as ints), the host Op's exception
        with its message; kept the first time ``key`` is seen.

    Returns
    -------
    int
    """
    code = _codes.get(key)
    if code is None:
        with _lock:
            code = _codes.get(key)
            if code is None:
                _builders.append(builder)
                code = _codes[key] = len(_builders)
    return code


def record_failure(status, bad, code: int, position, value, *extra) -> None:
    """Record a failure in ``status`` when ``bad`` is true, unless one was recorded before.

    Queued on CuPy's current stream; nothing is waited for and nothing is
    copied from the host (the code and ``extra`` are kernel arguments).

    Parameters
    ----------
    status : cupy.ndarray, int64, shape ``(STATUS_WORDS,)``
    bad : cupy.ndarray, bool, 0-d
    code : int
        From :func:`failure_code`.
    position, value : cupy.ndarray, 0-d, integer (or int)
    *extra : cupy.ndarray, 0-d, or int
        At most three more numbers.
    """
    cp = cupy_module()
    if len(extra) > _EXTRAS:
        raise ValueError(f"record_failure: at most {_EXTRAS} more numbers, got {len(extra)}")
    first = bad & (status[_FLAG] == 0)
    new = cp.zeros(_EXTRAS + 3, dtype="int64")
    new[0] = code
    for k, v in enumerate((position, value) + extra):
        new[k + 1] = v
    status[_CODE:_CODE + _EXTRAS + 3] = cp.where(first, new, status[_CODE:_CODE + _EXTRAS + 3])
    status[_FLAG:_FLAG + 1] = cp.where(bad, 1, status[_FLAG:_FLAG + 1])


def raise_recorded(record) -> None:
    """Raise the failure that the host copy of a status, ``record``, holds; nothing when none.

    Raises
    ------
    Exception
        The host Op's exception (``IndexError``, ``ValueError``,
        ``AssertionError``...) built by the message table; ``IndexError``
        when a kernel flagged a bad index without recording it.
    """
    record = np.asarray(record).reshape(-1)
    if record[_FLAG] == 0:
        return
    code = int(record[_CODE])
    if not 0 < code <= len(_builders):
        raise IndexError("an index out of range, found by a kernel of the call on the GPU")
    raise _builders[code - 1](*(int(v) for v in record[_CODE + 1:_CODE + _EXTRAS + 3]))


class GpuCallStatus(Op):
    """Make the call's status: a zeroed GPU int64 vector of :data:`STATUS_WORDS`.

    No inputs; one node per function (Aesara's merge joins them), run once
    per call before the checks that write into it.  Its value is never
    folded into a constant.  Allocates from CuPy's pool and clears it on the
    current stream (no wait, no copy).
    """

    __props__ = ()

    def make_node(self):
        return Apply(self, [], [status_type()()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = cupy_module().zeros(STATUS_WORDS, dtype="int64")

    def infer_shape(self, fgraph, node, shapes):
        return [(STATUS_WORDS,)]

    def do_constant_folding(self, fgraph, node):
        return False

    def __str__(self):
        return "GpuCallStatus"


def call_status():
    """A variable of the call's status (a new :class:`GpuCallStatus` node; the merge joins them)."""
    return GpuCallStatus()()


def use_call_status(fgraph, status) -> bool:
    """Make every check of ``fgraph`` write into ``status``; whether ``fgraph`` had checks.

    For an inner graph (a ``Scan``'s): its ``GpuCallStatus`` nodes are
    replaced by ``status``, a variable of :func:`status_type` that the inner
    graph takes as an input (the outer call's status, passed in as a
    non-sequence), so that the inner graph's checks are read with the outer
    call's one wait and the inner function gets no ``GpuCallEnd`` of its own
    (which would wait at every step).

    Parameters
    ----------
    fgraph : aesara.graph.fg.FunctionGraph
    status : aesara.graph.basic.Variable
        Of :func:`status_type`: a variable of ``fgraph``, or one with no
        owner, which becomes an input of ``fgraph``.

    Returns
    -------
    bool
    """
    if status.owner is None and status not in fgraph.inputs:
        fgraph.add_input(status)
    found = False
    for node in list(fgraph.apply_nodes):
        if isinstance(node.op, GpuCallStatus):
            fgraph.replace(node.outputs[0], status, reason="use_call_status")
            found = True
    return found
