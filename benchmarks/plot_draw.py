"""The plots of ``benchmarks/plot.py``: lines against N and the bin count, the headline bars, the rows bars.

Part of ``benchmarks/plot.py`` (the command line, the captions and the
manifest); the data come from ``plot_data.py`` (reading, labels, footers);
``plot_targets.py`` draws two more plots with the helpers of
:func:`_drawing`.  matplotlib is imported when a plot is drawn, with the Agg
backend.
"""
import math
from typing import Dict, List, Optional, Tuple

from plot_data import (COLORS, HEADLINE, _bins_text, _n_text, _relpath, clock_text, footer, implementations,
                       label, select, times)
from run_info import png_metadata


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ticker():
    from matplotlib import ticker

    return ticker


def _save(fig, path: str, data: dict) -> None:
    """Write ``fig`` with the run of ``data`` (its results file) in the PNG's metadata.

    No software/date metadata: re-running on the same data gives the same file.
    """
    meta = png_metadata(data, ", ".join(_relpath(p) for p in data.get("paths", [])))
    fig.savefig(path, dpi=110, metadata={"Software": None, **meta})
    _plt().close(fig)


def _bar_texts(ax, values, texts, log: bool = False) -> None:
    """Write ``texts`` at the ends of horizontal bars, inside the long ones, and fit the axis.

    A text that would run past the longest bar goes inside its bar (white,
    right-aligned), so the axis ends just past the data rather than leaving
    room for the texts.
    """
    top, low = max(values), min(values)
    if log:
        lo, hi = low / 1.6, top * 1.15
        ax.set_xlim(lo, hi)
        ticker = _ticker()  # ticks at 1, 2, 5 x 10^k, written as numbers; no minor labels
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        span = math.log(hi / lo)
        long_bar = [math.log(v / lo) > 0.6 * span for v in values]
    else:
        ax.set_xlim(0, top * 1.04)
        long_bar = [v > 0.55 * top for v in values]
    for y, (v, text, inside) in enumerate(zip(values, texts, long_bar)):
        if inside:
            x = v / 1.05 if log else v - top * 0.01
            ax.text(x, y, text, va="center", ha="right", fontsize=7.5, color="white", fontweight="bold")
        else:
            x = v * 1.05 if log else v + top * 0.01
            ax.text(x, y, text, va="center", ha="left", fontsize=7.5)


def _style(key: str) -> dict:
    if key == "read":
        return dict(color="black", linestyle="--", marker="", linewidth=1.2)
    return dict(color=COLORS.get(key), marker="o", markersize=4, linewidth=1.6)


def _figure(panels: int, title: str, foot: str):
    plt = _plt()
    fig, axes = plt.subplots(1, panels, figsize=(max(9.0, 3.5 * panels), 5.0), squeeze=False)
    fig.suptitle(title, fontsize=11)
    fig.text(0.01, 0.01, foot, fontsize=7, color="#444444", va="bottom")
    return fig, axes[0]


def _legend(fig, axes) -> None:
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(
        handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.1), ncol=4, fontsize=8,
        frameon=False,
    )
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.36, top=0.86, wspace=0.25)


def line_rows(data: dict, dist: str, dtype: str) -> Tuple[List[dict], str]:
    """Unweighted rows of ``dist`` for the line plots, and their dtype of x.

    ``dtype`` when it has as many cells as any other dtype, else the dtype
    with the most (a GPU grid may be int32 only, with one int64 seed row).
    """
    rows = select(data["rows"], dist=dist, weighted=False)
    counts = {}
    for r in rows:
        counts[r["dtype"]] = counts.get(r["dtype"], 0) + 1
    if counts and counts.get(dtype, 0) < max(counts.values()):
        dtype = max(sorted(counts), key=counts.get)
    return select(rows, dtype=dtype), dtype


def _line_plot(data, path, rows, panel_by, x_by, title, ylabel, note, keys, value, label_of, decorate):
    """One panel per value of ``panel_by``; in each, ``value(row, key)`` against ``x_by``."""
    panels = sorted({r[panel_by] for r in rows})
    fig, axes = _figure(len(panels), title, footer(data, note))
    for ax, panel in zip(axes, panels):
        cell = sorted(select(rows, **{panel_by: panel}), key=lambda r: r[x_by])
        for key in keys:
            pts = [(r[x_by], value(r, key)) for r in cell if times(r).get(key)]
            if pts:
                ax.plot(*zip(*pts), label=label_of(key), **_style(key))
        ax.set_xscale("log")
        ax.set_yscale("log")
        if len(cell) == 1:
            ax.set_xlim(cell[0][x_by] / 3, cell[0][x_by] * 3)
        # Ticks at the measured sizes only, written as the grid writes them.
        xs = sorted({r[x_by] for r in cell})
        ax.set_xticks(xs)
        ax.set_xticklabels([_n_text(v) if x_by == "n" else _bins_text(v) for v in xs])
        ax.xaxis.set_minor_locator(_ticker().NullLocator())
        decorate(ax, panel)
    axes[0].set_ylabel(ylabel)
    _legend(fig, axes)
    _save(fig, path, data)
    return path


def plot_time_vs_n(data: dict, path: str, dist: str, dtype: str, note: str = "") -> Optional[str]:
    """Median ms per call against N, one panel per bin count (CPU time where recorded)."""
    rows, dtype = line_rows(data, dist, dtype)
    if not rows:
        return None

    def decorate(ax, bins):
        ax.set_title(f"bins = {_bins_text(bins)}", fontsize=10)
        ax.set_xlabel("N (elements of x)")
        ax.grid(True, which="major", alpha=0.3)

    return _line_plot(
        data, path, rows, "bins", "n",
        f"{data['kind'].upper()}: time per call against N (x {dtype}, {dist} in [0, bins), counts)\n"
        f"Times: {clock_text(rows)}",
        "median ms per call (log)", note, implementations(rows),
        lambda r, k: times(r)[k],
        lambda k: label(k, data["machine"], data["kind"]), decorate,
    )


def plot_speedup_vs_bins(
    data: dict, path: str, dist: str, dtype: str, note: str = ""
) -> Optional[str]:
    """numpy's time over each implementation's, against the bin count, per N."""
    rows, dtype = line_rows(data, dist, dtype)
    if not rows:
        return None
    ticker = _ticker()

    def label_of(key):
        if key == "read":
            return "floor: numpy / " + ("one read of x" if data["kind"] == "cpu" else "floor")
        return label(key, data["machine"], data["kind"])

    def decorate(ax, n):
        ax.axhline(1.0, color=COLORS["numpy"], linewidth=1, label="numpy.bincount (1x)")
        ax.set_title(f"N = {_n_text(n)}", fontsize=10)
        ax.set_xlabel("bins")
        ax.grid(True, which="both", alpha=0.25)
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())

    return _line_plot(
        data, path, rows, "n", "bins",
        f"{data['kind'].upper()}: speed-up over numpy.bincount against the bin count "
        f"(x {dtype}, {dist}, counts)\nTimes: {clock_text(rows)}",
        "numpy time / time (higher is faster)", note,
        [k for k in implementations(rows) if k != "numpy"],
        lambda r, k: times(r)["numpy"] / times(r)[k], label_of, decorate,
    )


def _ms_text(ms: float) -> str:
    return f"{ms:.2f}" if ms >= 0.1 else f"{ms:.3g}"


def _versus(numpy_ms: float, ms: float, key: str) -> str:
    if key == "numpy":
        return "(baseline)"
    if key == "read":
        return "(no implementation can go below)"
    if ms <= numpy_ms:
        return f"({numpy_ms / ms:.1f}x faster)"
    return f"({ms / numpy_ms:.1f}x slower)"


def plot_headline(cpu: Optional[dict], gpu: Optional[dict], path: str, note: str = "") -> Optional[str]:
    """Bars of the seed case, counts and weighted, CPU and GPU implementations."""
    panels: List[Tuple[str, List[Tuple[str, float, str]]]] = []
    for weighted, title in ((False, "bincount(x)"), (True, "bincount(x, weights=w), w float64")):
        bars = []
        for data in (cpu, gpu):
            if data is None:
                continue
            cell = select(data["rows"], weighted=weighted, **HEADLINE)
            if not cell:
                continue
            ms = times(cell[0])
            tag = "" if data is cpu else " [GPU run]"
            for key in implementations(cell):
                if data is gpu and key in ("numpy", "aesara") and cpu is not None:
                    continue  # the CPU run already has these bars
                name = label(key, data["machine"], data["kind"]) + (tag if key in ("numpy", "read") else "")
                bars.append((name, ms[key], key))
        if bars:
            panels.append((title, bars))
    if not panels:
        return None
    base = cpu if cpu is not None else gpu
    plt = _plt()
    height = max(len(b) for _, b in panels) * 0.32 + 1.9
    same_rows = len({tuple(b[0] for b in bars) for _, bars in panels}) == 1
    fig, axes = plt.subplots(1, len(panels), figsize=(11, height), squeeze=False, sharey=same_rows)
    axes = axes[0]
    clock = clock_text([r for d in (cpu, gpu) if d is not None for r in d["rows"]])
    fig.suptitle(
        "Seed case: 1,000,000 int64 values uniform in [0, 1000), x in aesara.shared "
        "(median ms per call; shorter is faster; ratios against numpy.bincount)\n"
        f"Times: {clock}",
        fontsize=10,
    )
    for ax, (title, bars) in zip(axes, panels):
        numpy_ms = next(v for _, v, k in bars if k == "numpy")
        names = [b[0] for b in bars][::-1]
        values = [b[1] for b in bars][::-1]
        colors = [COLORS.get(b[2], "#999999") for b in bars][::-1]
        hatches = ["//" if b[2] == "read" else "" for b in bars][::-1]
        rects = ax.barh(names, values, color=colors, edgecolor="white")
        for rect, hatch, key in zip(rects, hatches, [b[2] for b in bars][::-1]):
            if hatch:
                rect.set_facecolor("white")
                rect.set_edgecolor("black")
                rect.set_hatch(hatch)
        top, low = max(values), min(values)
        log = top / max(low, 1e-9) > 100  # GPU bars next to CPU ones
        keys = [b[2] for b in bars][::-1]
        if log:
            ax.set_xscale("log")
        _bar_texts(ax, values, [f"{_ms_text(v)} ms {_versus(numpy_ms, v, k)}" for v, k in zip(values, keys)], log)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("median ms per call" + (" (log)" if log else ""))
        ax.tick_params(axis="y", labelsize=8)
    foot = footer(base, note)
    if gpu is not None and base is not gpu:
        foot += "\nGPU run: " + footer(gpu).replace("\n", "; ")
    fig.text(0.01, 0.01, foot, fontsize=7, color="#444444", va="bottom")
    fig.tight_layout(rect=(0, 0.04 + 0.028 * foot.count("\n"), 1, 0.93))
    _save(fig, path, base)
    return path



# -- the scatter-add of rows (benchmarks/bench_rows.py) ---------------------------
#: Colours of bench_rows.py's implementations.
ROWS_COLORS = {
    "aesara": COLORS["aesara"],
    "ours_omp_off": COLORS["bincount_omp_off"],
    "ours_omp_on": COLORS["bincount_omp_on"],
    "np_add_at": COLORS["numpy"],
    "numba": COLORS["numba"],
    "torch_1thread": COLORS["torch_1thread"],
}


def plot_rows(data: dict, path: str, labels: Dict[str, str]) -> str:
    """Bars of ``bench_rows.py``'s cells: median ms of each implementation, one panel per cell.

    The bars are thread CPU time where a row has it (``cpu_ms``, the
    one-thread candidates), wall time otherwise; the title says which.

    ``data`` is what ``bench_rows.py`` writes (``rows`` with ``form``, ``n``,
    ``nrows``, ``width``, ``dtype`` and ``ms``), with ``kind`` and ``paths``
    added; ``labels`` names the implementations.  The floor (one read of the
    increments and the indices) is hatched.
    """
    plt = _plt()
    rows = data["rows"]
    cols = 4
    lines = (len(rows) + cols - 1) // cols
    fig, axes = plt.subplots(lines, cols, figsize=(15, 3.1 * lines + 1.2), squeeze=False)
    fig.suptitle(
        "Scatter-add of rows: median ms per call (shorter is faster; log scale), "
        f"side by side in one process;\n{clock_text(rows)}", fontsize=10,
    )
    for ax, r in zip(axes.flat, rows):
        keys = [k for k in labels if k in r["ms"]][::-1]
        values = [times(r)[k] for k in keys]
        bars = ax.barh([labels[k] for k in keys], values,
                       color=[ROWS_COLORS.get(k, "white") for k in keys], edgecolor="black", linewidth=0.4)
        for bar, key in zip(bars, keys):
            if key == "read":
                bar.set_hatch("//")
        ax.set_xscale("log")
        _bar_texts(ax, values, [_ms_text(v) for v in values], log=True)
        width = "" if r["width"] == 1 else f" x {r['width']}"
        ax.set_title(
            f"{r['form']}: {_n_text(r['n'])} rows into {_n_text(r['nrows'])}{width}, {r['dtype']}",
            fontsize=9,
        )
        ax.tick_params(axis="both", labelsize=7)
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    foot = footer(data)
    fig.text(0.01, 0.01, foot, fontsize=7, color="#444444", va="bottom")
    fig.tight_layout(rect=(0, 0.04 + 0.02 * foot.count("\n"), 1, 0.95))
    _save(fig, path, data)
    return path


def _drawing():
    """The drawing helpers of this module, for ``plot_targets``."""
    from types import SimpleNamespace

    return SimpleNamespace(_plt=_plt, label=label, COLORS=COLORS, footer=footer, _save=_save,
                           _ms_text=_ms_text, _bar_texts=_bar_texts)
