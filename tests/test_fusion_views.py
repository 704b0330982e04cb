"""``bincount_fusion`` through a flatten of an elementwise x or weights (issue 30, item 4).

``bincount((A * 3 + B).flatten(), (w * 2).flatten())`` compiles to one
``FusedBincount`` that computes x and the weights in its pass; results are
compared with ``numpy.bincount``.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount
from aesara.tensor.shape import Reshape

from aesara_bincount import FusedBincount

RNG = np.random.default_rng(20261204)


def fused_nodes(f):
    return [n for n in f.maker.fgraph.toposort() if isinstance(n.op, FusedBincount)]


def test_flattened_elemwise_x_and_weights_fuse():
    A, B = at.lmatrices("A", "B")
    w = at.dmatrix("w")
    f = aesara.function([A, B, w], bincount((A * 3 + B).flatten(), (w * 2.0).flatten()))
    (node,) = fused_nodes(f)
    assert node.op.x_op is not None and node.op.w_op is not None
    Av, Bv = RNG.integers(0, 5, (7, 9)), RNG.integers(0, 3, (7, 9))
    wv = RNG.standard_normal((7, 9))
    wv[0, 0], wv[1, 1] = -0.0, np.nan
    want = np.bincount((Av * 3 + Bv).ravel(), (wv * 2).ravel())
    np.testing.assert_array_equal(f(Av, Bv, wv), want)
    # Transposed views (non-contiguous inputs: their flatten copies) and empty arrays.
    np.testing.assert_array_equal(f(Av.T.copy().T, Bv, wv), want)
    e = np.zeros((0, 3), dtype="int64")
    np.testing.assert_array_equal(f(e, e, np.zeros((0, 3))), np.zeros(0))


def test_a_per_row_histogram_of_a_full_matrix():
    # (base + idx).flatten() with base already of idx's shape: fused.
    base, idx = at.lmatrices("base", "idx")
    f = aesara.function([base, idx], bincount((base + idx).reshape((-1,))))
    assert fused_nodes(f)
    bv = np.repeat(np.arange(4)[:, None] * 10, 6, axis=1)
    iv = RNG.integers(0, 10, (4, 6))
    np.testing.assert_array_equal(f(bv, iv), np.bincount((bv + iv).ravel()))


def test_inputs_of_other_shapes_but_the_same_size_raise():
    A, B = at.lmatrices("A", "B")
    f = aesara.function([A, B], bincount((A + B).flatten()))
    assert fused_nodes(f)
    with pytest.raises(ValueError):  # as Aesara's Elemwise: the shapes do not broadcast
        f(np.zeros((2, 3), dtype="int64"), np.zeros((3, 2), dtype="int64"))
    g = aesara.function([A, B], bincount((A + B).reshape((5,))))
    with pytest.raises(ValueError):  # the reshape's own error stays
        g(np.zeros((2, 3), dtype="int64"), np.zeros((2, 3), dtype="int64"))


def test_broadcast_inputs_fuse_and_other_clients_are_left_alone():
    # Inputs that broadcast along some axes only are not flattened here (that
    # would write the broadcast array); FusedBincount reads them as they are
    # (issue 41, tests/test_fusion_broadcast.py).
    base = at.lvector("base")
    idx = at.lmatrix("idx")
    x = (base[:, None] + idx).flatten()
    f = aesara.function([base, idx], bincount(x))
    assert fused_nodes(f) and not any(isinstance(n.op, Reshape) for n in f.maker.fgraph.toposort())
    bv, iv = np.array([0, 10]), RNG.integers(0, 10, (2, 5))
    np.testing.assert_array_equal(f(bv, iv), np.bincount((bv[:, None] + iv).ravel()))
    A = at.lmatrix("A")
    y = A + 1
    g = aesara.function([A], [bincount(y.flatten()), y])
    Av = RNG.integers(0, 4, (3, 3))
    h, yv = g(Av)
    np.testing.assert_array_equal(h, np.bincount((Av + 1).ravel()))
    np.testing.assert_array_equal(yv, Av + 1)


def test_an_axis_of_length_one_when_the_function_runs_broadcasts():
    # Aesara's Elemwise broadcasts an axis that is 1 at run time although its
    # type does not say so; the fused graph must give the same bins (the
    # flatten is moved onto the inputs only when their static shapes match).
    A, B = at.lmatrices("A", "B")
    w = at.dmatrix("w")
    f = aesara.function([A, B, w], bincount((A * 4 + B).ravel(), (w * 2.0 + A).ravel()))
    Av, Bv = np.arange(5).reshape(5, 1), RNG.integers(0, 7, (5, 6))
    wv = RNG.standard_normal((5, 6))
    want = np.bincount((Av * 4 + Bv).ravel(), (wv * 2.0 + Av).ravel())
    np.testing.assert_array_equal(f(Av, Bv, wv), want)
    np.testing.assert_array_equal(f(Bv, Av, wv), np.bincount((Bv * 4 + Av).ravel(), (wv * 2.0 + Bv).ravel()))
