"""The CPU plan (issue 41): which of two equivalent loops the CPU Ops take.

- The plan's text, its word, and the C side's bits and attribute agree.
- ``AESARA_BINCOUNT_CPU_PLAN`` forces a plan, or a calibration; a value it
  does not know raises ``ValueError``.
- The cache file in Aesara's compile directory: one plan per CPU model, the
  same bytes for the same plan, written whole (concurrent writers never leave
  a partial file), ignored when of another format.
- The first compile of a ``Bincount`` makes the plan: it calibrates (through
  the Ops themselves) and writes the cache, which the next process reads.
- Every loop the plan can choose gives ``numpy.bincount``'s result, bit for
  bit: stored and computed float weights with -0.0 and NaN, a computed x,
  int8 weights that wrap, empty x, and the errors (a negative value, an
  index out of range in the scatter-add form).  The grid over dtypes and
  sizes is marked ``long``.

The test-suite otherwise runs the default plan (``tests/conftest.py``).
"""
import functools
import json
import os
import re
import threading

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount

import aesara_bincount  # noqa: F401  (the rewrites)
import aesara_bincount_core
from aesara_bincount import Bincount, FusedBincount
from aesara_bincount_core import _c_code, cpu_plan

PLANS = [p.text() for p in cpu_plan.all_plans()]


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process that has made no plan yet, with its cache file in ``tmp_path``."""
    before = cpu_plan._plan_now
    cpu_plan._plan_now = None
    monkeypatch.setattr(cpu_plan, "cache_path", lambda: str(tmp_path / cpu_plan.CACHE_NAME))
    monkeypatch.delenv(cpu_plan.ENV, raising=False)
    yield tmp_path / cpu_plan.CACHE_NAME
    cpu_plan._plan_now = before
    cpu_plan._set_word(before.word if before is not None else 0)


def _word():
    return getattr(aesara_bincount_core, cpu_plan.ATTR)


def test_text_word_and_c_bits_agree():
    assert cpu_plan.parse("").word == 0 and cpu_plan.parse("").text() == PLANS[0]
    assert cpu_plan.parse("weights=scalar").text() == "weights=scalar,test=avx2"
    assert {p: cpu_plan.parse(p).word for p in PLANS} == dict(zip(PLANS, [0, 2, 1, 3]))
    header = _c_code.read_source("cpu/plan.h")
    bits = {k: int(v, 16) for k, v in re.findall(r"#define (BC_PLAN_\w+) (0x[0-9a-f]+)u", header)}
    assert bits["BC_PLAN_SCALAR_WEIGHTS"] == cpu_plan.parse("weights=scalar").word
    assert bits["BC_PLAN_AVX512_TEST"] == cpu_plan.parse("test=avx512").word
    assert bits["BC_PLAN_BITS"] == max(p.word for p in cpu_plan.all_plans())
    assert f'#define BC_PLAN_ATTR "{cpu_plan.ATTR}"' in header
    for bad in ("weights=fast", "speed=1", "weights", "weights=vector;test=avx2"):
        with pytest.raises(ValueError, match="weights: vector or scalar"):
            cpu_plan.parse(bad)


def test_choose_keeps_the_default_unless_clearly_slower():
    d, s = "weights=vector,test=avx2", "weights=scalar,test=avx2"
    assert cpu_plan.choose({d: 100.0, s: 100.0 / (1 + cpu_plan.MARGIN) + 0.1}).text() == d
    assert cpu_plan.choose({d: 100.0, s: 90.0}).text() == s
    assert cpu_plan.choose({d: 90.0, s: 100.0}).source == "calibrated"


def test_environment_forces_a_plan(fresh, monkeypatch):
    monkeypatch.setenv(cpu_plan.ENV, "weights=scalar")
    plan = cpu_plan.current()
    assert (plan.text(), plan.source, _word()) == ("weights=scalar,test=avx2", "forced", 1)
    assert cpu_plan.current() is plan and not fresh.exists()  # made once; a forced plan is not cached
    cpu_plan._plan_now = None
    monkeypatch.setenv(cpu_plan.ENV, "default")
    assert (cpu_plan.current().text(), _word()) == (PLANS[0], 0)
    cpu_plan._plan_now = None
    monkeypatch.setenv(cpu_plan.ENV, "fastest")
    with pytest.raises(ValueError, match=cpu_plan.ENV):
        cpu_plan.current()
    # auto: the cached plan of this CPU
    cpu_plan._plan_now = None
    cpu_plan._write_cache(str(fresh), cpu_plan.cpu_key(), cpu_plan.parse("test=avx512"))
    monkeypatch.setenv(cpu_plan.ENV, "auto")
    plan = cpu_plan.current()
    assert (plan.text(), plan.source, _word()) == ("weights=vector,test=avx512", "cache", 2)


def test_cache_file_is_deterministic_whole_and_per_cpu(tmp_path):
    path = str(tmp_path / "sub" / cpu_plan.CACHE_NAME)
    plan = cpu_plan.parse("weights=scalar")
    cpu_plan._write_cache(path, "cpu A", plan)
    first = open(path, "rb").read()
    cpu_plan._write_cache(path, "cpu A", plan)
    assert open(path, "rb").read() == first  # the same bytes: no times, no dates
    cpu_plan._write_cache(path, "cpu B", cpu_plan.parse("test=avx512"))
    data = json.load(open(path))
    assert data == {"format": cpu_plan.FORMAT, "plans": {
        "cpu A": {"test": "avx2", "weights": "scalar"}, "cpu B": {"test": "avx512", "weights": "vector"}}}
    assert cpu_plan._cached(path, "cpu B").source == "cache" and cpu_plan._cached(path, "cpu C") is None
    # Another format, a value this version does not know, or a broken file: not a plan.
    json.dump({"format": cpu_plan.FORMAT + 1, "plans": data["plans"]}, open(path, "w"))
    assert cpu_plan._cached(path, "cpu A") is None
    json.dump({"format": cpu_plan.FORMAT, "plans": {"cpu A": {"weights": "psychic"}}}, open(path, "w"))
    assert cpu_plan._cached(path, "cpu A") is None
    open(path, "w").write('{"format": 1, "pla')
    assert cpu_plan._cached(path, "cpu A") is None
    cpu_plan._write_cache(path, "cpu A", plan)  # a broken file is replaced
    assert cpu_plan._cached(path, "cpu A").text() == plan.text()


def test_concurrent_writers_leave_a_whole_file(tmp_path):
    path = str(tmp_path / cpu_plan.CACHE_NAME)
    cpu_plan._write_cache(path, "cpu 0", cpu_plan.DEFAULT)
    stop, bad = threading.Event(), []

    def writer(k):
        for _ in range(30):
            cpu_plan._write_cache(path, f"cpu {k}", cpu_plan.parse(PLANS[k % len(PLANS)]))

    def reader():
        while not stop.is_set():
            try:
                data = json.loads(open(path).read())
                assert data["format"] == cpu_plan.FORMAT and data["plans"]
            except Exception as exc:  # noqa: BLE001
                bad.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    r = threading.Thread(target=reader)
    r.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    r.join()
    assert not bad, bad[:3]
    assert os.listdir(tmp_path) == [cpu_plan.CACHE_NAME]  # no temporary file left


def test_cpu_model_and_key():
    m = cpu_plan.cpu_model()
    assert set(m) == {"vendor", "family", "model", "stepping", "name", "flags"} and m["name"]
    assert set(m["flags"]) <= set(cpu_plan.ISA_FLAGS)
    key = cpu_plan.cpu_key(m)
    assert str(m["name"]) in key and f"model {m['model']}" in key


def test_first_compile_calibrates_and_caches(fresh, monkeypatch):
    """The first compiled Bincount makes the plan: calibrated (cheaply here),
    written to the cache with this CPU's key, read back by the next process."""
    plan, totals = cpu_plan.calibrate(n=4096, rounds=1, calls=1)
    assert plan.text() in PLANS and plan.source == "calibrated"
    assert set(totals) == set(PLANS) and all(t > 0 for t in totals.values())
    assert not fresh.exists() and cpu_plan._plan_now is None  # calibrate() itself writes and sets nothing
    monkeypatch.setattr(cpu_plan, "calibrate", functools.partial(cpu_plan.calibrate, n=4096, rounds=1, calls=1))
    x = at.lvector("x")
    f = aesara.function([x], bincount(x))
    made = cpu_plan._plan_now
    assert made is not None and made.source == "calibrated" and _word() == made.word
    assert json.load(open(fresh))["plans"] == {cpu_plan.cpu_key(): made.as_dict()}
    np.testing.assert_array_equal(f(np.array([3, 1, 3])), [0, 1, 0, 2])
    cpu_plan._plan_now = None  # the next process
    again = cpu_plan.current()
    assert (again.text(), again.source) == (made.text(), "cache")
    cpu_plan._plan_now = None
    monkeypatch.setenv(cpu_plan.ENV, "calibrate")  # times the loops again, rewrites the cache
    assert cpu_plan.current().source == "calibrated" and fresh.exists()


# -- every loop of every plan gives numpy's result --------------------------------
def _bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind == "f":
        got, want = got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")
    np.testing.assert_array_equal(got, want)


@functools.lru_cache(maxsize=None)
def _functions():
    """The graphs whose loops a plan chooses, compiled once (one thread)."""
    x, x32, v, u = at.lvector("x"), at.ivector("x32"), at.dvector("v"), at.dvector("u")
    a8, b8, th = at.bvector("a8"), at.bvector("b8"), at.dscalar("th")
    idx = at.lvector("idx")
    graphs = {
        "stored": ([x, v], bincount(x, weights=v)),
        "mul": ([x, v, th], bincount(x, weights=th * v)),
        "fma": ([x, v, u, th], bincount(x, weights=v * u + th)),
        "expr": ([x, v, u], bincount(x, weights=-(v / u) - 0.1 * v)),
        "x32 mul": ([x32, v, th], bincount(x32, weights=th * v)),
        "x // 4": ([x], bincount(x // 4)),
        "int8": ([x, a8, b8], bincount(x, weights=a8 * b8)),
        "scatter": ([idx, v, th], at.inc_subtensor(at.zeros(5)[idx], th * v)),
    }
    with aesara.config.change_flags(openmp=False):
        fns = {k: aesara.function(i, o) for k, (i, o) in graphs.items()}
    want = {"stored": Bincount, "scatter": FusedBincount}
    for k, f in fns.items():
        (node,) = f.maker.fgraph.toposort()
        assert type(node.op) is want.get(k, FusedBincount), k
        if k in ("mul", "fma", "expr", "x32 mul"):  # the weights have a vector form
            assert "#define BC_FW_VEC 1" in node.op._codes(node)[0], k
    return fns


def _cases(rng, n):
    """``(function name, args, numpy result or (exception, message regex))``."""
    x = rng.integers(0, 1000, n)
    if n:
        x[-1] = 999
    v, u = rng.standard_normal(n), rng.standard_normal(n)
    v[::7] = -0.0  # -0.0 + -0.0 is -0.0, +0.0 + -0.0 is +0.0: the order shows
    v[5::97] = np.nan
    a8, b8 = rng.integers(-128, 128, n).astype("int8"), rng.integers(-128, 128, n).astype("int8")
    th = -1.5
    cases = [
        ("stored", (x, v), np.bincount(x, weights=v)),
        ("mul", (x, v, th), np.bincount(x, weights=th * v)),
        ("fma", (x, v, u, th), np.bincount(x, weights=v * u + th)),
        ("expr", (x, v, u), np.bincount(x, weights=-(v / u) - 0.1 * v)),
        ("x32 mul", (x.astype("int32"), v, th), np.bincount(x, weights=th * v)),
        ("x // 4", (4 * x + 3,), np.bincount(x).astype("int64")),
    ]
    if n:
        w8 = np.zeros(x.max() + 1, "int8")
        np.add.at(w8, x, a8 * b8)  # int8 products and sums wrap
        cases.append(("int8", (x, a8, b8), w8))
        bad = x.copy()
        bad[n // 2] = -3
        cases.append(("mul", (bad, v, th), (ValueError, f"negative value -3 at position {n // 2}")))
        idx = rng.integers(0, 5, n)
        idx[n // 3] = 7  # in [n, capacity): the loops' test passes it
        cases.append(("scatter", (idx, v, th), (IndexError, f"index 7 at position {n // 3} is out of bounds")))
    return cases


def _check(plan, cases):
    fns = _functions()
    with cpu_plan.use(plan):
        for name, args, want in cases:
            if isinstance(want, tuple):
                with pytest.raises(want[0], match=want[1]):
                    fns[name](*args)
            else:
                got = fns[name](*args)
                _bits_equal(got, want.astype(got.dtype))


@pytest.mark.parametrize("plan", PLANS)
def test_every_plan_gives_numpys_result(plan, rng):
    for n in (0, 13, 2053):
        _check(plan, _cases(rng, n))


@pytest.mark.long
@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 65, 1000, 65537, 300001])
def test_every_plan_grid(plan, n):
    for seed in range(3):
        _check(plan, _cases(np.random.default_rng(seed), n))


def test_scatter_form_wraps_negative_indices_in_every_plan():
    """A negative index of a computed x wraps once in the scatter-add form; the
    group that holds it takes the slow path, and its raw (huge unsigned) value
    must not count as the largest index (int8 output: the loop keeps a maximum)."""
    a8, b8 = at.bvector("a8"), at.bvector("b8")
    with aesara.config.change_flags(openmp=False):
        f = aesara.function([a8, b8], at.inc_subtensor(at.zeros(5, dtype="int8")[a8 + b8], np.int8(1)))
    assert [type(n.op) for n in f.maker.fgraph.toposort()] == [FusedBincount]
    a = np.array([1, -2, 3, 0, -5, 4, 2, 1, 0] * 3, "int8")
    b = np.zeros_like(a)
    want = np.zeros(5, "int8")
    np.add.at(want, a, 1)
    for plan in PLANS:
        with cpu_plan.use(plan):
            _bits_equal(f(a, b), want)
