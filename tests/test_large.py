"""64-bit sizes: more than 2**31 elements, and counts above 2**32.

``numpy.bincount`` is not called on these arrays (it would convert an int8 x
of 4.3e9 values to intp: 34 GiB).  The expected counts follow from how x is
built: one value everywhere, plus markers at positions 0, 2**31, 2**32 + 3
and the end, whose bins nothing else reaches.

These tests are marked ``slow``; each skips when the machine lacks the
memory.  See ``make test-large``.
"""
import gc

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount

from aesara_bincount import Bincount

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _free_large_arrays():
    """Aesara graphs hold their shared variables in reference cycles: collect
    them after each test, or the next test's array would come on top."""
    yield
    gc.collect()


def _available_bytes() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _need(nbytes: int) -> None:
    if _available_bytes() < nbytes:
        pytest.skip(f"needs {nbytes / 2**30:.1f} GiB of available memory")


def _compile(outputs, openmp):
    with aesara.config.change_flags(openmp=openmp):
        f = aesara.function([], outputs)
    nodes = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, Bincount)]
    assert len(nodes) == len(outputs) and all(n.op.openmp == openmp for n in nodes)
    return f


N = 2**32 + 2**20 + 9
#: position -> value of the markers; every other element is 5
MARKERS = {0: 1, 2**31: 2, 2**32 + 3: 3, N - 1: -1}


@pytest.fixture(scope="module")
def big_x():
    """An int8 x of 2**32 + 2**20 + 9 values (4 GiB), built once."""
    _need(N + (1 << 30))
    x = np.full(N, 5, dtype=np.int8)
    for pos, value in MARKERS.items():
        x[pos] = value
    yield x
    del x
    gc.collect()


def test_bincount_of_more_than_2_32_elements(big_x, openmp):
    """bincount of all of x but its last (negative) element: counts wrap in
    int8, as Aesara's output dtype says, and each marker past 2**31 and 2**32
    sits alone in its bin."""
    xs = aesara.shared(big_x[:-1], borrow=True)
    f = _compile([bincount(xs)], openmp)
    (got,) = f()
    expected = np.array([0, 1, 1, 1, 0, N - 4], dtype=np.int64).astype(np.int8)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, expected)


def test_scatter_counts_above_2_32(big_x, openmp):
    """The scatter-add form into int64 over all of x: one bin counts more than
    2**32, and the negative index at the very end wraps to the last bin."""
    xs = aesara.shared(big_x, borrow=True)
    three = aesara.shared(np.int64(3))
    f = _compile(
        [
            at.inc_subtensor(at.zeros(8, dtype="int64")[xs], 1),
            at.inc_subtensor(at.zeros(8, dtype="int64")[xs], three),
        ],
        openmp,
    )
    counts, weighted = f()
    expected = np.array([0, 1, 1, 1, 0, N - 4, 0, 1], dtype=np.int64)
    assert expected[5] > 2**32
    np.testing.assert_array_equal(counts, expected)
    np.testing.assert_array_equal(weighted, 3 * expected)
