"""The GPU Op's C sources stand alone, agree with the Python kernel layer, and with cuda.h.

No GPU and no CUDA toolkit needed (the cuda.h checks skip without one).
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aesara_bincount_core import _c_code
from aesara_bincount_core.cuda import driver, kernels

C_CODE = _c_code.c_code_dir()
GPU_C_FILES = ["bincount_cuda.h", "bincount_cuda_driver.h", "gpuarray_helper.h", "bincount_cuda_host.c"]
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


HARNESS = r"""
#include <stddef.h>
#include "bincount_cuda_driver.h"
void plan(long long size, long long span, long long item, long long sms, long long budget,
          long long *out)
{
    bc_cuda_plan p = bc_cuda_make_plan(size, span, item, sms, budget);
    out[0] = p.blocks; out[1] = p.shared_bins; out[2] = p.copies; out[3] = p.shared_bytes;
}
#define F(s, f) offsetof(s, f)
long long hist_layout(long long *out)
{
    long long o[] = {F(bc_hist_params, x), F(bc_hist_params, w), F(bc_hist_params, out),
                     F(bc_hist_params, status), F(bc_hist_params, size),
                     F(bc_hist_params, x_stride), F(bc_hist_params, w_stride),
                     F(bc_hist_params, lo), F(bc_hist_params, hi), F(bc_hist_params, n),
                     F(bc_hist_params, shared_bins), F(bc_hist_params, copies),
                     F(bc_hist_params, scatter)};
    for (int i = 0; i < 13; i++) out[i] = o[i];
    return sizeof(bc_hist_params);
}
long long finish_size(void) { return sizeof(bc_finish_params); }
long long status_size(void) { return sizeof(bc_status); }
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if CC is None:
        pytest.skip("no gcc")
    d = tmp_path_factory.mktemp("harness")
    src, lib = d / "harness.c", d / "harness.so"
    src.write_text(HARNESS)
    link = [f"-L{sysconfig.get_config_var('LIBDIR')}"]
    cmd = [CC, "-shared", "-fPIC", "-std=c99", "-D_GNU_SOURCE", *INCLUDES, "-o", str(lib), str(src), *link]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # Python's symbols are there already: load into this process.
    return ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)


@settings(max_examples=400, deadline=None)
@given(
    size=st.integers(1, 2**40),
    span=st.integers(1, 2**34),
    item=st.sampled_from([4, 8]),
    sms=st.integers(1, 200),
    budget=st.integers(0, 232448),
)
def test_c_and_python_launch_plans_agree(harness, size, span, item, sms, budget):
    out = (ctypes.c_longlong * 4)()
    harness.plan(
        ctypes.c_longlong(size), ctypes.c_longlong(span), ctypes.c_longlong(item),
        ctypes.c_longlong(sms), ctypes.c_longlong(budget), out,
    )  # fmt: skip
    p = kernels.launch_plan(size, span, item, sms, budget)
    assert tuple(out) == (p.blocks, p.shared_bins, p.copies, p.shared_bytes)
    # The plan keeps its promises.
    assert 1 <= p.blocks < 2**31
    assert -(-size // p.blocks) <= kernels.CONSTANTS["MAX_ELEMS_PER_BLOCK"]
    assert p.shared_bytes <= max(budget, 0) and p.shared_bins <= span
    assert p.copies & (p.copies - 1) == 0 and p.copies <= kernels.CONSTANTS["MAX_COPIES"]


def test_parameter_structs_have_one_layout(harness):
    offsets = (ctypes.c_longlong * 13)()
    harness.hist_layout.restype = ctypes.c_longlong
    harness.finish_size.restype = ctypes.c_longlong
    harness.status_size.restype = ctypes.c_longlong
    assert harness.hist_layout(offsets) == ctypes.sizeof(kernels.HistParams)
    names = [f[0] for f in kernels.HistParams._fields_]
    assert list(offsets) == [getattr(kernels.HistParams, n).offset for n in names]
    assert harness.finish_size() == ctypes.sizeof(kernels.FinishParams)
    assert harness.status_size() == kernels.STATUS_BYTES


def test_header_constants_are_read():
    text = _c_code.read_source("bincount_cuda.h")
    for name in ("THREADS", "BLOCKS_PER_SM", "FIRST_PASS_BINS", "COMPACT_MIN_BYTES"):
        assert re.search(rf"#define BC_CUDA_{name} {kernels.CONSTANTS[name]}\b", text)
    assert kernels.THREADS % 32 == 0


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

    header = _c_code.read_source("bincount_cuda_driver.h")
    typedefs = dict(re.findall(r"\(\*bc_PFN_(\w+)\)\(([^;]*?)\);", header, re.DOTALL))
    symbols = re.findall(r'BC_LOAD\(\w+, "(\w+)"\)', header)
    assert len(symbols) == len(typedefs) == 9
    for symbol in symbols:
        proto = re.search(rf"CUresult CUDAAPI {symbol}\(([^;]*?)\);", text, re.DOTALL)
        assert proto, f"{symbol} is not in cuda.h"
        base = symbol.replace("_v2", "")
        assert proto.group(1).count(",") == typedefs[base].count(","), symbol


@pytest.mark.skipif(CUDA_H is None or CC is None, reason="no cuda.h or gcc")
def test_driver_types_have_cuda_h_sizes(tmp_path):
    src = tmp_path / "sizes.c"
    src.write_text(
        "#include <cuda.h>\n#include \"bincount_cuda_driver.h\"\n"
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
    """A plain import of the kernel layer works where Aesara and CuPy cannot import."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import sys; sys.modules['aesara'] = None; sys.modules['cupy'] = None\n"
        f"sys.path.insert(0, {root!r})\n"
        "import aesara_bincount_core.cuda.kernels as k\n"
        "assert 'aesara_bincount' not in sys.modules\n"
        "ok, why = k.is_available(); assert not ok and 'CuPy' in why, why\n"
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
