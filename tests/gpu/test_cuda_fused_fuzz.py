"""Differential fuzzing of GpuFusedBincount: random scalar graphs on GPU data against the CPU graph.

The graphs are those of ``tests/test_fusion_fuzz.py`` (its ``cases``
strategy: integer graphs for ``x``, float and integer graphs for the
weights, a scatter-add onto zeros), built on GPU vector inputs and host 0-d
inputs.  Each case is compiled with the default rewrites, where the
weights (and ``x``, when its graph can run on the GPU) are computed in the
histogram kernel, and with ``excluding("gpu_bincount")``, where everything
runs on the host; the outcomes must be the same: integer results bit for
bit, float sums up to their order, or the same exception and message.
Every example compiles kernels on the emulation, so CI draws two.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, WHY, cupy  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.compile.mode import get_default_mode  # noqa: E402
from hypothesis import HealthCheck, given, note, settings  # noqa: E402

from aesara_bincount_core.gpu.fused import GpuFusedBincount  # noqa: E402
from aesara_bincount_core.gpu.type import GpuArrayType  # noqa: E402
from test_fusion import _assert_same_outcome  # noqa: E402
from test_fusion_fuzz import W_VECTORS, X_VECTORS, _values, cases  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}"),
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
]
CPU_MODE = get_default_mode().excluding("gpu_bincount")


def _gpu_inputs():
    ins = {name: GpuArrayType(dt, (None,))(name) for name, dt in {**X_VECTORS, **W_VECTORS}.items()}
    ins["s"] = at.scalar("s", dtype="int32")
    ins["th"] = at.scalar("th", dtype="float64")
    return ins


@settings(max_examples=40 if settings.default.max_examples >= 500 else 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(cases(_gpu_inputs))
def test_random_scalar_graphs_match_the_cpu_graph(case):
    cp = cupy()
    ins, outs, size, seed, _ = case
    size = max(size, 1000)  # empty and tiny inputs: tests/gpu/test_cuda_fused.py
    inputs = list(ins.values())
    gpu_f = aesara.function(inputs, outs, on_unused_input="ignore")
    cpu_f = aesara.function(inputs, outs, mode=CPU_MODE, on_unused_input="ignore")
    ops = [type(n.op) for n in gpu_f.maker.fgraph.toposort()]
    note(f"fused GPU nodes: {ops.count(GpuFusedBincount)}")
    # The fused-weights bincount of x = a always fuses (its weights graph only
    # has ops the GPU takes), unless merging gave its weights other clients.
    assert ops.count(GpuFusedBincount) >= 1, ops
    vals = [cp.asarray(v) if np.ndim(v) else v for v in _values(ins, size, seed)]
    _assert_same_outcome(gpu_f, cpu_f, *vals, outputs=(inputs, outs), mode=CPU_MODE)
