"""What ``bench_cpu.py`` writes from its measurements: the Markdown table,
the targets of issue 13 marked met or not, and the README's figures.

Everything here reads a results object ``{"machine": {...}, "rows": [...],
"busy": [...]}`` (the JSON that ``bench_cpu.py`` saves) and measures nothing,
so ``bench_cpu.py --table-from`` and ``--readme`` can rewrite the outputs from
a saved run.
"""
import re
from typing import Dict, List, Optional, Tuple

from sizes import size_text

#: The issue's targets: a cell (N, bins, dist, dtype of x, float64 weights)
#: and the least speed-up of Bincount with OpenMP off over each peer.
TARGETS = [
    ("1e6 values in 1000 bins, float64 weights", (10**6, 1000, "uniform", "int64", True),
     {"numpy": 2.0, "numba": 1.2}),
    ("1e6 values in 1e6 bins, int64 counts", (10**6, 10**6, "uniform", "int64", False),
     {"numpy": 1.5, "numba": 1.2}),
    ("1e6 values in 1e6 bins, float64 weights", (10**6, 10**6, "uniform", "int64", True),
     {"numpy": 1.5, "numba": 1.2}),
    ("1e6 values in 1e6 bins, int32 counts (x int32)", (10**6, 10**6, "uniform", "int32", False),
     {"numpy": 2.0}),
    ("1e7 values in 1e6 bins, int64 counts", (10**7, 10**6, "uniform", "int64", False),
     {"numpy": 2.0}),
]
#: A cell is a loss when Bincount (OpenMP off) is slower than numpy, or than
#: the faster of numba and single-thread torch, by more than this.
NOISE = 0.10
#: OpenMP on, every core busy: at most this times the single-thread time.
BUSY_MAX = 1.5
#: The seed case's OpenMP speed-ups (off / on) before issue 13, on the
#: Xeon 2-core machine (benchmarks/results/cpu-xeon-2core.md, 2026-11-30).
OLD_OMP_SPEEDUP = {False: 0.788 / 0.439, True: 0.917 / 0.629}
SEED = (10**6, 1000, "uniform", "int64")
PEERS = ("numba", "torch_1thread")


def cell_key(r) -> Tuple:
    return (r["n"], r["bins"], r["dist"], r["dtype"], r["weighted"])


def find(rows, key) -> Optional[dict]:
    return next((r for r in rows if cell_key(r) == key), None)


def best_peer(ms: Dict[str, float]) -> Optional[float]:
    others = [ms[k] for k in PEERS if k in ms]
    return min(others) if others else None


def is_loss(ms: Dict[str, float]) -> bool:
    """Is Bincount (OpenMP off) slower than numpy or the best peer, beyond noise?"""
    off = ms["bincount_omp_off"]
    peers = [ms["numpy"]] + ([best_peer(ms)] if best_peer(ms) else [])
    return any(off > p * (1 + NOISE) for p in peers)


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def table(rows, machine) -> str:
    """The grid as a Markdown table, with a description of the run."""
    head = (
        "| N | bins | dist | x | w | numpy ms | Aesara ms | omp off ms | omp on ms | numba ms | "
        "torch(1t) ms | read ms | numpy/off | numpy/on | Aesara/off | off/read | best other/off |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        t = r["ms"]

        def ms(k):
            return f"{t[k]:.3f}" if k in t else "-"

        rerun = " (re-run)" if r.get("reruns") else ""
        lines.append(
            f"| {size_text(r['n'])} | {size_text(r['bins'])} | {r['dist']}{rerun} | {r['dtype']} | "
            f"{'f64' if r['weighted'] else '-'} | "
            f"{ms('numpy')} | {ms('aesara')} | {ms('bincount_omp_off')} | {ms('bincount_omp_on')} | "
            f"{ms('numba')} | {ms('torch_1thread')} | {ms('read')} | "
            f"{fmt_ratio(t['numpy'], t['bincount_omp_off'])} | {fmt_ratio(t['numpy'], t['bincount_omp_on'])} | "
            f"{fmt_ratio(t.get('aesara'), t['bincount_omp_off'])} | {fmt_ratio(t['bincount_omp_off'], t['read'])} | "
            f"{fmt_ratio(best_peer(t), t['bincount_omp_off'])} |"
        )
    desc = (
        f"Machine: {machine['cpu']}, {machine['cores']} cores ({machine['host']}); "
        f"Python {machine['python']}, numpy {machine['numpy']}, Aesara {machine['aesara']}, "
        f"aesara_bincount {machine['aesara_bincount']}, numba {machine.get('numba', '-')}, "
        f"torch {machine.get('torch', '-')}; OMP_NUM_THREADS={machine['omp_threads']}; {machine['date']}"
        + (f"; load average {machine['load']}" if machine.get("load") else "") + ".\n\n"
        "Median ms per call, measured side by side in one process. Ratios: numpy/off = speed-up of "
        "Bincount (openmp off) over numpy.bincount; off/read = Bincount time over one streaming read "
        "of x (`x.max()`, the memory-bound floor); best other/off = speed-up over the faster of numba "
        "and single-thread torch. A cell marked (re-run) lost in a first measurement and was measured "
        "again; the second measurement is shown.\n\n"
    )
    return desc + head + "\n".join(lines) + "\n"


def targets(data: dict) -> List[dict]:
    """Each target of issue 13 with its measured figure and whether it is met."""
    rows, out = data["rows"], []
    for text, key, need in TARGETS:
        r = find(rows, key)
        if r is None:
            continue
        ms = r["ms"]
        for peer, least in need.items():
            if peer not in ms:
                out.append(dict(target=f"{text}: >= {least}x {peer}", value=None, met=None,
                                why=f"{peer} is not installed"))
                continue
            got = ms[peer] / ms["bincount_omp_off"]
            out.append(dict(target=f"{text}: >= {least}x {peer}", value=got, met=got >= least,
                            why=f"{ms[peer]:.3f} ms / {ms['bincount_omp_off']:.3f} ms"))
    losses = [r for r in rows if is_loss(r["ms"])]
    out.append(dict(
        target=f"no cell slower than numpy or the best of numba and torch(1t), beyond {NOISE:.0%}",
        value=len(losses), met=not losses,
        why=", ".join(_cell_text(r) for r in losses) or f"all {len(rows)} cells",
    ))
    busy = busy_summary(data)
    for case, s in busy.items():
        if s["worst"] is None:
            continue
        out.append(dict(target=f"OpenMP on, every core busy ({case}): <= {BUSY_MAX}x OpenMP off",
                        value=s["worst"], met=s["worst"] <= BUSY_MAX,
                        why="on/off per round: " + ", ".join(f"{b:.2f}" for b in s["busy"])
                        + (f"; without burners {s['quiet']:.2f}" if s["quiet"] else "")))
    big = [r for r in rows if r["n"] >= 10**6 and "bincount_omp_on" in r["ms"]]
    slower = [r for r in big if r["ms"]["bincount_omp_on"] > r["ms"]["bincount_omp_off"] * (1 + NOISE)]
    seed = []
    for weighted in (False, True):
        r = find(rows, SEED + (weighted,))
        if r is not None:
            seed.append(f"seed {'weighted' if weighted else 'counts'} "
                        f"{r['ms']['bincount_omp_off'] / r['ms']['bincount_omp_on']:.2f}x "
                        f"(before: {OLD_OMP_SPEEDUP[weighted]:.2f}x on the Xeon)")
    if big:
        out.append(dict(target="quiet machine: OpenMP on no slower than off (N >= 1e6)",
                        value=len(slower), met=not slower,
                        why="; ".join(seed + [", ".join(_cell_text(r) for r in slower)]).strip("; ")))
    return out


def _cell_text(r) -> str:
    return (f"{size_text(r['n'])}/{size_text(r['bins'])} {r['dist']} {r['dtype']}"
            + (" w" if r["weighted"] else ""))


def busy_summary(data: dict) -> Dict[str, dict]:
    from busy import summary

    return summary(data.get("busy") or [])


def targets_md(data: dict) -> str:
    lines = ["## Targets of issue 13", "", "| target | measured | met |", "|---|---|---|"]
    for t in targets(data):
        value = "-" if t["value"] is None else (
            f"{t['value']:.2f}" if isinstance(t["value"], float) else str(t["value"]))
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "**no**")
        lines.append(f"| {t['target']} | {value} ({t['why']}) | {met} |")
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
_README_CELLS = [
    ("x: 1e6 int64, 1000 bins (the seed case)", SEED + (False,)),
    ("the same, float64 weights", SEED + (True,)),
    ("1e6 int64 into 1e6 bins", (10**6, 10**6, "uniform", "int64", False)),
    ("the same, float64 weights", (10**6, 10**6, "uniform", "int64", True)),
    ("1e6 int32 into 1e6 bins", (10**6, 10**6, "uniform", "int32", False)),
    ("1e7 int64 into 1e6 bins", (10**7, 10**6, "uniform", "int64", False)),
]


def readme_block(data: dict, source: str) -> str:
    """The README's table of figures (reStructuredText), between its markers."""
    m = data["machine"]
    cols = [("numpy", "numpy"), ("aesara", "Aesara's graph"), ("bincount_omp_off", "Bincount, 1 thread"),
            ("bincount_omp_on", f"Bincount, OpenMP ({m.get('omp_threads', '?')} thr.)"),
            ("numba", "numba"), ("torch_1thread", "torch (1 thr.)"), ("read", "one read of x")]
    body = []
    for text, key in _README_CELLS:
        r = find(data["rows"], key)
        if r is not None:
            body.append([text] + [f"{r['ms'][k]:.2f}" if k in r["ms"] else "-" for k, _ in cols])
    head = ["median ms per call"] + [c for _, c in cols]
    widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]
    rule = "  ".join("=" * w for w in widths)

    def line(row):
        return "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip()

    out = [BEGIN, "", f"Measured with ``make bench`` on {m['cpu']}, {m['cores']} cores, "
           f"Python {m['python']}, numpy {m['numpy']}, Aesara {m['aesara']}, numba {m.get('numba', '-')}, "
           f"torch {m.get('torch', '-')}, {m['date']}"
           + (f" (load average {m['load']} at the start)" if m.get("load") else "")
           + f"; all candidates timed side by side in one process; ``x`` in an ``aesara.shared`` "
           f"variable.  The whole grid, and the targets of issue 13 marked met or not, are in "
           f"``{source}``.", ""]
    if body:
        out += [rule, line(head), rule] + [line(b) for b in body] + [rule, ""]
    busy = {c: v for c, v in busy_summary(data).items() if v["worst"] is not None}
    if busy:
        rounds = max(len(v["busy"]) for v in busy.values())
        cases = "; ".join(f"{c}: {v['worst']:.2f}x (without burners: {v['quiet']:.2f}x)" for c, v in busy.items())
        out += [f"With every core busy (one CPU-burning process per core, fresh in each of {rounds} "
                f"rounds), ``Bincount`` with OpenMP on took, in the worst round, this many times the "
                f"single-thread time of the same round: {cases}.", ""]
    out.append(END)
    return "\n".join(out)


def write_readme(path: str, data: dict, source: str) -> None:
    """Replace the figures between the markers of the README at ``path``."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path}: no '{BEGIN}' ... '{END}' markers")
    text = pattern.sub(lambda _: readme_block(data, source), text)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
