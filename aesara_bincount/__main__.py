"""The main job: ``python -m aesara_bincount``.

Builds the seed case (1,000,000 random int64 values in [0, 1000) in an
``aesara.shared`` variable), compiles ``aesara.function([], bincount(x))``,
checks it against :func:`numpy.bincount`, and times side by side, in one
process: numpy, Aesara's own graph (``excluding("bincount")``), and
:class:`~aesara_bincount.Bincount` with OpenMP off and on; then the weighted
variant.  On a machine with a usable GPU (``aesara_bincount.gpu.is_available()``)
it adds the GPU rows (:func:`gpu_rows`: GpuBincount through Aesara and alone,
``cupy.bincount``, ``torch.bincount``); a GPU said usable that cannot run the
seed case makes the job fail.  The GPU rows live here, in the main job, and
not in ``aesara_bincount.gpu``, which holds only what a user of the GPU Op
needs; ``benchmarks/bench_gpu.py`` has the GPU benchmark grid.
"""
import argparse
import os
import platform
import sys
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from aesara_bincount._timing import interleaved_medians


def _rows(
    label: str, x_np: np.ndarray, w_np: Optional[np.ndarray], repeat: int, with_gpu: bool
) -> Tuple[List[Tuple[str, float]], bool]:
    import aesara
    from aesara.compile.mode import get_default_mode
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import Bincount

    x = aesara.shared(x_np, name="x")
    args = {}
    if w_np is not None:
        args["weights"] = aesara.shared(w_np, name="w")
    expected = np.bincount(x_np, weights=w_np)
    mode = get_default_mode()

    fns: Dict[str, Callable[[], object]] = {
        "numpy.bincount": (lambda: np.bincount(x_np, weights=w_np)),
    }
    ok = True
    aesara_graph = aesara.function([], bincount(x, **args), mode=mode.excluding("bincount"))
    fns["Aesara graph (excluding bincount)"] = aesara_graph
    for openmp in (False, True):
        with aesara.config.change_flags(openmp=openmp):
            f = aesara.function([], bincount(x, **args), mode=mode)
        ops = [type(node.op).__name__ for node in f.maker.fgraph.toposort()]
        if not any(isinstance(node.op, Bincount) for node in f.maker.fgraph.toposort()):
            print(f"  rewrite did not fire, compiled graph: {ops}")
            ok = False
        result = f()
        same = np.allclose(result, expected) if w_np is not None else np.array_equal(result, expected)
        if not same:
            print(f"  MISMATCH against numpy.bincount (openmp={openmp})")
            ok = False
        threads = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
        name = "Bincount, openmp on" + f" ({threads} threads)" if openmp else "Bincount, openmp off"
        fns[name] = f
    if with_gpu:
        try:
            fns.update(gpu_rows(x_np, w_np))
        except Exception as exc:
            # A GPU said usable that cannot run the seed case is a failure.
            print(f"  GPU rows FAILED: {type(exc).__name__}: {exc}")
            ok = False
    times = interleaved_medians(fns, repeat=repeat)
    return list(times.items()), ok


def gpu_rows(x_np: np.ndarray, w_np: Optional[np.ndarray] = None) -> Dict[str, Callable[[], object]]:
    """The main job's GPU candidates, checked against :func:`numpy.bincount`.

    Parameters
    ----------
    x_np : numpy.ndarray, shape ``(N,)``, integer dtype
    w_np : numpy.ndarray, shape ``(N,)``, optional
        Weights.

    Returns
    -------
    dict of str to callable
        Zero-argument callables, each doing one complete bincount and waiting
        for the GPU (a stream synchronization): the Aesara function with
        ``GpuBincount`` (data in GPU shared variables, result back on the
        host), the kernel layer alone (``bincount_cupy``, result on the
        device), ``cupy.bincount``, and ``torch.bincount`` when PyTorch with
        CUDA is importable.

    Raises
    ------
    GpuUnavailableError
        No usable GPU (``aesara_bincount.gpu.is_available()`` is False;
        ``aesara_bincount.gpu.availability()`` says why).
    RuntimeError
        The GPU rewrite did not put ``GpuBincount`` in the graph, or a result
        differs from ``numpy.bincount``.
    """
    from aesara_bincount import gpu

    ok, why = gpu.availability()
    if not ok:
        raise gpu.GpuUnavailableError(why)
    import aesara
    import cupy
    from aesara.tensor.extra_ops import bincount

    x_gpu = cupy.asarray(x_np)
    w_gpu = None if w_np is None else cupy.asarray(w_np)
    gx = gpu.shared(x_gpu, borrow=True, name="x_gpu")
    kwargs = {} if w_np is None else {"weights": gpu.shared(w_gpu, borrow=True, name="w_gpu")}
    f = aesara.function([], bincount(gx, **kwargs))
    if not any(isinstance(n.op, gpu.GpuBincount) for n in f.maker.fgraph.toposort()):
        raise RuntimeError("the GPU rewrite did not fire")
    expected = np.bincount(x_np, weights=w_np)
    kernel_out = cupy.asnumpy(gpu.bincount_cupy(x_gpu, w_gpu))
    if not np.allclose(f(), expected) or not np.allclose(kernel_out, expected):
        raise RuntimeError("GpuBincount differs from numpy.bincount")
    sync = cupy.cuda.get_current_stream().synchronize

    def run_kernel():
        out = gpu.bincount_cupy(x_gpu, w_gpu)
        sync()
        return out

    def run_cupy():
        out = cupy.bincount(x_gpu, weights=w_gpu)
        sync()
        return out

    rows: Dict[str, Callable[[], object]] = {
        "GpuBincount, aesara.function (host out)": f,
        "GpuBincount kernel layer (device out)": run_kernel,
        "cupy.bincount (device out)": run_cupy,
    }
    torch_row = _torch_row(x_gpu, w_gpu)
    if torch_row is not None:
        rows["torch.bincount (device out)"] = torch_row
    return rows


def _torch_row(x_gpu, w_gpu) -> Optional[Callable[[], object]]:
    """``torch.bincount`` on the same device arrays, or None without PyTorch and CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    xt = torch.as_tensor(x_gpu, device="cuda")
    wt = None if w_gpu is None else torch.as_tensor(w_gpu, device="cuda")

    def run_torch():
        out = torch.bincount(xt, weights=wt)
        torch.cuda.synchronize()
        return out

    return run_torch


def _at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an int no smaller than ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is less than {low}")
        return value

    return parse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aesara_bincount",
        description="Run the seed case: bincount of 1e6 int64 values in [0, 1000).",
    )
    parser.add_argument("-n", "--size", type=_at_least(1), default=1_000_000, help="elements of x (at least 1)")
    parser.add_argument(
        "--bins", type=_at_least(1), default=1000, help="values are drawn from [0, bins) (at least 1)"
    )
    parser.add_argument(
        "--repeat", type=_at_least(0), default=50,
        help="timed calls per candidate; 0 picks the count from a time budget",
    )
    parser.add_argument(
        "--gpu-report", metavar="FILE.py",
        help="run FILE.py and print, for each Aesara function it compiles, the transfers between "
        "host and GPU inside it and the Op that caused each (aesara_bincount.gpu.report)",
    )
    args = parser.parse_args(argv)
    if args.gpu_report:
        from aesara_bincount.gpu.transfer_report import report_file

        report_file(args.gpu_report)
        return 0

    import aesara

    import aesara_bincount

    gpu_ok = False
    try:
        from aesara_bincount import gpu

        gpu_ok, why = gpu.availability()  # type: ignore[attr-defined]
    except Exception as exc:
        why = str(exc)
    rng = np.random.default_rng(0)
    x_np = rng.integers(0, args.bins, size=args.size, dtype=np.int64)
    w_np = rng.random(args.size)
    print(
        f"aesara_bincount {aesara_bincount.__version__}, Aesara {aesara.__version__}, "
        f"numpy {np.__version__}, Python {platform.python_version()}"
    )
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU cores; GPU: "
          + ("yes" if gpu_ok else f"no ({why})"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    busy = load > 0.5
    print(
        f"load average: {load:.2f}"
        + (
            " (other processes are using the cores: the OpenMP rows share them;"
            " see docs/performance.rst, Busy cores)"
            if busy
            else ""
        )
    )
    print(f"seed case: x = {args.size:,} int64 values in [0, {args.bins}) in aesara.shared\n")

    all_ok = True
    for label, w in (("counts: bincount(x)", None), ("weighted: bincount(x, weights=w), w float64", w_np)):
        rows, ok = _rows(label, x_np, w, args.repeat, gpu_ok)
        all_ok &= ok
        base = dict(rows)["numpy.bincount"]
        print(label)
        print(f"  {'implementation':<40} {'median ms':>10} {'vs numpy':>9}")
        for name, ms in rows:
            print(f"  {name:<40} {ms:>10.3f} {base / ms:>8.2f}x")
        print()
    print("result: " + ("OK, every Bincount result equals numpy.bincount" if all_ok else "FAILED"))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
