"""What names a benchmark run: the machine, the run id, and the words every plot and the README print.

``bench_cpu.py`` and ``bench_rows.py`` record :func:`machine_info` in their
results files; ``plot_data.py`` (the plots' feet), ``plot_draw.py`` (the
PNG metadata) and ``cpu_report.py`` (the README's figures) read it back.
No Aesara and no matplotlib at import: :func:`machine_info` imports what it
reports on when it is called (after ``bench_env`` has set Aesara's flags).

The run
-------
``machine["run_id"]``
    ``YYYY-MM-DDTHH:MMZ-<8 hex digits>``: the UTC minute the run started and
    a random part, unique per run.
``machine["date"]``, ``machine["time"]``, ``machine["load"]``
    The run's UTC date and time (``HH:MM``) and the load average at its start.
``machine["cpu_model"]``, ``machine["cpu_plan"]``
    The CPU (vendor, family, model, stepping, name and its AVX2 and AVX-512
    flags: ``aesara_bincount_core.cpu_plan_cache.cpu_model``), and the CPU plan the
    loops ran under (``{"plan": "weights=vector,test=avx2", "source":
    "calibrated"}``: made, or read from the cache, when the run starts).
    :func:`cpu_words` says both in the words of the tables.

:func:`run_words` turns these into the words that the foot of every plot
drawn from the run and the README's figures both print, e.g. "run of
2026-12-01 18:28 UTC, load average 1.1 at the start".  Every PNG drawn from
a run stores, in its metadata (PNG text chunks), the run id, those words and
:func:`data_digest` of the results it shows; ``tests/test_plots_fresh.py``
compares them with the results files.
"""
import datetime
import hashlib
import json
import os
import platform
import socket
import uuid
from typing import Dict, Optional

#: PNG text-chunk keys of a plot's run (written by ``plot_draw._save``).
PNG_RUN_ID = "Run id"
PNG_RUN = "Run"
PNG_DIGEST = "Data digest"
PNG_SOURCE = "Source"


def new_run_id(now: Optional[datetime.datetime] = None) -> str:
    """A fresh run id: the UTC minute and eight random hex digits."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return f"{now:%Y-%m-%dT%H:%MZ}-{uuid.uuid4().hex[:8]}"


def machine_info() -> Dict[str, object]:
    """The machine, the versions, the date, time, load average and id of a run starting now."""
    import numpy as np

    import aesara
    import aesara_bincount
    from aesara_bincount._timing import load_average
    from aesara_bincount_core import cpu_plan

    now = datetime.datetime.now(datetime.timezone.utc)
    plan = cpu_plan.current()
    info = {
        "host": socket.gethostname(),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "aesara": aesara.__version__,
        "aesara_bincount": aesara_bincount.__version__,
        "omp_threads": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count())),
        "date": now.date().isoformat(),
        "time": f"{now:%H:%M}",
        "run_id": new_run_id(now),
        "load": f"{load_average()[0]:.1f}",
        "lead_in": True,  # interleaved_times's lead-in calls (recorded for the tables' text)
        "cpu_model": cpu_plan.cpu_model(),
        "cpu_plan": {"plan": plan.text(), "source": plan.source},
    }
    for mod in ("numba", "torch"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001  (an optional peer that fails to import is absent)
            pass
    return info


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_words(machine: dict) -> str:
    """The CPU of a run and its CPU plan, as the tables print them.

    E.g. "AMD EPYC (AuthenticAMD family 25 model 17, AVX2 AVX-512F AVX-512BW
    AVX-512VL; CPU plan weights=vector,test=avx2, calibrated)"; a run saved
    before these were recorded gives the name alone.
    """
    text = str(machine.get("cpu", "CPU unknown"))
    m = machine.get("cpu_model")
    details = []
    if m:
        flags = " ".join(str(f).upper().replace("AVX512", "AVX-512") for f in m.get("flags", []))
        details.append(f"{m.get('vendor', '')} family {m.get('family', '?')} model {m.get('model', '?')}"
                       + (f", {flags}" if flags else ", no AVX2"))
    plan = machine.get("cpu_plan")
    if plan:
        details.append(f"CPU plan {plan.get('plan')}, {plan.get('source')}")
    return text + (f" ({'; '.join(details)})" if details else "")


def run_words(machine: dict) -> str:
    """The run's date, time and load average in words, as plots and README print them."""
    when = str(machine.get("date", "date unknown"))
    if machine.get("time"):
        when += f" {machine['time']} UTC"
    load = str(machine.get("load") or "").split()
    return f"run of {when}" + (f", load average {load[0]} at the start" if load else "")


def data_digest(data: dict) -> str:
    """SHA-256 (16 hex digits) of the figures of a results file: its rows and busy rounds."""
    figures = {"rows": data.get("rows"), "busy": data.get("busy")}
    text = json.dumps(figures, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def png_metadata(data: dict, source: str) -> Dict[str, str]:
    """The PNG text chunks naming the run a plot is drawn from (``data``: its results file)."""
    machine = data.get("machine", {})
    return {
        PNG_RUN_ID: str(machine.get("run_id", "none")),
        PNG_RUN: run_words(machine),
        PNG_DIGEST: data_digest(data),
        PNG_SOURCE: source,
    }


def read_png_text(path: str) -> Dict[str, str]:
    """The text chunks (tEXt) of a PNG file, read without any imaging library."""
    out = {}
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    pos = 8
    while pos + 8 <= len(blob):
        length = int.from_bytes(blob[pos:pos + 4], "big")
        kind = blob[pos + 4:pos + 8]
        body = blob[pos + 8:pos + 8 + length]
        if kind == b"tEXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            out[key.decode("latin-1")] = value.decode("latin-1")
        if kind == b"IEND":
            break
        pos += 12 + length
    return out
