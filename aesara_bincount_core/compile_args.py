"""Extra compiler arguments for the C modules of the Ops: the one place that chooses them.

:meth:`aesara_bincount_core.c_file_op.CFileOp.c_compile_args` adds what
:func:`extra_compile_args` returns to the arguments of every Op whose C code
lives in ``c_code/`` (the CPU and the GPU Ops alike).  Aesara's compile
cache keys a module by its compile arguments too, so a change here
compiles the modules again.  Imports nothing from the package.
"""
from typing import List

__all__ = ["extra_compile_args"]


def extra_compile_args() -> List[str]:
    """Compiler arguments added to those of every C-file Op.

    Returns
    -------
    list of str
        Empty for now; the same list on every call in a process.
    """
    return []
