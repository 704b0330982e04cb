"""benchmarks/bench_fusion.py runs (at a tiny size): every cell compiles to the
expected node and agrees with numpy (the script asserts both), and the table
names the CPU and its plan."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_fusion_tiny(capsys):
    spec = importlib.util.spec_from_file_location(
        "bench_fusion_tiny", os.path.join(ROOT, "benchmarks", "bench_fusion.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--tiny"]) == 0
    out = capsys.readouterr().out
    assert "load average" in out and "bincount(x4 // 4)" in out and "stored weights" in out
    # The CPU model and the plan the loops ran under, with every figure (issue 41).
    assert " family " in out and "CPU plan weights=" in out
