"""Host nodes of GPU data whose input has length 1 when the function runs (``gpu/inplace_guard.py``).

Aesara 2.9.4's in-place ``Elemwise`` rewrite may write the result into an
input that is broadcast only at run time; the ``HostFromGpu`` copy that a
host node of GPU data reads is such an input.  Each graph here stays (at
least partly) on the host and is compared with NumPy on the same values;
on the old code the first three gave one value (``[0]``, ``[4]``, ...)
instead of the full result.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_cases import AVAILABLE, WHY  # noqa: E402

aesara = pytest.importorskip("aesara")

import aesara.tensor as at  # noqa: E402
from aesara.compile.mode import get_default_mode  # noqa: E402

from aesara_bincount import gpu  # noqa: E402
from aesara_bincount.gpu.inplace_guard import may_broadcast_at_run_time  # noqa: E402
from lift_cases import assert_same  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]


def _inplace_nodes(f):
    return [n for n in f.maker.fgraph.toposort() if getattr(n.op, "inplace_pattern", None)]


@pytest.mark.parametrize("mode", [None, "no_lift"])
def test_integer_floor_division_by_a_variable_broadcasts_a_length_one_input(mode):
    # Integer // by a variable stays on the host (issue 18's rule); gy has length 1 at run time.
    y, x = np.array([-7], "int64"), np.array([1, 2, -3, 5, 7], "int64")
    gy, gx = gpu.shared(y), gpu.shared(x)
    m = get_default_mode().excluding("gpu_lift") if mode else None
    f = aesara.function([], [gy // gx, gx % gy], mode=m)
    got_div, got_mod = f()
    assert_same(got_div, y // x)
    assert_same(got_mod, x % y)


@pytest.mark.parametrize("view", ["slice", "reshape", "offset slice"])
def test_views_of_the_host_copy_are_guarded_too(view):
    # Subtensor and Reshape of the HostFromGpu copy, of length 1 at run time
    # (issue 28: [0] instead of [7 3 2 1 1] before the guard looked through them).
    y, x = np.array([7, 9, -4], "int64"), np.array([1, 2, 3, 5, 7], "int64")
    gy, gx = gpu.shared(y), gpu.shared(x)
    k = at.lscalar("k")
    views = {
        "slice": (gy[:1], y[:1]),
        "reshape": (gy[:1].reshape((-1,)), y[:1]),
        "offset slice": (gy[k : k + 1], y[1:2]),
    }
    var, value = views[view]
    f = aesara.function([k], [var // gx, gx % var], mode=get_default_mode().excluding("gpu_lift"),
                        on_unused_input="ignore")  # fmt: skip
    got_div, got_mod = f(1)
    assert_same(got_div, value // x)
    assert_same(got_mod, x % value)


def test_float16_arithmetic_and_matrix_rows():
    # float16 stays on the host; a (1, 3) matrix broadcast over (4, 3) rows, and a DimShuffled copy.
    a = np.array([[0.5, -0.0, 2.0]], "float16")
    b = np.arange(12, dtype="float16").reshape(4, 3) - 5
    v = np.array([3.0], "float16")
    ga, gb, gv = gpu.shared(a), gpu.shared(b), gpu.shared(v)
    f = aesara.function([], [ga * gb, gb - gv.dimshuffle("x", 0)])
    got_mul, got_sub = f()
    assert_same(got_mul, a * b)
    assert_same(got_sub, b - v[None, :])


def test_in_place_is_kept_where_nothing_broadcasts():
    # A constant divisor is known to broadcast: the host node may still work in place.
    x = np.array([1, 2, -3, 5, 7], "float16")
    gx = gpu.shared(x)
    f = aesara.function([], gx * 3 + 2)
    assert_same(f(), x * 3 + 2)
    assert _inplace_nodes(f), [type(n.op).__name__ for n in f.maker.fgraph.toposort()]


def test_the_rule_of_run_time_broadcasting():
    a, b = at.vector("a"), at.vector("b")
    node = (a + b).owner
    assert may_broadcast_at_run_time(a, node) and may_broadcast_at_run_time(b, node)
    s = at.specify_shape(a, (1,))
    node = (s + b).owner
    assert not may_broadcast_at_run_time(node.inputs[0], node)
    assert not may_broadcast_at_run_time(node.inputs[1], node)
    node = (at.specify_shape(a, (5,)) + at.specify_shape(b, (5,))).owner
    assert not any(may_broadcast_at_run_time(i, node) for i in node.inputs)
