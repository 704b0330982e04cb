"""The benchmark tables: sizes print as written, and the committed table matches its run.

``benchmarks/results/cpu-xeon-2core.md`` is written from the ``.json`` beside it;
``bench_cpu.py --table-from`` rewrites it without measuring.  These tests time
nothing.
"""
import importlib.util
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
RUN = os.path.join(BENCH, "results", "cpu-xeon-2core")


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
    bench_cpu.main(["--table-from", str(tmp_path / "run.json")])
    with open(RUN + ".md") as f:
        committed = f.read()
    assert (tmp_path / "run.md").read_text() == committed
    assert "| 16 |" in committed and "e+" not in committed
