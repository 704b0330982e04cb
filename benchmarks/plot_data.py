"""The results files of the benchmarks, as ``plot.py`` reads them: format, checks, labels, footers.

Part of ``benchmarks/plot.py`` (the command line, the captions and the
manifest); ``plot_draw.py`` draws the plots from what this module reads.
No matplotlib here.

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
    ``torch``, ``cupy``, ``date`` (ISO ``YYYY-MM-DD``), and, from
    ``run_info.machine_info``, ``time`` (UTC ``HH:MM``), ``load`` (the load
    average at the start) and ``run_id``: the foot of every plot names the
    run in :func:`run_info.run_words`, and the PNG's metadata holds its id.
``rows``
    One object per cell: ``n`` (int, elements of x), ``bins`` (int, the bin
    count), ``dist`` (``"uniform"``, ``"all-equal"`` or ``"zipf"``),
    ``dtype`` (of x, e.g. ``"int64"``), ``weighted`` (bool: float64 weights),
    and ``ms``: median milliseconds per call (wall time), by implementation,
    and optionally ``cpu_ms``: the calling thread's CPU time of the
    candidates that run on one thread, which the plots draw in place of
    their wall time (:func:`times`; the axes and captions say so).  ``numpy``
    (``numpy.bincount`` on the host) is the baseline of the ratios and
    ``read`` the floor; both are required.  Other names are drawn as they
    come; these get readable labels: ``aesara``, ``bincount_omp_off``,
    ``bincount_omp_on``, ``numba``, ``numba_max``, ``torch_1thread`` (CPU, written by
    ``bench_cpu.py``) and ``gpu_kernel`` (one histogram pass on the device),
    ``gpu_call`` (a whole GpuBincount call, with its one sync),
    ``gpu_bincount`` (the compiled Aesara function with the GPU rewrite, x in
    a GPU shared variable, the result copied to the host),
    ``gpu_bincount_device`` (the same, result left on the device), ``cupy``,
    ``torch_cuda`` (GPU).  In a GPU file ``read`` is the device's floor for
    reading x (its bytes over the measured device bandwidth).
"""
import datetime
import glob
import json
import os
from typing import List, Optional, Sequence, Tuple

from cpu_report import times  # noqa: F401  (the figures a row is drawn by: CPU time where recorded)
from run_info import run_words

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
STATIC = os.path.join(ROOT, "docs", "_static")

#: Readable labels, and drawing order, of the known implementations.
LABELS = {
    "numpy": "numpy.bincount",
    "aesara": "Aesara's own graph",
    "numba": "numba @njit loop",
    "numba_max": "numba loop that also finds the bins (x.max())",
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
    "numba_max": "#f0b27a",
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
    where = f"{path}: see the 'Input' section of benchmarks/plot_data.py"
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


def clock_text(rows: Sequence[dict]) -> str:
    """What the drawn times are: thread CPU time where recorded, else wall time."""
    if any(r.get("cpu_ms") for r in rows):
        return "thread CPU time for one-thread candidates, wall time otherwise"
    return "wall time"


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
    """The machine, the versions and the run (:func:`run_info.run_words`), as three strings."""
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
    return "; ".join(machine) or "machine unknown", versions, run_words(m)


def machine_line(data: dict) -> str:
    """One line naming the machine, the versions and the date of a run."""
    return "; ".join(p for p in machine_parts(data) if p)


def _sources(data: dict) -> str:
    return ", ".join(_relpath(p) for p in data["paths"])


def footer(data: dict, note: str = "") -> str:
    """Three lines for the foot of a plot: machine, versions, the run in words and its data file."""
    machine, versions, date = machine_parts(data)
    last = f"{date}; data: {_sources(data)}" + (f"; {note}" if note else "")
    return "\n".join(p for p in (machine, versions, last) if p)


def _bins_text(b: int) -> str:
    return f"{b:,}"


def _n_text(n: int) -> str:
    exp = len(str(n)) - 1
    return f"1e{exp}" if n == 10**exp else f"{n:,}"
