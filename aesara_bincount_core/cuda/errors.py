"""The exceptions of the GPU path, and the one place a launch error becomes one.

Part of the stand-alone kernel layer.  The C launcher
(``c_code/cuda_host/bincount_launch.h``) needs no Python, so it reports a failure
as a ``bc_cuda_error``: a ``BC_CUDA_E_*`` code of
``c_code/cuda_host/driver.h`` with its arguments.  :func:`launch_error`
renders it, with the message table of ``c_code/common/host_helpers.h`` (the same
text as the CPU Op and the NumPy reference), for both callers of the
launcher: the kernel layer (:mod:`.launcher`) and the host C code of the
GpuBincount Op, which calls it through the Python C API.
"""
from aesara_bincount_core import _c_code
from aesara_bincount_core.cuda.sources import header_constants

__all__ = ["GpuUnavailableError", "CODES", "launch_error"]


class GpuUnavailableError(RuntimeError):
    """No usable GPU: CuPy, the driver, a device, NVRTC or a C compiler is missing."""


#: ``BC_CUDA_E_*`` name (without the prefix) -> code.
CODES = header_constants("cuda_host/driver.h", "BC_CUDA_E_")
_NAMES = {code: name for name, code in CODES.items()}
#: code name -> (exception type, message of common/host_helpers.h).
_TABLE = {
    "NDIM": (ValueError, "BC_MSG_NDIM"),
    "MINLENGTH": (ValueError, "BC_MSG_MINLENGTH"),
    "LENGTH": (ValueError, "BC_MSG_LENGTH"),
    "WEIGHTS": (ValueError, "BC_MSG_WEIGHTS"),
    "WEIGHTS_BCAST": (ValueError, "BC_MSG_WEIGHTS_BCAST"),
    "NEGATIVE": (ValueError, "BC_MSG_NEGATIVE"),
    "INDEX": (IndexError, "BC_MSG_INDEX"),
    "ROW_INDEX": (IndexError, "BC_MSG_ROW_INDEX"),
    "TOO_LARGE": (ValueError, "BC_MSG_TOO_LARGE"),
    "NO_MEMORY": (MemoryError, "BC_MSG_NO_MEMORY"),
}
_OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY


def launch_error(code: int, a0: int, a1: int, a2: int, uarg: int, text: str) -> BaseException:
    """The exception a ``bc_cuda_error`` stands for (not raised: returned).

    Parameters
    ----------
    code : int
        A ``BC_CUDA_E_*`` code other than ``NONE`` and ``HOST``.
    a0, a1, a2, uarg, text
        The record's arguments (``arg[0..2]``, ``uarg``, ``text``).

    Returns
    -------
    BaseException
        ``ValueError``, ``IndexError`` or ``MemoryError`` with the message of
        ``common/host_helpers.h``; ``ValueError`` for an input on another device;
        ``MemoryError`` (device out of memory) or ``RuntimeError`` for a failed
        driver call; :class:`GpuUnavailableError` when the driver is missing.
    """
    name = _NAMES.get(code)
    if name in _TABLE:
        kind, message = _TABLE[name]
        fmt = _c_code.messages()[message]
        args = {
            "NDIM": (text, a0, a1),
            "INDEX": (text, a1, a2),
            "ROW_INDEX": (text, a1, a2),
            "TOO_LARGE": (uarg,),
            "MINLENGTH": (a0,),
            "LENGTH": (a0,),
        }.get(name, (a0, a1))
        return kind(fmt % args)
    if name == "DEVICE":
        return device_error(text, a0, a1)
    if name == "ALIGN":
        return align_error(text, a0, a1, a2)
    if name == "DRIVER":
        return (MemoryError if a0 == _OUT_OF_MEMORY else RuntimeError)(
            f"bincount on the GPU: {text}"
        )
    if name == "LOAD":
        return GpuUnavailableError(f"bincount on the GPU: {text}")
    return RuntimeError(f"bincount on the GPU: launch error {code} ({text})")


def device_error(text: str, device: int, current: int) -> ValueError:
    """``ValueError`` for the array ``text`` on GPU ``device`` used while ``current`` is
    CuPy's current device (not raised: returned)."""
    return ValueError(
        f"bincount: {text} lives on device {device}, but the current device is {current}; run it "
        f"under `with cupy.cuda.Device({device})`"
    )


def align_error(text: str, itemsize: int, offset: int, stride: int) -> ValueError:
    """``ValueError`` for the array ``text`` whose address (``offset`` bytes past a
    256-byte boundary) or ``stride`` is not a multiple of its ``itemsize`` (not
    raised: returned)."""
    return ValueError(
        f"bincount on the GPU: {text} is not aligned to its {itemsize}-byte elements (its device "
        f"address is {offset} bytes past a 256-byte boundary, its stride {stride} bytes); the GPU "
        "reads an element only at an address that is a multiple of its size. Such arrays "
        "come from views at odd byte offsets or DLPack imports: pass an aligned copy (a "
        "fresh array, filled with a byte copy such as "
        "new.data.copy_from_device(a.data, a.nbytes) for a contiguous one)"
    )
