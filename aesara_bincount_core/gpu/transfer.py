"""Transfer Ops between host tensors and GPU arrays, and the ``"gpu"`` transfer target.

Importing this module registers, with Aesara's ``register_transfer``, the
target ``"gpu"``: ``tensor.transfer("gpu")`` (and
``GpuArrayType.convert_variable`` of a tensor) is ``gpu_from_host(tensor)``.
"""
from aesara.graph.basic import Apply
from aesara.graph.op import Op
from aesara.tensor.basic import as_tensor_variable, register_transfer
from aesara.tensor.type import TensorType

from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module

__all__ = ["HostFromGpu", "GpuFromHost", "host_from_gpu", "gpu_from_host"]


class _Transfer(Op):
    """A copy between host and GPU: same dtype and static shape, shape inferred as is."""

    __props__ = ()
    _f16_ok = True

    def R_op(self, inputs, eval_points):
        return [None if eval_points[0] is None else self(eval_points[0])]

    def infer_shape(self, fgraph, node, shapes):
        return shapes

    def __str__(self):
        return type(self).__name__


class HostFromGpu(_Transfer):
    """Copy a GPU array to the host: ``GpuArrayType`` -> ``TensorType``.

    ``perform`` calls ``cupy.asnumpy``, which synchronizes CuPy's current
    stream.  The gradient moves the output gradient back to the GPU.
    """

    def make_node(self, x):
        if not isinstance(x.type, GpuArrayType):
            raise TypeError(f"HostFromGpu: expected a GPU variable, got {x.type}")
        return Apply(self, [x], [TensorType(x.type.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        # synchronize!
        output_storage[0][0] = cupy_module().asnumpy(inputs[0])

    def grad(self, inputs, output_grads):
        return [gpu_from_host(output_grads[0])]


class GpuFromHost(_Transfer):
    """Copy a host tensor to the current GPU: ``TensorType`` -> ``GpuArrayType``.

    ``perform`` calls ``cupy.asarray``, a copy from host memory on CuPy's
    current stream.  The gradient moves the output gradient back to the host.
    """

    def make_node(self, x):
        x = as_tensor_variable(x)
        return Apply(self, [x], [GpuArrayType(x.type.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        output_storage[0][0] = cupy_module().asarray(inputs[0])

    def grad(self, inputs, output_grads):
        return [host_from_gpu(output_grads[0])]


host_from_gpu = HostFromGpu()
gpu_from_host = GpuFromHost()


def _transfer_to_gpu(var, target):
    """Aesara's transfer hook: a host tensor to the target ``"gpu"``."""
    if target == "gpu" and isinstance(var.type, TensorType):
        return gpu_from_host(var)
    return None


register_transfer(_transfer_to_gpu)
