"""The rows of the GPU benchmark for issue 18: the seed's loop and the embedding SGD step, end to end.

Loaded by ``benchmarks/bench_gpu.py`` (the Aesara stack only: every row goes
through ``aesara.function``), which adds :func:`loop_rows` to its JSON under
``"loops"`` and :func:`loop_table` to its table.  Rows:

``seed loop``
    ``bincount(gx, weights=exp(-theta * gv))`` with ``gx`` int64 in
    ``[0, 1000)`` and ``gv`` float64 GPU shared variables, ``theta`` a host
    scalar, the result kept on the GPU (``gpu_from_host``), at N = 1e6 and
    1e8 (``--small``: 20,000).  Candidates: the compiled function (every
    rewrite: one ``GpuFusedBincount`` whose kernel computes the weights,
    issue 20; ``fused`` records that it compiled so), the same function
    with ``mode.excluding("bincount_fusion")`` (``unfused``: a
    ``GpuElemwise`` writes the weights, then ``GpuBincount`` reads them),
    with ``mode.excluding("gpu_lift")`` (today's path before the lifting:
    ``exp`` and the product on the host, two transfers of N values per
    call), and ``cupy.bincount(x, cupy.exp(-theta * v))``.  The floor is
    one read of x and v at the measured copy bandwidth.
``sgd step``
    ``W <- W - lr * grad(((W[idx] - t) ** 2).sum(), W)``, all GPU shared
    (V = 100,000 and 1,000,000 rows of D = 64 float32, a batch of B = 16,384
    indices; ``--small``: 50 and 500 rows of 8, 32).  Candidates: the
    compiled function (``sparse``: the rewrite ``sparse_update`` made it one
    ``GpuScatterAdd`` into ``W`` in place), the same step with
    ``mode.excluding("sparse_update")`` (``dense``: a zero-filled table, the
    scatter-add, an elementwise pass over the whole table), the step written
    ``inc_subtensor(W[idx], -lr * grad(cost, W[idx]))`` (``inc_subtensor``),
    the same step in PyTorch (``index_select`` then ``index_add_`` in place)
    and in CuPy (``W[idx]`` then ``cupyx.scatter_add``), where importable.
    The sparse step's time should not follow V (the two rows), the dense
    step's does.
``mlp step``, ``kmeans step``, ``logreg step``
    Issue 29's programs (``gpu_programs.py``): an MLP classifier's SGD step
    and a k-means step, and issue 39's minibatch logistic regression
    (``log(p)[arange(batch_size), y]``, a batch of 4,096 MNIST-sized rows;
    ``--small``: 8), on GPU shared variables, against the same graphs on
    host shared variables (``CPU graph ms``).
``rnn step``
    Issue 39's loop (``gpu_scan_programs.py``): an Elman RNN's SGD step
    trained with scan (the forward loop, the loop of its gradient, the
    updates), T = 50 steps of a batch of 64, 128 inputs, 256 hidden units,
    32 classes (``--small``: 3 steps of 2, 3, 4, 3); ``N`` is the number of
    steps; ``transfers`` counts those of the loops' inner graphs too.

Timing: wall-clock milliseconds of one call followed by a synchronization of
the device (the same for every candidate, :func:`wall_ms`: median of the
repeats after one warm-up call; the host path has at most 2 repeats at
N = 1e8, about 2 s each).  Each row records the 1-minute load average
(``/proc/loadavg``) when it was timed; host figures from a busy machine
are marked by it.  ``correct``: the compiled
function gives what the CuPy (seed loop) or NumPy (SGD step) computation
gives, to a float tolerance.
"""
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the sibling module sizes.py, also when loaded by path
    sys.path.insert(0, HERE)

from gpu_programs import program_rows  # noqa: E402
from gpu_scan_programs import scan_program_rows  # noqa: E402
from sizes import size_text  # noqa: E402

__all__ = ["loop_rows", "loop_table", "wall_ms"]

SEED_SIZES = (10**6, 10**8)
SMALL_SEED_SIZES = (20_000,)
SGD = ((100_000, 64, 16_384), (1_000_000, 64, 16_384))
SMALL_SGD = ((50, 8, 32), (500, 8, 32))


def _transfers(f):
    """How many HostFromGpu and GpuFromHost nodes the compiled function ``f`` runs."""
    names = [type(node.op).__name__ for node in f.maker.fgraph.toposort()]
    return names.count("HostFromGpu") + names.count("GpuFromHost")


def wall_ms(sync, fn, repeat):
    """Median wall-clock ms of ``fn(); sync()`` over ``repeat`` calls, after one warm-up call."""
    fn()
    sync()
    times = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _seed_row(cp, n, repeat, bandwidth):
    import aesara
    import aesara.tensor as at
    from aesara.compile.mode import get_default_mode
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    # Made on the device (no host pass over 1e8 values): x spreads over [0, 1000)
    # in a scrambled order, v in [0, 1).
    x = cp.arange(n, dtype="int64") * 7919 % 1000
    v = (cp.arange(n, dtype="int64") * 104729 % 65537) / 65537.0
    gx, gv = gpu.shared(x, borrow=True), gpu.shared(v, borrow=True)
    theta = at.dscalar("theta")
    out = gpu.gpu_from_host(bincount(gx, weights=at.exp(-theta * gv)))
    f = aesara.function([theta], out)
    unfused = aesara.function([theta], out, mode=get_default_mode().excluding("bincount_fusion"))
    today = aesara.function([theta], out, mode=get_default_mode().excluding("gpu_lift"))
    sync = cp.cuda.get_current_stream().synchronize
    row = {"row": "seed loop", "N": n, "load": f"{os.getloadavg()[0]:.1f}"}
    row["transfers"] = _transfers(f)
    names = [type(node.op).__name__ for node in f.maker.fgraph.toposort()]
    row["fused"] = "GpuFusedBincount" in names and "GpuElemwise" not in names
    expected = cp.bincount(x, cp.exp(-0.5 * v))
    row["correct"] = bool(cp.allclose(f(0.5), expected, rtol=1e-9, atol=1e-9 * n))
    row["aesara_ms"] = wall_ms(sync, lambda: f(0.5), repeat)
    row["unfused_ms"] = wall_ms(sync, lambda: unfused(0.5), repeat)
    row["today_ms"] = wall_ms(sync, lambda: today(0.5), min(repeat, 2) if n > 10**7 else repeat)
    row["cupy_ms"] = wall_ms(sync, lambda: cp.bincount(x, cp.exp(-0.5 * v)), repeat)
    row["floor_ms"] = (x.nbytes + v.nbytes) / bandwidth * 1e3  # as bench_gpu's floor of x
    return row


def _sgd_row(cp, torch, sizes, repeat):
    import aesara
    import aesara.tensor as at
    from aesara.compile.mode import get_default_mode

    from aesara_bincount import gpu

    V, D, B = sizes
    rng = np.random.default_rng(2)
    W0 = rng.standard_normal((V, D)).astype("float32")
    idx0 = rng.integers(0, V, B).astype("int64")
    t0 = rng.standard_normal((B, D)).astype("float32")
    idx, t = gpu.shared(idx0), gpu.shared(t0)
    lr = at.scalar("lr", dtype="float32")
    steps = {}
    for name in ("sparse", "dense", "inc_subtensor"):
        W = gpu.shared(W0)
        rows = W[idx]
        loss = ((rows - t) ** 2).sum()
        if name == "inc_subtensor":
            update = at.inc_subtensor(rows, -lr * aesara.grad(loss, rows))
        else:
            update = W - lr * aesara.grad(loss, W)
        mode = get_default_mode().excluding("sparse_update") if name == "dense" else None
        steps[name] = (W, aesara.function([lr], [], updates={W: update}, mode=mode))
    W, f = steps["sparse"]
    sync = cp.cuda.get_current_stream().synchronize
    row = {"row": "sgd step", "N": B, "V": V, "D": D, "load": f"{os.getloadavg()[0]:.1f}"}
    row["transfers"] = _transfers(f)
    names = [type(node.op).__name__ for node in f.maker.fgraph.toposort()]
    row["sparse"] = [str(n.op) for n in f.maker.fgraph.toposort() if "ScatterAdd" in str(n.op)] == [
        "GpuScatterAdd{onto='base', inplace=True}"] and "GpuAlloc" not in names
    expected = W0.copy()
    np.add.at(expected, idx0, -0.01 * 2 * (W0[idx0] - t0))
    correct = True
    for name, (Wn, fn) in steps.items():
        fn(np.float32(0.01))
        correct &= bool(np.allclose(cp.asnumpy(Wn.get_value()), expected, rtol=1e-4, atol=1e-4))
    row["correct"] = correct
    row["aesara_ms"] = wall_ms(sync, lambda: f(np.float32(0.01)), repeat)
    dense, inc = steps["dense"][1], steps["inc_subtensor"][1]
    row["dense_ms"] = wall_ms(sync, lambda: dense(np.float32(0.01)), repeat)
    row["inc_ms"] = wall_ms(sync, lambda: inc(np.float32(0.01)), repeat)
    if torch is not None:
        tW, ti, tt = (torch.as_tensor(a, device="cuda") for a in (W0, idx0, t0))

        def torch_step():
            tW.index_add_(0, ti, tW.index_select(0, ti).sub_(tt).mul_(-0.02))

        row["torch_ms"] = wall_ms(torch.cuda.synchronize, torch_step, repeat)
    try:
        import cupyx
    except ImportError:
        cupyx = None
    if cupyx is not None and hasattr(cupyx, "scatter_add"):
        cW, ci, ct = cp.asarray(W0), cp.asarray(idx0), cp.asarray(t0)
        row["cupy_ms"] = wall_ms(sync, lambda: cupyx.scatter_add(cW, ci, -0.02 * (cW[ci] - ct)), repeat)
    return row


def loop_rows(cp, torch, small, repeat, bandwidth):
    """The rows of this module, as dictionaries (see the module docstring)."""
    rows = []
    for n in SMALL_SEED_SIZES if small else SEED_SIZES:
        rows.append(_seed_row(cp, n, repeat, bandwidth))
        cp.get_default_memory_pool().free_all_blocks()
    for sizes in SMALL_SGD if small else SGD:
        rows.append(_sgd_row(cp, torch, sizes, repeat))
        cp.get_default_memory_pool().free_all_blocks()
    rows += program_rows(cp, small, repeat, wall_ms, _transfers)
    rows += scan_program_rows(cp, small, repeat, wall_ms, _transfers)
    return rows


def _fmt(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def loop_table(rows):
    """The Markdown table of :func:`loop_rows` (from one or more runs), with the targets' verdicts."""
    if not rows:
        return ""
    lines = [
        "| row | N | transfers | fused | Aesara e2e ms | unfused ms | today's path ms | cupy ms "
        "| torch ms | floor ms | CPU graph ms | load avg | correct | V | sparse | dense ms | inc_subtensor ms |",
        "|" + "---|" * 17,
    ]
    verdicts = []
    for r in rows:
        lines.append(
            f"| {r['row']} | {size_text(r['N'])} | {r['transfers']} "
            f"| {'-' if 'fused' not in r else 'yes' if r['fused'] else 'no'} | {_fmt(r.get('aesara_ms'))} "
            f"| {_fmt(r.get('unfused_ms'))} | {_fmt(r.get('today_ms'))} "
            f"| {_fmt(r.get('cupy_ms'))} | {_fmt(r.get('torch_ms'))} | {_fmt(r.get('floor_ms'))} "
            f"| {_fmt(r.get('cpu_ms'))} | {r.get('load') or '-'} | {'yes' if r.get('correct') else 'NO'} "
            f"| {size_text(r['V']) if 'V' in r else '-'} "
            f"| {'-' if 'sparse' not in r else 'yes' if r['sparse'] else 'no'} "
            f"| {_fmt(r.get('dense_ms'))} | {_fmt(r.get('inc_ms'))} |"
        )
        a = r.get("aesara_ms")
        if r["row"] == "seed loop" and r["N"] == 10**6:
            verdicts.append(("seed loop at 1e6 no slower than CuPy", a <= r["cupy_ms"], a / r["cupy_ms"]))
            speedup = r["today_ms"] / a
            verdicts.append(("seed loop at 1e6 20x faster than today's path", speedup >= 20, speedup))
        if r["row"] == "seed loop" and r["N"] == 10**8:
            ratio = a / r["floor_ms"]
            verdicts.append(("seed loop at 1e8 within 1.3x of one read of x and v", ratio <= 1.3, ratio))
            if "fused" in r:  # issue 20's target, for the fused kernel
                ok = bool(r["fused"]) and ratio <= 1.1
                verdicts.append(("seed loop at 1e8 fused, within 1.1x of one read of x and v", ok, ratio))
        if r["row"] == "sgd step" and r.get("torch_ms"):
            verdicts.append(("sgd step no slower than PyTorch", a <= r["torch_ms"], a / r["torch_ms"]))
        if r["row"] == "sgd step" and r.get("dense_ms") and r.get("V", 0) >= 10**6:
            # Issue 41: the sparse step reads and writes the touched rows only.
            ok = bool(r.get("sparse")) and r["dense_ms"] >= 3 * a
            verdicts.append((f"sgd step at V={size_text(r['V'])}: dense / sparse >= 3", ok, r["dense_ms"] / a))
    sgd = {r["V"]: r["aesara_ms"] for r in rows if r["row"] == "sgd step" and r.get("V") and r.get("dense_ms")}
    if 10**5 in sgd and 10**6 in sgd:
        ratio = sgd[10**6] / sgd[10**5]
        verdicts.append(("sgd step: time at V=1e6 / V=1e5 <= 1.5 (touched rows only)", ratio <= 1.5, ratio))
    lines.append("")
    lines += [f"- {'PASS' if ok else 'FAIL'}: {what} ({value:.3g})" for what, ok, value in verdicts]
    return "\n".join(lines)
