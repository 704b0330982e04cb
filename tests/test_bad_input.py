"""Every bad input gets a clear Python exception, and nothing is harmed.

For each case: the exception type, and the message, which is the very text of
:func:`aesara_bincount.reference_bincount` (the contract shared by the CPU and
GPU paths); then the shared variables still hold what they held, and the same
compiled function gives the right answer on good input.

Graph-time errors (float or 2-D ``x``) are ``TypeError`` when the graph is
built, from Aesara's ``bincount``, from :func:`aesara_bincount.bincount` and
from :class:`~aesara_bincount.Bincount` itself.
"""
import resource

import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount

import aesara_bincount
from aesara_bincount import Bincount, reference_bincount
from aesara_bincount_core._c_code import messages
from backends import BACKENDS, as_view, compile_shared

SIGNED = ("int8", "int16", "int32", "int64")


def first_line(exc: BaseException) -> str:
    """The message an Op raised, without the node details Aesara appends."""
    return str(exc).split("\n")[0]


def reference_error(*args, **kwargs):
    """The exception :func:`reference_bincount` raises on these arguments."""
    with pytest.raises(Exception) as info:
        reference_bincount(*args, **kwargs)
    return info.value


def fails_then_recovers(backend, fn, shared, bad, expected_exc, good, expected, args=(), good_args=()):
    """Run ``fn`` on ``bad`` values, expect ``expected_exc``; then on ``good``.

    ``bad`` and ``good`` map shared-variable names to values.  The raised
    exception must have the type and first line of ``expected_exc``; the
    shared variables must be unchanged by the failed call.
    """
    for name, value in bad.items():
        backend.set(shared[name], *as_view(value))
    kept = {name: backend.get(var) for name, var in shared.items()}
    with pytest.raises(type(expected_exc)) as info:
        fn(*args)
    assert first_line(info.value) == str(expected_exc)
    for name, var in shared.items():
        now = backend.get(var)
        assert now.dtype == kept[name].dtype
        np.testing.assert_array_equal(now, kept[name], err_msg=f"shared {name} changed")
    for name, value in good.items():
        backend.set(shared[name], *as_view(value))
    got = backend.to_numpy(fn(*good_args))
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    return info.value


# -- negative values ---------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", SIGNED)
@pytest.mark.parametrize("size", [3, 100_000])
def test_negative_value_raises_valueerror(backend, dtype, size, openmp):
    rng = np.random.default_rng(1)
    good = rng.integers(0, 50, size=size).astype(dtype)
    bad = good.copy()
    # Two negatives; the first lies past the first thread's chunk of a large x.
    first = 1 if size == 3 else 70_000
    bad[first] = -7
    bad[-1] = -3
    fn, shared = compile_shared(backend, lambda x: bincount(x), {"x": good}, openmp)
    ref = reference_error(bad)
    assert str(ref) == messages()["BC_MSG_NEGATIVE"] % (-7, first)
    fails_then_recovers(
        backend, fn, shared, {"x": bad}, ref, {"x": good}, np.bincount(good).astype(dtype)
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_value_weighted_and_strided(backend, openmp):
    x = np.arange(20, dtype="int32")
    w = np.linspace(0, 1, 40)
    fn, shared = compile_shared(
        backend, lambda x, w: bincount(x, weights=w), {"x": x, "w": w[::2]}, openmp
    )
    bad = x.copy()
    bad[5] = -1
    ref = reference_error(bad, 0, w[::2])
    fails_then_recovers(
        backend,
        fn,
        shared,
        {"x": (bad, slice(None)), "w": (w, slice(None, None, 2))},
        ref,
        {"x": x},
        np.bincount(x, weights=w[::2]),
    )


# -- weights of the wrong length ---------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wlen", [0, 4, 6])
def test_weights_of_wrong_length(backend, wlen, openmp):
    x = np.array([0, 1, 1, 3, 2], dtype="int64")
    w = np.arange(5, dtype="float32")
    fn, shared = compile_shared(backend, lambda x, w: bincount(x, weights=w), {"x": x, "w": w}, openmp)
    bad_w = np.ones(wlen, dtype="float32")
    ref = reference_error(x, 0, bad_w)
    assert isinstance(ref, ValueError)
    fails_then_recovers(
        backend, fn, shared, {"w": bad_w}, ref, {"w": w}, np.bincount(x, w).astype("float32")
    )


# -- errors when the graph is built ------------------------------------------------
BUILDERS = {
    "extra_ops.bincount": lambda x: bincount(x),
    "extra_ops.bincount+weights": lambda x: bincount(x, weights=at.vector("w")),
    "aesara_bincount.bincount": lambda x: aesara_bincount.bincount(x),
    "Bincount()": lambda x: Bincount()(x, 0),
    "Bincount('scatter')": lambda x: Bincount("scatter")(x, 5),
}


@pytest.mark.parametrize("build", list(BUILDERS.values()), ids=list(BUILDERS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_x_is_a_typeerror_at_build(build, dtype):
    with pytest.raises(TypeError):
        build(at.vector("x", dtype=dtype))


def test_float_indices_in_scatter_form_are_a_typeerror_at_build():
    with pytest.raises(TypeError):
        at.inc_subtensor(at.zeros(5)[at.vector("i", dtype="float64")], 1.0)


@pytest.mark.parametrize("build", list(BUILDERS.values()), ids=list(BUILDERS))
@pytest.mark.parametrize("ndim", [0, 2])
def test_x_not_1d_is_a_typeerror_at_build(build, ndim):
    x = at.tensor(dtype="int64", shape=(None,) * ndim, name="x")
    with pytest.raises(TypeError):
        build(x)


# -- negative minlength / length ---------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_minlength(backend, openmp):
    x = np.array([0, 2, 2], dtype="int16")
    m = at.lscalar("m")
    fn, shared = compile_shared(backend, lambda x: bincount(x, minlength=m), {"x": x}, openmp, [m])
    ref = reference_error(x, -1)
    assert str(ref) == messages()["BC_MSG_MINLENGTH"] % -1
    fails_then_recovers(
        backend, fn, shared, {}, ref, {}, np.bincount(x, minlength=5).astype("int16"),
        args=(-1,), good_args=(5,),
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_constant_minlength(backend):
    x = np.array([0, 2, 2], dtype="int64")
    fn, shared = compile_shared(backend, lambda x: bincount(x, minlength=-2), {"x": x})
    with pytest.raises(ValueError) as info:
        fn()
    assert first_line(info.value) == messages()["BC_MSG_MINLENGTH"] % -2
    np.testing.assert_array_equal(backend.get(shared["x"]), x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_scatter_length(backend):
    n = at.lscalar("n")
    idx = np.array([0, 1], dtype="int64")
    fn, shared = compile_shared(
        backend, lambda x: at.inc_subtensor(at.zeros(n, dtype="int64")[x], 1), {"x": idx}, False, [n]
    )
    ref = reference_error(idx, -4, mode="scatter", out_dtype="int64")
    fails_then_recovers(
        backend, fn, shared, {}, ref, {}, np.array([1, 1, 0], dtype="int64"),
        args=(-4,), good_args=(3,),
    )


# -- outputs that cannot be allocated ----------------------------------------------
def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["int64", "uint64"])
@pytest.mark.parametrize("w_dtype", [None, "float32"])
def test_huge_value_is_a_memoryerror(backend, dtype, w_dtype, openmp):
    good = np.array([1, 0, 1], dtype=dtype)
    bad = np.array([3, 2**40, 1], dtype=dtype)
    values = {"x": good}
    if w_dtype:
        values["w"] = np.ones(3, dtype=w_dtype)
    fn, shared = compile_shared(
        backend, lambda x, w=None: bincount(x, weights=w), values, openmp
    )
    out_dtype = w_dtype or dtype
    ref = reference_error(bad, 0, values.get("w"), out_dtype=out_dtype)
    assert isinstance(ref, MemoryError)
    rss = _rss()
    fails_then_recovers(
        backend, fn, shared, {"x": bad}, ref, {"x": good},
        np.bincount(good.astype(np.int64)).astype(out_dtype),
    )
    assert _rss() - rss < 256 << 20, "the refused output was allocated and touched"


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_minlength_and_length_are_memoryerrors(backend):
    x = np.array([1, 2], dtype="int64")
    m = at.lscalar("m")
    fn, shared = compile_shared(
        backend,
        lambda x: [bincount(x, minlength=m), at.inc_subtensor(at.zeros(m)[x], 1.0)],
        {"x": x},
        False,
        [m],
    )
    with pytest.raises(MemoryError) as info:
        fn(2**40)
    assert first_line(info.value) == str(reference_error(x, 2**40))
    got = fn(4)
    np.testing.assert_array_equal(backend.to_numpy(got[0]), [0, 1, 1, 0])
    np.testing.assert_array_equal(backend.to_numpy(got[1]), [0.0, 1.0, 1.0, 0.0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "bad",
    [[2**63], [2**64 - 1], [1, 2**63 + 7, 2, 2**64 - 1], [2**62]],
    ids=["2**63", "2**64-1", "mixed", "2**62"],
)
@pytest.mark.parametrize("weighted", [False, True], ids=["counts", "weights"])
def test_uint64_above_2_63(backend, bad, weighted, openmp):
    """uint64 values from 2**63 (no array length holds them): ValueError;
    2**62 (too large for memory): MemoryError.  Never a crash."""
    bad = np.array(bad, dtype="uint64")
    good = np.array([0, 1, 2, 2][: bad.size] + [0] * max(0, bad.size - 4), dtype="uint64")
    values = {"x": good}
    if weighted:
        values["w"] = np.ones(bad.size)
    fn, shared = compile_shared(backend, lambda x, w=None: bincount(x, weights=w), values, openmp)
    ref = reference_error(bad, 0, values.get("w"))
    assert isinstance(ref, (ValueError, MemoryError))
    expected = np.bincount(good.astype(np.int64), weights=values.get("w"))
    fails_then_recovers(
        backend, fn, shared, {"x": bad}, ref, {"x": good},
        expected if weighted else expected.astype("uint64"),
    )


# -- the scatter-add form ----------------------------------------------------------
SCATTER_BAD = [
    ("int64", 5, [0, 5]),
    ("int64", 5, [-6, 1]),
    ("int32", 5, [1, 2, -2**31]),
    ("uint64", 5, [2**64 - 1]),
    ("int8", 100, [3, -101]),
    ("uint8", 10, [255]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,n,bad", SCATTER_BAD, ids=[f"{d}-{n}-{b}" for d, n, b in SCATTER_BAD])
@pytest.mark.parametrize("w_ndim", [None, 0, 1], ids=["count", "scalar", "vector"])
def test_scatter_index_out_of_range_is_an_indexerror(backend, dtype, n, bad, w_ndim, openmp):
    bad = np.array(bad, dtype=dtype)
    good = np.zeros(bad.size, dtype=dtype)
    good[0] = n - 1
    values = {"x": good}
    if w_ndim == 0:
        values["w"] = np.float64(2.5)
    elif w_ndim == 1:
        values["w"] = np.arange(1, bad.size + 1, dtype="float64")
    fn, shared = compile_shared(
        backend,
        lambda x, w=None: at.inc_subtensor(at.zeros(n)[x], 1.0 if w is None else w),
        values,
        openmp,
    )
    ref = reference_error(bad, n, values.get("w"), mode="scatter", out_dtype="float64")
    assert isinstance(ref, IndexError)
    expected = np.zeros(n)
    np.add.at(expected, good.astype(np.int64), values.get("w", 1.0))
    fails_then_recovers(backend, fn, shared, {"x": bad}, ref, {"x": good}, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_first_bad_index_is_named_with_threads(backend, openmp):
    """The message names the first bad index, wherever the threads found one."""
    n = 1000
    good = np.random.default_rng(2).integers(-n, n, size=200_000)
    bad = good.copy()
    bad[150_000] = n
    bad[60_000] = -n - 1
    fn, shared = compile_shared(
        backend, lambda x: at.inc_subtensor(at.zeros(n, dtype="int64")[x], 1), {"x": good}, openmp
    )
    ref = reference_error(bad, n, mode="scatter", out_dtype="int64")
    assert "position 60000" in str(ref)
    expected = np.zeros(n, dtype="int64")
    np.add.at(expected, good, 1)
    fails_then_recovers(backend, fn, shared, {"x": bad}, ref, {"x": good}, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_increments_that_do_not_broadcast(backend):
    idx = np.array([0, 1, 2], dtype="int64")
    w = np.ones(3)
    fn, shared = compile_shared(
        backend, lambda x, w: at.inc_subtensor(at.zeros(4)[x], w), {"x": idx, "w": w}
    )
    bad_w = np.ones(2)
    ref = reference_error(idx, 4, bad_w, mode="scatter")
    assert isinstance(ref, ValueError)
    fails_then_recovers(backend, fn, shared, {"w": bad_w}, ref, {"w": w}, np.array([1.0, 1, 1, 0]))


PRIORITY = [
    ("uint64", [1, 2**63 + 7, 2, 2**64 - 1]),  # the largest value is named
    ("int64", [2**63 - 1, -5]),  # a negative value wins over a too large one
    ("int64", [5, 2**63 - 2, -1, 2**63 - 1]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,bad", PRIORITY, ids=["uint64-largest", "int64-negative-last", "int64-mixed"])
def test_error_priority_matches_reference(backend, dtype, bad, openmp):
    """With several bad values, the error is the reference's: the first
    negative value if there is one, else the largest value (never the first
    too-large value met).  Expected texts are written out by hand: numpy never
    sees these inputs."""
    bad = np.array(bad, dtype=dtype)
    good = np.arange(bad.size, dtype=dtype)
    fn, shared = compile_shared(backend, lambda x: bincount(x), {"x": good}, openmp)
    ref = reference_error(bad)
    if (bad.astype(object) < 0).any():
        pos = int(np.flatnonzero(bad < 0)[0])
        assert str(ref) == messages()["BC_MSG_NEGATIVE"] % (int(bad[pos]), pos)
    else:
        assert str(ref) == messages()["BC_MSG_TOO_LARGE"] % max(int(v) for v in bad)
    fails_then_recovers(backend, fn, shared, {"x": bad}, ref, {"x": good}, np.ones(bad.size, dtype=dtype))
