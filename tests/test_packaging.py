"""A wheel built from the repository works in a fresh virtual environment."""
import os
import subprocess
import sys
import venv
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SMOKE = """
import os, sys, numpy as np, aesara
from aesara.tensor.extra_ops import bincount
import aesara_bincount
assert not aesara_bincount.__file__.startswith({root!r}), aesara_bincount.__file__
x = aesara.shared(np.random.default_rng(0).integers(0, 1000, 100_000))
f = aesara.function([], bincount(x))
assert any(type(n.op).__name__ == "Bincount" for n in f.maker.fgraph.toposort())
assert (f() == np.bincount(x.get_value())).all()
print("OK", aesara_bincount.__file__)
"""


@pytest.mark.slow
def test_wheel_installs_and_compiles_outside_the_checkout(tmp_path):
    dist = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), ROOT],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = dist.glob("aesara_bincount-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for source in ("common/host_helpers.h", "cpu/bincount.c", "cuda/bincount_hist.cuh"):
        assert f"aesara_bincount_core/c_code/{source}" in names, names

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    proc = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["AESARA_FLAGS"] = f"blas__ldflags=,compiledir={tmp_path / 'compiledir'}"
    work = tmp_path / "elsewhere"
    work.mkdir()
    proc = subprocess.run(
        [python, "-c", SMOKE.format(root=ROOT)], cwd=work, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK " + str(env_dir)), proc.stdout
