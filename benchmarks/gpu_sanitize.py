"""The workload of compute-sanitizer in the GPU check: every kernel family, small, checked.

``benchmarks/bench_gpu.py --sanitize`` runs :func:`run`; ``scripts/gpu_check.sh``
runs that plainly (the ``sanitizer-workload`` stage, which also warms Aesara's
and NVRTC's caches), then under compute-sanitizer's memcheck, racecheck and
synccheck, in its ``sanitize`` call (the Aesara stack, after the ``aesara``
call unpacked it).  Each case is compared with NumPy; a mismatch or a
missing error fails the run (exit 1).

Two parts:

- the kernel layer (:mod:`aesara_bincount_core.cuda.kernels`, no Aesara):
  the default bincount (counts, weights, a second pass, strided x, the
  scatter-add form, hot bins) and the scatter-add of rows (wide rows, narrow
  int8 and int16 rows, float32 hot rows, one column), and their errors;
- through ``aesara.function``, where Aesara imports (:func:`aesara_cases`):
  the deterministic bincount (the seed's window pass and finish with the
  result to the host, two windows, the bucket path with and without its
  SCAN stage, float32 computed weights), the deterministic rows (a hot row,
  two column tiles, the bucket pre-pass with a hot bucket cut into slices,
  the streamed narrow rows), the default fused kernel, ``GpuElemwise``
  (vector and strided paths), ``GpuScatterSet`` with duplicates, the
  multi-index gather and scatter-add (``LinearIndex`` and the rows check),
  and the GPU table's CuPy and cuBLAS work (the MLP and k-means steps of
  :mod:`gpu_programs`, small).

Sizes are small on purpose (racecheck slows kernels a hundredfold) and the
same on the CPU emulation (the dry run): about 20,000 values a case, 40,000
for the paths that start there.  Every array is a plain ``cudaMalloc``
(no CuPy pool), so that memcheck sees each buffer's bounds.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the sibling module gpu_programs.py, also when loaded by path
    sys.path.insert(0, HERE)

__all__ = ["run", "kernel_layer_cases", "aesara_cases"]


def kernel_layer_cases(cp, rng):
    """``[(name, got, want)]`` of the kernel layer, and the errors checked."""
    from aesara_bincount_core.cuda import kernels
    from aesara_bincount_core.semantics import reference_scatter_add

    x = rng.integers(0, 700, 50_001).astype("int32")
    w = rng.random(x.size)
    cases = [
        ("counts", kernels.bincount_cupy(cp.asarray(x)), np.bincount(x)),
        ("weights", kernels.bincount_cupy(cp.asarray(x), cp.asarray(w)), np.bincount(x, w)),
        ("int8 to float32", kernels.bincount_cupy(cp.asarray(x.astype("int8") % 100), out_dtype="float32"),
         np.bincount(x.astype("int8") % 100).astype("float32")),
        ("second pass", kernels.bincount_cupy(cp.asarray(np.append(x, 70_000))), np.bincount(np.append(x, 70_000))),
        ("strided x", kernels.bincount_cupy(cp.asarray(x[::3].astype("int64"))), np.bincount(x[::3])),
        ("scatter form", kernels.bincount_cupy(cp.asarray(x - 350), None, 350, "scatter"),
         np.bincount(np.where(x - 350 < 0, x, x - 350), minlength=350)),
        ("one hot bin", kernels.bincount_cupy(cp.asarray(np.full(100_000, 7, "uint8"))),
         np.bincount(np.full(100_000, 7)).astype("uint8")),
    ]  # fmt: skip
    # The scatter-add of rows: wide rows (a warp per row, 2 column tiles), hot
    # narrow int8 rows (the compare-and-swap on a 32-bit word), in place.
    idx = rng.integers(-300, 300, 20_000)
    g = rng.random((20_000, 150))
    # 24 bytes: see the note on 8- and 16-bit outputs in cuda/scatter_add_kernels.cu
    base8 = rng.integers(-9, 9, (8, 3)).astype("int8")
    g8 = rng.integers(-9, 9, (30_001, 3)).astype("int8")
    idx8 = rng.integers(0, 2, 30_001).astype("uint8")
    # float32 rows with a hot row (the compare-and-swap), D = 1 with int16
    # indices, int16 rows (the 16-bit half of a word).
    hot = np.where(rng.random(20_000) < 0.3, 0, rng.integers(0, 500, 20_000))
    g32 = rng.random((20_000, 40)).astype("float32")
    g1 = rng.random((20_000, 1)).astype("float32")
    base16 = rng.integers(-9, 9, (9, 5)).astype("int16")
    g16 = rng.integers(-9, 9, (7_001, 5)).astype("int16")
    idx16 = rng.integers(-9, 9, 7_001).astype("int16")
    cases += [
        ("rows, wide", kernels.scatter_add_cupy(cp.zeros((300, 150)), cp.asarray(g), cp.asarray(idx)),
         reference_scatter_add(np.zeros((300, 150)), g, idx)),
        ("rows, int8 in place", kernels.scatter_add_cupy(cp.asarray(base8), cp.asarray(g8), cp.asarray(idx8), inplace=True),
         reference_scatter_add(base8, g8, idx8)),
        ("rows, float32 hot", kernels.scatter_add_cupy(cp.zeros((500, 40), "float32"), cp.asarray(g32), cp.asarray(hot)),
         reference_scatter_add(np.zeros((500, 40), "float32"), g32, hot)),
        ("rows, one column", kernels.scatter_add_cupy(cp.zeros((500, 1), "float32"), cp.asarray(g1),
                                                      cp.asarray(hot.astype("int16"))),
         reference_scatter_add(np.zeros((500, 1), "float32"), g1, hot)),
        ("rows, int16 in place", kernels.scatter_add_cupy(cp.asarray(base16), cp.asarray(g16), cp.asarray(idx16),
                                                          inplace=True),
         reference_scatter_add(base16, g16, idx16)),
    ]  # fmt: skip
    errors = [
        (ValueError, lambda: kernels.bincount_cupy(cp.asarray(np.array([1, -2, 3], dtype="int16")))),
        (IndexError, lambda: kernels.scatter_add_cupy(cp.asarray(base8), cp.asarray(g8[:3]),
                                                      cp.asarray(np.array([0, 8, 1])))),
    ]  # fmt: skip
    return cases, errors


def _hot(rng, n, top):
    """Indices in [0, top), a half on 0 and a quarter on 1, a half of all given negative."""
    idx = rng.integers(0, top, n)
    u = rng.random(n)
    idx[u < 0.5] = 0
    idx[(u >= 0.5) & (u < 0.75)] = 1
    return idx - (rng.random(n) < 0.5) * top


def reach(f, *names):
    """``f``, after checking that its graph holds an Op whose text names each
    of ``names`` (so that the case still reaches its kernel family)."""
    ops = [str(node.op) for node in f.maker.fgraph.toposort()]
    for name in names:
        if not any(name in op for op in ops):
            raise AssertionError(f"the sanitizer case no longer reaches {name}: {ops}")
    return f


def _add_at(base, idx, inc):
    out = base.copy()
    np.add.at(out, idx, inc)
    return out


def _det_cases(cp, rng, gpu, at, bincount, compile_more):
    """The deterministic kernels, each family once (see the module notes)."""
    cases = []
    n = 20_000
    x = rng.integers(0, 1000, n)
    v = rng.uniform(-2.0, 2.0, n)
    gx, gv = gpu.shared(x), gpu.shared(v)
    t = at.dscalar("t")
    seed = reach(compile_more([t], bincount(gx, weights=at.exp(-t * gv))), "GpuFusedBincount", "to_host=True")
    cases.append(("det seed, window pass to the host", seed(0.5), np.bincount(x, np.exp(-0.5 * v))))
    x3 = rng.integers(0, 3000, n)
    f = reach(compile_more([], gpu.gpu_from_host(bincount(gpu.shared(x3), weights=gv))), "GpuBincount")
    cases.append(("det two windows, 3000 bins", f(), np.bincount(x3, v)))
    # the bucket path: 40 windows of float64 (its SCAN stage), 6 of float32 (no SCAN), computed weights
    xb = rng.integers(0, 40_000, n)
    xb[-1] = 39_999
    f = reach(compile_more([], bincount(gpu.shared(xb), weights=gv)), "GpuBincount")
    cases.append(("det bucket, 40 windows", f(), np.bincount(xb, v)))
    xf = rng.integers(0, 12_000, n)
    v32 = v.astype("float32")
    t32 = at.fscalar("t32")
    f = reach(compile_more([t32], bincount(gpu.shared(xf), weights=at.exp(-t32 * gpu.shared(v32)))),
              "GpuFusedBincount")
    got = f(np.float32(0.5))
    cases.append(("det bucket, float32 computed weights", got,
                  np.bincount(xf, np.exp(-np.float32(0.5) * v32).astype("float64"), 12_000).astype("float32")))
    # the rows: a hot row (float32), two column tiles (160 float64 columns)
    for rows, width, n_idx, dtype, what in (
        (200, 40, 3_000, "float32", "det rows, hot row"),
        (200, 160, 3_000, "float64", "det rows, two column tiles"),
        (3_000, 6, 40_000, "float64", "det rows, bucket pre-pass, sliced hot bucket"),
        (3_000, 8, 40_000, "float32", "det rows, streamed narrow rows"),
    ):
        idx = _hot(rng, n_idx, rows)
        inc = rng.standard_normal((n_idx, width)).astype(dtype)
        base = rng.standard_normal((rows, width)).astype(dtype)
        f = reach(compile_more([], at.inc_subtensor(gpu.shared(base)[gpu.shared(idx)], gpu.shared(inc))),
                  "GpuScatterAdd")
        cases.append((what, f(), _add_at(base, idx, inc)))
    return cases


def aesara_cases(cp, rng):
    """``[(name, got, want)]`` through ``aesara.function``, and the errors checked."""
    import aesara
    import aesara.tensor as at
    from aesara.tensor.extra_ops import bincount

    import aesara_bincount  # noqa: F401 (the rewrites)
    from aesara_bincount import gpu

    def compile_more(ins, out):
        with aesara.config.change_flags(deterministic="more"):
            return reach(aesara.function(ins, out), "deterministic='more'")

    cases = _det_cases(cp, rng, gpu, at, bincount, compile_more)
    n = 20_000
    x, v = rng.integers(0, 1000, n), rng.uniform(-2.0, 2.0, n)
    gx, gv = gpu.shared(x), gpu.shared(v)
    t = at.dscalar("t")
    fused = reach(aesara.function([t], bincount(gx, weights=at.exp(-t * gv))), "GpuFusedBincount")
    cases.append(("default fused seed", fused(0.5), np.bincount(x, np.exp(-0.5 * v))))
    ew = reach(aesara.function([t], [gpu.gpu_from_host(t * gv + 1.0), gpu.gpu_from_host(at.exp(t * gv[::-3]))]),
               "GpuElemwise")
    got = ew(0.5)
    cases += [("GpuElemwise, vector path", got[0], 0.5 * v + 1.0),
              ("GpuElemwise, strided", got[1], np.exp(0.5 * v[::-3]))]  # fmt: skip
    # GpuScatterSet with duplicates (the last one wins), in place
    W0 = rng.standard_normal((300, 5))
    idx = rng.integers(-300, 300, 4_000)
    vals = rng.standard_normal((4_000, 5))
    W = gpu.shared(W0.copy())
    reach(aesara.function([], [], updates={W: at.set_subtensor(W[gpu.shared(idx)], gpu.shared(vals))}),
          "GpuScatterSet")()
    want = W0.copy()
    want[idx] = vals
    cases.append(("GpuScatterSet, duplicates", W.get_value(), want))
    # the multi-index gather and scatter-add (LinearIndex, the rows check kernel)
    M0 = rng.standard_normal((40, 30, 2))
    M = gpu.shared(M0)
    r, c = at.lvectors("r", "c")
    rv, cv = rng.integers(-40, 40, 5_000), rng.integers(-30, 30, 5_000)
    gather = reach(aesara.function([r, c], gpu.gpu_from_host(M[r, c] * 2.0)), "LinearIndex", "GpuAdvancedSubtensor1")
    cases.append(("multi-index gather", gather(rv, cv), M0[rv, cv] * 2.0))
    z = gpu.shared(np.zeros((40, 30)))
    g = at.dvector("g")
    gv2 = rng.standard_normal(5_000)
    reach(aesara.function([r, c, g], [], updates={z: at.inc_subtensor(z[r, c], g)}),
          "LinearIndex", "GpuScatterAdd")(rv, cv, gv2)
    cases.append(("multi-index scatter-add", z.get_value(), _add_at(np.zeros((40, 30)), (rv, cv), gv2)))
    cases += _table_cases(cp, gpu, aesara)
    errors = [(IndexError, lambda: gather(np.array([0, 40]), np.array([0, 1])))]
    return cases, errors


def _table_cases(cp, gpu, aesara):
    """The two programs of :mod:`gpu_programs` at their small sizes (the GPU
    table: cuBLAS products, CuPy's softmax, cross-entropy, argmin and argmax,
    the bincount and the scatter-adds of their gradients), one step each on
    GPU shared variables, against the same step on the host's."""
    from gpu_programs import PROGRAMS

    cases = []
    for name, (build, sizes, args) in PROGRAMS.items():
        results = []
        for shared in (gpu.shared, aesara.shared):
            ins, outs, updates, params = build(shared, sizes["small"])
            got = aesara.function(ins, outs, updates=updates)(*args)
            results.append([_host(cp, o) for o in got] + [_host(cp, p.get_value()) for p in params])
        cases += [(f"table: {name}, result {i}", g, c) for i, (g, c) in enumerate(zip(*results))]
    return cases


def _host(cp, a):
    return np.asarray(a) if isinstance(a, (np.ndarray, np.generic, float, int)) else cp.asnumpy(a)


def run(cp) -> int:
    """Run both parts (the Aesara one where Aesara imports), print a line a
    case; the number of wrong cases and missing errors."""
    # Plain cudaMalloc for every array, so that memcheck sees each buffer's bounds
    # (a pool hands out pieces of bigger blocks).
    cp.cuda.set_allocator(None)
    rng = np.random.default_rng(0)
    cases, errors = kernel_layer_cases(cp, rng)
    try:
        import aesara  # noqa: F401
    except ImportError as exc:
        print(f"sanitize: the cases through aesara.function skipped (no Aesara: {exc})")
    else:
        more, more_errors = aesara_cases(cp, rng)
        cases, errors = cases + more, errors + more_errors
    bad = 0
    for name, got, want in cases:
        got = _host(cp, got)
        same = got.shape == np.shape(want) and np.allclose(got, want, rtol=1e-4, atol=1e-6)
        bad += not same
        print(f"sanitize case {name}: {'ok' if same else 'MISMATCH'}")
    for kind, call in errors:
        try:
            call()
            bad += 1
            print(f"sanitize error case: MISSING {kind.__name__}")
        except kind as exc:
            print(f"sanitize error case: ok ({kind.__name__}: {str(exc).splitlines()[0][:100]})")
    cp.cuda.get_current_stream().synchronize()
    return bad
