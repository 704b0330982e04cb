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
QUICK = os.path.join(ROOT, "benchmarks", "results", "cpu-quick.json")

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
                 "thread_safety", "api"):
        assert (tmp_path / f"{page}.html").is_file(), page
    api = (tmp_path / "api.html").read_text(encoding="utf-8")
    for name in ("Bincount", "bincount", "local_bincount", "match_bincount", "BincountMatch",
                 "reference_bincount", "check_output_size"):
        assert f'id="aesara_bincount.{name}"' in api or f'id="aesara_bincount.semantics.{name}"' in api, name
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


def fake_gpu_results(path):
    with open(QUICK, encoding="utf-8") as f:
        cpu = json.load(f)
    rows = []
    for row in cpu["rows"]:
        ms = {"numpy": row["ms"]["numpy"], "gpu_bincount": 0.1, "cupy": 0.2, "read": 0.01}
        rows.append(dict(row, ms=ms))
    machine = dict(cpu["machine"], gpu="Test GPU", cuda="12.4", cupy="13.3.0")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"kind": "gpu", "machine": machine, "rows": rows}, f)
    return path


def test_plot_script_cpu_only(tmp_path, plot_module):
    out = tmp_path / "static"
    written = plot_module.main([QUICK, "--out", str(out), "--results-dir", str(tmp_path)])
    names = sorted(os.path.basename(p) for p in written)
    assert names == ["cpu_speedup_vs_bins.png", "cpu_time_vs_n.png", "headline.png", "plots.json"]
    manifest = json.loads((out / "plots.json").read_text())
    kinds = {e["kind"] for e in manifest["plots"]}
    assert kinds == {"cpu", "headline"}
    for entry in manifest["plots"]:
        assert (out / entry["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "2026-11-30" in entry["caption"] or entry["kind"] == "headline"
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
    # Without GPU results the GPU plots disappear again.
    os.remove(gpu)
    plot_module.main([QUICK, "--out", str(out), "--results-dir", str(results)])
    manifest = json.loads((out / "plots.json").read_text())
    assert not [e for e in manifest["plots"] if e["kind"] == "gpu"]
    assert not (out / "gpu_time_vs_n.png").exists()


def test_plot_script_rejects_malformed_results(tmp_path, plot_module):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"machine": {}, "rows": [{"n": 1, "bins": 2, "ms": {}}]}))
    with pytest.raises(plot_module.SchemaError, match="lacks"):
        plot_module.load(str(bad))
