"""Which Pythons the package supports, and how the Makefile picks one.

The supported range is setup.py's ``python_requires``; ``scripts/python_check.sh``
(called by the Makefile) reads it.  These tests run the script and ``make`` with
stub interpreters: shell scripts that answer the version probe
(``PY -c 'import sys; print(...)'``) with a version of our choice, or fail as a
pyenv shim of a version that is not selected does.
"""
import ast
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
from packaging.specifiers import SpecifierSet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK = os.path.join(ROOT, "scripts", "python_check.sh")
SUPPORTED = ["3.10", "3.11", "3.12"]
# What the Makefile and the CI machine need besides the stubs: bash, make, sed, timeout...
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# One check, with every probe failing or answering at once, takes well under a second here;
# the bound is "seconds", against minutes for a failed numpy build.
FAST_S = 15

needs_tools = pytest.mark.skipif(
    not (shutil.which("make") and shutil.which("bash")), reason="needs make and bash"
)


def setup_keywords():
    tree = ast.parse(open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read())
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup"]
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("python_requires", "classifiers")}


def stub(directory, name, version=None, exit_code=0):
    """An executable NAME in DIRECTORY that reports VERSION, or prints an error and exits."""
    path = os.path.join(str(directory), name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if version is None:
        body = f'echo "pyenv: {name}: command not found" >&2\nexit {exit_code or 127}\n'
    else:
        body = f"echo {version}\nexit {exit_code}\n"
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


def run(args, path_dirs=(), env=None, cwd=ROOT):
    """Run ARGS with only the stub folders and the system's folders on PATH."""
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "MAKEFLAGS", "MAKELEVEL", "VENV")}
    full["PATH"] = os.pathsep.join([*map(str, path_dirs), SYSTEM_PATH])
    full.update(env or {})
    t0 = time.monotonic()
    proc = subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, timeout=120)
    proc.seconds = time.monotonic() - t0
    return proc


def check(*args, **kw):
    return run(["bash", CHECK, *args], **kw)


# -- the range, in one place -------------------------------------------------------------

def test_python_requires_is_the_supported_range():
    spec = SpecifierSet(setup_keywords()["python_requires"])
    for version in ("3.10.0", "3.10.13", "3.11.7", "3.12.0", "3.12.1", "3.12.99"):
        assert version in spec, version
    for version in ("3.9.18", "3.13.0", "3.14.0", "2.7.18"):
        assert version not in spec, version


def test_the_script_reads_the_range_from_setup_py():
    proc = check("--supported")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == SUPPORTED


def test_classifiers_name_the_supported_versions():
    classifiers = setup_keywords()["classifiers"]
    versions = [c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions == SUPPORTED


@pytest.mark.parametrize("doc", ["README.rst", "docs/getting_started.rst"])
def test_the_docs_state_the_range(doc):
    text = " ".join(open(os.path.join(ROOT, doc), encoding="utf-8").read().split())
    assert "Python 3.10, 3.11 and 3.12" in text, doc
    # No sentence left over from when only one version was named.
    assert "Python 3.11," not in text and "with Python 3.11 and" not in text, doc


def test_the_running_python_is_supported():
    assert "%d.%d" % sys.version_info[:2] in SUPPORTED


# -- an unsupported interpreter stops at once --------------------------------------------

@pytest.mark.parametrize("version", ["3.13.0", "3.9.18", "2.7.18"])
def test_an_unsupported_python_is_refused_with_the_supported_versions(tmp_path, version):
    py = stub(tmp_path, "python-x", version)
    proc = check("--given", py, "--goal", "demo")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert f"is Python {version}; aesara_bincount needs Python 3.10, 3.11 or 3.12." in proc.stderr
    assert "make demo PYTHON=python3.12" in proc.stderr
    assert proc.seconds < FAST_S


def test_why_3_13_cannot_work(tmp_path):
    proc = check("--given", stub(tmp_path, "python-x", "3.13.0"))
    assert "numpy 1.26, the last numpy 1.x, has no build for Python 3.13" in proc.stderr


def test_a_python_that_does_not_run_is_refused(tmp_path):
    # A pyenv shim of a version that is not selected exits 127.
    proc = check("--given", stub(tmp_path, "python3.12"), "--goal", "test")
    assert proc.returncode == 1
    assert "does not run" in proc.stderr and "make test PYTHON=python3.12" in proc.stderr
    assert "It says: pyenv: python3.12: command not found" in proc.stderr


@needs_tools
def test_make_refuses_before_it_creates_the_venv(tmp_path):
    venv = tmp_path / "venv"
    py = stub(tmp_path / "bin", "python3.13", "3.13.0")
    proc = run(["make", "--no-print-directory", "demo", f"PYTHON={py}", f"VENV={venv}"])
    assert proc.returncode != 0
    assert "aesara_bincount needs Python 3.10, 3.11 or 3.12" in proc.stderr
    assert "make demo PYTHON=python3.12" in proc.stderr
    assert not venv.exists()
    assert proc.seconds < FAST_S


# -- an explicit PYTHON is respected ------------------------------------------------------

def test_an_explicit_supported_python_is_used_as_given(tmp_path):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", "3.12.1")
    py = stub(tmp_path, "my-python", "3.10.13")
    proc = check("--given", py, path_dirs=[bin_dir])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == py


def test_an_explicit_unsupported_python_is_not_replaced(tmp_path):
    # Even with a supported python3.12 on PATH, PYTHON=python3.13 is refused, not swapped.
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3.12", "3.12.1")
    proc = check("--given", stub(bin_dir, "python3.13", "3.13.0"), path_dirs=[bin_dir])
    assert proc.returncode == 1 and proc.stdout == ""
    assert "Python 3.12 is here:  make demo PYTHON=python3.12" in proc.stderr


@needs_tools
@pytest.mark.parametrize("how", ["command line", "environment"])
def test_make_uses_an_explicit_python(tmp_path, how):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", "3.13.0")
    stub(bin_dir, "python3.12", "3.12.1")
    py = stub(tmp_path, "my-python", "3.11.7")
    args = ["make", "--no-print-directory", "python-check", f"VENV={tmp_path / 'venv'}"]
    if how == "command line":
        proc = run(args + [f"PYTHON={py}"], path_dirs=[bin_dir])
    else:
        proc = run(args, path_dirs=[bin_dir], env={"PYTHON": py})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"python-check: {py} ("), proc.stdout
    assert "instead" not in proc.stderr


def test_a_venv_of_another_python_is_not_used_silently(tmp_path):
    stub(tmp_path / "venv" / "bin", "python", "3.11.7")
    proc = check("--given", stub(tmp_path, "py312", "3.12.1"), "--venv", str(tmp_path / "venv"))
    assert proc.returncode == 1
    assert "was made with Python 3.11.7" in proc.stderr and "VENV=.venv-3.12" in proc.stderr
    # The same version is fine.
    proc = check("--given", stub(tmp_path, "py311", "3.11.2"), "--venv", str(tmp_path / "venv"))
    assert proc.returncode == 0, proc.stderr


# -- without PYTHON: python3, else a supported python3.X from PATH ------------------------

def test_a_supported_python3_is_used(tmp_path):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", "3.11.7")
    stub(bin_dir, "python3.12", "3.12.1")
    proc = check("--default", "python3", path_dirs=[bin_dir])
    assert proc.returncode == 0 and proc.stdout.strip() == "python3"
    assert proc.stderr == ""


def test_the_fallback_takes_a_supported_python_that_runs(tmp_path):
    # python3 is 3.13; python3.12 is a pyenv shim that does not run; python3.11 works.
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", "3.13.0")
    stub(bin_dir, "python3.12")
    stub(bin_dir, "python3.11", "3.11.7")
    proc = check("--default", "python3", path_dirs=[bin_dir])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "python3.11"
    assert "python3 is Python 3.13.0" in proc.stderr
    assert "using python3.11 (Python 3.11.7) instead" in proc.stderr


def test_the_fallback_prefers_the_newest(tmp_path):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", "3.13.0")
    stub(bin_dir, "python3.12", "3.12.1")
    stub(bin_dir, "python3.11", "3.11.7")
    assert check("--default", "python3", path_dirs=[bin_dir]).stdout.strip() == "python3.12"


def test_a_name_that_lies_about_its_version_is_not_taken(tmp_path):
    # python3.12 on PATH that reports 3.13 is not a Python 3.12.
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", "3.13.0")
    stub(bin_dir, "python3.12", "3.13.0")
    stub(bin_dir, "python3.11", "3.11.7")
    assert check("--default", "python3", path_dirs=[bin_dir]).stdout.strip() == "python3.11"


def test_no_supported_python_at_all(tmp_path):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", "3.13.0")
    for v in SUPPORTED:
        stub(bin_dir, f"python{v}")
    proc = check("--default", "python3", "--goal", "demo", path_dirs=[bin_dir])
    assert proc.returncode == 1 and proc.stdout == ""
    assert "python3 is Python 3.13.0; aesara_bincount needs Python 3.10, 3.11 or 3.12." in proc.stderr
    assert "make demo PYTHON=python3.12" in proc.stderr
    assert proc.seconds < FAST_S


@needs_tools
def test_make_says_which_python_it_falls_back_to(tmp_path):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3", "3.13.0")
    stub(bin_dir, "python3.12", "3.12.1")
    proc = run(["make", "--no-print-directory", "python-check", f"VENV={tmp_path / 'venv'}"], path_dirs=[bin_dir])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("python-check: python3.12 ("), proc.stdout
    assert "using python3.12 (Python 3.12.1) instead" in proc.stderr


# -- finding a given version (make test-py312, CI) ----------------------------------------

def test_find_takes_path_first(tmp_path):
    bin_dir = tmp_path / "bin"
    stub(bin_dir, "python3.98", "3.98.0")
    proc = check("--find", "3.98", path_dirs=[bin_dir], env={"PYENV_ROOT": str(tmp_path / "none")})
    assert proc.returncode == 0 and proc.stdout.strip() == "python3.98"


def test_find_looks_in_pyenv_past_a_shim_that_does_not_run(tmp_path):
    bin_dir, root = tmp_path / "shims", tmp_path / ".pyenv"
    stub(bin_dir, "python3.98")
    stub(root / "versions" / "3.98.2" / "bin", "python3.98", "3.98.2")
    stub(root / "versions" / "3.98.10" / "bin", "python3.98", "3.98.10")
    stub(root / "versions" / "3.98.11" / "bin", "python3.98", exit_code=1)  # broken
    proc = check("--find", "3.98", path_dirs=[bin_dir], env={"PYENV_ROOT": str(root)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(root / "versions" / "3.98.10" / "bin" / "python3.98")


def test_find_fails_loudly(tmp_path):
    proc = check("--find", "3.99", env={"PYENV_ROOT": str(tmp_path)})
    assert proc.returncode == 1 and proc.stdout == ""
    assert "No working Python 3.99 here" in proc.stderr


# -- the GPU bundle's pins ----------------------------------------------------------------

BUNDLE_SCRIPT = os.path.join(os.path.dirname(ROOT), "shared", "gpu-env", "make_bundle.sh")
PINS = os.path.join(ROOT, "scripts", "gpu-bundle-constraints.txt")


def pinned(requirements):
    """{name: specifier} of the requirements that pin a version (==, <)."""
    out = {}
    for req in requirements:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*((?:==|<|<=)\s*[0-9][0-9.]*)", req.strip())
        if m:
            out[m.group(1).lower()] = m.group(2).replace(" ", "")
    return out


@pytest.mark.skipif(not os.path.exists(BUNDLE_SCRIPT), reason="no ../shared/gpu-env beside the repository")
def test_the_py312_pins_are_the_bundles():
    script = open(BUNDLE_SCRIPT, encoding="utf-8").read()
    (pins_line,) = re.findall(r"^pins=\((.*)\)$", script, re.M)
    bundle = pinned(p.strip('"') for p in pins_line.split())
    bundle.update(pinned(re.findall(r"(nvidia-cuda-nvrtc-cu12==[0-9.]+)", script)))
    lines = [ln.split("#")[0] for ln in open(PINS, encoding="utf-8")]
    ours = pinned(ln for ln in lines if ln.strip())
    assert ours == bundle
    assert {"numpy", "scipy", "aesara", "setuptools", "nvidia-cuda-nvrtc-cu12"} <= set(ours)


# -- pip's own refusal ---------------------------------------------------------------------

@pytest.mark.slow
def test_pip_refuses_an_unsupported_python(tmp_path):
    found = check("--find", "3.13")
    if found.returncode != 0:
        pytest.skip("no Python 3.13 here")
    venv = tmp_path / "venv313"
    subprocess.run([found.stdout.strip(), "-m", "venv", str(venv)], check=True, timeout=300)
    # With the venv's own pip (24.2 for Python 3.13.0), which resolves the dependencies
    # before Requires-Python: without setup.py's markers it would build numpy 1.26 from
    # source for minutes (and time out here) before refusing.
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--dry-run", ROOT],
        capture_output=True, text=True, timeout=240,
    )
    seconds = time.monotonic() - t0
    assert proc.returncode != 0
    assert "ERROR: Package 'aesara-bincount' requires a different Python: 3.13" in proc.stderr, proc.stderr[-3000:]
    assert "numpy" not in proc.stdout, proc.stdout
    assert seconds < 120, seconds
