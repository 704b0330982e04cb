"""The GPU benchmark's contention rows: what only a GPU shows (issue 19 item 7).

Rows of ``benchmarks/bench_gpu.py`` (its neighbour; both stacks run them,
through the kernel layer): the cases whose cost on a GPU is set by atomics
that many threads aim at the same addresses, which the CPU emulation cannot
time.

- a hot bin with float32 weights at N = 1e8: 10 % of x on one bin beyond the
  shared-memory window (the global-bin path; float32 weights go to a
  float64 accumulator with native double atomics);
- Zipf-distributed x (a = 1.2, 1e6 bins) with float32 weights;
- float32 rows with a hot row: 30 % of the indices on row 0 (a padding
  index), D = 64, summed in the float64 scratch (at most 4 rows per index);
  and 10 % on one row of a table of 1e6 rows with 1e4 indices, which takes
  the batched compare-and-swap instead (``c_code/cuda/scatter_add_kernels.cu``);
- rows of D = 1 and of D = 128 (float32, uniform indices).

Each row times a whole call (``bincount_cupy`` / ``scatter_add_cupy``,
CUDA events, median of ``repeat`` after 3 warm-ups) against CuPy
(``cupy.bincount`` with weights; ``cupyx.scatter_add`` for rows) and
PyTorch (``torch.bincount`` with weights; ``index_add_``) where present, and
checks the result against NumPy.  ``small`` (the dry run): sizes of 20,000.
"""
import numpy as np

from aesara_bincount_core.cuda import kernels

__all__ = ["CONTENTION", "contention_rows", "contention_table"]

#: name -> (N, bins or rows, D or None, what)
CONTENTION = {
    "hot bin, float32 weights": (10**8, 10**6, None, "hot"),
    "Zipf x, float32 weights": (10**8, 10**6, None, "zipf"),
    "float32 rows, hot row": (10**6, 10**5, 64, "hot"),
    "float32 rows, hot row, large table": (10**4, 10**6, 64, "hot"),
    "float32 rows, D = 1": (10**7, 10**6, 1, "uniform"),
    "float32 rows, D = 128": (10**5, 10**4, 128, "uniform"),
}
SMALL = 20_000


def _indices(n, bins, kind, rng):
    if kind == "hot":
        x = rng.integers(0, bins, n)
        x[rng.random(n) < (0.3 if bins <= 10**5 else 0.1)] = 0 if bins <= 10**5 else bins - 1
        return x.astype("int32")
    if kind == "zipf":
        return np.minimum(rng.zipf(1.2, n) - 1, bins - 1).astype("int32")
    return rng.integers(0, bins, n).astype("int32")


def _cupyx_scatter_add():
    try:
        import cupyx

        return cupyx.scatter_add
    except (ImportError, AttributeError):
        return None


def contention_rows(cp, torch, small, repeat, device_ms, torch_ms):
    """The rows of :data:`CONTENTION`, as dicts (timed with bench_gpu's
    ``device_ms`` and ``torch_ms``, passed in to keep one timing method)."""
    rng = np.random.default_rng(19)
    rows = []
    for name, (n, bins, d, kind) in CONTENTION.items():
        if small:
            n, bins = SMALL, min(bins, 3_000)
        x_np = _indices(n, bins, kind, rng)
        x = cp.asarray(x_np)
        row = {"case": name, "N": n, "bins": bins, "D": d}
        if d is None:
            w_np = rng.random(n, dtype=np.float32)
            w = cp.asarray(w_np)
            got = kernels.bincount_cupy(x, w, n=bins)
            want = np.bincount(x_np, w_np.astype(np.float64), minlength=bins)
            row["correct"] = bool(np.allclose(cp.asnumpy(got), want, rtol=1e-4, atol=1e-3))
            row["ours_ms"] = device_ms(cp, lambda: kernels.bincount_cupy(x, w, n=bins), repeat)
            row["cupy_ms"] = device_ms(cp, lambda: cp.bincount(x, w, minlength=bins), repeat)
            if torch is not None:
                xt, wt = torch.as_tensor(x, device="cuda"), torch.as_tensor(w, device="cuda")
                row["torch_ms"] = torch_ms(torch, lambda: torch.bincount(xt, wt, bins), repeat)
        else:
            g_np = rng.random((n, d), dtype=np.float32)
            g, out = cp.asarray(g_np), cp.zeros((bins, d), dtype=np.float32)
            kernels.scatter_add_cupy(out, g, x, inplace=True)
            want = np.zeros((bins, d))
            np.add.at(want, x_np, g_np)
            row["correct"] = bool(np.allclose(cp.asnumpy(out), want, rtol=1e-4, atol=1e-3))
            row["ours_ms"] = device_ms(cp, lambda: kernels.scatter_add_cupy(out, g, x, inplace=True), repeat)
            scatter_add = _cupyx_scatter_add()
            if scatter_add is not None:
                row["cupy_ms"] = device_ms(cp, lambda: scatter_add(out, x, g), repeat)
            if torch is not None:
                ot, gt = torch.zeros((bins, d), device="cuda"), torch.as_tensor(g, device="cuda")
                xt = torch.as_tensor(x, device="cuda").long()
                row["torch_ms"] = torch_ms(torch, lambda: ot.index_add_(0, xt, gt), repeat)
        rows.append(row)
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def contention_table(rows, fmt):
    """A Markdown table of the rows (``fmt`` formats a number or None)."""
    lines = [
        "| case | N | bins / rows | D | ours ms | CuPy ms | PyTorch ms | correct |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['N']:.0e} | {r['bins']:.0e} | {r['D'] or '-'} | "
            f"{fmt(r.get('ours_ms'))} | {fmt(r.get('cupy_ms'))} | {fmt(r.get('torch_ms'))} | "
            f"{'yes' if r['correct'] else 'NO'} |"
        )
    return "\n".join(lines)
