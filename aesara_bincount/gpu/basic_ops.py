"""Transfer Ops between host tensors and GPU arrays."""
from aesara.graph.basic import Apply
from aesara.graph.op import Op
from aesara.tensor.basic import as_tensor_variable
from aesara.tensor.type import TensorType

from aesara_bincount.gpu.type import GpuArrayType, cupy_module

__all__ = ["HostFromGpu", "GpuFromHost", "host_from_gpu", "gpu_from_host"]


class HostFromGpu(Op):
    """Copy a GPU array to the host: ``GpuArrayType`` -> ``TensorType``.

    Same dtype and static shape.  ``perform`` calls ``cupy.ndarray.get()``,
    which synchronizes CuPy's current stream.  The gradient moves the output
    gradient back to the GPU.
    """

    __props__ = ()
    _f16_ok = True

    def make_node(self, x):
        if not isinstance(x.type, GpuArrayType):
            raise TypeError(f"HostFromGpu: expected a GPU variable, got {x.type}")
        return Apply(self, [x], [TensorType(x.type.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        # synchronize!
        output_storage[0][0] = cupy_module().asnumpy(x)

    def grad(self, inputs, output_grads):
        (gz,) = output_grads
        return [gpu_from_host(gz)]

    def R_op(self, inputs, eval_points):
        return [None if eval_points[0] is None else self(eval_points[0])]

    def infer_shape(self, fgraph, node, shapes):
        return shapes

    def __str__(self):
        return "HostFromGpu"


class GpuFromHost(Op):
    """Copy a host tensor to the current GPU: ``TensorType`` -> ``GpuArrayType``.

    Same dtype and static shape.  ``perform`` calls ``cupy.asarray``, a copy
    from host memory on CuPy's current stream.  The gradient moves the
    output gradient back to the host.
    """

    __props__ = ()
    _f16_ok = True

    def make_node(self, x):
        x = as_tensor_variable(x)
        return Apply(self, [x], [GpuArrayType(x.type.dtype, shape=x.type.shape)()])

    def perform(self, node, inputs, output_storage, params=None):
        (x,) = inputs
        output_storage[0][0] = cupy_module().asarray(x)

    def grad(self, inputs, output_grads):
        (gz,) = output_grads
        return [host_from_gpu(gz)]

    def R_op(self, inputs, eval_points):
        return [None if eval_points[0] is None else self(eval_points[0])]

    def infer_shape(self, fgraph, node, shapes):
        return shapes

    def __str__(self):
        return "GpuFromHost"


host_from_gpu = HostFromGpu()
gpu_from_host = GpuFromHost()
