"""The CPU Op's worker pool (``c_code/cpu/worker_pool.h``), in fresh processes.

- One pool per process, shared by every ``Bincount`` function: two modules
  (counts and weighted sums) start ``OMP_NUM_THREADS - 1`` workers in all.
- A call whose workers cannot run (the process pinned to one core, the
  calling thread busy) gives the right result: the caller claims the tasks
  the workers do not.
- Float sums do not depend on which thread ran which task: the same call on
  two cores and pinned to one core gives bit-identical results.
- A forked child whose OpenMP thread count is set back to 2 starts a pool of
  its own (the parent's workers do not survive ``fork()``) instead of waiting
  on them.

Timing is not tested here (``benchmarks/bench_cpu.py`` measures the busy-core
case); these tests check results, thread counts and that nothing hangs.
"""
import os

import pytest

from procs import run_python

_SETUP = """
import os
import numpy as np, aesara, aesara.tensor as at
from aesara.tensor.extra_ops import bincount
import aesara_bincount

def threads():
    return len(os.listdir("/proc/self/task"))

x = at.vector("x", dtype="int64")
w = at.vector("w", dtype="float64")
with aesara.config.change_flags(openmp=True):
    counts = aesara.function([x], bincount(x))
    sums = aesara.function([x, w], bincount(x, weights=w))
rng = np.random.default_rng(0)
big = rng.integers(0, 1000, size=1_000_000)
wts = rng.standard_normal(big.size)
expected = np.bincount(big)
"""
_ENV = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"}

needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs two CPUs and sched_setaffinity",
)


def test_one_pool_for_every_module():
    out = run_python(
        _SETUP
        + """
before = threads()
assert (counts(big) == expected).all()
assert np.allclose(sums(big, wts), np.bincount(big, weights=wts))
for _ in range(20):
    counts(big)
    sums(big, wts)
print(before, threads())
""",
        env=_ENV,
    )
    before, after = map(int, out.stdout.split()[-2:])
    assert after - before == 1  # OMP_NUM_THREADS - 1 workers, whatever the module


@needs_affinity
def test_workers_that_cannot_run():
    out = run_python(
        _SETUP
        + """
ref = sums(big, wts)
cpu = min(os.sched_getaffinity(0))
for tid in os.listdir("/proc/self/task"):  # every thread of the process on one core
    os.sched_setaffinity(int(tid), {cpu})
ok = True
for _ in range(30):
    ok &= bool((counts(big) == expected).all())
    ok &= bool((sums(big, wts) == ref).all())  # bit-identical, whoever ran the tasks
print(ok)
""",
        env=_ENV,
        timeout=600,
    )
    assert out.stdout.split()[-1] == "True"


def test_forked_child_starts_its_own_pool():
    out = run_python(
        _SETUP
        + """
import ctypes, multiprocessing as mp

def child(q):
    # aesara_bincount's fork handler made OpenMP single-threaded here; ask
    # for two threads again, so that Bincount needs a pool in this process.
    ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY).omp_set_num_threads(2)
    before = threads()
    ok = bool((counts(big) == expected).all())
    q.put((ok, threads() - before))

assert (counts(big) == expected).all()  # the parent's pool exists
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
p.join(120)
if p.is_alive():
    p.kill()
    print("HUNG")
else:
    ok, started = q.get(timeout=10)
    print(ok, started, p.exitcode)
""",
        env=_ENV,
        timeout=300,
    )
    assert out.stdout.split()[-3:] == ["True", "1", "0"], out.stdout
