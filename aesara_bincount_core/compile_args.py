"""Extra compiler arguments for the C code of the Ops: the one place that chooses them.

Every Op whose C code lives in ``c_code/`` (``Bincount``, ``ScatterAdd`` and
the GPU Ops' host code) adds :func:`extra_compile_args` to its
``c_compile_args``, and the kernel layer's ctypes library
(:mod:`aesara_bincount_core.cuda.launcher`) is built with it too.  Aesara's
own modules never get these arguments: they are per Op, and Aesara's default
linker compiles a module per node.  Aesara's compile cache keys a module by
its compile arguments, so a change here compiles the modules again.

With ``AESARA_BINCOUNT_SANITIZE=1`` in the environment the arguments build
our C code under AddressSanitizer and UndefinedBehaviorSanitizer
(:data:`SANITIZE_FLAGS`).  Such a module loads only into a process whose
ASan runtime was preloaded (``LD_PRELOAD``; Python is not built with it):
``make sanitize`` and ``tests/sanitizer.py`` set up that process.

Imports nothing from the package (the kernel layer imports it).
"""
import os
from typing import List

__all__ = ["SANITIZE_FLAGS", "extra_compile_args", "sanitize_requested"]

#: The sanitizer arguments: ASan and UBSan, a UBSan report stops the call
#: (no recovery), frame pointers for readable stacks, and -O1 (after the
#: compiler's -O3, so it wins), as the sanitizers' documentation advises: the
#: checks stay, the compiles of a sanitized run take about half the time.
SANITIZE_FLAGS = (
    "-O1",
    "-fsanitize=address",
    "-fsanitize=undefined",
    "-fno-sanitize-recover=undefined",
    "-fno-omit-frame-pointer",
)


def sanitize_requested() -> bool:
    """Whether ``AESARA_BINCOUNT_SANITIZE`` asks for the sanitizers (set and not ``0``)."""
    return os.environ.get("AESARA_BINCOUNT_SANITIZE", "") not in ("", "0")


def extra_compile_args() -> List[str]:
    """Compiler arguments added to those of our C code.

    Returns
    -------
    list of str
        :data:`SANITIZE_FLAGS` when :func:`sanitize_requested`, else empty.

    Raises
    ------
    RuntimeError
        The sanitizers are asked for but the ASan runtime is not preloaded
        (no ``libasan`` in ``LD_PRELOAD``): a sanitized module would then
        stop the process when loaded, so the compile stops here instead.
    """
    if not sanitize_requested():
        return []
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        raise RuntimeError(
            "AESARA_BINCOUNT_SANITIZE=1 builds the C code under AddressSanitizer, which "
            "loads only with its runtime preloaded (LD_PRELOAD=$(g++ -print-file-name="
            "libasan.so)); run `make sanitize` or tests/sanitizer.py, which set it"
        )
    return list(SANITIZE_FLAGS)
