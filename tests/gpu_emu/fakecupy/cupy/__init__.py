"""A NumPy-backed stand-in for the parts of CuPy that aesara_bincount uses.

Test code only.  Arrays are :class:`ndarray`, a NumPy subclass whose
``data.ptr`` is the host address of element 0; with ``FAKE_CUDA`` pointing
at tests/gpu_emu's fake libcuda, the CUDA kernels run on CPU threads over
this memory.  ``get()`` counts as a synchronization (``counters["sync"]``).
``FAKE_CUPY_MAX_BYTES`` makes bigger allocations raise ``OutOfMemoryError``
(a ``MemoryError``), as CuPy's memory pool does.
"""
import os

import numpy as _np

__version__ = "0.0.fake"

counters = {"sync": 0, "alloc": 0}


class _Memory:
    def __init__(self, array):
        self.ptr = array.__array_interface__["data"][0]
        self.device_id = 0

    def copy_from_device_async(self, src, nbytes, stream=None):
        import ctypes

        ctypes.memmove(self.ptr, src.ptr, nbytes)


class ndarray(_np.ndarray):
    """A "device" array: NumPy memory with CuPy's attributes."""

    @property
    def data(self):
        return _Memory(self)

    @property
    def device(self):
        return cuda.Device(0)

    def get(self, stream=None):
        counters["sync"] += 1
        return _np.array(self, copy=True).view(_np.ndarray)

    def __array_function__(self, func, types, args, kwargs):
        return super().__array_function__(func, types, args, kwargs)


class cuda:  # noqa: N801 - mirrors the cupy.cuda module
    class memory:  # noqa: N801
        class OutOfMemoryError(MemoryError):
            pass

    class Device:
        def __init__(self, device=None):
            self.id = 0 if device is None else int(device)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def use(self):
            pass

    class _Stream:
        ptr = 0

        def synchronize(self):
            counters["sync"] += 1

    class runtime:  # noqa: N801
        @staticmethod
        def getDevice():
            return 0

        @staticmethod
        def setDevice(device):
            pass

        @staticmethod
        def free(ptr):
            pass

        @staticmethod
        def getDeviceCount():
            return 1

        @staticmethod
        def getDeviceProperties(device):
            return {"name": b"CPU emulation"}

    @staticmethod
    def get_current_stream():
        return cuda._Stream()

    @staticmethod
    def set_allocator(allocator=None):
        pass

    class Event:
        """Host wall-clock stand-in for a CUDA event."""

        def record(self, stream=None):
            import time

            self.t = time.perf_counter()

        def synchronize(self):
            pass

    @staticmethod
    def get_elapsed_time(start, end):
        return (end.t - start.t) * 1e3


def _check(nbytes):
    limit = int(os.environ.get("FAKE_CUPY_MAX_BYTES", "0") or 0)
    if limit and nbytes > limit:
        raise cuda.memory.OutOfMemoryError(f"fake out of memory allocating {nbytes} bytes")
    counters["alloc"] += 1


def _device(a):
    return a.view(ndarray)


def empty(shape, dtype=float, order="C"):
    dtype = _np.dtype(dtype)
    _check(int(_np.prod(shape)) * dtype.itemsize)
    # Fill with garbage so that code relying on zeroed memory fails.
    a = _np.empty(shape, dtype=dtype, order=order)
    a.view(_np.uint8)[...] = 0xA7
    return _device(a)


def zeros(shape, dtype=float, order="C"):
    dtype = _np.dtype(dtype)
    _check(int(_np.prod(shape)) * dtype.itemsize)
    return _device(_np.zeros(shape, dtype=dtype, order=order))


def asarray(a, dtype=None):
    if isinstance(a, ndarray) and (dtype is None or a.dtype == dtype):
        return a
    a = _np.asarray(a, dtype=dtype)
    _check(a.nbytes)
    return _device(_np.array(a, copy=True))


def array(a, dtype=None, copy=True):
    a = _np.array(a, dtype=dtype, copy=copy)
    return _device(a)


def asnumpy(a):
    return _np.array(a, copy=True).view(_np.ndarray)


def may_share_memory(a, b):
    return _np.may_share_memory(a, b)


def shares_memory(a, b):
    return _np.shares_memory(a, b)


def arange(*args, **kwargs):
    return _device(_np.arange(*args, **kwargs))


def full(shape, value, dtype=None):
    return _device(_np.full(shape, value, dtype=dtype))


def empty_like(a):
    return empty(a.shape, a.dtype)


def bincount(x, weights=None, minlength=0):
    return _device(_np.bincount(_np.asarray(x), None if weights is None else _np.asarray(weights), minlength))


class _Pool:
    def free_all_blocks(self):
        pass


def get_default_memory_pool():
    return _Pool()


uint8 = _np.uint8
