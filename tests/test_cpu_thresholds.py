"""The CPU Op at the sizes where its C code changes path (issue 13).

``c_code/cpu/bincount.c`` (with its regime files ``bincount_cpu_*.h``) picks its loop by size: one thread below
``BC_OMP_MIN_N`` elements; tasks of ``BC_TASK_LEN`` elements; a private
histogram up to ``N / (2 x histograms)`` bins (at least ``BC_PRIV_MIN_BINS``),
else the direct path; four interleaved copies while they fit in
``BC_COPIES_MAX_BYTES`` and the sample shows repeats; prefetches from
``BC_PREFETCH_MIN_BYTES`` of histogram or output, ``BC_PREFETCH_DIST``
elements ahead; groups of eight values; an AVX2 loop for weighted sums over
4- and 8-byte ``x``.  Every test here runs through ``aesara.function`` with
OpenMP off and on, on both sides of such a threshold, and compares with
NumPy (``numpy.bincount``, ``np.add.at``) or with the exact error of
:func:`aesara_bincount.reference_bincount`.

The thresholds are read from the C file, so the tests follow a retuning.
The histogram count depends on the thread count, so private-limit sizes are
taken around ``N / 2``, ``N / 4``, ``N / 8`` and ``N / 16``.  These are
thresholds of the CPU C code; the GPU Op has its own (tests/gpu).
"""
import re

import numpy as np
import pytest

from aesara_bincount import reference_bincount
from aesara_bincount_core import _c_code
from backends import CPU, bincount_case, scatter_case
from conftest import LONG
from expect import assert_same_histogram


def _constants():
    from aesara_bincount import Bincount

    text = "\n".join(_c_code.read_source(name) for name in Bincount.hashed_sources())
    found = {}
    for name, value in re.findall(r"^#define (BC_[A-Z0-9_]+) (\(?[0-9][0-9 <()]*\)?)", text, re.M):
        found.setdefault(name, eval(value))  # noqa: S307  (digits, parentheses and << only)
    return found


C = _constants()
OMP_MIN_N = C["BC_OMP_MIN_N"]
TASK_LEN = C["BC_TASK_LEN"]
PRIV_MIN = C["BC_PRIV_MIN_BINS"]
PRIV_MAX = C["BC_PRIV_MAX_BINS"]
COPIES_BYTES = C["BC_COPIES_MAX_BYTES"]
PREFETCH_BYTES = C["BC_PREFETCH_MIN_BYTES"]
PREFETCH_DIST = C["BC_PREFETCH_DIST"]
GROW_BYTES = C["BC_GROW_MIN_BYTES"]
GROW_MAX = C["BC_GROW_MAX_BINS"]

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(params=[False, True], ids=["openmp_off", "openmp_on"])
def omp(request):
    return request.param


def _values(rng, size, top, kind="uniform"):
    """``size`` int64 values in [0, top], the last one ``top``."""
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    if kind == "uniform":
        x = rng.integers(0, top + 1, size=size)
    elif kind == "skewed":  # one value in three is 0: repeats within three elements
        x = np.where(rng.random(size) < 0.35, 0, rng.integers(0, top + 1, size=size))
    elif kind == "equal":
        x = np.full(size, top)
    elif kind == "sorted":
        x = np.sort(rng.integers(0, top + 1, size=size))
    else:
        raise ValueError(kind)
    x[-1] = top
    return x.astype(np.int64)


def _assert_reference_error(case, x, rng):
    """``case`` run on ``x`` (standard normal weights drawn from ``rng``, no
    minlength) raises the ValueError of reference_bincount, message and all."""
    w = rng.standard_normal(x.size)
    with pytest.raises(ValueError) as expected:
        reference_bincount(x, 0, w)
    with pytest.raises(ValueError) as got:
        case.run(x, w, 0)
    assert str(got.value).startswith(str(expected.value))


def _check_bincount(x_dtype, w_dtype, omp, x, rng, minlength=0):
    case = bincount_case(CPU, x_dtype, w_dtype, omp)
    x = x.astype(x_dtype)
    w = None
    if w_dtype is not None:
        w = (rng.integers(-3, 4, size=x.size) if w_dtype[0] in "iu" else rng.standard_normal(x.size))
        w = w.astype(w_dtype)
    got = case.run(x, w if w is not None else None, minlength)
    nbins = max(int(x.max()) + 1 if x.size else 0, minlength)
    assert_same_histogram(got, x, w, nbins, w_dtype or x_dtype,
                          what=f"{x_dtype} {w_dtype} N={x.size} top={x.max() if x.size else None}")


# -- thread count and tasks ----------------------------------------------------
@pytest.mark.parametrize(
    "size",
    [1, 7, 8, 9, PREFETCH_DIST + 7, PREFETCH_DIST + 8, PREFETCH_DIST + 9,
     OMP_MIN_N - 1, OMP_MIN_N, OMP_MIN_N + 1, 4 * TASK_LEN - 1, 4 * TASK_LEN + 3],
)
@pytest.mark.parametrize("w_dtype", [None, "float64"])
def test_sizes_around_thread_and_group_thresholds(size, w_dtype, omp, rng):
    for top in (15, 999, 3 * PRIV_MIN):
        _check_bincount("int64", w_dtype, omp, _values(rng, size, top), rng)


# -- private histogram or direct path ----------------------------------------------
@pytest.mark.parametrize("w_dtype", [None, "float64", "int64"])
def test_private_limit(w_dtype, omp, rng):
    size = 2 * OMP_MIN_N
    tops = sorted({t for d in (2, 4, 8, 16) for t in (size // d - 1, size // d, size // d + 1)})
    for top in tops:
        _check_bincount("int64", w_dtype, omp, _values(rng, size, top), rng)
    # below the limit's floor: always private; just above it: direct
    for top in (PRIV_MIN - 2, PRIV_MIN - 1, PRIV_MIN):
        _check_bincount("int64", w_dtype, omp, _values(rng, 1000, top), rng)


def test_minlength_beyond_the_private_histograms(omp, rng):
    x = _values(rng, 3 * OMP_MIN_N, 500)
    for minlength in (0, 501, PRIV_MIN + 1, 10**6):
        _check_bincount("int64", "float64", omp, x, rng, minlength=minlength)
        _check_bincount("int64", None, omp, x, rng, minlength=minlength)


# -- copies and prefetching ----------------------------------------------------------
@pytest.mark.parametrize("x_dtype,w_dtype,itemsize", [
    ("int64", None, 4),  # counts are 32-bit in the private histograms
    ("int64", "float64", 8),
    ("int32", "float32", 4),
])
def test_copies_threshold_on_skewed_data(x_dtype, w_dtype, itemsize, omp, rng):
    cap = COPIES_BYTES // (4 * itemsize)  # largest capacity with four copies
    for top in (cap // 2 - 1, cap - 1, cap, 2 * cap - 1):
        for kind in ("skewed", "uniform"):
            _check_bincount(x_dtype, w_dtype, omp, _values(rng, 3 * OMP_MIN_N, top, kind), rng)


@pytest.mark.parametrize("w_dtype,itemsize", [(None, 4), ("float64", 8)])
def test_prefetch_threshold_of_private_histograms(w_dtype, itemsize, omp, rng):
    cap = PREFETCH_BYTES // itemsize  # smallest capacity counted with prefetches
    for top in (cap // 2 - 1, cap // 2, cap - 1):
        # enough elements that the histogram stays private for up to 4 histograms
        _check_bincount("int64", w_dtype, omp, _values(rng, 8 * (top + 1), top), rng)


@pytest.mark.parametrize("x_dtype,w_dtype", [("int64", None), ("int32", None), ("int64", "float64"),
                                             ("int64", "float32")])
def test_prefetch_thresholds_of_the_direct_path(x_dtype, w_dtype, omp, rng):
    """Outputs from BC_PREFETCH_MIN_BYTES up are counted with prefetches;
    counts into 8-byte outputs go through 32-bit counters from
    BC_PREFETCH_MIN_BYTES of counters and N >= bins / 2 up."""
    itemsize = np.dtype(w_dtype or x_dtype).itemsize
    edges = {PREFETCH_BYTES // itemsize}
    if w_dtype is None and itemsize == 8:
        edges.add(PREFETCH_BYTES // 4)
    for nbins in sorted(edges):
        for top in (nbins - 2, nbins - 1, nbins):
            # the 32-bit counters are used from N >= bins / 2
            for size in (PREFETCH_DIST - 1, PREFETCH_DIST + 1, 5 * PRIV_MIN, nbins // 2 - 1, nbins // 2 + 1):
                _check_bincount(x_dtype, w_dtype, omp, _values(rng, size, top), rng)


@pytest.mark.parametrize("out", ["int64", "int32"])
def test_direct_path_with_32_bit_counters(out, omp, rng):
    """Counts into 8-byte outputs, on the direct path, go through 32-bit
    counters when N >= bins / 2: beyond the largest private histogram, and
    when threads bail out on a value the sample did not see (the sample
    reads four windows from 0, 1/4, 1/2 and 3/4 of x)."""
    x_dtype = out  # counts take x's dtype
    for top in (PRIV_MAX - 1, PRIV_MAX, PRIV_MAX + 1):
        x = _values(rng, top // 2 + 2, top)
        _check_bincount(x_dtype, None, omp, x, rng)
    size = 3 * OMP_MIN_N
    for far in (PREFETCH_BYTES // 4 - 1, PREFETCH_BYTES // 4 + 1, 2 * size - 1, 2 * size + 1):
        x = _values(rng, size, 999)
        x[5 * size // 8] = far
        _check_bincount(x_dtype, None, omp, x, rng)


@pytest.mark.parametrize("kind", ["equal", "sorted", "skewed"])
@pytest.mark.parametrize("w_dtype", [None, "float64"])
def test_sampled_loops(kind, w_dtype, omp, rng):
    for size, top in ((3 * OMP_MIN_N, 300), (3 * OMP_MIN_N, 40 * OMP_MIN_N), (PRIV_MIN, 50)):
        _check_bincount("int64", w_dtype, omp, _values(rng, size, top, kind), rng)


# -- the AVX2 weighted loop and its dtypes -------------------------------------------
@pytest.mark.parametrize("x_dtype", ["int8", "int16", "uint32", "int32", "int64", "uint64"])
def test_weighted_loop_for_every_x_dtype(x_dtype, rng):
    top_of = min(np.iinfo(x_dtype).max, 5000)
    for size in (9, 1000, 3 * OMP_MIN_N):
        for top in sorted({min(top_of, t) for t in (63, 64, 1023, 4095, top_of)}):
            _check_bincount(x_dtype, "float64", False, _values(rng, size, top), rng)


@pytest.mark.parametrize("x_dtype", ["int32", "int64", "uint64"])
def test_values_out_of_range_in_every_position_of_a_group(x_dtype, omp, rng):
    """A bad value at each position of a group of eight, in the fast loops
    (the AVX2 weighted loop, the counting loop, the prefetching loop) and in
    the direct path: the exact error of reference_bincount."""
    case = bincount_case(CPU, x_dtype, "float64", omp)
    info = np.iinfo(x_dtype)
    bad = -5 if info.min < 0 else info.max  # negative, or too large for an array
    for size in (64, 3 * OMP_MIN_N):
        for top in (100, 2 * PREFETCH_BYTES):
            for pos in (0, 1, 7, 8, 9, size // 2 + 3, size - 1):
                x = _values(rng, size, top).astype(x_dtype)
                x[pos] = bad
                _assert_reference_error(case, x, rng)


@pytest.mark.parametrize("x_dtype", ["int32", "uint32", "int64", "int16"])
@pytest.mark.parametrize("kind", ["uniform", "skewed"])
def test_counts_group_test_at_the_histogram_capacity(x_dtype, kind, omp, rng):
    """Counts into a private histogram (one copy, or four on skewed data):
    the group test of the counting loops (the vector test for 4-byte x, the
    OR of the group otherwise) at the histogram's capacity, in each lane.
    Values up to 63 make a capacity of 64; a 64 in one lane of a group must
    fail the test (the slow path then grows the histogram), and a negative
    value must raise reference_bincount's error."""
    size = 3 * OMP_MIN_N
    for lane in range(8):
        x = _values(rng, size, 63, kind)
        x[8 * 1000 + lane] = 64  # the smallest value past the capacity
        x[8 * 1001 + 7 - lane] = 63
        _check_bincount(x_dtype, None, omp, x, rng)
        if np.iinfo(x_dtype).min < 0:
            x = _values(rng, size, 63, kind).astype(x_dtype)
            x[8 * 1000 + lane] = -1
            _assert_reference_error(bincount_case(CPU, x_dtype, None, omp), x, rng)


@pytest.mark.parametrize("x_dtype", ["int32", "uint32", "int64", "uint64", "int16"])
def test_runs_break_in_every_lane_of_a_group(x_dtype, omp, rng):
    """The runs loops (cpu/bincount_runs.h: private histograms, and the direct
    path when the bins are many, and the output-histogram of
    cpu/bincount_grow.h) add a group of eight that continues the run in
    progress at once: a run that ends at any lane of a group, runs of every
    length from 1 to 17, a first group equal to the initial 0, a value that
    grows the output and a negative value at any lane must all be counted
    exactly or refused as numpy refuses them."""
    size = 3 * OMP_MIN_N
    for top in (300, min(40 * OMP_MIN_N, np.iinfo(x_dtype).max)):
        lengths = np.arange(size) % 17 + 1
        runs = np.repeat(np.arange(size) % (top + 1), lengths)[:size]
        _check_bincount(x_dtype, None, omp, np.sort(runs), rng)
        for lane in range(8):
            x = np.full(size, top, dtype=np.int64)
            x[: 8 * 50 + lane] = 0  # starts equal to the loops' initial 0
            x[8 * 3000 + lane] = top // 2  # a run of one, at this lane
            x[8 * 4000 + lane:] = top - 1
            x[-1] = top
            _check_bincount(x_dtype, None, omp, x, rng)
            _check_bincount(x_dtype, "float64", omp, x, rng)
            if 2 * top + 1 <= np.iinfo(x_dtype).max:
                # Unseen by the sample: the output grows; first the smallest
                # such value, the capacity bc_grow_cap gives the sampled top.
                for far in (top + 1 + (top + 1) // 16 + 64, 2 * top + 1):
                    x[8 * 5000 + lane] = far
                    _check_bincount(x_dtype, None, omp, x, rng)
            if np.iinfo(x_dtype).min < 0:
                x[8 * 5000 + lane] = -1
                _assert_reference_error(bincount_case(CPU, x_dtype, None, omp), x.astype(x_dtype), rng)


# -- the output as the histogram (cpu/bincount_grow.h) ---------------------------------
@pytest.mark.parametrize("x_dtype,w_dtype", [("int64", None), ("int32", None), ("uint32", None),
                                             ("int64", "float64"), ("int32", "float32"),
                                             ("int64", "int16"), ("uint64", None),
                                             ("int32", "int32"), ("int64", "int64")])
def test_output_histogram_threshold(x_dtype, w_dtype, omp, rng):
    """From BC_GROW_MIN_BYTES of sampled output up, counts and weighted sums
    into 4- and 8-byte outputs go into the output itself on one counting
    thread (one thread, or several and many bins); narrow sums (int16) keep
    the other paths at the same sizes.  Below and above the threshold."""
    itemsize = np.dtype(w_dtype or x_dtype).itemsize
    edge = GROW_BYTES // itemsize
    top_of = int(np.iinfo(x_dtype).max)
    for top in sorted({min(top_of, t) for t in (edge - 2, edge - 1, edge, 3 * edge)}):
        for size in (1000, OMP_MIN_N + 8, 3 * OMP_MIN_N):
            _check_bincount(x_dtype, w_dtype, omp, _values(rng, size, top), rng)


@pytest.mark.parametrize("w_dtype", [None, "float64"])
def test_output_histogram_grows_and_is_cut(w_dtype, omp, rng):
    """A value the sample did not see (it reads four windows from 0, 1/4, 1/2
    and 3/4 of x) grows the output, once or several times; the output is then
    cut to max(x) + 1 (a view within a sixteenth of slack, else reallocated),
    or kept at minlength; a value past BC_GROW_MAX_BINS starts over on the
    other paths."""
    edge = GROW_BYTES // 8
    size = 3 * OMP_MIN_N
    # The last bins below and at BC_GROW_MAX_BINS (outputs of 2**26 bins, half a GiB of
    # float64) in make test-long only; make test starts over past it (GROW_MAX + 7).
    tops = (GROW_MAX - 1, GROW_MAX) if LONG else ()
    for far in (edge + edge // 16 + 64, 2 * edge + 1, 5 * edge, *tops, GROW_MAX + 7):
        x = _values(rng, size, 2 * edge)
        x[5 * size // 8] = far
        _check_bincount("int64", w_dtype, omp, x, rng)
        x[7 * size // 8 + 1] = far + 1  # a second growth, and the last value is the largest
        _check_bincount("int64", w_dtype, omp, x, rng)
    x = _values(rng, size, 2 * edge)
    for minlength in (2 * edge, 2 * edge + 1, 2 * edge + 2 * edge // 16 + 65, 4 * edge):
        _check_bincount("int64", w_dtype, omp, x, rng, minlength=minlength)


@pytest.mark.parametrize("x_dtype,w_dtype", [("int64", None), ("int32", None), ("uint64", None),
                                             ("uint32", None), ("int64", "float64"),
                                             ("int32", "float32"), ("uint64", "float64"),
                                             ("int64", "int64"), ("int32", "int32")])
def test_output_histogram_group_test_at_the_capacity(x_dtype, w_dtype, omp, rng):
    """The vector range test of a group of eight (cpu/bincount_grow.h) at
    the output's capacity, in each lane: the sample sees the largest value
    ``top`` (at x[1]), so the output has ``cap = top + 1 + (top + 1) // 16 +
    64`` bins; ``cap - 1`` in a group is counted on the fast path, ``cap``
    grows the output.  Weighted: the largest value's weights are zeros (+0.0
    and -0.0), so the output's length comes from the tracked maximum, not
    from its last non-zero bin."""
    case = bincount_case(CPU, x_dtype, w_dtype, omp)
    edge = GROW_BYTES // 8
    size = 3 * OMP_MIN_N
    top = 2 * edge
    cap = top + 1 + (top + 1) // 16 + 64
    base = _values(rng, size, top)
    base[1] = top
    for lane in range(8):
        for far in (cap - 1, cap, cap + 1):
            x = base.copy()
            x[8 * 4000 + 7 - lane] = cap - 1
            x[8 * 5000 + lane] = far
            x = x.astype(x_dtype)
            w = None
            if w_dtype is not None:
                w = (rng.standard_normal(size) * 3).astype(w_dtype)
                w[x == far] = 0.0
                w[8 * 5000 + lane] = -0.0
            got = case.run(x, w, 0)
            assert_same_histogram(got, x, w, far + 1, w_dtype or x_dtype,
                                  what=f"{x_dtype} {w_dtype} lane={lane} value={far} cap={cap}")


@pytest.mark.parametrize("x_dtype", ["int64", "int32", "uint64", "uint32", "int16"])
def test_output_histogram_hot_bins_on_skewed_data(x_dtype, omp, rng):
    """Counts of skewed data (repeats within three elements, no runs) into an
    output of BC_GROW_MIN_BYTES or more: the values below the hot bins'
    count (four copies in BC_COPIES_MAX_BYTES) go to copies of their own
    (bc_grow_fast_hot), added into the output at the end.  The last hot bin,
    the first bin past them and the one after, in every lane of a group and
    repeated at distances 1 to 4; a growth of the output while the copies
    hold counts; a negative value after hot counts (the exact error)."""
    case = bincount_case(CPU, x_dtype, None, omp)
    hot = COPIES_BYTES // (4 * 8)  # int64 counts
    edge = GROW_BYTES // 8
    size = 3 * OMP_MIN_N
    top = min(2 * edge, int(np.iinfo(x_dtype).max))
    for lane in range(8):
        x = _values(rng, size, top, "skewed")
        for k, value in enumerate((hot - 1, hot, hot + 1)):
            at = 8 * (3000 + 100 * k) + lane
            x[at:at + 5] = value  # a run of five, then repeats of it at distances 2, 3, 4
            x[at + 7] = x[at + 10] = x[at + 14] = value
        if top == 2 * edge:
            x[size - 8 + lane] = 3 * edge + lane  # grows the output after the hot counts
        got = case.run(x.astype(x_dtype), None, 0)
        assert_same_histogram(got, x.astype(x_dtype), None, int(x.max()) + 1, x_dtype,
                              what=f"{x_dtype} skewed lane={lane} hot={hot}")
    if np.dtype(x_dtype).kind == "i":
        x = _values(rng, size, top, "skewed").astype(x_dtype)
        x[size - 5] = -1
        _assert_reference_error(case, x, rng)


@pytest.mark.parametrize("w_dtype", [None, "float64"])
def test_output_histogram_growth_sizes(w_dtype, omp, rng):
    """The size of a growth (bc_grow_next): the missed value's need scaled by
    the share of x still to come, at least that need, at most twice the
    capacity unless the value needs more.  An ascending x (the sample sees
    the value at 3/4 of x), a value missed just before the second sampled
    window (the scaled need is capped), one in the last group, and the last
    element; each with a second, larger value after it."""
    edge = GROW_BYTES // 8
    size = 3 * OMP_MIN_N
    x = np.sort(_values(rng, size, 4 * edge))
    _check_bincount("int64", w_dtype, omp, x, rng)
    _check_bincount("int64", w_dtype, omp, np.arange(4 * edge, dtype=np.int64), rng)
    for pos in (size // 4 - 1, size - 9, size - 1):
        x = _values(rng, size, 2 * edge)
        x[pos] = 3 * edge
        _check_bincount("int64", w_dtype, omp, x, rng)
        if pos < size - 1:
            x[size - 1] = 7 * edge
            _check_bincount("int64", w_dtype, omp, x, rng)


@pytest.mark.parametrize("x_dtype", ["int64", "int32"])
def test_output_histogram_refuses_negative_values(x_dtype, omp, rng):
    """A negative value in a group, in the tail, or after a growth: the exact
    error of reference_bincount, and nothing kept of the partial output."""
    case = bincount_case(CPU, x_dtype, "float64", omp)
    edge = GROW_BYTES // 8
    size = 3 * OMP_MIN_N
    for pos in (0, 7, 8, size // 3 + 5, 7 * size // 8, size - 1):
        x = _values(rng, size, 2 * edge).astype(x_dtype)
        x[5 * size // 8] = 5 * edge
        x[pos] = -3
        _assert_reference_error(case, x, rng)


# -- private histograms beyond the L2 cache (cpu/bincount_far.h) ------------------------
@pytest.mark.parametrize("x_dtype,w_dtype", [("int64", None), ("int32", None), ("int64", "float64")])
def test_far_loop_grows_at_the_capacity(x_dtype, w_dtype, omp, rng):
    """Threaded private histograms of BC_PREFETCH_MIN_BYTES and more (the
    bincount form, OpenMP on): the first half of x needs 2**k bins, the
    second half values just past them, at every lane of a group, so the far
    loop's vector range test must send them to the slow path, which grows
    the histogram (beyond the limit of private histograms: the direct path)."""
    cap = PREFETCH_BYTES // 4  # 32-bit counts: a histogram of exactly the threshold
    size = 4 * cap + 4 * TASK_LEN
    for lane in range(8):
        x = np.concatenate([rng.integers(0, cap, size=size // 2),
                            rng.integers(0, cap + cap // 32, size=size - size // 2)])
        x[size // 2 + 8 * 101 + lane] = cap  # the smallest value past the capacity
        x[: size // 2][5] = cap - 1
        _check_bincount(x_dtype, w_dtype, omp, x, rng)


@pytest.mark.parametrize("x_dtype,w_ndim", [("int64", None), ("int32", None), ("int64", 1)])
def test_scatter_far_loop_at_a_power_of_two_length(x_dtype, w_ndim, rng):
    """The scatter-add form with n = 2**k bins (the histogram's capacity is
    then exactly n) beyond BC_PREFETCH_MIN_BYTES, one thread: n itself, at
    each lane of a group, fails the far loop's range test and raises the
    IndexError of np.add.at; without it the sums are those of np.add.at."""
    n = PREFETCH_BYTES // 4
    size = 2 * n + 8
    case = scatter_case(CPU, x_dtype, "float64", w_ndim, False)
    idx = rng.integers(0, n, size=size).astype(x_dtype)
    w = None if w_ndim is None else rng.standard_normal(size)
    assert_same_histogram(case.run(idx, w, n), idx, w, n, "float64", what=f"n={n}")
    for lane in range(8):
        bad = idx.copy()
        bad[8 * 1001 + lane] = n
        with pytest.raises(IndexError) as expected:
            reference_bincount(bad, n, w, mode="scatter")
        with pytest.raises(IndexError) as raised:
            case.run(bad, w, n)
        assert str(raised.value).startswith(str(expected.value))


# -- the scatter-add form ---------------------------------------------------------------
@pytest.mark.parametrize("out_dtype", ["int64", "float64", "int32"])
def test_scatter_counts_with_many_bins(out_dtype, omp, rng):
    """Negative indices wrap in the direct path, with 32-bit counters (8-byte
    outputs) and without."""
    case = scatter_case(CPU, "int64", out_dtype, None, omp)
    for n in (PREFETCH_BYTES // 4 - 1, PREFETCH_BYTES // 4 + 1):
        idx = rng.integers(-n, n, size=n // 2 + 7)
        got = case.run(idx, None, n)
        assert_same_histogram(got, np.where(idx < 0, idx + n, idx), None, n, out_dtype, what=f"n={n}")



@pytest.mark.parametrize("w_ndim", [None, 1])
def test_scatter_add_around_the_private_limit(w_ndim, omp, rng):
    case = scatter_case(CPU, "int64", "float64", w_ndim, omp)
    size = 2 * OMP_MIN_N
    for n in sorted({size // d + k for d in (2, 4, 8, 16) for k in (-1, 0, 1)} | {PRIV_MIN, PRIV_MIN + 1}):
        idx = rng.integers(-n, n, size=size)
        w = None if w_ndim is None else rng.standard_normal(size)
        got = case.run(idx, w, n)
        assert_same_histogram(got, np.where(idx < 0, idx + n, idx), w, n, "float64", what=f"n={n}")
        idx[size // 3] = n  # one past the end
        with pytest.raises(IndexError) as expected:
            reference_bincount(idx, n, w, mode="scatter")
        with pytest.raises(IndexError) as raised:
            case.run(idx, w, n)
        assert str(raised.value).startswith(str(expected.value))
