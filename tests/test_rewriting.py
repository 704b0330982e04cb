"""The rewrite: which graphs become Bincount, and what the compiled graph holds."""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import get_default_mode
from aesara.graph.fg import FunctionGraph
from aesara.graph.rewriting.utils import rewrite_graph
from aesara.raise_op import Assert
from aesara.tensor.extra_ops import bincount
from aesara.tensor.math import Max, MaxAndArgmax
from aesara.tensor.subtensor import AdvancedIncSubtensor1, advanced_inc_subtensor1

import aesara_bincount  # noqa: F401
from aesara_bincount import Bincount, match_bincount
from aesara_bincount_core._c_code import messages
from aesara_bincount_core.op import _constant_int

from procs import run_python

FAST_RUN = get_default_mode()
NO_BINCOUNT = FAST_RUN.excluding("bincount")


def op_types(f):
    return [type(node.op) for node in f.maker.fgraph.toposort()]


def bincount_nodes(f):
    return [node for node in f.maker.fgraph.toposort() if isinstance(node.op, Bincount)]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("minlength", [None, 5])
@pytest.mark.parametrize("assert_nonneg", [False, True])
@pytest.mark.parametrize("dtype", ["int8", "int64", "uint64"])
def test_every_form_of_extra_ops_bincount_is_rewritten(weighted, minlength, assert_nonneg, dtype):
    x = at.vector("x", dtype=dtype)
    w = at.dvector("w")
    out = bincount(x, weights=w if weighted else None, minlength=minlength, assert_nonneg=assert_nonneg)
    inputs = [x, w] if weighted else [x]
    f = aesara.function(inputs, out)
    types = op_types(f)
    (node,) = bincount_nodes(f)
    assert node.op.mode == "bincount"
    assert AdvancedIncSubtensor1 not in types
    assert Max not in types and MaxAndArgmax not in types
    assert (Assert in types) == assert_nonneg
    assert f.maker.fgraph.outputs[0].type == out.type
    xv = np.array([3, 1, 3, 0], dtype=dtype)
    args = [xv, np.array([0.5, 1.0, 2.0, 4.0])] if weighted else [xv]
    expected = np.bincount(xv.astype(np.int64), weights=args[1] if weighted else None, minlength=minlength or 0)
    np.testing.assert_allclose(f(*args), expected)

    g = aesara.function(inputs, out, mode=NO_BINCOUNT)
    assert not bincount_nodes(g)
    assert AdvancedIncSubtensor1 in op_types(g)
    np.testing.assert_allclose(g(*args), expected)


def test_shared_variable_graph_holds_bincount_and_no_advanced_inc_subtensor():
    x = aesara.shared(np.arange(10, dtype="int64"))
    f = aesara.function([], bincount(x))
    types = op_types(f)
    assert Bincount in types and AdvancedIncSubtensor1 not in types
    g = aesara.function([], bincount(x), mode=FAST_RUN.excluding("bincount"))
    assert Bincount not in op_types(g)


def test_assert_nonneg_still_raises_assertion_error():
    x = at.lvector("x")
    f = aesara.function([x], bincount(x, assert_nonneg=True))
    with pytest.raises(AssertionError):
        f(np.array([1, -1, 2]))
    np.testing.assert_array_equal(f(np.array([1, 1, 2])), [0, 2, 1])


def test_negative_value_raises_value_error_naming_it():
    x = at.lvector("x")
    f = aesara.function([x], bincount(x))
    with pytest.raises(ValueError, match=r"negative value -1 at position 0"):
        f(np.array([-1, 0, 2]))
    g = aesara.function([x], bincount(x, minlength=5))
    with pytest.raises(ValueError, match=r"negative value -5 at position 0"):
        g(np.array([-5, 1]))
    assert messages()["BC_MSG_NEGATIVE"] % (-5, 0) in _error_text(g, np.array([-5, 1]))
    # The function still works afterwards.
    np.testing.assert_array_equal(g(np.array([4, 1])), [0, 1, 0, 0, 1])


def _error_text(f, *args):
    try:
        f(*args)
    except Exception as exc:  # noqa: BLE001
        return str(exc)
    raise AssertionError("no error raised")


def test_aesara_graph_wraps_negative_values_silently():
    """The behaviour the rewrite deliberately fixes (documented on the Semantics page, docs/semantics.rst)."""
    x = at.lvector("x")
    g = aesara.function([x], bincount(x), mode=NO_BINCOUNT)
    np.testing.assert_array_equal(g(np.array([-1, 0, 2])), [1, 0, 2])


@pytest.mark.parametrize("weighted", [False, True])
def test_general_scatter_add_form(weighted, rng):
    idx = at.lvector("idx")
    w = at.fvector("w")
    n = at.lscalar("n")
    out = at.inc_subtensor(at.zeros(n, dtype="float32")[idx], w if weighted else 1)
    inputs = [idx, n] + ([w] if weighted else [])
    f = aesara.function(inputs, out)
    (node,) = bincount_nodes(f)
    assert node.op.mode == "scatter"
    assert AdvancedIncSubtensor1 not in op_types(f)
    iv = rng.integers(-30, 30, size=500)
    wv = rng.random(500).astype("float32")
    ref = np.zeros(30, dtype="float32")
    np.add.at(ref, iv, wv if weighted else 1)
    args = [iv, 30] + ([wv] if weighted else [])
    np.testing.assert_allclose(f(*args), ref, rtol=1e-5)
    with pytest.raises(IndexError, match=r"index 30 at position 1 is out of bounds"):
        f(*([np.array([0, 30, -31]), 30] + ([wv[:3]] if weighted else [])))
    with pytest.raises(IndexError, match=r"index -31 at position 0"):
        f(*([np.array([-31, 0]), 30] + ([wv[:2]] if weighted else [])))


def test_scatter_add_with_constant_zero_base_and_any_dtype():
    idx = at.lvector("idx")
    base = at.constant(np.zeros(4, dtype="int16"))
    f = aesara.function([idx], advanced_inc_subtensor1(base, at.constant(np.int16(2)), idx))
    assert bincount_nodes(f)
    np.testing.assert_array_equal(f(np.array([0, 3, 3, -1])), np.array([2, 0, 0, 6], dtype="int16"))


def test_float_increments_into_int_base_are_cast_like_aesara():
    idx = at.lvector("idx")
    out = at.inc_subtensor(at.zeros(5, dtype="int32")[idx], 2.7)
    f = aesara.function([idx], out)
    g = aesara.function([idx], out, mode=NO_BINCOUNT)
    assert bincount_nodes(f)
    iv = np.array([0, 0, 4, 2])
    np.testing.assert_array_equal(f(iv), g(iv))


def test_non_matching_graphs_are_left_alone():
    idx = at.lvector("idx")
    base = at.dvector("base")
    # Not zeros: a real increment of a variable.
    f = aesara.function([base, idx], at.inc_subtensor(base[idx], 1.0))
    assert not bincount_nodes(f)
    # set_subtensor is not a scatter-add.
    g = aesara.function([idx], at.set_subtensor(at.zeros(5)[idx], 1.0))
    assert not bincount_nodes(g)
    # Zeros of non-zero value.
    h = aesara.function([idx], at.inc_subtensor(at.ones(5)[idx], 1.0))
    assert not bincount_nodes(h)
    # 2-D base.
    k = aesara.function([idx], at.inc_subtensor(at.zeros((5, 2))[idx], 1.0))
    assert not bincount_nodes(k)


def test_max_of_another_variable_is_scatter_not_bincount():
    x = at.lvector("x")
    y = at.lvector("y")
    out = advanced_inc_subtensor1(at.zeros([at.cast(y.max() + 1, "int64")], dtype="int64"), 1, x)
    f = aesara.function([x, y], out)
    (node,) = bincount_nodes(f)
    assert node.op.mode == "scatter"
    # Negative x wraps in the scatter form, as in Aesara's graph.
    np.testing.assert_array_equal(f(np.array([-1, 0]), np.array([2])), [1, 0, 1])


@pytest.mark.filterwarnings("ignore:A Supervisor feature is missing")
def test_match_on_rewritten_canonical_graph():
    """match_bincount sees the graph as it stands in specialize (MaxAndArgmax)."""
    x = at.ivector("x")
    out = bincount(x, minlength=4)
    fg = FunctionGraph([x], [out], clone=False)
    rewrite_graph(fg, include=("canonicalize",), clone=False)
    (node,) = [n for n in fg.toposort() if isinstance(n.op, AdvancedIncSubtensor1)]
    match = match_bincount(node)
    assert match is not None and match.mode == "bincount"
    assert match.weights is None and match.out_dtype == "int32"
    fg2 = FunctionGraph([x], [out])
    rewrite_graph(fg2, include=("fast_run",), clone=False)
    assert any(isinstance(n.op, Bincount) for n in fg2.toposort())


# --- Graphs in which Aesara's own early passes used to hide the bincount ---
#
# ``pre_local_IncSubtensor_serialize`` (optdb 0.99) moves the other terms of
# ``bincount(x) + a`` into the zeros, and ShapeOpt takes the output's length
# from Aesara's ``max(x) + 1``; the rewrite therefore also runs at 0.03.

def _sum_of_terms_cases():
    x, y = at.lvector("x"), at.lvector("y")
    acc, facc, w = at.lvector("acc"), at.dvector("facc"), at.dvector("w")
    return {
        "plus one": ([x], bincount(x) + 1, lambda xv: np.bincount(xv) + 1, 1),
        "minus one": ([x], bincount(x) - 1, lambda xv: np.bincount(xv) - 1, 1),
        "acc plus": (
            [x, acc], acc + bincount(x, minlength=8),
            lambda xv, a: a + np.bincount(xv, minlength=8), 1,
        ),
        "float acc plus weighted": (
            [x, facc, w], facc + bincount(x, weights=w, minlength=8),
            lambda xv, a, wv: a + np.bincount(xv, weights=wv, minlength=8), 1,
        ),
        "two bincounts": (
            [x, y], bincount(x, minlength=8) + bincount(y, minlength=8),
            lambda xv, yv: np.bincount(xv, minlength=8) + np.bincount(yv, minlength=8), 2,
        ),
        "scaled after add": ([x], (bincount(x) + 1) * 2, lambda xv: (np.bincount(xv) + 1) * 2, 1),
    }


@pytest.mark.parametrize("case", sorted(_sum_of_terms_cases()))
def test_bincount_in_a_sum_is_still_rewritten(case, rng):
    inputs, out, expected, n_ops = _sum_of_terms_cases()[case]
    f = aesara.function(inputs, out)
    assert len(bincount_nodes(f)) == n_ops
    assert all(node.op.mode == "bincount" for node in bincount_nodes(f))
    assert AdvancedIncSubtensor1 not in op_types(f)
    args = []
    for v in inputs:
        if v.name in ("x", "y"):
            args.append(rng.integers(0, 8, size=50))
        elif v.name == "acc":
            args.append(rng.integers(-5, 5, size=8))
        else:
            args.append(rng.random(8 if v.name == "facc" else 50))
    np.testing.assert_allclose(f(*args), expected(*args), rtol=1e-12)
    # The promised error, not Aesara's silent wrap into the top bin.
    bad = list(args)
    bad[0] = np.array([3, -1] + [0] * 48)
    with pytest.raises(ValueError, match="negative value -1"):
        f(*bad)


def test_histogram_accumulated_in_an_update_is_rewritten(rng):
    hist = aesara.shared(np.zeros(10, dtype="int64"), name="hist")
    x = at.lvector("x")
    f = aesara.function([x], [], updates={hist: hist + bincount(x, minlength=10)})
    assert bincount_nodes(f) and AdvancedIncSubtensor1 not in op_types(f)
    total = np.zeros(10, dtype="int64")
    for _ in range(3):
        xv = rng.integers(0, 10, size=100)
        f(xv)
        total += np.bincount(xv, minlength=10)
    np.testing.assert_array_equal(hist.get_value(), total)
    with pytest.raises(ValueError, match="negative"):
        f(np.array([1, -2]))
    np.testing.assert_array_equal(hist.get_value(), total)


@pytest.mark.parametrize("dtype, top", [("int8", 127), ("int16", 32767), ("uint8", 255), ("uint16", 65535)])
def test_length_of_the_result_at_the_top_of_the_dtype(dtype, top):
    # Aesara computes max(x) + 1 in x's dtype: 127 + 1 is -128 in int8.  Every
    # use of the result's length must see the real length, top + 1.
    x = at.vector("x", dtype=dtype)
    c = bincount(x)
    f = aesara.function([x], [c.shape[0], c.size, c.mean(), at.arange(c.shape[0]) * c])
    xv = np.array([top, 0], dtype=dtype)
    expected = np.bincount(xv.astype(np.int64))
    length, size, mean, weighted = f(xv)
    assert length == size == top + 1
    np.testing.assert_allclose(mean, expected.mean())
    np.testing.assert_array_equal(weighted, np.arange(top + 1) * expected)


def test_length_alone_still_checks_for_negative_values():
    x = at.bvector("x")
    f = aesara.function([x], bincount(x).shape[0])
    assert f(np.array([4, 1], dtype="int8")) == 5
    with pytest.raises(ValueError, match="negative value -1"):
        f(np.array([-1, 0], dtype="int8"))


def test_constant_x_is_folded_or_raises_when_called(caplog):
    f = aesara.function([], bincount(at.constant(np.array([3, 1], dtype="int8"))))
    assert not bincount_nodes(f)  # folded to a constant while compiling
    np.testing.assert_array_equal(f(), [0, 1, 0, 1])
    with caplog.at_level("ERROR"):
        g = aesara.function([], bincount(at.constant(np.array([-1, 0, 2]))))
    # No "Rewrite failure" tracebacks from constant folding: the node stays.
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    assert bincount_nodes(g)
    with pytest.raises(ValueError, match="negative value -1"):
        g()


def test_negative_zero_fill_is_not_a_zeros_base():
    # np.add.at keeps -0.0 where nothing is added; Bincount starts from +0.0.
    i, w = at.lvector("i"), at.dvector("w")
    f = aesara.function([i, w], advanced_inc_subtensor1(at.full((4,), -0.0), w, i))
    assert not bincount_nodes(f)
    iv, wv = np.array([1, 2]), np.array([-0.0, 1.0])
    expected = np.full(4, -0.0)
    np.add.at(expected, iv, wv)
    got = f(iv, wv)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def test_zeros_like_base_is_rewritten_in_specialize():
    # zeros_like(v) becomes Alloc(0, shape) only in canonicalize: the
    # specialize registration catches it.
    v, w, i = at.dvector("v"), at.dvector("w"), at.lvector("i")
    f = aesara.function([v, w, i], advanced_inc_subtensor1(at.zeros_like(v), w, i))
    (node,) = bincount_nodes(f)
    assert node.op.mode == "scatter"
    vv, wv, iv = np.ones(6), np.arange(4.0), np.array([0, 5, 5, -1])
    expected = np.zeros(6)
    np.add.at(expected, iv, wv)
    np.testing.assert_array_equal(f(vv, wv, iv), expected)


def test_weights_built_from_the_same_zeros_compile_and_match():
    # The user's zeros([max(x) + 1]) merges with the zeros inside bincount;
    # weights that read it must not make the rewrite build a cycle (this
    # once hung the compilation, hence a process of its own with a timeout).
    run_python(
        """
        import aesara, aesara.tensor as at, numpy as np
        from aesara.compile.mode import get_default_mode
        from aesara.tensor.extra_ops import bincount
        import aesara_bincount

        x = at.lvector("x")
        zeros = at.zeros([at.cast(x.max() + 1, "int64")], dtype="float64")
        xv = np.array([3, 1, 3, 0, 7])
        for weights in (zeros[x] + 1.0, at.ones_like(x, dtype="float64") * zeros.shape[0]):
            f = aesara.function([x], bincount(x, weights=weights))
            g = aesara.function([x], bincount(x, weights=weights),
                                mode=get_default_mode().excluding("bincount"))
            np.testing.assert_array_equal(f(xv), g(xv))
        """,
        timeout=300,
    )


def test_length_is_right_when_the_graph_also_holds_aesaras_length():
    # The user's own cast(max(x) + 1) is the expression Aesara's graph uses
    # for the length; it keeps its own value, and the result's length is real.
    b = at.bvector("b")
    c = bincount(b)
    users_length = at.cast(b.max() + 1, "int64")
    f = aesara.function([b], [c, c.shape[0], users_length, at.arange(c.shape[0]) + c])
    counts, length, theirs, summed = f(np.array([127, 0], dtype="int8"))
    assert counts.shape == (128,) and length == 128
    assert theirs == -128  # int8 arithmetic, as without the package
    np.testing.assert_array_equal(summed, np.arange(128) + np.bincount([127, 0]))
    x = at.lvector("x")
    g = aesara.function([x], [bincount(x).shape[0], x.max() + 1])
    with pytest.raises(ValueError, match="negative value -5"):
        g(np.array([-5, 1]))


def test_users_zeros_keep_aesaras_semantics():
    b = at.bvector("b")
    theirs = at.zeros([at.cast(b.max() + 1, "int64")], dtype="int8")
    f = aesara.function([b], [bincount(b), theirs])
    counts, zeros = f(np.array([3, 0], dtype="int8"))
    np.testing.assert_array_equal(counts, [1, 0, 0, 1])
    np.testing.assert_array_equal(zeros, np.zeros(4, dtype="int8"))
    with pytest.raises(MemoryError):  # Aesara's own: a length of -128
        f(np.array([127, 0], dtype="int8"))


@pytest.mark.parametrize("form", ["scatter onto cast zeros", "bincount with fill weights"])
def test_length_one_broadcast_weights(form):
    # Canonicalize turns fill(x, k) into a broadcastable (1,) vector, which
    # AdvancedIncSubtensor1 broadcasts: not one weight per element.
    x = at.lvector("x")
    k = at.dscalar("k")
    if form == "scatter onto cast zeros":
        base = at.zeros([at.cast(x.max() + 1, "int64")], dtype="float32").astype("float64")
        out = advanced_inc_subtensor1(base, at.fill(x, k), x)
    else:
        out = bincount(x, weights=at.fill(x, k))
    f = aesara.function([x, k], out)
    assert bincount_nodes(f)
    xv = np.array([3, 1, 3, 0, 7])
    np.testing.assert_array_equal(f(xv, 2.5), np.bincount(xv, weights=np.full(5, 2.5)))


@pytest.mark.filterwarnings("ignore:A Supervisor feature is missing")
@pytest.mark.parametrize("include", [("fast_run", "jax"), ("fast_run",)])
def test_rewrites_are_cxx_only(include):
    # The JAX and Numba modes, and FAST_RUN without a C compiler, exclude
    # "cxx_only": they keep Aesara's graph, which they know how to run.
    x = at.lvector("x")
    fg = FunctionGraph([x], [bincount(x) + 1], clone=True)
    rewrite_graph(fg, include=include, exclude=("cxx_only", "BlasOpt"), clone=False)
    ops = [type(n.op) for n in fg.toposort()]
    assert Bincount not in ops and AdvancedIncSubtensor1 in ops
    control = FunctionGraph([x], [bincount(x) + 1], clone=True)
    rewrite_graph(control, include=include, exclude=("BlasOpt",), clone=False)
    assert Bincount in [type(n.op) for n in control.toposort()]


@pytest.mark.parametrize("written", ["advanced_inc_subtensor1", "inc_subtensor"])
@pytest.mark.parametrize("y_type", ["vector", "(1,)", "0-d"])
def test_bincount_form_is_recognised_by_its_length_whatever_the_increment(written, y_type):
    # inc_subtensor(zeros[x], y) builds an AdvancedIncSubtensor, which Aesara
    # makes an AdvancedIncSubtensor1 only in specialize.
    x = at.lvector("x")
    y = {
        "vector": at.dvector("y"),
        "(1,)": at.TensorType("float64", shape=(1,))("y"),
        "0-d": at.dscalar("y"),
    }[y_type]
    zeros = at.zeros(at.maximum(at.cast(x.max() + 1, "int64"), 4))
    if written == "inc_subtensor":
        out = at.inc_subtensor(zeros[x], y)
    else:
        out = advanced_inc_subtensor1(zeros, y, x)
    match = match_bincount(out.owner)
    assert match is not None and match.mode == "bincount"
    assert match.weights.type.ndim == (1 if y_type == "vector" else 0)
    assert _constant_int(match.n) == 4


def test_constant_with_a_large_output_is_not_folded_while_compiling():
    # Folding would compute the output, and hold its memory, while compiling.
    from aesara_bincount_core.op import FOLD_MAX_BYTES

    top = FOLD_MAX_BYTES // 4  # int32 counts: one bin more than the limit allows
    c = at.constant(np.array([top, 0], dtype="int32"))
    f = aesara.function([], bincount(c))
    assert bincount_nodes(f)
    got = f()
    assert got.shape == (top + 1,) and got[0] == got[top] == 1 and int(got.sum()) == 2
    small = aesara.function([], bincount(at.constant(np.array([top - 1], dtype="int32"))))
    assert not bincount_nodes(small)  # exactly FOLD_MAX_BYTES: folded
