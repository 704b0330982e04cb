"""The C sources: valid C on their own, hashed into the cache version."""
import os
import re
import shutil
import subprocess
import sysconfig

import numpy as np
import pytest

from aesara_bincount import Bincount
from aesara_bincount_core import _c_code

C_DIR = _c_code.c_code_dir()
C_FILES = [os.path.join(C_DIR, name) for name in _c_code.source_files((".c", ".h"))]
INCLUDES = [f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}", f"-I{C_DIR}"]


@pytest.mark.parametrize("path", C_FILES, ids=lambda p: os.path.relpath(p, C_DIR))
@pytest.mark.parametrize(
    "compiler,flags",
    [
        ("gcc", ["-x", "c", "-std=c99"]),
        ("gcc", ["-x", "c", "-std=c99", "-fopenmp"]),
        ("g++", ["-x", "c++"]),
        ("g++", ["-x", "c++", "-fopenmp"]),
    ],
    ids=["c99", "c99-openmp", "c++", "c++-openmp"],
)
def test_file_compiles_on_its_own(path, compiler, flags):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    cmd = [compiler, *flags, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Wno-unused-function",
           *INCLUDES, path]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_no_section_markers_or_templating():
    """No ExternalCOp section markers, no %(name)s or $name text templating."""
    for path in C_FILES + [os.path.join(C_DIR, n) for n in _c_code.source_files((".cu", ".cuh"))]:
        with open(path, encoding="utf-8") as f:
            code = re.sub(r"/\*.*?\*/|//[^\n]*", "", f.read(), flags=re.S)
        assert "#section" not in code, path
        assert "%(" not in code and not re.search(r"\$\{?[A-Za-z_]", code), path


def test_cache_version_covers_every_file(monkeypatch):
    op = Bincount()
    base = op.c_code_cache_version()
    assert base == Bincount().c_code_cache_version()
    assert set(op.c_sources) == {"common/host_helpers.h", "cpu/worker_pool.h", "cpu/bincount.c"}
    # Every file of the CPU code is hashed, the regime files (included by cpu/bincount.c) too.
    hashed = Bincount.hashed_sources()
    assert set(hashed) >= {p for p in _c_code.source_files() if p.startswith("cpu/bincount")}
    original = _c_code.read_source
    for name in hashed:
        monkeypatch.setattr(
            _c_code, "read_source", lambda n, name=name: original(n) + ("\n/* edit */" if n == name else "")
        )
        assert Bincount().c_code_cache_version() != base, name
    monkeypatch.setattr(_c_code, "read_source", original)


def test_c_headers_of_op_are_all_hashed():
    """Every header the Op includes from c_code/, directly or not, is one of its hashed sources."""
    op = Bincount()
    hashed = set(Bincount.hashed_sources())
    ours = [h for h in op.c_headers() if os.path.exists(os.path.join(C_DIR, h))]
    assert ours and set(ours) <= hashed
    included = set()
    for name in hashed:
        with open(os.path.join(C_DIR, name), encoding="utf-8") as f:
            included |= {line.split('"')[1] for line in f if line.startswith('#include "')}
    assert "cpu/bincount_hist.h" in included
    assert included <= hashed


def test_messages_are_parsed_from_the_header():
    msgs = _c_code.messages()
    for name in ("BC_MSG_NEGATIVE", "BC_MSG_INDEX", "BC_MSG_TOO_LARGE", "BC_MSG_NO_MEMORY",
                 "BC_MSG_MINLENGTH", "BC_MSG_WEIGHTS"):
        assert name in msgs and "%ll" not in msgs[name]
    assert msgs["BC_MSG_NEGATIVE"] % (-3, 7) == (
        "bincount: x holds the negative value -3 at position 7; "
        "bincount counts non-negative integers only"
    )


@pytest.mark.parametrize(
    "x_dtype,out_dtype,weighted,scatter",
    [
        ("uint8", "uint8", False, 0),
        ("int8", "int8", False, 1),
        ("uint64", "float32", True, 1),
        ("int16", "float64", True, 0),
        ("int32", "int64", True, 1),
        ("uint32", "uint16", False, 0),
    ],
)
def test_instantiations_compile_warning_free(x_dtype, out_dtype, weighted, scatter):
    """The macro set that Aesara defines per node, for several dtype pairs."""
    macros = _bincount_macros("node", x_dtype, out_dtype, weighted, scatter)
    macros["DTYPE_INPUT_1"] = "npy_int64"
    _syntax_check("".join(f"#define {k} {v}\n" for k, v in macros.items()) + '#include "cpu/bincount.c"\n')


def _bincount_macros(tag, x_dtype, out_dtype, weighted, scatter):
    """The macros Aesara defines for one Bincount node (``APPLY_SPECIFIC`` names end in ``_tag``)."""
    macros = {
        "APPLY_SPECIFIC(str)": f"str##_{tag}",
        "DTYPE_INPUT_0": f"npy_{x_dtype}",
        "DTYPE_OUTPUT_0": f"npy_{out_dtype}",
        "TYPENUM_OUTPUT_0": str(np.dtype(out_dtype).num),
        "ITEMSIZE_OUTPUT_0": str(np.dtype(out_dtype).itemsize),
        "BC_SCATTER": str(scatter),
        "BC_OUT_FLOAT": str(int(out_dtype.startswith("float"))),
    }
    if weighted:
        macros["DTYPE_INPUT_2"] = f"npy_{out_dtype}"
    return macros


def _syntax_check(source: str):
    """gcc (C99, OpenMP) and g++ accept ``source`` without a warning."""
    for compiler, flags in (("gcc", ["-x", "c", "-std=c99", "-fopenmp"]), ("g++", ["-x", "c++"])):
        if shutil.which(compiler) is None:
            pytest.skip(f"{compiler} not installed")
        cmd = [compiler, *flags, "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
               "-Wno-unused-function", *INCLUDES, "-"]
        proc = subprocess.run(cmd, input=source, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_scatter_add_parts_instantiate_twice_in_one_module():
    """A module with two ScatterAdd nodes holds cpu/scatter_add.c (and the three
    parts it includes) twice, with other APPLY_SPECIFIC names and dtypes: the
    parts' once-per-instantiation guards must be reset at the end of the file."""

    def node(name, out, idx, flt, signed):
        macros = {
            "APPLY_SPECIFIC(str)": f"str##_{name}", "DTYPE_INPUT_0": f"npy_{out}",
            "DTYPE_INPUT_1": f"npy_{out}", "DTYPE_INPUT_2": f"npy_{idx}",
            "DTYPE_OUTPUT_0": f"npy_{out}", "TYPENUM_OUTPUT_0": str(np.dtype(out).num),
            "ITEMSIZE_OUTPUT_0": str(np.dtype(out).itemsize), "SA_ONTO_ZEROS": "0",
            "SA_INPLACE": "0", "SA_OUT_FLOAT": str(flt), "SA_IDX_SIGNED": str(signed),
        }
        define = "".join(f"#define {k} {v}\n" for k, v in macros.items())
        undef = "".join(f"#undef {k.split('(')[0]}\n" for k in macros)
        return f'{define}#include "cpu/scatter_add.c"\n{undef}'

    _syntax_check(node("a", "float32", "int32", 1, 1) + node("b", "int16", "uint64", 0, 0))


def test_two_instantiations_in_one_module():
    """Aesara puts the support code of every node of a graph into one module:
    the driver undefines the macros of its instantiation and the guards of the
    regime files, so a second node with other dtypes includes them afresh."""
    nodes = [
        ("n1", "int64", "int64", False, 0),
        ("n2", "int32", "float64", True, 1),
        ("n3", "uint8", "float32", True, 0),
    ]
    text = []
    for tag, x_dtype, out_dtype, weighted, scatter in nodes:
        macros = _bincount_macros(tag, x_dtype, out_dtype, weighted, scatter)
        text += [f"#define {k} {v}" for k, v in macros.items()]
        text.append('#include "cpu/bincount.c"')
        text += [f"#undef {k.split('(')[0]}" for k in macros]
    for tag, *_ in nodes:
        text.append(f"void *uses_{tag}(void) {{ return (void *)&cpu_bincount_{tag}; }}")
    source = "\n".join(text) + "\n"
    _syntax_check(source)
