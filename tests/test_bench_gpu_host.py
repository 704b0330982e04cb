"""``benchmarks/bench_gpu_host.py``: the host overhead per call of the GPU Ops (issue 28, item 5).

The script runs at a tiny size on the emulation with kernels skipped, and
must report the seed's loop at one wait, one copy and no allocation per
call; its table's verdicts are checked on rows written by hand, each target
once passing and once failing.
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_emu import build  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "bench_gpu_host.py")


def load():
    spec = importlib.util.spec_from_file_location("_bench_gpu_host", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(waits, allocs):
    common = dict(call_us=20.0, trusted_us=18.0, aesara_us=3.0, load="1.00", N=1000)
    return [
        dict(row="seed loop", waits=waits, d2h=1, allocs=allocs, ops_us={"GpuFusedBincount": 15.0}, **common),
        dict(row="acc += bincount", waits=waits, d2h=1, allocs=2, ops_us={}, **common),
        dict(row="sgd step", ops_us={}, **common),  # a real GPU: no counts
    ]


@pytest.mark.parametrize("waits, allocs, verdict", [(1, 0, "PASS"), (2, 1, "FAIL")])
def test_table_and_verdicts(waits, allocs, verdict):
    text = load().host_table(rows(waits, allocs))
    assert "| seed loop | 1000 |" in text and "GpuFusedBincount 15" in text
    assert "| sgd step | 1000 | - | - | - |" in text
    verdicts = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(verdicts) == 3 and all(line.startswith(f"- {verdict}:") for line in verdicts), text


def test_no_rows_no_table():
    assert load().host_table([]) == ""


@pytest.mark.skipif(build.cxx20_problem() is not None, reason="the emulation cannot be built here")
def test_tiny_run_on_the_emulation(tmp_path):
    out = tmp_path / "host.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--emulate", "--small", "--repeat", "3", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = {r["row"]: r for r in json.loads(out.read_text())}
    assert set(found) == {"seed loop", "acc += bincount", "sgd step"}
    seed = found["seed loop"]
    assert (seed["waits"], seed["d2h"], seed["allocs"]) == (1, 1, 0), seed
    assert found["acc += bincount"]["waits"] <= 1
    assert "PASS: seed loop: one wait per call" in proc.stdout
