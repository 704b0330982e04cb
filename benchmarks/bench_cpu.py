#!/usr/bin/env python
"""CPU benchmark of aesara_bincount (a script, not a test).

Times, side by side in one process, interleaved call by call
(:func:`aesara_bincount._timing.interleaved_times`): ``numpy.bincount``;
Aesara's own graph (``excluding("bincount")``); ``Bincount`` with OpenMP off
and on; the numba loops and ``torch.bincount`` with one thread when they are
installed (``benchmarks/peers.py``: ``numba`` is the plain loop with the bins
known, ``numba_max`` the loop that also finds them with ``x.max()``); and a
single streaming read of ``x`` (``x.max()``), the memory-bound floor.  Every
call is timed by the wall clock and, for the candidates that run in the
calling thread only (all but OpenMP on), by that thread's CPU time
(``time.thread_time_ns``), which a busy machine cannot inflate by
descheduling the thread.  Each cell records the load average after it.  A
target counts as met only from CPU time, or from wall time taken at a load
below 1 per core (``benchmarks/cpu_report.py``).

The grid: N in {1e4, 1e6, 1e7}; bins in {16, 1000, 1e6}; uniform, all-equal
and Zipf-skewed values; int32 and int64 ``x``; plus weighted rows (float64
weights, x int64 and int32) per N and bins.  ``x`` lives in an
``aesara.shared`` variable, as in the seed case.  A cell where Bincount
(OpenMP off) loses to numpy or to the best of numba and torch (in CPU time)
is measured a second time, and the second measurement kept (marked "re-run").

Then the busy-cores scenario (``benchmarks/busy.py``): the seed case and
1e7 values into 1e6 bins with OpenMP on and off, without burners and in three rounds
with one fresh CPU-burning process per core.

Results go to ``benchmarks/results/<name>.md`` (a table, and the targets of
issue 13 marked met or not) and ``.json`` (the raw figures, read by
``benchmarks/plot.py``); ``--plot`` redraws the plots, ``--readme`` the
figures in README.rst and the run's words under its headline plot, with the
targets of issue 14 from the ``bench_rows.py`` run that ``--rows`` names
(else the newest).  ``make bench`` runs ``bench_rows.py`` and then all of it,
so that every plot and the README's figures come from the same runs.  ``--quick`` runs a
small grid (N=1e6), ``--report`` that grid and every target cell of issues
13 and 21; ``--tiny`` a grid of tiny sizes that only checks that the script
runs (the test-suite runs it).
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
from aesara.compile.mode import get_default_mode  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

import bench_rows  # noqa: E402
import busy  # noqa: E402
import cpu_report  # noqa: E402
import peers  # noqa: E402
from aesara_bincount import Bincount  # noqa: E402
from aesara_bincount._timing import interleaved_times, load_average  # noqa: E402
from run_info import cpu_words, machine_info  # noqa: E402
from sizes import size_text  # noqa: E402

ROOT = os.path.dirname(HERE)

IMPLS = ["numpy", "aesara", "bincount_omp_off", "bincount_omp_on", "numba", "numba_max", "torch_1thread", "read"]
#: The candidates that run in the calling thread only: their thread CPU time is
#: recorded beside the wall time (OpenMP's is not: it runs other threads).
ONE_THREAD = [k for k in IMPLS if k != "bincount_omp_on"]


def make_x(n, bins, dist, dtype, rng):
    if dist == "uniform":
        x = rng.integers(0, bins, size=n)
    elif dist == "all-equal":
        x = np.full(n, bins - 1)
    elif dist == "zipf":
        x = (rng.zipf(1.3, size=n) - 1) % bins
    else:
        raise ValueError(dist)
    x[-1] = bins - 1  # every row has exactly `bins` bins
    return x.astype(dtype)


def optional_competitors():
    """numba and torch candidates, when installed (benchmarks/peers.py)."""
    extra = {}
    nb = peers.numba_peers()
    if nb is not None:
        extra["numba"] = nb
    torch = peers.torch_module()
    if torch is not None:
        extra["torch_1thread"] = torch
    return extra


class Functions:
    """Compiled Aesara functions, one per (dtype, weighted, variant), on shared x."""

    def __init__(self):
        self.cache = {}

    def get(self, dtype, weighted, variant):
        key = (dtype, weighted, variant)
        if key not in self.cache:
            x = aesara.shared(np.zeros(1, dtype=dtype), name="x")
            w = aesara.shared(np.zeros(1), name="w") if weighted else None
            mode = get_default_mode()
            if variant == "aesara":
                mode = mode.excluding("bincount")
            openmp = variant == "bincount_omp_on"
            with aesara.config.change_flags(openmp=openmp):
                f = aesara.function([], bincount(x, weights=w), mode=mode)
            has_op = any(isinstance(n.op, Bincount) for n in f.maker.fgraph.toposort())
            assert has_op == (variant != "aesara"), variant
            self.cache[key] = (f, x, w)
        return self.cache[key]


def run_cell(fns, extra, n, bins, dist, dtype, weighted, rng, budget=None):
    x_np = make_x(n, bins, dist, dtype, rng)
    w_np = rng.random(n) if weighted else None
    expected = np.bincount(x_np, weights=w_np)
    cands = {"numpy": (lambda: np.bincount(x_np, weights=w_np))}
    for variant in ("aesara", "bincount_omp_off", "bincount_omp_on"):
        f, xs, ws = fns.get(dtype, weighted, variant)
        xs.set_value(x_np, borrow=True)
        if weighted:
            ws.set_value(w_np, borrow=True)
        got = f()
        ok = np.allclose(got, expected) if weighted else np.array_equal(got, expected)
        if not ok:
            raise AssertionError(f"{variant} disagrees with numpy at {n, bins, dist, dtype, weighted}")
        cands[variant] = f
    if "numba" in extra:
        nb = extra["numba"]
        # The plain loop of issue 21 (bins known, no checks), and the loop
        # that also finds the bins with x.max(), as numpy.bincount must.
        if weighted:
            cands["numba"] = lambda: nb.weighted(x_np, w_np, bins)
            cands["numba_max"] = lambda: nb.weighted_max(x_np, w_np)
        else:
            cands["numba"] = lambda: nb.count(x_np, bins)
            cands["numba_max"] = lambda: nb.count_max(x_np)
        for k in ("numba", "numba_max"):
            got = cands[k]()
            assert np.allclose(got, expected) if weighted else np.array_equal(got, expected), k
    if "torch_1thread" in extra:
        torch = extra["torch_1thread"]
        # torch.bincount takes int64 (and uint8) indices; the conversion of
        # int32 input is part of what a user would pay.
        xt = torch.from_numpy(x_np)
        wt = torch.from_numpy(w_np) if weighted else None
        torch_1thread = peers.one_thread(
            torch, lambda: torch.bincount(xt if dtype == "int64" else xt.long(), weights=wt)
        )
        cands["torch_1thread"] = torch_1thread
    cands["read"] = lambda: x_np.max()
    if budget is None:
        budget = 0.1 if n <= 10**6 else 0.3
    return interleaved_times(cands, one_thread=[k for k in ONE_THREAD if k in cands], budget_s=budget)


def grid(kind):
    """The cells (n, bins, dist, dtype, weighted) of a run, and a time budget per candidate."""
    if kind == "tiny":
        sizes, bins_list, dists = [2000], [16, 5000], ("uniform", "all-equal")
        return [(n, b, d, "int64", False) for n in sizes for b in bins_list for d in dists] + [
            (n, b, "uniform", dt, True) for n in sizes for b in bins_list for dt in ("int64", "int32")
        ], 0.005
    sizes = [10**6] if kind in ("quick", "report") else [10**4, 10**6, 10**7]
    bins_list = [16, 1000, 10**6]
    cells = [
        (n, bins, dist, dtype, False)
        for n in sizes
        for bins in bins_list
        for dist in ("uniform", "all-equal", "zipf")
        for dtype in ("int32", "int64")
    ] + [(n, bins, "uniform", dtype, True) for n in sizes for bins in bins_list for dtype in ("int64", "int32")]
    if kind == "report":
        # The quick grid and every target cell (issues 13 and 21) beyond it.
        cells += [key for _, key, _ in cpu_report.TARGETS if key not in cells]
    return cells, None


def busy_cases(fns, kind, rng):
    """Bincount with OpenMP off and on, for the busy-cores scenario."""
    cases = {}
    specs = [(2000, 1000, False)] if kind == "tiny" else [(10**6, 1000, False), (10**6, 1000, True), (10**7, 10**6, False)]
    for n, bins, weighted in specs:
        x = rng.integers(0, bins, size=n)
        w = rng.random(n) if weighted else None
        fs = {}
        for variant, label in (("bincount_omp_off", "omp_off"), ("bincount_omp_on", "omp_on")):
            f, xs, ws = fns.get("int64", weighted, variant)
            f = f.copy(swap={xs: aesara.shared(x, borrow=True), **({ws: aesara.shared(w, borrow=True)} if weighted else {})})
            fs[label] = f
        name = f"{size_text(n)} int64 into {size_text(bins)} bins" + (", float64 weights" if weighted else "")
        cases[name] = fs
    return cases


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a small grid (N=1e6 only)")
    p.add_argument("--tiny", action="store_true", help="tiny sizes: only checks that the script runs")
    p.add_argument("--report", action="store_true",
                   help="the quick grid and every target cell of issues 13 and 21 (N=1e7 included)")
    p.add_argument("--out", default=os.path.join(HERE, "results"), help="folder for the results")
    p.add_argument("--name", default="cpu-dev", help="results file stem (default cpu-dev)")
    p.add_argument("--plot", action="store_true", help="also draw the plots (see --plot-out)")
    p.add_argument("--plot-out", default=None, help="folder for the plots (default docs/_static)")
    p.add_argument("--readme", nargs="?", const=os.path.join(ROOT, "README.rst"), default=None,
                   metavar="RST", help="also rewrite the figures in README.rst (or RST)")
    p.add_argument("--rows", metavar="JSON", default=None,
                   help="the bench_rows.py run whose issue-14 targets the README shows "
                        "(default: the newest rows-*.json in benchmarks/results)")
    p.add_argument("--busy-rounds", type=int, default=3, help="rounds with busy cores (0: none)")
    p.add_argument(
        "--table-from", metavar="JSON", default=None,
        help="rewrite the .md table (and, with --readme, the README) from a saved run, without measuring",
    )
    args = p.parse_args(argv)
    if args.table_from:
        with open(args.table_from) as f:
            saved = json.load(f)
        md = os.path.splitext(args.table_from)[0] + ".md"
        with open(md, "w") as f:
            f.write(cpu_report.markdown(saved))
        if args.readme:
            cpu_report.write_readme(args.readme, saved, _rel(md), *rows_targets(args.rows))
        print(md)
        return

    kind = "tiny" if args.tiny else "quick" if args.quick else "report" if args.report else "full"
    rng = np.random.default_rng(1)
    cells, budget = grid(kind)
    fns = Functions()
    extra = optional_competitors()
    machine = machine_info()
    print(f"CPU: {cpu_words(machine)}", flush=True)
    rows = []
    for i, (n, bins, dist, dtype, weighted) in enumerate(cells):
        row = dict(n=n, bins=bins, dist=dist, dtype=dtype, weighted=weighted)
        row.update(run_cell(fns, extra, n, bins, dist, dtype, weighted, rng, budget))
        row["load"] = load_average()
        if cpu_report.is_loss(row) and kind != "tiny":
            row["reruns"] = 1  # "re-run a cell before calling it a loss"
            row["first_ms"], row["first_cpu_ms"] = row["ms"], row["cpu_ms"]
            row.update(run_cell(fns, extra, n, bins, dist, dtype, weighted, rng, budget))
            row["load"] = load_average()
        rows.append(row)
        print(
            f"[{i + 1}/{len(cells)}] N={size_text(n)} bins={size_text(bins)} {dist:9s} {dtype} w={int(weighted)} "
            f"load {row['load'][0]:.1f}: CPU ms "
            + " ".join(f"{k}={v:.3f}" for k, v in row["cpu_ms"].items())
            + f" | wall ms omp_on={row['ms']['bincount_omp_on']:.3f}"
            + (" (re-run)" if row.get("reruns") else ""),
            flush=True,
        )
    data = {"kind": "cpu", "machine": machine, "rows": rows}
    rounds = min(args.busy_rounds, 1) if kind == "tiny" else args.busy_rounds
    if rounds > 0:
        data["busy"] = busy.busy_rounds(
            busy_cases(fns, kind, rng), rounds=rounds, cores=1 if kind == "tiny" else 0,
            budget_s=0.01 if kind == "tiny" else 0.3, settle_s=0.05 if kind == "tiny" else 0.2,
        )
        for b in data["busy"]:
            print(f"busy round {b['round']} ({b['burners']} burners, load {b['load']:.1f}) {b['case']}: "
                  + " ".join(f"{k}={v:.3f}" for k, v in b["ms"].items()), flush=True)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, args.name)
    text = cpu_report.markdown(data)
    with open(stem + ".md", "w") as f:
        f.write(text)
    with open(stem + ".json", "w") as f:
        json.dump(data, f, indent=1)
    print()
    print(text)
    if args.plot:
        import plot  # noqa: E402

        plot.main([stem + ".json"] + (["--out", args.plot_out] if args.plot_out else []))
    if args.readme:
        cpu_report.write_readme(args.readme, data, _rel(stem + ".md"), *rows_targets(args.rows))


def rows_targets(path=None):
    """The targets of issue 14 from a run of bench_rows.py: ``path``, else the newest committed one.

    Returns ``(targets, path)``, or ``(None, None)`` when there is none.  The
    newest is the one with the latest date and time, then the last name.
    """
    import glob

    runs = []
    for p in [path] if path else glob.glob(os.path.join(HERE, "results", "rows-*.json")):
        with open(p) as f:
            saved = json.load(f)
        m = saved["machine"]
        runs.append((m.get("date", ""), m.get("time", ""), os.path.basename(p), p, saved))
    if not runs:
        return None, None
    *_, path, saved = max(runs)
    return bench_rows.targets_judged(saved["rows"], saved["machine"]), _rel(path)


def _rel(path):
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


if __name__ == "__main__":
    main()
