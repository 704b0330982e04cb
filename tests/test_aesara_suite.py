"""Aesara's own tests, from its 2.9.4 source distribution, with aesara_bincount imported.

The tests are not in Aesara's wheel; the sdist is fetched once with
``pip download --no-binary :all: --no-deps aesara==2.9.4`` into
``.cache/aesara-sdist/`` (git-ignored) and only its ``tests/`` and
``conftest.py`` are unpacked, so the installed Aesara is the one under test.

Tests that assert an ``AdvancedIncSubtensor1`` node in a compiled graph check
Aesara's internals, not its results; they are listed in
:data:`INTERNALS_TESTS` and run with the rewrite excluded.
"""
import os
import subprocess
import sys
import tarfile

import pytest

import aesara

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache", "aesara-sdist")
VERSION = aesara.__version__

#: Tests run with ``optimizer_excluding=bincount``: each asserts how many
#: ``AdvancedIncSubtensor1`` nodes a compiled graph holds (an implementation
#: detail that the rewrites replace by ``Bincount`` or ``ScatterAdd``).
INTERNALS_TESTS = [
    # test_ok_list: the gradient of n[idx] is inc_subtensor(zeros_like(n)[idx], g),
    # which becomes Bincount(mode="scatter"); the test counts AdvancedIncSubtensor1.
    "tests/tensor/test_subtensor.py::TestSubtensor::test_ok_list",
    # test_advanced1_inc_and_set: the increments of bases of 1 to 4 dimensions
    # become ScatterAdd; the test counts AdvancedIncSubtensor1 (its results are
    # checked there too, and by tests/test_fuzz_rows.py).
    "tests/tensor/test_subtensor.py::TestSubtensor::test_advanced1_inc_and_set",
    # TestInferShape.test_AdvancedIncSubtensor1: asserts an AdvancedIncSubtensor1
    # node in the compiled graph; its set_subtensor cases become LinearIndex and
    # ScatterSet (issue 30), whose shapes and results tests/test_scatter_set.py checks.
    "tests/tensor/test_subtensor.py::TestInferShape::test_AdvancedIncSubtensor1",
]

#: Tests of Aesara's AdvancedIncSubtensor with several index arrays that check
#: its internals (the Op in the compiled graph, its ``inplace`` flag), which the
#: rewrites of issue 30 replace by LinearIndex, ScatterAdd and ScatterSet; run
#: with the rewrites excluded, and left out of the whole-file run.  Their
#: results are checked by tests/test_multi_index.py (test_aesaras_advinc_cases).
INTERNALS_MULTI_INDEX = [
    "tests/tensor/test_subtensor.py::TestAdvancedSubtensor::test_advinc_subtensor",
    "tests/tensor/test_subtensor.py::TestInferShape::test_AdvancedIncSubtensor",
]

#: TestBinCount, and the AdvancedIncSubtensor1 tests of test_subtensor.py.
SELECTED = [
    "tests/tensor/test_extra_ops.py::TestBinCount",
    "tests/tensor/test_subtensor.py",
]
SELECT_K = (
    "TestBinCount or AdvancedIncSubtensor1 or adv1 or advanced1 or IncSubtensor1 "
    "or inc_adv_subtensor1"
)


@pytest.fixture(scope="module")
def aesara_tests():
    """Folder holding Aesara's ``tests/`` and ``conftest.py`` for this version."""
    target = os.path.join(CACHE, f"aesara-{VERSION}")
    if os.path.isfile(os.path.join(target, "tests", "tensor", "test_extra_ops.py")):
        return target
    os.makedirs(CACHE, exist_ok=True)
    tarball = os.path.join(CACHE, f"aesara-{VERSION}.tar.gz")
    if not os.path.exists(tarball):
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
               "--no-deps", f"aesara=={VERSION}", "-d", CACHE]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, f"could not download Aesara's sdist:\n{proc.stderr}"
    prefix = f"aesara-{VERSION}/"
    with tarfile.open(tarball) as tar:
        members = [
            m for m in tar.getmembers()
            if m.name.startswith(prefix + "tests/") or m.name == prefix + "conftest.py"
        ]
        tar.extractall(CACHE, members=members, filter="data")
    return target


def run_aesara_pytest(folder, args, tmp_path, excluding=False):
    fired_file = tmp_path / "fired.txt"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    env["AESARA_BINCOUNT_FIRED_FILE"] = str(fired_file)
    flags = [env.get("AESARA_FLAGS", ""), "blas__ldflags="]
    if excluding:
        flags.append("optimizer_excluding=bincount")
    env["AESARA_FLAGS"] = ",".join(f for f in flags if f)
    # --rootdir: node ids (and so --deselect) are relative to the sdist's root.
    cmd = [sys.executable, "-m", "pytest", "-p", "aesara_suite_plugin", "-q", "--rootdir", str(folder),
           "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", *args]
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    fired = int(fired_file.read_text()) if fired_file.exists() else -1
    return proc, fired


def test_aesara_bincount_and_advanced_inc_subtensor1_tests_pass(aesara_tests, tmp_path):
    deselect = [a for t in INTERNALS_TESTS for a in ("--deselect", t)]
    proc, fired = run_aesara_pytest(aesara_tests, [*SELECTED, "-k", SELECT_K, *deselect], tmp_path)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and " failed" not in proc.stdout, tail
    assert fired > 0, f"the rewrite never fired in Aesara's tests:\n{tail}"


def test_internals_tests_pass_with_the_rewrite_excluded(aesara_tests, tmp_path):
    proc, fired = run_aesara_pytest(aesara_tests, INTERNALS_TESTS + INTERNALS_MULTI_INDEX, tmp_path,
                                    excluding=True)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    assert f"{len(INTERNALS_TESTS) + len(INTERNALS_MULTI_INDEX) + 1} passed" in proc.stdout, tail
    assert fired == 0, "the rewrite fired although it was excluded"


def test_internals_tests_do_see_bincount(aesara_tests, tmp_path):
    """Keeps INTERNALS_TESTS honest: with the rewrite on, each of them fails."""
    for test in INTERNALS_TESTS:
        proc, fired = run_aesara_pytest(aesara_tests, [test], tmp_path)
        assert proc.returncode != 0 and fired > 0, test
        assert "AdvancedIncSubtensor1" in proc.stdout, test


@pytest.mark.skipif(
    not os.environ.get("AESARA_BINCOUNT_FULL_AESARA_SUITE"),
    reason="set AESARA_BINCOUNT_FULL_AESARA_SUITE=1 to run all of test_subtensor.py and test_extra_ops.py",
)
def test_whole_files(aesara_tests, tmp_path):
    deselect = [a for t in INTERNALS_TESTS + INTERNALS_MULTI_INDEX for a in ("--deselect", t)]
    proc, fired = run_aesara_pytest(
        aesara_tests,
        ["tests/tensor/test_subtensor.py", "tests/tensor/test_extra_ops.py", *deselect],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert fired > 0
