"""Side-by-side timing helpers shared by the main job and the benchmarks.

Candidates are timed in alternating rounds in one process, so that the noise
of a shared machine falls on all of them alike and their ratios stay
meaningful.  Speed targets live in the benchmarks, never in unit tests.
"""
import time
from typing import Callable, Dict, List

import numpy as np

__all__ = ["interleaved_medians", "repeats_for"]


def repeats_for(
    fn: Callable[[], object], budget_s: float, lo: int = 3, hi: int = 200,
    clock: Callable[[], float] = time.perf_counter,
) -> int:
    """How many calls of ``fn`` fit in ``budget_s`` seconds of ``clock`` (one call is made)."""
    t0 = clock()
    fn()
    dt = max(clock() - t0, 1e-7)
    return int(min(hi, max(lo, budget_s / dt)))


def interleaved_medians(
    fns: Dict[str, Callable[[], object]],
    repeat: int = 0,
    rounds: int = 5,
    budget_s: float = 0.25,
    clock: Callable[[], float] = time.perf_counter,
) -> Dict[str, float]:
    """Median wall time (or ``clock`` time) in milliseconds of each zero-argument callable.

    Parameters
    ----------
    fns : dict of str to callable
        The candidates; each is called once to warm up.
    repeat : int
        Calls per candidate in all; 0 picks it from ``budget_s`` per candidate.
    rounds : int
        The calls of each candidate are split into this many rounds, and the
        rounds alternate between candidates.
    budget_s : float
        Time budget per candidate when ``repeat`` is 0.
    clock : callable
        What is measured: ``time.perf_counter`` (wall time, the default), or
        ``time.thread_time`` (CPU time of the calling thread: on a machine
        whose cores other jobs keep busy it leaves out the time the thread
        waited for a core; meaningless for code that runs other threads).

    Returns
    -------
    dict of str to float
        Median milliseconds per call.
    """
    per_round = {}
    for name, fn in fns.items():
        n = repeat or repeats_for(fn, budget_s, clock=clock)
        per_round[name] = max(1, n // rounds)
    samples: Dict[str, List[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per_round[name]):
                t0 = clock()
                fn()
                samples[name].append(clock() - t0)
    return {k: float(np.median(v)) * 1e3 for k, v in samples.items()}
