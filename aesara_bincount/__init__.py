"""aesara_bincount: fast ``bincount`` for Aesara graphs, on the CPU and on NVIDIA GPUs.

Importing this package registers graph rewrites: every graph that
:func:`aesara.tensor.extra_ops.bincount` builds (and every scatter-add
``advanced_inc_subtensor1(zeros(n), w, idx)``) compiles to the C
:class:`Bincount` Op under FAST_RUN, with no change to user code; every other
scatter-add ``advanced_inc_subtensor1(base, y, idx)`` (rows of any rank, onto
zeros or any base: the gradient of ``W[idx]``, sparse updates of ``W``) to
the C :class:`ScatterAdd` Op.  ``mode.excluding("bincount")`` switches the
rewrites off.
"""
from aesara_bincount._folding import decline_empty_reduction_folding
from aesara_bincount._scan_py312 import use_python_scan_loop
from aesara_bincount._openmp import register_fork_handler
from aesara_bincount_core.op import Bincount, bincount
from aesara_bincount.rewriting import BincountMatch, local_bincount, match_bincount
from aesara_bincount.fusion_rewriting import local_bincount_fusion
from aesara_bincount.fusion_views import local_bincount_flatten_elemwise
from aesara_bincount_core.fused import FusedBincount
from aesara_bincount_core.scatter_add import ScatterAdd, scatter_add
from aesara_bincount.bool_scatter import BoolScatterAddRefused, local_bool_scatter_add
from aesara_bincount.multi_index import local_multi_index_scatter_add, match_multi_index
from aesara_bincount_core.linear_index import LinearIndex
from aesara_bincount_core.multi_scatter_add import MultiIndexScatterAdd
from aesara_bincount.multi_index_one_pass import local_multi_index_one_pass
from aesara_bincount.scatter_set_rewriting import local_scatter_set
from aesara_bincount_core.scatter_set import ScatterSet
from aesara_bincount.scatter_rewriting import (
    ScatterAddMatch,
    local_inplace_scatter_add,
    local_scatter_add,
    match_scatter_add,
)
from aesara_bincount.sparse_update import SparseUpdate, match_sparse_update
from aesara_bincount_core.semantics import reference_bincount, reference_scatter_add

# The GPU part registers the shared constructor for CuPy arrays and the GPU
# rewrite; it imports no CuPy (see aesara_bincount.gpu).
from aesara_bincount import gpu  # noqa: E402  isort:skip

__version__ = "0.1.0"

# GNU OpenMP hangs in a child forked after a parallel region ran: see _openmp.py.
register_fork_handler()

# No constant_folding tracebacks for the max of an empty constant x: see _folding.py.
decline_empty_reduction_folding()

# Aesara 2.9's compiled Scan loop does not build on Python 3.12: see _scan_py312.py.
use_python_scan_loop()

__all__ = [
    "Bincount",
    "FusedBincount",
    "local_bincount_fusion",
    "BincountMatch",
    "bincount",
    "local_bincount",
    "match_bincount",
    "reference_bincount",
    "ScatterAdd",
    "ScatterAddMatch",
    "scatter_add",
    "local_scatter_add",
    "local_inplace_scatter_add",
    "match_scatter_add",
    "reference_scatter_add",
    "BoolScatterAddRefused",
    "local_bool_scatter_add",
    "LinearIndex",
    "local_multi_index_scatter_add",
    "match_multi_index",
    "MultiIndexScatterAdd",
    "local_multi_index_one_pass",
    "ScatterSet",
    "local_scatter_set",
    "SparseUpdate",
    "match_sparse_update",
    "gpu",
    "__version__",
]
