"""benchmarks/bench_sgd.py runs at a tiny size, and its committed table matches its run.

The timings of a tiny run mean nothing; this test keeps the script working
(every candidate gives the checked table after one step, the sparse step's
graph is one in-place scatter-add, the table and the JSON are written).  It
times nothing itself.
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
def bench_sgd():
    return load("bench_sgd")


def test_quick_run_writes_table_and_json(bench_sgd, tmp_path):
    rows = bench_sgd.main(["--quick", "--out", str(tmp_path), "--name", "quick"])
    assert [(r["nrows"], r["batch"]) for r in rows] == [(200, 50), (2000, 50)]
    for r in rows:
        assert {"sparse", "dense", "aesara", "inc_subtensor", "numpy"} <= set(r["cpu_ms"])
        assert "ScatterAdd{onto='base', inplace=True, openmp=False}" in r["graphs"]["sparse"]
        assert any("onto='zeros'" in op for op in r["graphs"]["dense"])
    data = json.loads((tmp_path / "quick.json").read_text())
    assert data["kind"] == "sgd" and len(data["rows"]) == 2
    text = (tmp_path / "quick.md").read_text()
    assert "| 200 | 50 |" in text and "| 2000 | 50 |" in text
    assert "V = 2000 over V = 200" in text and "family" in text


def test_results_are_not_read_as_bincount_results(bench_sgd, tmp_path):
    """plot.py's discovery of CPU and GPU files skips an SGD results file."""
    plot = load("plot")
    rows = [dict(nrows=10, batch=5, cpu_ms={"sparse": 1.0, "dense": 2.0}, load=[1.0],
                 graphs={"sparse": ["ScatterAdd"]})]
    bench_sgd.write(rows, dict(cpu="c", cores=2, host="h", python="3", numpy="1", aesara="2",
                               aesara_bincount="0", date="2026-12-05"), str(tmp_path), "sgd-test")
    assert plot.discover("cpu", str(tmp_path)) is None


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(BENCH, "results", "sgd-*.json"))))
def test_committed_table_is_written_from_its_run(bench_sgd, path, tmp_path):
    copy = tmp_path / os.path.basename(path)
    shutil.copy(path, copy)
    bench_sgd.main(["--from", str(copy)])
    with open(os.path.splitext(path)[0] + ".md") as f:
        assert (tmp_path / (copy.stem + ".md")).read_text() == f.read()
