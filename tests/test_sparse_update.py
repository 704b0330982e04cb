"""The sparse update: ``updates=[(W, W - lr * grad(cost, W))]`` adds into the touched rows of W.

Every step goes through ``aesara.function``, on the CPU and (``backend``) on
GPU shared variables, and is compared with the sequential reference
``np.add.at(W, idx, -(g * lr))`` (bit for bit on the CPU, where the rows are
added in index order) and with Aesara's dense form, the same function under
``mode.excluding("sparse_update")`` (to a few ulps: the dense form rounds
``w - lr*(g1 + g2)`` where an index repeats, and may round ``w - lr*g`` once
where its compiler contracts it into an FMA).  The graphs must hold no
table-sized temporary: no zeros, no scatter-add onto zeros, no elementwise
pass over W.
"""
from collections import OrderedDict

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import get_default_mode

from backends import CPU
from rows_cases import assert_same_rows

DENSE = get_default_mode().excluding("sparse_update")
#: For the tests of which graphs match: without Aesara's elementwise fusion, each
#: ``Elemwise`` is one of the few C modules every test shares (a fused
#: ``Composite`` is a module of its own to compile); the rounding is the same.
NO_FUSION = get_default_mode().excluding("fusion")
RNG = np.random.default_rng(41)


def _nodes(f):
    return f.maker.fgraph.toposort()


def _sparse_nodes(f, W):
    """The scatter-adds of ``f`` that add into the shared variable ``W`` itself."""
    root = next(i for i in f.maker.fgraph.inputs if i.name == W.name)
    return [n for n in _nodes(f) if "ScatterAdd" in type(n.op).__name__ and n.inputs[0] is root]


def check_sparse_graph(f, W):
    """One in-place scatter-add into ``W``; nothing else writes an array of W's shape."""
    fg = f.maker.fgraph
    found = _sparse_nodes(f, W)
    assert len(found) == 1 and found[0].op.inplace, [str(n.op) for n in _nodes(f)]
    root = found[0].inputs[0]
    for node in _nodes(f):
        name = type(node.op).__name__
        assert "Alloc" not in name and getattr(node.op, "onto", "base") != "zeros", str(node.op)
        if node is not found[0] and any(i is root for i in node.inputs):
            # W is only read: gathered, or its shape taken.
            assert "AdvancedSubtensor1" in name or name.startswith("Shape"), str(node.op)
    assert _through_call_end(fg.outputs[list(fg.update_mapping)[0]]) is found[0].outputs[0]


def _through_call_end(var):
    """``var``, or the value a GPU call's ``GpuCallEnd`` passes through as ``var`` (a view)."""
    node = var.owner
    if node is None or type(node.op).__name__ != "GpuCallEnd":
        return var
    (source,) = node.op.view_map[node.outputs.index(var)]
    return node.inputs[source]


def _loss(Wi, t):
    """Its gradient's rows are ``6 * (Wi - t)`` (Aesara folds 3 * 2), rounded as NumPy rounds them."""
    return 3 * ((Wi - t) ** 2).sum()


def _g_rows(rows, t):
    return rows.dtype.type(6) * (rows - t)


def _assert_bits(got, expected):
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


# -- the SGD step of an embedding table ------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_sgd_step(backend, dtype):
    """Repeated and negative indices; the sequential reference, the dense form."""
    backend.require()
    V, D = 40, 6
    W0 = RNG.standard_normal((V, D)).astype(dtype)
    iv = np.array([3, -1, 7, 3, 39, 0, 3, 12])
    t = RNG.standard_normal((len(iv), D)).astype(dtype)
    idx = at.lvector("idx")
    lr = at.scalar("lr", dtype=dtype)
    results = []
    for mode in (None, DENSE):
        W = backend.shared(W0, name="W")
        f = aesara.function([lr, idx], _loss(W[idx], t), updates=[(W, W - lr * aesara.grad(_loss(W[idx], t), W))],
                            mode=mode)
        f(np.asarray(0.3, dtype), iv)
        results.append(backend.get(W))
        if mode is None:
            check_sparse_graph(f, W)
    g = _g_rows(W0[iv], t)
    expected = W0.copy()
    np.add.at(expected, iv, -(g * np.asarray(0.3, dtype)))
    if backend is CPU:
        _assert_bits(results[0], expected)
    else:  # atomics: any order of the adds of a repeated row
        assert_same_rows(results[0], W0, -(g * np.asarray(0.3, dtype)), iv)
    untouched = np.setdiff1d(np.arange(V), iv % V)
    _assert_bits(results[0][untouched], W0[untouched])
    np.testing.assert_allclose(results[0], results[1], rtol=4 * np.finfo(dtype).eps, atol=4 * np.finfo(dtype).eps)


def test_no_repeated_index_is_the_dense_value(backend):
    """Distinct indices: each touched element is ``w - lr*g`` (NumPy's), as the dense form
    gives it up to its FMA; bad indices raise and leave W as it was."""
    backend.require()
    W0 = RNG.standard_normal((30, 4)).astype("float32")
    iv = np.array([29, 0, -3, 5])
    t = RNG.standard_normal((4, 4)).astype("float32")
    W = backend.shared(W0, name="W")
    idx = at.lvector("idx")
    lr = np.float32(0.25)  # a power of two: no rounding in lr * g, none in an FMA either
    f = aesara.function([idx], [], updates=[(W, W - lr * aesara.grad(_loss(W[idx], t), W))])
    check_sparse_graph(f, W)
    f(iv)
    g = _g_rows(W0[iv], t)
    expected = W0.copy()
    expected[iv] = W0[iv] - lr * g
    _assert_bits(backend.get(W), expected)
    # A scatter-add onto zeros written by hand (no gather checks the indices first).
    gin = at.matrix("g", dtype="float32")
    h = aesara.function([idx, gin], [], updates=[(W, W - lr * at.inc_subtensor(at.zeros_like(W)[idx], gin))])
    check_sparse_graph(h, W)
    for bad, message in ((np.array([0, 30, 1, 2]), "index 30 at position 1"),
                         (np.array([0, 1, 2, -31]), "index -31 at position 3")):
        with pytest.raises(IndexError, match=message):
            h(bad, g)
        _assert_bits(backend.get(W), expected)


def test_signed_zeros_and_nan_increments(backend):
    """``W - lr * grad((W[idx] * t).sum(), W)`` with t holding -0.0 and NaN: np.add.at's bits."""
    backend.require()
    W0 = np.array([[0.0, -0.0, 1.5], [-0.0, 2.0, -0.0], [3.0, 0.0, -0.0], [-0.0, -0.0, -0.0]], "float64")
    t = np.array([[-0.0, -0.0, np.nan], [0.0, -0.0, -0.0], [-0.0, 0.0, 1.0]])
    iv = np.array([0, 1, 1])
    W = backend.shared(W0, name="W")
    idx = at.lvector("idx")
    f = aesara.function([idx], [], updates=[(W, W - 0.5 * aesara.grad((W[idx] * t).sum(), W))])
    check_sparse_graph(f, W)
    f(iv)
    expected = W0.copy()
    np.add.at(expected, iv, -(t * 0.5))
    _assert_bits(backend.get(W), expected)


# -- the forms of the update -------------------------------------------------------
def test_forms_of_the_update():
    """``W - c*S`` and its other spellings, c a constant, shared, input or (1, D) row; each
    in place, each the sequential reference."""
    V, D = 12, 3
    W0 = RNG.standard_normal((V, D))
    iv = np.array([4, 11, 4, -12, 7])
    t = RNG.standard_normal((len(iv), D))
    lr_in = at.dscalar("lr")
    lr_sh = aesara.shared(0.125, name="lr_shared")
    row = np.array([[0.5, -1.0, 0.25]])
    forms = {
        "W - lr * S": (lambda W, S: W - lr_in * S, lambda g: -(g * 0.3)),
        "W + lr * S": (lambda W, S: W + lr_in * S, lambda g: g * 0.3),
        "lr * S + W": (lambda W, S: lr_in * S + W, lambda g: g * 0.3),
        "W - S * shared": (lambda W, S: W - S * lr_sh, lambda g: -(g * 0.125)),
        "W + -lr * S": (lambda W, S: W + -lr_in * S, lambda g: g * -0.3),
        "W - S": (lambda W, S: W - S, lambda g: -g),
        "W + S": (lambda W, S: W + S, lambda g: g),
        "W - S / 8": (lambda W, S: W - S / 8, lambda g: -(g / 8)),
        "W - row * S": (lambda W, S: W - row * S, lambda g: -(g * row)),
        "W - lr * (0.5 * S)": (lambda W, S: W - lr_in * (0.5 * S), lambda g: -((g * 0.5) * 0.3)),
    }
    Ws = {name: aesara.shared(W0.copy(), name=f"W{k}") for k, name in enumerate(forms)}
    idx = at.lvector("idx")
    updates = []
    for name, (form, _) in forms.items():
        W = Ws[name]
        updates.append((W, form(W, aesara.grad(_loss(W[idx], t), W))))
    f = aesara.function([lr_in, idx], [], updates=updates, mode=NO_FUSION)
    assert len({id(n) for W in Ws.values() for n in _sparse_nodes(f, W) if n.op.inplace}) == len(forms)
    assert not [n for n in _nodes(f) if getattr(n.op, "onto", "base") == "zeros" or "Alloc" in str(n.op)]
    f(0.3, iv)
    g = _g_rows(W0[iv], t)
    for name, (_, inc) in forms.items():
        expected = W0.copy()
        np.add.at(expected, iv, inc(g))
        np.testing.assert_array_equal(Ws[name].get_value(), expected, err_msg=name)


def test_vector_matrix_index_and_twice_gathered():
    """A vector W (its gradient is a Bincount), ``W[idx_matrix]``, and W gathered twice
    (two scatter-adds, joined into one so that every index is checked first)."""
    idx = at.lvector("idx")
    j = at.lvector("j")
    iv, jv = np.array([2, -1, 2, 0]), np.array([5, 5, 1, 3])
    v0, W0 = RNG.standard_normal(6), RNG.standard_normal((6, 2))
    v, Wm, Wt = aesara.shared(v0, name="v"), aesara.shared(W0, name="Wm"), aesara.shared(W0, name="Wt")
    updates = [
        (v, v - 0.3 * aesara.grad((v[idx] ** 2).sum(), v)),
        (Wm, Wm - 0.3 * aesara.grad((Wm[idx.reshape((2, 2))] ** 2).sum(), Wm)),
        (Wt, Wt - 0.3 * aesara.grad((Wt[idx] * Wt[j]).sum(), Wt)),
    ]
    f = aesara.function([idx, j], [], updates=updates, mode=NO_FUSION)
    for W in (v, Wm, Wt):
        assert [n.op.inplace for n in _sparse_nodes(f, W)] == [True], W.name
    f(iv, jv)
    ev = v0.copy()
    np.add.at(ev, iv, -((2 * v0[iv]) * 0.3))
    _assert_bits(v.get_value(), ev)
    em = W0.copy()
    np.add.at(em, iv, -((2 * W0[iv]) * 0.3))
    _assert_bits(Wm.get_value(), em)
    et = W0.copy()
    # The gradient's chain adds W[j] at idx, then W[idx] at j.
    np.add.at(et, np.concatenate([iv, jv]), -(np.concatenate([W0[jv], W0[iv]]) * 0.3))
    _assert_bits(Wt.get_value(), et)
    # The same chain written by hand (no gather checks the indices first): j's bad
    # index, after idx's, raises before anything is added.
    g1, g2 = at.dmatrices("g1", "g2")
    S = at.inc_subtensor(at.inc_subtensor(at.zeros_like(Wt)[idx], g1)[j], g2)
    h = aesara.function([idx, j, g1, g2], [], updates=[(Wt, Wt - 0.3 * S)], mode=NO_FUSION)
    assert [n.op.inplace for n in _sparse_nodes(h, Wt)] == [True]
    with pytest.raises(IndexError, match="index 6 at position 7"):
        h(iv, np.array([5, 5, 1, 6]), W0[:4], W0[2:])
    _assert_bits(Wt.get_value(), et)


def test_integer_table_wraps():
    """An int8 table: the sums wrap modulo 2**8, as the dense form's do."""
    W0 = np.array([[120, -128], [5, 6], [0, 127]], dtype="int8")
    W = aesara.shared(W0.copy(), name="W")
    idx = at.lvector("idx")
    g = at.matrix("g", dtype="int8")
    f = aesara.function([idx, g], [], updates=[(W, W - 3 * at.inc_subtensor(at.zeros_like(W)[idx], g))],
                        mode=NO_FUSION)
    check_sparse_graph(f, W)
    gv, iv = np.array([[-10, 2], [3, -50], [100, 5]], dtype="int8"), np.array([0, 2, -3])
    f(iv, gv)
    expected = W0.copy()
    with np.errstate(over="ignore"):
        np.add.at(expected, iv, -(gv * np.int8(3)))
    np.testing.assert_array_equal(W.get_value(), expected)


# -- where the dense form stays ------------------------------------------------------
def _dense_cases():
    lr = 0.1

    def g(W, idx):
        return aesara.grad((W[idx] ** 2).sum(), W)

    def reads_old_and_new(W, idx, _):
        new = W - lr * g(W, idx)
        return [(new + W).sum()], [(W, new)]

    return {
        "the gradient is also an output": lambda W, idx, _: ([g(W, idx)], [(W, W - lr * g(W, idx))]),
        "the gradient is also an output, W - S": lambda W, idx, _: ([g(W, idx)], [(W, W - g(W, idx))]),
        "W is an output": lambda W, idx, _: ([W], [(W, W - lr * g(W, idx))]),
        "a view of W is an output": lambda W, idx, _: ([W.T[1]], [(W, W - lr * g(W, idx))]),
        "W is read before and after": reads_old_and_new,
        "no update": lambda W, idx, _: ([W - lr * g(W, idx)], []),
        "a rate per row": lambda W, idx, _: ([], [(W, W - np.arange(8.0)[:, None] * g(W, idx))]),
        "weight decay": lambda W, idx, _: ([], [(W, W - lr * (g(W, idx) + 0.01 * W))]),
        "S of another shape": lambda W, idx, U: ([], [(W, W - lr * aesara.grad(U[idx].sum(), U))]),
    }


@pytest.mark.parametrize("case", list(_dense_cases()))
def test_dense_form_is_kept(case):
    W0 = RNG.standard_normal((8, 3))
    iv = np.array([1, 0, 0, -1])
    results = []
    for mode in (NO_FUSION, NO_FUSION.excluding("sparse_update")):
        W, U = aesara.shared(W0.copy(), name="W"), aesara.shared(np.ones((1, 3)), name="U")
        outputs, updates = _dense_cases()[case](W, at.lvector("idx"), U)
        idx = next(v for v in aesara.graph.basic.graph_inputs(outputs + [u for _, u in updates])
                   if v.name == "idx")
        f = aesara.function([idx], outputs, updates=updates, mode=mode)
        assert not _sparse_nodes(f, W), [str(n.op) for n in _nodes(f)]
        results.append([np.asarray(o) for o in f(np.array([0, 0]) if case == "S of another shape" else iv)]
                       + [W.get_value()])
    for got, want in zip(*results):
        np.testing.assert_array_equal(got, want)


def test_a_view_of_the_table_as_output_keeps_the_dense_form(backend):
    """A view of W as an output (on GPU data, ``W.T`` kept on the GPU: a view of the
    shared array itself): the dense form stays, and the view shows W before the step."""
    backend.require()
    W0 = RNG.standard_normal((6, 2)).astype("float32")
    W = backend.shared(W0, name="W")
    idx = at.lvector("idx")
    f = aesara.function([idx], W.T * 2, updates=[(W, W - 0.5 * aesara.grad((W[idx] ** 2).sum(), W))])
    view = W.T
    if backend is not CPU:  # the view as a GPU array: W's own memory
        from aesara_bincount import gpu

        view = gpu.gpu_from_host(view)
    g = aesara.function([idx], view, updates=[(W, W - 0.5 * aesara.grad((W[idx] ** 2).sum(), W))])
    assert _sparse_nodes(f, W) and not _sparse_nodes(g, W)
    _assert_bits(backend.to_numpy(g(np.array([1, 1, -1]))), W0.T)
    expected = W0.copy()
    np.add.at(expected, [1, 1, -1], -((2 * W0[[1, 1, -1]]) * np.float32(0.5)))
    np.testing.assert_allclose(backend.get(W), expected, rtol=1e-6)


def test_switched_off_by_name():
    W = aesara.shared(np.ones((5, 2)), name="W")
    idx = at.lvector("idx")
    upd = [(W, W - 0.1 * aesara.grad((W[idx] ** 2).sum(), W))]
    assert _sparse_nodes(aesara.function([idx], [], updates=upd, mode=NO_FUSION), W)
    for name in ("sparse_update", "bincount"):
        f = aesara.function([idx], [], updates=upd, mode=NO_FUSION.excluding(name))
        assert not _sparse_nodes(f, W), name


# -- the update lists of real programs -------------------------------------------------
def _sgd(loss_or_grads, params, learning_rate):
    """Lasagne's ``sgd``, written as lasagne.updates writes it (an OrderedDict)."""
    grads = aesara.grad(loss_or_grads, params)
    updates = OrderedDict()
    for param, grad in zip(params, grads):
        updates[param] = param - learning_rate * grad
    return updates


@pytest.mark.parametrize("style", ["lasagne sgd", "tutorial pairs"])
def test_an_embedding_classifier_step(style):
    """An embedding table, a scale and a bias per column: only the table's update is sparse."""
    V, D, B = 20, 4, 6
    E0 = RNG.standard_normal((V, D)).astype("float32")
    W0 = RNG.standard_normal(D).astype("float32")
    ids = at.lvector("ids")
    y = at.matrix("y", dtype="float32")
    iv = np.array([3, 19, 3, 0, -2, 7])
    yv = RNG.standard_normal((B, D)).astype("float32")
    finals = []
    for mode in (NO_FUSION, NO_FUSION.excluding("sparse_update")):
        E, W = aesara.shared(E0, name="E"), aesara.shared(W0, name="W")
        b = aesara.shared(np.zeros(D, "float32"), name="b")
        loss = ((E[ids] * W + b - y) ** 2).mean()
        params = [E, W, b]
        if style == "lasagne sgd":
            updates = _sgd(loss, params, np.float32(0.5))
        else:
            lr = np.float32(0.5)
            updates = [(q, q - lr * gq) for q, gq in zip(params, aesara.grad(loss, params))]
        f = aesara.function([ids, y], loss, updates=updates, mode=mode)
        if mode is None:
            assert [n.op.inplace for n in _sparse_nodes(f, E)] == [True]
            assert not _sparse_nodes(f, W) and not _sparse_nodes(f, b)
        for _ in range(2):
            f(iv, yv)
        finals.append([q.get_value() for q in params])
    for got, want in zip(*finals):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
