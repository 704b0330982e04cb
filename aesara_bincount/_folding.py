"""Aesara's constant folding of a maximum or minimum over an empty constant.

``extra_ops.bincount(x)`` builds ``zeros(max(x) + 1)``, and Aesara, while it
builds that graph, infers the static length of the zeros by constant folding
(``infer_static_shape``).  For an empty constant ``x`` the fold of ``max``
raises ("zero-size array to reduction operation maximum which has no
identity"), and Aesara logs each failed attempt with its traceback: four
``Rewrite failure due to: constant_folding`` reports for one ``bincount`` of
``np.array([], "int64")``, before any rewrite of ours can run.

:func:`decline_empty_reduction_folding` makes the reductions without an
identity (``MaxAndArgmax``, ``Max``, ``Min``, ``Argmax``, ``Argmin``) decline
to be folded when one of their inputs is an empty constant.  Nothing else
changes: a declined node stays in the graph and, when it runs, raises the
same ``ValueError`` as the fold would have; in a bincount our rewrite
replaces it, and the result is ``zeros(minlength)``.  Folding of every
other input is Aesara's own.
"""
from aesara.graph.basic import Constant

#: Marks a class whose ``do_constant_folding`` this module has wrapped.
_WRAPPED = "_aesara_bincount_declines_empty"


def _has_empty_constant(node) -> bool:
    for var in node.inputs:
        if isinstance(var, Constant):
            size = getattr(var.data, "size", None)
            if size == 0:
                return True
    return False


def _declining(original):
    def do_constant_folding(self, fgraph, node):
        if _has_empty_constant(node):
            return False
        return original(self, fgraph, node)

    do_constant_folding.__doc__ = original.__doc__
    return do_constant_folding


def decline_empty_reduction_folding() -> None:
    """Make Aesara's reductions without an identity decline to fold an empty constant.

    Called once by ``import aesara_bincount``; calling it again changes
    nothing.  It wraps ``do_constant_folding`` of ``MaxAndArgmax``, ``Max``,
    ``Min``, ``Argmax`` and ``Argmin`` (those that Aesara 2.9 defines) so that
    it returns ``False`` for a node with an input that is a constant of size
    0, and otherwise gives Aesara's answer.

    Raises
    ------
    Nothing.  A class that Aesara does not define is skipped.
    """
    from aesara.tensor import math as tmath

    for name in ("MaxAndArgmax", "Max", "Min", "Argmax", "Argmin"):
        cls = getattr(tmath, name, None)
        if cls is None:
            continue
        if vars(cls).get(_WRAPPED):
            continue
        cls.do_constant_folding = _declining(cls.do_constant_folding)
        setattr(cls, _WRAPPED, True)
