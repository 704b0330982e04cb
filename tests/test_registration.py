"""The rewrites apply where ``aesara_bincount`` was imported, and only there.

Aesara's compile cache unpickles the key of every module it holds when a
process first compiles, and a key holds the Ops and types of its module.  Our
Ops and types live in ``aesara_bincount_core``, which registers no rewrite, so
a process that shares the compile directory with one that compiled our Ops,
and never imports ``aesara_bincount``, compiles Aesara's own graph and gets
its semantics.  Before the package was split, the keys named
``aesara_bincount.op``, whose import registered the rewrites, and this test
failed: the second process got ``Bincount``.
"""
import os

import pytest

from backends import BACKENDS
from procs import run_python

#: Compiles our Ops, on the CPU or on the GPU, into the shared compile directory.
_WITH_PACKAGE = """
import numpy as np, aesara, aesara.tensor as at
from aesara.tensor.extra_ops import bincount
import aesara_bincount

if __GPU__:
    from aesara_bincount import gpu
    x, w = gpu.shared(np.array([1, 2, 2])), gpu.shared(np.array([1.0, 2.0, 3.0]))
    op_name = "GpuBincount"
else:
    x, w = aesara.shared(np.array([1, 2, 2])), aesara.shared(np.array([1.0, 2.0, 3.0]))
    op_name = "Bincount"
f = aesara.function([], [bincount(x), bincount(x, w, minlength=4),
                         at.inc_subtensor(at.zeros(5)[x], 1.0)])
names = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
assert names.count(op_name) == 3, names
f()
"""

#: Never imports aesara_bincount.
_WITHOUT_PACKAGE = """
import sys
import numpy as np, aesara, aesara.tensor as at
from aesara.tensor.extra_ops import bincount
from aesara.tensor.subtensor import AdvancedIncSubtensor1

x = at.lvector("x")
(x * 2).sum().eval({x: np.arange(3)})  # any compile loads the cache's keys
f = aesara.function([x], [bincount(x), at.inc_subtensor(at.zeros(x.max() + 1)[x], 2.0)])
names = [type(n.op).__name__ for n in f.maker.fgraph.toposort()]
assert not any("Bincount" in n for n in names), names
assert names.count("AdvancedIncSubtensor1") == 2, names
counts, scatter = f(np.array([-1, 2]))
# Aesara's semantics: a negative value wraps into the top bin.
assert counts.tolist() == [0, 0, 2] and scatter.tolist() == [0.0, 0.0, 4.0], (counts, scatter)
assert "aesara_bincount" not in sys.modules
# The keys were read: their Ops come from the core, which registers nothing.
assert __CORE__ in sys.modules, sorted(m for m in sys.modules if "bincount" in m)
# Not even Aesara's constructors for CuPy arrays.
from aesara.compile.sharedvalue import shared_constructor
from aesara.tensor import _as_tensor_variable
from aesara_bincount_core.gpu.type import CupyArray
assert CupyArray not in shared_constructor.registry
assert CupyArray not in _as_tensor_variable.registry

# Importing the package is what turns the rewrites on.
import aesara_bincount
assert shared_constructor.registry[CupyArray] is aesara_bincount.gpu.shared
assert CupyArray in _as_tensor_variable.registry
g = aesara.function([x], bincount(x))
assert any(type(n.op).__name__ == "Bincount" for n in g.maker.fgraph.toposort())
print("ok")
"""


@pytest.mark.slow  # two fresh compile caches' worth of compiling: about 90 s
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_process_that_never_imports_the_package_keeps_aesaras_graph(backend, tmp_path):
    backend.require()
    gpu = backend.name == "gpu"
    # The same compile directory for both processes, and only for them; other
    # flags (a sanitizer's compiler flags) are kept.
    flags = os.environ.get("AESARA_FLAGS", "")
    env = {"AESARA_FLAGS": ",".join(f for f in (flags, f"compiledir={tmp_path}") if f)}
    run_python(_WITH_PACKAGE.replace("__GPU__", repr(gpu)), env=env, timeout=600)
    assert list(tmp_path.glob("*/key.pkl")), "the first process left no module in the cache"
    core = "aesara_bincount_core.gpu.op" if gpu else "aesara_bincount_core.op"
    out = run_python(_WITHOUT_PACKAGE.replace("__CORE__", repr(core)), env=env, timeout=600)
    assert out.stdout.strip().endswith("ok")
