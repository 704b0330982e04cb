"""Whole programs on the GPU (issue 29): no transfer inside, the CPU graph's values; the transfer report.

The MLP classifier's SGD step and the k-means step are built by
``benchmarks/gpu_programs.py`` (the GPU benchmark times the same graphs),
once on GPU shared variables and once on host shared variables; after a
few steps from the same start the parameters must agree.  An Op outside the
GPU table costs one copy each way, which :func:`aesara_bincount.gpu.report`
names.
"""
import importlib.util
import io
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gpu_cases import AVAILABLE, EMULATED, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.tensor.extra_ops import fill_diagonal  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from aesara_bincount.__main__ import main  # noqa: E402
from lift_cases import CPU_MODE, assert_same, inner_transfers, op_names, waits_and_copies  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


def _programs():
    path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks", "gpu_programs.py")
    spec = importlib.util.spec_from_file_location("_gpu_programs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROGRAMS = _programs()


@pytest.mark.parametrize("name", ["mlp step", "kmeans step"])
def test_program_has_no_transfer_inside_and_gives_the_cpu_values(name):
    build, sizes, args = PROGRAMS.PROGRAMS[name]
    g_in, g_out, g_upd, g_params = build(gpu.shared, sizes["small"])
    h_in, h_out, h_upd, h_params = build(aesara.shared, sizes["small"])
    f = aesara.function(g_in, g_out, updates=g_upd)
    ref = aesara.function(h_in, h_out, updates=h_upd, mode=CPU_MODE)
    assert not inner_transfers(f), op_names(f)
    names = op_names(f)
    if name == "mlp step":
        needed = {"GpuAdvancedSubtensor1", "GpuScatterAdd", "GpuTableOp"}
    else:
        needed = {"GpuBincount", "GpuScatterAdd", "GpuTableOp"}
    assert needed <= set(names), names
    buf = io.StringIO()
    assert gpu.report(f, file=buf) == []
    assert "0 transfer(s)" in buf.getvalue()
    if name == "mlp step" and EMULATED:  # issue 39: one wait per call, no copy inside
        assert waits_and_copies(f, *args) == (1, 1, 0)  # the first call of each
        assert waits_and_copies(f, *args) == (1, 1, 0)
        ref(*args)
        ref(*args)
    for _ in range(3):
        for got, expected in zip(f(*args), ref(*args)):
            assert_same(got, expected, float_ulps=4096)
    for g, h in zip(g_params, h_params):
        assert_same(g.get_value(), h.get_value(), float_ulps=4096)


def _graph_with_an_op_outside_the_table():
    X = gpu.shared(np.arange(12.0).reshape(3, 4) - 5.5, name="X")
    W = gpu.shared(np.linspace(-1, 1, 12).reshape(4, 3), name="W")
    # FillDiagonal has no GPU entry; the DimShuffle and the product around it do
    return at.dot(fill_diagonal(at.exp(X), 0.0).T * 2, W.T)


def test_an_op_outside_the_table_costs_one_copy_each_way():
    out = _graph_with_an_op_outside_the_table()
    f = aesara.function([], out)
    ref = aesara.function([], out, mode=CPU_MODE)
    transfers = [type(n.op).__name__ for n in inner_transfers(f)]
    assert sorted(transfers) == ["GpuFromHost", "HostFromGpu"], op_names(f)
    assert_same(f(), ref())
    buf = io.StringIO()
    found = gpu.report(f, file=buf)
    assert [t.direction for t in found] == ["GPU -> host", "host -> GPU"]
    assert all(type(t.cause.op).__name__ == "FillDiagonal" for t in found), buf.getvalue()
    assert "no GPU entry for FillDiagonal" in buf.getvalue()


def test_gpu_report_of_a_script(tmp_path, capsys):
    script = tmp_path / "user.py"
    script.write_text(
        "import numpy as np, aesara, aesara.tensor as at\n"
        "from aesara.tensor.extra_ops import fill_diagonal\n"
        "from aesara_bincount import gpu\n"
        "X = gpu.shared(np.ones((3, 3)))\n"
        "good = aesara.function([], at.special.softmax(at.dot(X, X), axis=-1).sum(), name='good')\n"
        "bad = aesara.function([], at.dot(fill_diagonal(X, 0.0), X).sum(), name='bad')\n"
    )
    assert main(["--gpu-report", str(script)]) == 0
    text = capsys.readouterr().out
    assert "good: 0 transfer(s)" in text, text
    assert "bad: 2 transfer(s)" in text and "FillDiagonal: no GPU entry for FillDiagonal" in text, text
