"""Where the C and CUDA sources live, and what is read from them.

The sources sit in ``c_code/`` at the repository root.  A wheel ships them as
``aesara_bincount_core/c_code/`` (see ``setup.py``); a source checkout or an
editable install finds them beside the package.  This module is the only
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
        if os.path.isfile(os.path.join(candidate, "bincount_common.h")):
            return candidate
    raise FileNotFoundError(
        "aesara_bincount: the C sources (c_code/bincount_common.h) are missing; "
        "reinstall the package"
    )


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
    """The error messages of ``bincount_common.h`` as Python ``%`` formats.

    The C code and the Python reference implementation raise the same text:
    ``%lld`` and ``%llu`` become ``%d``.
    """
    text = read_source("bincount_common.h")
    return {
        name: fmt.replace("%lld", "%d").replace("%llu", "%d")
        for name, fmt in _MSG_RE.findall(text)
    }
