"""Two plots of a CPU results file for issue 13, drawn by ``plot.py``.

``cpu_targets.png``
    The cells of the issue's targets (weighted sums in 1000 bins, 1e6 bins,
    1e7 values): median ms of every implementation, as bars, each labelled
    with its ratio to Bincount with OpenMP off.
``cpu_busy.png``
    The busy-cores scenario (``busy.py``): OpenMP-on time over OpenMP-off
    time in the round without burners and in each round with one CPU-burning process per
    core, per case, with the 1.5x target drawn.
"""
from typing import Optional

import cpu_report
from run_info import run_words

#: Bars of the targets plot, in order.
BARS = ("numpy", "numba", "torch_1thread", "bincount_omp_off", "bincount_omp_on", "read")


def plot_targets(data: dict, path: str, plot) -> Optional[str]:
    """One panel per target cell present in ``data``; ``plot`` is the plot module."""
    cells = []
    for text, key, need in cpu_report.TARGETS:
        r = cpu_report.find(data["rows"], key)
        if r is not None and all(k in r["ms"] for k in ("numpy", "bincount_omp_off", "read")):
            cells.append((text, r, need))
    if not cells:
        return None
    plt = plot._plt()
    fig, axes = plt.subplots(1, len(cells), figsize=(3.3 * len(cells) + 1, 4.6), squeeze=False)
    fig.suptitle("Target cells of issues 13 and 21: ms per call, CPU time where recorded "
                 "(shorter is faster; ratios: time / Bincount OpenMP off)", fontsize=10)
    for ax, (text, r, need) in zip(axes[0], cells):
        ms = cpu_report.times(r)  # thread CPU time where recorded (issue 21), OpenMP's wall time
        keys = [k for k in BARS if k in ms][::-1]
        values = [ms[k] for k in keys]
        labels = [plot.label(k, data["machine"]) for k in keys]
        rects = ax.barh(labels, values, color=[plot.COLORS.get(k, "#999999") for k in keys])
        for rect, k in zip(rects, keys):
            if k == "read":
                rect.set_facecolor("white")
                rect.set_edgecolor("black")
                rect.set_hatch("//")
        plot._bar_texts(ax, values, [
            plot._ms_text(v) + ("" if k == "bincount_omp_off" else f"  {v / ms['bincount_omp_off']:.2f}x")
            for v, k in zip(values, keys)])
        goal = ", ".join(f">= {v}x {k}" for k, v in need.items())
        ax.set_title(f"{text}\n(target: {goal})", fontsize=8)
        ax.set_xlabel("median ms per call", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.tick_params(axis="x", labelsize=7)
    for ax in axes[0][1:]:
        ax.set_yticklabels([])
    foot = plot.footer(data)
    fig.text(0.01, 0.01, foot, fontsize=7, color="#444444", va="bottom")
    fig.tight_layout(rect=(0, 0.04 + 0.03 * foot.count("\n"), 1, 0.93))
    plot._save(fig, path, data)
    return path


def plot_busy(data: dict, path: str, plot) -> Optional[str]:
    """OpenMP on / off per round of the busy-cores scenario, one group per case."""
    busy = data.get("busy") or []
    if not busy:
        return None
    cases = []
    for b in busy:
        if b["case"] not in cases:
            cases.append(b["case"])
    plt = plot._plt()
    fig, ax = plt.subplots(figsize=(9, 4.6))
    width = 0.8 / max(1, max(b["round"] for b in busy) + 1)
    for b in busy:
        x = cases.index(b["case"]) + (b["round"] - 0.5 * max(x["round"] for x in busy)) * width
        ratio = b["ms"]["omp_on"] / b["ms"]["omp_off"]
        color = "#55a868" if b["burners"] == 0 else "#c44e52"
        ax.bar(x, ratio, width * 0.9, color=color)
        ax.text(x, ratio, f"{ratio:.2f}", ha="center", va="bottom", fontsize=7)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ax.axhline(cpu_report.BUSY_MAX, color="black", linestyle="--", linewidth=1)
    ax.axhline(1.0, color="#888888", linewidth=0.8)
    handles = [Line2D([], [], color="black", linestyle="--", label=f"target: {cpu_report.BUSY_MAX}x"),
               Patch(color="#55a868", label="no burners"),
               Patch(color="#c44e52", label="one CPU-burning process per core (fresh each round)")]
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels(cases, fontsize=8)
    ax.set_ylabel("OpenMP on time / OpenMP off time")
    ax.set_title("Busy cores: Bincount with OpenMP on against one thread, per round "
                 "(lower is better)", fontsize=10)
    ax.legend(handles=handles, fontsize=8, loc="upper right")
    top = max(b["ms"]["omp_on"] / b["ms"]["omp_off"] for b in busy)
    ax.set_ylim(0, max(cpu_report.BUSY_MAX, top) * 1.3)
    foot = plot.footer(data)
    fig.text(0.01, 0.01, foot, fontsize=7, color="#444444", va="bottom")
    fig.tight_layout(rect=(0, 0.04 + 0.03 * foot.count("\n"), 1, 1))
    plot._save(fig, path, data)
    return path


def captions(data: dict, source: str) -> dict:
    """Alt text and caption of each plot, by file name."""
    run = f"Measured on {plot_machine(data)}; data: ``{source}``."
    cells = ", ".join(text for text, key, _ in cpu_report.TARGETS)
    return {
        "cpu_targets.png": (
            "Issue 13 target cells: median time per call of each implementation",
            f"The cells of the targets of issue 13 ({cells}): median time per call of "
            f"numpy, numba, single-thread torch, Bincount with OpenMP off and on, and one "
            f"read of x, with each one's ratio to Bincount with OpenMP off. {run}",
        ),
        "cpu_busy.png": (
            "Busy cores: OpenMP on time over OpenMP off time, per round",
            "Bincount with OpenMP on, over OpenMP off, timed side by side: without burners, then in "
            "rounds with one CPU-burning process per core (fresh burners each round). The "
            f"dashed line is the target, {cpu_report.BUSY_MAX}x. {run}",
        ),
    }


def plot_machine(data: dict) -> str:
    m = data["machine"]
    return f"{m.get('cpu', 'unknown CPU')}, {m.get('cores', '?')} cores, {run_words(m)}"


__all__ = ["plot_targets", "plot_busy", "captions"]
