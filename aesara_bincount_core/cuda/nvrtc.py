"""NVRTC through ctypes: find the library, compile CUDA C++, cache the result.

Part of the stand-alone kernel layer: imports only the standard library (no
Aesara, no NumPy, no CuPy), so that it loads without a GPU and under any
NumPy.  NVRTC compiles without a GPU or a driver, which is how the
test-suite checks the kernels on machines without one.

Finding the library
-------------------
:func:`candidates` lists, in order: ``$AESARA_BINCOUNT_NVRTC`` (a path); the
libraries of the pip wheels ``nvidia-cuda-nvrtc-cu12``
(``nvidia/cuda_nvrtc/lib/libnvrtc.so.12``) and ``nvidia-cuda-nvrtc`` for CUDA
13 (``nvidia/cu13/lib/libnvrtc.so.13``); the plain names ``libnvrtc.so.12``,
``libnvrtc.so.13`` and ``libnvrtc.so`` (found through ``LD_LIBRARY_PATH`` and
the loader's cache); and the ``lib64`` folders of ``$CUDA_PATH``,
``$CUDA_HOME`` and ``/usr/local/cuda``.  :func:`load` takes the first that
loads and, when the driver version is given, is not newer than the driver:
code from an NVRTC of a newer CUDA major version does not load on an older
driver (``cuModuleLoadData`` fails), so such an NVRTC counts as missing, and
the error says so.

Caching
-------
:func:`compile_cached` keeps each image in memory and on disk, in the folder
of :func:`disk_cache.cache_dir` (``$AESARA_BINCOUNT_CACHE``, else
``~/.cache/aesara_bincount``).  The file name holds a SHA-256 of everything
that affects the output (source and header texts, options, target, NVRTC
version), then the size and digest of the image itself, so an entry that was
overwritten or cut short is found out, removed and compiled again (see
:mod:`.disk_cache`, which also writes atomically and never blocks on a
FIFO).  An image that the driver still refuses to load is removed with
:func:`discard` and compiled once more by its caller
(:func:`modules.device_module`).  Within a process a lock per image makes
other threads wait for the first compilation.
"""
import ctypes
import ctypes.util
import glob
import hashlib
import os
import sys
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from aesara_bincount_core.cuda import disk_cache

__all__ = [
    "NvrtcError",
    "Nvrtc",
    "CompiledImage",
    "candidates",
    "load",
    "cache_dir",
    "compile_cached",
    "discard",
]


class NvrtcError(RuntimeError):
    """NVRTC is missing, or a compilation failed (the log is in the message)."""


@dataclass(frozen=True)
class CompiledImage:
    """What NVRTC produced for one device architecture.

    Attributes
    ----------
    data : bytes
        A CUBIN (``kind == "cubin"``), or NUL-terminated PTX text that the
        driver compiles when the module is loaded (``kind == "ptx"``).
    kind : str
    target : str
        The ``-arch`` value used, e.g. ``"sm_90"`` or ``"compute_86"``.
    log : str
        NVRTC's log (warnings), usually empty; kept in the cache beside the
        image, so an image read from the cache still has it.
    path : str or None
        The cache file the image was read from or written to (None when the
        cache folder is not writable).
    """

    data: bytes
    kind: str
    target: str
    log: str
    path: Optional[str] = None


def _wheel_dirs() -> List[str]:
    """The folders of the ``nvidia`` namespace package (pip wheels), if any."""
    dirs = []
    for entry in sys.path:
        d = os.path.join(entry or ".", "nvidia")
        if os.path.isdir(d):
            dirs.append(d)
    return dirs


def candidates() -> List[str]:
    """Library paths or names to try for NVRTC, in order of preference."""
    found: List[str] = []
    explicit = os.environ.get("AESARA_BINCOUNT_NVRTC")
    if explicit:
        found.append(explicit)
    for d in _wheel_dirs():
        found += [
            os.path.join(d, "cuda_nvrtc", "lib", "libnvrtc.so.12"),
            os.path.join(d, "cu13", "lib", "libnvrtc.so.13"),
            os.path.join(d, "cu12", "lib", "libnvrtc.so.12"),
        ]
    found += ["libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so"]
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    for root in filter(None, roots):
        found += sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")))
    unique = []
    for c in found:
        if ("/" not in c or os.path.exists(c)) and c not in unique:
            unique.append(c)
    return unique


_c_char_pp = ctypes.POINTER(ctypes.c_char_p)


class Nvrtc:
    """One loaded NVRTC library.

    Parameters
    ----------
    path : str
        A path or a library name for :func:`ctypes.CDLL`.

    Raises
    ------
    OSError
        The library does not load.
    """

    def __init__(self, path: str):
        self.path = path
        lib = ctypes.CDLL(path)
        self._lib = lib
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        self.version: Tuple[int, int] = (major.value, minor.value)
        self._preload_builtins()

    def _preload_builtins(self) -> None:
        # NVRTC opens libnvrtc-builtins.so.MAJOR.MINOR at its first compile,
        # found through its own RUNPATH.  A dlopen reached another way loses
        # that (AddressSanitizer's dlopen interceptor does, for one), so the
        # library beside this one is loaded here, by path: NVRTC's own
        # dlopen then finds it already loaded.
        folder = os.path.dirname(self.path)
        if not folder:
            return
        builtins = os.path.join(folder, "libnvrtc-builtins.so.%d.%d" % self.version)
        if os.path.exists(builtins):
            try:
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass  # NVRTC will report it, with its own message, if it matters

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            text = self._lib.nvrtcGetErrorString(status)
            raise NvrtcError(f"{what} failed: {text.decode() if text else status}")

    def supported_archs(self) -> List[int]:
        """Compute capabilities (e.g. 90 for sm_90) this NVRTC compiles CUBIN for."""
        lib = self._lib
        if not hasattr(lib, "nvrtcGetNumSupportedArchs"):
            return []
        count = ctypes.c_int()
        self._check(lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
        archs = (ctypes.c_int * count.value)()
        self._check(lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
        return list(archs)

    def target(self, cc: int) -> Tuple[str, str]:
        """The ``-arch`` value and output kind for compute capability ``cc``.

        CUBIN for the device's own architecture when this NVRTC knows it,
        else PTX for the newest older architecture it knows (the driver
        compiles the PTX for the device).
        """
        archs = self.supported_archs()
        if not archs or cc in archs:
            return f"sm_{cc}", "cubin"
        older = [a for a in archs if a <= cc]
        if not older:
            raise NvrtcError(
                f"NVRTC {self.version[0]}.{self.version[1]} ({self.path}) cannot compile for "
                f"compute capability {cc // 10}.{cc % 10}; it knows {archs}"
            )
        return f"compute_{max(older)}", "ptx"

    def compile(
        self,
        source: str,
        name: str,
        options: Sequence[str] = (),
        headers: Optional[Dict[str, str]] = None,
        kind: str = "cubin",
    ) -> Tuple[bytes, str]:
        """Compile ``source``; return ``(image, log)``.

        ``headers`` maps include names to their text, so nothing is read from
        disk.  ``kind`` is ``"cubin"`` (options must name an ``sm_XX``
        architecture) or ``"ptx"``.

        Raises
        ------
        NvrtcError
            When compilation fails; the message holds NVRTC's log.
        """
        lib = self._lib
        headers = headers or {}
        prog = ctypes.c_void_p()
        names = (ctypes.c_char_p * max(1, len(headers)))(*[h.encode() for h in headers])
        texts = (ctypes.c_char_p * max(1, len(headers)))(*[t.encode() for t in headers.values()])
        self._check(
            lib.nvrtcCreateProgram(
                ctypes.byref(prog), source.encode(), name.encode(), len(headers), texts, names
            ),
            "nvrtcCreateProgram",
        )
        try:
            opts = (ctypes.c_char_p * max(1, len(options)))(*[o.encode() for o in options])
            status = lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ctypes.c_size_t()
            self._check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
            buf = ctypes.create_string_buffer(size.value)
            self._check(lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            log = buf.value.decode(errors="replace").strip()
            if status != 0:
                raise NvrtcError(
                    f"NVRTC {self.version[0]}.{self.version[1]} could not compile {name} with "
                    f"{' '.join(options)}:\n{log}"
                )
            get_size, get = (
                (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
                if kind == "cubin"
                else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
            )
            self._check(get_size(prog, ctypes.byref(size)), f"nvrtcGet{kind.upper()}Size")
            image = ctypes.create_string_buffer(size.value)
            self._check(get(prog, image), f"nvrtcGet{kind.upper()}")
            return image.raw, log
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


_loaded: Dict[Optional[int], Nvrtc] = {}
_load_lock = threading.Lock()


def load(driver_version: Optional[int] = None) -> Nvrtc:
    """The NVRTC library to use, loaded once per process.

    Parameters
    ----------
    driver_version : int, optional
        The driver's CUDA version as ``cuDriverGetVersion`` gives it (e.g.
        12080 for 12.8).  Libraries whose major version is newer are skipped.

    Raises
    ------
    NvrtcError
        No NVRTC library loads, or (with ``driver_version``) every one that
        loads is newer than the driver; the message lists what was tried.
    """
    with _load_lock:
        if driver_version in _loaded:
            return _loaded[driver_version]
        tried, usable = [], []
        for path in candidates():
            try:
                lib = Nvrtc(path)
            except (OSError, AttributeError, NvrtcError) as exc:
                tried.append(f"{path}: {exc}")
                continue
            usable.append(lib)
            if driver_version is None or lib.version[0] <= driver_version // 1000:
                break
        if not usable:
            raise NvrtcError(
                "aesara_bincount: NVRTC (libnvrtc.so.12 or .13) was not found; install it with "
                "`pip install nvidia-cuda-nvrtc-cu12` (part of `pip install "
                "aesara-bincount[cuda12]`) or set AESARA_BINCOUNT_NVRTC to its path. Tried: "
                + "; ".join(tried)
            )
        compatible = [
            lib
            for lib in usable
            if driver_version is None or lib.version[0] <= driver_version // 1000
        ]
        if not compatible:
            found = ", ".join(f"{lib.version[0]}.{lib.version[1]} ({lib.path})" for lib in usable)
            raise NvrtcError(
                f"aesara_bincount: every NVRTC found ({found}) is newer than the CUDA driver "
                f"(CUDA {driver_version // 1000}.{driver_version % 1000 // 10}); the kernels it "
                "compiles would not load. Install the NVRTC of the driver's CUDA major version "
                "(`pip install nvidia-cuda-nvrtc-cu12` for a CUDA 12 driver) or set "
                "AESARA_BINCOUNT_NVRTC to it, or update the driver"
            )
        chosen = compatible[0]
        _loaded[driver_version] = chosen
        return chosen


def cache_dir() -> str:
    """The folder of the on-disk cache of compiled images (:func:`disk_cache.cache_dir`)."""
    return disk_cache.cache_dir()


_memory: Dict[str, CompiledImage] = {}
_key_locks: Dict[str, threading.Lock] = {}
_keys_lock = threading.Lock()


def discard(image: CompiledImage) -> None:
    """Forget ``image``: drop it from the memory cache and remove its file,
    so that the next :func:`compile_cached` of its key compiles again."""
    with _keys_lock:
        for key in [k for k, v in _memory.items() if v is image]:
            del _memory[key]
    if image.path:
        disk_cache.remove(image.path)


def compile_cached(
    source: str,
    name: str,
    cc: int,
    options: Sequence[str] = (),
    headers: Optional[Dict[str, str]] = None,
    nvrtc: Optional[Nvrtc] = None,
    refresh: bool = False,
) -> CompiledImage:
    """Compile ``source`` for compute capability ``cc`` (e.g. 90), with caching.

    Parameters
    ----------
    source, name : str
        The CUDA C++ text and a file name for messages.
    cc : int
        Compute capability as ``10 * major + minor``.
    options : sequence of str
        NVRTC options other than ``-arch``.
    headers : dict of str to str, optional
        Include name -> text.
    nvrtc : Nvrtc, optional
        The library; :func:`load` by default.
    refresh : bool
        Compile even when the image is cached (in memory or on disk), and
        replace the cached one: for an image the driver refused.

    Returns
    -------
    CompiledImage

    Raises
    ------
    NvrtcError
        NVRTC is missing or the compilation failed.
    """
    nvrtc = nvrtc or load()
    arch, kind = nvrtc.target(cc)
    full_options = [f"-arch={arch}", *options]
    h = hashlib.sha256()
    for part in (source, name, "\0".join(full_options), "%d.%d" % nvrtc.version, kind):
        h.update(part.encode())
        h.update(b"\0")
    for inc, text in sorted((headers or {}).items()):
        h.update(inc.encode() + b"\0" + text.encode() + b"\0")
    key = h.hexdigest()[:40]
    with _keys_lock:
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        if key in _memory and not refresh:
            return _memory[key]
        stem = f"{os.path.splitext(os.path.basename(name))[0]}-{arch}-{key}"
        folder = cache_dir()
        found = None if refresh else disk_cache.find(folder, stem, "." + kind)
        if found is not None:
            path, data = found
            logged = disk_cache.find(folder, stem, ".log")
            log = logged[1].decode(errors="replace") if logged else ""
        else:
            data, log = nvrtc.compile(source, name, full_options, headers, kind)
            disk_cache.store(folder, stem, log.encode(), ".log")
            path = disk_cache.store(folder, stem, data, "." + kind)
        image = CompiledImage(data=data, kind=kind, target=arch, log=log, path=path)
        _memory[key] = image
        return image
