"""Boolean scatter-adds: an error when the function is compiled, not when it runs.

``bincount(y, eq(y, p))`` (boolean weights, as in an F1 metric) makes Aesara
build ``advanced_inc_subtensor1(zeros(n, dtype=bool), w, y)``: Aesara types
the histogram as ``bool``, and its C code for that node refuses booleans
when the function runs (``TypeError: unsupported type for a``), far from
the line that built the graph.  numpy's answer, ``numpy.bincount(y, w)``,
is a float64 count, which a rewrite cannot give: the output type of the
graph is already ``bool``.

So :func:`local_bool_scatter_add` replaces every boolean scatter-add that
increments (``AdvancedIncSubtensor1`` or ``AdvancedIncSubtensor`` with one
integer vector index, which Aesara makes an ``AdvancedIncSubtensor1``) by a
:class:`BoolScatterAddRefused` node, whose thunk cannot be made:
``aesara.function`` raises a ``TypeError`` that says what to write (cast
the weights).  The rewrite has the tags ``fast_run``, ``bincount`` and
``cxx_only`` (it is Aesara's C code that refuses booleans; the Python
modes keep Aesara's ``numpy.add.at``, a logical or), and runs in the pass
``pre_local_bincount`` position (0.031) and in ``specialize``.
"""
from aesara.compile import optdb
from aesara.graph.basic import Apply
from aesara.graph.op import Op
from aesara.graph.rewriting.basic import WalkingGraphRewriter, node_rewriter
from aesara.tensor.rewriting.basic import register_specialize
from aesara.tensor.subtensor import AdvancedIncSubtensor, AdvancedIncSubtensor1

from aesara_bincount.rewriting import _bincount_minlength, _zeros_length

__all__ = ["BoolScatterAddRefused", "local_bool_scatter_add", "BOOL_WEIGHTS_MESSAGE"]

#: What ``aesara.function`` raises for a boolean scatter-add.
BOOL_WEIGHTS_MESSAGE = (
    "{what}: the weights (increments) are boolean, so Aesara types the result "
    "as bool, which cannot hold a count, and its C code refuses booleans. "
    "Cast the weights to the dtype the counts should have: "
    "bincount(x, aesara.tensor.cast(w, 'float64')) gives numpy.bincount's "
    "answer, 'int64' whole counts."
)


class BoolScatterAddRefused(Op):
    """Stands for a boolean scatter-add until ``aesara.function`` refuses it.

    Inputs and output are those of the replaced ``AdvancedIncSubtensor1``
    (``base`` of dtype bool, increments, indices), so the graph keeps its
    types.  :meth:`make_thunk` and :meth:`perform` raise ``TypeError`` with
    :data:`BOOL_WEIGHTS_MESSAGE`: the error comes when the function is
    compiled (the linker makes every thunk then), naming the bincount form
    when the graph is one.  Never constant-folded.

    Parameters
    ----------
    what : str
        ``"bincount"`` or ``"scatter-add"``: the form the message names.
    """

    __props__ = ("what",)

    def __init__(self, what: str = "scatter-add"):
        self.what = what

    def make_node(self, base, increments, *indices):
        return Apply(self, [base, increments, *indices], [base.type()])

    def _refuse(self):
        raise TypeError(BOOL_WEIGHTS_MESSAGE.format(what=self.what))

    def perform(self, node, inputs, output_storage, params=None):
        self._refuse()

    def make_thunk(self, node, storage_map, compute_map, no_recycling, impl=None):
        self._refuse()

    def do_constant_folding(self, fgraph, node):
        return False


def _is_bool_increment(node) -> bool:
    op = node.op
    if isinstance(op, AdvancedIncSubtensor1):
        pass
    elif isinstance(op, AdvancedIncSubtensor):
        indices = node.inputs[2:]
        if len(indices) != 1 or getattr(indices[0].type, "ndim", None) != 1:
            return False  # Aesara's numpy.add.at in Python takes it (a logical or)
    else:
        return False
    return not op.set_instead_of_inc and node.outputs[0].type.dtype == "bool"


@register_specialize("bincount", "cxx_only", name="local_bool_scatter_add")
@node_rewriter([AdvancedIncSubtensor1, AdvancedIncSubtensor])
def local_bool_scatter_add(fgraph, node):
    """Replace a boolean scatter-add by :class:`BoolScatterAddRefused` (see the module notes)."""
    if not _is_bool_increment(node):
        return False
    what = "bincount" if isinstance(node.op, AdvancedIncSubtensor1) and _is_bincount(node) else "scatter-add"
    new = BoolScatterAddRefused(what)(*node.inputs)
    return [new]


def _is_bincount(node) -> bool:
    """Whether the boolean scatter-add is ``extra_ops.bincount``'s graph (zeros of ``max(x) + 1``)."""
    base, _, idx = node.inputs
    length = _zeros_length(base)
    return length is not None and _bincount_minlength(length, idx) is not None


optdb.register(
    "pre_local_bool_scatter_add",
    WalkingGraphRewriter(local_bool_scatter_add),
    "fast_run",
    "bincount",
    "cxx_only",
    position=0.031,
)
