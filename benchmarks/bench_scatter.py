#!/usr/bin/env python
"""CPU benchmark of the scatter-adds with several index arrays (issues 30 and 41; a script, not a test).

Times, side by side in one process, interleaved call by call, by the CPU
time of the calling thread (every candidate runs on one thread;
:func:`aesara_bincount._timing.interleaved_times`: best of 3 rounds of the
median of 21 calls), four cells that real programs write:

- ``confusion``: ``inc_subtensor(zeros((K, K), int64)[y, p], 1)``, 1e6
  pairs, K = 100;
- ``batched``: a per-row histogram, ``inc_subtensor(zeros((B, K),
  int64)[arange(B)[:, None], x], 1)``, B = 1000 rows of 1000 values into
  K = 100 bins;
- ``batched_flat``: the same written ``bincount((arange(B)[:, None] * K +
  x).ravel(), minlength=B * K)`` (one ``FusedBincount``, issue 41 item 2);
- ``nll_grad``: the gradient of ``-log(P)[arange(n), y].sum()`` with respect
  to ``P``, n = 1e5, K = 1000, float32 (``P`` and ``y`` shared); this one
  also divides the whole ``(n, K)`` gradient by ``P``, as Aesara's graph
  does, which every peer below skips (they write ``-1 / P[i, y[i]]`` into
  zeros).

Candidates: Aesara's graph (``excluding("bincount")``: ``AdvancedIncSubtensor``
runs ``np.add.at``; the flat cell's ``AdvancedIncSubtensor1``), ours
(``MultiIndexScatterAdd``, the one-pass Op; ``FusedBincount`` for the flat
cell), numpy (``np.add.at``; ``np.bincount`` for the flat cell), a numba
``@njit`` loop with the bins known, and ``torch.Tensor.index_put_(
accumulate=True)`` on one thread, when numba and torch import (``pip
install -e .[bench]``).  Every candidate's result is checked against numpy.
The table gives each candidate's CPU ms, ours against the numba loop, the
CPU (model name, family, model, AVX-512: the loops' lead can depend on the
microarchitecture) and the load average; the targets (issue 41: at least
1.2x the numba loop in every cell; issue 30: at least 10x Aesara's graph)
are printed "met" or "not met".  ``--quick`` runs tiny sizes (what the
test-suite runs, so that the script cannot rot; its figures mean nothing);
``--json PATH`` and ``--md PATH`` write the figures and the table.
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
from aesara_bincount import FusedBincount, LinearIndex, MultiIndexScatterAdd  # noqa: E402
import peers  # noqa: E402
import run_info  # noqa: E402
from aesara_bincount._timing import interleaved_times, load_average  # noqa: E402

#: Targets: ours at least this many times faster than each peer (issue 41:
#: the numba loop, every cell; issue 30: Aesara's graph).
TARGETS = {"numba": 1.2, "aesara": 10.0}
LABELS = {
    "aesara": "Aesara's graph",
    "ours": "ours",
    "numpy": "numpy",
    "numba": "numba loop",
    "torch_1thread": "torch (1 thread)",
}
CELLS = ("confusion", "batched", "batched_flat", "nll_grad")
#: What "ours" is in each cell.
OURS_OP = {"confusion": MultiIndexScatterAdd, "batched": MultiIndexScatterAdd,
           "batched_flat": FusedBincount, "nll_grad": MultiIndexScatterAdd}


def sizes(quick: bool):
    """{cell: size parameters}."""
    if quick:
        batched = dict(b=20, m=50, k=10)
        return {"confusion": dict(n=2000, k=10), "batched": batched, "batched_flat": dict(batched),
                "nll_grad": dict(n=200, k=30)}
    batched = dict(b=1000, m=1000, k=100)
    return {"confusion": dict(n=10**6, k=100), "batched": batched, "batched_flat": dict(batched),
            "nll_grad": dict(n=10**5, k=1000)}


def _compile(cell, out_fn, variant):
    mode = get_default_mode()
    if variant == "aesara":
        mode = mode.excluding("bincount")
    fn = aesara.function([], out_fn(), mode=mode)
    ops = [type(n.op) for n in fn.maker.fgraph.toposort()]
    ours = OURS_OP[cell]
    assert (ours in ops) == (variant == "ours") and LinearIndex not in ops, (variant, ops)
    return fn


def _candidates(cell, build, numpy_fn, numba_fn, torch_fn):
    cands = {v: _compile(cell, build, v) for v in ("aesara", "ours")}
    cands["numpy"] = numpy_fn
    if numba_fn is not None:
        cands["numba"] = numba_fn
    if torch_fn is not None:
        cands["torch_1thread"] = torch_fn
    return cands


def cell_candidates(cell, p, rng, nb, torch):
    """(candidates, expected) of one cell: callables returning the result."""
    if cell == "confusion":
        n, k = p["n"], p["k"]
        y_np, p_np = rng.integers(0, k, n), rng.integers(0, k, n)
        y, pp = aesara.shared(y_np, name="y"), aesara.shared(p_np, name="p")

        def add_at():
            out = np.zeros((k, k), np.int64)
            np.add.at(out, (y_np, p_np), 1)
            return out

        torch_fn = None
        if torch is not None:
            yt, pt, one = torch.from_numpy(y_np), torch.from_numpy(p_np), torch.ones((), dtype=torch.int64)
            torch_fn = peers.one_thread(
                torch, lambda: torch.zeros((k, k), dtype=torch.int64).index_put_((yt, pt), one, accumulate=True).numpy())
        cands = _candidates(cell, lambda: at.inc_subtensor(at.zeros((k, k), dtype="int64")[y, pp], 1), add_at,
                            None if nb is None else (lambda: nb.pairs(y_np, p_np, k, k)), torch_fn)
        return cands, add_at()
    if cell in ("batched", "batched_flat"):
        b, m, k = p["b"], p["m"], p["k"]
        x_np = rng.integers(0, k, (b, m))
        x = aesara.shared(x_np, name="x")
        rows_np = np.broadcast_to(np.arange(b)[:, None], (b, m))
        if cell == "batched":
            def numpy_fn():
                out = np.zeros((b, k), np.int64)
                np.add.at(out, (np.arange(b)[:, None], x_np), 1)
                return out

            def build():
                return at.inc_subtensor(at.zeros((b, k), dtype="int64")[at.arange(b)[:, None], x], 1)
        else:
            def numpy_fn():
                return np.bincount((np.arange(b)[:, None] * k + x_np).ravel(), minlength=b * k)

            def build():
                return at.bincount((at.arange(b)[:, None] * k + x).ravel(), minlength=b * k)
        torch_fn = None
        if torch is not None:
            rt, xt = torch.from_numpy(np.ascontiguousarray(rows_np)), torch.from_numpy(x_np)
            one = torch.ones((), dtype=torch.int64)
            if cell == "batched":
                torch_fn = peers.one_thread(
                    torch, lambda: torch.zeros((b, k), dtype=torch.int64).index_put_((rt, xt), one, accumulate=True).numpy())
            else:
                torch_fn = peers.one_thread(
                    torch, lambda: torch.bincount((rt * k + xt).reshape(-1), minlength=b * k).numpy())
        numba_fn = None
        if nb is not None:
            numba_fn = (lambda: nb.batched(x_np, k)) if cell == "batched" else (lambda: nb.batched(x_np, k).reshape(-1))
        return _candidates(cell, build, numpy_fn, numba_fn, torch_fn), numpy_fn()
    n, k = p["n"], p["k"]
    P_np = rng.uniform(0.05, 1.0, (n, k)).astype("float32")
    y_np = rng.integers(0, k, n)
    P, y = aesara.shared(P_np, name="P"), aesara.shared(y_np, name="y")
    ar = np.arange(n)

    def add_at():
        out = np.zeros((n, k), np.float32)
        np.add.at(out, (ar, y_np), -1.0 / P_np[ar, y_np])
        return out

    torch_fn = None
    if torch is not None:
        Pt, at_, yt = torch.from_numpy(P_np), torch.from_numpy(ar), torch.from_numpy(y_np)
        torch_fn = peers.one_thread(
            torch, lambda: torch.zeros((n, k), dtype=torch.float32).index_put_(
                (at_, yt), -1.0 / Pt[at_, yt], accumulate=True).numpy())
    cands = _candidates(cell, lambda: aesara.grad(-at.log(P)[at.arange(n), y].sum(), P), add_at,
                        None if nb is None else (lambda: nb.picked_grad(P_np, y_np)), torch_fn)
    return cands, add_at()


def run(quick: bool):
    rng = np.random.default_rng(30)
    nb, torch = peers.numba_multi_index_peers(), peers.torch_module()
    rows = []
    for cell, p in sizes(quick).items():
        cands, expected = cell_candidates(cell, p, rng, nb, torch)
        for name, fn in cands.items():
            np.testing.assert_allclose(np.asarray(fn()), expected, rtol=1e-6, err_msg=name)
        res = interleaved_times(cands, one_thread=list(cands), rounds=3, calls=3 if quick else 21)
        rows.append(dict(cell=cell, size=p, cpu_ms=res["cpu_ms"]))
    return rows


def report(rows, machine, before) -> str:
    names = [k for k in LABELS if any(k in r["cpu_ms"] for r in rows)]
    lines = [f"CPU: {run_info.cpu_words(machine)}; one thread, CPU ms per call (best of 3 rounds of "
             "the median of 21 calls, interleaved).",
             "load average before the run: %.2f %.2f %.2f" % before, "",
             "| cell | size | " + " | ".join(LABELS[k] for k in names) + " | ours vs numba |",
             "|---|---|" + "---|" * (len(names) + 1)]
    for r in rows:
        size = ", ".join(f"{k}={v}" for k, v in r["size"].items())
        ms = r["cpu_ms"]
        cells = [f"{ms[k]:.3f}" if k in ms else "-" for k in names]
        ratio = f"{ms['numba'] / ms['ours']:.2f}x" if "numba" in ms else "-"
        lines.append(f"| {r['cell']} | {size} | " + " | ".join(cells) + f" | {ratio} |")
    lines += ["", "Targets (ours faster by; issue 41: the numba loop, issue 30: Aesara's graph):", ""]
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
    lines.append("load average after the run (1, 5, 15 min): %.2f %.2f %.2f" % load_average())
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (the test-suite's run)")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--md", help="write the table to this file")
    args = ap.parse_args(argv)
    before = load_average()
    machine = run_info.machine_info()
    rows = run(args.quick)
    text = report(rows, machine, before)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(kind="scatter", rows=rows, machine=machine, load_before=before,
                           load_average=load_average()), f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write(f"# bench_scatter.py, {'quick' if args.quick else 'full size'}\n\n{text}\n")
    return rows


if __name__ == "__main__":
    main()
