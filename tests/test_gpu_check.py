"""scripts/gpu_check.sh: every stage on the CPU emulation (its dry run), and its machinery.

The GPU check must produce its table in one go on the first GPU it meets, so
nothing in it may break unseen: :func:`test_dry_run_runs_every_stage` runs
``gpu_check.sh dry-run`` -- machine report, kernel-layer tests, kernel
benchmark, compute-sanitizer's workload, the bundle install (from a small
bundle made here), the GPU test-suite through Aesara, the Aesara benchmark,
the main job's GPU rows and the table -- and fails unless every stage is
``ok`` (or skipped because it needs a real GPU).  The other tests drive the
script's functions (it can be sourced) on their own, in seconds.
"""
import io
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_emu import build as emu  # noqa: E402

ROOT = emu.ROOT
SCRIPT = os.path.join(ROOT, "scripts", "gpu_check.sh")

#: The stages of a dry run, each ``ok``, with a bundle present.
DRY_RUN_OK = [
    "script-syntax", "emulation-build", "machine", "kernel-tests", "kernel-benchmark",
    "bundle-install", "bundle-import", "gpu-tests", "aesara-benchmark", "main-job",
    "sanitizer-workload", "table",
]  # fmt: skip
#: The stages a dry run may skip, and why: they need a real GPU.
DRY_RUN_SKIPPED = {"compute-sanitizer": "needs a GPU"}


def source(commands: str, tmp_path, **env) -> subprocess.CompletedProcess:
    """Run ``commands`` in bash after sourcing the script (which then runs nothing)."""
    script = f"source {SCRIPT}\nLOG={tmp_path}/log; SUMMARY={tmp_path}/summary; FAILED=0\n{commands}\n"
    return subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, **env),
    )  # fmt: skip


def summary(path) -> dict:
    """``{stage: verdict}`` from a summary.txt."""
    verdicts = {}
    with open(path) as f:
        for line in f:
            name, _, rest = line.strip().partition(" ")
            verdicts[name] = re.sub(r"\s+\d+s$", "", rest.strip())
    return verdicts


def make_bundle(folder, parts: int = 2) -> str:
    """A small bundle as make_bundle.sh lays it: an xz tarball split into ``parts``.

    It holds ``toolz`` (one of the bundle's pure-Python pins, copied from this
    Python) and the bundle's ``sitecustomize.py``, so the dry run can check
    that use_bundle puts the bundle in front of the machine's packages.
    """
    import toolz

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        tar.add(os.path.dirname(toolz.__file__), arcname="toolz",
                filter=lambda t: None if "__pycache__" in t.name else t)  # fmt: skip
        code = b"import os, site\nsite.addsitedir(os.path.dirname(os.path.abspath(__file__)))\n"
        info = tarfile.TarInfo("sitecustomize.py")
        info.size = len(code)
        tar.addfile(info, io.BytesIO(code))
    data = lzma.compress(raw.getvalue(), preset=0)
    os.makedirs(folder, exist_ok=True)
    step = -(-len(data) // parts)
    for i in range(parts):
        with open(os.path.join(folder, f"part-a{'abcdefgh'[i]}"), "wb") as f:
            f.write(data[i * step : (i + 1) * step])
    return str(folder)


def test_a_failing_stage_is_counted_and_the_others_still_run(tmp_path):
    proc = source(
        "stage good 10 true\n"
        "stage bad 10 false\n"
        "stage slow 1 sleep 30\n"
        "stage cannot 10 bash -c 'exit 77'\n"
        "broken() { echo inside; return 3; }\n"
        "stage function 10 broken\n"
        "skip later 'a reason'\n"
        'echo "FAILED=$FAILED"',
        tmp_path,
    )
    assert "FAILED=3" in proc.stdout, proc.stdout + proc.stderr
    assert summary(tmp_path / "summary") == {
        "good": "ok",
        "bad": "FAILED (exit 1)",
        "slow": "TIMED OUT after 1s",
        "cannot": "skipped: see the log",
        "function": "FAILED (exit 3)",
        "later": "skipped: a reason",
    }
    assert "inside" in (tmp_path / "log").read_text()


def test_run_pytest_fails_when_no_test_passed(tmp_path):
    (tmp_path / "test_skips.py").write_text("import pytest\n\ndef test_x():\n    pytest.skip('no GPU')\n")
    proc = source(f"PY={sys.executable}; run_pytest --noconftest {tmp_path}/test_skips.py; echo rc=$?", tmp_path)
    assert "no test passed" in proc.stdout and "rc=5" in proc.stdout, proc.stdout + proc.stderr


def test_bundle_is_unpacked_once_and_a_missing_part_is_refused(tmp_path):
    bundle = make_bundle(tmp_path / "bundle")
    state = tmp_path / "state"
    env = {"STATE": str(state), "BUNDLE": bundle}
    first = source("install_bundle; echo rc=$?; bundle_python; echo tag=$(bundle_python)", tmp_path, **env)
    assert "rc=0" in first.stdout and "tag=\n" in first.stdout, first.stdout + first.stderr
    assert (state / "site" / "toolz" / "__init__.py").exists()
    again = source("install_bundle; echo rc=$?", tmp_path, **env)
    assert "already unpacked" in again.stdout and "rc=0" in again.stdout
    # A compiled module names the bundle's Python.
    (state / "site" / "toolz" / "_x.cpython-312-x86_64-linux-gnu.so").write_bytes(b"")
    assert "tag=cpython-312" in source("echo tag=$(bundle_python)", tmp_path, **env).stdout
    os.remove(os.path.join(bundle, "part-ab"))
    damaged = source("install_bundle; echo rc=$?", tmp_path, STATE=str(tmp_path / "state2"), BUNDLE=bundle)
    assert "incomplete or damaged" in damaged.stdout and "rc=1" in damaged.stdout, damaged.stdout
    empty = source("install_bundle; echo rc=$?", tmp_path, STATE=str(state), BUNDLE=str(tmp_path / "none"))
    assert "no bundle parts" in empty.stdout and "rc=1" in empty.stdout


def test_each_device_command_fits_the_ten_minute_limit():
    # standalone, aesara and sanitize are one call each (a bundle part per call for the
    # first two): even with every stage at its time limit, each must end inside a
    # 10-minute command.
    proc = subprocess.run(["bash", SCRIPT, "plan"], capture_output=True, text=True, timeout=60)
    worst = dict(re.findall(r"(standalone|aesara|sanitize) (\d+)s", proc.stdout))
    assert set(worst) == {"standalone", "aesara", "sanitize"}, proc.stdout
    assert all(int(s) <= 570 for s in worst.values()), proc.stdout


def _emulation_problem():
    from aesara_bincount_core.cuda import nvrtc

    try:
        nvrtc.load()
    except nvrtc.NvrtcError as exc:
        return str(exc)
    return emu.cxx20_problem()


@pytest.mark.slow
def test_dry_run_runs_every_stage(tmp_path):
    why = _emulation_problem()
    if why:
        pytest.skip(why)
    results = os.path.join(ROOT, "benchmarks", "results")
    before = sorted(os.listdir(results))
    state_existed = os.path.exists(os.path.join(ROOT, ".gpu-check"))
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable, GPU_BUNDLE=make_bundle(tmp_path / "bundle"))
    env.pop("GPU_CHECK_STATE", None)
    proc = subprocess.run(
        ["bash", SCRIPT, "dry-run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800
    )
    tail = (proc.stdout + proc.stderr)[-6000:]
    verdicts = summary(out / "summary.txt")
    assert [s for s in DRY_RUN_OK if verdicts.get(s) != "ok"] == [], tail
    for name, why in DRY_RUN_SKIPPED.items():
        assert verdicts.get(name, "").startswith("skipped: " + why), (name, verdicts)
    assert set(verdicts) == set(DRY_RUN_OK) | set(DRY_RUN_SKIPPED), verdicts
    assert proc.returncode == 0, tail
    log = (out / "gpu_check.log").read_text()
    assert "toolz: bundle" in log  # use_bundle put the bundle in front
    assert "GpuBincount, aesara.function (host out)" in log  # the main job's GPU rows
    # compute-sanitizer's workload reached every kernel family through aesara.function
    for case in ("det bucket, 40 windows", "det rows, streamed narrow rows", "GpuElemwise, strided",
                 "GpuScatterSet, duplicates", "multi-index scatter-add", "table: kmeans step"):
        assert f"sanitize case {case}" in log, case
    table = (out / "gpu-table.md").read_text()
    assert "not GPU figures" in table and "| 20000 | 300 | uniform | int32 |" in table, table
    assert "| seed loop | 20000 |" in table and "| sgd step | 32 |" in table, table  # issue 18's rows
    assert "| seed loop | 20000 | 0 | yes |" in table, table  # issue 20: one fused kernel
    # Nothing emulated lands beside real results.
    assert sorted(os.listdir(results)) == before
    assert os.path.exists(os.path.join(ROOT, ".gpu-check")) == state_existed
    shutil.rmtree(out / "state", ignore_errors=True)
