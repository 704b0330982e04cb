"""The README is a short front page that renders, whose examples run and whose links lead somewhere.

Its examples run through ``tests/readme_examples.py`` (what ``make doctest``
runs): the CPU one here, the GPU one on the CPU emulation of the GPU.  It
renders as PyPI renders a long description (``readme_renderer``, from the
``docs`` extra) and as docutils does with warnings as errors.  The version
that the changelog names last is the package's and setup.py's.  The tests
that need docutils (from the ``docs`` extra, which ``make test`` installs)
carry the ``docs`` mark.
"""
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.rst")
#: The front page stays short (issue 33: about 200 lines at most).
MAX_LINES = 200


def text(name="README.rst"):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def test_readme_is_a_short_front_page():
    readme = text()
    assert len(readme.splitlines()) <= MAX_LINES
    for title in ("Install", "Quick start", "Example on the CPU", "Example on the GPU",
                  "What changes in your graphs", "Supported stack", "Performance", "Documentation"):
        assert re.search(rf"^{re.escape(title)}\n-+$", readme, re.M), title
    # The two commands of the quick start, as a fresh clone runs them.
    assert "make demo    # the main job" in readme and "make test    # the test-suite" in readme
    assert '".[cuda12]"' in readme


def test_readme_links_lead_to_files():
    targets = re.findall(r"`[^`<]+<([^>`]+)>`_", text())
    local = [t for t in targets if "://" not in t]
    assert "docs/development.rst" in local and "CHANGELOG.rst" in local
    assert [t for t in local if not os.path.exists(os.path.join(ROOT, t))] == []
    images = re.findall(r"^\.\. image:: (\S+)", text(), re.M)
    assert images == ["docs/_static/headline.png"]


@pytest.mark.docs
def test_readme_renders_as_pypi_renders_it():
    if importlib.util.find_spec("readme_renderer") is None:
        pytest.fail("readme_renderer is not installed: run `make test`, which installs the docs extra")
    import io

    from readme_renderer.rst import render

    messages = io.StringIO()
    html = render(text(), stream=messages)
    assert html is not None and messages.getvalue() == "", messages.getvalue()
    assert "GpuBincount" in html and "<table" in html


@pytest.mark.docs
def test_readme_has_no_docutils_warning():
    from docutils.core import publish_doctree
    from docutils.utils import SystemMessage

    try:
        publish_doctree(text(), settings_overrides={"halt_level": 2, "report_level": 2})
    except SystemMessage as exc:  # pragma: no cover - the failure message
        pytest.fail(f"README.rst: {exc}")


@pytest.mark.docs
def test_docutils_check_catches_a_broken_readme():
    """The check above fails on a planted fault (an inline literal left open)."""
    from docutils.core import publish_doctree
    from docutils.utils import SystemMessage

    with pytest.raises(SystemMessage):
        publish_doctree(text() + "\nSee ``make docs.\n", settings_overrides={"halt_level": 2, "report_level": 5})


@pytest.mark.docs
def test_readme_examples_run_the_gpu_one_on_the_emulation():
    """``make doctest``'s check of the README: both sections run, nothing is skipped."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "readme_examples.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    for section in ("Example on the CPU", "Example on the GPU"):
        ran = re.search(rf"{section}: (\d+) examples, 0 failed", out)
        assert ran and int(ran.group(1)) >= 5, out[-3000:]


@pytest.mark.docs
def test_readme_examples_fail_on_a_wrong_gpu_result(tmp_path):
    """Planted faults: a wrong expected GPU result, and the GPU example run without the emulation."""
    script = os.path.join(ROOT, "tests", "readme_examples.py")
    bad = tmp_path / "README.rst"
    bad.write_text(text().replace("array([1, 2, 0, 3])", "array([1, 2, 0, 4])"), encoding="utf-8")
    proc = subprocess.run([sys.executable, script, "--readme", str(bad)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and re.search(r"Example on the GPU: \d+ examples, 1 failed", out), out[-3000:]
    assert re.search(r"Example on the CPU: \d+ examples, 0 failed", out), out[-3000:]
    # On the CPU, without the emulation, the GPU example fails whatever it expects.
    env = {k: v for k, v in os.environ.items() if k != "AESARA_BINCOUNT_EMULATED_GPU"}
    proc = subprocess.run([sys.executable, script, "--in-process", "gpu"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "no emulated GPU" in proc.stdout, proc.stdout + proc.stderr


def version_of_changelog():
    """The first version heading of CHANGELOG.rst after "Unreleased"."""
    heads = re.findall(r"^(\S[^\n]*)\n[-=]{3,}$", text("CHANGELOG.rst"), re.M)
    assert heads[0] == "Changelog" and heads[1] == "Unreleased", heads
    match = re.match(r"(\d+\.\d+\.\d+) \(\d{4}-\d{2}-\d{2}\)$", heads[2])
    assert match, heads[2]
    return match.group(1)


def test_version_agrees_with_changelog_and_setup():
    import aesara_bincount

    setup_version = re.search(r'^\s+version="([^"]+)"', text("setup.py"), re.M).group(1)
    assert aesara_bincount.__version__ == setup_version == version_of_changelog()
