"""GPU benchmark: GpuBincount against cupy.bincount, torch.bincount and numpy.bincount.

Run by ``scripts/gpu_check.sh``, in one process per software stack:

``--standalone``
    The kernel layer alone (``aesara_bincount_core.cuda.kernels``, imported
    plainly: no Aesara; works with NumPy 2 + CuPy 14 and PyTorch).
(default)
    With Aesara (NumPy 1 + CuPy 13): adds the end-to-end time of
    ``aesara.function([], bincount(x))`` on a GPU shared variable, result
    back on the host.
    Also the rows of ``bench_gpu_loop.py`` (the seed's loop and the
    embedding SGD step, end to end, against CuPy and PyTorch) and of
    ``bench_gpu_host.py`` (waits, copies, allocations and host µs per call).
``--table FILE...``
    Merge the JSON files of the runs above into one Markdown table.
``--sanitize``
    A small correctness run, without timing, for ``compute-sanitizer``
    (:mod:`gpu_sanitize`: the kernel layer, and where Aesara imports every
    kernel family through ``aesara.function``).

The Aesara stack also runs the rows of ``bench_gpu_scatter.py`` (issue 30:
the confusion matrix, the batched bincount, the NLL gradient and the
integer-index set on GPU data, against Aesara's graph) and of
``bench_gpu_det.py`` (each case
compiled in the default mode and under ``aesara.config.deterministic =
"more"``: the seed's loop with float64 and float32 weights, a float32
scatter-add of rows with a hot row).

Both stacks also run the contention rows of ``bench_gpu_contention.py``
(hot bins and hot rows with float32 sums, rows of D = 1 and D = 128).

Timing: device times with CUDA events around each call (median of
``--repeat`` calls after warm-up), candidates side by side in one process;
host times (numpy, the Aesara function) with :func:`timeit.repeat` (median of
``--repeat`` single calls after one warm-up call).  The
memory-bandwidth floor is ``bytes of x / B``, where ``B`` is the measured
bandwidth of a device-to-device copy of 1 GiB, counting bytes read plus bytes
written (as NVIDIA's bandwidth test does).  "GpuBincount kernel" times the
histogram pass alone, with the exact number of bins (one pass), where the
kernel layer lets it be launched alone (else "-", and "kernel/floor" is the
whole call over the floor); "GpuBincount call" is a whole ``bincount_cupy``
call on the device timeline, including its one synchronization.

Sizes and repeats (the device time of ``scripts/gpu_check.sh`` is planned
from them: docs/development.rst, "Running the GPU check on a lent
machine"): :data:`CASES` (8 rows) and the
seed case, ``--repeat`` 20 device-timed calls per candidate after 3 warm-up
calls, 1 GiB copy for the bandwidth; ``--small`` (the dry run): 2 rows of
20,000 values.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time
import timeit

import numpy as np

from aesara_bincount_core.cuda import kernels

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the sibling module sizes.py, also when loaded by path
    sys.path.insert(0, HERE)

from sizes import size_text  # noqa: E402
from bench_gpu_contention import contention_rows, contention_table  # noqa: E402  (issue 19 item 7)
from bench_gpu_loop import loop_rows, loop_table  # noqa: E402  (issue 18's rows)
from bench_gpu_host import host_rows, host_table  # noqa: E402  (issue 28's host overhead)
from bench_gpu_det import det_rows, det_table  # noqa: E402  (issue 31's rows)
from bench_gpu_scatter import scatter_rows, scatter_table  # noqa: E402  (issue 30's rows)

#: (N, bins, kind) of the table; x is int32.
CASES = [(n, bins, kind) for n in (10**6, 10**8) for bins in (1000, 10**6) for kind in ("uniform", "equal")]
#: The seed case: 1e6 int64 values in [0, 1000), end to end through Aesara.
SEED = (10**6, 1000, "uniform", "int64")
SMALL_CASES = [(20_000, 300, "uniform"), (20_000, 300, "equal")]


def make_x(n, bins, kind, dtype, seed=0):
    if kind == "equal":
        return np.full(n, bins // 2, dtype=dtype)
    return np.random.default_rng(seed).integers(0, bins, n).astype(dtype)


def device_ms(cp, fn, repeat, warmup=3):
    """Median milliseconds of ``fn()`` between two CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    cp.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(repeat):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def torch_ms(torch, fn, repeat, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth(cp, nbytes=2**30, repeat=10):
    """Bytes read + written per second by a device-to-device copy."""
    a = cp.zeros(nbytes, dtype=cp.uint8)
    b = cp.empty_like(a)
    ms = device_ms(cp, lambda: b.data.copy_from_device_async(a.data, nbytes), repeat)
    return 2 * nbytes / (ms / 1e3)


def _torch():
    try:
        import torch
    except Exception:
        return None
    return torch if torch.cuda.is_available() else None


def gpu_name(cp):
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    name = props.get("name", b"unknown GPU")
    return name.decode() if isinstance(name, bytes) else str(name)


def host_ms(fn, repeat):
    """Median wall-clock milliseconds of ``repeat`` calls of ``fn`` after one warm-up call."""
    fn()
    return statistics.median(timeit.repeat(fn, number=1, repeat=max(1, repeat))) * 1e3


def kernel_only(cp, x, bins):
    """A function launching the histogram pass alone, into a buffer of exactly ``bins``."""
    return kernels.histogram_pass(x, bins)


def bench_case(cp, torch, n, bins, kind, dtype, repeat, bandwidth, aesara_fn=None):
    x_np = make_x(n, bins, kind, dtype)
    x = cp.asarray(x_np)
    top = int(x_np.max()) + 1
    row = {"N": n, "bins": bins, "kind": kind, "dtype": dtype}
    expected = cp.bincount(x)
    got = kernels.bincount_cupy(x)
    row["correct"] = bool(got.shape == expected.shape and bool((got.astype(expected.dtype) == expected).all()))
    kernel = kernel_only(cp, x, top)
    row["kernel_ms"] = None if kernel is None else device_ms(cp, kernel, repeat)
    hint = {"capacity_hint": top}
    row["call_ms"] = device_ms(cp, lambda: kernels.bincount_cupy(x, **hint), repeat)
    row["cupy_ms"] = device_ms(cp, lambda: cp.bincount(x), repeat)
    if torch is not None:
        xt = torch.as_tensor(x, device="cuda")
        row["torch_ms"] = torch_ms(torch, lambda: torch.bincount(xt), repeat)
    row["numpy_ms"] = host_ms(lambda: np.bincount(x_np), max(3, repeat // 5 if n > 10**7 else repeat))
    row["floor_ms"] = x.nbytes / bandwidth * 1e3
    if aesara_fn is not None:
        f = aesara_fn(x)
        row["aesara_ms"] = host_ms(f, repeat)
        row["correct"] &= bool(np.array_equal(f(), cp.asnumpy(expected).astype(dtype)))
    return row


def aesara_function_maker():
    import aesara
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    def make(x):
        f = aesara.function([], bincount(gpu.shared(x, borrow=True)))
        if not any(isinstance(node.op, gpu.GpuBincount) for node in f.maker.fgraph.toposort()):
            raise RuntimeError("the GPU rewrite did not fire")
        return f

    return make


def _cupy():
    """``(cupy, availability)``, or None (with a message) without a GPU."""
    ok, why = kernels.availability()
    if not ok:
        print(f"bench_gpu: no usable GPU: {why}")
        return None
    import cupy

    return cupy, why


def run(args):
    found = _cupy()
    if found is None:
        return 2
    cp, why = found

    torch = _torch()
    aesara_fn = None if args.standalone else aesara_function_maker()
    bandwidth = copy_bandwidth(cp, 2**20 if args.small else 2**30)
    meta = {
        "stack": "standalone" if args.standalone else "aesara",
        "gpu": gpu_name(cp),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cupy": cp.__version__,
        "torch": getattr(torch, "__version__", None),
        "copy_bandwidth_GBps": bandwidth / 1e9,
        "availability": why,
    }
    if aesara_fn is not None:
        import aesara

        meta["aesara"] = aesara.__version__
    print(f"bench_gpu: {meta}", flush=True)
    cases = [(n, b, k, "int32") for n, b, k in (SMALL_CASES if args.small else CASES)]
    seed = (20_000, 300, "uniform", "int64") if args.small else SEED
    rows = []
    for case in cases + [seed]:
        row = bench_case(cp, torch, *case, args.repeat, bandwidth, aesara_fn)
        row["seed"] = case == seed
        rows.append(row)
        print(json.dumps(row), flush=True)
        cp.get_default_memory_pool().free_all_blocks()
    contention = contention_rows(cp, torch, args.small, args.repeat, device_ms, torch_ms)
    loops = [] if args.standalone else loop_rows(cp, torch, args.small, args.repeat, bandwidth)
    host = [] if args.standalone else host_rows(cp, args.small, args.repeat)
    deterministic = [] if args.standalone else det_rows(cp, args.small, args.repeat)
    scatter = [] if args.standalone else scatter_rows(cp, args.small, args.repeat)
    for row in contention + loops + host + deterministic + scatter:
        print(json.dumps(row), flush=True)
    result = {"meta": meta, "rows": rows, "contention": contention, "loops": loops, "host": host,
              "deterministic": deterministic, "scatter": scatter}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(render([result]))
    return 0


def sanitize(args):
    """Small runs for compute-sanitizer: every kernel family, checked (:mod:`gpu_sanitize`)."""
    found = _cupy()
    if found is None:
        return 2
    from gpu_sanitize import run

    return 1 if run(found[0]) else 0


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------


def _fmt(v, unit=""):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}{unit}"
    if v >= 1:
        return f"{v:.2f}{unit}"
    return f"{v:.4f}{unit}"


def render(runs):
    """One Markdown table from the JSON of one or more runs (see the module docstring)."""
    merged, metas = {}, []
    for data in runs:
        metas.append(data["meta"])
        prefer = data["meta"]["stack"] == "standalone"
        for row in data["rows"]:
            key = (row["N"], row["bins"], row["kind"], row["dtype"])
            have = merged.setdefault(key, {})
            for k, v in row.items():
                if v is None and k in have:
                    continue
                if k not in have or (prefer and k in ("kernel_ms", "call_ms", "cupy_ms", "torch_ms")):
                    have[k] = v
                elif k == "correct":
                    have[k] = have[k] and v
    lines = []
    for m in metas:
        lines.append(
            f"- {m['stack']} stack: {m['gpu']}, Python {m['python']}, NumPy {m['numpy']}, "
            f"CuPy {m['cupy']}, PyTorch {m['torch'] or 'absent'}"
            + (f", Aesara {m['aesara']}" if m.get("aesara") else "")
            + f"; device copy bandwidth {m['copy_bandwidth_GBps']:.0f} GB/s (read + write)"
        )
    lines += [
        "",
        "| N | bins | data | x | GpuBincount kernel ms | GpuBincount call ms | Aesara e2e ms "
        "| cupy.bincount ms | torch.bincount ms | numpy.bincount ms | floor ms | kernel/floor "
        "| cupy/call | torch/call | correct |",
        "|" + "---|" * 15,
    ]
    verdicts = []
    for key in sorted(merged, key=lambda k: (k[3] != "int32", k[0], k[1], k[2])):
        r = merged[key]
        call = r.get("call_ms")
        # Kernel alone where it was timed, else the whole call.
        basis = r.get("kernel_ms") or call
        ratio = basis / r["floor_ms"] if basis and r.get("floor_ms") else None
        vs_cupy = r["cupy_ms"] / call if call and r.get("cupy_ms") else None
        vs_torch = r["torch_ms"] / call if call and r.get("torch_ms") else None
        label = size_text(key[0]) + (" (seed)" if r.get("seed") else "")
        lines.append(
            f"| {label} | {size_text(key[1])} | {key[2]} | {key[3]} | {_fmt(r.get('kernel_ms'))} | {_fmt(call)} "
            f"| {_fmt(r.get('aesara_ms'))} | {_fmt(r.get('cupy_ms'))} | {_fmt(r.get('torch_ms'))} "
            f"| {_fmt(r.get('numpy_ms'))} | {_fmt(r.get('floor_ms'))} | {_fmt(ratio, 'x')} "
            f"| {_fmt(vs_cupy, 'x')} | {_fmt(vs_torch, 'x')} | {'yes' if r.get('correct') else 'NO'} |"
        )
        if r.get("seed") and r.get("aesara_ms") is not None:
            verdicts.append(("seed case end to end <= 0.050 ms", r["aesara_ms"] <= 0.050, r["aesara_ms"]))
        if key == (10**8, 1000, "uniform", "int32") and ratio is not None:
            what = "kernel" if r.get("kernel_ms") else "whole call (kernel alone not timed)"
            verdicts.append((f"{what} at N=1e8 int32, 1000 bins within 1.3x of the floor", ratio <= 1.3, ratio))
        if not r.get("seed"):
            for name, v in (("cupy.bincount", vs_cupy), ("torch.bincount", vs_torch)):
                if v is not None:
                    verdicts.append((f"faster than {name} at {label} {key[2]}", v > 1, v))
    lines.append("")
    for what, passed, value in verdicts:
        lines.append(f"- {'PASS' if passed else 'FAIL'}: {what} ({value:.3g})")
    contention = [row for data in runs for row in data.get("contention", [])]
    if contention:
        lines += ["", "Contention (bench_gpu_contention.py):", "", contention_table(contention, _fmt)]
    loops = [row for data in runs for row in data.get("loops", [])]
    if loops:
        lines += ["", "The seed's loop and the embedding SGD step (bench_gpu_loop.py):", "", loop_table(loops)]
    host = [row for data in runs for row in data.get("host", [])]
    if host:
        lines += ["", "Host overhead per call (bench_gpu_host.py):", "", host_table(host)]
    det = [row for data in runs for row in data.get("deterministic", [])]
    if det:
        lines += ["", 'Deterministic float sums, config.deterministic="more" (bench_gpu_det.py):', "",
                  det_table(det, _fmt)]
    scatter = [row for data in runs for row in data.get("scatter", [])]
    if scatter:
        lines += ["", "Scatter forms on GPU data, against Aesara's graph (bench_gpu_scatter.py):", "",
                  scatter_table(scatter, _fmt)]
    return "\n".join(lines)


def table(args):
    runs = []
    for path in args.table:
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as exc:
            print(f"bench_gpu --table: skipping {path}: {exc}")
    if not runs:
        print("bench_gpu --table: no results to show")
        return 1
    text = render(runs)
    gpu = runs[0]["meta"]["gpu"]
    header = f"# GPU benchmark on {gpu}\n\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
    if "emulation" in gpu.lower():
        header += "**CPU emulation (tests/gpu_emu): a check of the script, not GPU figures.**\n\n"
    print(text)
    for out in filter(None, (args.out, args.results)):
        path = out.replace("{gpu}", gpu.replace(" ", "-"))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            f.write(header + text + "\n")
        print(f"wrote {path}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--standalone", action="store_true", help="kernel layer only, no Aesara")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--small", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--sanitize", action="store_true", help="small correctness run for compute-sanitizer")
    parser.add_argument("--table", nargs="+", help="merge these JSON results into one table")
    parser.add_argument("--out", help="with --table: write the table here")
    parser.add_argument("--results", help="with --table: also here ({gpu} becomes the GPU's name)")
    args = parser.parse_args(argv)
    if args.table:
        return table(args)
    if args.sanitize:
        return sanitize(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
