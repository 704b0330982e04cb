"""The table of ``benchmarks/bench_gpu_det.py`` (issue 31's rows of the GPU benchmark).

Its rows are measured by the dry run (``tests/test_gpu_check.py``, at a tiny
size on the emulation) and on a lent GPU; here the table and the verdicts of
the targets are checked on rows written by hand, each verdict once passing
and once failing.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from test_bench_tables import load as load_bench  # noqa: E402


def load():
    return load_bench("bench_gpu_det")


def rows(more_ms, same):
    common = dict(default_ms=1.0, more_ms_checked=more_ms, same_bits=same, max_rel_diff=1e-16, load="1.0")
    return [
        dict(row="seed loop, float64", N=10**6, more_ms=more_ms, **common),
        dict(row="seed loop, float32", N=10**6, more_ms=more_ms, **common),
        dict(row="rows, hot row", N=16384, more_ms=2 * more_ms, **common),
        dict(row="many bins 1e6, float64", N=10**6, more_ms=2 * more_ms, **common),
    ]


@pytest.mark.parametrize("more_ms, same, verdict", [(1.4, True, "PASS"), (1.6, False, "FAIL")])
def test_det_table_ratios_and_verdicts(more_ms, same, verdict):
    text = load().det_table(rows(more_ms, same), lambda v: f"{v:.3g}")
    assert f"| seed loop, float64 | 1e6 | 1 | {more_ms:.3g} | {more_ms:.2f} | 1.5 |" in text, text
    assert f"| rows, hot row | 16384 | 1 | {2 * more_ms:.3g} | {2 * more_ms:.2f} | 3.0 |" in text, text
    verdicts = [line for line in text.splitlines() if line.startswith("- ")]
    assert f"| many bins 1e6, float64 | 1e6 | 1 | {2 * more_ms:.3g} | {2 * more_ms:.2f} | 3.0 |" in text, text
    assert len(verdicts) == 8, text
    assert all(line.startswith(f"- {verdict}:") for line in verdicts), text


def test_no_rows_no_table():
    assert load().det_table([], str) == ""
