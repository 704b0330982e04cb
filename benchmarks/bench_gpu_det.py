"""The rows of the GPU benchmark for issue 31: ``aesara.config.deterministic = "more"``.

Loaded by ``benchmarks/bench_gpu.py`` (the Aesara stack only: the mode is a
compile-time choice of the Ops), which adds :func:`det_rows` to its JSON
under ``"deterministic"`` and :func:`det_table` to its table.  Each row
times one function compiled in the default mode and under ``"more"``, on
the same GPU shared variables, result kept on the GPU (but in the row "to
host"):

``seed loop, float64``
    ``bincount(gx, weights=exp(-theta * gv))``, ``gx`` int64 in ``[0,
    1000)``, ``gv`` float64, N = 1e6 (``--small``: 20,000): the seed case,
    one ``GpuFusedBincount``.  Target: "more" at most 1.5x the default.
``seed loop to host, float64``
    The same with its result to the host, as the seed's loop runs it
    (``GpuFusedBincount{..., to_host=True}``): the default path and, under
    "more", the window pass and its finish queued before one copy and one
    wait (issue 40).  Target 1.5x.
``seed loop, float32``
    The same with ``gv`` and ``theta`` float32 (float32 weights).  Target
    1.5x.  Left out with ``--small`` (the dry run, whose every compile of a
    generated kernel costs a host compile on the emulation).
``many bins 1e4, float64`` (and ``1e5``, ``1e6``)
    ``bincount(gx, weights=gw)``, ``gx`` int64 of N = 1e6 values spread
    over ``[0, 1e4)`` (``1e5``, ``1e6``) bins, ``gw`` float64 in a GPU
    shared variable: more bins than the window passes take, so "more" runs
    the bucket path (``c_code/cuda/bincount_det_bucket.cuh``).  Target 3x.
    ``--small``: only the ``1e6`` row, 20,000 values into 20,000 bins.
``rows, hot row``
    ``inc_subtensor(W[idx], g)`` onto a float32 table of V = 100,000 rows of
    D = 64, B = 16,384 indices of which a quarter name row 0 (``--small``:
    50 x 8, 32), the increments in a GPU shared variable.  Target 3x.
``rows 1e6, float32`` and ``rows 1e6, hot row``
    The same table and D, B = 1e6 indices, spread over the rows or with a
    quarter of them on row 0: past ``BC_CUDA_ROWS_DET_SORT_MIN``, so "more"
    sorts idx by owner block first (``c_code/cuda/scatter_add_det_bucket.cuh``).
    Target 3x.  ``--small``: only the hot row, 300 x 4, 40,000 indices (still
    past the threshold).

Timing: :func:`bench_gpu_loop.wall_ms` (wall-clock ms of a call and a
synchronization, median of the repeats after a warm-up call), both modes
interleaved in one process; the 1-minute load average is recorded.
``same bits``: every timed call under "more" returned the bits of the
first; ``max rel diff``: the largest difference between the two modes'
results, relative to the largest magnitude of the default one.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the sibling modules, also when loaded by path
    sys.path.insert(0, HERE)

from bench_gpu_loop import wall_ms  # noqa: E402
from sizes import size_text  # noqa: E402

__all__ = ["det_rows", "det_table"]

SEED_N, SMALL_SEED_N = 10**6, 20_000
#: The rows cases: (V, D, B) and (V, D, B) with --small (None: left out), share of B on row 0.
ROWS = {"rows, hot row": ((100_000, 64, 16_384), (50, 8, 32), 0.25),
        "rows 1e6, float32": ((100_000, 64, 10**6), None, 0.0),
        "rows 1e6, hot row": ((100_000, 64, 10**6), (300, 4, 40_000), 0.25)}
#: Most a "more" call may cost against the default one (issue 31).
TARGETS = {"seed loop, float64": 1.5, "seed loop to host, float64": 1.5, "seed loop, float32": 1.5,
           "rows, hot row": 3.0,
           "many bins 1e4, float64": 3.0, "many bins 1e5, float64": 3.0, "many bins 1e6, float64": 3.0,
           "rows 1e6, float32": 3.0, "rows 1e6, hot row": 3.0}
#: Bins of the "many bins" rows (--small: SMALL_MANY values into as many bins).
MANY_BINS = {"many bins 1e4, float64": 10**4, "many bins 1e5, float64": 10**5, "many bins 1e6, float64": 10**6}
SMALL_MANY = 20_000


def _graphs(cp, name, small):
    """(inputs of aesara.function, output expression, N) of one row."""
    import aesara.tensor as at
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    if name.startswith("seed"):
        dtype = "float64" if name.endswith("64") else "float32"
        n = SMALL_SEED_N if small else SEED_N
        x = cp.arange(n, dtype="int64") * 7919 % 1000
        v = ((cp.arange(n, dtype="int64") * 104729 % 65537) / 65537.0).astype(dtype)
        theta = at.scalar("theta", dtype=dtype)
        out = bincount(gpu.shared(x, borrow=True), weights=at.exp(-theta * gpu.shared(v, borrow=True)))
        if "to host" not in name:
            out = gpu.gpu_from_host(out)
        return [theta], out, n, np.dtype(dtype).type(0.5)
    if name.startswith("many"):
        n = SMALL_MANY if small else SEED_N
        bins = SMALL_MANY if small else MANY_BINS[name]
        x = cp.arange(n, dtype="int64") * 7919 % bins
        w = ((cp.arange(n, dtype="int64") * 104729 % 65537) / 65537.0 - 0.5).astype("float64")
        out = bincount(gpu.shared(x, borrow=True), weights=gpu.shared(w, borrow=True))
        return [], gpu.gpu_from_host(out), n, None
    full, tiny, hot = ROWS[name]
    V, D, B = tiny if small else full
    rng = np.random.default_rng(31)
    idx = rng.integers(0, V, B)
    idx[: int(B * hot)] = 0  # the hot row
    rng.shuffle(idx)
    g = rng.standard_normal((B, D)).astype("float32")
    table = gpu.shared(rng.standard_normal((V, D)).astype("float32"))
    out = at.inc_subtensor(table[gpu.shared(idx)], gpu.shared(g))
    return [], gpu.gpu_from_host(out), B, None


def det_rows(cp, small, repeat):
    """The rows of this module, as dictionaries (see the module docstring)."""
    import aesara

    rows = []
    sync = cp.cuda.get_current_stream().synchronize
    for name in TARGETS:
        if small and (name in ("seed loop, float32", "many bins 1e4, float64", "many bins 1e5, float64")
                      or (name in ROWS and ROWS[name][1] is None)):
            continue  # another row's code at another size or dtype: less time in the dry run
        ins, out, n, arg = _graphs(cp, name, small)
        fns = {}
        for mode in ("default", "more"):
            with aesara.config.change_flags(deterministic=mode):
                fns[mode] = aesara.function(ins, out)
        args = [] if arg is None else [arg]
        default, more = (cp.asnumpy(fns[m](*args)).astype(np.float64) for m in ("default", "more"))
        bits = cp.asnumpy(fns["more"](*args)).tobytes()
        same = [True]

        def timed_more():
            same[0] &= cp.asnumpy(fns["more"](*args)).tobytes() == bits

        row = {"row": name, "N": n, "load": f"{os.getloadavg()[0]:.1f}"}
        row["default_ms"] = wall_ms(sync, lambda: fns["default"](*args), repeat)
        row["more_ms"] = wall_ms(sync, lambda: fns["more"](*args), repeat)
        row["more_ms_checked"] = wall_ms(sync, timed_more, max(2, repeat // 4))
        row["same_bits"] = bool(same[0])
        row["max_rel_diff"] = float(np.max(np.abs(default - more)) / max(np.max(np.abs(default)), 1e-300))
        rows.append(row)
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def det_table(rows, fmt):
    """The Markdown table of :func:`det_rows` (from one or more runs), with the targets' verdicts."""
    if not rows:
        return ""
    lines = [
        "| row | N | default ms | more ms | more / default | target | same bits | max rel diff | load avg |",
        "|" + "---|" * 9,
    ]
    verdicts = []
    for r in rows:
        ratio = r["more_ms"] / r["default_ms"]
        target = TARGETS.get(r["row"])
        lines.append(
            f"| {r['row']} | {size_text(r['N'])} | {fmt(r['default_ms'])} | {fmt(r['more_ms'])} "
            f"| {ratio:.2f} | {target or '-'} | {'yes' if r['same_bits'] else 'NO'} "
            f"| {r['max_rel_diff']:.1e} | {r.get('load') or '-'} |"
        )
        if target:
            verdicts.append((f"{r['row']}: deterministic within {target}x of the default", ratio <= target, ratio))
        verdicts.append((f"{r['row']}: the same bits on every call", r["same_bits"], 1.0 if r["same_bits"] else 0.0))
    lines.append("")
    lines += [f"- {'PASS' if ok else 'FAIL'}: {what} ({value:.3g})" for what, ok, value in verdicts]
    return "\n".join(lines)
