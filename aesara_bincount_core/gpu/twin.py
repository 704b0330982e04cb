"""The base of the GPU Ops that do what one host Op does: :class:`GpuTwin`.

A GPU twin holds the host Op it stands for (``host_op``, its only prop) and
takes that Op's types, static shapes and shape inference, with GPU arrays
(:class:`~aesara_bincount_core.gpu.type.GpuArrayType`) in place of the host
tensors at the positions it names (``gpu_inputs``).  Its neighbours, each a
module of twins: :mod:`.views` (DimShuffle, Reshape, Subtensor),
:mod:`.reduction` (CAReduce) and :mod:`.gather` (AdvancedSubtensor1); the
rewrite that puts them in graphs is :mod:`aesara_bincount.gpu.lifting`.
"""
from typing import Tuple

from aesara.graph.basic import Apply
from aesara.graph.op import Op

from aesara_bincount_core.gpu.c_file_op import require_gpu
from aesara_bincount_core.gpu.op import _as_gpu
from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module

__all__ = ["GpuTwin", "as_device_array"]


def as_device_array(value):
    """``value`` as a ``cupy.ndarray`` (a 0-d result that came back as a scalar is wrapped)."""
    cp = cupy_module()
    return value if isinstance(value, cp.ndarray) else cp.asarray(value)


class GpuTwin(Op):
    """A GPU Op with the graph semantics of a host Op.

    Parameters
    ----------
    host_op : aesara.graph.op.Op
        The host Op; its ``make_node`` gives this Op's output dtypes and
        static shapes, its ``infer_shape`` this Op's shapes.

    Notes
    -----
    Subclasses set :attr:`gpu_inputs` (the positions of the inputs that are
    GPU arrays; the others are host tensors, as for ``host_op``) and write
    ``perform`` on CuPy arrays.  Work is queued on CuPy's current stream and
    is not waited for, unless the subclass says otherwise.  Inputs given as
    host tensors at a GPU position are copied to the GPU (``GpuFromHost``).
    GPU values are never folded into the graph as constants.
    """

    __props__ = ("host_op",)
    #: Positions of the inputs that live on the GPU.
    gpu_inputs: Tuple[int, ...] = (0,)
    #: For twins that launch kernels of the package: what the CPU does
    #: instead ("gather", "set"), named by :meth:`prepare_node`'s message.
    #: None: no check (the twin runs CuPy's own work).
    cpu_verb = None

    def __init__(self, host_op: Op):
        self.host_op = host_op

    def __str__(self):
        return f"Gpu{self.host_op}"

    def make_node(self, *inputs):
        inputs = [_as_gpu(v) if k in self.gpu_inputs else v for k, v in enumerate(inputs)]
        stand_ins = [
            v.type.host_type()() if k in self.gpu_inputs else v for k, v in enumerate(inputs)
        ]
        host_node = self.host_op.make_node(*stand_ins)
        inputs = [
            v if k in self.gpu_inputs else host_node.inputs[k] for k, v in enumerate(inputs)
        ]
        outputs = [GpuArrayType(o.type.dtype, shape=o.type.shape)() for o in host_node.outputs]
        return Apply(self, inputs, outputs)

    def infer_shape(self, fgraph, node, shapes):
        return self.host_op.infer_shape(fgraph, node, shapes)

    def prepare_node(self, node, storage_map, compute_map, impl):
        """When :attr:`cpu_verb` is set, raise ``GpuUnavailableError`` at compile
        time unless a GPU can run the twin's kernels
        (:func:`~aesara_bincount_core.gpu.c_file_op.require_gpu`)."""
        if self.cpu_verb is not None:
            require_gpu(type(self).__name__, self.cpu_verb)

    def do_constant_folding(self, fgraph, node):
        return False
