"""Resident memory stays flat over 10,000 calls, on success and on error paths.

Every call gets *new* input arrays (copies), so a reference leaked on an
input would keep one array per call alive; the inputs, outputs and private
histograms are tens to hundreds of KiB, so any leak of them grows the
resident set by hundreds of MiB over the run.  Before each measurement the
garbage is collected and glibc returns its free pages (``malloc_trim``); the
bound allows 4 MiB for the allocator's remaining drift.  The number of live
Python memory blocks (``sys.getallocatedblocks``) must stay flat too, which
also catches small leaked objects such as an exception's message.

The GPU variant (skipped until the GPU path is present) also watches CuPy's
memory pool.
"""
import ctypes
import gc
import resource
import sys

import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount

from backends import BACKENDS, compile_shared

CALLS = 10_000
WARMUP = 300
RSS_BOUND = 4 << 20
BLOCKS_BOUND = 2000


def rss() -> int:
    """Resident set size of this process, in bytes."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def _settle() -> None:
    """Collect garbage and hand the allocator's free pages back to the system
    (``malloc_trim``), so that what stays resident is what is still in use."""
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _gpu_used(backend) -> int:
    if backend.name != "gpu":
        return 0
    import cupy  # pragma: no cover - GPU machines only

    return cupy.get_default_memory_pool().used_bytes()  # pragma: no cover


def _measure(backend, step, calls=CALLS):
    for i in range(WARMUP):
        step(i)
    _settle()
    r0, b0, g0 = rss(), sys.getallocatedblocks(), _gpu_used(backend)
    for i in range(calls):
        step(i)
    _settle()
    r1, b1, g1 = rss(), sys.getallocatedblocks(), _gpu_used(backend)
    print(f"RSS {r0 / 2**20:.1f} -> {r1 / 2**20:.1f} MiB, blocks {b0} -> {b1}, GPU {g0} -> {g1}")
    assert r1 - r0 < RSS_BOUND, f"resident memory grew by {(r1 - r0) / 2**20:.1f} MiB"
    assert b1 - b0 < BLOCKS_BOUND, f"{b1 - b0} more Python memory blocks"
    assert g1 - g0 < RSS_BOUND, f"GPU memory grew by {g1 - g0} bytes"


def _inputs():
    rng = np.random.default_rng(6)
    base_x = [
        rng.integers(0, 1000, size=40_000),  # private histograms, 2 threads with OpenMP
        rng.integers(0, 100_000, size=40_000),  # the direct path
        rng.integers(-2000, 2000, size=40_000),  # negative wraps (scatter form only)
    ]
    return rng, base_x


@pytest.mark.parametrize("backend", BACKENDS)
def test_calls_keep_memory_flat(backend, openmp):
    backend.skip_on_emulation(f"{CALLS + WARMUP} calls")
    rng, base_x = _inputs()
    x0 = np.abs(base_x[0])
    w_base = rng.standard_normal(2 * x0.size)
    fn, shared = compile_shared(
        backend,
        lambda x, w, y: [
            bincount(x),
            bincount(x, weights=w, minlength=10),
            at.inc_subtensor(at.zeros(2000)[y], w),
        ],
        {"x": x0, "w": w_base[::2], "y": base_x[2] % 2000},
        openmp,
    )

    def step(i):
        x = base_x[i % 2].copy()
        w = w_base.copy()
        backend.set(shared["x"], x[::-1])  # strided: the Op copies it
        backend.set(shared["w"], w, slice(None, None, 2))  # strided too
        backend.set(shared["y"], base_x[2].copy())
        outs = fn()
        assert outs[0].shape[0] == int(x.max()) + 1

    _measure(backend, step)


@pytest.mark.parametrize("backend", BACKENDS)
def test_failing_calls_keep_memory_flat(backend, openmp):
    backend.skip_on_emulation(f"{CALLS + WARMUP} calls")
    """10,000 calls that raise, through every C error path: a negative value
    and a refused index found after the threads counted most of x (private
    histograms allocated), an output too large for memory after the direct
    path was chosen, and weights of the wrong length; x and the weights are
    strided (the Op holds contiguous copies when it fails)."""
    rng, base_x = _inputs()
    x0 = base_x[0]
    w_base = rng.standard_normal(2 * x0.size)
    fn, shared = compile_shared(
        backend,
        lambda x, w: [bincount(x, weights=w), at.inc_subtensor(at.zeros(1000)[x], 1)],
        {"x": x0, "w": w_base[::2]},
        openmp,
    )

    def negative(x):
        x[-1] = -1
        return x, np.full(x.size, -1.0)

    def too_large(x):
        x[-1] = 2**45  # MemoryError in bincount, IndexError in the scatter-add
        return x, np.zeros(x.size)

    def index_out_of_range(x):
        x[-1] = 1000  # fine for bincount, IndexError in the scatter-add
        return x, np.zeros(x.size)

    def wrong_length(x):
        return x, np.zeros(x.size + 3)

    kinds = [
        (negative, ValueError),
        (too_large, (MemoryError, IndexError)),
        (index_out_of_range, IndexError),
        (wrong_length, ValueError),
    ]

    def step(i):
        make, exc = kinds[i % len(kinds)]
        x, w = make(x0.copy())
        backend.set(shared["x"], np.repeat(x, 2), slice(None, None, 2))
        backend.set(shared["w"], np.repeat(w, 2), slice(None, None, 2))
        with pytest.raises(exc):
            fn()

    _measure(backend, step)
    # ... and the function still works
    backend.set(shared["x"], x0)
    backend.set(shared["w"], w_base, slice(None, None, 2))
    np.testing.assert_allclose(backend.to_numpy(fn()[0]), np.bincount(x0, w_base[::2]), rtol=1e-12)
