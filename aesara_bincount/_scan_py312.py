"""Aesara 2.9's compiled ``Scan`` loop on Python 3.12: the Python loop instead.

Aesara 2.9.4 ships its ``Scan`` inner loop as C code that Cython generated
for the C API of Python 3.11 and older (``aesara/scan/c_code/scan_perform.c``);
it reads ``PyThreadState.curexc_traceback`` and ``PyLongObject.ob_digit``,
which Python 3.12 removed, so g++ refuses it and every ``aesara.function``
with a ``scan`` raises ``CompileError`` when it is compiled (found by the GPU
check's dry run on Python 3.12, the GPU machine's Python, on the RNN row of
``benchmarks/bench_gpu_loop.py``).  ``Scan.make_thunk`` runs its Python
loop (``Scan.perform``, the same results) when the import of that C code
raises ``ImportError``; :func:`use_python_scan_loop` makes it so on Python
3.12 and newer, by marking the module as not importable
(``sys.modules[name] = None``).  On Python 3.11 and older nothing changes.
"""
import sys

#: The module of Aesara that compiles the C loop of ``Scan``.
SCAN_C_MODULE = "aesara.scan.scan_perform_ext"


def use_python_scan_loop() -> bool:
    """On Python 3.12 and newer, have ``Scan`` run its Python loop; whether it did.

    Returns
    -------
    bool
        True when the C loop is now refused (Python 3.12+, the module not
        imported before); False otherwise (nothing changed).

    Notes
    -----
    No error is raised.  A process that imported the C loop before this
    package keeps it (on 3.12 that import would already have failed).
    """
    if sys.version_info < (3, 12) or sys.modules.get(SCAN_C_MODULE) is not None:
        return False
    sys.modules[SCAN_C_MODULE] = None
    return True
