#!/usr/bin/env python
"""Plots of the benchmark results, for the documentation and the README.

Usage::

    python benchmarks/plot.py [RESULTS.json ...] [--out docs/_static]

or ``make plots``, or ``benchmarks/bench_cpu.py --plot`` (which passes the
file it has just written).  Each file given is a CPU or a GPU results file
(see "Input" in ``plot_data.py``).  For a kind that no file given covers, the results folder
(``benchmarks/results/``) is searched: of its ``*.json`` files of that kind,
the one with the most rows wins, then the newest date, then the newest file.
So the CPU benchmark regenerates the CPU plots and keeps the GPU ones, and the
other way round.

Output, in ``--out`` (default ``docs/_static/``):

``headline.png``
    The seed case (N = 1e6 int64 values, uniform in [0, 1000)), counts and
    float64-weighted sums: median ms of every implementation, as bars, with
    the GPU rows when a GPU results file exists.  The README shows it.
``cpu_time_vs_n.png`` / ``gpu_time_vs_n.png``
    Median time per call against N, one panel per bin count.
``cpu_speedup_vs_bins.png`` / ``gpu_speedup_vs_bins.png``
    ``numpy.bincount``'s time over each implementation's, against the bin
    count, one panel per N.
``cpu_targets.png`` / ``cpu_busy.png``
    The cells of the targets of issue 13, and the busy-cores scenario
    (OpenMP on against off while every core runs another process); see
    ``plot_targets.py``.  Drawn when the CPU results hold them.
``plots.json``
    The manifest the documentation reads (``docs/_ext/perfplots.py``): one
    entry per PNG with its kind, alt text, caption, results files and date.  A GPU plot appears in
    the documentation only when it is listed here.

Every plot names the machine, the versions and its run (date, time and load
average: ``run_info.run_words``, the words the README's figures print too),
stores the run's id and a digest of the figures it shows in the PNG's
metadata (``tests/test_plots_fresh.py`` checks them against the results
files), and draws
the memory-bandwidth floor: the time of one streaming read of ``x`` (the
``read`` entry), below which no implementation can go.

The script is cut in three: this file (the command line, the captions and
the manifest), ``plot_data.py`` (reading and checking the results files,
their format, the labels and the footers) and ``plot_draw.py`` (the plots
themselves); ``plot_targets.py`` draws the two plots of the issue-13
targets.  The names of the first two are also reachable from here
(``plot.load``, ``plot.plot_rows``, ...), as they were before the cut.
"""
import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # plot_data, plot_draw, plot_targets, cpu_report, sizes

from plot_data import (  # noqa: E402,F401  (re-exported: the names of plot.py before the cut)
    COLORS,
    GPU_BENCH_TIMES,
    HEADLINE,
    LABELS,
    RESULTS,
    STATIC,
    SchemaError,
    _relpath,
    clock_text,
    discover,
    footer,
    from_bench_gpu,
    implementations,
    label,
    load,
    machine_line,
    machine_parts,
    merge,
    select,
)
from run_info import run_words  # noqa: E402
from plot_draw import (  # noqa: E402,F401
    ROWS_COLORS,
    _drawing,
    line_rows,
    plot_headline,
    plot_rows,
    plot_speedup_vs_bins,
    plot_time_vs_n,
)


# -- the manifest --------------------------------------------------------------
def _caption(kind: str, name: str, data: dict, dist: str, dtype: str, note: str) -> str:
    run = f"Measured on {machine_line(data)}; data: " + ", ".join(
        f"``{_relpath(p)}``" for p in data["paths"]
    ) + "."
    if note:
        run += f" {note[0].upper()}{note[1:]}."
    if name == "time_vs_n":
        what = (
            f"Median time per call against the length N of x ({dtype}, {dist} in "
            "[0, bins), counts), one panel per bin count, log-log. The dashed line is "
            "one streaming read of x, the memory-bandwidth floor."
        )
    else:
        what = (
            f"Speed-up over ``numpy.bincount`` (numpy's time divided by each "
            f"implementation's) against the bin count, one panel per N ({dtype}, {dist}, "
            "counts). The dashed line is numpy's time over one read of x: no "
            "implementation can rise above it."
        )
    clock = clock_text(data["rows"])
    return f"{kind.upper()}: {what} Times: {clock[0].upper()}{clock[1:]}. {run}"


def main(argv: Optional[Sequence[str]] = None) -> List[str]:
    """Write the plots and the manifest; return the paths written."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="The input format is described in the docstring of benchmarks/plot_data.py.",
    )
    p.add_argument("results", nargs="*", help="results JSON files (CPU or GPU)")
    p.add_argument("--out", default=STATIC, help="folder for the PNGs (default: docs/_static)")
    p.add_argument("--results-dir", default=RESULTS, help="where missing kinds are searched")
    p.add_argument("--dist", default="uniform", help="distribution of the line plots")
    p.add_argument("--dtype", default="int64", help="dtype of x in the line plots")
    p.add_argument("--note", default="", help="a remark added to every caption and footer")
    args = p.parse_args(argv)

    given: Dict[str, dict] = {}
    for path in args.results:
        data = load(path)
        kind = data["kind"]
        given[kind] = merge(given[kind], data) if kind in given else data
    for kind in ("cpu", "gpu"):
        if kind not in given:
            found = discover(kind, args.results_dir)
            if found is not None:
                given[kind] = found
    if not given:
        p.error(f"no results file given or found in {args.results_dir}")

    os.makedirs(args.out, exist_ok=True)
    written, manifest = [], []
    for kind in ("cpu", "gpu"):
        data = given.get(kind)
        if data is None:
            continue
        for name, fn in (("time_vs_n", plot_time_vs_n), ("speedup_vs_bins", plot_speedup_vs_bins)):
            fname = f"{kind}_{name}.png"
            if fn(data, os.path.join(args.out, fname), args.dist, args.dtype, args.note):
                written.append(os.path.join(args.out, fname))
                manifest.append(
                    dict(
                        kind=kind,
                        name=name,
                        file=fname,
                        alt=f"{kind.upper()} benchmark: {name.replace('_', ' ')}",
                        caption=_caption(
                            kind, name, data, args.dist,
                            line_rows(data, args.dist, args.dtype)[1], args.note,
                        ),
                        sources=[_relpath(p) for p in data["paths"]],
                        date=str(data["machine"].get("date", "")),
                    )
                )
    headline = os.path.join(args.out, "headline.png")
    headline_base = given.get("cpu") or given.get("gpu")
    if plot_headline(given.get("cpu"), given.get("gpu"), headline, args.note):
        written.append(headline)
        sources = [_relpath(p) for d in given.values() for p in d["paths"]]
        manifest.append(
            dict(
                kind="headline",
                name="headline",
                file="headline.png",
                alt="Seed case: median time per call of each implementation",
                caption=(
                    "The seed case, 1,000,000 int64 values uniform in [0, 1000): median "
                    "time per call of each implementation, counts and float64-weighted "
                    "sums ("
                    + clock_text([r for d in given.values() for r in d["rows"]])
                    + "). Measured in the " + run_words(headline_base["machine"])
                    + ". Data: " + ", ".join(f"``{s}``" for s in sources) + "."
                    + (f" {args.note[0].upper()}{args.note[1:]}." if args.note else "")
                ),
                sources=sources,
                date=max(str(d["machine"].get("date", "")) for d in given.values()),
            )
        )
    extra_written = set()
    if "cpu" in given:
        import plot_targets

        data = given["cpu"]
        sources = [_relpath(p) for p in data["paths"]]
        texts = plot_targets.captions(data, ", ".join(sources))
        for kind, fname, fn in (("cpu-targets", "cpu_targets.png", plot_targets.plot_targets),
                                ("cpu-busy", "cpu_busy.png", plot_targets.plot_busy)):
            if fn(data, os.path.join(args.out, fname), _drawing()):
                alt, caption = texts[fname]
                written.append(os.path.join(args.out, fname))
                extra_written.add(fname)
                manifest.append(dict(kind=kind, name=fname[:-4], file=fname, alt=alt,
                                     caption=caption + (f" {args.note}" if args.note else ""),
                                     sources=sources, date=str(data["machine"].get("date", ""))))
    # Drop PNGs that have no data any more, so the docs never show them.
    stale = [f"{kind}_{name}.png" for kind in ("cpu", "gpu") if kind not in given
             for name in ("time_vs_n", "speedup_vs_bins")]
    stale += [f for f in ("cpu_targets.png", "cpu_busy.png") if f not in extra_written]
    for name in stale:
        if os.path.exists(os.path.join(args.out, name)):
            os.remove(os.path.join(args.out, name))
    with open(os.path.join(args.out, "plots.json"), "w", encoding="utf-8") as f:
        json.dump(
            {
                "generated_by": "benchmarks/plot.py",
                "plots": manifest,
            },
            f,
            indent=1,
        )
        f.write("\n")
    written.append(os.path.join(args.out, "plots.json"))
    for path in written:
        print("wrote", _relpath(path))
    return written


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)