"""The Op against numpy.bincount and np.add.at, on the CPU (``Bincount``) and the GPU (``GpuBincount``).

Every test that takes ``backend`` runs on both (``tests/conftest.py``); on
the GPU, :meth:`backends.Backend.function` puts the array inputs in GPU
shared variables, so the same body drives ``GpuBincount``.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import get_default_mode
from aesara.gradient import verify_grad
from aesara.tensor.extra_ops import bincount as at_bincount
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import aesara_bincount  # noqa: F401  (registers the rewrite)
from aesara_bincount import Bincount, bincount, reference_bincount
from aesara_bincount_core.semantics import INDEX_DTYPES as INT_DTYPES
from backends import CPU

FAST_RUN = get_default_mode()
PY_MODE = aesara.compile.mode.Mode(linker="py", optimizer="fast_run")


def compiled(inputs, outputs, mode=FAST_RUN, backend=CPU, **kwargs):
    """``aesara.function`` on ``backend``; fails unless its graph holds the backend's Op."""
    return backend.function(inputs, outputs, mode=mode, **kwargs)


def expected_counts(x, minlength=0, dtype=None):
    """numpy.bincount, cast to the dtype of Aesara's graph (x.dtype)."""
    x = np.asarray(x)
    counts = np.bincount(x.astype(np.int64), minlength=minlength)
    return counts.astype(dtype or x.dtype)


def dtype_max_sample(dtype, rng, size):
    high = min(np.iinfo(dtype).max, 3000)
    return rng.integers(0, high + 1, size=size).astype(dtype)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_counts_every_dtype(dtype, rng, openmp, backend):
    x = at.vector("x", dtype=dtype)
    f = compiled([x], at_bincount(x), backend=backend)
    for size in (1, 7, 1000, 100_000):
        xv = dtype_max_sample(dtype, rng, size)
        out = f(xv)
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, expected_counts(xv))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("wdtype", ["float32", "float64", "int64"])
def test_weighted_every_dtype(dtype, wdtype, rng, openmp, backend):
    x = at.vector("x", dtype=dtype)
    w = at.vector("w", dtype=wdtype)
    f = compiled([x, w], at_bincount(x, weights=w), backend=backend)
    for size in (1, 1000, 50_000):
        xv = dtype_max_sample(dtype, rng, size)
        if wdtype.startswith("float"):
            wv = rng.standard_normal(size).astype(wdtype)
        else:
            wv = rng.integers(-(2**40), 2**40, size=size).astype(wdtype)
        out = f(xv, wv)
        assert out.dtype == np.dtype(wdtype)
        ref = np.zeros(int(xv.max()) + 1, dtype=wdtype)
        np.add.at(ref, xv.astype(np.int64), wv)
        if wdtype == "int64":
            np.testing.assert_array_equal(out, ref)
        else:
            rtol = 1e-4 if wdtype == "float32" else 1e-10
            np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol * np.abs(wv).sum() / 100)
            np.testing.assert_allclose(
                out, np.bincount(xv.astype(np.int64), weights=wv), rtol=rtol, atol=1e-3
            )


@pytest.mark.parametrize("minlength", [0, 1, 5, 999, 1000, 5000])
def test_minlength(minlength, rng, openmp, backend):
    x = at.lvector("x")
    f = compiled([x], at_bincount(x, minlength=minlength), backend=backend)
    xv = rng.integers(0, 1000, size=20_000)
    np.testing.assert_array_equal(f(xv), np.bincount(xv, minlength=minlength))


def test_symbolic_minlength(rng, backend):
    x = at.lvector("x")
    m = at.iscalar("m")
    f = compiled([x, m], at_bincount(x, minlength=m), backend=backend)
    xv = rng.integers(0, 10, size=100)
    for m_val in (0, 3, 10, 11, 50):
        np.testing.assert_array_equal(f(xv, m_val), np.bincount(xv, minlength=m_val))


def test_empty_returns_zeros_of_minlength(backend):
    x = at.lvector("x")
    w = at.dvector("w")
    f = compiled([x], at_bincount(x, minlength=4), backend=backend)
    out = f(np.zeros(0, dtype=np.int64))
    np.testing.assert_array_equal(out, np.zeros(4, dtype=np.int64))
    assert out.dtype == np.int64
    g = compiled([x, w], at_bincount(x, weights=w, minlength=3), backend=backend)
    np.testing.assert_array_equal(g(np.zeros(0, np.int64), np.zeros(0)), np.zeros(3))
    h = compiled([x], at_bincount(x), backend=backend)
    assert h(np.zeros(0, dtype=np.int64)).shape == (0,)


@pytest.mark.parametrize("value", [0, 1, 17, 4095, 4096, 70_000])
def test_single_element_and_all_equal(value, openmp, backend):
    x = at.lvector("x")
    f = compiled([x], at_bincount(x), backend=backend)
    np.testing.assert_array_equal(f(np.array([value])), np.bincount([value]))
    xv = np.full(300_000, value, dtype=np.int64)
    np.testing.assert_array_equal(f(xv), np.bincount(xv))


@pytest.mark.parametrize("bins", [1, 2, 16, 255, 256, 1000, 4097, 65_536, 300_000, 1_000_000])
def test_bin_counts_1_to_1e6(bins, rng, openmp, backend):
    x = at.ivector("x")
    f = compiled([x], at_bincount(x), backend=backend)
    for size in (bins // 3 + 1, 200_000):
        xv = rng.integers(0, bins, size=size).astype(np.int32)
        xv[-1] = bins - 1
        np.testing.assert_array_equal(f(xv), expected_counts(xv))


@pytest.mark.cpu_only("compares OpenMP off and on, a CPU setting")
def test_openmp_on_and_off_identical_integer_results(rng, backend):
    x = at.lvector("x")
    w = at.lvector("w")
    inputs = (
        rng.integers(0, 50, size=1_000_000),
        rng.zipf(1.3, size=500_000) % 100_000,
        np.full(400_000, 3),
        rng.integers(0, 3_000_000, size=400_000),
    )
    outs = {}
    for flag in (False, True):
        with aesara.config.change_flags(openmp=flag):
            f = compiled([x, w], [at_bincount(x), at_bincount(x, weights=w)])
        ops = [n.op for n in f.maker.fgraph.toposort() if isinstance(n.op, Bincount)]
        assert len(ops) == 2 and all(op.openmp == flag for op in ops)
        outs[flag] = [f(xv, xv * 3 - 7) for xv in inputs]
    for xv, counts in zip(inputs, outs[False]):
        np.testing.assert_array_equal(counts[0], np.bincount(xv))
    for a, b in zip(outs[False], outs[True]):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


def test_top_of_dtype_values_work_like_numpy(backend):
    for dtype, top in (("int8", 127), ("int16", 32767), ("uint8", 255), ("uint16", 65535)):
        x = at.vector("x", dtype=dtype)
        f = compiled([x], at_bincount(x), backend=backend)
        xv = np.array([top, 0, top], dtype=dtype)
        out = f(xv)
        assert out.shape == (top + 1,)
        np.testing.assert_array_equal(out, expected_counts(xv))


def test_small_count_dtype_wraps_like_aesara(backend):
    x = at.bvector("x")
    f = compiled([x], at_bincount(x), backend=backend)
    xv = np.full(300, 5, dtype=np.int8)
    out = f(xv)
    assert out.dtype == np.int8
    assert out[5] == np.int8(300 - 256)
    # Aesara's own graph, on the host, is the reference on both backends.
    g = aesara.function([x], at_bincount(x), mode=FAST_RUN.excluding("bincount"))
    np.testing.assert_array_equal(out, g(xv))


def test_nan_and_inf_weights_sum_like_numpy(backend):
    x = at.lvector("x")
    w = at.dvector("w")
    f = compiled([x, w], at_bincount(x, weights=w), backend=backend)
    xv = np.array([0, 0, 1, 2, 2, 3])
    wv = np.array([np.inf, -np.inf, np.nan, np.inf, 1.0, -0.0])
    np.testing.assert_array_equal(f(xv, wv), np.bincount(xv, weights=wv))


def test_strided_inputs(rng, openmp, backend):
    x = at.lvector("x")
    w = at.dvector("w")
    f = compiled([x, w], [at_bincount(x), at_bincount(x, weights=w)], backend=backend)
    base = rng.integers(0, 100, size=(200_000, 3))
    wbase = rng.random((200_000, 2))
    xv, wv = base[:, 1], wbase[:, 0]
    assert not xv.flags.c_contiguous
    counts, sums = f(xv, wv)
    np.testing.assert_array_equal(counts, np.bincount(xv))
    np.testing.assert_allclose(sums, np.bincount(xv, weights=wv))
    xr = base[::-1, 2]
    np.testing.assert_array_equal(f(xr, wv)[0], np.bincount(xr))


def test_shared_variable_seed_case(rng, backend):
    xv = rng.integers(0, 1000, size=1_000_000)
    x = backend.shared(xv)
    f = compiled([], at_bincount(x), backend=backend)
    np.testing.assert_array_equal(f(), np.bincount(xv))


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint64"])
def test_scatter_add_form_matches_add_at(dtype, rng, openmp, backend):
    idx = at.vector("idx", dtype=dtype)
    w = at.dvector("w")
    n = 300
    f = compiled([idx, w], at.inc_subtensor(at.zeros(n)[idx], w), backend=backend)
    lo = 0 if dtype.startswith("u") else -n
    hi = min(n, np.iinfo(dtype).max + 1)
    iv = rng.integers(max(lo, np.iinfo(dtype).min), hi, size=100_000).astype(dtype)
    wv = rng.random(100_000)
    ref = np.zeros(n)
    np.add.at(ref, iv.astype(np.int64), wv)
    np.testing.assert_allclose(f(iv, wv), ref, rtol=1e-10)


def test_scatter_add_form_counts_and_scalar_increment(rng, backend):
    idx = at.lvector("idx")
    n = at.lscalar("n")
    iv = rng.integers(-50, 50, size=10_000)
    f = compiled([idx, n], at.inc_subtensor(at.zeros(n)[idx], 1), backend=backend)
    ref = np.zeros(50)
    np.add.at(ref, iv, 1)
    np.testing.assert_array_equal(f(iv, 50), ref)
    g = compiled([idx], at.inc_subtensor(at.zeros(50, dtype="int32")[idx], 3), backend=backend)
    ref = np.zeros(50, dtype=np.int32)
    np.add.at(ref, iv, 3)
    out = g(iv)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, ref)


def test_scatter_add_form_keeps_static_shape(backend):
    idx = at.lvector("idx")
    out = at.inc_subtensor(at.zeros(7)[idx], 1.0)
    f = compiled([idx], out, backend=backend)
    assert f.maker.fgraph.outputs[0].type.shape == (7,)
    np.testing.assert_array_equal(f(np.array([6, -1, 0])), [1, 0, 0, 0, 0, 0, 2])


def test_direct_op_builder(rng, backend):
    x = at.lvector("x")
    w = at.dvector("w")
    f = compiled([x, w], [bincount(x, minlength=3), bincount(x, weights=w)], backend=backend)
    xv = rng.integers(0, 10, size=100)
    wv = rng.random(100)
    counts, sums = f(xv, wv)
    np.testing.assert_array_equal(counts, np.bincount(xv, minlength=3))
    np.testing.assert_allclose(sums, np.bincount(xv, weights=wv))


@pytest.mark.parametrize("mode", ["bincount", "scatter"])
def test_python_linker_perform_matches_c(mode, rng, backend):
    x = at.lvector("x")
    w = at.dvector("w")
    n = 40 if mode == "scatter" else 5
    outs = [Bincount(mode)(x, n), Bincount(mode)(x, n, w)]
    xv = rng.integers(-40 if mode == "scatter" else 0, 40, size=1000)
    wv = rng.random(1000)
    f_py = compiled([x, w], outs, mode=PY_MODE, backend=backend)
    f_c = compiled([x, w], outs, backend=backend)
    for a, b in zip(f_py(xv, wv), f_c(xv, wv)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(
        f_py(xv, wv)[1], reference_bincount(xv, n, wv, mode=mode), rtol=1e-12
    )


def test_infer_shape(rng, backend):
    # The shape is computed without running the Op (check=False).
    x = at.lvector("x")
    m = at.lscalar("m")
    out = Bincount("bincount")(x, m)
    f = compiled([x, m], out.shape, backend=backend, check=False)
    for xv, mv in ((rng.integers(0, 100, 50), 3), (np.zeros(0, np.int64), 5), (np.array([9]), 20)):
        assert tuple(f(xv, mv)) == np.bincount(xv, minlength=mv).shape
    s = Bincount("scatter")(x, m)
    g = compiled([x, m], s.shape, backend=backend, check=False)
    assert tuple(g(np.array([1, 2]), 11)) == (11,)


def test_gradient_wrt_weights_numeric(rng, backend):
    x = backend.shared(rng.integers(0, 6, size=30), name="x")

    def fn(w):
        return Bincount("bincount")(x, 8, w)

    w = at.dvector("w")
    backend.check_graph(aesara.function([w], fn(w)))
    verify_grad(fn, [rng.random(30)], rng=rng)


def test_gradient_is_g_of_x(rng, backend):
    x = at.lvector("x")
    w = at.dvector("w")
    g_out = at.dvector("g")
    out = at_bincount(x, weights=w)
    gw = aesara.grad(None, w, known_grads={out: g_out})
    f = compiled([x, w, g_out], [out, gw], backend=backend)
    xv = rng.integers(0, 10, size=40)
    wv = rng.random(40)
    gv = rng.random(10)
    sums, grad = f(xv, wv, gv)
    np.testing.assert_allclose(grad, gv[xv])
    np.testing.assert_allclose(sums, np.bincount(xv, weights=wv))


@pytest.mark.cpu_only("GpuBincount's make_node errors are tests/test_gpu_type.py::test_make_node_refuses")
def test_make_node_type_errors(backend):
    with pytest.raises(TypeError):
        Bincount()(at.dvector(), 0)
    with pytest.raises(TypeError):
        Bincount()(at.lmatrix(), 0)
    with pytest.raises(TypeError):
        Bincount()(at.lvector(), at.dscalar())
    with pytest.raises(TypeError):
        Bincount()(at.lvector(), 0, at.dmatrix())
    with pytest.raises(TypeError):
        Bincount("bincount", out_dtype="float32")(at.lvector(), 0, at.dvector())
    with pytest.raises(TypeError):
        at_bincount(at.lmatrix())
    with pytest.raises(ValueError):
        Bincount("histogram")
    with pytest.raises(TypeError):
        Bincount(out_dtype="complex128")


@given(
    xv=st.sampled_from(INT_DTYPES).flatmap(
        lambda dt: hnp.arrays(
            dtype=dt,
            shape=st.integers(0, 3000),
            elements=st.integers(0, min(2000, int(np.iinfo(dt).max))),
        )
    ),
    minlength=st.integers(0, 2500),
    weighted=st.booleans(),
)
# Edges that the draws reach only by chance: empty x (with and without
# weights), the top of a small dtype, minlength just above max(x), all equal.
@example(xv=np.array([], dtype="int64"), minlength=0, weighted=True)
@example(xv=np.array([], dtype="uint8"), minlength=0, weighted=False)
@example(xv=np.array([127, 0, 127], dtype="int8"), minlength=0, weighted=False)
@example(xv=np.array([255], dtype="uint8"), minlength=256, weighted=True)
@example(xv=np.full(3000, 2000, dtype="uint64"), minlength=2001, weighted=False)
def test_property_against_numpy(backend, xv, minlength, weighted):
    backend.require()
    x_var, w_var, f_counts, f_weighted = _property_functions(backend, str(xv.dtype))
    if weighted:
        wv = np.linspace(-1.0, 1.0, xv.size)
        out = f_weighted(xv, wv, minlength)
        ref = np.bincount(xv.astype(np.int64), weights=wv, minlength=minlength)
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    else:
        out = f_counts(xv, minlength)
        np.testing.assert_array_equal(out, expected_counts(xv, minlength))


_PROPERTY_CACHE = {}


def _property_functions(backend, dtype):
    key = (backend.name, dtype)
    if key not in _PROPERTY_CACHE:
        x = at.vector("x", dtype=dtype)
        w = at.dvector("w")
        m = at.lscalar("m")
        _PROPERTY_CACHE[key] = (
            x,
            w,
            compiled([x, m], at_bincount(x, minlength=m), backend=backend),
            compiled([x, w, m], at_bincount(x, weights=w, minlength=m), backend=backend),
        )
    return _PROPERTY_CACHE[key]


@pytest.mark.parametrize("bins", [200, 70_000, 3_000_000])
@pytest.mark.parametrize("weighted", [False, True])
def test_runs_of_equal_values(bins, weighted, rng, openmp, backend):
    """Run-heavy data takes the run-aggregating loops (private and direct paths)."""
    x = at.lvector("x")
    w = at.dvector("w")
    out = at_bincount(x, weights=w if weighted else None)
    f = compiled([x, w] if weighted else [x], out, backend=backend)
    values = rng.integers(0, bins, size=3000)
    lengths = rng.integers(1, 200, size=3000)
    for xv in (np.repeat(values, lengths), np.full(200_000, bins - 1), np.sort(rng.integers(0, bins, 300_000))):
        if weighted:
            wv = rng.standard_normal(xv.size)
            np.testing.assert_allclose(f(xv, wv), np.bincount(xv, weights=wv), rtol=1e-9, atol=1e-9)
        else:
            np.testing.assert_array_equal(f(xv), np.bincount(xv))
