#!/usr/bin/env python
"""CPU benchmark of the scatter-adds with several index arrays (issue 30; a script, not a test).

Times, side by side in one process, interleaved call by call, by the CPU
time of the calling thread (every candidate runs on one thread;
:func:`aesara_bincount._timing.interleaved_times`), three cells that real
programs write:

- ``confusion``: ``inc_subtensor(zeros((K, K), int64)[y, p], 1)``, 1e6
  pairs, K = 100;
- ``batched``: a bincount along an axis, ``inc_subtensor(zeros((B, K),
  int64)[arange(B)[:, None], x], 1)``, B = 1000 rows of 1000 values into
  K = 100 bins;
- ``nll_grad``: the gradient of ``-log(P)[arange(n), y].sum()`` with respect
  to ``P``, n = 1e5, K = 1000, float32 (``P`` and ``y`` shared); this one
  also divides the whole ``(n, K)`` gradient by ``P``, as Aesara's graph
  does, which every peer below skips (they write ``-1 / P[i, y[i]]`` into
  zeros).

Candidates: Aesara's graph (``excluding("bincount")``: ``AdvancedIncSubtensor``
runs ``np.add.at``), ours (``LinearIndex`` and ``ScatterAdd``), ``np.add.at``,
a numba ``@njit`` loop and ``torch.Tensor.index_put_(accumulate=True)`` on
one thread, when numba and torch import (``pip install -e .[bench]``).
Every candidate's result is checked against ``np.add.at``.  The targets of
issue 30, at least 10x Aesara's graph and at least 1.2x the numba loop,
are printed "met" or "not met", with the load average.  ``--quick`` runs
tiny sizes (what the test-suite runs, so that the script cannot rot; its
figures mean nothing); ``--json PATH`` writes the figures.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_env  # noqa: E402,F401  (before Aesara: flags, warnings, sys.path)

import numpy as np  # noqa: E402

import aesara  # noqa: E402
import aesara.tensor as at  # noqa: E402
from aesara.compile.mode import get_default_mode  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import LinearIndex, ScatterAdd  # noqa: E402
import peers  # noqa: E402
from aesara_bincount._timing import interleaved_times, load_average  # noqa: E402

#: Targets of issue 30: ours at least this many times faster than each peer.
TARGETS = {"aesara": 10.0, "numba": 1.2}
LABELS = {
    "aesara": "Aesara's graph",
    "ours": "LinearIndex + ScatterAdd",
    "np_add_at": "np.add.at",
    "numba": "numba loop",
    "torch_1thread": "torch index_put_ (1 thread)",
}


def sizes(quick: bool):
    """{cell: size parameters}."""
    if quick:
        return {"confusion": dict(n=2000, k=10), "batched": dict(b=20, m=50, k=10),
                "nll_grad": dict(n=200, k=30)}
    return {"confusion": dict(n=10**6, k=100), "batched": dict(b=1000, m=1000, k=100),
            "nll_grad": dict(n=10**5, k=1000)}


def _compile(out_fn, variant, inputs=()):
    mode = get_default_mode()
    if variant == "aesara":
        mode = mode.excluding("bincount")
    fn = aesara.function(list(inputs), out_fn(), mode=mode)
    ops = [type(n.op) for n in fn.maker.fgraph.toposort()]
    assert (ScatterAdd in ops and LinearIndex in ops) == (variant == "ours"), (variant, ops)
    return fn


def cell_candidates(cell, p, rng, nb, torch):
    """(candidates, expected, check) of one cell: callables returning the result."""
    if cell == "confusion":
        n, k = p["n"], p["k"]
        y_np, p_np = rng.integers(0, k, n), rng.integers(0, k, n)
        y, pp = aesara.shared(y_np, name="y"), aesara.shared(p_np, name="p")
        build = lambda: at.inc_subtensor(at.zeros((k, k), dtype="int64")[y, pp], 1)  # noqa: E731
        expected = np.zeros((k, k), np.int64)
        np.add.at(expected, (y_np, p_np), 1)
        cands = {v: _compile(build, v) for v in ("aesara", "ours")}

        def add_at():
            out = np.zeros((k, k), np.int64)
            np.add.at(out, (y_np, p_np), 1)
            return out

        cands["np_add_at"] = add_at
        if nb is not None:
            cands["numba"] = lambda: nb.pairs(y_np, p_np, k, k)
        if torch is not None:
            yt, pt, one = torch.from_numpy(y_np), torch.from_numpy(p_np), torch.ones((), dtype=torch.int64)
            cands["torch_1thread"] = peers.one_thread(
                torch, lambda: torch.zeros((k, k), dtype=torch.int64).index_put_((yt, pt), one, accumulate=True).numpy())
    elif cell == "batched":
        b, m, k = p["b"], p["m"], p["k"]
        x_np = rng.integers(0, k, (b, m))
        x = aesara.shared(x_np, name="x")
        build = lambda: at.inc_subtensor(  # noqa: E731
            at.zeros((b, k), dtype="int64")[at.arange(b)[:, None], x], 1)
        rows_np = np.broadcast_to(np.arange(b)[:, None], (b, m))
        expected = np.zeros((b, k), np.int64)
        np.add.at(expected, (rows_np, x_np), 1)
        cands = {v: _compile(build, v) for v in ("aesara", "ours")}

        def add_at():
            out = np.zeros((b, k), np.int64)
            np.add.at(out, (np.arange(b)[:, None], x_np), 1)
            return out

        cands["np_add_at"] = add_at
        if nb is not None:
            cands["numba"] = lambda: nb.batched(x_np, k)
        if torch is not None:
            rt, xt = torch.from_numpy(np.ascontiguousarray(rows_np)), torch.from_numpy(x_np)
            one = torch.ones((), dtype=torch.int64)
            cands["torch_1thread"] = peers.one_thread(
                torch, lambda: torch.zeros((b, k), dtype=torch.int64).index_put_((rt, xt), one, accumulate=True).numpy())
    else:
        n, k = p["n"], p["k"]
        P_np = rng.uniform(0.05, 1.0, (n, k)).astype("float32")
        y_np = rng.integers(0, k, n)
        P, y = aesara.shared(P_np, name="P"), aesara.shared(y_np, name="y")
        build = lambda: aesara.grad(-at.log(P)[at.arange(n), y].sum(), P)  # noqa: E731
        ar = np.arange(n)
        expected = np.zeros((n, k), np.float32)
        np.add.at(expected, (ar, y_np), -1.0 / P_np[ar, y_np])
        cands = {v: _compile(build, v) for v in ("aesara", "ours")}

        def add_at():
            out = np.zeros((n, k), np.float32)
            np.add.at(out, (ar, y_np), -1.0 / P_np[ar, y_np])
            return out

        cands["np_add_at"] = add_at
        if nb is not None:
            cands["numba"] = lambda: nb.picked_grad(P_np, y_np)
        if torch is not None:
            Pt, at_, yt = torch.from_numpy(P_np), torch.from_numpy(ar), torch.from_numpy(y_np)
            cands["torch_1thread"] = peers.one_thread(
                torch, lambda: torch.zeros((n, k), dtype=torch.float32).index_put_(
                    (at_, yt), -1.0 / Pt[at_, yt], accumulate=True).numpy())
    return cands, expected


def run(quick: bool):
    rng = np.random.default_rng(30)
    nb, torch = peers.numba_multi_index_peers(), peers.torch_module()
    rows = []
    for cell, p in sizes(quick).items():
        cands, expected = cell_candidates(cell, p, rng, nb, torch)
        for name, fn in cands.items():
            np.testing.assert_allclose(np.asarray(fn()), expected, rtol=1e-6, err_msg=name)
        res = interleaved_times(cands, one_thread=list(cands), rounds=3 if quick else 5,
                                budget_s=0.02 if quick else 0.3)
        rows.append(dict(cell=cell, size=p, cpu_ms=res["cpu_ms"]))
    return rows


def report(rows) -> str:
    names = [k for k in LABELS if any(k in r["cpu_ms"] for r in rows)]
    lines = ["| cell | size | " + " | ".join(LABELS[k] for k in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for r in rows:
        size = ", ".join(f"{k}={v}" for k, v in r["size"].items())
        cells = [f"{r['cpu_ms'][k]:.3f}" if k in r["cpu_ms"] else "-" for k in names]
        lines.append(f"| {r['cell']} | {size} | " + " | ".join(cells) + " |")
    lines += ["", "CPU ms per call, one thread.  Targets of issue 30 (ours faster by):", ""]
    for r in rows:
        ours = r["cpu_ms"]["ours"]
        for peer, want in TARGETS.items():
            if peer not in r["cpu_ms"]:
                lines.append(f"- {r['cell']}: >= {want}x {LABELS[peer]}: no {LABELS[peer]} here")
                continue
            ratio = r["cpu_ms"][peer] / ours
            verdict = "met" if ratio >= want else "not met"
            lines.append(f"- {r['cell']}: >= {want}x {LABELS[peer]}: {ratio:.2f}x, {verdict}")
    lines.append("")
    lines.append("load average (1, 5, 15 min): %.2f %.2f %.2f" % load_average())
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (the test-suite's run)")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    before = load_average()
    rows = run(args.quick)
    print("load average before the run: %.2f %.2f %.2f" % before)
    print(report(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(kind="scatter", rows=rows, load_average=load_average()), f, indent=1)
    return rows


if __name__ == "__main__":
    main()
