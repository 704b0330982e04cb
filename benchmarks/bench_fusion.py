#!/usr/bin/env python
"""Benchmark of the fused bincount (issue 20; a script, not a test).

The cells of issue 20, one thread, ``x`` and the vectors in ``aesara.shared``
variables, N = 1e6 and 1000 bins:

- ``bincount(x, weights=th * v)``, ``th`` a ``dscalar`` input;
- ``bincount(x, weights=v * u + th)``;
- ``bincount(x4 // 4)``, ``x4`` in [0, 4000);
- stored weights, ``bincount(x, weights=w)``, for reference.

Each graph is timed fused (``FusedBincount``) and unfused
(``excluding("bincount_fusion")``: Aesara's Elemwise, then ``Bincount``),
beside the fused numba loop a user would write (the bins known, as in the
issue; ``benchmarks/peers.py``) when numba is installed.  Every candidate
runs on the calling thread (OpenMP off), so each is timed by that thread's CPU
time (``time.thread_time``), the candidates interleaved call by call; the load
average is read before and after.  Targets: each cell fused at least 1.2x
the numba loop; fused weights no slower than stored weights plus 10%.

``--tiny`` runs every cell at N = 1000 (the test-suite does, to check that
the script runs); ``--write NAME`` also writes ``benchmarks/results/NAME.md``.
"""
import argparse
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_env  # noqa: E402,F401  (before Aesara: flags, warnings, sys.path)

import numpy as np  # noqa: E402

import aesara  # noqa: E402
import aesara.tensor as at  # noqa: E402
from aesara.compile.mode import get_default_mode  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

from aesara_bincount import Bincount, FusedBincount  # noqa: E402
from aesara_bincount._timing import interleaved_medians  # noqa: E402

import peers  # noqa: E402


def cells(n, rng):
    """``(name, graph text, build(fused?) -> function, numba call)`` of each cell."""
    nbins = 1000
    x_np = rng.integers(0, nbins, n)
    x4_np = rng.integers(0, 4 * nbins, n)
    x_np[-1], x4_np[-1] = nbins - 1, 4 * nbins - 1  # every result has exactly nbins bins
    v_np, u_np, w_np = rng.random(n), rng.random(n), rng.random(n)
    x, x4 = aesara.shared(x_np, name="x"), aesara.shared(x4_np, name="x4")
    v, u, w = aesara.shared(v_np, name="v"), aesara.shared(u_np, name="u"), aesara.shared(w_np, name="w")
    th = at.dscalar("th")
    nb = peers.numba_peers()
    return [
        ("mul", "bincount(x, weights=th * v)", [th], bincount(x, weights=th * v), (2.5,),
         np.bincount(x_np, weights=2.5 * v_np),
         nb and (lambda: nb.fused_mul(x_np, v_np, 2.5, nbins))),
        ("fma", "bincount(x, weights=v * u + th)", [th], bincount(x, weights=v * u + th), (2.5,),
         np.bincount(x_np, weights=v_np * u_np + 2.5),
         nb and (lambda: nb.fused_fma(x_np, v_np, u_np, 2.5, nbins))),
        ("div", "bincount(x4 // 4)", [], bincount(x4 // 4), (),
         np.bincount(x4_np // 4),
         nb and (lambda: nb.fused_div(x4_np, nbins))),
        ("stored", "bincount(x, weights=w)", [], bincount(x, weights=w), (),
         np.bincount(x_np, weights=w_np), None),
    ]


def run(n, repeat, seed=0):
    rng = np.random.default_rng(seed)
    fused_mode = get_default_mode()
    unfused_mode = fused_mode.excluding("bincount_fusion")
    cands, rows = {}, []
    with aesara.config.change_flags(openmp=False):
        for name, text, ins, out, args, want, nb in cells(n, rng):
            fused = aesara.function(ins, out, mode=fused_mode)
            ops = [type(nd.op) for nd in fused.maker.fgraph.toposort()]
            assert ops == ([Bincount] if name == "stored" else [FusedBincount]), (name, ops)
            np.testing.assert_allclose(fused(*args), want)
            cands[f"{name}/fused"] = (lambda f=fused, a=args: f(*a))
            if name != "stored":
                unfused = aesara.function(ins, out, mode=unfused_mode)
                np.testing.assert_allclose(unfused(*args), want)
                cands[f"{name}/unfused"] = (lambda f=unfused, a=args: f(*a))
            if nb:
                np.testing.assert_allclose(nb(), want)
                cands[f"{name}/numba"] = nb
            rows.append((name, text))
    load0 = os.getloadavg()[0]
    ms = interleaved_medians(cands, repeat=repeat, rounds=repeat, clock=time.thread_time)
    load1 = os.getloadavg()[0]
    return rows, ms, (load0, load1)


def table(n, rows, ms, load):
    lines = [
        f"Fused bincount, N = {n}, 1000 bins, one thread; median ms of thread CPU time, "
        f"interleaved call by call; load average {load[0]:.1f} before, {load[1]:.1f} after; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}, Aesara {aesara.__version__}.",
        "",
        "| graph | fused ms | unfused ms | fused numba loop ms | numba / fused (target >= 1.2) |",
        "|---|---|---|---|---|",
    ]
    for name, text in rows:
        f = ms[f"{name}/fused"]
        unf = ms.get(f"{name}/unfused")
        nb = ms.get(f"{name}/numba")
        ratio = f"{nb / f:.2f} ({'met' if nb / f >= 1.2 else 'not met'})" if nb else ""
        lines.append(
            f"| `{text}` | {f:.3f} | {'' if unf is None else f'{unf:.3f}'} | "
            f"{'' if nb is None else f'{nb:.3f}'} | {ratio} |"
        )
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
    p.add_argument("--repeat", type=int, default=60, help="calls of each candidate")
    p.add_argument("--write", metavar="NAME", help="also write benchmarks/results/NAME.md")
    a = p.parse_args(argv)
    n, repeat = (1000, 3) if a.tiny else (a.n, a.repeat)
    rows, ms, load = run(n, repeat)
    text = table(n, rows, ms, load)
    print(text)
    if a.write:
        with open(os.path.join(HERE, "results", f"{a.write}.md"), "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
