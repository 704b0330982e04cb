"""The table of ``benchmarks/bench_gpu_scatter.py`` (issue 30's rows of the GPU benchmark).

Its rows are measured at a tiny size on the emulation
(``tests/gpu/test_cuda_scatter_bench.py``, and the dry run of
``tests/test_gpu_check.py``) and on a lent GPU; here the table and its
verdicts are checked on rows written by hand, once passing and once failing.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_bench_tables import load as load_bench  # noqa: E402


def rows(same):
    common = dict(load="1.0", same=same)
    return [
        dict(row="confusion matrix", N=10**6, package_ms=0.5, aesara_ms=20.0, **common),
        dict(row="set, duplicates", N=16384, package_ms=0.25, aesara_ms=1.0, **common),
    ]


@pytest.mark.parametrize("same, verdict", [(True, "PASS"), (False, "FAIL")])
def test_scatter_table_speed_ups_and_verdicts(same, verdict):
    text = load_bench("bench_gpu_scatter").scatter_table(rows(same), lambda v: f"{v:.3g}")
    assert "| confusion matrix | 1e6 | 0.5 | 20 | 40.00 |" in text, text
    assert "| set, duplicates | 16384 | 0.25 | 1 | 4.00 |" in text, text
    verdicts = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(verdicts) == 2, text
    assert all(line.startswith(f"- {verdict}:") for line in verdicts), text


def test_no_rows_no_table():
    assert load_bench("bench_gpu_scatter").scatter_table([], str) == ""
