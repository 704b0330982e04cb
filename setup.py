"""Packaging for aesara_bincount (no build step: Aesara compiles the C at run time).

Two top-level packages: ``aesara_bincount`` (importing it registers the
rewrites) and ``aesara_bincount_core`` (the Ops, types and GPU kernel layer,
which register nothing).  The C and CUDA sources in ``c_code/`` ship inside
the latter as ``aesara_bincount_core/c_code/``.
"""
from setuptools import setup

setup(
    name="aesara-bincount",
    version="0.1.0",
    description="Fast bincount / scatter-add Ops for Aesara graphs, on the CPU (OpenMP) and NVIDIA GPUs",
    long_description=open("README.rst", encoding="utf-8").read(),
    long_description_content_type="text/x-rst",
    license="BSD-3-Clause",
    # Tried with pyenv's 3.10.13, 3.11.7, 3.12.1 and 3.13.0: 3.13 cannot install numpy < 2
    # (numpy 1.26 has no build for it), which Aesara 2.9 needs.  scripts/python_check.sh
    # (the Makefile's check) reads this line.
    python_requires=">=3.10,<3.13",
    packages=[
        "aesara_bincount",
        "aesara_bincount.gpu",
        "aesara_bincount_core",
        "aesara_bincount_core.cuda",
        "aesara_bincount_core.gpu",
        "aesara_bincount_core.gpu.entries",
        "aesara_bincount_core.c_code",
    ],
    package_dir={"aesara_bincount_core.c_code": "c_code"},
    package_data={"aesara_bincount_core.c_code": [f"{d}/*{s}" for d in ("common", "cpu", "cuda", "cuda_host")
                                                  for s in (".c", ".h", ".cu", ".cuh")]},
    # The markers change nothing where the package installs.  On Python 3.13 and newer,
    # where python_requires refuses it, they keep pip < 25.1 (which resolves a project's
    # dependencies before its Requires-Python, pip issue 13270; Python 3.13.0 comes with
    # pip 24.2) from building numpy 1.26 and scipy 1.12 from source for minutes first:
    # without them, every pip refuses at once, with its own message.
    install_requires=[
        "aesara>=2.9,<2.10",
        'numpy>=1.21,<2; python_version < "3.13"',
        'scipy<1.13; python_version < "3.13"',
        "setuptools<70",
    ],
    extras_require={
        "cuda12": ["cupy-cuda12x>=13,<14", "nvidia-cuda-nvrtc-cu12>=12.2,<13"],
        # NVRTC lets the tests compile the CUDA kernels on machines without a GPU.
        # pytest-xdist: make test spreads the suite over every core (TEST_JOBS).
        "test": ["pytest>=7", "pytest-xdist>=3", "hypothesis>=6", "nvidia-cuda-nvrtc-cu12>=12.2,<13"],
        "bench": ["numba", "matplotlib"],
        # make docs builds with warnings as errors: new major releases may add warnings.
        # readme_renderer: the README renders as PyPI renders it (tests/test_readme.py).
        "docs": ["sphinx>=8,<10", "furo>=2024.8", "numpydoc>=1.8,<2", "matplotlib>=3.7",
                 "readme_renderer>=43"],
    },
    classifiers=[
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: C",
        "Topic :: Scientific/Engineering",
    ],
)
