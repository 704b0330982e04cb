"""The documentation builds without warnings, its examples run, its plots are real.

The Sphinx builds run in subprocesses, as ``make docs`` / ``make doctest``
run them, into a temporary folder.  ``make test`` installs what they need
(the ``docs`` extra); ``make test-fast`` and ``-m "not docs"`` leave them out.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
STATIC = os.path.join(DOCS, "_static")
#: The committed CPU benchmark results (the file the plots are drawn from).
QUICK = os.path.join(ROOT, "benchmarks", "results", "cpu-dev.json")

pytestmark = pytest.mark.docs


def _require(module):
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed: run `make test`, which installs the docs extra")


def sphinx(builder, out_dir):
    _require("sphinx")
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder, DOCS, str(out_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def load_plot_module():
    spec = importlib.util.spec_from_file_location("bench_plot", os.path.join(ROOT, "benchmarks", "plot.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_html_builds_without_warnings(tmp_path):
    proc = sphinx("html", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for page in ("index", "getting_started", "how_it_works", "semantics", "performance",
                 "thread_safety", "api", "development", "changelog"):
        assert (tmp_path / f"{page}.html").is_file(), page
    api = (tmp_path / "api.html").read_text(encoding="utf-8")
    for name in ("Bincount", "bincount", "local_bincount", "match_bincount", "BincountMatch",
                 "reference_bincount", "check_output_size", "BincountEarlyRewriter"):
        assert any(
            f'id="{module}{name}"' in api
            for module in ("aesara_bincount.", "aesara_bincount_core.semantics.", "aesara_bincount.rewriting.")
        ), name
    performance = (tmp_path / "performance.html").read_text(encoding="utf-8")
    manifest = json.load(open(os.path.join(STATIC, "plots.json"), encoding="utf-8"))
    for entry in manifest["plots"]:
        assert entry["file"] in performance, entry["file"]
    if not any(e["kind"] == "gpu" for e in manifest["plots"]):
        assert "No GPU figures yet" in performance


def test_examples_run(tmp_path):
    """Every example of the docs compiles and runs an Aesara function and checks it."""
    proc = sphinx("doctest", tmp_path)
    report = (tmp_path / "output.txt").read_text(encoding="utf-8") if (tmp_path / "output.txt").exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + report
    ran = re.search(r"^\s*(\d+) tests$", report, re.MULTILINE)
    assert ran and int(ran.group(1)) >= 30, report
    assert "0 failures in tests" in report and "0 failures in setup code" in report, report
    for page in ("getting_started", "how_it_works", "semantics", "thread_safety"):
        assert f"Document: {page}" in report, page


def test_committed_plots_match_the_manifest():
    manifest = json.load(open(os.path.join(STATIC, "plots.json"), encoding="utf-8"))
    files = {e["file"] for e in manifest["plots"]}
    assert "headline.png" in files
    for entry in manifest["plots"]:
        assert os.path.isfile(os.path.join(STATIC, entry["file"])), entry["file"]
        assert entry["date"] and entry["sources"], entry
        for source in entry["sources"]:
            assert os.path.isfile(os.path.join(ROOT, source)), source
    readme = open(os.path.join(ROOT, "README.rst"), encoding="utf-8").read()
    images = re.findall(r"^\.\. image:: (\S+)", readme, re.MULTILINE)
    assert images, "the README embeds no plot"
    for image in images:
        assert os.path.isfile(os.path.join(ROOT, image)), image


@pytest.fixture
def plot_module():
    _require("matplotlib")
    return load_plot_module()


def fake_gpu_results(path, stack="aesara"):
    """A results file in the format ``benchmarks/bench_gpu.py --json`` writes."""
    rows = []
    for n in (10**6, 10**8):
        for bins in (1000, 10**6):
            for kind in ("uniform", "equal"):
                rows.append(dict(N=n, bins=bins, kind=kind, dtype="int32", correct=True,
                                 kernel_ms=n / 4e7, call_ms=n / 3e7, cupy_ms=n / 1e7,
                                 torch_ms=None, numpy_ms=n / 5e5, floor_ms=n / 1e9))
    seed = dict(N=10**6, bins=1000, kind="uniform", dtype="int64", correct=True, seed=True,
                kernel_ms=0.02, call_ms=0.05, cupy_ms=0.1, torch_ms=None, numpy_ms=2.0,
                floor_ms=0.002)
    if stack == "aesara":
        seed["aesara_ms"] = 0.3
    rows.append(seed)
    meta = dict(stack=stack, gpu="Test GPU", python="3.11.7", numpy="1.26.4", cupy="13.3.0",
                torch=None, copy_bandwidth_GBps=4000.0, availability="ok")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "rows": rows}, f)
    return path


def test_plot_script_cpu_only(tmp_path, plot_module):
    out = tmp_path / "static"
    written = plot_module.main([QUICK, "--out", str(out), "--results-dir", str(tmp_path)])
    names = sorted(os.path.basename(p) for p in written)
    assert names == ["cpu_busy.png", "cpu_speedup_vs_bins.png", "cpu_targets.png", "cpu_time_vs_n.png",
                     "headline.png", "plots.json"]
    manifest = json.loads((out / "plots.json").read_text())
    kinds = {e["kind"] for e in manifest["plots"]}
    assert kinds == {"cpu", "cpu-targets", "cpu-busy", "headline"}
    with open(QUICK, encoding="utf-8") as f:
        date = json.load(f)["machine"]["date"]  # the run's date, in every caption but the headline's
    for entry in manifest["plots"]:
        assert (out / entry["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert date in entry["caption"] or entry["kind"] == "headline"
    # The caption states the machine and the versions.
    cap = next(e["caption"] for e in manifest["plots"] if e["kind"] == "cpu")
    for text in ("cores", "numpy 1.26", "Aesara 2.9", "aesara_bincount"):
        assert text in cap, text


def test_plot_script_draws_gpu_plots_only_with_gpu_results(tmp_path, plot_module):
    results = tmp_path / "results"
    results.mkdir()
    gpu = fake_gpu_results(results / "gpu-test.json")
    out = tmp_path / "static"
    # The CPU file is given; the GPU file is found in the results folder.
    plot_module.main([QUICK, "--out", str(out), "--results-dir", str(results)])
    manifest = json.loads((out / "plots.json").read_text())
    gpu_entries = [e for e in manifest["plots"] if e["kind"] == "gpu"]
    assert {e["file"] for e in gpu_entries} == {"gpu_time_vs_n.png", "gpu_speedup_vs_bins.png"}
    assert all("Test GPU" in e["caption"] for e in gpu_entries)
    # The GPU grid is int32 only: the line plots use it rather than the int64 seed row.
    assert all("int32" in e["caption"] for e in gpu_entries)
    # Without GPU results the GPU plots disappear again.
    os.remove(gpu)
    plot_module.main([QUICK, "--out", str(out), "--results-dir", str(results)])
    manifest = json.loads((out / "plots.json").read_text())
    assert not [e for e in manifest["plots"] if e["kind"] == "gpu"]
    assert not (out / "gpu_time_vs_n.png").exists()


def test_plot_script_merges_the_gpu_runs(tmp_path, plot_module):
    standalone = plot_module.load(str(fake_gpu_results(tmp_path / "a.json", "standalone")))
    aesara_run = plot_module.load(str(fake_gpu_results(tmp_path / "b.json", "aesara")))
    assert standalone["kind"] == aesara_run["kind"] == "gpu"
    merged = plot_module.merge(standalone, aesara_run)
    assert len(merged["rows"]) == len(standalone["rows"])
    (seed,) = plot_module.select(merged["rows"], **plot_module.HEADLINE, weighted=False)
    assert set(seed["ms"]) == {"numpy", "read", "gpu_kernel", "gpu_call", "cupy", "gpu_bincount"}
    assert merged["machine"]["stack"] == "standalone"
    assert len(merged["paths"]) == 2


def test_plot_script_rejects_malformed_results(tmp_path, plot_module):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"machine": {}, "rows": [{"n": 1, "bins": 2, "ms": {}}]}))
    with pytest.raises(plot_module.SchemaError, match="lacks"):
        plot_module.load(str(bad))
