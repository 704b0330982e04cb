"""The benchmark scripts: they run, their tables print sizes as written, and
the committed table and README figures match their run.

``benchmarks/results/cpu-dev.md`` and the figures between the markers of
README.rst are written from ``cpu-dev.json``; ``bench_cpu.py --table-from``
rewrites them without measuring.  ``bench_cpu.py --tiny`` runs the whole
script (grid, busy cores, table, targets, plots, README) at tiny sizes, so
that it cannot rot; it checks results, not speed.
"""
import importlib.util
import json
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
RUN = os.path.join(BENCH, "results", "cpu-dev")


def load(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", os.path.join(BENCH, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench_cpu():
    return load("bench_cpu")


@pytest.mark.parametrize(
    "value, text", [(16, "16"), (20, "20"), (1000, "1e3"), (10**4, "1e4"), (10**6, "1e6"), (65536, "65536"), (1, "1")]
)
def test_sizes_print_as_written(value, text):
    # "%.0e" printed 16 bins as "2e+01": a size must read back as itself.
    assert load("sizes").size_text(value) == text


def test_gpu_table_writes_sizes_as_written():
    meta = dict(stack="standalone", gpu="test", python="3", numpy="2", cupy="14", torch=None,
                copy_bandwidth_GBps=1.0)
    row = dict(N=10**8, bins=16, kind="uniform", dtype="int32", kernel_ms=1.0, floor_ms=1.0, correct=True)
    text = load("bench_gpu").render([{"meta": meta, "rows": [row]}])
    assert "| 1e8 | 16 | uniform | int32 |" in text and "e+" not in text


def test_committed_table_is_written_from_its_run(bench_cpu, tmp_path):
    shutil.copy(RUN + ".json", tmp_path / "run.json")
    shutil.copy(os.path.join(ROOT, "README.rst"), tmp_path / "README.rst")
    bench_cpu.main(["--table-from", str(tmp_path / "run.json"), "--readme", str(tmp_path / "README.rst")])
    with open(RUN + ".md") as f:
        committed = f.read()
    assert (tmp_path / "run.md").read_text() == committed
    assert "| 16 |" in committed and "e+" not in committed
    assert "## Targets of issue 13" in committed
    # The README's figures are those of the committed run (only the file name differs).
    readme = (tmp_path / "README.rst").read_text().replace(str(tmp_path / "run.md"), "benchmarks/results/cpu-dev.md")
    assert readme == open(os.path.join(ROOT, "README.rst"), encoding="utf-8").read()


@pytest.fixture(scope="module")
def tiny_run(bench_cpu, tmp_path_factory):
    """The whole benchmark script at tiny sizes, plots and README included."""
    pytest.importorskip("matplotlib")
    tmp = tmp_path_factory.mktemp("bench")
    shutil.copy(os.path.join(ROOT, "README.rst"), tmp / "README.rst")
    bench_cpu.main(["--tiny", "--out", str(tmp), "--name", "tiny", "--plot", "--plot-out", str(tmp / "static"),
                    "--readme", str(tmp / "README.rst")])
    return tmp


def test_tiny_run_writes_table_targets_and_busy_rounds(tiny_run):
    data = json.loads((tiny_run / "tiny.json").read_text())
    assert len(data["rows"]) >= 8 and all(r["ms"]["bincount_omp_off"] > 0 for r in data["rows"])
    assert {r["weighted"] for r in data["rows"]} == {False, True}
    rounds = {(b["round"], b["burners"]) for b in data["busy"]}
    assert rounds == {(0, 0), (1, 1)}  # a quiet round and one with a burner
    md = (tiny_run / "tiny.md").read_text()
    assert "## Targets of issue 13" in md and "## Busy cores" in md
    assert "no cell slower than numpy" in md


def test_tiny_run_draws_the_plots(tiny_run):
    static = tiny_run / "static"
    manifest = json.loads((static / "plots.json").read_text())
    files = {e["file"] for e in manifest["plots"]}
    assert {"cpu_time_vs_n.png", "cpu_busy.png"} <= files  # the tiny grid has no seed or target cell
    for f in files:
        assert (static / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tiny_run_rewrites_the_readme_figures(tiny_run):
    readme = (tiny_run / "README.rst").read_text()
    block = readme.split(".. bench-figures: begin")[1].split(".. bench-figures: end")[0]
    assert "tiny.md" in block and "OpenMP on took" in block
    before, after = (open(os.path.join(ROOT, "README.rst"), encoding="utf-8").read().split(m) for m in
                     (".. bench-figures: begin", ".. bench-figures: end"))
    assert readme.startswith(before[0]) and readme.endswith(after[1])
