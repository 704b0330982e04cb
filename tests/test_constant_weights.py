"""Constant weights of one element: a float 1 is a count into a float output (issue 32).

``bincount(x, weights=w)`` with ``w`` a constant of one element (0-d, or a
vector typed ``(1,)``) adds that value for every element of ``x``.  The
rewrite reads a constant 1 as a count: the node is ``Bincount`` without
weights whose output dtype is the weight's, so a float 1 gives a count into
a float output, a configuration that once failed to compile (the scan for
the last non-zero bin of ``c_code/cpu/bincount_grow.h`` OR-ed the float
cells).  Every dtype of ``x``, float64 and float32 weights, 0-d and
``(1,)``, against :func:`numpy.bincount`, OpenMP off and on, through
``aesara.function`` on shared variables (the cases share one function per
OpenMP setting: 34 modules of Aesara's default linker, about 50 s of CPU
time at first, nothing once they are in the compile cache).

The wide dtypes of ``x`` hold values up to 400,000, so that a float64 or
float32 output needs more than 1 MiB and one thread counts into the output
itself (the path of that scan); the narrow ones hold their whole range.
"""
import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount

from backends import compile_shared
from conftest import INT_DTYPES

#: Other constants, on an int64 x: weighted sums with a 0-d weight.
OTHER_CONSTANTS = (2.0, 0.5, -0.0, -3.0)
OTHER_X_DTYPES = ("int64",)
W_DTYPES = ("float64", "float32")
SHAPES = ("0-d", "(1,)")
SIZE = 50_000


def x_values(dtype, rng):
    """``SIZE`` values of ``dtype``: up to 400,000 where it can hold them, else its whole range."""
    top = min(int(np.iinfo(dtype).max), 400_000)
    x = rng.integers(0, top, size=SIZE, endpoint=True).astype(dtype)
    x[-1] = top  # the last bin, met last
    return x


def constant_weight(value, w_dtype, shape):
    """A constant weight of one element: 0-d, or a vector typed ``(1,)``."""
    data = np.array(value if shape == "0-d" else [value], dtype=w_dtype)
    w = at.as_tensor_variable(data)
    assert w.type.shape == (() if shape == "0-d" else (1,))
    return w


def numpy_answer(x, value, w_dtype):
    expected = np.bincount(x.astype(np.int64), weights=np.full(x.size, value, dtype=w_dtype))
    return expected.astype(w_dtype)


def cases():
    """``(x dtype, weight dtype, shape, value)`` of every output."""
    out = []
    for dtype in INT_DTYPES:
        for w_dtype in W_DTYPES:
            for shape in SHAPES:
                out.append((dtype, w_dtype, shape, 1.0))
                if dtype in OTHER_X_DTYPES:
                    out.extend((dtype, w_dtype, shape, v) for v in OTHER_CONSTANTS)
    return out


def test_constant_float_weights(backend, openmp, rng):
    """Every case in one function: each output is numpy's, dtype included."""
    if backend.name == "gpu":
        backend.skip_on_emulation("40 outputs of 50,000 elements, about a second of emulation each")
    values = {dtype: x_values(dtype, rng) for dtype in INT_DTYPES}
    all_cases = cases()

    def build(**xs):
        return [bincount(xs[d], weights=constant_weight(v, wd, s)) for d, wd, s, v in all_cases]

    fn, _ = compile_shared(backend, build, values, openmp)
    for (dtype, w_dtype, shape, value), got in zip(all_cases, fn()):
        got = backend.to_numpy(got)
        expected = numpy_answer(values[dtype], value, w_dtype)
        assert got.dtype == expected.dtype, (dtype, w_dtype, shape, value, got.dtype)
        np.testing.assert_array_equal(got, expected, err_msg=str((dtype, w_dtype, shape, value)))
        assert np.signbit(got).any() == np.signbit(expected).any()


@pytest.mark.parametrize("shape", SHAPES)
def test_issue_32_repro(backend, openmp, shape):
    """The issue's example, and the fuzz test's: an empty int8 x."""
    values = {"x": np.array([0, 3, 3, 1]), "e": np.array([], dtype="int8")}

    def build(x, e):
        w = constant_weight(1.0, "float64", shape)
        return [bincount(x, weights=w), bincount(e, weights=w)]

    fn, _ = compile_shared(backend, build, values, openmp)
    got, empty = (backend.to_numpy(r) for r in fn())
    np.testing.assert_array_equal(got, np.array([1.0, 1.0, 0.0, 2.0]))
    assert got.dtype == np.float64
    assert empty.shape == (0,) and empty.dtype == np.float64
