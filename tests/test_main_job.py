"""The main job, ``python -m aesara_bincount`` (``make demo``), on a small seed case.

It checks the result against numpy and returns 0; bad arguments are argparse
errors, not tracebacks.  It times nothing that is asserted.
"""
import subprocess
import sys

import numpy as np
import pytest

from aesara_bincount import __main__ as main_job
from aesara_bincount import gpu
from aesara_bincount.__main__ import main


def test_small_seed_case_passes(capsys):
    assert main(["-n", "2000", "--bins", "50", "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "result: OK" in out
    for row in ("numpy.bincount", "Aesara graph (excluding bincount)", "Bincount, openmp off", "Bincount, openmp on"):
        assert out.count(f"  {row}") == 2, row  # a row of counts and one of weighted


def test_one_element_one_bin(capsys):
    assert main(["-n", "1", "--bins", "1", "--repeat", "2"]) == 0
    assert "result: OK" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["-n", "0"], "0 is less than 1"),
        (["-n", "-5"], "-5 is less than 1"),
        (["--bins", "0"], "0 is less than 1"),
        (["--repeat", "-1"], "-1 is less than 0"),
        (["-n", "many"], "'many' is not an integer"),
    ],
)
def test_bad_arguments_are_usage_errors(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_runs_as_a_module():
    proc = subprocess.run(
        [sys.executable, "-m", "aesara_bincount", "-n", "500", "--repeat", "2"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "result: OK" in proc.stdout


def test_gpu_rows_need_a_gpu(monkeypatch):
    monkeypatch.setattr(gpu, "availability", lambda: (False, "no GPU in this test"))
    with pytest.raises(gpu.GpuUnavailableError, match="no GPU in this test"):
        main_job.gpu_rows(np.arange(3))


def test_failing_gpu_rows_fail_the_job(monkeypatch, capsys):
    # A GPU said usable whose rows break must not pass unseen (the GPU check runs the main job).
    def broken(x_np, w_np=None):
        raise RuntimeError("GpuBincount differs from numpy.bincount")

    monkeypatch.setattr(gpu, "availability", lambda: (True, "a GPU in this test"))
    monkeypatch.setattr(main_job, "gpu_rows", broken)
    assert main(["-n", "100", "--bins", "5", "--repeat", "1"]) == 1
    out = capsys.readouterr().out
    assert "GPU rows FAILED: RuntimeError: GpuBincount differs" in out and "result: FAILED" in out
