#!/usr/bin/env python
"""Benchmark of the fused bincount (issues 20 and 41; a script, not a test).

The cells, one thread, ``x`` and the vectors in ``aesara.shared`` variables,
N = 1e6 and 1000 bins:

- ``bincount(x, weights=th * v)``, ``th`` a ``dscalar`` input;
- ``bincount(x, weights=v * u + th)``;
- ``bincount(x4 // 4)``, ``x4`` in [0, 4000);
- stored weights, ``bincount(x, weights=w)``, for reference.

Each graph is timed fused (``FusedBincount``), unfused
(``excluding("bincount_fusion")``: Aesara's Elemwise, then ``Bincount``) and
as Aesara's own graph (``excluding("bincount")``), beside ``numpy.bincount``
of the NumPy expression, the fused numba loop a user would write (the bins
known, as in the issue; ``benchmarks/peers.py``) and ``torch.bincount`` on
one thread, when those are installed.  Every candidate runs on the calling
thread (OpenMP off), and is timed by that thread's CPU time
(``time.thread_time_ns``), the candidates interleaved call by call, each
timed call after an untimed one of its own, the best of 3 rounds of the
median of 21 calls (:func:`aesara_bincount._timing.interleaved_times`); the
load average is read before and after.  The table names the CPU (vendor,
family, model, AVX2 and AVX-512 flags) and the CPU plan the loops ran under
(:mod:`aesara_bincount_core.cpu_plan`).  Targets: each cell fused at least
1.2x the numba loop (issue 41); fused weights no slower than stored weights
plus 10% (issue 20).

``--tiny`` runs every cell at N = 1000 (the test-suite does, to check that
the script runs); ``--write NAME`` also writes ``benchmarks/results/NAME.md``
and ``.json`` (``make bench`` writes ``fusion-dev``).
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
from aesara.tensor.extra_ops import bincount  # noqa: E402

from aesara_bincount import Bincount, FusedBincount  # noqa: E402
from aesara_bincount._timing import interleaved_times, load_average  # noqa: E402

import peers  # noqa: E402
from run_info import cpu_words, machine_info  # noqa: E402

#: The least speed-up over the fused numba loop (issue 41).
TARGET = 1.2
#: The columns: candidate key and header.
COLS = [("fused", "fused"), ("unfused", "unfused"), ("aesara", "Aesara's graph"), ("numpy", "numpy"),
        ("numba", "numba loop"), ("torch", "torch (1 thr.)")]


def cells(n, rng):
    """``(name, graph text, inputs, output, args, expected, numba call, numpy call, torch call)`` of each cell."""
    nbins = 1000
    x_np = rng.integers(0, nbins, n)
    x4_np = rng.integers(0, 4 * nbins, n)
    x_np[-1], x4_np[-1] = nbins - 1, 4 * nbins - 1  # every result has exactly nbins bins
    v_np, u_np, w_np = rng.random(n), rng.random(n), rng.random(n)
    x, x4 = aesara.shared(x_np, name="x"), aesara.shared(x4_np, name="x4")
    v, u, w = aesara.shared(v_np, name="v"), aesara.shared(u_np, name="u"), aesara.shared(w_np, name="w")
    th = at.dscalar("th")
    nb = peers.numba_peers()
    torch = peers.torch_module()
    if torch is not None:
        xt, x4t, vt, ut, wt = (torch.from_numpy(a) for a in (x_np, x4_np, v_np, u_np, w_np))

    def tcall(fn):
        return None if torch is None else peers.one_thread(torch, fn)

    return [
        ("mul", "bincount(x, weights=th * v)", [th], bincount(x, weights=th * v), (2.5,),
         np.bincount(x_np, weights=2.5 * v_np),
         nb and (lambda: nb.fused_mul(x_np, v_np, 2.5, nbins)),
         lambda: np.bincount(x_np, weights=2.5 * v_np),
         tcall(lambda: torch.bincount(xt, weights=2.5 * vt))),
        ("fma", "bincount(x, weights=v * u + th)", [th], bincount(x, weights=v * u + th), (2.5,),
         np.bincount(x_np, weights=v_np * u_np + 2.5),
         nb and (lambda: nb.fused_fma(x_np, v_np, u_np, 2.5, nbins)),
         lambda: np.bincount(x_np, weights=v_np * u_np + 2.5),
         tcall(lambda: torch.bincount(xt, weights=vt * ut + 2.5))),
        ("div", "bincount(x4 // 4)", [], bincount(x4 // 4), (),
         np.bincount(x4_np // 4),
         nb and (lambda: nb.fused_div(x4_np, nbins)),
         lambda: np.bincount(x4_np // 4),
         tcall(lambda: torch.bincount(torch.div(x4t, 4, rounding_mode="floor")))),
        ("stored", "bincount(x, weights=w)", [], bincount(x, weights=w), (),
         np.bincount(x_np, weights=w_np),
         nb and (lambda: nb.weighted(x_np, w_np, nbins)),
         lambda: np.bincount(x_np, weights=w_np),
         tcall(lambda: torch.bincount(xt, weights=wt))),
    ]


def run(n, rounds=3, calls=21, seed=0, kinds=None):
    """Measure every cell (the candidates of ``kinds``, default all; the fused
    graph always); ``(rows, cpu_ms, (load before, load after))``."""
    kinds = set(kinds or [k for k, _ in COLS]) | {"fused"}
    rng = np.random.default_rng(seed)
    fused_mode = get_default_mode()
    modes = {"fused": fused_mode, "unfused": fused_mode.excluding("bincount_fusion"),
             "aesara": fused_mode.excluding("bincount")}
    cands, rows = {}, []
    with aesara.config.change_flags(openmp=False):
        for name, text, ins, out, args, want, nb, npc, tc in cells(n, rng):
            for kind, mode in modes.items():
                if (name == "stored" and kind == "unfused") or kind not in kinds:
                    continue
                f = aesara.function(ins, out, mode=mode)
                ops = {type(nd.op) for nd in f.maker.fgraph.toposort()}
                if kind == "fused":
                    assert ops == ({Bincount} if name == "stored" else {FusedBincount}), (name, ops)
                np.testing.assert_allclose(f(*args), want)
                cands[f"{name}/{kind}"] = (lambda f=f, a=args: f(*a))
            for kind, call in (("numpy", npc), ("numba", nb), ("torch", tc)):
                if call and kind in kinds:
                    np.testing.assert_allclose(np.asarray(call()), want)
                    cands[f"{name}/{kind}"] = call
            rows.append((name, text))
    load0 = load_average()[0]
    res = interleaved_times(cands, one_thread=list(cands), rounds=rounds, calls=calls)
    load1 = load_average()[0]
    return rows, res["cpu_ms"], (load0, load1)


def table(n, rows, ms, load, machine):
    """The Markdown table and the targets."""
    lines = [
        f"Fused bincount, N = {n}, 1000 bins, one thread (OpenMP off); CPU ms of the calling thread "
        "(`time.thread_time_ns`), candidates interleaved call by call, each timed call after an "
        "untimed one of its own, best of 3 rounds of the median of 21 calls; "
        f"load average {load[0]:.1f} before, {load[1]:.1f} after; {cpu_words(machine)}; "
        f"{machine['cores']} cores, Python {machine['python']}, numpy {machine['numpy']}, "
        f"Aesara {machine['aesara']}, numba {machine.get('numba', '-')}, torch {machine.get('torch', '-')}; "
        f"{machine['date']} {machine.get('time', '')} UTC.",
        "",
        "| graph | " + " | ".join(f"{c} ms" for _, c in COLS) + f" | numba / fused (target >= {TARGET}) |",
        "|---" * (len(COLS) + 2) + "|",
    ]
    for name, text in rows:
        f = ms[f"{name}/fused"]
        nb = ms.get(f"{name}/numba")
        ratio = f"{nb / f:.2f} ({'met' if nb / f >= TARGET else 'not met'})" if nb else "-"
        cells = [f"{ms[f'{name}/{k}']:.3f}" if f"{name}/{k}" in ms else "-" for k, _ in COLS]
        lines.append(f"| `{text}` | " + " | ".join(cells) + f" | {ratio} |")
    stored = ms["stored/fused"]
    for name in ("mul", "fma"):
        r = ms[f"{name}/fused"] / stored
        lines.append("")
        lines.append(
            f"Fused weights `{name}` / stored weights: {r:.2f} "
            f"(target <= 1.10: {'met' if r <= 1.10 else 'not met'})."
        )
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="N = 1000, few calls: only checks that it runs")
    p.add_argument("--n", type=int, default=10**6)
    p.add_argument("--rounds", type=int, default=3, help="rounds of calls (the best round counts)")
    p.add_argument("--calls", type=int, default=21, help="calls of each candidate per round")
    p.add_argument("--write", metavar="NAME", help="also write benchmarks/results/NAME.md and .json")
    p.add_argument("--kinds", help="the candidates to time, comma-separated (default: "
                   + ",".join(k for k, _ in COLS) + "; fused is always timed)")
    a = p.parse_args(argv)
    n, rounds, calls = (1000, 1, 3) if a.tiny else (a.n, a.rounds, a.calls)
    machine = machine_info()
    print(f"CPU: {cpu_words(machine)}", flush=True)
    rows, ms, load = run(n, rounds, calls, kinds=a.kinds.split(",") if a.kinds else None)
    text = table(n, rows, ms, load, machine)
    print(text)
    if a.write:
        stem = os.path.join(HERE, "results", a.write)
        with open(stem + ".md", "w", encoding="utf-8") as f:
            f.write(text)
        with open(stem + ".json", "w", encoding="utf-8") as f:
            json.dump({"kind": "fusion", "machine": machine, "n": n, "load": list(load),
                       "rows": [dict(name=k, text=t) for k, t in rows], "cpu_ms": ms}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
