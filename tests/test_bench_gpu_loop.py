"""The table of ``benchmarks/bench_gpu_loop.py`` (issue 18's rows of the GPU benchmark).

Its rows are measured by the dry run (``tests/test_gpu_check.py``, at a
tiny size on the emulation) and on a lent GPU; here the table and the
verdicts of the targets are checked on rows written by hand, each target
once passing and once failing.
"""
import importlib.util
import os

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def load():
    spec = importlib.util.spec_from_file_location("_bench_gpu_loop", os.path.join(BENCH, "bench_gpu_loop.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(aesara_ms):
    common = dict(transfers=0, load="1.0", correct=True)
    return [
        dict(row="seed loop", N=10**6, aesara_ms=aesara_ms, today_ms=2.0, cupy_ms=0.05, floor_ms=0.01, **common),
        dict(row="seed loop", N=10**8, aesara_ms=aesara_ms * 100, today_ms=900.0, cupy_ms=4.0, floor_ms=3.8,
             fused=True, unfused_ms=7.0, **common),
        dict(row="sgd step", N=16384, aesara_ms=aesara_ms, torch_ms=0.05, **common),
    ]


@pytest.mark.parametrize("aesara_ms, verdict", [(0.04, "PASS"), (0.2, "FAIL")])
def test_loop_table_sizes_and_verdicts(aesara_ms, verdict):
    text = load().loop_table(rows(aesara_ms))
    assert "| seed loop | 1e6 | 0 | - |" in text and "| seed loop | 1e8 | 0 | yes |" in text
    assert "| sgd step | 16384 |" in text
    verdicts = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(verdicts) == 5, text
    assert all(line.startswith(f"- {verdict}:") for line in verdicts), text


def test_no_rows_no_table():
    assert load().loop_table([]) == ""


@pytest.mark.parametrize("sparse_ms, verdict", [(0.05, "PASS"), (0.5, "FAIL")])
def test_sgd_rows_against_the_dense_step(sparse_ms, verdict):
    """Issue 41: the sparse step against the dense one at V = 1e6, and its time as V grows."""
    common = dict(row="sgd step", N=16384, D=64, transfers=0, load="1.0", correct=True, sparse=True)
    rows = [dict(V=10**5, aesara_ms=0.05, dense_ms=0.4, inc_ms=0.05, **common),
            dict(V=10**6, aesara_ms=sparse_ms, dense_ms=1.0, inc_ms=0.05, **common)]
    text = load().loop_table(rows)
    assert "| sgd step | 16384 | 0 | - | 0.05 |" in text and "| 1e6 | yes | 1 | 0.05 |" in text, text
    verdicts = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(verdicts) == 2, text
    assert all(line.startswith(f"- {verdict}:") for line in verdicts), text
