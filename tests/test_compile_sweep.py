"""Every C Op compiles, and answers as numpy, for every combination of its macros (issue 32).

The combinations, how they follow from ``c_flags`` and the dtypes, and how
they are grouped into few modules: ``tests/compile_sweep.py``.  Here the 26
groups run in two subprocesses at once (the compiler is the cost, and each
subprocess compiles into a directory of its own under Aesara's
``base_compiledir``, so they do not wait for each other's compile lock and
a later run loads what an earlier one built).  The test prints the number
of configurations built, the time and the load average, and records them
(``record_property``).

Measured on the development machine (2 cores, shared): from an empty
compile directory 182 s of CPU time in the compiler and Python (user) and
15 s of system time, 570 s of wall time at a load average of 7 (seven
other jobs on the two cores; about 100 s when the two cores are free);
with the modules in the compile directory, 27 s of wall time (11 s of CPU).

The host C code of the GPU Ops is swept by ``tests/test_gpu_c_sources.py``
(a plain C compile for each combination of its macros).

``make test`` builds the groups of OpenMP off and one group of OpenMP on
per Op (16 of the 26 groups); ``make test-long`` (``AESARA_BINCOUNT_LONG=1``)
builds every group.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import aesara
import pytest

import compile_sweep
from conftest import LONG

HERE = Path(__file__).resolve().parent
WORKERS = 2
#: Configurations of the C Ops: Bincount 8 x 10 x 2 x 2 x 2, ScatterAdd
#: 3 x 10 x 8 x 2, FusedBincount 4 x 8 x 10 x 2 x 2.
EXPECTED = 640 + 480 + 1280


def _worker_env(k):
    flags = os.environ.get("AESARA_FLAGS", "")
    compiledir = Path(aesara.config.base_compiledir) / "bincount-sweep" / f"worker{k}"
    flags = ",".join(f for f in flags.split(",") if f and not f.startswith("base_compiledir="))
    env = dict(os.environ)
    env["AESARA_FLAGS"] = ",".join(f for f in (flags, f"base_compiledir={compiledir}", "blas__ldflags=") if f)
    return env


#: The groups of OpenMP on that ``make test`` builds (with every group of OpenMP
#: off): one of each Op, its threaded paths; ``make test-long`` builds all 26.
SHORT_OPENMP = ("bincount-bincount-omp1", "scatteradd-inplace-omp1", "fused-fx-fw-bincount-omp1")


def _expected(groups):
    return sum(160 if g.startswith("bincount-") else 80 for g in groups)


def test_every_configuration_compiles(record_property, capsys):
    """Every group under ``make test-long``; in ``make test`` the groups of
    OpenMP off and one group of OpenMP on per Op (``SHORT_OPENMP``)."""
    groups = compile_sweep.groups()
    assert len(groups) == 26 and _expected(groups) == EXPECTED
    assert set(SHORT_OPENMP) <= set(groups)
    if not LONG:
        groups = [g for g in groups if g.endswith("-omp0") or g in SHORT_OPENMP]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "compile_sweep.py"), *groups[k::WORKERS]],
            env=_worker_env(k), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for k in range(WORKERS)
    ]
    results = [p.communicate(timeout=1200) for p in procs]
    seconds = time.perf_counter() - start
    failures = [f"--- worker {k}\n{out}\n{err[-8000:]}" for k, (p, (out, err)) in
                enumerate(zip(procs, results)) if p.returncode != 0]
    assert not failures, "\n".join(failures)
    built = {}
    for out, _ in results:
        for line in out.splitlines():
            if line.startswith("SWEEP "):
                _, group, count, _ = line.split()
                built[group] = int(count)
    assert sorted(built) == sorted(groups)
    total = sum(built.values())
    summary = (f"compile sweep: {total} configurations in {len(groups)} modules, {seconds:.0f} s wall "
               f"on {WORKERS} workers (load average {load:.2f} at the start, "
               f"{os.getloadavg()[0]:.2f} at the end)")
    record_property("configurations", total)
    record_property("seconds", round(seconds, 1))
    with capsys.disabled():
        print("\n" + summary)
    assert total == _expected(groups), summary


@pytest.mark.parametrize("group", ["bincount-bincount-omp0", "scatteradd-inplace-omp1", "fused-fw-scatter-omp0"])
def test_groups_enumerate_distinct_macros(group):
    """Each node of a group has macros of its own (no configuration is built twice)."""
    import numpy as np

    cases, _ = compile_sweep.group_cases(group, np.random.default_rng(0))
    assert len(cases) == 80 * (2 if group.startswith("bincount") else 1)
