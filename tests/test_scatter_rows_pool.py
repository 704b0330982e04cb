"""ScatterAdd's threaded paths, which run on the CPU Op's worker pool.

With ``openmp=True`` the scatter-add of rows splits its work by thread
(privatized rows: chunks of ``idx`` into private copies, then blocks of rows
merging them) or by row (one task per owner of rows), as tasks of the pool
of ``c_code/cpu/worker_pool.h`` that ``Bincount`` uses too.  These tests run
each split, through ``aesara.function``, at sizes on both sides of the
thresholds of ``c_code/cpu/scatter_add.c`` (read from the file), against
``np.add.at``; a bad index in a threaded call, in place included; and, in
fresh processes, that ScatterAdd and Bincount share one pool and that a call
whose workers cannot run (every thread pinned to one core) still gives the
right result, bit for bit the same as with two cores.

No timing is tested (``benchmarks/bench_rows.py`` measures speed).
"""
import os
import re

import numpy as np
import pytest

from aesara_bincount_core import _c_code
from aesara_bincount_core._c_code import messages
from backends import CPU
from procs import run_python
from rows_cases import assert_same_rows, expected_rows, rows_case

FORMS = ["zeros", "base", "inplace"]


def c_constant(name: str) -> int:
    """The value of ``#define name ...`` in ``cpu/scatter_add_check.h`` (the tuning constants)."""
    text = _c_code.read_source("cpu/scatter_add_check.h")
    match = re.search(rf"^#define {name} (.+?)(?:/\*.*)?$", text, re.MULTILINE)
    assert match, name
    return int(eval(re.sub(r"(\d+)LL", r"\1", match.group(1))))  # (1 << 16), (256LL << 20)


WORK = c_constant("SA_OMP_MIN_WORK")
ROW_BYTES = c_constant("SA_ROWS_MIN_BYTES")
OUT_MIN = c_constant("SA_ROWS_MIN_OUT_BYTES")
#: Rows of ROW_BYTES bytes that make an output of OUT_MIN bytes: wide rows split by row.
BIG_V = OUT_MIN // ROW_BYTES
BLOCK = c_constant("SA_ROWS_BLOCK")
FRACTION = c_constant("SA_PRIVATE_MAX_FRACTION")
MERGE = c_constant("SA_MERGE_BYTES")
TASK = c_constant("SA_TASK_BYTES")
#: Threads of an OpenMP call in this process (the split depends on them).
THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
NT = max(2, int(os.environ.get("OMP_NUM_THREADS", THREADS) or 2))


def split_of(n: int, nrows: int, rowlen: int, itemsize: int, nt: int = NT) -> str:
    """The split the C code picks (sa_run) with ``nt`` threads, as the docs state it."""
    work = n * rowlen
    if work < WORK:
        return "serial"
    nt = min(nt, 2 * work // WORK)
    if rowlen * itemsize >= ROW_BYTES and nrows >= nt * BLOCK:
        # Wide rows: by row when the output is larger than a last-level cache.
        return "by row" if nrows * rowlen * itemsize >= OUT_MIN else "serial"
    priv = (nt - 1) * nrows * rowlen * itemsize
    block = max(1, TASK // (rowlen * itemsize))  # indices of a task
    if priv * FRACTION <= n * rowlen * itemsize and n > block:
        return "by thread"
    return "serial"


def blocks(n: int, rowlen: int, itemsize: int) -> int:
    """Blocks of idx (tasks of a lane) of a threaded split."""
    block = max(1, TASK // (rowlen * itemsize))
    return -(-n // block)


#: (N, V, row length): each on one side of a threshold, with NT = 2.
SIZES = [
    (WORK // 8 - 1, 10, 8),  # one element short of threads: serial
    (WORK // 8, 10, 8),  # just enough: by thread
    (WORK // 8 + 3, 10, 8),  # chunks of unequal length
    (4, 1, WORK // 4),  # four wide rows into one: two chunks, one merge task
    (5, 1, WORK // 4),
    (40_000, 40_000 // FRACTION, 8),  # copies exactly 1/FRACTION of the increments: by thread
    (40_000, 40_000 // FRACTION + 1, 8),  # one row more: serial
    (200_000, 49_999, 1),  # many merge tasks, the last one short
    (WORK // 32, BIG_V, ROW_BYTES // 8),  # rows of SA_ROWS_MIN_BYTES, out of SA_ROWS_MIN_OUT_BYTES: by row
    (WORK // 32, 2 * BLOCK - 1, ROW_BYTES // 8),  # too few rows to deal out: by thread
    (WORK // 31 + 1, 100, ROW_BYTES // 8 - 1),  # rows one element short: by thread
    (3, BIG_V * ROW_BYTES // (WORK // 2 * 8), WORK // 2),  # three indices, each owner walks them all
    (5000, OUT_MIN // 512 // BLOCK * BLOCK + 3, 64),  # a last block of 3 rows
    (WORK // 32, BIG_V - 1, ROW_BYTES // 8),  # one row short of SA_ROWS_MIN_OUT_BYTES: serial
]


def test_sizes_cover_every_split():
    """The table above really drives each split, for 8-byte items on 2 threads."""
    splits = [split_of(n, v, d, 8, nt=2) for n, v, d in SIZES]
    assert splits.count("serial") >= 2 and splits.count("by row") >= 3
    assert splits.count("by thread") >= 6
    assert split_of(*SIZES[0], 8, 2) == "serial" and split_of(*SIZES[1], 8, 2) == "by thread"
    assert split_of(*SIZES[5], 8, 2) == "by thread" and split_of(*SIZES[6], 8, 2) == "serial"
    assert split_of(*SIZES[8], 8, 2) == "by row" and split_of(*SIZES[9], 8, 2) == "by thread"
    assert split_of(*SIZES[10], 8, 2) == "by thread" and split_of(*SIZES[13], 8, 2) == "serial"


def _inputs(n, nrows, rowlen, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        base = rng.standard_normal((nrows, rowlen)).astype(dtype) + 0
        inc = rng.standard_normal((n, rowlen)).astype(dtype)
    else:
        info = np.iinfo(dtype)
        base = rng.integers(info.min, info.max, (nrows, rowlen), dtype=dtype, endpoint=True)
        inc = rng.integers(info.min, info.max, (n, rowlen), dtype=dtype, endpoint=True)
    idx = rng.integers(-nrows, nrows, n)
    return base, inc, idx


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("n, nrows, rowlen", SIZES)
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_threaded_paths_match_np_add_at(form, n, nrows, rowlen, dtype):
    case = rows_case(CPU, form, dtype, 2, dtype, 2, "int64", openmp=True)
    base, inc, idx = _inputs(n, nrows, rowlen, dtype, seed=n + nrows + rowlen)
    if form == "zeros":
        base = np.zeros_like(base)
    got = case.run(base, inc, idx, nrows=nrows)
    split = split_of(n, nrows, rowlen, np.dtype(dtype).itemsize)
    if dtype.startswith("int") or split != "by thread":
        # Exact integer sums (wrapping); by row and serial add in index order.
        np.testing.assert_array_equal(got, expected_rows(base, inc, idx), split)
    else:
        assert_same_rows(got, base, inc, idx, split)
    again = case.run(base, inc, idx, nrows=nrows)
    np.testing.assert_array_equal(again, got, "a second call differs")  # fixed thread count


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_narrow_dtypes_by_thread_and_by_row(form, dtype):
    itemsize = np.dtype(dtype).itemsize
    rowlen = 4
    n = 3 * (TASK // (rowlen * itemsize)) + 1  # three blocks and one index: lanes of unequal length
    one_block = TASK // (rowlen * itemsize)
    sizes = [
        (n, 64, rowlen),
        (one_block, 64, rowlen),  # uint8: one block only, serial
        (one_block + 1, 64, rowlen),  # two blocks, the second of one index
        (WORK // 64, BIG_V, ROW_BYTES // itemsize),
    ]
    for n, nrows, rowlen in sizes:
        case = rows_case(CPU, form, dtype, 2, dtype, 2, "int32", openmp=True)
        base, inc, idx = _inputs(n, nrows, rowlen, dtype, seed=n)
        if form == "zeros":
            base = np.zeros_like(base)
        got = case.run(base, inc, idx.astype("int32"), nrows=nrows)
        split = split_of(n, nrows, rowlen, itemsize, nt=2)
        if dtype == "uint8" or n not in (one_block, one_block + 1):
            assert split == ("serial" if n == one_block else "by row" if rowlen > 4 else "by thread")
        if dtype == "uint8":
            np.testing.assert_array_equal(got, expected_rows(base, inc, idx))
        else:
            assert_same_rows(got, base, inc, idx)


#: (N, V, row length) of each threaded split, for the bad-index tests.
THREADED = {"by thread": (WORK // 4, 50, 8), "by row": (WORK // 32, BIG_V, ROW_BYTES // 8)}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("split", sorted(THREADED))
@pytest.mark.parametrize("where", ["first", "last chunk", "two"])
def test_bad_index_in_a_threaded_call(form, split, where):
    """The reference's IndexError, naming the first bad index; nothing written."""
    n, nrows, rowlen = THREADED[split]
    assert split_of(n, nrows, rowlen, 8, nt=2) == split
    case = rows_case(CPU, form, "float64", 2, "float64", 2, "int64", openmp=True)
    base, inc, idx = _inputs(n, nrows, rowlen, "float64", seed=3)
    bad = idx.copy()
    if where == "first":
        bad[0], pos, value = nrows, 0, nrows
    elif where == "last chunk":
        bad[-1], pos, value = -nrows - 1, n - 1, -nrows - 1
    else:  # one in each chunk: the first one is named
        bad[n // 2 + 1] = 2**40
        bad[n // 2 - 1], pos, value = nrows + 5, n // 2 - 1, nrows + 5
    with pytest.raises(IndexError) as info:
        case.run(base, inc, bad, nrows=nrows)
    assert str(info.value).split("\n")[0] == messages()["BC_MSG_ROW_INDEX"] % (str(value), pos, nrows)
    if form != "zeros":
        # The shared base, updated in place or not, keeps its value.
        np.testing.assert_array_equal(case.W.get_value(borrow=True), base, "the base changed")
    got = case.run(base, inc, idx, nrows=nrows)  # the same function, then good input
    start = np.zeros_like(base) if form == "zeros" else base
    assert_same_rows(got, start, inc, idx, split)


# -- the pool, in fresh processes ----------------------------------------------------
_SETUP = """
import os
import numpy as np, aesara, aesara.tensor as at
from aesara.tensor.extra_ops import bincount
import aesara_bincount

def threads():
    return len(os.listdir("/proc/self/task"))

W = aesara.shared(np.zeros((2, 2)), name="W")
G = aesara.shared(np.zeros((2, 2)), name="G")
I = aesara.shared(np.zeros(2, dtype="int64"), name="I")
x = at.vector("x", dtype="int64")
with aesara.config.change_flags(openmp=True):
    rows = aesara.function([], at.inc_subtensor(W[I], G))
    update = aesara.function([], [], updates={W: at.inc_subtensor(W[I], G)})
    counts = aesara.function([x], bincount(x))
assert "ScatterAdd" in str(rows.maker.fgraph.toposort())

rng = np.random.default_rng(0)
def data(n, nrows, rowlen):
    return (rng.standard_normal((nrows, rowlen)), rng.standard_normal((n, rowlen)),
            rng.integers(-nrows, nrows, n))
def expected(base, inc, idx):
    out = base.copy()
    np.add.at(out, np.where(idx < 0, idx + len(base), idx), inc)
    return out
def scatter(base, inc, idx, inplace=False):
    W.set_value(base.copy()); G.set_value(inc); I.set_value(idx)
    if inplace:
        update()
        return W.get_value()
    return rows()
by_thread = data(200_000, 100, 8)
by_row = data(20_000, 70_000, 64)  # wide rows, 36 MB of them: split by row
serial = data(1000, 100, 8)
big = rng.integers(0, 1000, size=1_000_000)
"""
_ENV = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"}

needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs two CPUs and sched_setaffinity",
)


@pytest.mark.parametrize("first", ["by thread", "by row", "bincount"])
def test_scatter_add_and_bincount_share_one_pool(first):
    """A threaded split starts the pool's worker; later calls, Bincount's included, reuse it."""
    out = run_python(
        _SETUP
        + f"""
first = {first!r}
before = threads()
assert np.allclose(scatter(*serial), expected(*serial))
small = threads()
if first == "bincount":
    assert (counts(big) == np.bincount(big)).all()
else:
    case = by_thread if first == "by thread" else by_row
    assert np.allclose(scatter(*case), expected(*case))
started = threads()
for _ in range(10):
    assert np.allclose(scatter(*by_thread), expected(*by_thread))
    assert (scatter(*by_row) == expected(*by_row)).all()
    assert np.allclose(scatter(*by_thread, inplace=True), expected(*by_thread))
    assert (counts(big) == np.bincount(big)).all()
print(small - before, started - before, threads() - before)
""",
        env=_ENV,
    )
    # No worker for a call below the threshold; OMP_NUM_THREADS - 1 in all, whoever came first.
    assert out.stdout.split()[-3:] == ["0", "1", "1"], out.stdout


@needs_affinity
def test_workers_that_cannot_run():
    """Every thread pinned to one core: right results, bit-identical to two cores'."""
    out = run_python(
        _SETUP
        + """
cases = [by_thread, by_row]
refs = [scatter(*c) for c in cases]
refs_inplace = [scatter(*c, inplace=True) for c in cases]
ok = all(np.allclose(r, expected(*c)) for r, c in zip(refs, cases))
cpu = min(os.sched_getaffinity(0))
for tid in os.listdir("/proc/self/task"):  # every thread of the process on one core
    os.sched_setaffinity(int(tid), {cpu})
for _ in range(30):
    for c, r, ri in zip(cases, refs, refs_inplace):
        ok &= bool((scatter(*c) == r).all())  # whoever ran which task
        ok &= bool((scatter(*c, inplace=True) == ri).all())
    ok &= bool((counts(big) == np.bincount(big)).all())
print(ok)
""",
        env=_ENV,
        timeout=600,
    )
    assert out.stdout.split()[-1] == "True", out.stdout


def test_every_header_scatter_add_includes_is_hashed():
    """cpu/worker_pool.h and the parts of cpu/scatter_add.c, like every file of ours
    that the C code includes (followed include by include), are in the cache version."""
    from aesara_bincount import ScatterAdd

    included, todo = set(), ["cpu/scatter_add.c"]
    while todo:
        text = _c_code.read_source(todo.pop())
        for name in re.findall(r'^#include "([^"]+)"', text, re.MULTILINE):
            if name not in included:
                included.add(name)
                todo.append(name)
    assert {"cpu/worker_pool.h", "cpu/scatter_add_check.h", "cpu/scatter_add_loops.h",
            "cpu/scatter_add_lanes.h"} <= included
    assert included <= set(ScatterAdd.hashed_sources())
