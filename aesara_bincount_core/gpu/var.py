"""GPU variables, constants and shared variables: what GpuArrayType values look like in a graph.

Variables of :class:`~aesara_bincount_core.gpu.type.GpuArrayType` behave like
tensors in expressions (``x.max()``, ``x + 1``, ``bincount(x)``): converting
one to a tensor inserts a
:class:`~aesara_bincount_core.gpu.transfer.HostFromGpu` transfer, and the GPU
rewrite removes the transfer again where a GPU Op can take the GPU value.

Shared variables: :func:`gpu_shared` (``aesara_bincount.gpu.shared``) of a
NumPy or CuPy array gives a :class:`GpuArraySharedVariable`, for every int,
uint and float dtype.  CuPy is imported only when a value must be made or
read.

This module registers nothing for CuPy arrays: ``import aesara_bincount``
registers :func:`gpu_shared` with Aesara's ``shared_constructor`` and
:func:`as_tensor_cupy_array` with ``as_tensor_variable`` for them (see
:func:`aesara_bincount.gpu.register_cupy_arrays`), so that a process that
only unpickles our types from Aesara's compile cache keeps Aesara's own
behaviour for CuPy arrays.

Importing this module (which the package ``aesara_bincount_core.gpu`` does)
sets ``GpuArrayType.variable_type`` and ``constant_type``, as Aesara's
``tensor/var.py`` does for ``TensorType``.
"""
from typing import Optional

import numpy as np
from aesara.compile.sharedvalue import SharedVariable
from aesara.graph.basic import Constant, Variable
from aesara.tensor import _as_tensor_variable
from aesara.tensor.basic import as_tensor_variable
from aesara.tensor.var import _tensor_py_operators

from aesara_bincount_core.gpu.transfer import host_from_gpu
from aesara_bincount_core.gpu.type import (
    GPU_DTYPES,
    GpuArrayType,
    _is_cupy,
    cupy_module,
    host_value,
)

__all__ = [
    "GpuArrayVariable",
    "GpuArrayConstant",
    "GpuArraySharedVariable",
    "gpu_shared",
    "as_tensor_cupy_array",
]


class _gpu_py_operators(_tensor_py_operators):
    """Tensor methods for GPU variables; each first moves the value to the host."""

    def transfer(self, target: str):
        """``"cpu"``: a tensor with this value (``HostFromGpu``); ``"gpu"``: itself."""
        if target == "gpu":
            return self
        if target == "cpu":
            return host_from_gpu(self)
        raise ValueError(f"unknown transfer target {target!r}; expected 'cpu' or 'gpu'")


class GpuArrayVariable(_gpu_py_operators, Variable):
    """A symbolic GPU array (the output of a GPU Op, or a GPU input)."""


class GpuArrayConstantSignature(tuple):
    """Merge key of a :class:`GpuArrayConstant`: the type and the host value."""

    def __eq__(self, other):
        if type(self) != type(other):
            return False
        (t0, d0), (t1, d1) = self, other
        return t0 == t1 and d0.shape == d1.shape and np.array_equal(d0, d1, equal_nan=d0.dtype.kind == "f")

    def __hash__(self):
        t, d = self
        return hash((type(self), t, d.shape, d.tobytes()[:256]))

    def __ne__(self, other):
        return not self == other


class GpuArrayConstant(_gpu_py_operators, Constant):
    """A constant GPU array."""

    def signature(self):
        return GpuArrayConstantSignature((self.type, host_value(self.data)))

    def __str__(self):
        return self.name or f"GpuArrayConstant{{{host_value(self.data)}}}"


class GpuArraySharedVariable(_gpu_py_operators, SharedVariable):
    """A shared variable whose value stays on the GPU (a ``cupy.ndarray``).

    ``get_value()`` returns a NumPy copy; ``get_value(borrow=True,
    return_internal_type=True)`` the CuPy array itself, and
    ``return_internal_type=True`` without ``borrow`` a device copy.
    ``set_value`` accepts NumPy or CuPy arrays (a CuPy array is copied unless
    ``borrow=True``).  A function that fails leaves the value unchanged.
    """

    def get_value(self, borrow=False, return_internal_type=False):
        value = self.container.value
        if return_internal_type:
            return value if borrow else value.copy()
        return cupy_module().asnumpy(value)

    def set_value(self, value, borrow=False):
        if _is_cupy(value) and not borrow:
            value = value.copy()
        self.container.value = value

    def zero(self, borrow: bool = False):
        """Set the value to zeros (in place when ``borrow``)."""
        if borrow:
            self.container.value.fill(0)
        else:
            self.container.value = self.container.value * 0


GpuArrayType.variable_type = GpuArrayVariable
GpuArrayType.constant_type = GpuArrayConstant


def gpu_shared(
    value,
    name: Optional[str] = None,
    strict: bool = False,
    allow_downcast: Optional[bool] = None,
    borrow: bool = False,
    shape=None,
    target: Optional[str] = None,
    broadcastable=None,
) -> GpuArraySharedVariable:
    """A GPU-resident shared variable holding ``value``.

    ``aesara.shared(cupy_array)`` calls this once ``aesara_bincount`` is
    imported (it is then registered with Aesara's ``shared_constructor`` for
    CuPy arrays); ``aesara_bincount.gpu.shared`` is this function, and also takes NumPy
    arrays (or anything ``numpy.asarray`` accepts), which it copies to the
    current device.

    Parameters
    ----------
    value : cupy.ndarray or array-like
        Any int, uint, float or bool dtype (see :data:`GPU_DTYPES`).
    name : str, optional
    strict, allow_downcast : bool, optional
        As for ``aesara.shared``: rules for values assigned later.
    borrow : bool
        Keep a CuPy ``value`` itself instead of a copy.
    shape : sequence of int or None, optional
        Static shape; by default every dimension is unknown (``None``), as
        for tensors, so the value may later change shape.
    target : {None, "gpu"}
        Accepted for symmetry with Aesara's tensor constructor.

    Returns
    -------
    GpuArraySharedVariable

    Raises
    ------
    TypeError
        Unsupported dtype, or ``target`` other than ``"gpu"``.
    ImportError
        CuPy is not installed.
    """
    if target not in (None, "gpu"):
        raise TypeError(f"gpu_shared: target must be 'gpu', got {target!r}")
    if broadcastable is not None and shape is None:
        shape = broadcastable
    if _is_cupy(value):
        if not borrow:
            value = value.copy()
    else:
        value = np.asarray(value)
        if value.dtype.name not in GPU_DTYPES:
            raise TypeError(f"gpu_shared: unsupported dtype {value.dtype.name}")
        value = cupy_module().asarray(value)
    if shape is None:
        shape = (None,) * value.ndim
    else:
        shape = tuple(1 if s is True else None if s is False else s for s in shape)
    gtype = GpuArrayType(value.dtype, shape=shape)
    return GpuArraySharedVariable(
        type=gtype, value=value, strict=strict, allow_downcast=allow_downcast, name=name
    )


@_as_tensor_variable.register(_gpu_py_operators)
def _as_tensor_gpu_variable(x, name, ndim, **kwargs):
    """A GPU variable used as a tensor: move it to the host."""
    return as_tensor_variable(host_from_gpu(x), name=name, ndim=ndim, **kwargs)


def as_tensor_cupy_array(x, name, ndim, **kwargs):
    """A CuPy array used as a tensor: a GPU constant moved to the host.

    Registered with Aesara's ``as_tensor_variable`` for CuPy arrays by
    ``import aesara_bincount`` (:func:`aesara_bincount.gpu.register_cupy_arrays`).
    """
    gtype = GpuArrayType(x.dtype, shape=x.shape)
    return _as_tensor_gpu_variable(GpuArrayConstant(gtype, x, name=name), name, ndim, **kwargs)
