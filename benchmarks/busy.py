"""Busy cores: ``Bincount`` with OpenMP on and off while every core runs another process.

Used by ``bench_cpu.py`` (a script, not a test).  Each round starts fresh
CPU-burning processes, one per core (``python -c "while True: pass"``, at
the same priority as the benchmark), times the candidates side by side in
alternating rounds (:func:`aesara_bincount._timing.interleaved_medians`),
then stops the burners.  Fresh burners each round give the scheduler a new
chance to place them badly; the worst round is what a user would meet.  A
round without burners is timed first, for reference.

The figure of merit is the ratio of the OpenMP-on time to the OpenMP-off
time in the same round: with OpenMP threads that wait on a descheduled
worker it was 8-15 (issue 13); the target is at most 1.5 in the worst of
three rounds.
"""
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List

from aesara_bincount._timing import interleaved_medians

__all__ = ["burners", "busy_rounds", "summary"]

_BURN = "while True: pass"


class burners:
    """A context manager: ``count`` CPU-burning processes while it is open."""

    def __init__(self, count: int, settle_s: float = 0.2):
        self.count = count
        self.settle_s = settle_s
        self.procs: List[subprocess.Popen] = []

    def __enter__(self):
        for _ in range(self.count):
            self.procs.append(
                subprocess.Popen([sys.executable, "-c", _BURN], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        time.sleep(self.settle_s)  # let them start spinning
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []
        return False


def busy_rounds(
    cases: Dict[str, Dict[str, Callable[[], object]]],
    rounds: int = 3,
    cores: int = 0,
    budget_s: float = 0.3,
    settle_s: float = 0.2,
) -> List[dict]:
    """Time ``cases`` once without burners, then in ``rounds`` rounds with fresh burners.

    Parameters
    ----------
    cases : dict of str to dict of str to callable
        Per case (e.g. ``"1e6 int64, 1000 bins, counts"``), the candidates to
        time side by side, e.g. ``{"omp_off": f_off, "omp_on": f_on}``.
    rounds : int
        Rounds with burners.
    cores : int
        Burners per round; 0 means ``os.cpu_count()``.
    budget_s, settle_s : float
        Time budget per candidate and round; seconds the burners run before
        the timing starts.

    Returns
    -------
    list of dict
        One entry per case and round: ``{"case", "round" (0 is the one
        without burners), "burners", "load" (1-minute load average when it ended), "ms":
        {candidate: median ms}}``.
    """
    cores = cores or os.cpu_count() or 1
    out = []
    for r in range(rounds + 1):
        count = 0 if r == 0 else cores
        with burners(count, settle_s if count else 0.0):
            for name, fns in cases.items():
                ms = interleaved_medians(fns, budget_s=budget_s)
                out.append(dict(case=name, round=r, burners=count, load=os.getloadavg()[0], ms=ms))
    return out


def summary(results: List[dict], on: str = "omp_on", off: str = "omp_off") -> Dict[str, dict]:
    """Per case: the ratio ``on / off`` without burners ("quiet"), that of every busy round, and the worst."""
    cases: Dict[str, dict] = {}
    for row in results:
        c = cases.setdefault(row["case"], {"quiet": None, "busy": []})
        ratio = row["ms"][on] / row["ms"][off]
        if row["burners"] == 0:
            c["quiet"] = ratio
        else:
            c["busy"].append(ratio)
    for c in cases.values():
        c["worst"] = max(c["busy"]) if c["busy"] else None
    return cases
