"""Boolean weights (issue 30, item 5): a TypeError from ``aesara.function`` that says to cast.

Aesara types ``bincount(y, eq(y, p))`` as bool, and its C code refuses a
boolean scatter-add only when the function runs; the package refuses it when
the function is compiled, and the cast the message asks for gives
``numpy.bincount``'s answer.
"""
import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import get_default_mode
from aesara.tensor.extra_ops import bincount

from aesara_bincount import BoolScatterAddRefused

FAST_RUN = get_default_mode()
Y = np.array([0, 1, 1, 2, 4, 4], dtype="int64")
P = np.array([0, 1, 0, 2, 4, 3], dtype="int64")


def test_bool_weights_refused_when_compiling():
    y, p = at.lvectors("y", "p")
    with pytest.raises(TypeError, match=r"bincount: the weights .* are boolean.*Cast the weights"):
        aesara.function([y, p], bincount(y, at.eq(y, p)))


def test_bool_weights_cast_as_told_gives_numpy_answer():
    y, p = at.lvectors("y", "p")
    f = aesara.function([y, p], bincount(y, at.cast(at.eq(y, p), "float64")))
    got = f(Y, P)
    want = np.bincount(Y, Y == P)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_bool_scatter_add_by_hand_refused():
    idx = at.lvector("idx")
    b = at.vector("b", dtype="bool")
    out = at.inc_subtensor(at.zeros(5, dtype="bool")[idx], b)
    with pytest.raises(TypeError, match=r"^scatter-add: the weights"):
        aesara.function([idx, b], out)


def test_without_the_rewrites_aesara_fails_only_when_it_runs():
    # What the rewrite improves on: Aesara's own graph compiles, then fails.
    y, p = at.lvectors("y", "p")
    f = aesara.function([y, p], bincount(y, at.eq(y, p)), mode=FAST_RUN.excluding("bincount"))
    assert not any(isinstance(n.op, BoolScatterAddRefused) for n in f.maker.fgraph.apply_nodes)
    with pytest.raises(TypeError):
        f(Y, P)


def test_python_mode_untouched():
    # The Python mode's numpy.add.at takes booleans (a logical or): not refused.
    idx = at.lvector("idx")
    b = at.vector("b", dtype="bool")
    g = aesara.function([idx, b], at.inc_subtensor(at.zeros(3, dtype="bool")[idx], b), mode="FAST_COMPILE")
    np.testing.assert_array_equal(g([0, 0, 2], [False, True, False]), [True, False, False])
