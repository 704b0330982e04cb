"""Inputs of the kinds that broke other bincount implementations.

Each gives the ``numpy.bincount`` answer (cast to the Aesara output dtype) or
the stated error, through Aesara's ``bincount`` on shared variables, with
OpenMP off and on, on the CPU and (when present) the GPU.
"""
import os

import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount

from aesara_bincount_core._c_code import messages
from backends import BACKENDS, compile_shared
from procs import run_python


def run(backend, openmp, x, weights=None, minlength=None):
    """``bincount(x, weights, minlength)`` compiled over shared variables."""
    values = {"x": x} if weights is None else {"x": x, "w": weights}
    fn, shared = compile_shared(
        backend, lambda x, w=None: bincount(x, weights=w, minlength=minlength), values, openmp
    )
    # A strided x stays strided in the shared variable.
    backend.set(shared["x"], x)
    return backend.to_numpy(fn())


def numpy_answer(x, weights=None, minlength=0):
    out = np.bincount(np.asarray(x).astype(np.int64), weights=weights, minlength=minlength)
    return out.astype(x.dtype if weights is None else weights.dtype)


def check(got, expected):
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected)


pytestmark = pytest.mark.parametrize("backend", BACKENDS)


def test_uint64_small_values(backend, openmp):
    x = np.array([0, 1, 2], dtype="uint64")
    check(run(backend, openmp, x), np.array([1, 1, 1], dtype="uint64"))


def test_int64_max_value_is_a_clear_error(backend, openmp):
    # Never hand this x to numpy in this process: numpy 1.26 corrupts its own
    # heap computing max(x) + 1 here.  The message is written out by hand.
    x = np.array([2**63 - 1], dtype="int64")
    with pytest.raises(ValueError) as info:
        run(backend, openmp, x)
    assert str(info.value).split("\n")[0] == messages()["BC_MSG_TOO_LARGE"] % (2**63 - 1)


def test_arange_65536_int32(backend, openmp):
    x = np.arange(65536, dtype="int32")
    check(run(backend, openmp, x), np.ones(65536, dtype="int32"))


def test_two_values_far_apart(backend, openmp):
    x = np.array([0, 28854311], dtype="int32")
    got = run(backend, openmp, x)
    assert got.dtype == np.int32 and got.shape == (28854312,)
    assert got[0] == 1 and got[-1] == 1 and int(got.sum()) == 2


def test_one_hot_bin(backend, openmp):
    x = np.full(2**20, 2048, dtype="int32")
    expected = np.zeros(2049, dtype="int32")
    expected[2048] = 2**20
    check(run(backend, openmp, x), expected)
    check(run(backend, openmp, x), numpy_answer(x))


def test_strided_view(backend, openmp):
    x = np.zeros((32, 2), dtype="int64")[:, 0]
    assert not x.flags.c_contiguous
    check(run(backend, openmp, x), np.array([32], dtype="int64"))


def test_int8_with_minlength(backend, openmp):
    x = np.array([1, 2, 3], dtype="int8")
    expected = np.zeros(200, dtype="int8")
    expected[[1, 2, 3]] = 1
    got = run(backend, openmp, x, minlength=200)
    check(got, expected)
    check(got, numpy_answer(x, minlength=200))


def test_empty_with_weights_and_minlength(backend, openmp):
    x = np.array([], dtype="int64")
    w = np.array([], dtype="float64")
    check(run(backend, openmp, x, weights=w, minlength=3), np.zeros(3))


def test_opposite_infinities(backend, openmp):
    x = np.array([0, 0], dtype="int64")
    w = np.array([np.inf, -np.inf])
    got = run(backend, openmp, x, weights=w)
    assert got.shape == (1,) and np.isnan(got[0])
    np.testing.assert_array_equal(got, np.bincount(x, weights=w))


def test_dtype_tops(backend, openmp):
    """Values at the top of their dtype, where Aesara's graph overflows."""
    for dtype in ("int8", "uint8", "int16", "uint16"):
        top = np.iinfo(dtype).max
        x = np.array([top, 0, top], dtype=dtype)
        check(run(backend, openmp, x), numpy_answer(x))


def test_int8_counts_wrap(backend, openmp):
    """Counts of an int8 x have dtype int8 (Aesara's type) and wrap at 128."""
    x = np.zeros(300, dtype="int8")
    got = run(backend, openmp, x)
    check(got, np.array([300 - 256], dtype="int8"))


# -- memory: no workspace of threads x bins ---------------------------------------
_NO_WORKSPACE = """
import resource
import numpy as np, aesara
from aesara.tensor.extra_ops import bincount
import aesara_bincount

top = 28854311
x = np.random.default_rng(0).integers(0, 1000, size={size}).astype(np.int32)
x[-1] = top  # met last: the threads have counted everything else already
xs = aesara.shared(x)
with aesara.config.change_flags(openmp={openmp}):
    f = aesara.function([], bincount(xs))
assert any(isinstance(n.op, aesara_bincount.Bincount) for n in f.maker.fgraph.toposort())
f()  # warm up: OpenMP threads, their stacks and malloc arenas exist from now on
"""

_MEASURE = """
def vm_size():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
out_bytes = (top + 1) * 4
limit = vm_size() + out_bytes + out_bytes // 2 + (32 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
got = f()
assert got.shape == (top + 1,), got.shape
expected_head = np.bincount(x[:-1], minlength=1000)
assert (got[:1000] == expected_head).all()
assert got[top] == 1 and int(got.sum()) == x.size
# The limit binds: one more block of the output's size does not fit.
try:
    np.empty(out_bytes, dtype=np.uint8)
except MemoryError:
    print("ok", limit)
else:
    raise SystemExit("the address-space limit does not bind")
"""


@pytest.mark.cpu_only("a host-memory check of the CPU Op")
@pytest.mark.parametrize("size", [2, 1_000_000])
def test_far_value_needs_no_workspace(backend, size, openmp):
    """x = int32 [..., 28854311] runs under an address-space limit of the
    output plus half of it: a private histogram of all bins (let alone one per
    thread) would not fit, so the call would raise MemoryError."""
    if os.environ.get("AESARA_BINCOUNT_SANITIZE"):
        pytest.skip("AddressSanitizer reserves terabytes of address space")
    run_python(_NO_WORKSPACE.format(size=size, openmp=openmp) + _MEASURE, timeout=300)


@pytest.mark.cpu_only("float sums on the GPU are added by atomics in a nondeterministic order (documented)")
@pytest.mark.parametrize("w_dtype", ["float32", "float64"])
@pytest.mark.parametrize("top", [1000, 60_000, 2_000_000], ids=["private", "direct", "direct-sparse"])
def test_float_sums_are_reproducible(backend, w_dtype, top, openmp):
    """Bincount's documented promise: for a fixed input and thread count, the
    same result, bit for bit, on every call (float sums depend on the order
    of the additions).  ``top`` picks the private-histogram path or the
    direct path (more bins than a private histogram may have)."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, top, size=200_000)
    w = rng.standard_normal(200_000).astype(w_dtype)
    fn, shared = compile_shared(
        backend,
        lambda x, w: [bincount(x, weights=w), at.inc_subtensor(at.zeros(top, w_dtype)[x], w)],
        {"x": x, "w": w},
        openmp,
    )
    first = [backend.to_numpy(r).copy() for r in fn()]
    for _ in range(30):
        for a, b in zip(fn(), first):
            np.testing.assert_array_equal(backend.to_numpy(a), b)
