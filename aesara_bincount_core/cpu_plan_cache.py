"""The CPU model, and the cache file of the CPU plans keyed by it.

Part of the CPU plan (:mod:`aesara_bincount_core.cpu_plan`, whose docstring
says what a plan is): this module reads the CPU's identity and keeps the
file where each CPU model's plan is cached, as plain data (``{choice:
value}`` dicts); :mod:`~aesara_bincount_core.cpu_plan` turns them into
plans.  Imports nothing from the package, and Aesara only for the compile
directory's path.
"""
import contextlib
import json
import os
import platform
import tempfile
from typing import Dict, Optional

__all__ = ["CACHE_NAME", "FORMAT", "ISA_FLAGS", "cache_path", "cpu_key", "cpu_model", "read", "write"]

#: The cache file, in Aesara's compile directory.
CACHE_NAME = "aesara_bincount_cpu_plan.json"
#: The layout of the cache file and of the choices; a cache of another is ignored.
FORMAT = 1
#: The CPU flags a plan depends on (recorded in the CPU model and its key).
ISA_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512vl")


def cpu_model() -> Dict[str, object]:
    """The CPU this process runs on.

    Returns
    -------
    dict
        ``vendor``, ``family``, ``model``, ``stepping`` and ``name`` (str,
        as ``/proc/cpuinfo`` gives them for its first processor), and
        ``flags``, the list of :data:`ISA_FLAGS` the CPU has (``avx2``,
        ``avx512f``...).  Where there is no ``/proc/cpuinfo`` the fields it
        would give are empty and the name is ``platform.processor()``.
    """
    fields: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    flags = set(fields.get("flags", "").split())
    return {
        "vendor": fields.get("vendor_id", ""),
        "family": fields.get("cpu family", ""),
        "model": fields.get("model", ""),
        "stepping": fields.get("stepping", ""),
        "name": fields.get("model name", "") or platform.processor() or platform.machine(),
        "flags": [f for f in ISA_FLAGS if f in flags],
    }


def cpu_key(model: Optional[Dict[str, object]] = None) -> str:
    """The key of a CPU model in the cache file.

    Parameters
    ----------
    model : dict, optional
        A :func:`cpu_model`; by default this process's.

    Returns
    -------
    str
        Vendor, family, model, its :data:`ISA_FLAGS` and its name, e.g.
        ``"AuthenticAMD family 25 model 17 [avx2 avx512f avx512bw avx512vl]
        AMD EPYC"``: a virtual machine that hides AVX-512 from the same
        model gets a plan of its own.
    """
    m = model or cpu_model()
    return (f"{m['vendor']} family {m['family']} model {m['model']} "
            f"[{' '.join(m['flags'])}] {m['name']}").strip()  # type: ignore[arg-type]


def cache_path() -> str:
    """The cache file: :data:`CACHE_NAME` in ``aesara.config.compiledir``."""
    import aesara

    return os.path.join(aesara.config.compiledir, CACHE_NAME)


def read(path: str) -> Dict[str, Dict[str, str]]:
    """The plans of the cache file ``path``, ``{cpu key: {choice: value}}``;
    empty for a missing or broken file, or one of another :data:`FORMAT`."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("plans"), dict):
        return {}
    return {k: v for k, v in data["plans"].items() if isinstance(v, dict)}


def write(path: str, key: str, choices: Dict[str, str]) -> None:
    """Set ``key``'s plan (``{choice: value}``) in the cache file ``path``.

    The file holds the plans alone (no times, no dates), keys sorted, so
    that the same plans are the same bytes; it is written to a temporary
    file in the same folder and renamed into place, so that a reader, or a
    process writing at the same time, never sees a partial file (the last
    rename wins; an entry another process wrote meanwhile may be lost, and
    its CPU model is calibrated again).  Raises ``OSError`` when the folder
    cannot be written.
    """
    plans = read(path)
    plans[key] = dict(choices)
    text = json.dumps({"format": FORMAT, "plans": plans}, indent=1, sort_keys=True) + "\n"
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-cpu-plan-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
