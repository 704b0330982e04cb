"""aesara_bincount: fast ``bincount`` for Aesara graphs, on the CPU and on NVIDIA GPUs.

Importing this package registers graph rewrites: every graph that
:func:`aesara.tensor.extra_ops.bincount` builds (and every scatter-add
``advanced_inc_subtensor1(zeros(n), w, idx)``) compiles to the C
:class:`Bincount` Op under FAST_RUN, with no change to user code.
``mode.excluding("bincount")`` switches the rewrite off.
"""
from aesara_bincount._openmp import register_fork_handler
from aesara_bincount_core.op import Bincount, bincount
from aesara_bincount.rewriting import BincountMatch, local_bincount, match_bincount
from aesara_bincount_core.semantics import reference_bincount

# The GPU part registers the shared constructor for CuPy arrays and the GPU
# rewrite; it imports no CuPy (see aesara_bincount.gpu).
from aesara_bincount import gpu  # noqa: E402  isort:skip

__version__ = "0.1.0"

# GNU OpenMP hangs in a child forked after a parallel region ran: see _openmp.py.
register_fork_handler()

__all__ = [
    "Bincount",
    "BincountMatch",
    "bincount",
    "local_bincount",
    "match_bincount",
    "reference_bincount",
    "gpu",
    "__version__",
]
