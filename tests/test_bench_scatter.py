"""benchmarks/bench_scatter.py runs at a tiny size (its timings mean nothing).

Every candidate's result is checked against ``np.add.at`` inside the
script; this keeps it working, and checks that the report names each target
and the load average.  It times nothing itself.
"""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quick_run_reports_targets_and_load(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("_bench_scatter", os.path.join(ROOT, "benchmarks", "bench_scatter.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = bench.main(["--quick", "--json", str(tmp_path / "quick.json"), "--md", str(tmp_path / "quick.md")])
    assert [r["cell"] for r in rows] == ["confusion", "batched", "batched_flat", "nll_grad"]
    for r in rows:
        assert {"aesara", "ours", "numpy"} <= set(r["cpu_ms"])
    out = capsys.readouterr().out
    assert out.count(">= 10.0x Aesara's graph") == 4 and out.count(">= 1.2x numba loop") == 4
    assert "load average" in out and "ours vs numba" in out and "CPU: " in out
    assert (tmp_path / "quick.json").stat().st_size > 0 and (tmp_path / "quick.md").stat().st_size > 0
