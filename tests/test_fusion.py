"""The fusion of an elementwise x or weights into the CPU bincount (issue 20).

Every graph is compiled twice, with the rewrite ``bincount_fusion`` and with
``mode.excluding("bincount_fusion")`` (the unfused graph: an ``Elemwise``
then ``Bincount``), and the two must agree: bit for bit for integers, within
the sum-order tolerance for floats, and with the same exception and message
for bad input.  Several graphs share one compiled function where possible,
to keep the compiles few.
"""
import pickle

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import get_default_mode
from aesara.graph.basic import Apply
from aesara.scalar import basic as aes
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.extra_ops import bincount

from aesara_bincount import Bincount, FusedBincount
from aesara_bincount_core import _c_code

FUSED = get_default_mode()
UNFUSED = FUSED.excluding("bincount_fusion")


def _ops(f):
    return [type(n.op) for n in f.maker.fgraph.toposort()]


def _outcome(f, *args):
    """The results of ``f(*args)``, or ``(exception type, message)``."""
    try:
        return f(*args)
    except Exception as err:  # noqa: BLE001  (the outcome is compared)
        return (type(err), str(err).splitlines()[0])


def _assert_close_sums(got, want):
    """Float sums equal up to the order of the additions (NaN and inf where
    they are; the tolerance of the dtype's epsilon times the values' scale)."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(got[np.isinf(got)], want[np.isinf(want)])
    fin = np.isfinite(want)
    scale = 1.0 + (np.abs(want[fin]).max() if fin.any() else 0.0)
    np.testing.assert_allclose(got[fin], want[fin], rtol=0, atol=1e3 * np.finfo(got.dtype).eps * scale)


def _assert_same_outcome(fused, unfused, *args, outputs=None, mode=UNFUSED):
    """The same results, or the same exception and message.

    ``outputs``: ``(inputs, outs)`` of a function of several outputs.  Where
    two of its outputs fail with different errors, which one the function
    raises follows the order of its nodes, which fusion changes (as Aesara's
    own rewrites do): then each function's error must be the error of one of
    the outputs alone, compiled under ``mode``."""
    a, b = _outcome(fused, *args), _outcome(unfused, *args)
    if isinstance(b, tuple):
        if a != b and isinstance(a, tuple) and outputs is not None:
            inputs, outs = outputs
            alone = [_outcome(aesara.function(inputs, o, mode=mode, on_unused_input="ignore"), *args)
                     for o in outs]  # fmt: skip
            errors = [r for r in alone if isinstance(r, tuple)]
            assert a in errors and b in errors, (a, b, errors)
            return
        assert a == b
        return
    assert not isinstance(a, tuple), a
    for got, want in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
        assert got.dtype == want.dtype and got.shape == want.shape
        if got.dtype.kind == "f":
            _assert_close_sums(got, want)
        else:
            np.testing.assert_array_equal(got, want)


def _both(inputs, outputs, openmp=False):
    with aesara.config.change_flags(openmp=openmp):
        return (aesara.function(inputs, outputs, mode=FUSED),
                aesara.function(inputs, outputs, mode=UNFUSED))


def test_issue_cells_compile_to_one_fused_node():
    """The three graphs of the issue: one FusedBincount node each, same results."""
    x, x4 = at.lvector("x"), at.lvector("x4")
    v, u, th = at.dvector("v"), at.dvector("u"), at.dscalar("th")
    graphs = [bincount(x, weights=th * v), bincount(x, weights=v * u + th), bincount(x4 // 4)]
    rng = np.random.default_rng(0)
    xv, x4v = rng.integers(0, 1000, 5000), rng.integers(0, 4000, 5000)
    vv, uv = rng.standard_normal(5000), rng.standard_normal(5000)
    vv[:3] = [-0.0, np.inf, 1e-310]
    for out, args, vals, ref in [
        (graphs[0], [x, v, th], (xv, vv, 2.5), np.bincount(xv, weights=2.5 * vv)),
        (graphs[1], [x, v, u, th], (xv, vv, uv, -1.5), np.bincount(xv, weights=vv * uv - 1.5)),
        (graphs[2], [x4], (x4v,), np.bincount(x4v // 4)),
    ]:
        fused, unfused = _both(args, out)
        assert _ops(fused) == [FusedBincount], _ops(fused)
        assert FusedBincount not in _ops(unfused) and Elemwise in _ops(unfused)
        np.testing.assert_allclose(fused(*vals), ref)
        _assert_same_outcome(fused, unfused, *vals)


def test_computed_x_follows_bincount_and_aesara_dtype_rules():
    """Negative computed values raise naming them; int8 wrap-around, top of the
    dtype, floor division, casts and division by zero are Aesara's."""
    a8, b8 = at.bvector("a8"), at.bvector("b8")
    f = at.dvector("f")
    a = at.lvector("a")
    k = at.lscalar("k")
    outs = [
        bincount(a8 + b8),            # int8 sum: wraps to negative, or reaches 127
        bincount(a // k),             # floor division: -1 // 4 == -1
        bincount((f * 3).astype("int16")),  # float to int cast truncates
        bincount(at.maximum(a - 3, 0), minlength=2),
    ]
    fused, unfused = _both([a8, b8, a, k, f], outs)
    assert _ops(fused).count(FusedBincount) == 4
    i8 = np.int8
    cases = [
        # a8 + b8 == 127, the top of int8: 128 bins
        (np.array([100, 1, 0], i8), np.array([27, 2, 0], i8), np.arange(6), 4, np.array([0.5, 2.9, 0.0])),
        # 100 + 100 wraps to -56 in int8: ValueError naming -56 at position 1
        (np.array([1, 100], i8), np.array([2, 100], i8), np.arange(4), 2, np.array([1.0, 2.0])),
        # -1 // 4 == -1: ValueError naming -1 at position 0
        (np.array([1], i8), np.array([1], i8), np.array([-1, 5]), 4, np.array([1.0])),
        # division by zero: ZeroDivisionError, as Aesara's Elemwise raises
        (np.array([1], i8), np.array([1], i8), np.array([3, 5]), 0, np.array([1.0])),
        # a float cast to int16 that is negative: ValueError
        (np.array([1], i8), np.array([1], i8), np.array([3]), 1, np.array([1.0, -0.4, -1.0])),
    ]
    for args in cases:
        _assert_same_outcome(fused, unfused, *args)
    assert fused(*cases[0])[0].shape == (128,)
    err = _outcome(fused, *cases[1])
    assert err[0] is ValueError and "-56 at position 1" in err[1]
    assert _outcome(fused, *cases[3])[0] is ZeroDivisionError


def test_top_of_dtype_computed_values():
    """uint8 255 and int64 values near the top: the bincount rules of Bincount."""
    u8 = at.vector("u8", dtype="uint8")
    big = at.lvector("big")
    fused, unfused = _both([u8, big], [bincount(u8 + np.uint8(1)), bincount(big * 2)])
    assert _ops(fused).count(FusedBincount) == 2
    # 254 + 1 == 255: 256 bins; 255 + 1 wraps to 0 in uint8
    _assert_same_outcome(fused, unfused, np.array([254, 255, 3], np.uint8), np.array([1, 2]))
    # 2 * (2**62) wraps to -2**63 in int64: ValueError naming it
    _assert_same_outcome(fused, unfused, np.array([1], np.uint8), np.array([3, 2**62]))
    # (2**62 - 1) * 2 = 2**63 - 2: too large for an array length (ValueError)
    _assert_same_outcome(fused, unfused, np.array([1], np.uint8), np.array([2**62 - 1]))


def test_constants_keep_their_dtype():
    """float32 constants (0.1, the smallest subnormal, near the top) and a uint64
    one above 2**63 are what NumPy and the unfused graph take, bit for bit: one
    weight per bin, so no sum order blurs a rounding; comparisons with 0.1f."""
    x, v = at.lvector("x"), at.vector("v", dtype="float32")
    u = at.vector("u", dtype="uint64")
    tiny, c = np.float32(1e-45), np.float32(0.1)
    outs = [
        bincount(x, weights=v * c),
        bincount(x, weights=v * tiny * np.float32(3)),
        bincount(x, weights=v * np.float32(3.4e38)),
        bincount(at.cast(v > c, "int64")),
        bincount(at.cast(u // np.uint64(2**63 + 1), "int64")),
    ]
    fused, unfused = _both([x, v, u], outs)
    assert _ops(fused).count(FusedBincount) == len(outs), _ops(fused)
    rng = np.random.default_rng(5)
    n = 2000
    vv = rng.standard_normal(n).astype("float32")
    vv[:3] = [0.1, -0.0, 0.64]
    uu = np.array([2**64 - 1, 2**63 + 1, 2**63, 5] * (n // 4), dtype="uint64")
    got, want = fused(np.arange(n), vv, uu), unfused(np.arange(n), vv, uu)
    with np.errstate(over="ignore"):
        numpy_weights = [vv * c, None, vv * np.float32(3.4e38)]  # Aesara orders v * tiny * 3 its way
    for g, w, ref in zip(got, want, numpy_weights):
        np.testing.assert_array_equal(g, w)
        if ref is not None:
            np.testing.assert_array_equal(g, np.bincount(np.arange(n), weights=ref).astype("float32"))
    np.testing.assert_array_equal(got[3], np.bincount((vv > c).astype("int64")))
    np.testing.assert_array_equal(got[4], np.bincount((uu // np.uint64(2**63 + 1)).astype("int64")))
    np.testing.assert_array_equal(got[3], want[3])


def test_scatter_add_onto_zeros_is_fused():
    """inc_subtensor(zeros(n)[idx + k], w * s): negative indices wrap, bad ones raise."""
    idx, w, s = at.lvector("idx"), at.dvector("w"), at.dscalar("s")
    out = at.inc_subtensor(at.zeros(5)[idx - 1], w * s)
    fused, unfused = _both([idx, w, s], out)
    assert _ops(fused) == [FusedBincount] and fused.maker.fgraph.toposort()[0].op.mode == "scatter"
    _assert_same_outcome(fused, unfused, np.array([0, 1, 5, 3]), np.array([1.0, 2.0, 3.0, -0.0]), 2.0)
    _assert_same_outcome(fused, unfused, np.array([0, 7]), np.array([1.0, 2.0]), 2.0)   # 6: IndexError
    _assert_same_outcome(fused, unfused, np.array([0, 7]), np.array([1.0]), 2.0)        # lengths differ
    # one increment for every index (the weights' inputs of length 1)
    _assert_same_outcome(fused, unfused, np.array([0, 1, 1]), np.array([4.0]), 0.5)


@pytest.mark.parametrize("openmp", [False, True], ids=["openmp_off", "openmp_on"])
def test_threads_same_results_and_errors(openmp):
    """The fused path on the worker pool: results, reproducibility and errors."""
    x, v, th = at.lvector("x"), at.dvector("v"), at.dscalar("th")
    y = at.ivector("y")
    outs = [bincount(x, weights=v * th), bincount(y // 3), bincount(x % 7000, weights=th + v)]
    fused, unfused = _both([x, y, v, th], outs, openmp=openmp)
    assert _ops(fused).count(FusedBincount) == 3
    rng = np.random.default_rng(1)
    n = 300_000
    xv = rng.integers(0, 50_000, n)
    xv[-1] = 2**20  # grows a histogram past the threaded limit: one thread starts again
    yv = rng.integers(0, 3000, n).astype("int32")
    vv = rng.standard_normal(n)
    _assert_same_outcome(fused, unfused, xv, yv, vv, 0.75)
    first = fused(xv, yv, vv, 0.75)
    again = fused(xv, yv, vv, 0.75)
    for a, b in zip(first, again):
        assert a.tobytes() == b.tobytes()
    yv[n // 2] = -7  # -7 // 3 == -3: the same message whatever the thread count
    yv[n - 5] = -300
    _assert_same_outcome(fused, unfused, xv, yv, vv, 0.75)
    assert "-3 at position 150000" in _outcome(fused, xv, yv, vv, 0.75)[1]


class NoC(aes.UnaryScalarOp):
    """A scalar op with no C code."""

    def impl(self, x):
        return x + 1


class CallsPython(aes.UnaryScalarOp):
    """A scalar op whose C code calls Python (safe in Aesara's Elemwise, not inline)."""

    def impl(self, x):
        return x + 1

    def c_code(self, node, name, inputs, outputs, sub):
        return f"{outputs[0]} = {inputs[0]} + (PyErr_Occurred() == NULL);"

    def c_code_cache_version(self):
        return (1,)


def test_when_not_to_fuse():
    """Other clients, no C code, C code calling Python: left unfused and correct."""
    x, v = at.lvector("x"), at.dvector("v")
    w = v * 2
    shared_w = [bincount(x, weights=w), w]  # the weights are also an output
    no_c = bincount(x, weights=Elemwise(NoC(aes.upgrade_to_float, name="no_c"))(v))
    calls_py = bincount(x, weights=Elemwise(CallsPython(aes.upgrade_to_float, name="calls_py"))(v))
    xv, vv = np.array([0, 3, 3, 1]), np.array([1.0, 2.0, 3.0, 4.0])
    for outs, want in [
        (shared_w, np.bincount(xv, weights=2 * vv)),
        (no_c, np.bincount(xv, weights=vv + 1)),
        (calls_py, np.bincount(xv, weights=vv + 1)),
    ]:
        f = aesara.function([x, v], outs)
        assert FusedBincount not in _ops(f) and Bincount in _ops(f), _ops(f)
        got = f(xv, vv)
        np.testing.assert_allclose(got[0] if isinstance(got, list) else got, want)
    # The same graph fuses, and fusion can be switched off by name.
    f = aesara.function([x, v], bincount(x, weights=v * 2))
    assert _ops(f) == [FusedBincount]
    f = aesara.function([x, v], bincount(x, weights=v * 2), mode=UNFUSED)
    assert FusedBincount not in _ops(f) and Bincount in _ops(f)
    f = aesara.function([x, v], bincount(x, weights=v * 2), mode=FUSED.excluding("bincount"))
    assert Bincount not in _ops(f) and FusedBincount not in _ops(f)


def test_cache_version_covers_generated_code_and_files(monkeypatch):
    """Distinct scalar graphs get distinct versions; equal ones the same (one compile)."""
    x, v, th = at.lvector("x"), at.dvector("v"), at.dscalar("th")

    def node_of(out):
        f = aesara.function([x, v, th], out)
        (node,) = [n for n in f.maker.fgraph.toposort() if isinstance(n.op, FusedBincount)]
        return node

    mul1, mul2 = node_of(bincount(x, weights=th * v)), node_of(bincount(x, weights=th * v))
    add = node_of(bincount(x, weights=th + v))
    key = lambda n: n.op.c_code_cache_version_apply(n)  # noqa: E731
    assert key(mul1) == key(mul2) and key(mul1) != key(add)
    assert mul1.op == mul2.op and hash(mul1.op) == hash(mul2.op)
    assert set(FusedBincount.c_sources) >= {"common/host_helpers.h", "cpu/worker_pool.h", "cpu/fused_bincount.c"}
    base = key(mul1)
    original = _c_code.read_source
    for name in FusedBincount.c_sources:
        monkeypatch.setattr(_c_code, "read_source",
                            lambda n, name=name: original(n) + ("\n/* edit */" if n == name else ""))
        assert key(mul1) != base, name
    monkeypatch.setattr(_c_code, "read_source", original)


def test_pickle_perform_and_length():
    """A fused function pickles; perform (the Python linker) agrees; .shape reads the output."""
    x, v, th = at.lvector("x"), at.dvector("v"), at.dscalar("th")
    out = bincount(x * 2, weights=v - th)
    f = aesara.function([x, v, th], [out, out.shape[0]])
    assert _ops(f).count(FusedBincount) == 1
    xv, vv = np.array([0, 4, 1]), np.array([1.0, 2.0, 3.0])
    want = np.bincount(xv * 2, weights=vv - 0.5)
    got, length = f(xv, vv, 0.5)
    np.testing.assert_allclose(got, want)
    assert length == 9
    g = pickle.loads(pickle.dumps(f))
    np.testing.assert_allclose(g(xv, vv, 0.5)[0], want)
    py = aesara.function([x, v, th], out, mode=FUSED.clone(linker="py"))
    assert FusedBincount in _ops(py)
    np.testing.assert_allclose(py(xv, vv, 0.5), want)
    with pytest.raises(ValueError, match="-4 at position 1"):
        py(np.array([0, -2]), vv[:2], 0.5)


def test_fused_op_checks_its_inputs():
    """make_node refuses wrong layouts and dtypes with TypeError."""
    a = aes.float64()
    comp = aes.Composite([a], [a * 2])
    op = FusedBincount("bincount", "float64", w_op=comp)
    x, v = at.lvector(), at.dvector()
    assert isinstance(op.make_node(x, 0, v), Apply)
    with pytest.raises(TypeError, match="expected 3 inputs"):
        op.make_node(x, 0)
    with pytest.raises(TypeError, match="dtypes"):
        op.make_node(x, 0, at.fvector())
    with pytest.raises(TypeError, match="include a vector"):
        op.make_node(x, 0, at.dscalar())
    with pytest.raises(TypeError, match="Composite"):
        FusedBincount("bincount", "float64", w_op=aes.add)


def test_gradient_of_fused_weights():
    """d/dv sum(c * bincount(x, th * v)) = th * c[x], through the unfused graph."""
    a, b = aes.float64(), aes.float64()
    op = FusedBincount("bincount", "float64", w_op=aes.Composite([a, b], [a * b]))
    x, v, th, c = at.lvector("x"), at.dvector("v"), at.dscalar("th"), at.dvector("c")
    out = op(x, 0, th, v)
    gv, gth = aesara.grad((out * c).sum(), [v, th])
    f = aesara.function([x, v, th, c], [gv, gth])
    xv, vv, cv = np.array([0, 2, 2]), np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0])
    got_v, got_th = f(xv, vv, 0.5, cv)
    np.testing.assert_allclose(got_v, 0.5 * cv[xv])
    np.testing.assert_allclose(got_th, (cv[xv] * vv).sum())


def test_length_one_inputs_broadcast_as_in_aesara():
    """An input of the elementwise graph with length 1 when the function runs
    is broadcast, as Aesara 2.9's Elemwise broadcasts it; other lengths that
    differ raise the unfused graph's ValueError (in the fused node's words)."""
    x, y = at.lvector("x"), at.lvector("y")
    v, u = at.dvector("v"), at.dvector("u")
    outs = [bincount(x + y), bincount(x, weights=v * u), at.inc_subtensor(at.zeros(16)[x * y], v + u)]
    fused = aesara.function([x, y, v, u], outs, mode=FUSED)
    unfused = aesara.function([x, y, v, u], outs, mode=UNFUSED)
    assert sum(t is FusedBincount for t in _ops(fused)) == 3, _ops(fused)
    xs, vs = np.array([1, 2, 3, 0]), np.array([0.5, -0.0, 2.0, 1.5])
    for ys, us in (([2], [2.0]), ([1, 0, 2, 3], [3.0]), ([2], [1.0, 2.0, 3.0, 4.0]), ([5, 1, 0, 2], [1.5] * 4)):
        ys, us = np.array(ys), np.array(us)
        _assert_same_outcome(fused, unfused, xs, ys, vs, us)
        want = [np.bincount(xs + ys), np.bincount(xs, weights=vs * us), np.zeros(16)]
        np.add.at(want[2], xs * ys, vs + us)
        for got, w in zip(fused(xs, ys, vs, us), want):
            np.testing.assert_array_equal(got, w)
    with pytest.raises(ValueError):
        fused(xs, np.array([1, 2]), vs, np.array([1.0]))
    with pytest.raises(ValueError):
        fused(np.array([0]), np.array([1, 2]), np.array([1.0, 2.0]), np.array([1.0]))


def test_two_failing_outputs_raise_the_error_of_one_of_them():
    """A function whose two outputs fail differently (a negative x, an integer
    modulo by zero) raises one of the two errors, fused or not; which one
    follows the order of the nodes (found by the fuzzing of
    tests/test_fusion_fuzz.py, where the unfused graph computed every
    elementwise node first)."""
    a, c = at.vector("a", dtype="int64"), at.vector("c", dtype="uint16")
    outs = [bincount(a - 1), bincount(a % c)]
    fused = aesara.function([a, c], outs, mode=FUSED)
    unfused = aesara.function([a, c], outs, mode=UNFUSED)
    args = (np.array([0, 1], dtype="int64"), np.array([0, 1], dtype="uint16"))
    errors = {_outcome(fused, *args), _outcome(unfused, *args)}
    assert errors <= {(ValueError, _outcome(aesara.function([a], outs[0], mode=UNFUSED), args[0])[1]),
                      (ZeroDivisionError, "integer modulo by zero")}, errors  # fmt: skip
    _assert_same_outcome(fused, unfused, *args, outputs=([a, c], outs))
