"""The committed plots show the results they claim to, from the run the README's figures come from.

Every PNG in ``docs/_static/`` carries, in its metadata (PNG text chunks,
written by ``benchmarks/plot_draw._save``), the id of the run it was drawn
from, that run in words (date, time, load average), the results file(s) and a
digest of their figures (``benchmarks/run_info.py``).  A plot that is not
redrawn after its results change, or that was drawn from another run than the
README's table, fails here.  The first version of this test failed on the
plots committed before it (drawn at 10:50 from results re-measured three
times since, with no metadata at all).
"""
import glob
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
STATIC = os.path.join(ROOT, "docs", "_static")
sys.path.insert(0, BENCH)

import plot_data  # noqa: E402
import run_info  # noqa: E402

PLOTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(STATIC, "*.png")))


def results_of(source: str) -> dict:
    """The results a plot names (several files are merged as ``plot.py`` merges them)."""
    data = None
    for path in source.split(", "):
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            raw = json.load(f)
        if raw.get("kind") == "rows":  # bench_rows.py's results, drawn by plot_draw.plot_rows as they are
            return raw
        one = plot_data.load(os.path.join(ROOT, path))
        data = one if data is None else plot_data.merge(data, one)
    return data


def check_plot(png: str) -> dict:
    """The results of ``png`` (a path), after checking that its metadata matches them."""
    meta = run_info.read_png_text(png)
    name = os.path.basename(png)
    assert run_info.PNG_RUN_ID in meta, f"{name}: no run id in its metadata: redraw it (make plots)"
    data = results_of(meta[run_info.PNG_SOURCE])
    machine = data["machine"]
    assert meta[run_info.PNG_RUN_ID] == machine.get("run_id"), (name, meta, machine.get("run_id"))
    assert meta[run_info.PNG_RUN] == run_info.run_words(machine), name
    assert meta[run_info.PNG_DIGEST] == run_info.data_digest(data), (
        f"{name} was drawn from other figures than {meta[run_info.PNG_SOURCE]} now holds: redraw it")
    return data


def test_every_plot_has_a_plot():
    manifest = json.load(open(os.path.join(STATIC, "plots.json"), encoding="utf-8"))
    assert {e["file"] for e in manifest["plots"]} | {"rows.png"} <= set(PLOTS)


@pytest.mark.parametrize("name", PLOTS)
def test_plot_shows_the_results_it_names(name):
    check_plot(os.path.join(STATIC, name))


def test_readme_figures_and_headline_are_one_run():
    """The README names the run of its table in the words the headline's foot prints."""
    data = check_plot(os.path.join(STATIC, "headline.png"))
    readme = open(os.path.join(ROOT, "README.rst"), encoding="utf-8").read()
    block = readme.split(".. bench-figures: begin")[1].split(".. bench-figures: end")[0]
    assert run_info.run_words(data["machine"]) in block
    assert f"``{data['machine']['run_id']}``" in block
    # The words also stand under the headline plot itself.
    top = readme.split(".. bench-figures: begin")[0]
    assert run_info.run_words(data["machine"]) in top.split(".. image:: docs/_static/headline.png")[1]


def test_a_changed_result_is_caught(tmp_path):
    """A planted fault: one figure of the results changed after the plot was drawn."""
    meta = run_info.read_png_text(os.path.join(STATIC, "headline.png"))
    source = meta[run_info.PNG_SOURCE]
    data = json.load(open(os.path.join(ROOT, source), encoding="utf-8"))
    data["rows"][0]["ms"]["numpy"] *= 1.01
    assert run_info.data_digest(data) != meta[run_info.PNG_DIGEST]


def test_png_text_chunks_round_trip(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(1, 1))
    fig.savefig(tmp_path / "a.png", metadata={"Run id": "r1", "Data digest": "abc"})
    plt.close(fig)
    got = run_info.read_png_text(str(tmp_path / "a.png"))
    assert got["Run id"] == "r1" and got["Data digest"] == "abc"
