"""A NumPy-backed stand-in for the parts of CuPy that aesara_bincount uses.

Test code only.  Arrays are :class:`ndarray`, a wrapper of a NumPy array
(not a subclass) whose ``data.ptr`` is the host address of element 0, and
which refuses implicit conversion to NumPy as CuPy 13 does
(``numpy.asarray(a)`` raises TypeError); with ``FAKE_CUDA`` pointing
at tests/gpu_emu's fake libcuda, the CUDA kernels run on CPU threads over
this memory.  ``get()``, ``asnumpy``, ``item()``, ``tolist()``, ``bool()``,
``int()``, ``float()``, ``__index__`` and printing of a device array count as
a synchronization (``counters["sync"]``) and a device-to-host copy
(``counters["d2h"]``), as each waits for the device in CuPy 13; ``asarray`` and ``array`` of
host data count as a host-to-device copy (``counters["h2d"]``), arrays that a
kernel makes (``full``, ``arange``, results) do not; ``counters["alloc"]``
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

With ``FAKE_CUDA_ASYNC=1`` the fake driver queues its kernels and copies on
a stream thread instead (tests/gpu_emu/emu_stream.h); every operation here
that touches device memory (reads, writes, allocations, the pool's release
and poison) first waits for that stream (``fake_cuda_drain``), as CuPy's
work, queued on the same stream behind ours, would run after it.

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


counters = _Counters(sync=0, alloc=0, d2h=0, h2d=0)
#: Callables run (without arguments) at every allocation from the pool.
alloc_hooks = []
#: The byte freed memory is filled with.
POISON = 0xDB

_local = threading.local()


def _read_back():
    """Count what CuPy 13 does to read a device array on the host (``get()``,
    ``asnumpy``, ``item()``, ``bool()``, ``int()``, ``float()``, ``__index__``,
    ``tolist()``, printing): a wait for the stream and a device-to-host copy."""
    counters["sync"] += 1
    counters["d2h"] += 1
    _drain()


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


#: The fake driver's asynchronous mode (the module notes).
_ASYNC = os.environ.get("FAKE_CUDA_ASYNC", "") not in ("", "0")


def _drain() -> None:
    """Wait for the fake driver's stream (in its asynchronous mode; nothing otherwise)."""
    if _ASYNC:
        lib = _driver()
        if lib is not None and lib.fake_cuda_drain() != 0:
            raise RuntimeError("fake CuPy: the fake driver's stream did not drain in 30 s")


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
        self.ptr = array._a.__array_interface__["data"][0] + offset
        self.device_id = array._device

    def __add__(self, offset):
        return _Memory(self._owner, self.ptr - self._owner._a.__array_interface__["data"][0] + int(offset))

    def copy_from_device_async(self, src, nbytes, stream=None):
        _drain()
        ctypes.memmove(self.ptr, src.ptr, nbytes)


_IMPLICIT = (
    "Implicit conversion to a NumPy array is not allowed. "
    "Please use `.get()` to construct a NumPy array explicitly."
)


def _unwrap(x, strict=True):
    """The NumPy array behind a fake CuPy array (in tuples, lists and dicts
    too); a NumPy array refused when ``strict``, as CuPy refuses to mix host
    and device arrays in one operation."""
    if isinstance(x, ndarray):
        return x._a
    if strict and isinstance(x, _np.ndarray):
        raise TypeError(f"Unsupported type {type(x)}")
    if isinstance(x, (tuple, list)):
        return type(x)(_unwrap(v, strict) for v in x)
    if isinstance(x, dict):
        return {k: _unwrap(v, strict) for k, v in x.items()}
    return x


def _wrap(x, device):
    """NumPy results as fake CuPy arrays (NumPy scalars as 0-d arrays, as CuPy
    gives them); anything else as is."""
    if isinstance(x, _np.ndarray):
        a = object.__new__(ndarray)
        a._a, a._device = x.view(_np.ndarray), device
        return a
    if isinstance(x, _np.generic):
        return _wrap(_np.asarray(x), device)
    if isinstance(x, tuple):
        return tuple(_wrap(v, device) for v in x)
    return x


class ndarray:
    """A "device" array: NumPy memory behind CuPy's interface.

    ``ndarray(shape, dtype)`` allocates, as CuPy does; ``ndarray(shape,
    dtype, memptr=a.data + k, strides=...)`` views the memory of the
    C-contiguous ``a`` from byte ``k`` on, at any offset (a misaligned view
    when ``k`` is not a multiple of the itemsize).

    As CuPy 13's arrays, it is not a NumPy array and refuses implicit
    conversion to one: ``numpy.asarray(a)`` raises TypeError
    (``__array__``), and so do NumPy functions and operators that mix it with
    NumPy arrays; ``get()``, ``cupy.asnumpy`` and ``tolist()`` copy to the
    host.  NumPy ufuncs and functions of fake CuPy arrays only give fake CuPy
    arrays (CuPy's ``__array_ufunc__`` and ``__array_function__``).
    """

    __slots__ = ("_a", "_device", "__weakref__")

    def __new__(cls, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is None:
            return _new(shape, dtype, order)
        owner = memptr._owner
        raw = owner._a.reshape(-1).view(_np.uint8)
        offset = memptr.ptr - raw.__array_interface__["data"][0]
        return _wrap(_np.ndarray(shape, dtype, buffer=raw, offset=offset, strides=strides), owner._device)

    # -- what CuPy has of its own
    @property
    def data(self):
        return _Memory(self)

    @property
    def device(self):
        return cuda.Device(self._device)

    def get(self, stream=None):
        # A synchronous copy into pageable memory, as CuPy's: a wait and a
        # device-to-host copy.
        _read_back()
        return _np.array(self._a, copy=True)

    def __array__(self, *args, **kwargs):
        raise TypeError(_IMPLICIT)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _drain()
        try:
            inputs, kwargs = _unwrap(inputs), _unwrap(kwargs)
        except TypeError:
            return NotImplemented
        return _wrap(getattr(ufunc, method)(*inputs, **kwargs), self._device)

    def __array_function__(self, func, types, args, kwargs):
        _drain()
        try:
            args, kwargs = _unwrap(args), _unwrap(kwargs)
        except TypeError:
            return NotImplemented
        return _wrap(func(*args, **kwargs), self._device)

    def __reduce__(self):
        _drain()
        return (_rebuild, (_np.array(self._a, copy=True), self._device))

    # -- NumPy's interface, on device arrays
    @property
    def __cuda_array_interface__(self):
        a = self._a
        return {"shape": a.shape, "typestr": a.dtype.str, "data": (self.data.ptr, False),
                "strides": None if a.flags.c_contiguous else a.strides, "version": 3}  # fmt: skip

    def __getattr__(self, name):
        if name.startswith("__"):  # NumPy's __array_interface__ and the like: not CuPy's
            raise AttributeError(name)
        _drain()
        value = getattr(self._a, name)
        if not callable(value):
            return _wrap(value, self._device)
        if name in ("item", "tolist", "tobytes"):  # CuPy copies to the host: a wait

            def read(*args, **kwargs):
                _read_back()
                return value(*args, **kwargs)

            return read

        def method(*args, **kwargs):
            _drain()
            return _wrap(value(*_unwrap(args, False), **_unwrap(kwargs, False)), self._device)

        return method

    def take(self, indices, axis=None, out=None):
        # CuPy 13's take checks nothing: an index out of range wraps around
        # (NumPy's mode="wrap" steps one length at a time: a modulo here).
        _drain()
        ind = _np.asarray(_unwrap(indices, False))
        n = self._a.size if axis is None else self._a.shape[axis]
        if n and ind.dtype.kind in "iu":
            ind = ind % n
        taken = self._a.take(ind, axis=axis)
        if out is None:
            return _wrap(taken, self._device)
        out._a[...] = taken
        return out

    def __getitem__(self, key):
        _drain()
        parts = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, ndarray) and k.dtype == _np.bool_ and k.ndim > 0 for k in parts):
            counters["sync"] += 1  # CuPy reads the count of a mask back
        return _wrap(self._a[_unwrap(key, False)], self._device)

    def __setitem__(self, key, value):
        _drain()
        self._a[_unwrap(key, False)] = _unwrap(value, False)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # -- what reads the values on the host: CuPy copies them back, a wait each
    def __repr__(self):
        _read_back()
        return repr(self._a).replace("array(", "fakecupy.array(", 1)

    def __str__(self):
        _read_back()
        return str(self._a)

    def __bool__(self):
        _read_back()
        return bool(self._a)

    def __int__(self):
        _read_back()
        return int(self._a)

    def __float__(self):
        _read_back()
        return float(self._a)

    def __complex__(self):
        _read_back()
        return complex(self._a)

    def __index__(self):
        _read_back()
        return self._a.__index__()

    def __hash__(self):
        raise TypeError("unhashable type: 'cupy.ndarray'")


def _operator(name):
    def op(self, *args):
        _drain()
        try:
            result = getattr(self._a, name)(*_unwrap(args))
        except TypeError:
            if any(isinstance(a, _np.ndarray) for a in args):
                raise TypeError(f"Unsupported type {[type(a) for a in args]}") from None
            raise
        if result is NotImplemented:
            return result
        return self if name.startswith("__i") and name != "__invert__" else _wrap(result, self._device)

    op.__name__ = name
    return op


for _name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
    "lshift", "rshift",
):  # fmt: skip
    for _form in ("__%s__", "__r%s__", "__i%s__"):
        setattr(ndarray, _form % _name, _operator(_form % _name))
for _name in ("__neg__", "__pos__", "__abs__", "__invert__", "__eq__", "__ne__", "__lt__", "__le__",
              "__gt__", "__ge__"):  # fmt: skip
    setattr(ndarray, _name, _operator(_name))


def _rebuild(host, device):
    out = _new(host.shape, host.dtype, device=device)
    out._a[...] = host
    return out


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
        _drain()  # a block freed behind queued work is reused after it
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
        _drain()  # released in stream order: the work queued on it runs first
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
            _drain()

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
            _drain()

    @staticmethod
    def get_elapsed_time(start, end):
        return (end.t - start.t) * 1e3


_host_funcs = []


def _check(nbytes):
    limit = int(os.environ.get("FAKE_CUPY_MAX_BYTES", "0") or 0)
    if limit and nbytes > limit:
        raise cuda.memory.OutOfMemoryError(f"fake out of memory allocating {nbytes} bytes")
    counters["alloc"] += 1


def _new(shape, dtype, order="C", device=None):
    """An uninitialised device array from the pool."""
    dtype = _np.dtype(dtype)
    shape = (shape,) if _np.isscalar(shape) else tuple(shape)
    count = int(_np.prod(shape, dtype=_np.int64))
    _check(count * dtype.itemsize)
    raw = _pool.malloc(count * dtype.itemsize)
    return _wrap(raw.view(dtype).reshape(shape, order=order), _current_device() if device is None else device)


def empty(shape, dtype=float, order="C"):
    a = _new(shape, dtype, order)
    # Garbage, so that code relying on zeroed memory fails (through a 1-d view:
    # NumPy cannot view a 0-d array as bytes).
    a._a.reshape(-1).view(_np.uint8)[...] = 0xA7
    return a


def zeros(shape, dtype=float, order="C"):
    a = _new(shape, dtype, order)
    a._a[...] = 0
    return a


def _made_on_device(host):
    """A device array with the values of ``host``, made by a kernel of the
    device (``full``, ``arange``, the result of a computation): no copy."""
    host = _np.asarray(host)
    out = _new(host.shape, host.dtype)
    out._a[...] = host
    return out


def asarray(a, dtype=None):
    """A device array of ``a``: itself when it is one of ``dtype``, else a copy
    (from the host for NumPy arrays and Python values: ``counters["h2d"]``)."""
    if isinstance(a, ndarray):
        if dtype is None or a.dtype == dtype:
            return a
        _drain()
        return _made_on_device(a._a.astype(dtype))
    counters["h2d"] += 1
    return _made_on_device(_np.asarray(a, dtype=dtype))


def array(a, dtype=None, copy=True):
    if isinstance(a, ndarray):
        _drain()
        if not copy and (dtype is None or a.dtype == dtype):
            return a
        return _made_on_device(_np.array(a._a, dtype=dtype, copy=True))
    return asarray(_np.array(_unwrap(a, False), dtype=dtype, copy=True))


def asnumpy(a):
    """A NumPy copy of a device array (its ``get()``, as CuPy's), anything
    else through numpy.asarray."""
    if isinstance(a, ndarray):
        return a.get()
    return _np.asarray(a)


def may_share_memory(a, b):
    return _np.may_share_memory(_unwrap(a), _unwrap(b))


def shares_memory(a, b):
    return _np.shares_memory(_unwrap(a), _unwrap(b))


def arange(*args, **kwargs):
    return _made_on_device(_np.arange(*args, **kwargs))


def full(shape, value, dtype=None):
    return _made_on_device(_np.full(shape, value, dtype=dtype))


def empty_like(a):
    return empty(a.shape, a.dtype)


def bincount(x, weights=None, minlength=0):
    _drain()
    return _made_on_device(_np.bincount(_unwrap(x), None if weights is None else _unwrap(weights), minlength))


def exp(a):
    _drain()
    return _made_on_device(_np.exp(_unwrap(a)))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    _drain()
    return _made_on_device(_np.allclose(_unwrap(a), _unwrap(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def get_default_memory_pool():
    return _pool


uint8 = _np.uint8


from cupy._routines import *  # noqa: E402,F401,F403 (the routines of the GPU table's entries)
