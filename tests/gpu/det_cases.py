"""The three float sums of issue 31, for the tests of ``deterministic="more"``.

Each case is a compiled ``aesara.function`` on GPU shared variables whose
float result depends on the order of its additions: weights and increments
spread over 50 orders of magnitude, with hot bins and a hot row, so that two
orders of summation give different bits.

- ``bincount``: a float64-weighted bincount (``GpuBincount``);
- ``seed``: the seed's loop ``bincount(gx, weights=exp(-theta * gv))``
  (``GpuFusedBincount``);
- ``rows``: a float32 scatter-add of rows with a hot row
  (``GpuScatterAdd``);
- ``many``: a float64-weighted bincount into ``MANY_BINS`` bins, past the
  window passes (the bucket path of ``cuda/bincount_det_bucket.cuh``), with
  a hot window, hot bins and empty windows;
- ``seed_many``: the seed's loop in float32 (``GpuFusedBincount``) into as
  many bins;
- ``rows_hot``: a float64 scatter-add onto a base of rows wider than one
  column tile (160), with two hot rows, half of all indices given negative.
- ``rows_many``: a float64 scatter-add onto a base of ``MANY_N`` indices
  (hot rows, half given negative), past ``BC_CUDA_ROWS_DET_SORT_MIN``: the
  bucket pre-pass of ``cuda/scatter_add_det_bucket.cuh``.

``MANY_BINS`` is 12,000 (12 windows of float64, 6 of float32), or the
environment's ``DET_CASES_MANY_BINS``, read when the module is imported.

Run as a script (``python det_cases.py MODE CALLS``) it compiles the cases
under ``aesara.config.deterministic = MODE``, calls each CALLS times and
prints, as JSON, the SHA-256 of the bytes of every result: what
``test_cuda_deterministic.py`` compares across calls and across processes
(the emulation's thread count, FAKE_CUDA_RUNNERS, is fixed per process).
"""
import hashlib
import json
import os
import sys

import numpy as np

N = 12_000  # values: several blocks of the emulation
BINS = 300  # values of x, hot ones first
ROWS, WIDTH = 200, 40  # the scatter-add's output
HOT_N, HOT_WIDTH = 3000, 160  # rows_hot: indices, row width (two column tiles)
MANY_BINS = int(os.environ.get("DET_CASES_MANY_BINS", "12000"))
MANY_N, MANY_ROWS, MANY_WIDTH = 40_000, 3000, 6  # rows_many: indices, rows, row width


def many_indices(rng, n, top):
    """Indices in [0, top): half in [2048, 3072) (one hot window of float64
    bins, a third of those on 2100), the rest spread but none in
    [5120, 8192) (empty windows), and the last at top - 1."""
    idx = rng.integers(0, top, n)
    idx[(idx >= 5120) & (idx < 8192)] -= 4096
    hot = rng.random(n) < 0.5
    idx[hot] = rng.integers(2048, 3072, int(hot.sum()))
    idx[hot & (rng.random(n) < 0.33)] = 2100
    idx[-1] = top - 1
    return idx


def wide_values(rng, n, dtype):
    """Values of both signs whose magnitudes span 1e-25 ... 1e25."""
    return (rng.standard_normal(n) * 10.0 ** rng.uniform(-25, 25, n)).astype(dtype)


def hot_indices(rng, n, top):
    """Indices in [0, top), half of them on 0 and a quarter on 1 (hot)."""
    idx = rng.integers(0, top, n)
    u = rng.random(n)
    idx[u < 0.5] = 0
    idx[(u >= 0.5) & (u < 0.75)] = 1
    return idx


def inputs(seed=31):
    """The NumPy inputs of the three cases."""
    rng = np.random.default_rng(seed)
    return {
        "x": hot_indices(rng, N, BINS).astype("int64"),
        "w": wide_values(rng, N, "float64"),
        "v": rng.uniform(-55.0, 55.0, N),
        "idx": hot_indices(rng, N, ROWS).astype("int32"),
        "inc": wide_values(rng, N * WIDTH, "float32").reshape(N, WIDTH),
        "hot_idx": hot_indices(rng, HOT_N, ROWS) - (rng.random(HOT_N) < 0.5) * ROWS,
        "hot_inc": wide_values(rng, HOT_N * HOT_WIDTH, "float64").reshape(HOT_N, HOT_WIDTH),
        "hot_base": wide_values(rng, ROWS * HOT_WIDTH, "float64").reshape(ROWS, HOT_WIDTH),
        "xm": many_indices(rng, N, MANY_BINS).astype("int64"),
        "vm": rng.uniform(-40.0, 40.0, N).astype("float32"),
        "many_idx": hot_indices(rng, MANY_N, MANY_ROWS) - (rng.random(MANY_N) < 0.5) * MANY_ROWS,
        "many_inc": wide_values(rng, MANY_N * MANY_WIDTH, "float64").reshape(MANY_N, MANY_WIDTH),
        "many_base": wide_values(rng, MANY_ROWS * MANY_WIDTH, "float64").reshape(MANY_ROWS, MANY_WIDTH),
    }


def functions(deterministic, data=None):
    """``{case: aesara.function}`` compiled under ``config.deterministic``."""
    import aesara
    import aesara.tensor as at
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    data = inputs() if data is None else data
    gx, gw, gv = (gpu.shared(data[k]) for k in ("x", "w", "v"))
    gidx, ginc = gpu.shared(data["idx"]), gpu.shared(data["inc"])
    gxm, gvm = gpu.shared(data["xm"]), gpu.shared(data["vm"])
    theta = aesara.shared(np.float64(1.0))
    theta32 = aesara.shared(np.float32(1.0))
    table = at.zeros((ROWS, WIDTH), dtype="float32")
    hot = at.inc_subtensor(gpu.shared(data["hot_base"])[gpu.shared(data["hot_idx"])], gpu.shared(data["hot_inc"]))
    many = at.inc_subtensor(gpu.shared(data["many_base"])[gpu.shared(data["many_idx"])],
                            gpu.shared(data["many_inc"]))
    with aesara.config.change_flags(deterministic=deterministic):
        return {
            "bincount": aesara.function([], bincount(gx, weights=gw)),
            "seed": aesara.function([], bincount(gx, weights=at.exp(-theta * gv))),
            "rows": aesara.function([], at.inc_subtensor(table[gidx], ginc)),
            "rows_hot": aesara.function([], hot),
            "rows_many": aesara.function([], many),
            "many": aesara.function([], bincount(gxm, weights=gw)),
            "seed_many": aesara.function(
                [], bincount(gxm, weights=at.exp(-theta32 * gvm))),
        }


def digests(fns, calls):
    """``{case: [sha256 of the result's bytes, one per call]}`` (only the
    cases named in the environment's ``DET_CASES_ONLY``, comma-separated,
    when it is set)."""
    only = os.environ.get("DET_CASES_ONLY")
    return {
        name: [hashlib.sha256(np.ascontiguousarray(f()).tobytes()).hexdigest() for _ in range(calls)]
        for name, f in fns.items() if not only or name in only.split(",")
    }


if __name__ == "__main__":
    # The package of this checkout, not another one the environment installs.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    print(json.dumps(digests(functions(sys.argv[1]), int(sys.argv[2]))))
