"""The peers the CPU benchmarks time beside ours, set up in one place.

``bench_cpu.py`` (bincount), ``bench_rows.py`` (the scatter-add of rows) and
``bench_fusion.py`` (the fused bincount) compare with numba loops and with torch on one thread, when those are
installed.  This module builds them:

- :func:`numba_peers`: the ``@njit`` loops, or ``None`` without numba.  The
  bincount loops are the plainest ones a user would write, the bins known and
  no checks (issue 21): ``count(x, n)`` adds 1 into an int64 output and
  ``weighted(x, w, n)`` adds ``w[i]`` into a float64 one.  ``count_max`` and
  ``weighted_max`` also find ``n`` with ``x.max() + 1``, as ``numpy.bincount``
  must (the ``numba_max`` column).  ``rows(out, idx, g)`` adds the rows
  ``g[i]`` into ``out[idx[i]]``.  ``fused_mul(x, v, th, n)``,
  ``fused_fma(x, v, u, th, n)`` and ``fused_div(x4, n)`` are the fused loops
  of ``bench_fusion.py``'s cells (weights ``th * v[i]``, ``v[i] * u[i] + th``;
  counts of ``x4[i] // 4``), the bins known.
- :func:`torch_module` and :func:`one_thread`: torch, and a wrapper that
  runs a call of it on one thread.

The loops are compiled without ``cache=True``: the scripts are also loaded
under other module names by the tests (``tests/test_bench_*.py``), which
numba's cache cannot reload.
"""
from types import SimpleNamespace
from typing import Callable, Optional

import numpy as np


def numba_peers() -> Optional[SimpleNamespace]:
    """The numba loops (see the module's docstring), or ``None`` without numba."""
    try:
        import numba
    except Exception:  # noqa: BLE001  (numba missing or broken: no column)
        return None

    @numba.njit(nogil=True)
    def count(x, n):
        out = np.zeros(n, np.int64)
        for i in range(x.shape[0]):
            out[x[i]] += 1
        return out

    @numba.njit(nogil=True)
    def weighted(x, w, n):
        out = np.zeros(n, np.float64)
        for i in range(x.shape[0]):
            out[x[i]] += w[i]
        return out

    @numba.njit(nogil=True)
    def count_max(x):
        out = np.zeros(x.max() + 1, dtype=np.int64)
        for v in x:
            out[v] += 1
        return out

    @numba.njit(nogil=True)
    def weighted_max(x, w):
        out = np.zeros(x.max() + 1, dtype=np.float64)
        for i in range(x.shape[0]):
            out[x[i]] += w[i]
        return out

    @numba.njit(nogil=True)
    def rows2d(out, idx, g):
        # out: (V, D), g: (N, D); a plain double loop.
        for i in range(idx.shape[0]):
            j = idx[i]
            for k in range(g.shape[1]):
                out[j, k] += g[i, k]
        return out

    def rows(out, idx, g):
        """``out[idx[i]] += g[i]`` for rows of any shape; returns ``out``."""
        rows2d(out.reshape(out.shape[0], -1), idx, g.reshape(len(idx), -1))
        return out

    @numba.njit(nogil=True)
    def fused_mul(x, v, th, n):
        out = np.zeros(n)
        for i in range(x.shape[0]):
            out[x[i]] += th * v[i]
        return out

    @numba.njit(nogil=True)
    def fused_fma(x, v, u, th, n):
        out = np.zeros(n)
        for i in range(x.shape[0]):
            out[x[i]] += v[i] * u[i] + th
        return out

    @numba.njit(nogil=True)
    def fused_div(x4, n):
        out = np.zeros(n, np.int64)
        for i in range(x4.shape[0]):
            out[x4[i] // 4] += 1
        return out

    return SimpleNamespace(count=count, weighted=weighted, count_max=count_max,
                           weighted_max=weighted_max, rows=rows, fused_mul=fused_mul,
                           fused_fma=fused_fma, fused_div=fused_div, version=numba.__version__)


def torch_module():
    """The ``torch`` module, or ``None`` when it does not import."""
    try:
        import torch
    except Exception:  # noqa: BLE001
        return None
    return torch


def one_thread(torch, fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with torch on one thread, torch's thread count put back after.

    ``torch.set_num_threads`` also sets OpenMP's thread count for the whole
    process (torch shares libgomp with our Ops), so it is restored at once:
    otherwise "OpenMP on" would silently run on one thread.  The pair of calls
    costs under a microsecond.
    """
    threads = torch.get_num_threads()

    def call():
        torch.set_num_threads(1)
        try:
            return fn()
        finally:
            torch.set_num_threads(threads)

    return call


def numba_multi_index_peers() -> Optional[SimpleNamespace]:
    """The numba loops of ``bench_scatter.py`` (several index arrays), or ``None`` without numba.

    ``pairs(y, p, k0, k1)``: a ``(k0, k1)`` int64 count of the pairs (a
    confusion matrix); ``batched(x, k)``: the count of each row of ``x`` into
    ``k`` bins; ``picked_grad(P, y)``: zeros like ``P`` with ``-1 / P[i, y[i]]``
    added at ``[i, y[i]]``.  The plainest loops, the sizes known, no checks.
    """
    try:
        import numba
    except Exception:  # noqa: BLE001  (numba missing or broken: no column)
        return None

    @numba.njit(nogil=True)
    def pairs(y, p, k0, k1):
        out = np.zeros((k0, k1), np.int64)
        for i in range(y.shape[0]):
            out[y[i], p[i]] += 1
        return out

    @numba.njit(nogil=True)
    def batched(x, k):
        out = np.zeros((x.shape[0], k), np.int64)
        for r in range(x.shape[0]):
            for j in range(x.shape[1]):
                out[r, x[r, j]] += 1
        return out

    @numba.njit(nogil=True)
    def picked_grad(P, y):
        out = np.zeros_like(P)
        for i in range(y.shape[0]):
            out[i, y[i]] += -1.0 / P[i, y[i]]
        return out

    return SimpleNamespace(pairs=pairs, batched=batched, picked_grad=picked_grad)
