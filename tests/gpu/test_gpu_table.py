"""Every entry of the GPU table (``aesara_bincount_core.gpu.table``), through ``aesara.function``.

Each graph is built on GPU shared variables and compiled twice
(``lift_cases.compile_pair``): the GPU graph, where the entry's Op must run
as a ``GpuTableOp`` (or its twin) with no transfer inside, and the CPU graph
(``mode.excluding("gpu_bincount")``), whose values, dtypes and errors it
must give.  The data hold what breaks code: NaN, signed zeros, ties,
negative indices, integer overflow, empty arrays.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import AVAILABLE, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.tensor import blas, nnet  # noqa: E402
from aesara.tensor.extra_ops import cumprod, cumsum, repeat, searchsorted  # noqa: E402
from aesara.tensor.shape import unbroadcast  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from aesara_bincount_core.gpu.type import host_value  # noqa: E402
from lift_cases import assert_same, compile_pair, inner_transfers, op_names  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]
RNG = np.random.default_rng(29)


def hosted(f):
    """Names of the host Ops that run on the GPU through the table (GpuTableOp nodes)."""
    return {type(n.op.host_op).__name__ for n in f.maker.fgraph.toposort() if type(n.op).__name__ == "GpuTableOp"}


def check(inputs, outputs, expected_ops, args=(), float_ulps=64):
    """Compile on the GPU and the CPU, check the entries ran and the values match."""
    f, ref = compile_pair(inputs, outputs)
    assert set(expected_ops) <= hosted(f), (expected_ops, op_names(f))
    assert not inner_transfers(f), op_names(f)
    got, expected = f(*args), ref(*args)
    for g, e in zip(got, expected):  # the CPU graph too returns GPU arrays for GPU gradients
        assert_same(g, host_value(e), float_ulps=float_ulps)
    return f, ref


def _tensor(value):
    """A GPU shared variable holding ``value``, as a tensor (through HostFromGpu)."""
    return at.as_tensor_variable(gpu.shared(value))


def _floats(shape, dtype):
    a = RNG.standard_normal(shape).astype(dtype)
    a.flat[:2] = [-0.0, 0.0]
    return a


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matrix_products(dtype):
    # GPU data seen as tensors (a HostFromGpu each), as the BLAS Ops' make_node wants
    X, Y, Z = (_tensor(_floats(s, dtype)) for s in ((4, 5), (5, 3), (4, 3)))
    u, v, w = (_tensor(_floats(n, dtype)) for n in (4, 5, 3))
    X3, Y3 = _tensor(_floats((2, 4, 5), dtype)), _tensor(_floats((2, 5, 3), dtype))
    Znan = _tensor(np.full((4, 3), np.nan, dtype=dtype))
    a = at.scalar("a", dtype=dtype)
    one, zero = np.asarray(1, dtype), np.asarray(0, dtype)
    outs = [
        blas._dot22(X, Y),
        blas._dot22scalar(X, Y, a),
        blas.gemm_no_inplace(Z, a, X, Y, np.asarray(0.5, dtype)),
        blas.gemm_no_inplace(Znan, a, X, Y, zero),  # beta == 0 ignores z, NaN included
        blas.gemv_no_inplace(u, a, X, v, one),
        blas.ger(Z, a, u, w),
        at.math.Dot()(v, v),  # a Gemv onto an AllocEmpty, with beta = 0
    ]
    args = (np.asarray(-1.5, dtype),)
    f, _ = check([a], outs, {"Dot22", "Dot22Scalar", "Gemm", "Gemv", "AllocEmpty"}, args)
    assert hosted(f) & {"Ger", "ScipyGer", "CGer"}, op_names(f)


def test_batched_dot():
    """Against NumPy: the CPU graph's BatchedDot needs the BLAS that the test-suite leaves out
    (``blas__ldflags=``: its C code does not link); the values are its ``perform``'s."""
    x3, y3 = _floats((2, 4, 5), "float32"), _floats((2, 5, 3), "float32")
    X3, Y3 = _tensor(x3), _tensor(y3)
    f = aesara.function([], [blas.BatchedDot()(X3, Y3), blas.BatchedDot()(X3[:, 0], Y3),
                             blas.BatchedDot()(X3, Y3[:, :, 0]), blas.BatchedDot()(X3[:, 0], Y3[:, :, 0])])  # fmt: skip
    assert "BatchedDot" in hosted(f) and not inner_transfers(f), op_names(f)
    expected = [np.stack([np.dot(a, b) for a, b in zip(xs, ys)])
                for xs, ys in ((x3, y3), (x3[:, 0], y3), (x3, y3[:, :, 0]), (x3[:, 0], y3[:, :, 0]))]  # fmt: skip
    for got, e in zip(f(), expected):
        assert_same(got, e)


def test_integer_and_mixed_dot():
    A = gpu.shared(RNG.integers(-100, 100, (3, 4)).astype("int32"))
    b = gpu.shared(RNG.integers(-100, 100, 4).astype("int32"))
    i8 = gpu.shared(np.full((2, 2), 100, dtype="int8"))  # 100 * 100 * 2 wraps in int8
    c = gpu.shared(_floats(4, "float32"))
    outs = [at.dot(A, b), at.dot(i8, i8), at.dot(A, c)]
    check([], outs, {"Dot"})


def test_blas_subclasses_against_numpy():
    """CGemv and CGer (put in graphs when Aesara has a C BLAS) and ScipyGer: their bases' entries.

    Against NumPy, as the CPU graph of CGemv and CGer needs the BLAS that the
    test-suite leaves out."""
    from aesara.tensor.blas_c import CGemv, CGer
    from aesara.tensor.blas_scipy import ScipyGer

    A0, x0, y0 = _floats((4, 3), "float64"), _floats(3, "float64"), _floats(4, "float64")
    A, x, y = _tensor(A0), _tensor(x0), _tensor(y0)
    a, b = np.float64(-2.0), np.float64(0.5)
    outs = [CGemv(inplace=False)(y, a, A, x, b), CGer(destructive=False)(A, a, y, x),
            ScipyGer(destructive=False)(A, a, y, x)]  # fmt: skip
    f = aesara.function([], outs)
    assert {"CGemv", "CGer", "ScipyGer"} <= hosted(f) and not inner_transfers(f), op_names(f)
    expected = [b * y0 + a * A0 @ x0, A0 + a * np.outer(y0, x0), A0 + a * np.outer(y0, x0)]
    for got, e in zip(f(), expected):
        assert_same(got, e)


def test_batched_dot_batch_mismatch_raises_as_the_host_op():
    X3, Y3 = _tensor(_floats((2, 4, 5), "float64")), _tensor(_floats((3, 5, 3), "float64"))
    f = aesara.function([], blas.BatchedDot()(X3, Y3))
    assert "BatchedDot" in hosted(f)
    with pytest.raises(TypeError, match="same size in axis 0"):  # BatchedDot.perform's
        f()


def test_arrays_alloc_eye_join_split_diagonals():
    X = _tensor(_floats((4, 5), "float32"))
    v = _tensor(_floats(5, "float32"))
    n = at.lscalar("n")
    outs = [
        gpu.gpu_from_host(at.alloc(v, 3, 5)),
        gpu.gpu_from_host(at.alloc(np.float32(2.5), 2, n)),
        gpu.gpu_from_host(at.eye(n, 4, 1, dtype="float32")),
        at.concatenate([X, X * 2], axis=0),
        at.concatenate([X, X[:, :2]], axis=-1),
        *at.split(v, [2, 0, 3], 3, axis=0),
        X.diagonal(1),
        at.diag(v),
        at.basic.AllocDiag(offset=-1, axis1=0, axis2=1)(X),
    ]
    check([n], outs, {"Alloc", "Eye", "Join", "Split", "ExtractDiag", "AllocDiag"}, args=(3,))


def test_alloc_empty_has_the_shape_and_dtype():
    n = at.lscalar("n")
    x = gpu.shared(np.zeros(3, dtype="int16"))
    f = aesara.function([n], [gpu.gpu_from_host(at.basic.AllocEmpty("int16")(n, 3)), x.sum()])
    assert "AllocEmpty" in hosted(f), op_names(f)
    out = f(4)[0]
    assert out.shape == (4, 3) and out.dtype == np.int16


def test_split_with_bad_lengths_raises_as_on_the_cpu():
    v = gpu.shared(_floats(5, "float64"))
    sizes = at.lvector("sizes")
    f, ref = compile_pair([sizes], at.split(v, sizes, 2))
    assert "Split" in hosted(f)
    for bad in ([2, 2], [6, -1]):
        with pytest.raises(ValueError):
            ref(bad)
        with pytest.raises(ValueError):
            f(bad)
    assert_same(f([1, 4])[1], ref([1, 4])[1])


def test_nonzero():
    m = gpu.shared(np.array([[0, 1, 0], [2, 0, -3]], dtype="int16"))
    e = gpu.shared(np.zeros(0, dtype="float32"))
    outs = [*at.nonzero(m), *at.nonzero(e > 0), at.flatnonzero(m)]
    check([], outs, {"Nonzero"})


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_argmax_argmin_max_and_argmax(dtype):
    if dtype == "float64":
        value = np.array([[[1.0, np.nan, 3.0], [3.0, 3.0, -0.0]], [[-np.inf, 0.0, 0.0], [2.0, 7.0, 7.0]]])
    else:
        value = np.array([[[1, 5, 5], [-7, 0, 5]], [[2, 2, 2], [9, -9, 9]]], dtype=dtype)
    x = gpu.shared(value)
    outs = [
        at.argmax(x, axis=2),
        at.argmax(x, axis=None),
        at.argmax(x, axis=(0, 2)),
        at.argmin(x, axis=1),
        *at.max_and_argmax(x, axis=[0, 2]),
    ]
    check([], outs, {"Argmax", "MaxAndArgmax"})


def test_argmax_of_an_empty_axis_raises_as_on_the_cpu():
    x = gpu.shared(np.zeros((3, 0)))
    f, ref = compile_pair([], at.argmax(x, axis=1))
    assert "Argmax" in hosted(f)
    with pytest.raises(ValueError):
        ref()
    with pytest.raises(ValueError):
        f()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_family(dtype):
    value = _floats((4, 5), dtype)
    value[1] = [np.inf, 1, 2, 3, 4]  # a row that gives NaN, as on the host
    x = gpu.shared(value)
    c = gpu.shared(_floats((4, 5), dtype))
    sm = at.special.softmax(x, axis=-1)
    outs = [
        sm,
        at.special.softmax(x, axis=0),
        at.special.log_softmax(x, axis=-1),
        aesara.grad((sm * c).sum(), x),
    ]
    check([], outs, {"Softmax", "LogSoftmax", "SoftmaxGrad"})


@pytest.mark.parametrize("y_dtype", ["int64", "int32", "uint8"])
def test_cross_entropy_ops_and_their_gradients(y_dtype):
    x = gpu.shared(_floats((5, 4), "float64"))
    b = gpu.shared(_floats(4, "float64"))
    y = gpu.shared(np.array([3, 0, 0, 2, 1], dtype=y_dtype))
    dy = gpu.shared(_floats(5, "float64"))
    nll, sm, am = nnet.crossentropy_softmax_argmax_1hot_with_bias(x, b, y)
    dx = nnet.crossentropy_softmax_1hot_with_bias_dx(dy, sm, y)
    p = at.exp(x) / at.exp(x).sum(axis=1, keepdims=True)  # not a Softmax node: the categorical Op stays
    ce = nnet.crossentropy_categorical_1hot(p, y)
    outs = [nll, sm, am, dx, ce, aesara.grad((ce * dy).sum(), p)]
    ops = {"CrossentropySoftmaxArgmax1HotWithBias", "CrossentropySoftmax1HotWithBiasDx",
           "CrossentropyCategorical1Hot", "CrossentropyCategorical1HotGrad"}  # fmt: skip
    check([], outs, ops)


def test_cross_entropy_class_out_of_range_raises_as_on_the_cpu():
    x = gpu.shared(_floats((3, 4), "float64"))
    b = gpu.shared(np.zeros(4))
    y = gpu.shared(np.array([0, 4, 1], dtype="int64"))
    fused = nnet.crossentropy_softmax_argmax_1hot_with_bias(x, b, y)[0]
    categorical = nnet.crossentropy_categorical_1hot(at.exp(x), y)
    for out, error in ((fused, ValueError), (categorical, IndexError)):
        f, ref = compile_pair([], out)
        assert hosted(f) & {"CrossentropySoftmaxArgmax1HotWithBias", "CrossentropyCategorical1Hot"}
        for bad in ([0, 4, 1], [0, -5, 1]):
            y.set_value(np.array(bad, dtype="int64"))
            with pytest.raises(error):
                ref()
            with pytest.raises(error):
                f()
        y.set_value(np.array([0, -1, 3], dtype="int64"))  # -1 wraps in the categorical Op only
        if error is IndexError:
            assert_same(f(), ref())
        y.set_value(np.array([0, 3, 1], dtype="int64"))
        assert_same(f(), ref())


def test_searchsorted_cumsum_repeat():
    sorted_x = gpu.shared(np.array([-np.inf, -1.0, 0.0, 0.0, 2.5, np.nan]))
    v = gpu.shared(np.array([[0.0, -0.0, 3.0], [np.nan, -5.0, 2.5]]))
    m = gpu.shared(RNG.integers(-5, 5, (3, 4)).astype("int64"))
    big = gpu.shared(np.array([2**62, 3, 5], dtype="int64"))  # the product wraps
    f32 = gpu.shared(_floats((3, 4), "float32"))
    reps = at.lvector("reps")
    outs = [
        searchsorted(sorted_x, v),
        searchsorted(sorted_x, v, side="right"),
        cumsum(m, axis=0),
        cumsum(f32),
        cumprod(big),
        cumprod(f32, axis=1),
        repeat(m, 2, axis=1),
        repeat(f32, reps, axis=0),
    ]
    check([reps], outs, {"SearchsortedOp", "CumOp", "Repeat"}, args=([0, 3, 1],))


def test_repeat_with_bad_repeats_raises_as_on_the_cpu():
    m = gpu.shared(_floats((3, 2), "float64"))
    reps = at.lvector("reps")
    f, ref = compile_pair([reps], repeat(m, reps, axis=0))
    assert "Repeat" in hosted(f)
    for bad in ([1, 2], [1, -1, 1]):
        with pytest.raises(ValueError):
            ref(bad)
        with pytest.raises(ValueError):
            f(bad)


def test_sort_and_argsort():
    distinct = gpu.shared(RNG.permutation(24).reshape(4, 6).astype("float64") - 11.5)
    ties = gpu.shared(np.array([[3, 1, 3, 1, 2, 3, 1], [0, 0, 0, 0, 0, 0, 0]], dtype="int32"))
    nan = gpu.shared(np.array([2.0, np.nan, -np.inf, 1.0, np.nan, -3.0]))
    outs = [
        at.sort(distinct, axis=0),
        at.sort(ties, axis=-1),
        at.sort(nan),
        at.argsort(distinct, axis=1),  # quicksort: no ties, one answer
        at.argsort(ties, axis=-1, kind="stable"),
        at.argsort(nan, kind="mergesort"),
    ]
    check([], outs, {"SortOp", "ArgSortOp"})


def test_inc_and_set_subtensor_of_slices_and_integers():
    X = gpu.shared(_floats((4, 5), "float64"))
    r = gpu.shared(_floats(5, "float64"))
    k = at.lscalar("k")
    outs = [
        at.inc_subtensor(X[1:3, ::2], r[:3]),  # broadcast over the rows
        at.set_subtensor(X[k], r),
        at.inc_subtensor(X[k, -1], r[0]),  # one element
        at.set_subtensor(X[::-1, 1:], X[:, :4] * 2),
        at.inc_subtensor(X[3:1], r),  # empty
    ]
    check([k], outs, {"IncSubtensor"}, args=(-2,))


def test_inc_subtensor_of_a_bad_shape_raises_as_on_the_cpu():
    X = gpu.shared(_floats((4, 5), "float64"))
    y = gpu.shared(_floats(3, "float64"))
    k = at.lscalar("k")
    f, ref = compile_pair([k], at.inc_subtensor(X[:, :k], y))
    assert "IncSubtensor" in hosted(f)
    with pytest.raises(ValueError):
        ref(2)
    with pytest.raises(ValueError):
        f(2)
    assert_same(f(3), ref(3))


def test_specify_shape_is_the_array_itself_checked_on_the_host():
    X = gpu.shared(_floats((4, 1), "float64"))
    k = at.lscalar("k")
    outs = [at.specify_shape(X, (4, 1)) * 2, at.specify_shape(X, (None, 1)).sum(axis=1),
            at.specify_shape(X, (k, None)) - 1]  # fmt: skip
    check([k], outs, {"SpecifyShape"}, args=(4,))
    f, ref = compile_pair([k], at.specify_shape(X, (k, 1)) * 2)
    assert "SpecifyShape" in hosted(f)
    for call in (ref, f):  # the host Op's check (its C code's message or its perform's)
        with pytest.raises(AssertionError, match=r"SpecifyShape: .*4.*expected \(?3"):
            call(3)
    assert_same(f(4), ref(4))


def test_unbroadcast_is_the_array_itself():
    # issue 39: scan puts an Unbroadcast on the initial state of a loop
    X = gpu.shared(_floats((1, 3), "float32"), shape=(1, None))
    check([], [unbroadcast(X, 0) * 2, unbroadcast(X.T, 1).sum(axis=0)], {"Unbroadcast"})


def test_broadcast_to_is_a_view_of_the_gpu_array():
    # the flatten of a broadcasting elementwise x of a bincount puts one on each input
    X = gpu.shared(_floats((3, 1), "float64"))
    k = at.lscalar("k")
    check([k], [at.extra_ops.broadcast_to(X, (3, k)) * 2, at.extra_ops.broadcast_to(X[:, 0], (2, 3)).sum(axis=0)],
          {"BroadcastTo"}, args=(4,))  # fmt: skip
    f, ref = compile_pair([k], at.extra_ops.broadcast_to(X, (k, 2)) + 1)
    assert "BroadcastTo" in hosted(f)
    with pytest.raises(ValueError):  # shapes that do not broadcast: CuPy's ValueError
        f(2)  # (not ref: Aesara 2.9.4's own C code of BroadcastTo crashes on them)
    assert_same(f(3), ref(3))


def test_clip_runs_as_a_gpu_elemwise():
    x = gpu.shared(np.array([-2.0, -0.0, 0.0, 0.25, np.nan, np.inf]))
    f, ref = compile_pair([], at.clip(x, -0.5, 0.5))
    assert "GpuElemwise" in op_names(f) and not inner_transfers(f), op_names(f)
    assert_same(f(), ref())


def test_the_cupy_routines_of_the_entries_refuse_host_arrays():
    """As CuPy 13 does (the fake CuPy of the emulation must, too): no silent conversion."""
    from gpu_cases import cupy

    cp = cupy()
    a = cp.arange(3.0)
    with pytest.raises(TypeError):
        cp.dot(np.ones(3), a)
    with pytest.raises(TypeError):
        cp.matmul(a, np.ones(3))
    with pytest.raises(ValueError, match="cannot be specified as `repeats`"):
        cp.repeat(a, cp.arange(3))
