#!/usr/bin/env python
"""CPU benchmark of aesara_bincount (a script, not a test).

Times, side by side in one process (alternating rounds, median of each):
``numpy.bincount``; Aesara's own graph (``excluding("bincount")``);
``Bincount`` with OpenMP off and on; a numba ``@njit`` loop and
``torch.bincount`` with one thread when they are installed; and a single
streaming read of ``x`` (``x.max()``), the memory-bound floor.

The grid: N in {1e4, 1e6, 1e7}; bins in {16, 1000, 1e6}; uniform, all-equal
and Zipf-skewed values; int32 and int64 ``x``; plus a weighted row (float64
weights) per N and bins.  ``x`` lives in an ``aesara.shared`` variable, as in
the seed case.

Results go to ``benchmarks/results/cpu-<host>.md`` (a table) and ``.json``
(the raw figures, read by ``benchmarks/plot.py``).  ``--quick`` runs a small
grid.
"""
import argparse
import datetime
import json
import os
import platform
import socket
import sys
import warnings

if "blas__ldflags" not in os.environ.get("AESARA_FLAGS", ""):
    os.environ["AESARA_FLAGS"] = ",".join(
        f for f in (os.environ.get("AESARA_FLAGS", ""), "blas__ldflags=") if f
    )
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import aesara  # noqa: E402
from aesara.compile.mode import get_default_mode  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

import aesara_bincount  # noqa: E402
from aesara_bincount import Bincount  # noqa: E402
from aesara_bincount._timing import interleaved_medians  # noqa: E402
from sizes import size_text  # noqa: E402

IMPLS = ["numpy", "aesara", "bincount_omp_off", "bincount_omp_on", "numba", "torch_1thread", "read"]


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
    """numba and torch candidates, when installed."""
    extra = {}
    try:
        import numba

        @numba.njit(cache=True, nogil=True)
        def numba_counts(x):
            out = np.zeros(x.max() + 1, dtype=np.int64)
            for v in x:
                out[v] += 1
            return out

        @numba.njit(cache=True, nogil=True)
        def numba_weighted(x, w):
            out = np.zeros(x.max() + 1, dtype=np.float64)
            for i in range(x.shape[0]):
                out[x[i]] += w[i]
            return out

        extra["numba"] = (numba_counts, numba_weighted)
    except Exception:  # noqa: BLE001
        pass
    try:
        import torch

        extra["torch_1thread"] = torch
    except Exception:  # noqa: BLE001
        pass
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


def run_cell(fns, extra, n, bins, dist, dtype, weighted, rng):
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
        counts, summed = extra["numba"]
        cands["numba"] = (lambda: summed(x_np, w_np)) if weighted else (lambda: counts(x_np))
    if "torch_1thread" in extra:
        torch = extra["torch_1thread"]
        # torch.bincount takes int64 (and uint8) indices; the conversion of
        # int32 input is part of what a user would pay.
        xt = torch.from_numpy(x_np)
        wt = torch.from_numpy(w_np) if weighted else None
        threads = torch.get_num_threads()

        def torch_1thread():
            # torch.set_num_threads also sets OpenMP's thread count for the
            # whole process (it shares libgomp with Bincount), so it is put
            # back at once: otherwise "openmp on" would silently run on one
            # thread.  The pair of calls costs under a microsecond.
            torch.set_num_threads(1)
            try:
                return torch.bincount(xt if dtype == "int64" else xt.long(), weights=wt)
            finally:
                torch.set_num_threads(threads)

        cands["torch_1thread"] = torch_1thread
    cands["read"] = lambda: x_np.max()
    budget = 0.15 if n <= 10**6 else 0.6
    times = interleaved_medians(cands, budget_s=budget)
    return times


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def table(rows, machine):
    head = (
        "| N | bins | dist | x | w | numpy ms | Aesara ms | omp off ms | omp on ms | numba ms | "
        "torch(1t) ms | read ms | numpy/off | numpy/on | Aesara/off | off/read | best other/off |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        t = r["ms"]
        others = [t[k] for k in ("numba", "torch_1thread") if k in t]
        best_other = min(others) if others else None

        def ms(k):
            return f"{t[k]:.3f}" if k in t else "-"

        lines.append(
            f"| {size_text(r['n'])} | {size_text(r['bins'])} | {r['dist']} | {r['dtype']} | {'f64' if r['weighted'] else '-'} | "
            f"{ms('numpy')} | {ms('aesara')} | {ms('bincount_omp_off')} | {ms('bincount_omp_on')} | "
            f"{ms('numba')} | {ms('torch_1thread')} | {ms('read')} | "
            f"{fmt_ratio(t['numpy'], t['bincount_omp_off'])} | {fmt_ratio(t['numpy'], t['bincount_omp_on'])} | "
            f"{fmt_ratio(t['aesara'], t['bincount_omp_off'])} | {fmt_ratio(t['bincount_omp_off'], t['read'])} | "
            f"{fmt_ratio(best_other, t['bincount_omp_off'])} |"
        )
    desc = (
        f"Machine: {machine['cpu']}, {machine['cores']} cores ({machine['host']}); "
        f"Python {machine['python']}, numpy {machine['numpy']}, Aesara {machine['aesara']}, "
        f"aesara_bincount {machine['aesara_bincount']}, numba {machine.get('numba', '-')}, "
        f"torch {machine.get('torch', '-')}; OMP_NUM_THREADS={machine['omp_threads']}; {machine['date']}.\n\n"
        "Median ms per call, measured side by side in one process. Ratios: numpy/off = speed-up of "
        "Bincount (openmp off) over numpy.bincount; off/read = Bincount time over one streaming read "
        "of x (`x.max()`, the memory-bound floor); best other/off = speed-up over the faster of numba "
        "and single-thread torch.\n\n"
    )
    return desc + head + "\n".join(lines) + "\n"


def machine_info():
    info = {
        "host": socket.gethostname(),
        "cpu": _cpu_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "aesara": aesara.__version__,
        "aesara_bincount": aesara_bincount.__version__,
        "omp_threads": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count())),
        "date": datetime.date.today().isoformat(),
    }
    for mod in ("numba", "torch"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            pass
    return info


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a small grid (N=1e6 only)")
    p.add_argument("--out", default=os.path.join(HERE, "results"), help="folder for the results")
    p.add_argument("--name", default=None, help="results file stem (default cpu-<host>)")
    p.add_argument("--plot", action="store_true", help="also write the plots into docs/_static/")
    p.add_argument(
        "--table-from", metavar="JSON", default=None,
        help="rewrite the .md table beside a saved .json run, without measuring",
    )
    args = p.parse_args(argv)
    if args.table_from:
        with open(args.table_from) as f:
            saved = json.load(f)
        md = os.path.splitext(args.table_from)[0] + ".md"
        with open(md, "w") as f:
            f.write(f"# CPU benchmark\n\n{table(saved['rows'], saved['machine'])}")
        print(md)
        return

    rng = np.random.default_rng(1)
    sizes = [10**6] if args.quick else [10**4, 10**6, 10**7]
    bins_list = [16, 1000, 10**6]
    fns = Functions()
    extra = optional_competitors()
    machine = machine_info()
    rows = []
    cells = [
        (n, bins, dist, dtype, False)
        for n in sizes
        for bins in bins_list
        for dist in ("uniform", "all-equal", "zipf")
        for dtype in ("int32", "int64")
    ] + [(n, bins, "uniform", "int64", True) for n in sizes for bins in bins_list]
    for i, (n, bins, dist, dtype, weighted) in enumerate(cells):
        times = run_cell(fns, extra, n, bins, dist, dtype, weighted, rng)
        rows.append(dict(n=n, bins=bins, dist=dist, dtype=dtype, weighted=weighted, ms=times))
        t = times
        print(
            f"[{i + 1}/{len(cells)}] N={size_text(n)} bins={size_text(bins)} {dist:9s} {dtype} w={int(weighted)}: "
            + " ".join(f"{k}={v:.3f}" for k, v in t.items()),
            flush=True,
        )
    os.makedirs(args.out, exist_ok=True)
    stem = args.name or f"cpu-{machine['host']}"
    text = table(rows, machine)
    with open(os.path.join(args.out, stem + ".md"), "w") as f:
        f.write(f"# CPU benchmark\n\n{text}")
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump({"machine": machine, "rows": rows}, f, indent=1)
    print()
    print(text)
    if args.plot:
        import plot  # noqa: E402

        plot.main([os.path.join(args.out, stem + ".json")])


if __name__ == "__main__":
    main()
