"""What ``bench_cpu.py`` writes from its measurements: the Markdown table,
the targets of issues 13 and 21 marked met or not, and the README's figures.

Everything here reads a results object ``{"machine": {...}, "rows": [...],
"busy": [...]}`` (the JSON that ``bench_cpu.py`` saves) and measures nothing,
so ``bench_cpu.py --table-from`` and ``--readme`` can rewrite the outputs from
a saved run.

How a target is judged (issue 21): a ratio of one-thread candidates comes
from the calling thread's CPU time (a row's ``cpu_ms``), which other jobs on
the machine cannot inflate by descheduling the thread.  Wall time (``ms``)
counts only where the load average of the cell was below 1 per core; it is
the only clock for OpenMP, whose threads the CPU time of one thread does not
see.  A target that neither clock can judge is reported as not judged
(``n/a``), never as met.  A run saved before CPU times were recorded has only
wall times and the load average at its start.
"""
import re
from typing import Dict, List, Optional, Tuple

from run_info import cpu_words, run_words
from sizes import size_text

#: The issues' targets: a cell (N, bins, dist, dtype of x, float64 weights)
#: and the least speed-up of Bincount with OpenMP off over each peer.  The
#: numba peer is the plain loop of issue 21 (bins known, no checks).  Issue 21
#: asks 1.2x numba in every cell, 2.0x numpy (1.5x in the 1e6-bin int64 cells
#: of issue 13) and 2.5x numpy for the seed case.
TARGETS = [
    ("1e6 values in 1000 bins (the seed case)", (10**6, 1000, "uniform", "int64", False),
     {"numpy": 2.5}),
    ("1e6 values in 1000 bins, float64 weights", (10**6, 1000, "uniform", "int64", True),
     {"numpy": 2.0, "numba": 1.2}),
    ("1e6 values in 1e6 bins, int64 counts", (10**6, 10**6, "uniform", "int64", False),
     {"numpy": 1.5, "numba": 1.2}),
    ("1e6 values in 1e6 bins, float64 weights", (10**6, 10**6, "uniform", "int64", True),
     {"numpy": 1.5, "numba": 1.2}),
    ("1e6 values in 1e6 bins, int32 counts (x int32)", (10**6, 10**6, "uniform", "int32", False),
     {"numpy": 2.0, "numba": 1.2}),
    ("1e7 values in 1e6 bins, int64 counts", (10**7, 10**6, "uniform", "int64", False),
     {"numpy": 2.0, "numba": 1.2}),
]
#: A cell is a loss when Bincount (OpenMP off) is slower than numpy, or than
#: the faster of numba and single-thread torch, by more than this.
NOISE = 0.10
#: Cells from this N up may not be slower than the best peer at all (issue 21).
BIG_N = 10**6
#: OpenMP on, every core busy: at most this times the single-thread time.
BUSY_MAX = 1.5
#: The seed case's OpenMP speed-ups (off / on) before issue 13, on the
#: Xeon 2-core machine (benchmarks/results/cpu-xeon-2core.md, 2026-11-30).
OLD_OMP_SPEEDUP = {False: 0.788 / 0.439, True: 0.917 / 0.629}
SEED = (10**6, 1000, "uniform", "int64")
PEERS = ("numba", "torch_1thread")
#: How a run with ``interleaved_times``'s lead-in timed its calls (the tables' text).
LEAD_IN = "each timed call right after an untimed call of the same candidate"


def cell_key(r) -> Tuple:
    return (r["n"], r["bins"], r["dist"], r["dtype"], r["weighted"])


def find(rows, key) -> Optional[dict]:
    return next((r for r in rows if cell_key(r) == key), None)


def cores(machine) -> int:
    return int(machine.get("cores") or 1)


def row_load(r, machine) -> Optional[float]:
    """The 1-minute load average of a row (or, for an old run, of its start)."""
    if r.get("load"):
        return float(r["load"][0])
    try:
        return float(machine.get("load"))
    except (TypeError, ValueError):
        return None


def quiet(r, machine) -> bool:
    """Was the load average of the row below 1 per core (wall times count)?"""
    load = row_load(r, machine)
    return load is not None and load < cores(machine)


def clock_of(r, machine, *names) -> Tuple[Optional[Dict[str, float]], str]:
    """The figures that judge a comparison of ``names``: CPU or quiet wall time.

    Returns ``(figures, "CPU")``, ``(figures, "wall")`` or ``(None, why)``.
    """
    cpu = r.get("cpu_ms") or {}
    if all(k in cpu for k in names):
        return cpu, "CPU"
    if quiet(r, machine):
        return r["ms"], "wall"
    return None, f"not judged: wall time only, at load {row_load(r, machine)} on {cores(machine)} cores"


def times(r) -> Dict[str, float]:
    """The figures a row is read by: CPU time where recorded, else wall time."""
    return dict(r["ms"], **(r.get("cpu_ms") or {}))


def best_peer(ms: Dict[str, float]) -> Optional[float]:
    others = [ms[k] for k in PEERS if k in ms]
    return min(others) if others else None


def is_loss(r, noise: float = NOISE) -> bool:
    """Is Bincount (OpenMP off) slower than numpy or the best peer, beyond ``noise``?

    ``r`` is a row (its CPU times are used where recorded) or a dict of times.
    """
    ms = times(r) if "ms" in r else r
    off = ms["bincount_omp_off"]
    peers = [ms["numpy"]] + ([best_peer(ms)] if best_peer(ms) else [])
    return any(off > p * (1 + noise) for p in peers)


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


#: The columns of the table in CPU time (one-thread candidates).
CPU_COLS = [("numpy", "numpy"), ("aesara", "Aesara"), ("bincount_omp_off", "omp off"),
            ("numba", "numba"), ("numba_max", "numba+max"), ("torch_1thread", "torch(1t)"),
            ("read", "read")]


def table(rows, machine) -> str:
    """The grid as a Markdown table, with a description of the run."""
    old = not any(r.get("cpu_ms") for r in rows)
    unit = "wall ms" if old else "CPU ms"
    head = (
        "| N | bins | dist | x | w | load | " + " | ".join(f"{c} {unit}" for _, c in CPU_COLS)
        + " | omp off wall ms | omp on wall ms | numpy/off | numba/off | best other/off | off/read "
        "| off/on (wall) |\n" + "|---" * (6 + len(CPU_COLS) + 7) + "|\n"
    )
    lines = []
    for r in rows:
        t, wall = times(r), r["ms"]

        def ms(k, d=t):
            return f"{d[k]:.3f}" if k in d else "-"

        rerun = " (re-run)" if r.get("reruns") else ""
        load = row_load(r, machine)
        lines.append(
            f"| {size_text(r['n'])} | {size_text(r['bins'])} | {r['dist']}{rerun} | {r['dtype']} | "
            f"{'f64' if r['weighted'] else '-'} | {'-' if load is None else f'{load:.1f}'} | "
            + " | ".join(ms(k) for k, _ in CPU_COLS)
            + f" | {ms('bincount_omp_off', wall)} | {ms('bincount_omp_on', wall)} | "
            f"{fmt_ratio(t['numpy'], t['bincount_omp_off'])} | {fmt_ratio(t.get('numba'), t['bincount_omp_off'])} | "
            f"{fmt_ratio(best_peer(t), t['bincount_omp_off'])} | {fmt_ratio(t['bincount_omp_off'], t['read'])} | "
            f"{fmt_ratio(wall['bincount_omp_off'], wall.get('bincount_omp_on'))} |"
        )
    desc = (
        f"Machine: {cpu_words(machine)}, {machine['cores']} cores ({machine['host']}); "
        f"Python {machine['python']}, numpy {machine['numpy']}, Aesara {machine['aesara']}, "
        f"aesara_bincount {machine['aesara_bincount']}, numba {machine.get('numba', '-')}, "
        f"torch {machine.get('torch', '-')}; OMP_NUM_THREADS={machine['omp_threads']}; {machine['date']}"
        + (f"; load average {machine['load']} at the start" if machine.get("load") else "") + ".\n\n"
    )
    if old:
        desc += (
            "Median wall ms per call, measured side by side in one process (a run saved before "
            "CPU times were recorded: its load average is that of the start).  "
        )
    else:
        desc += (
            "Measured side by side in one process, the candidates interleaved call by call"
            + (f"; {LEAD_IN} (the lead-in)" if machine.get("lead_in") else "")
            + "; each figure is the best of 3 rounds of the round's median.  The columns marked CPU ms are "
            "the CPU time of the calling thread (`time.thread_time_ns`), for the candidates that "
            "run in it only; the wall columns are wall-clock times, the only clock for OpenMP.  "
            "`load` is the 1-minute load average after the cell.  "
        )
    desc += (
        "Ratios: numpy/off = speed-up of Bincount (openmp off) over numpy.bincount; numba/off = over "
        "the plain numba loop (bins known, no checks); numba+max is the numba loop that also finds "
        "the bins with `x.max()`; off/read = Bincount time over one streaming read of x (`x.max()`, "
        "the memory-bound floor); best other/off = speed-up over the faster of the numba loop and "
        "single-thread torch; off/on = the wall-time speed-up of OpenMP.  A cell marked (re-run) "
        "lost in a first measurement and was measured again; the second measurement is shown.\n\n"
    )
    return desc + head + "\n".join(lines) + "\n"


def _judged(text, value, met, clock, why):
    return dict(target=text, value=value, met=met, clock=clock, why=why)


def targets(data: dict) -> List[dict]:
    """Each target of issues 13 and 21 with its measured figure, clock and verdict.

    ``met`` is ``True`` or ``False`` where a clock may judge it, else ``None``.
    """
    rows, machine, out = data["rows"], data["machine"], []
    for text, key, need in TARGETS:
        r = find(rows, key)
        if r is None:
            continue
        for peer, least in need.items():
            label = f"{text}: >= {least}x {'the numba loop' if peer == 'numba' else peer}"
            if peer not in r["ms"]:
                out.append(_judged(label, None, None, "-", f"{peer} is not installed"))
                continue
            ms, clock = clock_of(r, machine, peer, "bincount_omp_off")
            if ms is None:
                got = r["ms"][peer] / r["ms"]["bincount_omp_off"]
                out.append(_judged(label, got, None, "wall", clock))
                continue
            got = ms[peer] / ms["bincount_omp_off"]
            out.append(_judged(label, got, got >= least, clock,
                               f"{ms[peer]:.3f} ms / {ms['bincount_omp_off']:.3f} ms"))
    judged = [r for r in rows if clock_of(r, machine, "numpy", "bincount_omp_off")[0] is not None]
    clocks = sorted({clock_of(r, machine, "numpy", "bincount_omp_off")[1] for r in judged})
    losses = [r for r in judged if is_loss(r)]
    out.append(_judged(
        f"no cell slower than numpy or the best of numba and torch(1t), beyond {NOISE:.0%}",
        len(losses), (not losses) if judged else None, "/".join(clocks) or "-",
        ", ".join(_cell_text(r) for r in losses) or f"{len(judged)} of {len(rows)} cells judged",
    ))
    big = [r for r in judged if r["n"] >= BIG_N]
    big_losses = [r for r in big if is_loss(r, noise=0.0)]
    if big:
        out.append(_judged(
            f"no cell at N >= {size_text(BIG_N)} slower than numpy or the best of numba and torch(1t)",
            len(big_losses), not big_losses, "/".join(clocks),
            ", ".join(_cell_text(r) for r in big_losses) or f"all {len(big)} cells",
        ))
    busy = busy_summary(data)
    for case, s in busy.items():
        if s["worst"] is None:
            continue
        out.append(_judged(f"OpenMP on, every core busy ({case}): <= {BUSY_MAX}x OpenMP off",
                           s["worst"], s["worst"] <= BUSY_MAX, "wall (busy by design)",
                           "on/off per round: " + ", ".join(f"{b:.2f}" for b in s["busy"])
                           + (f"; without burners {s['quiet']:.2f}" if s["quiet"] else "")))
    omp = [r for r in rows if r["n"] >= BIG_N and "bincount_omp_on" in r["ms"]]
    quiet_rows = [r for r in omp if quiet(r, machine)]
    slower = [r for r in quiet_rows if r["ms"]["bincount_omp_on"] > r["ms"]["bincount_omp_off"] * (1 + NOISE)]
    seed = []
    for weighted in (False, True):
        r = find(rows, SEED + (weighted,))
        if r is not None:
            seed.append(f"seed {'weighted' if weighted else 'counts'} "
                        f"{r['ms']['bincount_omp_off'] / r['ms']['bincount_omp_on']:.2f}x "
                        f"(before: {OLD_OMP_SPEEDUP[weighted]:.2f}x on the Xeon)")
    if omp:
        why = "; ".join(seed + [", ".join(_cell_text(r) for r in slower)]).strip("; ")
        if len(quiet_rows) < len(omp):
            why += f"; {len(omp) - len(quiet_rows)} of {len(omp)} cells not judged (load >= 1 per core)"
        out.append(_judged("quiet machine: OpenMP on no slower than off (N >= 1e6)",
                           len(slower), (not slower) if quiet_rows else None, "wall", why))
    return out


def _cell_text(r) -> str:
    return (f"{size_text(r['n'])}/{size_text(r['bins'])} {r['dist']} {r['dtype']}"
            + (" w" if r["weighted"] else ""))


def busy_summary(data: dict) -> Dict[str, dict]:
    from busy import summary

    return summary(data.get("busy") or [])


def targets_md(data: dict) -> str:
    lines = ["## Targets of issue 13 and of issue 21", "",
             "Judged on the CPU time of the calling thread, or on wall time where the load "
             "average was below 1 per core (OpenMP: wall time only); `n/a`: not judged.", "",
             "| target | measured | clock | met |", "|---|---|---|---|"]
    for t in targets(data):
        value = "-" if t["value"] is None else (
            f"{t['value']:.2f}" if isinstance(t["value"], float) else str(t["value"]))
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {value} ({t['why']}) | {t['clock']} | {met} |")
    busy = data.get("busy") or []
    if busy:
        lines += ["", "## Busy cores", "",
                  "One CPU-burning process per core, fresh each round (round 0: none); median ms per "
                  "call of each round, OpenMP on and off timed side by side.", "",
                  "| case | round | burners | load | omp off ms | omp on ms | on/off |", "|---|---|---|---|---|---|---|"]
        for b in busy:
            ms = b["ms"]
            lines.append(f"| {b['case']} | {b['round']} | {b['burners']} | {b['load']:.1f} | "
                         f"{ms['omp_off']:.3f} | {ms['omp_on']:.3f} | {ms['omp_on'] / ms['omp_off']:.2f} |")
    return "\n".join(lines) + "\n"


def markdown(data: dict) -> str:
    return f"# CPU benchmark\n\n{table(data['rows'], data['machine'])}\n{targets_md(data)}"


# -- the README's figures ------------------------------------------------------------
BEGIN = ".. bench-figures: begin"
END = ".. bench-figures: end"
#: The markers of the run's words under the README's headline plot.
RUN_BEGIN = ".. bench-run: begin"
RUN_END = ".. bench-run: end"
_README_CELLS = [
    ("x: 1e6 int64, 1000 bins (the seed case)", SEED + (False,)),
    ("the same, float64 weights", SEED + (True,)),
    ("1e6 int64 into 1e6 bins", (10**6, 10**6, "uniform", "int64", False)),
    ("the same, float64 weights", (10**6, 10**6, "uniform", "int64", True)),
    ("1e6 int32 into 1e6 bins", (10**6, 10**6, "uniform", "int32", False)),
    ("1e7 int64 into 1e6 bins", (10**7, 10**6, "uniform", "int64", False)),
]


def readme_block(data: dict, source: str, rows_targets: Optional[List[dict]] = None,
                 rows_source: Optional[str] = None) -> str:
    """The README's figures (reStructuredText), between its markers.

    The run (:func:`run_info.run_words` and its id, as the plots' feet and
    metadata give them), the table of figures of a few cells, then how many
    targets of issues 13 and 21 are met (each is listed in ``source``) and,
    given ``rows_targets`` (from ``bench_rows.targets_judged``), of issue 14.
    """
    m = data["machine"]
    old = not any(r.get("cpu_ms") for r in data["rows"])
    cols = [("numpy", "numpy"), ("aesara", "Aesara's graph"), ("bincount_omp_off", "Bincount, 1 thread"),
            ("bincount_omp_on", f"Bincount, OpenMP ({m.get('omp_threads', '?')} thr.), wall"),
            ("numba", "numba loop"), ("numba_max", "numba + max"), ("torch_1thread", "torch (1 thr.)"),
            ("read", "one read of x")]
    body = []
    for text, key in _README_CELLS:
        r = find(data["rows"], key)
        if r is not None:
            t = dict(times(r), bincount_omp_on=r["ms"].get("bincount_omp_on"))
            body.append([text] + [f"{t[k]:.2f}" if t.get(k) else "-" for k, _ in cols])
    head = ["median wall ms per call" if old else "CPU ms per call"] + [c for _, c in cols]

    def rst_table(head, body):
        widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]
        rule = "  ".join("=" * w for w in widths)

        def line(row):
            return "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()

        return [rule, line(head), rule] + [line(b) for b in body] + [rule, ""]

    clock = ("wall times of the median call" if old else
             "CPU time of the calling thread (``time.thread_time_ns``) for the one-thread "
             "candidates, wall time for OpenMP; candidates interleaved call by call"
             + (f", {LEAD_IN}" if m.get("lead_in") else "")
             + ", best of 3 rounds of the round's median")
    out = [BEGIN, "", f"Measured with ``make bench`` on {cpu_words(m)}, {m['cores']} cores, "
           f"Python {m['python']}, numpy {m['numpy']}, Aesara {m['aesara']}, numba {m.get('numba', '-')}, "
           f"torch {m.get('torch', '-')}, in the {run_words(m)} (run id ``{m.get('run_id', 'none')}``, "
           "the plots' too)"
           + f"; {clock}; ``x`` in an ``aesara.shared`` variable.  The whole grid, with the load "
           f"average of each cell, is in ``{source}``.", ""]
    if body:
        out += rst_table(head, body)
    out += [targets_line("issues 13 and 21", [t["met"] for t in targets(data)], source), ""]
    if rows_targets:
        out += [targets_line("issue 14 (the scatter-add of rows)", [t["met"] for t in rows_targets],
                             rows_source.replace(".json", ".md")), ""]
    busy = {c: v for c, v in busy_summary(data).items() if v["worst"] is not None}
    if busy:
        rounds = max(len(v["busy"]) for v in busy.values())
        cases = "; ".join(f"{c}: {v['worst']:.2f}x (without burners: {v['quiet']:.2f}x)" for c, v in busy.items())
        out += [f"With every core busy (one CPU-burning process per core, fresh in each of {rounds} "
                f"rounds), ``Bincount`` with OpenMP on took, in the worst round, this many times the "
                f"single-thread time of the same round (wall time): {cases}.", ""]
    out.append(END)
    return "\n".join(out)


def targets_line(issues: str, verdicts: List[Optional[bool]], source: str) -> str:
    """One sentence counting the targets of ``issues`` met, not met and not judged."""
    met = sum(v is True for v in verdicts)
    missed = sum(v is False for v in verdicts)
    unjudged = len(verdicts) - met - missed
    return (f"Targets of {issues}: {met} of {len(verdicts)} met, {missed} not met"
            + (f", {unjudged} not judged" if unjudged else "") + f" (the list: ``{source}``).")


def run_block(data: dict) -> str:
    """The README's words under the headline plot: the run it and the figures come from."""
    m = data["machine"]
    return "\n".join([RUN_BEGIN, "", f"Drawn from the {run_words(m)} (run id ``{m.get('run_id', 'none')}``), "
                      "the run of the figures below; its foot says the same.", "", RUN_END])


def write_readme(path: str, data: dict, source: str, rows_targets: Optional[List[dict]] = None,
                 rows_source: Optional[str] = None) -> None:
    """Replace the figures, and the run under the headline plot, between the README's markers."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for begin, end, block in ((BEGIN, END, readme_block(data, source, rows_targets, rows_source)),
                              (RUN_BEGIN, RUN_END, run_block(data))):
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise ValueError(f"{path}: no '{begin}' ... '{end}' markers")
        text = pattern.sub(lambda _: block, text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
