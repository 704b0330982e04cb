"""Host overhead of the GPU Ops per call: waits, copies, allocations and host µs (issue 28, item 5).

Loaded by ``benchmarks/bench_gpu.py`` (rows under ``"host"`` in its JSON, a
table of their own), so that a lent GPU measures the same rows as the
emulation; also a script of its own::

    .venv/bin/python benchmarks/bench_gpu_host.py --emulate [--small] [--json FILE]

``--emulate`` runs it on the CPU emulation of ``tests/gpu_emu`` with kernel
execution skipped (``FAKE_CUDA_SKIP_KERNELS=1``: launches are checked and
counted, no kernel runs, results are garbage), so that only host work is
timed.  Rows, every one through ``aesara.function``:

``seed loop``
    ``f = aesara.function([theta], bincount(gx, weights=exp(-theta * gv)))``,
    ``gx`` int64 in ``[0, 1000)`` and ``gv`` float64 GPU shared variables,
    the result on the host.
``acc += bincount``
    the same bincount (``minlength=1000``) added into a GPU shared ``acc``
    by an update; nothing comes back to the host.
``sgd step``
    ``W <- W - lr * grad(((W[idx] - t) ** 2).sum(), W)``, all GPU shared.

Columns, per call after warm-up: waits for the device (stream
synchronizations, and copies into pageable memory, which wait too),
device-to-host copies and allocations (CuPy's pool and page-locked memory),
counted by the emulation's driver and CuPy ("-" on a real GPU, which has no
such counters); host µs of the call (``time.thread_time_ns``, the median of
``repeat`` calls, interleaved call by call with the other candidates), the
same with ``f.trust_input = True``, Aesara's own call (a function of the
same inputs that adds one to ``theta`` on the host, the cost of Aesara's
function call and of one small C node, also ``trust_input``), and the time
of each of our Ops inside the call (Aesara's profiler, wall µs, a separate
run).  The 1-minute load average is recorded with each row.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

__all__ = ["host_rows", "host_table", "SIZES", "SMALL_SIZES"]

#: N of the seed loop and of ``acc += bincount``; (V, D, B) of the SGD step.
SIZES = {"seed": 10**6, "sgd": (100_000, 64, 16_384)}
SMALL_SIZES = {"seed": 1000, "sgd": (50, 8, 32)}
BINS = 1000


def _counts():
    """``(waits, d2h, allocs)`` so far, from the emulation; None on a real GPU."""
    import cupy

    lib = getattr(cupy, "_driver", lambda: None)()
    if lib is None or not hasattr(lib, "fake_cuda_counter"):
        return None
    lib.fake_cuda_counter.restype = ctypes.c_longlong
    pageable = lib.fake_cuda_counter(9)
    c = cupy.counters
    return (c["sync"] + pageable, lib.fake_cuda_counter(2) + c["d2h"], c["alloc"] + lib.fake_cuda_counter(8))


def _per_call(fn, calls):
    """Counts per call of ``fn`` over ``calls`` calls (None on a real GPU)."""
    before = _counts()
    for _ in range(calls):
        fn()
    after = _counts()
    if before is None:
        return None
    return [(b - a) / calls for a, b in zip(before, after)]


def _host_us(candidates, repeat):
    """Median thread-time µs per call of each candidate, interleaved call by call."""
    times = {name: [] for name in candidates}
    for fn in candidates.values():
        fn()
    for _ in range(repeat):
        for name, fn in candidates.items():
            t0 = time.thread_time_ns()
            fn()
            times[name].append((time.thread_time_ns() - t0) / 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def _op_us(make, call, repeat):
    """Wall µs per call of each of our Ops in a profiled copy of the function."""
    from aesara.compile.profiling import ProfileStats

    profile = ProfileStats(atexit_print=False)
    f = make(profile)
    for _ in range(repeat + 1):
        call(f)
    out = {}
    for (_, node), t in profile.apply_time.items():
        name = type(node.op).__name__
        if name.startswith("Gpu") or name == "HostFromGpu":
            out[name] = out.get(name, 0.0) + t * 1e6 / (repeat + 1)
    return out


def _row(name, make, call, aesara_call, repeat):
    import aesara.tensor as at  # noqa: F401 (Aesara is loaded by the caller)

    f = make(None)
    call(f)
    counts = _per_call(lambda: call(f), max(4, repeat // 4))

    def checked():
        f.trust_input = False
        call(f)

    def trusted():
        f.trust_input = True
        call(f)

    us = _host_us({"call": checked, "trusted": trusted, "aesara": aesara_call}, repeat)
    row = {"row": name, "load": f"{os.getloadavg()[0]:.2f}", "call_us": us["call"],
           "trusted_us": us["trusted"], "aesara_us": us["aesara"],
           "ops_us": _op_us(make, call, repeat)}  # fmt: skip
    if counts is not None:
        row["waits"], row["d2h"], row["allocs"] = counts
    return row


def host_rows(cp, small, repeat):
    """The rows of this module, as dictionaries (see the module docstring)."""
    import aesara
    import aesara.tensor as at
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    sizes = SMALL_SIZES if small else SIZES
    n = sizes["seed"]
    x = cp.asarray(np.arange(n, dtype="int64") * 7919 % BINS)
    v = cp.asarray((np.arange(n, dtype="int64") * 104729 % 65537) / 65537.0)
    gx, gv = gpu.shared(x, borrow=True), gpu.shared(v, borrow=True)
    theta = at.dscalar("theta")
    base = aesara.function([theta], theta + 1)
    base.trust_input = True
    half = np.array(0.5)

    def aesara_call():
        base(half)

    rows = []
    seed = bincount(gx, weights=at.exp(-theta * gv))
    rows.append(_row("seed loop", lambda p: aesara.function([theta], seed, profile=p),
                     lambda f: f(half), aesara_call, repeat))  # fmt: skip
    acc = gpu.shared(cp.zeros(BINS, dtype="float64"))
    total = acc + bincount(gx, weights=at.exp(-theta * gv), minlength=BINS)
    rows.append(_row("acc += bincount", lambda p: aesara.function([theta], [], updates={acc: total}, profile=p),
                     lambda f: f(half), aesara_call, repeat))  # fmt: skip
    V, D, B = sizes["sgd"]
    rng = np.random.default_rng(2)
    W = gpu.shared(rng.standard_normal((V, D)).astype("float32"))
    idx = gpu.shared(rng.integers(0, V, B).astype("int64"))
    t = gpu.shared(rng.standard_normal((B, D)).astype("float32"))
    lr = at.scalar("lr", dtype="float32")
    step = W - lr * aesara.grad(((W[idx] - t) ** 2).sum(), W)
    lr0 = np.array(0.01, dtype="float32")
    rows.append(_row("sgd step", lambda p: aesara.function([lr], [], updates={W: step}, profile=p),
                     lambda f: f(lr0), aesara_call, repeat))  # fmt: skip
    for r in rows:
        r["N"] = n if r["row"] != "sgd step" else B
    return rows


def _fmt(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def host_table(rows):
    """The Markdown table of :func:`host_rows` (from one or more runs), with the targets' verdicts."""
    if not rows:
        return ""
    lines = [
        "| row | N | waits/call | D2H copies/call | allocs/call | call µs | trust_input µs "
        "| Aesara's own call µs | our Ops µs (profiled) | load avg |",
        "|" + "---|" * 10,
    ]
    verdicts = []
    for r in rows:
        ops = ", ".join(f"{k} {_fmt(v)}" for k, v in sorted(r.get("ops_us", {}).items())) or "-"
        lines.append(
            f"| {r['row']} | {r['N']} | {_fmt(r.get('waits'))} | {_fmt(r.get('d2h'))} | {_fmt(r.get('allocs'))} "
            f"| {_fmt(r['call_us'])} | {_fmt(r['trusted_us'])} | {_fmt(r['aesara_us'])} | {ops} | {r['load']} |"
        )
        if r["row"] == "seed loop" and r.get("waits") is not None:
            verdicts.append(("seed loop: one wait per call", r["waits"] == 1, r["waits"]))
            verdicts.append(("seed loop: no allocation per call", r["allocs"] == 0, r["allocs"]))
        if r["row"] == "acc += bincount" and r.get("waits") is not None:
            verdicts.append(("acc += bincount: at most one wait per call", r["waits"] <= 1, r["waits"]))
    lines.append("")
    lines += [f"- {'PASS' if ok else 'FAIL'}: {what} ({value:.3g})" for what, ok, value in verdicts]
    return "\n".join(lines)


def _emulate(argv):
    """Run this script again on the emulation, kernels skipped."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from gpu_emu import build

    env = build.environment(build.build())
    env["FAKE_CUDA_SKIP_KERNELS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env["PYTHONPATH"]])
    args = [a for a in argv if a != "--emulate"]
    os.execvpe(sys.executable, [sys.executable, os.path.abspath(__file__), *args], env)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emulate", action="store_true", help="on the CPU emulation, kernels skipped")
    parser.add_argument("--small", action="store_true", help="tiny sizes")
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    if args.emulate:
        _emulate(argv)
    sys.path.insert(0, ROOT)
    import cupy

    rows = host_rows(cupy, args.small, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(host_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
