"""A NumPy-backed stand-in for the parts of CuPy that aesara_bincount uses.

Test code only.  Arrays are :class:`ndarray`, a NumPy subclass whose
``data.ptr`` is the host address of element 0; with ``FAKE_CUDA`` pointing
at tests/gpu_emu's fake libcuda, the CUDA kernels run on CPU threads over
this memory.  ``get()`` and ``asnumpy`` count as a synchronization (``counters["sync"]``)
and a device-to-host copy (``counters["d2h"]``); ``counters["alloc"]``
counts allocations from the pool.
``FAKE_CUPY_MAX_BYTES`` makes bigger allocations raise ``OutOfMemoryError``
(a ``MemoryError``), as CuPy's memory pool does.

Memory comes from a pool that behaves as CuPy's stream-ordered pool would,
made to catch a use after release: when the last array over a block goes
away, the block is filled with the byte 0xDB ("poisoned") at once and goes
back to the pool, which hands it out again, most recently freed first, to a
later allocation on the same device and stream.  Work runs when it is queued
here (the fake driver runs a kernel or a copy inside the call that queues
it), so an operation queued after its buffer was released reads poison, as
a GPU would read whatever the pool's next user wrote.

Devices: ``cupy.cuda.Device(i)`` (``FAKE_CUDA_DEVICES`` of them, default 2)
sets the calling thread's current device, here and in the fake driver
(``fake_cuda_set_device``); an array records the device it was made on.

Test hooks: ``alloc_hooks``, callables run at every allocation (Python code
that runs in the middle of a call, as a garbage collection would).
"""
import ctypes
import os
import threading
import weakref

import numpy as _np

__version__ = "0.0.fake"



class _Counters(dict):
    """``counters["sync"]`` counts every wait for the device: CuPy's own
    (``get()``, ``synchronize()``) and the fake driver's stream
    synchronizations (the launcher's read-back)."""

    @staticmethod
    def _driver_syncs() -> int:
        lib = _driver()
        if lib is None or not hasattr(lib, "fake_cuda_counters"):
            return 0
        out = (ctypes.c_longlong * 8)()
        lib.fake_cuda_counters(out)
        return out[1]

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        return value + self._driver_syncs() if key == "sync" else value

    def __setitem__(self, key, value):
        dict.__setitem__(self, key, value - self._driver_syncs() if key == "sync" else value)


counters = _Counters(sync=0, alloc=0, d2h=0)
#: Callables run (without arguments) at every allocation from the pool.
alloc_hooks = []
#: The byte freed memory is filled with.
POISON = 0xDB

_local = threading.local()


def _current_device() -> int:
    return getattr(_local, "device", 0)


def _driver():
    """The fake libcuda (None when this fake CuPy is used without it)."""
    path = os.environ.get("AESARA_BINCOUNT_LIBCUDA")
    if not path:
        return None
    lib = getattr(_driver, "lib", None)
    if lib is None:
        lib = _driver.lib = ctypes.CDLL(path)
    return lib


def _set_device(device: int) -> None:
    _local.device = device
    lib = _driver()
    if lib is not None and hasattr(lib, "fake_cuda_set_device"):
        lib.fake_cuda_set_device(device)


class _Memory:
    """``a.data``: the address of element 0, CuPy's ``MemoryPointer``.

    ``data + k`` is the address ``k`` bytes further, in the same memory (for
    ``ndarray(shape, dtype, memptr=...)``, as CuPy allows, at any offset).
    """

    def __init__(self, array, offset=0):
        self._owner = array
        self.ptr = array.__array_interface__["data"][0] + offset
        self.device_id = getattr(array, "_device", 0)

    def __add__(self, offset):
        return _Memory(self._owner, self.ptr - self._owner.__array_interface__["data"][0] + int(offset))

    def copy_from_device_async(self, src, nbytes, stream=None):
        ctypes.memmove(self.ptr, src.ptr, nbytes)


class ndarray(_np.ndarray):
    """A "device" array: NumPy memory with CuPy's attributes.

    ``ndarray(shape, dtype)`` allocates, as CuPy does; ``ndarray(shape,
    dtype, memptr=a.data + k, strides=...)`` views the memory of the
    C-contiguous ``a`` from byte ``k`` on, at any offset (a misaligned view
    when ``k`` is not a multiple of the itemsize).
    """

    def __new__(cls, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is None:
            return _new(shape, dtype, order)
        owner = memptr._owner
        raw = _np.asarray(owner).view(_np.ndarray).reshape(-1).view(_np.uint8)
        offset = memptr.ptr - raw.__array_interface__["data"][0]
        a = _np.ndarray.__new__(cls, shape, dtype, buffer=raw, offset=offset, strides=strides)
        a._device = getattr(owner, "_device", _current_device())
        return a

    def __array_finalize__(self, obj):
        self._device = getattr(obj, "_device", _current_device())

    @property
    def data(self):
        return _Memory(self)

    @property
    def device(self):
        return cuda.Device(self._device)

    def get(self, stream=None):
        # A synchronous copy into pageable memory, as CuPy's: a wait and a
        # device-to-host copy.
        counters["sync"] += 1
        counters["d2h"] += 1
        return _np.array(self, copy=True).view(_np.ndarray)

    def __array_function__(self, func, types, args, kwargs):
        return super().__array_function__(func, types, args, kwargs)


class _Block:
    """An allocation of the pool, which numpy arrays view."""

    __slots__ = ("__array_interface__", "__weakref__")

    def __init__(self, raw):
        self.__array_interface__ = {
            "shape": raw.shape,
            "typestr": "|u1",
            "data": (raw.__array_interface__["data"][0], False),
            "version": 3,
        }


class _Pool:
    """Device memory handed out and taken back as a stream-ordered pool does."""

    #: Free memory kept for reuse; beyond it the oldest free blocks are dropped.
    KEEP_BYTES = 256 << 20

    def __init__(self):
        self._lock = threading.Lock()
        self._free = {}  # (device, stream, size class) -> [raw block], newest last
        self._order = {}  # id(raw block) -> (key, raw block), oldest first
        self._free_bytes = 0

    @staticmethod
    def _size_class(nbytes: int) -> int:
        size = 256
        while size < nbytes:
            size *= 2
        return size

    def malloc(self, nbytes: int):
        """A new array of ``nbytes`` bytes (uint8) over pool memory."""
        for hook in list(alloc_hooks):
            hook()
        key = (_current_device(), cuda.get_current_stream().ptr, self._size_class(nbytes))
        with self._lock:
            blocks = self._free.get(key)
            raw = blocks.pop() if blocks else None
            if raw is not None:
                del self._order[id(raw)]
                self._free_bytes -= raw.nbytes
        if raw is None:
            raw = _np.empty(key[2], dtype=_np.uint8)
        block = _Block(raw)
        weakref.finalize(block, self._release, key, raw)
        return _np.asarray(block)[:nbytes]

    def _release(self, key, raw):
        raw[...] = POISON
        with self._lock:
            self._free.setdefault(key, []).append(raw)
            self._order[id(raw)] = (key, raw)
            self._free_bytes += raw.nbytes
            while self._free_bytes > self.KEEP_BYTES and self._order:
                old_key, old = self._order.pop(next(iter(self._order)))
                blocks = self._free[old_key]
                blocks[:] = [b for b in blocks if b is not old]
                self._free_bytes -= old.nbytes

    def free_all_blocks(self):
        with self._lock:
            self._free.clear()
            self._order.clear()
            self._free_bytes = 0


_pool = _Pool()


class cuda:  # noqa: N801 - mirrors the cupy.cuda module
    class memory:  # noqa: N801
        class OutOfMemoryError(MemoryError):
            pass

    class Device:
        def __init__(self, device=None):
            self.id = _current_device() if device is None else int(device)
            self._previous = []

        def __enter__(self):
            self._previous.append(_current_device())
            _set_device(self.id)
            return self

        def __exit__(self, *exc):
            _set_device(self._previous.pop())
            return False

        def use(self):
            _set_device(self.id)

    class _Stream:
        ptr = 0

        def synchronize(self):
            counters["sync"] += 1

        def launch_host_func(self, callback, arg):
            """Queue ``callback(arg)`` on the stream (run by the fake driver's
            next synchronization, on a thread of its own)."""
            lib = _driver()
            func_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
            thunk = func_type(lambda _: callback(arg))
            _host_funcs.append(thunk)  # kept alive: the driver calls it later
            lib.cuLaunchHostFunc.argtypes = [ctypes.c_void_p, func_type, ctypes.c_void_p]
            if lib.cuLaunchHostFunc(None, thunk, None) != 0:
                raise RuntimeError("cuLaunchHostFunc failed")

    class runtime:  # noqa: N801
        @staticmethod
        def getDevice():
            return _current_device()

        @staticmethod
        def setDevice(device):
            _set_device(int(device))

        @staticmethod
        def free(ptr):
            pass

        @staticmethod
        def getDeviceCount():
            return int(os.environ.get("FAKE_CUDA_DEVICES", "2") or 2)

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


_host_funcs = []


def _check(nbytes):
    limit = int(os.environ.get("FAKE_CUPY_MAX_BYTES", "0") or 0)
    if limit and nbytes > limit:
        raise cuda.memory.OutOfMemoryError(f"fake out of memory allocating {nbytes} bytes")
    counters["alloc"] += 1


def _new(shape, dtype, order="C"):
    """An uninitialised device array from the pool."""
    dtype = _np.dtype(dtype)
    shape = (shape,) if _np.isscalar(shape) else tuple(shape)
    count = int(_np.prod(shape, dtype=_np.int64))
    _check(count * dtype.itemsize)
    raw = _pool.malloc(count * dtype.itemsize)
    a = raw.view(dtype).reshape(shape, order=order)
    return a.view(ndarray)


def empty(shape, dtype=float, order="C"):
    a = _new(shape, dtype, order)
    # Garbage, so that code relying on zeroed memory fails (through a 1-d view:
    # NumPy cannot view a 0-d array as bytes).
    a.reshape(-1).view(_np.uint8)[...] = 0xA7
    return a


def zeros(shape, dtype=float, order="C"):
    a = _new(shape, dtype, order)
    a[...] = 0
    return a


def asarray(a, dtype=None):
    if isinstance(a, ndarray) and (dtype is None or a.dtype == dtype):
        return a
    host = _np.asarray(a, dtype=dtype)
    out = _new(host.shape, host.dtype)
    out[...] = host
    return out


def array(a, dtype=None, copy=True):
    if isinstance(a, ndarray) and not copy and (dtype is None or a.dtype == dtype):
        return a
    return asarray(_np.array(a, dtype=dtype, copy=True))


def asnumpy(a):
    if isinstance(a, ndarray):
        return a.get()  # CuPy's asnumpy of a device array is its get()
    return _np.array(a, copy=True).view(_np.ndarray)


def may_share_memory(a, b):
    return _np.may_share_memory(a, b)


def shares_memory(a, b):
    return _np.shares_memory(a, b)


def arange(*args, **kwargs):
    return asarray(_np.arange(*args, **kwargs))


def full(shape, value, dtype=None):
    return asarray(_np.full(shape, value, dtype=dtype))


def empty_like(a):
    return empty(a.shape, a.dtype)


def bincount(x, weights=None, minlength=0):
    return asarray(_np.bincount(_np.asarray(x), None if weights is None else _np.asarray(weights), minlength))


def exp(a):
    return asarray(_np.exp(_np.asarray(a)))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return asarray(_np.allclose(_np.asarray(a), _np.asarray(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def get_default_memory_pool():
    return _pool


uint8 = _np.uint8


from cupy._routines import *  # noqa: E402,F401,F403 (the routines of the GPU table's entries)
