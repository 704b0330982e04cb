"""Helpers shared by the GPU tests.

The tests in this folder run on a real GPU, or on the CPU emulation of
``tests/gpu_emu`` (``tests/test_gpu_emulated.py`` runs them so, with
``AESARA_BINCOUNT_EMULATED_GPU=1``), where sizes are scaled down and the
fake driver and fake CuPy count synchronizations.  Without either they are
skipped.  Nothing here imports Aesara: the kernel tests also run under
NumPy 2 + CuPy 14, where Aesara cannot be imported.
"""
import ctypes
import os
import threading
import time

import numpy as np

from aesara_bincount_core.cuda import kernels

#: True when the GPU is the CPU emulation (tests/gpu_emu).
EMULATED = os.environ.get("AESARA_BINCOUNT_EMULATED_GPU") == "1"

AVAILABLE, WHY = kernels.availability()

INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
OUT_DTYPES = INDEX_DTYPES + ("float32", "float64")


def size(real: int, emulated: int) -> int:
    """A problem size: ``real`` on a GPU, ``emulated`` on the CPU emulation."""
    return emulated if EMULATED else real


def sticky(clear: bool = False) -> int:
    """The fake driver's sticky error, cleared when ``clear`` (0 on a real
    GPU, where a fault would end the run): CUDA_ERROR_MISALIGNED_ADDRESS
    (716) after a kernel's misaligned access."""
    if not EMULATED:
        return 0
    return ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"]).fake_cuda_sticky(int(clear))


def cupy():
    import cupy as cp

    return cp


def reference(x, weights=None, n=0, mode="bincount", out_dtype=None):
    """The NumPy reference (``aesara_bincount_core.semantics.reference_bincount``)."""
    from aesara_bincount_core.semantics import reference_bincount

    return reference_bincount(x, n, weights, mode=mode, out_dtype=out_dtype)


def to_host(a):
    return cupy().asnumpy(a) if not isinstance(a, np.ndarray) else a


def assert_matches(got, expected, weights=None, x=None):
    """Same dtype and shape; integers exactly; floats to a tolerance scaled
    by the sum of |weights| per bin (atomics add in another order), with no
    floor: a bin whose increments are all subnormal must keep them, and an
    empty bin must be exactly zero.  Without per-bin weights (counts, or a
    broadcast increment), the scale is the expected value itself."""
    got = to_host(got)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if expected.dtype.kind != "f":
        bad = np.flatnonzero(got != expected)
        assert bad.size == 0, f"{bad.size} bins differ, first {bad[:5]}: {got[bad[:5]]} != {expected[bad[:5]]}"
        return
    if weights is not None and x is not None and np.asarray(weights).ndim == 1 and len(x) and len(weights) == len(x):
        scale = np.zeros(expected.shape, dtype=np.float64)
        idx = np.asarray(x).astype(np.int64)
        idx[idx < 0] += expected.shape[0]
        np.add.at(scale, idx, np.abs(np.asarray(weights, dtype=np.float64)))
    else:
        scale = np.abs(expected.astype(np.float64))
    eps = np.finfo(expected.dtype).eps
    err = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    ok = (err <= 64 * eps * scale) | (np.isnan(got) & np.isnan(expected))
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, f"{bad.size} bins differ, first {bad[:5]}: {got[bad[:5]]} != {expected[bad[:5]]}"


def data(kind: str, n: int, bins: int, dtype: str, seed: int = 0) -> np.ndarray:
    """Test data: "uniform" in [0, bins), "equal" (all bins // 2), "skewed"
    (Zipf-like, most values small), "sorted" (uniform, then sorted)."""
    rng = np.random.default_rng(seed)
    top = min(bins, np.iinfo(dtype).max + 1)
    if kind == "equal":
        x = np.full(n, top // 2)
    elif kind == "skewed":
        x = np.minimum(rng.zipf(1.3, n) - 1, top - 1)
    else:
        x = rng.integers(0, top, n)
        if kind == "sorted":
            x.sort()
    return x.astype(dtype)


def run_while_waiting(fake, calls, limit_s: float = 25.0):
    """Run each of ``calls`` in a thread of its own with the emulation's stream
    synchronizations held until all of them wait at once (or ``limit_s``
    passed), then let them go.  Returns ``(results, errors, waiting)``:
    results by index, the exceptions raised, how many waited at once."""
    results, errors = {}, []

    def work(i):
        try:
            results[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001 - reported to the caller
            errors.append(exc)

    fake.fake_cuda_hold_syncs(1)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(calls))]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + limit_s
        while fake.fake_cuda_syncs_waiting() < len(calls) and time.monotonic() < deadline:
            time.sleep(0.01)
        waiting = fake.fake_cuda_syncs_waiting()
    finally:
        fake.fake_cuda_hold_syncs(0)
        for t in threads:
            t.join(30)
    return results, errors, waiting
