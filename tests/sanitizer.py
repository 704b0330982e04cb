"""Run pytest with our C code built under AddressSanitizer and UndefinedBehaviorSanitizer.

The one place that sets up a sanitized run: ``make sanitize`` runs the
test-suite through :func:`main`, and ``tests/test_sanitize.py`` (in ``make
test``) runs a small selection through :func:`run`.  Usage, from the
repository root::

    .venv/bin/python tests/sanitizer.py [pytest arguments]

What it does:

- ``AESARA_BINCOUNT_SANITIZE=1``: our Ops (``Bincount``, ``ScatterAdd``, the
  GPU Ops' host code) and the kernel layer's ctypes library are compiled
  with :data:`aesara_bincount_core.compile_args.SANITIZE_FLAGS`; Aesara's own
  modules compile as usual (their integer wrap-around, numpy's semantics,
  is undefined behaviour in C, and is not ours to report).  Everything goes
  to a compile directory of its own (:data:`COMPILEDIR`), apart from the
  normal modules.
- Python is not built with ASan, so the runtime is preloaded (``LD_PRELOAD``),
  followed by ``libstdc++``: loaded before ASan starts, its ``__cxa_throw``
  is found by ASan's interceptor, so a C++ exception (matplotlib's, the
  emulated GPU's) no longer aborts the process with ``CHECK failed:
  asan_interceptors.cpp ... real___cxa_throw``.
- A report stops the process (``halt_on_error``) and is written to a log
  file in the log directory (pytest captures only Python-level output);
  any log file there fails the run, and its text is printed.  Leak
  detection is off (Python keeps its allocations at exit;
  ``tests/test_leaks.py`` covers leaks).
- Without ``-m`` in the arguments, the selection is :data:`DEFAULT_MARKS`:
  not the slow tests (64-bit sizes, minutes each), nor Aesara's own suite,
  nor the ``gpu`` tests (which need a GPU or the emulation).
  ``tests/test_leaks.py`` is left out: it measures the process's memory,
  which ASan's shadow and quarantine change.
"""
import glob
import os
import shutil
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The Aesara compile directory of sanitized runs.
COMPILEDIR = os.path.join(ROOT, ".cache", "aesara-sanitize")
#: Where the sanitizers write their reports, by default.
LOG_DIR = os.path.join(ROOT, ".cache", "sanitize-logs")
DEFAULT_MARKS = "not slow and not aesara_suite and not gpu"
DEFAULT_IGNORE = ("tests/test_leaks.py",)


def runtime(cxx: Optional[str] = None) -> Optional[List[str]]:
    """The libraries to preload: ASan's runtime, then libstdc++ (None without a runtime)."""
    cxx = cxx or os.environ.get("SAN_CXX", "g++")
    if shutil.which(cxx) is None:
        return None
    libs = []
    for name in ("libasan.so", "libstdc++.so.6"):
        path = subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        if not os.path.isabs(path) or not os.path.exists(path):
            return None if name == "libasan.so" else libs
        libs.append(os.path.realpath(path))
    return libs


def environment(log_dir: str, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment of a sanitized process, from ``base`` (default ``os.environ``).

    Raises
    ------
    RuntimeError
        No ASan runtime (gcc's libasan; Debian/Ubuntu: libasan8, libubsan1).
    """
    libs = runtime()
    if not libs:
        raise RuntimeError(
            "a sanitized run needs the AddressSanitizer runtime of g++ (libasan; "
            "Debian/Ubuntu: apt-get install libasan8 libubsan1)"
        )
    env = dict(os.environ if base is None else base)
    flags = [f for f in env.get("AESARA_FLAGS", "").split(",") if f and not f.startswith("compiledir=")]
    if not any(f.startswith("blas__ldflags") for f in flags):
        flags.append("blas__ldflags=")
    env["AESARA_FLAGS"] = ",".join([*flags, f"compiledir={COMPILEDIR}"])
    env["AESARA_BINCOUNT_SANITIZE"] = "1"
    env["ASAN_OPTIONS"] = ":".join(
        o for o in ("detect_leaks=0:halt_on_error=1:allocator_may_return_null=1",
                    f"log_path={os.path.join(log_dir, 'asan')}", env.get("ASAN_OPTIONS", "")) if o
    )  # fmt: skip
    env["UBSAN_OPTIONS"] = ":".join(
        o for o in ("print_stacktrace=1:halt_on_error=1",
                    f"log_path={os.path.join(log_dir, 'ubsan')}", env.get("UBSAN_OPTIONS", "")) if o
    )  # fmt: skip
    rest = [lib for lib in env.get("LD_PRELOAD", "").split() if os.path.realpath(lib) not in libs]
    env["LD_PRELOAD"] = " ".join([*libs, *rest])
    return env


def reports(log_dir: str) -> List[str]:
    """The texts of the reports in ``log_dir``, one per file."""
    out = []
    for path in sorted(glob.glob(os.path.join(log_dir, "*"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            out.append(f"--- {os.path.basename(path)}\n{f.read()}")
    return out


def pytest_command(args: Sequence[str]) -> List[str]:
    """The pytest command line of a sanitized run of ``args``."""
    marks = [] if "-m" in args else ["-m", DEFAULT_MARKS]
    ignore = [f"--ignore={p}" for p in DEFAULT_IGNORE]
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--capture=sys", *marks, *ignore, *args]


def run(args: Sequence[str], log_dir: str, env: Optional[Dict[str, str]] = None, **kwargs):
    """Run pytest on ``args`` under the sanitizers, from the repository root.

    ``log_dir`` is emptied first.  ``env`` is the base environment (another
    layer, such as the GPU emulation's, goes there); ``kwargs`` go to
    :func:`subprocess.run`.  Returns the completed process; see
    :func:`reports` for what the sanitizers found.
    """
    shutil.rmtree(log_dir, ignore_errors=True)
    os.makedirs(log_dir)
    return subprocess.run(pytest_command(args), cwd=ROOT, env=environment(log_dir, env), **kwargs)


def main(argv: Sequence[str]) -> int:
    try:
        env = environment(LOG_DIR)
    except RuntimeError as exc:
        print(f"sanitize: {exc}", file=sys.stderr)
        return 1
    print(f"sanitize: LD_PRELOAD={env['LD_PRELOAD']}, compiledir {COMPILEDIR}, reports in {LOG_DIR}", flush=True)
    status = run(argv, LOG_DIR).returncode
    found = reports(LOG_DIR)
    if found:
        print("=== sanitizer reports ===\n" + "\n".join(found))
        status = status or 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
