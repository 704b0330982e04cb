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
    # Issue 21's measurement: CPU time beside wall time for the one-thread
    # candidates (not OpenMP's), the plain numba loop, the load of each cell.
    for r in data["rows"]:
        assert set(r["cpu_ms"]) <= set(r["ms"]) and "bincount_omp_on" not in r["cpu_ms"]
        assert {"numpy", "bincount_omp_off", "read"} <= set(r["cpu_ms"])
        assert len(r["load"]) == 3
        if "numba" in r["ms"]:
            assert "numba_max" in r["ms"] and "numba" in r["cpu_ms"]
    assert "CPU ms" in md and "| clock |" in md


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
    # The run's words stand under the headline plot and in the figures.
    words = load("run_info").run_words(json.loads((tiny_run / "tiny.json").read_text())["machine"])
    assert words in block and words in readme.split(".. bench-run: begin")[1].split(".. bench-run: end")[0]
    # Nothing outside the two blocks changes.
    committed = open(os.path.join(ROOT, "README.rst"), encoding="utf-8").read()

    def outside(text):
        head, rest = text.split(".. bench-run: begin")
        middle, rest = rest.split(".. bench-run: end")[1].split(".. bench-figures: begin")
        return head, middle, rest.split(".. bench-figures: end")[1]

    assert outside(readme) == outside(committed)


def _row(cpu, wall, load, n=10**6, bins=1000, weighted=True):
    return dict(n=n, bins=bins, dist="uniform", dtype="int64", weighted=weighted,
                ms=wall, cpu_ms=cpu, load=[load, load, load])


MACHINE = dict(cpu="c", cores=2, host="h", python="3", numpy="1", aesara="2", aesara_bincount="0",
               omp_threads="2", date="2026-12-01", load="0.5")


def _verdict(data, text):
    return next(t for t in load("cpu_report").targets(data) if t["target"].startswith(text))


def test_targets_are_judged_on_cpu_time_not_on_loaded_wall_time():
    """Issue 21: a busy machine cannot fake a win (nor a loss)."""
    import sys

    sys.path.insert(0, BENCH)  # cpu_report imports sizes and busy
    text = "1e6 values in 1000 bins, float64 weights: >= 1.2x the numba loop"
    fast_wall = {"numpy": 9.0, "bincount_omp_off": 1.0, "bincount_omp_on": 1.0, "numba": 5.0, "read": 0.1}
    # CPU time says 1.1x: not met, whatever the wall time (5x) says.
    cpu = {"numpy": 9.0, "bincount_omp_off": 1.0, "numba": 1.1, "read": 0.1}
    t = _verdict(dict(machine=MACHINE, rows=[_row(cpu, fast_wall, load=300.0)]), text)
    assert t["clock"] == "CPU" and t["met"] is False
    # No CPU times (an old run): wall time counts at a load below 1 per core only.
    t = _verdict(dict(machine=MACHINE, rows=[_row({}, fast_wall, load=300.0)]), text)
    assert t["met"] is None
    t = _verdict(dict(machine=MACHINE, rows=[_row({}, fast_wall, load=1.5)]), text)
    assert t["clock"] == "wall" and t["met"] is True
    # The OpenMP target reads wall time, and is not judged under load.
    omp = "quiet machine: OpenMP on no slower than off"
    slow_on = dict(fast_wall, bincount_omp_on=3.0)
    assert _verdict(dict(machine=MACHINE, rows=[_row(cpu, slow_on, load=300.0)]), omp)["met"] is None
    assert _verdict(dict(machine=MACHINE, rows=[_row(cpu, slow_on, load=0.5)]), omp)["met"] is False


def test_rows_targets_are_judged_on_cpu_time():
    bench_rows = load("bench_rows")
    wall = {"aesara": 50.0, "ours_omp_off": 1.0, "ours_omp_on": 0.5, "numba": 3.0, "torch_1thread": 3.0,
            "read": 0.9, "np_add_at": 9.0}
    cpu = dict(wall, numba=1.1)
    del cpu["ours_omp_on"]
    row = dict(form="zeros", n=10**5, nrows=10**4, width=64, dtype="float64", ms=wall, cpu_ms=cpu,
               load=[300.0, 300.0, 300.0])
    got = {t["what"]: t for t in bench_rows.targets_judged([row], MACHINE)}
    assert got["numba / ours >= 1.2"]["clock"] == "CPU" and got["numba / ours >= 1.2"]["met"] is False
    assert got["OpenMP on 2 cores: off / on >= 1.6"]["met"] is None  # wall time at load 300


def test_plots_draw_cpu_time_where_recorded(monkeypatch):
    """Issue 21's results carry thread CPU time (cpu_ms) for one-thread candidates:
    the plots draw it, wall time for the others, and the title says so."""
    import sys

    sys.path.insert(0, BENCH)  # plot_draw imports plot_data, cpu_report, sizes
    plot_draw = load("plot_draw")
    seen = {}
    monkeypatch.setattr(plot_draw, "_line_plot", lambda *a: seen.update(clock=a[5], value=a[9]))
    row = dict(n=10**6, bins=1000, dist="uniform", dtype="int64", weighted=False,
               ms={"numpy": 9.0, "bincount_omp_off": 5.0, "bincount_omp_on": 2.0, "read": 0.5},
               cpu_ms={"numpy": 3.0, "bincount_omp_off": 1.0, "read": 0.25})
    data = dict(kind="cpu", machine={}, rows=[row], paths=["x.json"])
    plot_draw.plot_time_vs_n(data, "unused.png", "uniform", "int64")
    assert [seen["value"](row, k) for k in ("numpy", "bincount_omp_off", "bincount_omp_on")] == [3.0, 1.0, 2.0]
    assert "thread CPU time" in seen["clock"]
    plot_draw.plot_speedup_vs_bins(data, "unused.png", "uniform", "int64")
    assert seen["value"](row, "bincount_omp_off") == 3.0 and "thread CPU time" in seen["clock"]
    old = dict(row, cpu_ms={})
    plot_draw.plot_time_vs_n(dict(data, rows=[old]), "unused.png", "uniform", "int64")
    assert seen["value"](old, "numpy") == 9.0 and "wall time" in seen["clock"]
    assert "CPU time" not in seen["clock"]
