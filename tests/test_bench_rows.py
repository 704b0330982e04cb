"""benchmarks/bench_rows.py runs at a tiny size, and its committed table matches its run.

The timings of a tiny run mean nothing; this test keeps the script working
(every candidate computes the checked result, the table and the plot are
written).  It times nothing itself.
"""
import glob
import importlib.util
import json
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")


def load(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", os.path.join(BENCH, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench_rows():
    return load("bench_rows")


def test_quick_run_writes_table_json_and_plot(bench_rows, tmp_path):
    pytest.importorskip("matplotlib")
    rows = bench_rows.main(
        ["--quick", "--out", str(tmp_path), "--name", "quick", "--plot", "--plot-out", str(tmp_path / "rows.png")]
    )
    assert {r["form"] for r in rows} == {"zeros", "base", "inplace"}
    for r in rows:
        assert {"aesara", "ours_omp_off", "ours_omp_on", "np_add_at", "read"} <= set(r["ms"])
    data = json.loads((tmp_path / "quick.json").read_text())
    assert data["kind"] == "rows" and len(data["rows"]) == len(rows)
    text = (tmp_path / "quick.md").read_text()
    assert "Targets of issue 14" in text and "| zeros | 2000 | 100 | 8 | float64 |" in text
    assert (tmp_path / "rows.png").stat().st_size > 10_000


def test_results_are_not_read_as_bincount_results(bench_rows, tmp_path):
    """plot.py's discovery of CPU and GPU files skips a rows results file."""
    plot = load("plot")
    rows = [dict(form="zeros", n=10, nrows=5, width=2, dtype="float64", ms={"read": 1.0, "aesara": 2.0})]
    bench_rows.write(rows, dict(cpu="c", cores=2, host="h", python="3", numpy="1", aesara="2",
                                aesara_bincount="0", omp_threads="2", date="2026-11-30"),
                     str(tmp_path), "rows-test")
    assert plot.discover("cpu", str(tmp_path)) is None


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(BENCH, "results", "rows-*.json"))))
def test_committed_table_is_written_from_its_run(bench_rows, path, tmp_path):
    copy = tmp_path / os.path.basename(path)
    shutil.copy(path, copy)
    bench_rows.main(["--from", str(copy)])
    with open(os.path.splitext(path)[0] + ".md") as f:
        assert (tmp_path / (copy.stem + ".md")).read_text() == f.read()
