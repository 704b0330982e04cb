"""The :class:`LinearIndex` Op: several integer index arrays made one flat row index, checked."""
from aesara.gradient import DisconnectedType
from aesara.graph.basic import Apply
from aesara.tensor.basic import as_tensor_variable, cast, constant
from aesara.tensor.extra_ops import broadcast_shape
from aesara.tensor.math import prod
from aesara.tensor.type import TensorType

from aesara_bincount_core.c_file_op import CFileOp
from aesara_bincount_core.scatter_add import static_length_vector
from aesara_bincount_core.semantics import INDEX_DTYPES, reference_linear_index

__all__ = ["LinearIndex", "linear_index"]


class LinearIndex(CFileOp):
    r"""Check K integer index arrays and turn them into one flat row index.

    ``LinearIndex()(dims, idx_0, ..., idx_{K-1})`` returns ``(flat, bshape)``:
    the index arrays broadcast together, NumPy style, to the shape ``B``
    (``bshape``, an int64 vector), and ``flat``, the int64 vector of
    ``prod(B)`` rows of ``base.reshape(prod(dims), *rest)`` that
    ``base[idx_0, ..., idx_{K-1}]`` names, in C order of ``B``::

        flat = ravel_multi_index([i % d for i, d in zip(broadcast(idx), dims)], dims)

    It is the check pass of the scatter-adds, scatter-sets and gathers with
    several index arrays: the rewrite of :mod:`aesara_bincount.multi_index`
    builds ``ScatterAdd`` (or the scatter-set, or a gather) of the rows
    ``flat`` of the reshaped base on top of it, so that those Ops see one
    1-D index, already checked.

    Parameters (inputs of the Apply node)
    -------------------------------------
    dims : int64 vector of static length K (1 or more)
        The sizes of the K leading axes of the base (``base.shape[:K]``).
    idx_0, ..., idx_{K-1} : integer tensors (int8 ... uint64), any shapes
        that broadcast together, any strides.

    Returns
    -------
    flat : int64 vector, shape ``(prod(B),)``, C-contiguous
    bshape : int64 vector, shape ``(len(B),)``, where ``len(B)`` is the
        largest number of dimensions of the index arrays

    Raises
    ------
    IndexError
        When the function runs: index arrays whose shapes do not broadcast
        (``"shape mismatch: indexing arrays could not be broadcast together
        with shapes ..."``, as numpy); an index outside ``[-d_a, d_a)`` on
        axis ``a``, naming the value, its position in C order of ``B`` and
        the axis (the axes are checked in order; the first bad index of the
        first axis that has one is named).  A negative index wraps once on
        its own axis, as numpy does.  Nothing is returned on error, so the
        scatter built on ``flat`` writes nothing.
    MemoryError
        When ``prod(B)`` row numbers do not fit in memory.
    TypeError
        From ``make_node``: ``dims`` not an integer vector of static length
        K, an index that is not an integer tensor.

    Notes
    -----
    One pass over ``B`` per axis on one thread, holding the GIL; the C code
    is ``c_code/cpu/linear_index.c``.  The outputs are integers: no
    gradient flows through it (all inputs disconnected).
    """

    __props__ = ()
    c_sources = ("common/host_helpers.h", "common/scatter_checks.h", "cpu/linear_index.c")
    c_function = "cpu_linear_index"

    def c_flags(self, node):
        return {"LI_NIDX": len(node.inputs) - 1}

    def make_node(self, dims, *indices):
        name = type(self).__name__
        dims, k = static_length_vector(dims, f"{name}: dims")
        indices = [as_tensor_variable(i) for i in indices]
        if k < 1 or k != len(indices):
            raise TypeError(f"{name}: dims has length {k} for {len(indices)} index arrays")
        for i in indices:
            if i.type.dtype not in INDEX_DTYPES:
                raise TypeError(f"{name}: index arrays must have an integer dtype, got {i.type}")
        if dims.type.dtype != "int64":
            dims = cast(dims, "int64")
        bnd = max(i.type.ndim for i in indices)
        outputs = [TensorType("int64", shape=(None,))(), TensorType("int64", shape=(bnd,))()]
        return Apply(self, [dims, *indices], outputs)

    def perform(self, node, inputs, output_storage, params=None):
        dims, *indices = inputs
        flat, bshape = reference_linear_index(dims, indices)
        output_storage[0][0] = flat
        output_storage[1][0] = bshape

    def infer_shape(self, fgraph, node, input_shapes):
        bshape = broadcast_shape(*input_shapes[1:], arrays_are_shapes=True)
        total = prod(as_tensor_variable(list(bshape)), dtype="int64") if bshape else constant(1, dtype="int64")
        return [(total,), (len(bshape),)]

    def connection_pattern(self, node):
        return [[False, False] for _ in node.inputs]

    def L_op(self, inputs, outputs, output_grads):
        return [DisconnectedType()() for _ in inputs]


def linear_index(dims, *indices):
    """Build :class:`LinearIndex`: ``(flat, bshape)`` of the index arrays ``indices`` over ``dims``.

    See :class:`LinearIndex` for shapes, dtypes and errors.
    """
    return LinearIndex()(dims, *indices)
