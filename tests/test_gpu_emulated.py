"""Run every ``gpu``-marked test on the CPU emulation of tests/gpu_emu.

No GPU needed: a fake libcuda runs the real CUDA kernels (compiled with g++
against cuda_emu.h) on CPU threads, a NumPy-backed fake CuPy provides the
arrays, and NVRTC (from the nvidia-cuda-nvrtc-cu12 wheel) still compiles the
kernels for real, so the whole path -- NVRTC, the driver calls of the kernel
layer and of the Op's C code, the launches, the kernels' logic -- runs.

What runs: ``pytest -m "gpu and not slow" tests`` -- the GPU suite
(``tests/gpu``) and the GPU variant of every test that takes a ``backend``
argument (``tests/backends.py``, ``tests/conftest.py``: the tests of the CPU
Op, on ``GpuBincount``).  A test written with ``backend`` joins this run by
itself.  Hypothesis draws 8 examples here, the same on every run (the ``few`` profile).
With ``AESARA_BINCOUNT_GPU_PER_FILE=N`` (``make gpu-emulated-short``, run
by hand) only N GPU tests of each file run; ``make test`` runs each GPU grid's
each-choice cover (``AESARA_BINCOUNT_GPU_GRID=each``, ``tests/conftest.py``).
The suite runs in a subprocess, so that the fakes never meet a real CuPy, on
:func:`jobs` pytest-xdist workers.

The run must be real, not skipped: every skip must say why the test cannot
run on the emulation (a ``CPU only:`` reason, or work too slow or too large
for the emulation), the main test files must each pass tests, and at least
:data:`MIN_PASSED` tests must pass in all.
"""
import collections
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_emu import build as emu  # noqa: E402

ROOT = emu.ROOT

#: Files whose GPU tests must pass on the emulation (module names as JUnit gives them).
MUST_PASS = (
    "tests.gpu.test_cuda_kernel_layer",
    "tests.gpu.test_cuda_op",
    "tests.gpu.test_cuda_rows",
    "tests.test_scatter_rows",
    "tests.test_scatter_rows_errors",
    "tests.test_op",
    "tests.test_bad_input",
    "tests.test_regressions",
    "tests.test_fuzz",
    "tests.test_pickling",
    "tests.gpu.test_gpu_table",
    "tests.gpu.test_gpu_programs",
    "tests.gpu.test_cuda_scatter_forms",
    "tests.gpu.test_cuda_scatter_bench",
)
#: At least this many tests pass in all (238 did on 2026-11-30, with 40 known
#: GPU faults as xfail: backends.GPU_KNOWN_FAULTS, since fixed; 558 later that
#: day, with GpuScatterAdd's tests and the rows tests on it).
MIN_PASSED = 540
#: The short set of ``make gpu-emulated-short``: a few GPU tests per file (tests/conftest.py).
SHORT = bool(os.environ.get("AESARA_BINCOUNT_GPU_PER_FILE"))
#: A skip on the emulation must give one of these reasons (``conftest.py``: cpu_only and
#: openmp_on; ``Backend.skip_on_emulation``; tests/gpu: sizes for a real GPU only).
ALLOWED_SKIPS = ("CPU only:", "too slow for the CPU emulation:", "too large for the CPU emulation")


def jobs():
    """pytest-xdist workers of the emulated run: ``AESARA_BINCOUNT_EMU_JOBS``, else
    one per core this process may use (0: no workers, the run in one process)."""
    given = os.environ.get("AESARA_BINCOUNT_EMU_JOBS")
    if given:
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _nvrtc_missing():
    from aesara_bincount_core.cuda import nvrtc

    try:
        nvrtc.load()
    except nvrtc.NvrtcError as exc:
        return str(exc)
    return None


#: Where the emulated run writes its wall time and its slowest tests (``.ci/run`` prints it).
SUMMARY = os.path.join(emu.BUILD_DIR, "emulated-summary.txt")


def write_summary(junit_xml, wall_s: float, path: str = SUMMARY, top: int = 10):
    """Write the emulated run's wall time and its ``top`` slowest tests to ``path``."""
    cases = [
        (float(case.get("time", 0.0)), f"{case.get('classname')}::{case.get('name')}")
        for case in ET.parse(junit_xml).getroot().iter("testcase")
    ]
    cases.sort(reverse=True)
    lines = [f"emulated GPU suite: {wall_s:.0f} s wall, {len(cases)} tests, {sum(t for t, _ in cases):.0f} s summed"]
    lines += [f"  {t:7.1f}s  {name}" for t, name in cases[:top]]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def outcomes(junit_xml):
    """``[(module, name, outcome, message)]``; outcome is passed, skipped, xfailed or failed."""
    rows = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag == "skipped":
                kind = child.get("type", "")
                outcome = "xfailed" if kind == "pytest.xfail" else "skipped"
                message = child.get("message", "")
            elif child.tag in ("failure", "error"):
                outcome, message = "failed", child.get("message", "")
        rows.append((case.get("classname"), case.get("name"), outcome, message))
    return rows


@pytest.mark.slow
def test_gpu_suite_on_the_cpu_emulation(tmp_path):
    why = _nvrtc_missing()
    if why:
        pytest.skip(why)
    problem = emu.cxx20_problem()
    if problem:
        pytest.skip(problem)
    lib = emu.build()
    junit = tmp_path / "gpu.xml"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", "-n", str(jobs()),
         "--dist", "worksteal", "-m", "gpu and not slow", f"--junitxml={junit}", "-o", "junit_family=xunit2", "tests"],
        cwd=ROOT, env=dict(emu.environment(lib), AESARA_BINCOUNT_GPU_GRID="each"), capture_output=True,
        text=True, timeout=3600,
    )  # fmt: skip
    tail = (proc.stdout + proc.stderr)[-8000:]
    if junit.exists():
        write_summary(junit, time.monotonic() - start, SUMMARY.replace(".txt", "-short.txt") if SHORT else SUMMARY)
    assert proc.returncode == 0, tail
    rows = outcomes(junit)
    odd_skips = sorted({msg for _, _, out, msg in rows if out == "skipped" and not msg.startswith(ALLOWED_SKIPS)})
    assert odd_skips == [], f"skips that do not say why the emulation cannot run them: {odd_skips}"
    passed = collections.Counter(module for module, _, out, _ in rows if out == "passed")
    assert [m for m in MUST_PASS if passed[m] == 0] == [], passed
    # The short set (AESARA_BINCOUNT_GPU_PER_FILE, make gpu-emulated-short) runs a few tests per file.
    assert sum(passed.values()) >= (len(MUST_PASS) if SHORT else MIN_PASSED), passed
    # Every test of the GPU run is a GPU variant or a GPU suite test: nothing ran on the CPU.
    not_gpu = [n for module, n, _, _ in rows if not module.startswith("tests.gpu.") and "gpu" not in n]
    assert not_gpu == [], not_gpu


def test_short_set_keeps_a_few_gpu_tests_of_each_file():
    """AESARA_BINCOUNT_GPU_PER_FILE=2: two GPU tests of each file are selected, the
    first and the last that are not skipped already; without it, all of them."""
    files = ["tests/gpu/test_cuda_rows.py", "tests/test_op.py"]

    def collected(**env):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
             "-m", "gpu and not slow", *files],
            cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return [line for line in proc.stdout.splitlines() if "::" in line]

    everything = collected(AESARA_BINCOUNT_GPU_PER_FILE="")
    short = collected(AESARA_BINCOUNT_GPU_PER_FILE="2")
    for name in files:
        all_of_file = [t for t in everything if t.startswith(name)]
        short_of_file = [t for t in short if t.startswith(name)]
        assert len(all_of_file) > 2 and len(short_of_file) == 2, (name, short_of_file)
        assert set(short_of_file) <= set(all_of_file)
        # Spread over the file: the first test, and one from its second half.
        assert short_of_file[0] == all_of_file[0], short_of_file
        assert all_of_file.index(short_of_file[1]) >= len(all_of_file) // 2, short_of_file


def test_each_choice_keeps_every_value_of_every_parameter_once():
    """make test's GPU grids: every value of every parameter of a GPU test is kept at
    least once, a product of two parameters is cut, CPU and skipped tests are kept."""
    import itertools
    from types import SimpleNamespace

    from conftest import each_choice

    def item(name, gpu=True, skip=False, **params):
        marks = {"gpu": gpu, "skip": skip}
        return SimpleNamespace(nodeid=f"tests/t.py::{name}[x]", callspec=SimpleNamespace(params=params),
                               get_closest_marker=lambda m: True if marks.get(m) else None)  # fmt: skip

    grid = [item("grid", a=a, b=b) for a, b in itertools.product(range(4), "xyz")]
    cpu = [item("grid_cpu", gpu=False, a=a, b=b) for a, b in itertools.product(range(4), "xyz")]
    skipped = [item("grid", skip=True, a=9, b="x")]
    kept, dropped = each_choice(grid + cpu + skipped)
    assert len(kept) + len(dropped) == 25 and cpu[0] in kept and skipped[0] in kept
    ours = [i for i in kept if i in grid]
    assert {i.callspec.params["a"] for i in ours} == set(range(4))
    assert {i.callspec.params["b"] for i in ours} == set("xyz")
    # in collection order: at most one case per value (4 + 3 - 1), not the 12 of the product
    assert len(ours) <= 6 and ours[0] is grid[0], [i.callspec.params for i in ours]


def test_xdist_workers_put_the_emulated_suite_first(monkeypatch):
    """Under pytest-xdist the workers collect, with ``numprocesses`` None in their
    options: the emulated GPU suite must still come first, then the slow tests, each
    group in collection order (it started 18 minutes into a cold make test when the
    sort asked the option only)."""
    from types import SimpleNamespace

    import conftest

    def item(name, slow=False):
        return SimpleNamespace(nodeid=name, get_closest_marker=lambda m: True if m == "slow" and slow else None)

    items = [item("tests/test_a.py::t"), item("tests/test_b.py::slow_b", slow=True),
             item("tests/test_gpu_emulated.py::test_gpu_suite_on_the_cpu_emulation", slow=True),
             item("tests/test_c.py::t"), item("tests/test_d.py::slow_d", slow=True)]  # fmt: skip
    config = SimpleNamespace(option=SimpleNamespace(numprocesses=None),
                             hook=SimpleNamespace(pytest_deselected=lambda items: None))  # fmt: skip
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    ordered = list(items)
    conftest.pytest_collection_modifyitems(config, ordered)
    assert [i.nodeid.split("::")[1] for i in ordered] == [
        "test_gpu_suite_on_the_cpu_emulation", "slow_b", "slow_d", "t", "t"]
    assert ordered[3] is items[0]
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    unordered = list(items)
    conftest.pytest_collection_modifyitems(config, unordered)  # one process: file order
    assert unordered == items
