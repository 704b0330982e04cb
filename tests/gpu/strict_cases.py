"""The cases of ``make gpu-strict`` (``tests/gpu_strict.py``): each kernel family once, through ``aesara.function``.

Each case compiles its function once, then runs two rounds: new data into
its GPU shared variables, a call, the result against NumPy.  A host that
reads a result before it waits for the stream (the emulation's asynchronous
mode runs the work only at the wait) then sees the bytes of the round
before, or the page-locked memory's fill, and the round fails.  Sizes are
tiny, a few blocks each: the race check costs about a hundred times the
normal emulation per memory access.  Inputs have hot bins and rows, so
that lanes of one warp add into one word (what a lost update needs).

The cases (``CASES``; the docs' development page says why these):

- ``hist``: ``GpuBincount`` counts and int64 weights, the results kept on
  the GPU (the privatized histogram with its 32-bit and 64-bit shared
  adders, and the finish kernel);
- ``hist_host``: float64 weights, the result to the host (the one-wait
  path: bins and status copied into page-locked staging);
- ``hist_det``, ``hist_det_bucket``: ``deterministic="more"``, the window
  pass and its finish, and the bucket path (more than 4,096 bins: count,
  scan, scatter, sum, finish);
- ``fused``, ``fused_det``: the seed's loop, ``bincount(x, weights=exp(-t*v))``
  (``GpuFusedBincount``'s generated kernels), default and deterministic;
- ``rows``, ``rows_det``: ``GpuScatterAdd`` of float32 rows (the check, add,
  wide and finish kernels) and the deterministic float64 scatter-add;
- ``scatter_set``: ``GpuScatterSet`` with duplicate rows (the last wins);
- ``elemwise``: ``GpuElemwise`` kernels, contiguous and strided;
- ``multi_index``: ``W[rows, cols]`` (the multi-index gather: the index
  check kernel, then CuPy's take), a row gather ``W[idx]`` (its rows
  checked by ``GpuIndexCheck``, read with the call's status) and the
  multi-index scatter-add ``inc_subtensor(Z[rows, cols], v)``;
- ``threads`` (asynchronous mode only): two threads at once, each calling
  a bincount to the host and one kept on the GPU (the compiled Ops'
  page-locked staging and status slots, shared by the functions of a module).
"""
import threading

import numpy as np

N = 3000  # values: a few blocks of the emulation
BINS = 300
MANY_BINS = 5000  # past the window passes (4,096 bins): the bucket path
ROWS, WIDTH = 64, 40
ROUNDS = (1, 2)  # the seeds of the two rounds

#: ``{name: (function(check), modes)}``, in the order they run.
CASES = {}


def case(*modes):
    def register(fn):
        CASES[fn.__name__] = (fn, modes or ("race", "async"))
        return fn

    return register


def hot(seed, n, top, dtype="int64"):
    """Indices in [0, top): a third on 1, a sixth on top - 1, the rest spread."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, top, n)
    u = rng.random(n)
    x[u < 1 / 3] = 1
    x[(u >= 1 / 3) & (u < 0.5)] = top - 1
    return x.astype(dtype)


def values(seed, n, dtype="float64"):
    return np.random.default_rng(seed + 100).standard_normal(n).astype(dtype)


def op_names(f):
    return {type(n.op).__name__ for n in f.maker.fgraph.toposort()}


def expect_ops(f, *names):
    missing = [n for n in names if n not in op_names(f)]
    assert not missing, f"the graph lacks {missing}: {sorted(op_names(f))}"


def _more():
    import aesara

    return aesara.config.change_flags(deterministic="more")


@case()
def hist(check):
    import aesara
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    gx, gw = gpu.shared(hot(0, N, BINS)), gpu.shared(hot(0, N, 1000))
    outs = [gpu.gpu_from_host(bincount(gx, minlength=BINS)), gpu.gpu_from_host(bincount(gx, weights=gw))]
    f = aesara.function([], outs)
    expect_ops(f, "GpuBincount")
    for seed in ROUNDS:
        x, w = hot(seed, N, BINS - seed), hot(seed, N, 1000) - 500
        gx.set_value(x)
        gw.set_value(w)
        counts, sums = f()
        check(counts, np.bincount(x, minlength=BINS))
        check(sums, np.bincount(x, weights=w).astype("int64"))


def _weighted(deterministic, bins, dtype):
    import aesara
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    gx, gw = gpu.shared(hot(0, N, bins)), gpu.shared(values(0, N, dtype))
    if deterministic:
        with _more():
            f = aesara.function([], bincount(gx, weights=gw))
    else:
        f = aesara.function([], bincount(gx, weights=gw))
    expect_ops(f, "GpuBincount")

    def rounds(check):
        for seed in ROUNDS:
            x, w = hot(seed, N, bins - seed), values(seed, N, dtype)
            gx.set_value(x)
            gw.set_value(w)
            check(f(), np.bincount(x, weights=w).astype(dtype), scale=np.bincount(x, np.abs(w)))

    return rounds


@case()
def hist_host(check):
    _weighted(False, BINS, "float64")(check)


@case()
def hist_det(check):
    _weighted(True, BINS, "float64")(check)


@case()
def hist_det_bucket(check):
    _weighted(True, MANY_BINS, "float32")(check)


def _fused(check, deterministic):
    import aesara
    import aesara.tensor as at
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    gx, gv = gpu.shared(hot(0, N, BINS)), gpu.shared(values(0, N))
    theta = aesara.shared(np.float64(0.5))
    out = bincount(gx, weights=at.exp(-theta * gv))
    if deterministic:
        with _more():
            f = aesara.function([], out)
    else:
        f = aesara.function([], out)
    expect_ops(f, "GpuFusedBincount")
    for seed in ROUNDS:
        x, v = hot(seed, N, BINS - seed), values(seed, N)
        gx.set_value(x)
        gv.set_value(v)
        w = np.exp(-0.5 * v)
        check(f(), np.bincount(x, weights=w), scale=np.bincount(x, w))


@case()
def fused(check):
    _fused(check, False)


@case()
def fused_det(check):
    _fused(check, True)


def _rows(check, deterministic, dtype):
    import aesara
    import aesara.tensor as at

    from aesara_bincount import gpu

    gbase = gpu.shared(np.zeros((ROWS, WIDTH), dtype))
    gidx, ginc = gpu.shared(hot(0, N // 4, ROWS)), gpu.shared(values(0, N // 4 * WIDTH, dtype).reshape(-1, WIDTH))
    out = at.inc_subtensor(gbase[gidx], ginc)
    if deterministic:
        with _more():
            f = aesara.function([], out)
    else:
        f = aesara.function([], out)
    expect_ops(f, "GpuScatterAdd")
    for seed in ROUNDS:
        base = values(seed + 7, ROWS * WIDTH, dtype).reshape(ROWS, WIDTH)
        idx = hot(seed, N // 4, ROWS) - (seed == 2) * ROWS  # negative rows in round two
        inc = values(seed, N // 4 * WIDTH, dtype).reshape(-1, WIDTH)
        gbase.set_value(base)
        gidx.set_value(idx)
        ginc.set_value(inc)
        want, scale = base.copy(), np.abs(base).astype("float64")
        np.add.at(want, idx, inc)
        np.add.at(scale, idx, np.abs(inc))
        check(f(), want, scale=scale)


@case()
def rows(check):
    _rows(check, False, "float32")


@case()
def rows_det(check):
    _rows(check, True, "float64")


@case()
def scatter_set(check):
    import aesara
    import aesara.tensor as at

    from aesara_bincount import gpu

    gbase = gpu.shared(np.zeros((ROWS, WIDTH), "float32"))
    gidx, gv = gpu.shared(hot(0, 200, ROWS)), gpu.shared(np.zeros((200, WIDTH), "float32"))
    f = aesara.function([], at.set_subtensor(gbase[gidx], gv))
    expect_ops(f, "GpuScatterSet")
    for seed in ROUNDS:
        base = values(seed + 7, ROWS * WIDTH, "float32").reshape(ROWS, WIDTH)
        idx, v = hot(seed, 200, ROWS), values(seed, 200 * WIDTH, "float32").reshape(200, WIDTH)
        gbase.set_value(base)
        gidx.set_value(idx)
        gv.set_value(v)
        want = base.copy()
        want[idx] = v  # the last of equal rows wins, as numpy's assignment
        check(f(), want, exact=True)


@case()
def elemwise(check):
    import aesara
    import aesara.tensor as at

    from aesara_bincount import gpu

    gx = gpu.shared(values(0, 2 * N))
    t = at.dscalar("t")
    f = aesara.function([t], [gpu.gpu_from_host(at.exp(t * gx) - gx), gpu.gpu_from_host(t * gx[::3] + 1.0)])
    expect_ops(f, "GpuElemwise")
    for seed in ROUNDS:
        x = values(seed, 2 * N - seed)
        gx.set_value(x)
        a, b = f(0.25 * seed)
        check(a, np.exp(0.25 * seed * x) - x, scale=np.exp(0.25 * seed * x) + np.abs(x))
        check(b, 0.25 * seed * x[::3] + 1.0, scale=np.abs(x[::3]) + 1.0)


@case()
def multi_index(check):
    import aesara
    import aesara.tensor as at

    from aesara_bincount import gpu

    gw = gpu.shared(np.zeros((ROWS, WIDTH), "float32"))
    gi, gj = gpu.shared(hot(0, 500, ROWS)), gpu.shared(hot(1, 500, WIDTH))
    gv = gpu.shared(np.zeros(500, "float32"))
    zeros = at.zeros((ROWS, WIDTH), dtype="float32")
    f = aesara.function([], [gw[gi, gj], gw[gi], at.inc_subtensor(zeros[gi, gj], gv)])
    expect_ops(f, "GpuAdvancedSubtensor1", "GpuIndexCheck", "GpuScatterAdd")
    for seed in ROUNDS:
        w = values(seed + 7, ROWS * WIDTH, "float32").reshape(ROWS, WIDTH)
        i, j, v = hot(seed, 500, ROWS), hot(seed + 5, 500, WIDTH) - (seed == 2) * WIDTH, values(seed, 500, "float32")
        gw.set_value(w)
        gi.set_value(i)
        gj.set_value(j)
        gv.set_value(v)
        got = f()
        add, scale = np.zeros((ROWS, WIDTH), "float32"), np.zeros((ROWS, WIDTH))
        np.add.at(add, (i, j), v)
        np.add.at(scale, (i, j), np.abs(v))
        check(got[0], w[i, j], exact=True)
        check(got[1], w[i], exact=True)
        check(got[2], add, scale=scale)


@case("async")
def threads(check):
    """Two threads at once, each calling two functions of its own six times:
    a float64-weighted bincount to the host (the compiled Op's page-locked
    staging, one per context in its module) and an int64-weighted one kept
    on the GPU (its status read back through the module's page-locked slots)."""
    import aesara
    from aesara.tensor.extra_ops import bincount

    from aesara_bincount import gpu

    work = []
    for s in (3, 4):
        x, w, wi = hot(s, N, BINS - s), values(s, N), hot(s, N, 1000) - 500
        gx = gpu.shared(x)
        host = aesara.function([], bincount(gx, weights=gpu.shared(w)))
        dev = aesara.function([], gpu.gpu_from_host(bincount(gx, weights=gpu.shared(wi))))
        expect_ops(host, "GpuBincount")
        expect_ops(dev, "GpuBincount")
        work.append((host, dev, x, w, wi))
    errors = []

    def calls(host, dev, x, w, wi):
        try:
            for _ in range(6):
                check(host(), np.bincount(x, weights=w), scale=np.bincount(x, np.abs(w)))
                check(dev(), np.bincount(x, weights=wi).astype("int64"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    ts = [threading.Thread(target=calls, args=args) for args in work]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    if errors:
        raise errors[0]
