"""Where the C and CUDA sources live, and what is read from them.

The sources sit in ``c_code/`` at the repository root, in one folder for
each place the code runs: ``cpu/`` (the CPU Ops), ``cuda/`` (the CUDA
kernels and what they share with the host), ``cuda_host/`` (the GPU Ops'
host code, the launchers and the driver) and ``common/`` (what the CPU Ops
and the GPU Ops' host code share).  A source is named by its path relative
to ``c_code/`` (``"cpu/bincount.c"``), in Python as in ``#include`` lines,
which the compilers resolve with ``-I c_code``.  A wheel ships the folder as
``aesara_bincount_core/c_code/`` (see ``setup.py``); a source checkout or
an editable install finds it beside the package.  This module is the only
place that knows that.
"""
import hashlib
import os
import re
from functools import lru_cache
from typing import Dict, Iterable, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))


@lru_cache(maxsize=None)
def c_code_dir() -> str:
    """Absolute path of the folder holding the ``.c``, ``.h`` and ``.cu`` files.

    Raises
    ------
    FileNotFoundError
        If neither the installed nor the source-tree location exists.
    """
    for candidate in (
        os.path.join(_HERE, "c_code"),
        os.path.join(os.path.dirname(_HERE), "c_code"),
    ):
        if os.path.isfile(os.path.join(candidate, "common/host_helpers.h")):
            return candidate
    raise FileNotFoundError(
        "aesara_bincount: the C sources (c_code/common/host_helpers.h) are missing; "
        "reinstall the package"
    )


#: The subfolders of :func:`c_code_dir`, by where their code runs.
FOLDERS = ("common", "cpu", "cuda", "cuda_host")
#: The suffixes of source files.
SUFFIXES = (".c", ".h", ".cu", ".cuh")


def source_files(suffixes: Tuple[str, ...] = SUFFIXES) -> Tuple[str, ...]:
    """Every source file of :func:`c_code_dir` with one of ``suffixes``, as
    sorted paths relative to it (``"cuda/bincount_kernels.cu"``)."""
    root = c_code_dir()
    found = []
    for folder, _, names in os.walk(root):
        rel = os.path.relpath(folder, root)
        found += [os.path.normpath(os.path.join(rel, n)) for n in names if n.endswith(suffixes)]
    return tuple(sorted(found))


def c_code_path(name: str) -> str:
    """Absolute path of the source file ``name`` in :func:`c_code_dir`."""
    return os.path.join(c_code_dir(), name)


def read_source(name: str) -> str:
    """Text of the source file ``name``."""
    with open(c_code_path(name), encoding="utf-8") as f:
        return f.read()


def sources_hash(names: Iterable[str]) -> str:
    """SHA-256 over the names and texts of the given source files.

    Op cache versions include it, so any edit of a C, CUDA or header file
    recompiles the Ops that use it.
    """
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode())
        h.update(b"\0")
        h.update(read_source(name).encode())
        h.update(b"\0")
    return h.hexdigest()


_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def included_closure(names: Iterable[str]) -> Tuple[str, ...]:
    """``names`` and every file of :func:`c_code_dir` they include, directly or not.

    Follows ``#include "..."`` lines (system headers, in ``<...>``, and
    quoted names that are not in the folder are left out).  The result keeps
    ``names`` first, in their order, then the included files in the order
    they are found; each name appears once.  An Op's cache version hashes
    this list, so a header that a C file starts to include is covered
    without being listed anywhere.
    """
    order = list(dict.fromkeys(names))
    k = 0
    while k < len(order):  # breadth first: order grows while it is read
        for inc in _INCLUDE_RE.findall(read_source(order[k])):
            if inc not in order and os.path.isfile(c_code_path(inc)):
                order.append(inc)
        k += 1
    return tuple(order)


_MSG_RE = re.compile(r'^#define (BC_MSG_[A-Z_]+) "(.*)"$', re.MULTILINE)


@lru_cache(maxsize=None)
def messages() -> Dict[str, str]:
    """The error messages of ``common/host_helpers.h`` as Python ``%`` formats.

    The C code and the Python reference implementation raise the same text:
    ``%lld`` and ``%llu`` become ``%d``.
    """
    text = read_source("common/host_helpers.h")
    return {
        name: fmt.replace("%lld", "%d").replace("%llu", "%d")
        for name, fmt in _MSG_RE.findall(text)
    }
