"""The few CUDA driver API calls the kernel layer makes from Python, through ctypes.

Part of the stand-alone kernel layer (standard library only).  The driver
library is ``$AESARA_BINCOUNT_LIBCUDA`` if set, else ``libcuda.so.1``; it is
loaded on first use, never at import.  Arrays, streams and memory come from
CuPy; this module loads modules, finds kernels and sizes their launches with
the occupancy calculator.  The launches themselves are made by the C launcher
(``c_code/cuda_host/bincount_launch.h``), which loads the same library.
"""
import ctypes
import os
import threading
from typing import Optional

__all__ = ["CudaDriverError", "Driver", "driver", "library_name"]

# Values from the CUDA driver API (cuda.h); the test-suite compares them with
# cuda.h when the CUDA toolkit is installed.
CUDA_ERROR_OUT_OF_MEMORY = 2
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class CudaDriverError(RuntimeError):
    """A CUDA driver API call failed, or the driver library is missing.

    Attributes
    ----------
    code : int or None
        The ``CUresult``, or None when the library could not be loaded.
    """

    def __init__(self, message: str, code: Optional[int] = None):
        super().__init__(message)
        self.code = code


def library_name() -> str:
    """The driver library this process loads."""
    return os.environ.get("AESARA_BINCOUNT_LIBCUDA") or "libcuda.so.1"


class Driver:
    """A loaded CUDA driver library.

    Raises
    ------
    CudaDriverError
        The library does not load, or ``cuInit`` fails (no device, driver
        too old, ...); the message names the cause.
    """

    def __init__(self, path: Optional[str] = None):
        self.path = path or library_name()
        try:
            self._lib = ctypes.CDLL(self.path)
        except OSError as exc:
            raise CudaDriverError(
                f"the CUDA driver library {self.path} could not be loaded ({exc}); "
                "is an NVIDIA driver installed?"
            ) from exc
        lib = self._lib
        lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuOccupancyMaxActiveBlocksPerMultiprocessor.argtypes = [
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_size_t,
        ]
        lib.cuModuleGetFunction.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_void_p,
            ctypes.c_char_p,
        ]
        lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        lib.cuDeviceTotalMem_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
        lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_void_p,
        ]
        self._check(lib.cuInit(0), "cuInit")
        version = ctypes.c_int()
        self._check(lib.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
        #: The driver's CUDA version, e.g. 13000 for 13.0.
        self.version = version.value

    def error_text(self, code: int) -> str:
        """``NAME: description`` of a ``CUresult``."""
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self._lib.cuGetErrorName(code, ctypes.byref(name))
        self._lib.cuGetErrorString(code, ctypes.byref(text))
        return "%s: %s" % (
            (name.value or b"CUDA_ERROR_%d" % code).decode(),
            (text.value or b"unknown error").decode(),
        )

    def _check(self, code: int, what: str) -> None:
        if code == 0:
            return
        message = f"{what} failed with {self.error_text(code)}"
        if code == CUDA_ERROR_OUT_OF_MEMORY:
            raise MemoryError(message)
        raise CudaDriverError(message, code)

    def current_context(self) -> int:
        """The calling thread's current context (0 when none)."""
        ctx = ctypes.c_void_p()
        self._check(self._lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        return ctx.value or 0

    def context_key(self, ctx: int) -> int:
        """The key of context ``ctx`` in the kernel tables (0 for none).

        Its unique ID (``cuCtxGetId``, CUDA 12.0 and later: no later context
        reuses it) with the top bit set, or, when the driver lacks the
        function or refuses, the ``CUcontext`` pointer itself, which a
        context created after another was destroyed may reuse.  The host C
        code's ``bc_cuda_context_key`` (``c_code/cuda_host/driver.h``)
        gives the same key.
        """
        if not ctx:
            return 0
        get_id = getattr(self._lib, "cuCtxGetId", None)
        if get_id is not None:
            value = ctypes.c_ulonglong()
            if get_id(ctypes.c_void_p(ctx), ctypes.byref(value)) == 0:
                return value.value | (1 << 63)
        return ctx

    def current_device(self) -> int:
        """The device of the current context."""
        dev = ctypes.c_int()
        self._check(self._lib.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
        return dev.value

    def attribute(self, attribute: int, device: int) -> int:
        """``cuDeviceGetAttribute``."""
        value = ctypes.c_int()
        self._check(
            self._lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, device),
            "cuDeviceGetAttribute",
        )
        return value.value

    def total_memory(self, device: int) -> int:
        """Bytes of memory of ``device``."""
        value = ctypes.c_size_t()
        self._check(self._lib.cuDeviceTotalMem_v2(ctypes.byref(value), device), "cuDeviceTotalMem")
        return value.value

    def load_module(self, image: bytes) -> int:
        """``cuModuleLoadData`` in the current context; returns the handle."""
        module = ctypes.c_void_p()
        self._check(self._lib.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
        return module.value

    def get_function(self, module: int, name: str) -> int:
        """``cuModuleGetFunction``."""
        func = ctypes.c_void_p()
        self._check(
            self._lib.cuModuleGetFunction(ctypes.byref(func), module, name.encode()),
            f"cuModuleGetFunction({name})",
        )
        return func.value

    def set_function_attribute(self, func: int, attribute: int, value: int) -> None:
        """``cuFuncSetAttribute``."""
        self._check(self._lib.cuFuncSetAttribute(func, attribute, value), "cuFuncSetAttribute")

    def launch(self, func: int, blocks: int, threads: int, stream: int, params: ctypes.Structure) -> None:
        """``cuLaunchKernel`` of a kernel that takes one struct by value, on
        ``stream``, with no dynamic shared memory; it does not wait.  The
        launchers of the bincount and the rows are in C
        (``c_code/cuda_host/bincount_launch.h``); this one is for the generated
        elementwise kernels (:mod:`aesara_bincount_core.gpu.elemwise`)."""
        self.launch_args(func, blocks, threads, stream, (ctypes.c_void_p * 1)(ctypes.addressof(params)))

    def launch_args(self, func: int, blocks: int, threads: int, stream: int, args) -> None:
        """:meth:`launch` with the kernel's argument pointers already built
        (``args``: a ctypes array of ``void *``, each pointing at a parameter)."""
        self._check(
            self._lib.cuLaunchKernel(func, blocks, 1, 1, threads, 1, 1, 0, stream, args, None),
            "cuLaunchKernel",
        )

    def max_active_blocks(self, func: int, threads: int, shared_bytes: int) -> int:
        """``cuOccupancyMaxActiveBlocksPerMultiprocessor``: blocks of ``func`` that
        run at once on one multiprocessor with ``threads`` threads and
        ``shared_bytes`` of dynamic shared memory each."""
        value = ctypes.c_int()
        self._check(
            self._lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(value), func, threads, shared_bytes
            ),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )
        return value.value

    def available_shared(self, func: int, blocks: int, threads: int) -> Optional[int]:
        """``cuOccupancyAvailableDynamicSMemPerBlock``: the most dynamic shared
        memory a block of ``func`` may use for ``blocks`` of them to run at once
        on a multiprocessor (what the driver reserves per block accounted for);
        None when the driver lacks the call (before CUDA 11)."""
        fn = getattr(self._lib, "cuOccupancyAvailableDynamicSMemPerBlock", None)
        if fn is None:
            return None
        fn.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        value = ctypes.c_size_t()
        self._check(fn(ctypes.byref(value), func, blocks, threads), "cuOccupancyAvailableDynamicSMemPerBlock")
        return value.value


_driver: Optional[Driver] = None
_driver_lock = threading.Lock()


def driver() -> Driver:
    """The process's :class:`Driver`, loaded on first use.

    Raises
    ------
    CudaDriverError
        As :class:`Driver`; the failure is not cached, so a later call retries.
    """
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = Driver()
        return _driver
