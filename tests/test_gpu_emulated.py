"""Run the GPU test-suite (tests/gpu) on the CPU emulation of tests/gpu_emu.

No GPU needed: a fake libcuda runs the real CUDA kernels (compiled with g++
against cuda_emu.h) on CPU threads, a NumPy-backed fake CuPy provides the
arrays, and NVRTC (from the nvidia-cuda-nvrtc-cu12 wheel) still compiles the
kernels for real, so the whole path -- NVRTC, the driver calls of the kernel
layer and of the Op's C code, the launches, the kernels' logic -- runs.  The
suite runs in a subprocess, so that the fakes never meet a real CuPy.
"""
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_emu import build as emu  # noqa: E402

ROOT = emu.ROOT


def _nvrtc_missing():
    from aesara_bincount_core.cuda import nvrtc

    try:
        nvrtc.load()
    except nvrtc.NvrtcError as exc:
        return str(exc)
    return None


@pytest.mark.slow
def test_gpu_suite_on_the_cpu_emulation():
    why = _nvrtc_missing()
    if why:
        pytest.skip(why)
    problem = emu.cxx20_problem()
    if problem:
        pytest.skip(problem)
    lib = emu.build()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
         "tests/gpu"],
        cwd=ROOT, env=emu.environment(lib), capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    tail = (proc.stdout + proc.stderr)[-8000:]
    assert proc.returncode == 0, tail
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 80, tail
    # On the emulation only the real-GPU sizes are skipped.
    skipped = re.search(r"(\d+) skipped", proc.stdout)
    assert not skipped or int(skipped.group(1)) <= 10, tail
