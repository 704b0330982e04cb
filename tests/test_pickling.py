"""A compiled function using ``Bincount`` survives pickling into a fresh process.

The parent compiles, calls and pickles the function; a new Python process
unpickles it (which re-reads the C sources and compiles or loads the module),
checks that its graph still holds ``Bincount``, and calls it; the results
must be identical (float sums on the GPU: within the bound of any order of
summation, as they are added in a nondeterministic order).
"""
import pickle

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.tensor.extra_ops import bincount

from aesara_bincount import Bincount
from backends import BACKENDS, compile_shared
from expect import assert_same_histogram
from procs import run_python

_CHILD = """
import pickle, sys
import numpy as np
with open({path!r}, "rb") as fh:
    f, args = pickle.load(fh)
names = [type(node.op).__name__ for node in f.maker.fgraph.toposort()]
assert any("Bincount" in n for n in names), names
assert "AdvancedIncSubtensor1" not in names, names
outs = f(*args)
outs = outs if isinstance(outs, list) else [outs]
outs = [o.get() if hasattr(o, "get") and not isinstance(o, np.ndarray) else np.asarray(o)
        for o in outs]
np.savez({out!r}, *outs)
print("ops", names)
"""


def _roundtrip(tmp_path, f, args=()):
    path = tmp_path / "f.pkl"
    out = tmp_path / "out.npz"
    with open(path, "wb") as fh:
        pickle.dump((f, args), fh, protocol=pickle.HIGHEST_PROTOCOL)
    run_python(_CHILD.format(path=str(path), out=str(out)), timeout=300)
    with np.load(out) as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]


def _as_list(outs):
    return outs if isinstance(outs, list) else [outs]


@pytest.mark.parametrize("backend", BACKENDS)
def test_pickled_function_in_a_fresh_process(backend, tmp_path, openmp):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3000, size=100_000)
    w = rng.standard_normal(100_000).astype("float32")
    fn, _ = compile_shared(
        backend,
        lambda x, w: [
            bincount(x),
            bincount(x, weights=w, minlength=5000),
            at.inc_subtensor(at.zeros(3000, dtype="float32")[x], w),
        ],
        {"x": x, "w": w},
        openmp,
    )
    here = [backend.to_numpy(o) for o in _as_list(fn())]
    there = _roundtrip(tmp_path, fn)
    assert len(there) == len(here) == 3
    for a, b in zip(here, there):
        assert a.dtype == b.dtype
        if backend.float_sums_reproducible or a.dtype.kind != "f":
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(here[0], np.bincount(x))
    # Within the bound of any order of summation (the GPU adds floats in any order).
    assert_same_histogram(there[1], x, w, 5000, "float32", "bincount after unpickling")
    assert_same_histogram(there[2], x, w, 3000, "float32", "scatter-add after unpickling")


def test_pickled_function_with_inputs(tmp_path, openmp):
    x = at.vector("x", dtype="int16")
    m = at.lscalar("m")
    with aesara.config.change_flags(openmp=openmp):
        f = aesara.function([x, m], bincount(x, minlength=m))
    assert any(isinstance(n.op, Bincount) for n in f.maker.fgraph.toposort())
    xv = np.array([3, 1, 3, 0], dtype="int16")
    (there,) = _roundtrip(tmp_path, f, (xv, 7))
    np.testing.assert_array_equal(there, f(xv, 7))
    np.testing.assert_array_equal(there, np.bincount(xv, minlength=7).astype("int16"))


def test_op_pickles_without_its_c_text():
    """The pickle holds the Op's props, not the C source text, which is read
    again from the installed files when unpickled."""
    op = Bincount("scatter", out_dtype="float32", openmp=True)
    data = pickle.dumps(op)
    assert b"bc_count_block" not in data and len(data) < 2000
    back = pickle.loads(data)
    assert back == op and hash(back) == hash(op)
    assert back.code_sections == op.code_sections
    assert back.c_code_cache_version() == op.c_code_cache_version()
