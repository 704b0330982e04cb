"""Side-by-side timing helpers shared by the main job and the benchmarks.

Candidates are timed in alternating rounds in one process, so that the noise
of a shared machine falls on all of them alike and their ratios stay
meaningful.  Speed targets live in the benchmarks, never in unit tests.
"""
import os
import time
from typing import Callable, Collection, Dict, List, Tuple

import numpy as np

__all__ = ["interleaved_medians", "interleaved_times", "load_average", "repeats_for"]


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


def load_average() -> Tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages (``/proc/loadavg``), or zeros where unknown."""
    try:
        return tuple(float(v) for v in os.getloadavg())  # type: ignore[return-value]
    except OSError:
        return (0.0, 0.0, 0.0)


def interleaved_times(
    fns: Dict[str, Callable[[], object]],
    one_thread: Collection[str] = (),
    rounds: int = 3,
    calls: int = 0,
    budget_s: float = 0.25,
    lead_in: bool = True,
) -> Dict[str, Dict[str, float]]:
    """Wall time and thread CPU time of each candidate, interleaved call by call.

    Each call is timed by the wall clock (``time.perf_counter_ns``) and, for
    the candidates named in ``one_thread``, by the CPU time of the calling
    thread (``time.thread_time_ns``), which leaves out the time the thread
    waited for a core while other jobs ran.  The calls alternate between the
    candidates one by one, the order rotated by one each time round
    (A B C, B C A, C A B, ...), so that a drift of the machine falls on all
    of them alike and no candidate always runs after the same one (a call
    that frees a large array changes what the next one pays to allocate it).
    With ``lead_in`` each timed call comes right after an untimed call of the
    same candidate, so that it finds the heap and the caches as a loop of
    that candidate leaves them (the seed's use: the same call many times in
    a loop), not as the previous candidate left them: without it, a
    candidate whose output is a little larger than the others' could not
    reuse the block the previous candidate had just freed and still held in
    the cache, and paid for a cold block (1e6 int64 values into 1e6 bins:
    1.1-1.7 ms against 0.7 ms, on a 2-core AMD EPYC, load average 0.3).  A
    figure is the best, over ``rounds`` rounds, of the round's median: a
    burst of load spoils a round, not the figure.

    Parameters
    ----------
    fns : dict of str to callable
        The candidates, zero-argument callables; each is called once to warm up.
    one_thread : collection of str
        The candidates that run in the calling thread only.  The CPU time of
        a candidate that runs other threads (OpenMP) is meaningless, so it is
        not taken.
    rounds : int
        Rounds of calls; at least 1.
    calls : int
        Calls of each candidate per round; 0 picks it from ``budget_s``, from
        the slowest candidate's first call (at least 3, at most 200).
    budget_s : float
        Wall-time budget per candidate and round when ``calls`` is 0 (the
        lead-in calls not counted).
    lead_in : bool
        Call each candidate once, untimed, right before each of its timed
        calls (see above).

    Returns
    -------
    dict of str to dict of str to float
        ``{"ms": {name: wall ms}, "cpu_ms": {name: CPU ms, for one_thread}}``.

    Raises
    ------
    ValueError
        If ``rounds`` is below 1 or ``one_thread`` names no candidate of ``fns``.
    """
    if rounds < 1:
        raise ValueError(f"interleaved_times: rounds must be at least 1, got {rounds}")
    unknown = set(one_thread) - set(fns)
    if unknown:
        raise ValueError(f"interleaved_times: one_thread names unknown candidates {sorted(unknown)}")
    if not calls:
        calls = min(repeats_for(fn, budget_s) for fn in fns.values())
    names = list(fns)
    wall = {k: float("inf") for k in fns}
    cpu = {k: float("inf") for k in fns if k in one_thread}
    for _ in range(rounds):
        w: Dict[str, List[int]] = {k: [] for k in fns}
        c: Dict[str, List[int]] = {k: [] for k in cpu}
        for j in range(calls):
            for name in names[j % len(names):] + names[: j % len(names)]:
                fn = fns[name]
                if lead_in:
                    fn()
                t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                fn()
                c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
                w[name].append(t1 - t0)
                if name in c:
                    c[name].append(c1 - c0)
        for name in fns:
            wall[name] = min(wall[name], float(np.median(w[name])) / 1e6)
        for name in cpu:
            cpu[name] = min(cpu[name], float(np.median(c[name])) / 1e6)
    return {"ms": wall, "cpu_ms": cpu}
