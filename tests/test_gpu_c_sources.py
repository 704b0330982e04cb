"""The GPU C sources stand alone, hold one launcher, and agree with cuda.h; the
host code compiles for every combination of its macros (the GPU part of the
compile sweep of issue 32).

No GPU and no CUDA toolkit needed (the cuda.h checks skip without one).
"""
import itertools
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aesara_bincount_core import _c_code
from aesara_bincount_core.cuda import driver, launcher, sources

C_CODE = _c_code.c_code_dir()
GPU_C_FILES = [
    "cuda/kernel_defs.h",
    "cuda_host/driver.h",
    "cuda_host/bincount_launch.h",
    "cuda_host/bincount_to_host.h",
    "cuda_host/kernel_layer_lib.c",
    "cuda_host/gpuarray_type.h",
    "cuda_host/staging.h",
    "cuda_host/gpu_bincount_op.c",
    "cuda_host/scatter_add_launch.h",
    "cuda_host/gpu_scatter_add_op.c",
]
INCLUDES = [f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}", f"-I{C_CODE}"]
CC = shutil.which("gcc")
CUDA_H = next(
    (
        p
        for p in (
            os.path.join(os.environ.get("CUDA_PATH", "/nonexistent"), "include", "cuda.h"),
            "/usr/local/cuda/include/cuda.h",
        )
        if os.path.exists(p)
    ),
    None,
)
needs_gcc = pytest.mark.skipif(CC is None, reason="no gcc")


@needs_gcc
@pytest.mark.parametrize("lang", ["c", "c++"])
@pytest.mark.parametrize("name", GPU_C_FILES)
def test_file_compiles_on_its_own(name, lang):
    std = ["-std=c99", "-D_GNU_SOURCE"] if lang == "c" else ["-std=c++17"]
    cmd = [CC, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function", *std,
           *INCLUDES, "-x", lang, os.path.join(C_CODE, name)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if name == "cuda_host/gpu_bincount_op.c":  # and its form whose result goes to the host
        proc = subprocess.run(cmd[:-1] + ["-DBC_TO_HOST=1", cmd[-1]], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


@needs_gcc
@pytest.mark.parametrize("lang", ["c", "c++"])
def test_launcher_library_needs_no_python_or_cuda_headers(lang, tmp_path):
    """The kernel layer builds the launcher where Python.h and cuda.h are absent
    (a GPU machine's own Python may lack its headers)."""
    std = ["-std=c99"] if lang == "c" else ["-std=c++17"]
    out = tmp_path / "lib.so"
    cmd = [CC, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", *std, f"-I{C_CODE}", "-x", lang,
           os.path.join(C_CODE, "cuda_host/kernel_layer_lib.c"), "-o", str(out), "-ldl"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in ("cuda_host/kernel_layer_lib.c", "cuda_host/bincount_launch.h", "cuda_host/scatter_add_launch.h",
                 "cuda_host/driver.h"):
        text = _c_code.read_source(name)
        assert "Python.h" not in text and "numpy/" not in text and "cuda.h>" not in text, name


def test_the_launch_plan_exists_once():
    """Only cuda_host/bincount_launch.h plans and launches the bincount kernels (and
    cuda_host/bincount_det_launch.h, on its checks, the deterministic ones): the
    Op's host code and the library call them, and no Python module plans."""
    launch = _c_code.read_source("cuda_host/bincount_launch.h")
    assert "bc_cuda_make_plan" in launch and "LaunchKernel(" in launch
    det = _c_code.read_source("cuda_host/bincount_det_launch.h")
    assert "bc_cuda_bincount_begin(" in det and "bc_cuda_read_length(" in det
    assert "bc_cuda_bincount_det(api, &c, &k, &host, &res, &err)" in _c_code.read_source("cuda_host/gpu_bincount_op.c")
    for name in ("cuda_host/gpu_bincount_op.c", "cuda_host/kernel_layer_lib.c"):
        text = _c_code.read_source(name)
        assert re.search(r"bc_cuda_bincount\(api, &c, &k, &host, &res, &?err\)", text), name
        assert "LaunchKernel(" not in text and "MemcpyDtoHAsync(" not in text, name
        assert "FIRST_PASS" not in text and "COMPACT_MIN_BYTES" not in text, name
    rows = _c_code.read_source("cuda_host/scatter_add_launch.h")
    assert "bc_cuda_rows_plan" in rows and "LaunchKernel(" in rows
    assert re.search(r"bc_cuda_scatter_rows\(api, &c, &k, &host, &?err\)", _c_code.read_source("cuda_host/gpu_scatter_add_op.c"))
    assert "return bc_cuda_scatter_rows(api, &c, &k, &host, err);" in _c_code.read_source("cuda_host/kernel_layer_lib.c")
    text = _c_code.read_source("cuda_host/gpu_scatter_add_op.c")
    assert "LaunchKernel(" not in text and "MemcpyDtoHAsync(" not in text and "ROWS_TILE" not in text
    pkg = os.path.dirname(launcher.__file__)
    for module in os.listdir(pkg):
        if module.endswith(".py"):
            with open(os.path.join(pkg, module), encoding="utf-8") as f:
                text = f.read()
            assert "BLOCKS_PER_SM" not in text or module == "modules.py", module
            assert "MIN_ELEMS_PER_BLOCK" not in text and "FIRST_PASS_BINS" not in text, module
            # driver.py's one generic launch serves the generated elementwise kernels
            assert "cuLaunchKernel" not in text or module == "driver.py", module


@settings(max_examples=400, deadline=None)
@given(
    size=st.integers(1, 2**40),
    span=st.integers(0, 2**34),
    item=st.sampled_from([4, 8]),
    resident=st.integers(1, 400),
    budget=st.integers(0, 232448),
)
# The ends of each range: one element, no bins, no shared memory; the
# largest of everything; one resident block with every bin.
@example(size=1, span=0, item=4, resident=1, budget=0)
@example(size=2**40, span=2**34, item=8, resident=400, budget=232448)
@example(size=1, span=2**34, item=8, resident=1, budget=232448)
@example(size=2**40, span=0, item=4, resident=1, budget=0)
def test_launch_plan_keeps_its_promises(size, span, item, resident, budget):
    """The one plan (bc_cuda_make_plan, through the launcher library)."""
    blocks, shared_bins, copies, shared_bytes = launcher.plan(size, span, item, resident, budget)
    c = sources.CONSTANTS
    assert 1 <= blocks < 2**31
    assert blocks <= max(resident, -(-size // c["MAX_ELEMS_PER_BLOCK"]))
    assert -(-size // blocks) <= c["MAX_ELEMS_PER_BLOCK"]
    assert shared_bytes == copies * shared_bins * item
    assert shared_bytes <= budget and 0 <= shared_bins <= span
    assert copies & (copies - 1) == 0 and 1 <= copies <= c["MAX_COPIES"]


def test_buffer_layout():
    """Bins padded to 8 bytes, then the 32-byte status."""
    for bins, item, expected in [(0, 4, (8, 0)), (3, 4, (12, 4)), (4, 4, (12, 4)), (3, 8, (7, 3))]:
        assert launcher.buffer_elements(bins, item) == expected


def test_header_constants_are_read():
    text = _c_code.read_source("cuda/kernel_defs.h")
    for name in ("THREADS", "BLOCKS_PER_SM", "FIRST_PASS_BINS", "COMPACT_MIN_BYTES"):
        assert re.search(rf"#define BC_CUDA_{name} {sources.CONSTANTS[name]}\b", text)
    assert sources.THREADS % 32 == 0
    assert [code for code, _ in sources.DTYPES.values()] == list(range(10))


@pytest.mark.skipif(CUDA_H is None, reason="no cuda.h (CUDA toolkit) here")
def test_driver_declarations_match_cuda_h():
    """Enum values, symbol names and argument counts against the real cuda.h."""
    text = open(CUDA_H).read()

    def enum(name):
        return int(re.search(rf"\b{name}\s*=\s*(0x[0-9a-fA-F]+|\d+)", text).group(1), 0)

    for name in dir(driver):
        if name.startswith(("CU_", "CUDA_ERROR")):
            assert enum(name) == getattr(driver, name), name
    assert int(re.search(r"#define CU_MEMHOSTALLOC_PORTABLE\s+(0x\d+)", text).group(1), 16) == 1

    header = _c_code.read_source("cuda_host/driver.h")
    typedefs = dict(re.findall(r"\(\*bc_PFN_(\w+)\)\(([^;]*?)\);", header, re.DOTALL))
    symbols = re.findall(r'BC_LOAD\(\w+, "(\w+)"\)', header)
    optional = re.findall(r'dlsym\(lib, "(\w+)"\); /\* optional \*/', header)
    assert optional == ["cuCtxGetId"]
    symbols += optional
    assert len(symbols) == len(typedefs) == 13
    for symbol in symbols:
        proto = re.search(rf"CUresult CUDAAPI {symbol}\(([^;]*?)\);", text, re.DOTALL)
        assert proto, f"{symbol} is not in cuda.h"
        base = symbol.replace("_v2", "")
        assert proto.group(1).count(",") == typedefs[base].count(","), symbol


@pytest.mark.skipif(CUDA_H is None or CC is None, reason="no cuda.h or gcc")
def test_driver_types_have_cuda_h_sizes(tmp_path):
    src = tmp_path / "sizes.c"
    src.write_text(
        "#include <cuda.h>\n#include \"cuda_host/driver.h\"\n"
        "_Static_assert(sizeof(CUdeviceptr) == sizeof(bc_CUdeviceptr), \"CUdeviceptr\");\n"
        "_Static_assert(sizeof(CUresult) == sizeof(bc_CUresult), \"CUresult\");\n"
        "_Static_assert(sizeof(CUdevice) == sizeof(bc_CUdevice), \"CUdevice\");\n"
        "_Static_assert(sizeof(CUfunction) == sizeof(bc_CUfunction), \"CUfunction\");\n"
        "_Static_assert(CUDA_ERROR_OUT_OF_MEMORY == BC_CUDA_ERROR_OUT_OF_MEMORY, \"OOM\");\n"
    )
    cmd = [CC, "-fsyntax-only", "-std=c11", "-D_GNU_SOURCE", *INCLUDES,
           f"-I{os.path.dirname(CUDA_H)}", str(src)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_kernel_layer_imports_without_aesara_or_cupy():
    """A plain import of every module of the kernel layer works where Aesara
    and CuPy cannot import."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import sys; sys.modules['aesara'] = None; sys.modules['cupy'] = None\n"
        f"sys.path.insert(0, {root!r})\n"
        "import aesara_bincount_core.cuda.kernels as k\n"
        "from aesara_bincount_core.cuda import driver, errors, launcher, modules, nvrtc, sources\n"
        "assert 'aesara_bincount' not in sys.modules\n"
        "from aesara_bincount_core.cuda.kernels import bincount_cupy, is_available, GpuUnavailableError\n"
        "assert k.is_available() is False\n"
        "ok, why = k.availability(); assert not ok and 'CuPy' in why, why\n"
        "print('standalone ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0 and "standalone ok" in proc.stdout, proc.stderr


def test_gpu_package_import_does_not_import_cupy():
    code = (
        "import sys, aesara_bincount.gpu, aesara\n"
        "assert 'cupy' not in sys.modules\n"
        "import numpy as np\n"
        "v = aesara.shared(np.zeros(3))\n"
        "assert 'cupy' not in sys.modules\n"
        "print('lazy ok')\n"
    )
    env = dict(os.environ, AESARA_FLAGS="blas__ldflags=")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "lazy ok" in proc.stdout, proc.stderr


def _gpu_host_nodes():
    """``(op, inputs, outputs)`` of every reachable macro combination of the GPU Ops' host code.

    As for the CPU Ops (``tests/compile_sweep.py``), a node's macros are the
    dtypes of its inputs and outputs (Aesara's ``DTYPE_``/``TYPENUM_``/
    ``ITEMSIZE_``) and the Op's ``c_flags``: ``GpuBincount``: 2 modes x 8
    dtypes of x x 10 output dtypes x weights absent or present (320);
    ``GpuScatterAdd``: onto zeros, onto a base, in place x 8 index dtypes x
    10 dtypes (240).  No OpenMP on the GPU.  Host tensors stand in for the
    GPU ones: the macros read only their dtypes.
    """
    from aesara.tensor.type import TensorType

    from aesara_bincount_core.gpu.op import GpuBincount
    from aesara_bincount_core.gpu.scatter_add import GpuScatterAdd
    from aesara_bincount_core.semantics import INDEX_DTYPES, MODES, OUT_DTYPES

    def var(dtype, ndim=1):
        return TensorType(dtype, shape=(None,) * ndim)()

    nodes = []
    for mode, xd, od, weighted in itertools.product(MODES, INDEX_DTYPES, OUT_DTYPES, (False, True)):
        ins = [var(xd), var("int64", 0)] + ([var(od)] if weighted else [])
        nodes.append((GpuBincount(mode, od), ins, [var(od)]))
    for (onto, inplace), idd, od in itertools.product(
        (("zeros", False), ("base", False), ("base", True)), INDEX_DTYPES, OUT_DTYPES
    ):
        base = var("int64") if onto == "zeros" else var(od, 2)
        nodes.append((GpuScatterAdd(onto, inplace), [base, var(od, 2), var(idd)], [var(od, 2)]))
    return nodes


@needs_gcc
def test_gpu_host_code_compiles_for_every_macro_combination():
    """The compile sweep of the GPU Ops' host code: all 560 instantiations in
    one C++ translation unit (as Aesara's module holds several nodes), each
    with the macros Aesara and ``c_flags`` give it, warning-free (``-Wall
    -Wextra -Werror``).  Compiled, not run: the emulated GPU suite runs them."""
    from types import SimpleNamespace

    parts, headers, signatures = [], [], set()
    for k, (op, ins, outs) in enumerate(_gpu_host_nodes()):
        define, undef = op.get_c_macros(SimpleNamespace(inputs=ins, outputs=outs), f"n{k}")
        signatures.add((type(op).__name__,) + tuple(
            line for line in define.splitlines() if "APPLY_SPECIFIC" not in line))
        headers += [h for h in op.c_sources if h.endswith(".h") and h not in headers]
        (source,) = [f for f in op.c_sources if f.endswith(".c")]
        parts.append(f"{define}\n#include \"{source}\"\n{undef}\n")
    assert len(signatures) == len(parts) == 560
    text = "#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION\n#include <Python.h>\n#include <numpy/arrayobject.h>\n"
    text += "".join(f'#include "{h}"\n' for h in headers) + "".join(parts)
    cmd = [CC, "-x", "c++", "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
           "-Wno-unused-function", *INCLUDES, "-"]  # fmt: skip
    proc = subprocess.run(cmd, input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[:6000]
    print(f"GPU host code: {len(parts)} configurations compiled")
