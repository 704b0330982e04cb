"""The base of the C-file Ops (aesara_bincount_core/c_file_op.py) and what it does for each Op.

Neighbours: test_c_sources.py (the C files compile on their own, Bincount's
hashed files), test_gpu_clinker.py (GpuBincount's module compiles),
test_pickling.py (compiled functions pickle).
"""
import pickle
import re

import pytest

from aesara_bincount_core import _c_code, compile_args
from aesara_bincount_core.c_file_op import CFileOp, OpenMPCFileOp
from aesara_bincount_core.gpu.c_file_op import GpuCFileOp
from aesara_bincount_core.gpu.op import GpuBincount
from aesara_bincount_core.gpu.scatter_add import GpuScatterAdd
from aesara_bincount_core.op import Bincount
from aesara_bincount_core.scatter_add import ScatterAdd

OPS = [
    Bincount("scatter", out_dtype="float32", openmp=True),
    ScatterAdd("zeros"),
    GpuBincount("bincount"),
    GpuScatterAdd("base", inplace=True),
]
IDS = [type(op).__name__ for op in OPS]


def _closure_by_hand(names):
    seen, todo = [], list(names)
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.append(name)
        for inc in re.findall(r'^#include "([^"]+)"', _c_code.read_source(name), re.MULTILINE):
            try:
                _c_code.read_source(inc)
            except FileNotFoundError:
                continue
            todo.append(inc)
    return seen


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_every_included_file_is_hashed(op):
    hashed = type(op).hashed_sources()
    assert set(_closure_by_hand(op.c_sources + op.kernel_sources)) == set(hashed)
    assert hashed[: len(op.c_sources)] == op.c_sources
    assert set(op.c_headers()) & set(_c_code.included_closure(op.c_sources)) == {
        f for f in op.c_sources if f.endswith(".h")
    }


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_headers_at_the_top_of_the_module_need_no_macros_of_the_op(op):
    """The headers of c_sources go before the Op's macros: a part that needs them
    (APPLY_SPECIFIC code, the node's flags) must be reached through the .c file only."""
    import aesara.tensor as at

    node = {
        "Bincount": lambda: op(at.lvector(), 5, at.fvector()),
        "ScatterAdd": lambda: op(at.as_tensor([4, 2]), at.dmatrix(), at.lvector()),
    }.get(type(op).__name__)
    flags = set(op.c_flags(node().owner)) if node else set()
    for name in op.c_sources:
        if not name.endswith(".h"):
            continue
        code = re.sub(r"/\*.*?\*/|//[^\n]*", "", _c_code.read_source(name), flags=re.S)
        assert "APPLY_SPECIFIC" not in code, name
        assert not {m for m in flags if re.search(rf"\b{m}\b", code)}, name


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_an_edit_of_any_hashed_file_changes_the_version(op, monkeypatch):
    version = op.c_code_cache_version()
    assert version == pickle.loads(pickle.dumps(op)).c_code_cache_version()
    real = _c_code.read_source
    for name in type(op).hashed_sources():
        monkeypatch.setattr(_c_code, "read_source", lambda n, _name=name: real(n) + ("\n/* x */" if n == _name else ""))
        assert op.c_code_cache_version() != version, name
    monkeypatch.setattr(_c_code, "read_source", real)
    assert op.c_code_cache_version() == version


def test_a_header_included_later_is_hashed_without_being_listed(tmp_path, monkeypatch):
    """included_closure follows quoted includes, directly or not, once each, and skips system and missing ones."""
    (tmp_path / "top.c").write_text('#include "a.h"\n#include <stdio.h>\n#include "missing.h"\n')
    (tmp_path / "a.h").write_text('  # include "b.h"\n#include "top.c"\n')
    (tmp_path / "b.h").write_text('/* #include "c.h" is prose here */\n')
    (tmp_path / "c.h").write_text("")
    monkeypatch.setattr(_c_code, "c_code_dir", lambda: str(tmp_path))
    assert _c_code.included_closure(["top.c"]) == ("top.c", "a.h", "b.h")
    assert _c_code.included_closure(["b.h", "top.c", "b.h"]) == ("b.h", "top.c", "a.h")


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_pickle_holds_props_and_reloads_the_c_text(op):
    data = pickle.dumps(op)
    back = pickle.loads(data)
    assert back == op and hash(back) == hash(op)
    assert back.code_sections == op.code_sections and back.func_codes == op.func_codes
    assert "support_code_apply" in back.code_sections
    for name, code in zip(op.c_sources, op.func_codes):
        assert code.encode()[:2000] not in data, name
    assert getattr(back, "destroy_map", {}) == getattr(op, "destroy_map", {})


@pytest.mark.parametrize("op", OPS, ids=IDS)
def test_extra_compile_args_reach_every_op(op, monkeypatch):
    # None without the sanitizers (make sanitize runs this test with them).
    assert (compile_args.extra_compile_args() == []) != compile_args.sanitize_requested()
    monkeypatch.setattr(compile_args, "extra_compile_args", lambda: [])
    before = op.c_compile_args()
    monkeypatch.setattr(compile_args, "extra_compile_args", lambda: ["-DBC_TEST_HOOK=1"])
    assert op.c_compile_args() == before + ["-DBC_TEST_HOOK=1"]


def test_flags_become_macros_defined_and_undefined():
    import aesara.tensor as at

    node = Bincount("scatter")(at.lvector("x"), 5, at.dvector("w")).owner
    define, undef = node.op.get_c_macros(node, "node_7")
    assert "#define BC_SCATTER 1" in define and "#define BC_OUT_FLOAT 1" in define
    assert "#define APPLY_SPECIFIC(str) str##_node_7" in define
    for macro in ("BC_SCATTER", "BC_OUT_FLOAT", "APPLY_SPECIFIC"):
        assert f"#undef {macro}" in undef
    node = ScatterAdd("base", inplace=True)(at.bmatrix("b"), at.bmatrix("i"), at.bvector("k")).owner
    define, _ = node.op.get_c_macros(node, "n")
    for line in ("SA_ONTO_ZEROS 0", "SA_INPLACE 1", "SA_OUT_FLOAT 0", "SA_IDX_SIGNED 1"):
        assert f"#define {line}" in define


def test_class_layout():
    """The CPU Ops have the OpenMP switch in their version, the GPU Ops load libdl."""
    assert isinstance(OPS[0], OpenMPCFileOp) and isinstance(OPS[1], OpenMPCFileOp)
    assert OPS[0].c_code_cache_version()[-1] == 1
    assert Bincount(openmp=False).c_code_cache_version()[-1] == 0
    for op in OPS[2:]:
        assert isinstance(op, GpuCFileOp) and not isinstance(op, OpenMPCFileOp)
        assert "dl" in op.c_libraries() and len(op.c_code_cache_version()) == 2
    assert all(isinstance(op, CFileOp) for op in OPS)
    assert [op.func_name for op in OPS] == [
        "APPLY_SPECIFIC(cpu_bincount)", "APPLY_SPECIFIC(cpu_scatter_add)",
        "APPLY_SPECIFIC(gpu_bincount)", "APPLY_SPECIFIC(gpu_scatter_add)",
    ]


@pytest.mark.parametrize("cls, kwargs, message", [
    (ScatterAdd, {"onto": "rows"}, "unknown onto"),
    (GpuScatterAdd, {"onto": "rows"}, "unknown onto"),
    (ScatterAdd, {"onto": "zeros", "inplace": True}, "only onto='base' can be in place"),
    (GpuScatterAdd, {"onto": "zeros", "inplace": True}, "only onto='base' can be in place"),
])
def test_scatter_props_are_checked_once_for_both_ops(cls, kwargs, message):
    with pytest.raises(ValueError, match=f"{cls.__name__}: {message}"):
        cls(**kwargs)
