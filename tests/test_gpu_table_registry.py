"""The GPU table's registry and its documentation page, without a GPU.

The entries' values are tested on the emulation (``tests/gpu/test_gpu_table.py``,
``tests/gpu/test_gpu_table_indexing.py``, ``tests/gpu/test_gpu_lift.py``); here: every entry has such a test and a row
on the page, refusals give their reasons, and an Op registers once.
"""
import os

import pytest

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402

from aesara_bincount_core.gpu import entries  # noqa: E402,F401
from aesara_bincount_core.gpu.table import TABLE, gpu_problem, register, rows  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def test_every_entry_has_a_test_on_the_emulation():
    tests = "".join(_read("tests", "gpu", name) for name in
                    ("test_gpu_table.py", "test_gpu_table_indexing.py", "test_gpu_lift.py"))  # fmt: skip
    twins_tested = {"DimShuffle", "Reshape", "Subtensor", "AdvancedSubtensor1", "CAReduce", "Sum", "Prod",
                    "Max", "Min", "All", "Any"}  # fmt: skip (test_gpu_lift.py's, by their twins' names)
    missing = [e.op_class.__name__ for e in rows()
               if e.twin is None and f'"{e.op_class.__name__}"' not in tests]  # fmt: skip
    assert missing == [], missing
    assert {e.op_class.__name__ for e in rows() if e.twin is not None} <= twins_tested


def test_the_docs_page_lists_every_entry():
    import sys

    sys.path.insert(0, os.path.join(ROOT, "docs", "_ext"))
    from gpu_table import table_lines

    text = "\n".join(table_lines())
    assert [e.op_class.__name__ for e in rows() if f"``{e.op_class.__name__}" not in text] == []
    assert "Scan" in text and "FillDiagonal" in text  # the notes: what stays on the host


def test_refusals_give_their_reasons():
    x = at.matrix("x", dtype="complex128")
    assert "complex128" in gpu_problem(at.dot(x, x).owner)
    assert "no GPU entry for FillDiagonal" in gpu_problem(at.extra_ops.fill_diagonal(at.dmatrix(), 0.0).owner)
    half = at.matrix("h", dtype="float16")
    assert "float16" in gpu_problem(at.special.softmax(half, axis=-1).owner)
    assert "sorter" in gpu_problem(at.extra_ops.searchsorted(at.dvector(), at.dvector(), sorter=at.lvector()).owner)
    assert gpu_problem(at.special.softmax(at.dmatrix(), axis=-1).owner) is None


def test_an_op_registers_once():
    op_class = next(iter(TABLE))
    with pytest.raises(ValueError, match="already has a GPU entry"):
        register(op_class, family="x", cupy="x", accepts_text="x", outputs="x")
