"""Run pytest on the CPU emulation of the GPU, for a subset of the GPU tests.

Usage, from the repository root::

    .venv/bin/python tests/gpu_emu/run.py tests/gpu/test_cuda_rows.py -x -q

It builds the fake libcuda (cached), puts the emulation in front of a fresh
pytest process (``build.environment``) and selects ``-m "gpu and not slow"``
unless the arguments give a ``-m`` of their own.  ``tests/test_gpu_emulated.py``
runs the whole GPU suite this way.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_emu import build  # noqa: E402


def main(argv):
    env = build.environment(build.build())
    marks = [] if "-m" in argv else ["-m", "gpu and not slow"]
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *marks, *argv]
    os.chdir(build.ROOT)
    os.execvpe(sys.executable, cmd, env)


if __name__ == "__main__":
    main(sys.argv[1:])
