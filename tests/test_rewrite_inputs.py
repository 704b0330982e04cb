"""The bincount rules hold for broadcast weights and for a constant x (issue 12).

Each input is built in the two forms the rewrite treats as a bincount:
``extra_ops.bincount(x, weights, minlength)`` and the hand-written scatter-add
``inc_subtensor(zeros(maximum(x.max() + 1, minlength))[x], w)``, with ``x`` on
the backend's device (``backend`` parameter, CPU and GPU).  The expected
values come from ``numpy.bincount`` and the expected errors from
:func:`aesara_bincount.reference_bincount`, the contract of the CPU and GPU
paths.

- Weights whose type says length 1, a ``(1,)`` vector or a 0-d scalar, are
  added for every element, and the bincount rules hold: a negative value
  raises ``ValueError`` naming it, values at the top of the dtype work, an
  empty x gives ``zeros(minlength)``.  Before, the rewrite took these for the
  scatter-add form with Aesara's ``max(x) + 1`` as a fixed length, which
  wrapped negative values silently.
- A constant x at the top of its dtype, for which Aesara computes a negative
  static length when it builds the graph, gives the documented result, or
  ``ValueError`` where no array length can hold ``max(x) + 1``; compiling
  and calling log no rewrite failure.
"""
import logging

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount
from aesara.tensor.subtensor import AdvancedIncSubtensor, AdvancedIncSubtensor1

from aesara_bincount import reference_bincount
from aesara_bincount_core._c_code import messages
from backends import BACKENDS, GPU

FORMS = ["extra_ops", "hand-written"]
#: How the weights are given: their type says length 1 in each.
WEIGHTS = ["(1,) input", "0-d input", "(1,) shared"]
W = 2.5

pytestmark = pytest.mark.parametrize("backend", BACKENDS)


def build(form, x, w=None, minlength=None):
    """The bincount graph of ``x`` in ``form``, of Aesara's output dtype."""
    if form == "extra_ops":
        return bincount(x, weights=w, minlength=minlength)
    length = x.max() + 1
    if length.dtype.startswith("float"):  # uint64 + 1 is a float64 in Aesara
        length = at.cast(length, "int64")
    if minlength is not None:
        length = at.maximum(length, minlength)
    dtype = x.dtype if w is None else w.dtype
    return at.inc_subtensor(at.zeros(length, dtype=dtype)[x], 1 if w is None else w)


def first_line(exc) -> str:
    return str(exc).split("\n")[0]


def reference_error(x, n=0, weights=None):
    with pytest.raises(Exception) as info:
        reference_bincount(x, n, weights)
    return info.value


def scatter_nodes(fn):
    return [
        node for node in fn.maker.fgraph.toposort()
        if isinstance(node.op, (AdvancedIncSubtensor, AdvancedIncSubtensor1))
    ]  # fmt: skip


def shared_weight(backend, value):
    """A shared ``(1,)`` weight vector on the backend's device, typed ``(1,)``."""
    if backend is GPU:
        from aesara_bincount import gpu

        return gpu.shared(value, shape=(1,), name="w")
    return aesara.shared(value, shape=(1,), name="w")


def compile_broadcast(backend, form, wkind, x_dtype):
    """``f(n)`` over a shared ``x``, with weights typed length 1 and ``minlength=n``.

    Returns ``(f, x, call)``: ``call(x_value, n)`` sets ``x`` and calls ``f``.
    """
    backend.require()
    x = backend.shared(np.zeros(3, dtype=x_dtype), name="x")
    n = at.lscalar("n")
    if wkind == "(1,) input":
        w = at.TensorType("float64", shape=(1,))("w")
        inputs, args = [n, w], [np.array([W])]
    elif wkind == "0-d input":
        w = at.dscalar("w")
        inputs, args = [n, w], [W]
    else:
        w = shared_weight(backend, np.array([W]))
        inputs, args = [n], []
    fn = aesara.function(inputs, build(form, x, w, n))
    backend.check_graph(fn)
    assert not scatter_nodes(fn), "a scatter-add is left in the graph"

    def call(value, minlength):
        backend.set(x, np.asarray(value, dtype=x_dtype))
        return backend.to_numpy(fn(minlength, *args))

    return fn, x, call


def expected(values, minlength=0, weight=W):
    values = np.asarray(values, dtype=np.int64)
    return np.bincount(values, weights=np.full(values.shape, weight), minlength=minlength)


@pytest.mark.parametrize("wkind", WEIGHTS)
@pytest.mark.parametrize("form", FORMS)
def test_broadcast_weights_follow_the_bincount_rules(backend, form, wkind):
    fn, x, call = compile_broadcast(backend, form, wkind, "int64")
    np.testing.assert_array_equal(call([3, 1, 3, 0], 0), expected([3, 1, 3, 0]))
    np.testing.assert_array_equal(call([3, 1], 6), expected([3, 1], 6))
    # Negative values raise, naming the first (Aesara's graph wraps them:
    # [0, 0, 4] for [-1, 2], and [2, 2, 0, 0, 0] for [-5, 1] with minlength 5).
    for bad, n in (([-1, 2], 0), ([-5, 1], 5), ([4, 0, -3, -1], 2)):
        with pytest.raises(ValueError) as info:
            call(bad, n)
        assert first_line(info.value) == str(reference_error(np.array(bad), n))
        np.testing.assert_array_equal(backend.get(x), bad)  # x is left as it was
    # An empty x gives zeros(minlength) (Aesara's graph fails in max).
    got = call([], 3)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.zeros(3))
    np.testing.assert_array_equal(call([2], 0), expected([2]))


@pytest.mark.parametrize("wkind", WEIGHTS)
@pytest.mark.parametrize("form", FORMS)
def test_broadcast_weights_at_the_top_of_the_dtype(backend, form, wkind):
    # int8 127 gives 128 bins (Aesara's graph computes max(x) + 1 = -128).
    _, _, call = compile_broadcast(backend, form, wkind, "int8")
    values = [127, 3, 127]
    np.testing.assert_array_equal(call(values, 0), expected(values))
    np.testing.assert_array_equal(call(values, 200), expected(values, 200))
    with pytest.raises(ValueError, match="negative value -128 at position 1"):
        call([3, -128], 0)


@pytest.mark.parametrize("form", FORMS)
def test_fill_weights_still_raise_for_negative_values(backend, form):
    backend.require()
    x = backend.shared(np.array([-1, 2]), name="x")
    k = at.dscalar("k")
    xt = at.as_tensor_variable(x)
    fn = aesara.function([k], build(form, xt, at.fill(xt, k)))
    backend.check_graph(fn)
    with pytest.raises(ValueError, match="negative value -1 at position 0"):
        fn(2.0)
    backend.set(x, np.array([3, 1, 3]))
    np.testing.assert_array_equal(backend.to_numpy(fn(2.0)), expected([3, 1, 3], weight=2.0))


def test_weights_typed_length_one_in_a_gradient(backend):
    # The weight is added for every element, so its gradient sums over them.
    backend.require()
    x = backend.shared(np.array([2, 2, 0]), name="x")
    w = at.TensorType("float64", shape=(1,))("w")
    out = bincount(x, weights=w, minlength=4)
    fn = aesara.function([w], [out, aesara.grad((out * np.arange(4.0)).sum(), w)])
    backend.check_graph(fn)
    got, grad = fn(np.array([1.5]))
    np.testing.assert_array_equal(backend.to_numpy(got), [1.5, 0, 3.0, 0])
    np.testing.assert_array_equal(backend.to_numpy(grad), [4.0])


# -- a constant x ------------------------------------------------------------------
def constant(backend, value):
    """``value`` as a constant of the backend: host, or a CuPy array on the GPU."""
    backend.require()
    if backend is GPU:
        import cupy

        return at.as_tensor_variable(cupy.asarray(value))
    return at.as_tensor_variable(value)


def rewrite_failures(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def compile_quietly(caplog, outputs, inputs=()):
    """Compile, checking that no rewrite failure is logged."""
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        fn = aesara.function(list(inputs), outputs)
    assert not rewrite_failures(caplog)
    return fn


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8"])
def test_constant_x_at_the_top_of_its_dtype(backend, caplog, form, dtype):
    top = int(np.iinfo(dtype).max)
    values = np.array([top, 3, top], dtype=dtype)
    c = constant(backend, values)
    w = at.dvector("w")
    counts, weighted, longer = (
        build(form, c), build(form, c, w), build(form, c, minlength=top + 5)
    )  # fmt: skip
    fn = compile_quietly(caplog, [counts, weighted, longer, counts + 1], [w])
    wv = np.array([0.5, 1.0, 2.0])
    got = [backend.to_numpy(r) for r in fn(wv)]
    assert not rewrite_failures(caplog)
    numpy_counts = np.bincount(values.astype(np.int64))
    np.testing.assert_array_equal(got[0], numpy_counts.astype(dtype))
    assert got[0].dtype == np.dtype(dtype) and got[0].shape == (top + 1,)
    np.testing.assert_array_equal(got[1], np.bincount(values.astype(np.int64), weights=wv))
    np.testing.assert_array_equal(got[2], np.bincount(values.astype(np.int64), minlength=top + 5))
    np.testing.assert_array_equal(got[3], (numpy_counts + 1).astype(dtype))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    "dtype, value", [("int64", 2**63 - 1), ("uint64", 2**63), ("uint64", 2**64 - 1)]
)
def test_constant_x_no_length_can_hold_raises_value_error(backend, caplog, form, dtype, value):
    # Never hand this x to numpy.bincount in this process (numpy 1.26 corrupts
    # its heap computing max(x) + 1); the message is written out by hand.
    c = constant(backend, np.array([0, value], dtype=dtype))
    fn = compile_quietly(caplog, build(form, c))
    with pytest.raises(ValueError) as info:
        fn()
    assert first_line(info.value) == messages()["BC_MSG_TOO_LARGE"] % value
    assert not rewrite_failures(caplog)


@pytest.mark.parametrize("form", FORMS)
def test_constant_negative_x_raises_when_called(backend, caplog, form):
    c = constant(backend, np.array([3, -2], dtype="int8"))
    fn = compile_quietly(caplog, build(form, c))
    with pytest.raises(ValueError, match="negative value -2 at position 1"):
        fn()


@pytest.mark.parametrize("form", FORMS)
def test_constant_empty_x_logs_no_rewrite_failures(backend, caplog, form):
    # Aesara's zeros(max(x) + 1) tries to fold max of the empty constant while
    # the graph is built; the package makes that fold decline (_folding.py),
    # so neither building nor compiling logs a constant_folding failure.
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        out = build(form, constant(backend, np.array([], dtype="int64")), minlength=3)
    assert not rewrite_failures(caplog)
    fn = compile_quietly(caplog, out)
    got = backend.to_numpy(fn())
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.zeros(3, dtype=np.int64))


@pytest.mark.cpu_only("Aesara's own reductions: no bincount, no GPU Op in the graph")
@pytest.mark.parametrize("reduce", [at.max, at.min, at.argmax, at.argmin])
def test_max_of_an_empty_constant_still_raises_when_called(backend, caplog, reduce):
    # The declined fold leaves the node in the graph: the call raises what
    # the fold would have, and nothing is logged.
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        fn = aesara.function([], reduce(at.as_tensor(np.array([], dtype="int64"))))
    assert not rewrite_failures(caplog)
    with pytest.raises(ValueError):
        fn()

