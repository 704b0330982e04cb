"""The small sanitized run of ``make test``: our C code under ASan and UBSan, at a small size.

``make sanitize`` runs the whole suite under the sanitizers and takes tens
of minutes, so nothing would run it often; these two tests run, through
``tests/sanitizer.py``, the cases of ``tests/test_c_paths.py`` (each C path
of ``Bincount`` and ``ScatterAdd``, each error) on the CPU, and their GPU
variants plus a few calls of the kernel layer's ctypes library on the CPU
emulation of the GPU (the GPU Ops' host C code, ``cuda_host/kernel_layer_lib.c``).
A sanitizer report fails the test, with its text.  Under ``make sanitize``
(already sanitized, with ``tests/test_c_paths.py`` in its selection) the CPU
test is skipped; the emulated one runs there too, as the whole sanitized
suite leaves the ``gpu`` tests out.
"""
import os
import re

import pytest

import sanitizer
from gpu_emu import build as emu

#: The kernel layer's calls (the ctypes library) that the emulated run adds.
KERNEL_LAYER = [
    "tests/gpu/test_cuda_kernel_layer.py::" + name
    for name in ("test_scatter_mode", "test_negative_value_error_names_the_first",
                 "test_scatter_index_error_names_the_first", "test_scatter_add_cupy_errors_write_nothing")
]  # fmt: skip


def run_sanitized(args, log_dir, env=None):
    """Run pytest on ``args`` under the sanitizers; fail on a report, a failure or a skip."""
    if not sanitizer.runtime():
        pytest.skip("no AddressSanitizer runtime (g++'s libasan)")
    proc = sanitizer.run(["-q", "-W", "ignore", "-rs", *args], str(log_dir), env=env,
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    tail = (proc.stdout + proc.stderr)[-6000:]
    found = sanitizer.reports(str(log_dir))
    assert not found, "\n".join(found)[:12000] + "\n" + tail
    assert proc.returncode == 0, tail
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "skipped" not in summary, tail
    return summary


@pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="already under the sanitizers: make sanitize runs tests/test_c_paths.py itself",
)
def test_cpu_paths_under_the_sanitizers(tmp_path):
    run_sanitized(["tests/test_c_paths.py"], tmp_path / "logs")


def test_emulated_gpu_host_code_under_the_sanitizers(tmp_path):
    problem = emu.cxx20_problem()
    if problem:
        pytest.skip(problem)
    from aesara_bincount_core.cuda import nvrtc

    try:
        nvrtc.load()
    except nvrtc.NvrtcError as exc:
        pytest.skip(str(exc))
    env = emu.environment(emu.build())
    # The host code does not depend on the size: the thread-sized cases stay on the CPU run.
    run_sanitized(["-m", "gpu and not slow", "-k", "not threaded and not lanes",
                   "tests/test_c_paths.py", *KERNEL_LAYER], tmp_path / "logs", env)  # fmt: skip
