#!/usr/bin/env python
"""Plots of the benchmark results, for the documentation and the README.

Usage::

    python benchmarks/plot.py [RESULTS.json ...] [--out docs/_static]

or ``make plots``, or ``benchmarks/bench_cpu.py --plot`` (which passes the
file it has just written).  Each file given is a CPU or a GPU results file
(see "Input" below).  For a kind that no file given covers, the results folder
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

Every plot names the machine, the versions and the date of its run, and draws
the memory-bandwidth floor: the time of one streaming read of ``x`` (the
``read`` entry), below which no implementation can go.

Input
-----
Two formats are read.  The JSON that ``benchmarks/bench_gpu.py --json``
writes (``{"meta": {...}, "rows": [{"N", "bins", "kind", "dtype",
"kernel_ms", "call_ms", "aesara_ms", "cupy_ms", "torch_ms", "numpy_ms",
"floor_ms", ...}]}``) is converted to the format below: ``kernel_ms`` ->
``gpu_kernel``, ``call_ms`` -> ``gpu_call``, ``aesara_ms`` ->
``gpu_bincount``, ``cupy_ms`` -> ``cupy``, ``torch_ms`` -> ``torch_cuda``,
``numpy_ms`` -> ``numpy``, ``floor_ms`` -> ``read``, data ``"equal"`` ->
``"all-equal"``; without a ``date`` in ``meta`` the file's date is used.
Several files of one kind given together are merged (the first one's
figures win), e.g. the standalone and the Aesara runs of ``bench_gpu.py``.

The format of this script, which ``bench_cpu.py`` writes, is a JSON object ``{"machine": {...}, "rows": [...]}``, optionally with
``"kind": "cpu"`` or ``"kind": "gpu"``.  Without ``kind``, a file is a GPU file
when its machine has a ``"gpu"`` entry or a row has a time whose name starts
with ``gpu``.

``machine``
    Strings describing the run.  Used when present: ``cpu``, ``cores``,
    ``omp_threads``, ``gpu`` (the device name), ``driver``/``cuda``,
    ``python``, ``numpy``, ``aesara``, ``aesara_bincount``, ``numba``,
    ``torch``, ``cupy``, and ``date`` (ISO ``YYYY-MM-DD``).
``rows``
    One object per cell: ``n`` (int, elements of x), ``bins`` (int, the bin
    count), ``dist`` (``"uniform"``, ``"all-equal"`` or ``"zipf"``),
    ``dtype`` (of x, e.g. ``"int64"``), ``weighted`` (bool: float64 weights),
    and ``ms``: median milliseconds per call, by implementation.  ``numpy``
    (``numpy.bincount`` on the host) is the baseline of the ratios and
    ``read`` the floor; both are required.  Other names are drawn as they
    come; these get readable labels: ``aesara``, ``bincount_omp_off``,
    ``bincount_omp_on``, ``numba``, ``torch_1thread`` (CPU, written by
    ``bench_cpu.py``) and ``gpu_kernel`` (one histogram pass on the device),
    ``gpu_call`` (a whole GpuBincount call, with its one sync),
    ``gpu_bincount`` (the compiled Aesara function with the GPU rewrite, x in
    a GPU shared variable, the result copied to the host),
    ``gpu_bincount_device`` (the same, result left on the device), ``cupy``,
    ``torch_cuda`` (GPU).  In a GPU file ``read`` is the device's floor for
    reading x (its bytes over the measured device bandwidth).
"""
import argparse
import datetime
import glob
import json
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # plot_targets, cpu_report, sizes
RESULTS = os.path.join(HERE, "results")
STATIC = os.path.join(ROOT, "docs", "_static")

#: Readable labels, and drawing order, of the known implementations.
LABELS = {
    "numpy": "numpy.bincount",
    "aesara": "Aesara's own graph",
    "numba": "numba @njit loop",
    "torch_1thread": "torch.bincount, 1 thread",
    "bincount_omp_off": "Bincount, OpenMP off",
    "bincount_omp_on": "Bincount, OpenMP on",
    "cupy": "cupy.bincount",
    "torch_cuda": "torch.bincount (CUDA)",
    "gpu_kernel": "GpuBincount kernel (one pass)",
    "gpu_call": "GpuBincount call (with its sync)",
    "gpu_bincount": "Aesara function with GpuBincount (result to host)",
    "gpu_bincount_device": "Aesara function with GpuBincount (result on device)",
    "read": "floor: one read of x",
}
COLORS = {
    "numpy": "#4c72b0",
    "aesara": "#8c8c8c",
    "numba": "#dd8452",
    "torch_1thread": "#937860",
    "bincount_omp_off": "#55a868",
    "bincount_omp_on": "#1b5e20",
    "cupy": "#da8bc3",
    "torch_cuda": "#8172b3",
    "gpu_kernel": "#e17c05",
    "gpu_call": "#c44e52",
    "gpu_bincount": "#8b1a1a",
    "gpu_bincount_device": "#5f0f40",
    "read": "black",
}
#: The seed case of the headline plot.
HEADLINE = dict(n=10**6, bins=1000, dist="uniform", dtype="int64")


class SchemaError(ValueError):
    """A results file does not follow the format in this module's docstring."""


# -- reading -----------------------------------------------------------------
#: ``bench_gpu.py`` row field -> implementation name here.
GPU_BENCH_TIMES = {
    "numpy_ms": "numpy",
    "floor_ms": "read",
    "kernel_ms": "gpu_kernel",
    "call_ms": "gpu_call",
    "aesara_ms": "gpu_bincount",
    "cupy_ms": "cupy",
    "torch_ms": "torch_cuda",
}


def from_bench_gpu(data: dict, path: str) -> dict:
    """Convert the JSON of ``benchmarks/bench_gpu.py --json`` to the format here."""
    meta = dict(data.get("meta") or {})
    if not meta.get("date"):
        meta["date"] = datetime.date.fromtimestamp(os.path.getmtime(path)).isoformat()
    if meta.get("stack"):
        meta["stack"] = str(meta["stack"])
    rows = []
    for row in data["rows"]:
        ms = {name: row[key] for key, name in GPU_BENCH_TIMES.items() if row.get(key) is not None}
        rows.append(
            dict(
                n=row["N"],
                bins=row["bins"],
                dist="all-equal" if row.get("kind") == "equal" else row.get("kind"),
                dtype=row["dtype"],
                weighted=bool(row.get("weighted", False)),
                ms=ms,
            )
        )
    return {"kind": "gpu", "machine": meta, "rows": rows}


def load(path: str) -> dict:
    """Read and check one results file; add ``kind`` and ``paths`` to it."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    where = f"{path}: see the 'Input' section of benchmarks/plot.py"
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise SchemaError(f"{where} (a JSON object with a 'rows' list)")
    if "meta" in data and all(isinstance(r, dict) and "N" in r for r in data["rows"]):
        try:
            data = from_bench_gpu(data, path)
        except (KeyError, TypeError) as exc:
            raise SchemaError(f"{where} (a bench_gpu.py row lacks {exc})") from None
    data.setdefault("machine", {})
    for i, row in enumerate(data["rows"]):
        missing = {"n", "bins", "dist", "dtype", "weighted", "ms"} - set(row)
        if missing:
            raise SchemaError(f"{where} (row {i} lacks {sorted(missing)})")
        if "numpy" not in row["ms"] or "read" not in row["ms"]:
            raise SchemaError(f"{where} (row {i} needs 'numpy' and 'read' times)")
    kind = data.get("kind")
    if kind is None:
        gpu = "gpu" in data["machine"] or any(
            k.startswith("gpu") for row in data["rows"] for k in row["ms"]
        )
        kind = "gpu" if gpu else "cpu"
    if kind not in ("cpu", "gpu"):
        raise SchemaError(f"{where} (kind must be 'cpu' or 'gpu', got {kind!r})")
    data["kind"] = kind
    data["paths"] = [path]
    return data


def merge(first: dict, second: dict) -> dict:
    """Two results files of one kind as one: ``first``'s figures win.

    Rows are matched on (n, bins, dist, dtype, weighted); a time missing from
    a row of ``first`` is taken from ``second`` (e.g. the standalone and the
    Aesara runs of ``bench_gpu.py``).
    """
    def key(r):
        return (r["n"], r["bins"], r["dist"], r["dtype"], r["weighted"])

    rows = {key(r): dict(r, ms=dict(r["ms"])) for r in first["rows"]}
    for r in second["rows"]:
        have = rows.setdefault(key(r), dict(r, ms={}))
        for name, ms in r["ms"].items():
            have["ms"].setdefault(name, ms)
    machine = dict(second["machine"], **first["machine"])
    return dict(
        kind=first["kind"], machine=machine, rows=list(rows.values()),
        paths=first["paths"] + second["paths"], busy=first.get("busy") or second.get("busy"),
    )


def discover(kind: str, folder: str = RESULTS) -> Optional[dict]:
    """The results file of ``kind`` in ``folder`` with the most rows, then the newest."""
    best, best_key = None, None
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            data = load(path)
        except (SchemaError, ValueError, OSError):
            continue
        if data["kind"] != kind:
            continue
        key = (len(data["rows"]), str(data["machine"].get("date", "")), os.path.getmtime(path))
        if best_key is None or key > best_key:
            best, best_key = data, key
    return best


def select(rows: Sequence[dict], **match) -> List[dict]:
    """The rows whose fields equal every keyword given."""
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def implementations(rows: Sequence[dict]) -> List[str]:
    """Names of the timed implementations in ``rows``: known ones first."""
    seen = []
    for r in rows:
        for k in r["ms"]:
            if k not in seen:
                seen.append(k)
    known = [k for k in LABELS if k in seen]
    return known + [k for k in seen if k not in LABELS]


# -- labels ------------------------------------------------------------------
def label(key: str, machine: dict, kind: str = "cpu") -> str:
    if key == "read" and kind == "gpu":
        return "floor: bytes of x / device bandwidth"
    text = LABELS.get(key, key)
    if key == "bincount_omp_on" and machine.get("omp_threads"):
        text += f" ({machine['omp_threads']} threads)"
    return text


def _relpath(path: str) -> str:
    try:
        rel = os.path.relpath(path, ROOT)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def machine_parts(data: dict) -> Tuple[str, str, str]:
    """The machine, the versions and the date of a run, as three strings."""
    m = data["machine"]
    machine = []
    if data["kind"] == "gpu" and m.get("gpu"):
        extra = ", ".join(f"{k} {m[k]}" for k in ("driver", "cuda") if m.get(k))
        if m.get("copy_bandwidth_GBps"):
            bw = f"device copy {float(m['copy_bandwidth_GBps']):.0f} GB/s"
            extra = f"{extra}, {bw}" if extra else bw
        machine.append(str(m["gpu"]) + (f" ({extra})" if extra else ""))
    if m.get("cpu"):
        cpu = str(m["cpu"])
        if m.get("cores"):
            cpu += f", {m['cores']} cores"
        if m.get("omp_threads"):
            cpu += f", OMP_NUM_THREADS={m['omp_threads']}"
        machine.append(("host: " if data["kind"] == "gpu" else "") + cpu)
    names = (
        ("python", "Python"),
        ("numpy", "numpy"),
        ("aesara", "Aesara"),
        ("aesara_bincount", "aesara_bincount"),
        ("numba", "numba"),
        ("torch", "torch"),
        ("cupy", "CuPy"),
    )
    versions = ", ".join(f"{name} {m[k]}" for k, name in names if m.get(k))
    return "; ".join(machine) or "machine unknown", versions, str(m.get("date", "date unknown"))


def machine_line(data: dict) -> str:
    """One line naming the machine, the versions and the date of a run."""
    return "; ".join(p for p in machine_parts(data) if p)


def _sources(data: dict) -> str:
    return ", ".join(_relpath(p) for p in data["paths"])


def footer(data: dict, note: str = "") -> str:
    """Three lines for the foot of a plot: machine, versions and date, data file."""
    machine, versions, date = machine_parts(data)
    last = f"{date}; data: {_sources(data)}" + (f"; {note}" if note else "")
    return "\n".join(p for p in (machine, versions, last) if p)


def _bins_text(b: int) -> str:
    return f"{b:,}"


def _n_text(n: int) -> str:
    exp = len(str(n)) - 1
    return f"1e{exp}" if n == 10**exp else f"{n:,}"


# -- drawing -----------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ticker():
    from matplotlib import ticker

    return ticker


def _save(fig, path: str) -> None:
    # No software/date metadata: re-running on the same data gives the same file.
    fig.savefig(path, dpi=110, metadata={"Software": None})
    _plt().close(fig)


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
            pts = [(r[x_by], value(r, key)) for r in cell if r["ms"].get(key)]
            if pts:
                ax.plot(*zip(*pts), label=label_of(key), **_style(key))
        ax.set_xscale("log")
        ax.set_yscale("log")
        if len(cell) == 1:
            ax.set_xlim(cell[0][x_by] / 3, cell[0][x_by] * 3)
        decorate(ax, panel)
    axes[0].set_ylabel(ylabel)
    _legend(fig, axes)
    _save(fig, path)
    return path


def plot_time_vs_n(data: dict, path: str, dist: str, dtype: str, note: str = "") -> Optional[str]:
    """Median ms per call against N, one panel per bin count."""
    rows, dtype = line_rows(data, dist, dtype)
    if not rows:
        return None

    def decorate(ax, bins):
        ax.set_title(f"bins = {_bins_text(bins)}", fontsize=10)
        ax.set_xlabel("N (elements of x)")
        ax.grid(True, which="major", alpha=0.3)

    return _line_plot(
        data, path, rows, "bins", "n",
        f"{data['kind'].upper()}: time per call against N (x {dtype}, {dist} in [0, bins), counts)",
        "median ms per call (log)", note, implementations(rows), lambda r, k: r["ms"][k],
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
        f"(x {dtype}, {dist}, counts)",
        "numpy time / time (higher is faster)", note, [k for k in implementations(rows) if k != "numpy"],
        lambda r, k: r["ms"]["numpy"] / r["ms"][k], label_of, decorate,
    )


def _ms_text(ms: float) -> str:
    return f"{ms:.2f}" if ms >= 0.1 else f"{ms:.3g}"


def _versus(numpy_ms: float, ms: float, key: str) -> str:
    if key == "numpy":
        return "(baseline)"
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
            ms = cell[0]["ms"]
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
    fig.suptitle(
        "Seed case: 1,000,000 int64 values uniform in [0, 1000), x in aesara.shared "
        "(median ms per call; shorter is faster; ratios against numpy.bincount)",
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
        for y, (v, key) in enumerate(zip(values, [b[2] for b in bars][::-1])):
            x_text = v * 1.15 if log else v + top * 0.01
            ax.text(x_text, y, f"{_ms_text(v)} ms  {_versus(numpy_ms, v, key)}", va="center", fontsize=8)
        if log:
            ax.set_xscale("log")
            ax.set_xlim(low / 2, top * 30)
        else:
            ax.set_xlim(0, top * 1.75)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("median ms per call" + (" (log)" if log else ""))
        ax.tick_params(axis="y", labelsize=8)
    foot = footer(base, note)
    if gpu is not None and base is not gpu:
        foot += "\nGPU run: " + footer(gpu).replace("\n", "; ")
    fig.text(0.01, 0.01, foot, fontsize=7, color="#444444", va="bottom")
    fig.tight_layout(rect=(0, 0.04 + 0.028 * foot.count("\n"), 1, 0.93))
    _save(fig, path)
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
        "side by side in one process", fontsize=10,
    )
    for ax, r in zip(axes.flat, rows):
        keys = [k for k in labels if k in r["ms"]][::-1]
        values = [r["ms"][k] for k in keys]
        bars = ax.barh([labels[k] for k in keys], values,
                       color=[ROWS_COLORS.get(k, "white") for k in keys], edgecolor="black", linewidth=0.4)
        for bar, key in zip(bars, keys):
            if key == "read":
                bar.set_hatch("//")
        for y, v in enumerate(values):
            ax.text(v * 1.1, y, _ms_text(v), va="center", fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(min(values) / 2, max(values) * 8)
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
    _save(fig, path)
    return path


def _drawing():
    """The drawing helpers of this module, for ``plot_targets``."""
    from types import SimpleNamespace

    return SimpleNamespace(_plt=_plt, label=label, COLORS=COLORS, footer=footer, _save=_save,
                           _ms_text=_ms_text)


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
    return f"{kind.upper()}: {what} {run}"


def main(argv: Optional[Sequence[str]] = None) -> List[str]:
    """Write the plots and the manifest; return the paths written."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="The input format is described in the docstring of benchmarks/plot.py.",
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
                    "sums. Data: " + ", ".join(f"``{s}``" for s in sources) + "."
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
