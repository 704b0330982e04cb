"""The scatter forms of issue 30 in the GPU benchmark: GPU rows of ``bench_scatter.py``.

Loaded by ``benchmarks/bench_gpu.py`` (the Aesara stack only), which adds
:func:`scatter_rows` to its JSON under ``"scatter"`` and
:func:`scatter_table` to its table.  Each row times one function of GPU
shared variables, result kept on the GPU (``gpu_from_host``), compiled with
the package's rewrites ("package") and with them excluded
(``mode.excluding("bincount")``: Aesara's own graph, ``np.add.at`` or
numpy's assignment on host copies between transfers):

``confusion matrix``
    ``inc_subtensor(zeros((K, K))[y, p], 1)``, ``y``, ``p`` int64 GPU
    vectors of N = 1e6 pairs, K = 100 (``--small``: 2,000, K = 10), on the
    GPU: the pairs joined into rows and checked on the device (the call's
    status), then ``GpuScatterAdd`` onto zeros.
``batched bincount``
    ``inc_subtensor(zeros((B, 100))[arange(B)[:, None], x], 1)``, ``x`` an
    int64 GPU matrix of B = 1000 rows of 1000 values (``--small``: 20 x 50
    into 10 bins); on the GPU, as the confusion matrix.
``NLL gradient``
    ``grad(-log(P)[arange(n), y].sum(), P)``, ``P`` a float32 GPU matrix of
    n = 1e5 rows of K = 1000 (``--small``: 200 x 20), ``y`` int64 on the GPU:
    ``GpuScatterAdd`` onto zeros shaped like ``P``.
``set, duplicates``
    The update ``W <- set_subtensor(W[idx], v)`` of a float32 GPU table of
    V = 100,000 rows of D = 64, B = 16,384 indices of which a quarter name
    row 0 (``--small``: 50 x 8, 32): ``GpuScatterSet`` in place, the last of
    duplicate indices winning.

Timing: :func:`bench_gpu_loop.wall_ms` (wall-clock ms of a call and a
synchronization, median of the repeats after a warm-up call), both
functions interleaved in one process; the 1-minute load average is
recorded.  ``same``: the two functions' results agree (to 1e-6 relative;
the set: the two tables after one call each, from the same start, equal).  No speed target is set
for these rows (issue 30 asks for them to be measured); the verdicts are
the agreement.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the sibling modules, also when loaded by path
    sys.path.insert(0, HERE)

from bench_gpu_loop import wall_ms  # noqa: E402
from sizes import size_text  # noqa: E402

__all__ = ["scatter_rows", "scatter_table", "ROWS"]

#: name -> (full size, --small size).
ROWS = {
    "confusion matrix": ((10**6, 100), (2_000, 10)),
    "batched bincount": ((1000, 1000, 100), (20, 50, 10)),
    "NLL gradient": ((10**5, 1000), (200, 20)),
    "set, duplicates": ((100_000, 64, 16_384), (50, 8, 32)),
}


def _functions(name, size):
    """(package function, Aesara's function, N, the outputs to compare) of one row."""
    import aesara
    import aesara.tensor as at
    from aesara.compile.mode import get_default_mode

    from aesara_bincount import gpu

    rng = np.random.default_rng(30)
    host = get_default_mode().excluding("bincount")
    if name == "confusion matrix":
        n, k = size
        y, p = (gpu.shared(rng.integers(0, k, n)) for _ in range(2))
        out = gpu.gpu_from_host(at.inc_subtensor(at.zeros((k, k), dtype="float32")[y, p], 1.0))
        return aesara.function([], out), aesara.function([], out, mode=host), n, None
    if name == "batched bincount":
        b, length, bins = size
        x = gpu.shared(rng.integers(0, bins, (b, length)))
        zeros = at.zeros((b, bins), dtype="int64")
        out = gpu.gpu_from_host(at.inc_subtensor(zeros[at.arange(b)[:, None], x], 1))
        return aesara.function([], out), aesara.function([], out, mode=host), b * length, None
    if name == "NLL gradient":
        n, k = size
        P = gpu.shared(rng.uniform(0.1, 1.0, (n, k)).astype("float32"))
        y = gpu.shared(rng.integers(0, k, n))
        g = gpu.gpu_from_host(aesara.grad(-at.log(P)[at.arange(n), y].sum(), P))
        return aesara.function([], g), aesara.function([], g, mode=host), n, None
    v, d, b = size
    idx = rng.integers(0, v, b)
    idx[: b // 4] = 0  # a hot row: the last of its writes wins
    rng.shuffle(idx)
    gidx, values = gpu.shared(idx), gpu.shared(rng.standard_normal((b, d)).astype("float32"))
    start = rng.standard_normal((v, d)).astype("float32")
    tables = [gpu.shared(start.copy()) for _ in range(2)]
    fns = [
        aesara.function([], [], updates={w: at.set_subtensor(w[gidx], values)}, mode=mode)
        for w, mode in zip(tables, (get_default_mode(), host))
    ]
    return fns[0], fns[1], b, tables


def scatter_rows(cp, small, repeat):
    """The rows of this module, as dictionaries (see the module docstring)."""
    rows = []
    sync = cp.cuda.get_current_stream().synchronize
    for name, sizes in ROWS.items():
        package, aesaras, n, tables = _functions(name, sizes[1] if small else sizes[0])
        if tables is None:
            same = np.allclose(cp.asnumpy(package()), cp.asnumpy(aesaras()), rtol=1e-6, atol=0)
        else:
            package(), aesaras()
            same = np.array_equal(tables[0].get_value(), tables[1].get_value())
        row = {"row": name, "N": n, "load": f"{os.getloadavg()[0]:.1f}", "same": bool(same)}
        row["package_ms"] = wall_ms(sync, package, repeat)
        row["aesara_ms"] = wall_ms(sync, aesaras, repeat)
        rows.append(row)
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def scatter_table(rows, fmt):
    """The Markdown table of :func:`scatter_rows` (from one or more runs), with the verdicts."""
    if not rows:
        return ""
    lines = [
        "| row | N | package ms | Aesara's graph ms | speed-up | same result | load avg |",
        "|" + "---|" * 7,
    ]
    verdicts = []
    for r in rows:
        lines.append(
            f"| {r['row']} | {size_text(r['N'])} | {fmt(r['package_ms'])} | {fmt(r['aesara_ms'])} "
            f"| {r['aesara_ms'] / r['package_ms']:.2f} | {'yes' if r['same'] else 'NO'} "
            f"| {r.get('load') or '-'} |"
        )
        verdicts.append((f"{r['row']}: the result of Aesara's graph", r["same"]))
    lines.append("")
    lines += [f"- {'PASS' if ok else 'FAIL'}: {what}" for what, ok in verdicts]
    return "\n".join(lines)
