"""The GPU rows of the scatter forms (``benchmarks/bench_gpu_scatter.py``) run at a tiny size.

Each row compiles the package's graph and Aesara's, times both and checks
that they agree; here they run once each on ``--small`` sizes, and every row
must agree and put its scatter on the GPU.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, WHY  # noqa: E402
from test_bench_tables import load as load_bench  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


def test_small_rows_agree_with_aesaras_graph():
    import cupy

    bench = load_bench("bench_gpu_scatter")
    rows = bench.scatter_rows(cupy, small=True, repeat=1)
    assert [r["row"] for r in rows] == list(bench.ROWS)
    assert all(r["same"] for r in rows), rows
    assert all(r["package_ms"] > 0 and r["aesara_ms"] > 0 for r in rows), rows
    assert "FAIL" not in bench.scatter_table(rows, str)


# The confusion matrix and the batched bincount of GPU indices with constant
# increments run on the GPU too: the placement puts the zero-filled result
# there, the indices are joined into rows on the device and checked with the
# call's status, and GpuScatterAdd adds them.
@pytest.mark.parametrize("name, op", [("confusion matrix", "GpuScatterAdd"),
                                      ("batched bincount", "GpuScatterAdd"),
                                      ("NLL gradient", "GpuScatterAdd"), ("set, duplicates", "GpuScatterSet")])
def test_each_row_runs_its_scatter_where_the_docs_say(name, op):
    bench = load_bench("bench_gpu_scatter")
    package, aesaras, _, _ = bench._functions(name, bench.ROWS[name][1])
    ops = [type(n.op).__name__ for n in package.maker.fgraph.toposort()]
    assert op in ops, ops
    assert op not in [type(n.op).__name__ for n in aesaras.maker.fgraph.toposort()]
