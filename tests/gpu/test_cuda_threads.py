"""A compiled GPU function and its ``f.copy()`` called from threads at once (issue 40).

``f.copy()`` is Aesara's way to give each thread a function of its own
(``docs/thread_safety.rst``).  A copy shares the Ops and, through the
shallow copy of each node's tag, whatever an Op keeps on its nodes.  No
state a launch writes may be shared so: each thread here calls its own
copy (the first thread the original) with an input of its own, 12 times,
while the others do the same, and every result must be the one its own
input gives.  On the emulation a launch runs the whole kernel inside
``cuLaunchKernel`` with the GIL released, so a shared parameter block is
rewritten under a running kernel at once; and the threads take turns every
microsecond (``sys.setswitchinterval``), so that state shared between a
call's first write and its launch is seen too.

One case per GPU Op that keeps something per node, Op or CUDA context:
``GpuElemwise`` (its launch per node and context; the vector and the
strided paths), ``GpuScatterAdd`` of an elementwise increment (the C Op's
kernel table), ``GpuScatterSet``, and the seed's loop
``bincount(gx, weights=exp(-theta * gv))`` (``GpuFusedBincount``: the
kernel on the node's tag, the staging of the result's copy to the host)
in the default and the deterministic mode.
"""
import os
import sys
import threading

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import AVAILABLE, WHY, cupy, size  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.tensor.extra_ops import bincount  # noqa: E402

import aesara_bincount  # noqa: E402,F401
from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.gpu.transfer import gpu_from_host  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]

THREADS, CALLS = 3, 12


def runs(f, op: str):
    """``f``, after checking that an Op named ``op`` runs in it."""
    names = [type(node.op).__name__ for node in f.maker.fgraph.toposort()]
    assert op in names, names
    return f


def host(a):
    return cupy().asnumpy(a) if not isinstance(a, np.ndarray) else a


def run_copies(f, expected, exact=True, threads=THREADS, calls=CALLS):
    """Call ``f`` (thread 0) and ``f.copy()`` (the others) from ``threads``
    threads at once, thread ``i`` with the input ``float(i + 2)``, ``calls``
    times each.  Returns the wrong results, as ``(thread, call, why)``:
    those not equal to ``expected(t)`` (bit for bit, NaN as NaN, when
    ``exact``; else within ``rtol=1e-9``: the default mode's atomics add in
    any order)."""
    f(1.0)  # the first call: the kernel compiled, the launch built, before the copies
    fs = [f] + [f.copy() for _ in range(threads - 1)]
    start = threading.Barrier(threads)
    wrong, errors = [], []

    def work(i):
        t = float(i + 2)
        want = expected(t)
        try:
            start.wait(60)
            for call in range(calls):
                got = host(fs[i](t))
                same = (np.array_equal(got, want, equal_nan=True) if exact
                        else got.shape == want.shape and np.allclose(got, want, rtol=1e-9, atol=0))  # fmt: skip
                if not same:
                    bad = np.flatnonzero(got != want)
                    wrong.append((i, call, f"{bad.size} differ, first {got.flat[bad[0]]!r} != {want.flat[bad[0]]!r}"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append((i, repr(exc)))

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between bytecodes too, not only at C calls
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.join(300)
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    return wrong


class _Joined:
    """A function of several GPU outputs seen as one of one host output
    (``copy`` copies the function)."""

    def __init__(self, f):
        self.f = f

    def __call__(self, t):
        return np.concatenate([host(a) for a in self.f(t)])

    def copy(self):
        return _Joined(self.f.copy())


def test_elemwise_copies_in_threads_launch_with_their_own_arguments():
    """The vector path (contiguous, aligned) and the strided one (a reversed
    view), in one function: two GpuElemwise nodes."""
    n = size(200_000, 20_000)
    v = np.arange(n, dtype="float64")
    gv = gpu.shared(v)
    t = at.dscalar("t")
    f = runs(aesara.function([t], [gpu_from_host(t * gv + 1.0), gpu_from_host(t * gv[::-2] - 1.0)]), "GpuElemwise")

    def expected(t):
        return np.concatenate([t * v + 1.0, t * v[::-2] - 1.0])

    wrong = run_copies(_Joined(f), expected)
    assert not wrong, f"{len(wrong)} calls launched with another thread's arguments: {wrong[:3]}"


def test_rows_scatter_add_of_an_elementwise_increment_in_threads():
    rows, width, n = 50, 8, size(4000, 600)
    rng = np.random.default_rng(40)
    idx = rng.integers(-rows, rows, n)
    inc = rng.standard_normal((n, width))
    gidx, ginc = gpu.shared(idx), gpu.shared(inc)
    t = at.dscalar("t")
    f = runs(aesara.function([t], at.inc_subtensor(at.zeros((rows, width))[gidx], t * ginc)), "GpuScatterAdd")

    def expected(t):
        out = np.zeros((rows, width))
        np.add.at(out, idx, t * inc)
        return out

    wrong = run_copies(f, expected, exact=False, calls=6)
    assert not wrong, wrong[:3]


def test_scatter_set_copies_in_threads():
    """GpuScatterSet into a copy of a GPU base (its two launches share one
    parameter block within a call), of a GpuElemwise's values."""
    rows, width, n = 40, 5, size(3000, 4000)
    rng = np.random.default_rng(41)
    idx = rng.integers(-rows, rows, n)
    vals, base = rng.standard_normal((n, width)), rng.standard_normal((rows, width))
    gidx, gvals, gbase = gpu.shared(idx), gpu.shared(vals), gpu.shared(base)
    t = at.dscalar("t")
    f = runs(aesara.function([t], gpu_from_host(at.set_subtensor(gbase[gidx], t * gvals))), "GpuScatterSet")

    def expected(t):
        out = base.copy()
        out[idx] = t * vals
        return out

    wrong = run_copies(f, expected, calls=12)
    assert not wrong, wrong[:3]


@pytest.mark.parametrize("deterministic", ["default", "more"])
def test_the_seed_loop_in_threads(deterministic):
    """``bincount(gx, weights=exp(-t * gv))`` on GPU shared data, each thread
    calling its own copy in a loop: the fused kernel and the one-wait copy to
    the host (default), the window pass and finish (more).  Weights of one
    sign and a few orders of magnitude: the default mode's atomics may add in
    another order than numpy, within the tolerance; "more" gives the same
    bits on every call of every thread."""
    n, bins = size(1_000_000, 20_000), 1000
    rng = np.random.default_rng(42)
    x, v = rng.integers(0, bins, n), rng.uniform(0.0, 5.0, n)
    gx, gv = gpu.shared(x), gpu.shared(v)
    t = at.dscalar("t")
    with aesara.config.change_flags(deterministic=deterministic):
        f = runs(aesara.function([t], bincount(gx, weights=at.exp(-t * gv))), "GpuFusedBincount")
    want = {}

    def expected(t):
        if t not in want:
            want[t] = host(f.copy()(t)) if deterministic == "more" else np.bincount(x, np.exp(-t * v), bins)
        return want[t]

    for i in range(THREADS):  # the reference of each thread, computed alone
        got = expected(float(i + 2))
        assert np.allclose(got, np.bincount(x, np.exp(-(i + 2.0) * v), bins), rtol=1e-12, atol=0)
    wrong = run_copies(f, expected, exact=deterministic == "more")
    assert not wrong, wrong[:3]
