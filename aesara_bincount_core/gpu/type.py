"""The Aesara Type of GPU values (``cupy.ndarray`` objects): :class:`GpuArrayType`.

:class:`GpuArrayType` is the :class:`~aesara.tensor.type.TensorType` of the
GPU: a dtype and a static shape.  Its variables, constants and shared
variables are in :mod:`~aesara_bincount_core.gpu.var`, the transfers to and
from the host in :mod:`~aesara_bincount_core.gpu.transfer` (as Aesara keeps
``TensorType`` in ``tensor/type.py`` and its variables in ``tensor/var.py``);
this module imports neither.  A tensor is converted to this Type through
Aesara's own transfer registry (``aesara.tensor.basic.transfer(v, "gpu")``),
where :mod:`~aesara_bincount_core.gpu.transfer` registers the copy to the
GPU.

CuPy is imported only when a value must be made or read; :class:`CupyArray`
recognises CuPy arrays by their class without importing it.
"""
import abc
import importlib
from typing import Iterable, Optional, Union

import numpy as np
from aesara.graph.basic import Variable
from aesara.graph.type import HasDataType, HasShape
from aesara.link.c.type import CType
from aesara.tensor.basic import transfer
from aesara.tensor.shape import specify_shape
from aesara.tensor.type import TensorType, dtype_specs_map

from aesara_bincount_core import _c_code

__all__ = ["CupyArray", "GpuArrayType", "GPU_DTYPES", "cupy_module", "host_value"]

#: dtypes a GPU variable may have.
GPU_DTYPES = (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "bool",
)  # fmt: skip


def cupy_module():
    """Import CuPy, with an explanation when it is missing.

    Raises
    ------
    ImportError
        CuPy is not installed.
    """
    try:
        return importlib.import_module("cupy")
    except ImportError as exc:
        raise ImportError(
            "aesara_bincount.gpu needs CuPy for GPU values: pip install 'aesara-bincount[cuda12]'"
        ) from exc


class CupyArray(abc.ABC):
    """A virtual base class of ``cupy.ndarray``, known without importing CuPy.

    ``isinstance(a, CupyArray)`` is true for CuPy arrays (any class named
    ``ndarray`` from a ``cupy`` module in the type's MRO).  It lets
    :func:`functools.singledispatch` registrations (Aesara's
    ``shared_constructor``) find CuPy arrays while CuPy stays unimported.
    """

    @classmethod
    def __subclasshook__(cls, other):
        for klass in other.__mro__:
            if klass.__name__ == "ndarray" and klass.__module__.split(".")[0] == "cupy":
                return True
        return NotImplemented


def _is_cupy(value) -> bool:
    return isinstance(value, CupyArray)


def _extent(a):
    """Lowest and one-past-highest device address an array touches."""
    lo = hi = a.data.ptr
    for size, stride in zip(a.shape, a.strides):
        if size == 0:
            return lo, lo
        if stride < 0:
            lo += (size - 1) * stride
        else:
            hi += (size - 1) * stride
    return lo, hi + a.itemsize


class GpuArrayType(CType, HasDataType, HasShape):
    r"""Symbolic type of ``cupy.ndarray`` values: a dtype and a static shape.

    Parameters
    ----------
    dtype : str or numpy.dtype
        One of :data:`GPU_DTYPES`.
    shape : sequence of int or None, optional
        Static shape; ``None`` marks an unknown length (as in
        :class:`~aesara.tensor.type.TensorType`).  Defaults to ``()``.
    name : str, optional

    Notes
    -----
    Values live on CuPy's current device.  :meth:`filter` accepts CuPy arrays
    (kept as they are when dtype and shape fit) and anything NumPy can turn
    into an array (validated on the host like a ``TensorType`` value, then
    copied to the device).  At the C level a value is a ``PyObject *`` (the
    CuPy array); ``c_code/cuda_host/gpuarray_type.h`` has the helpers that Ops use
    to read its device pointer, length and strides.
    """

    __props__ = ("dtype", "shape")
    dtype_specs_map = dtype_specs_map

    def __init__(
        self,
        dtype: Union[str, np.dtype],
        shape: Optional[Iterable[Optional[int]]] = None,
        name: Optional[str] = None,
    ):
        self.dtype = np.dtype(dtype).name
        if self.dtype not in GPU_DTYPES:
            raise TypeError(f"GpuArrayType: unsupported dtype {self.dtype}; expected one of {GPU_DTYPES}")
        self.shape = tuple(None if s is None else int(s) for s in (shape or ()))
        self.name = name
        self.numpy_dtype = np.dtype(self.dtype)

    # -- the TensorType-like interface -------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def broadcastable(self):
        return tuple(s == 1 for s in self.shape)

    def clone(self, dtype=None, shape=None, **kwargs) -> "GpuArrayType":
        return type(self)(
            self.dtype if dtype is None else dtype,
            self.shape if shape is None else shape,
            name=self.name,
        )

    def dtype_specs(self):
        """``(python type, C type, numpy typenum name)``, as for ``TensorType``."""
        return self.dtype_specs_map[self.dtype]

    def host_type(self) -> TensorType:
        """The ``TensorType`` with the same dtype and shape."""
        return TensorType(self.dtype, shape=self.shape)

    def __str__(self):
        if self.name:
            return self.name
        dims = ", ".join("?" if s is None else str(s) for s in self.shape)
        return f"GpuArrayType({self.dtype}, ({dims}{',' if self.ndim == 1 else ''}))"

    def __repr__(self):
        return str(self)

    def filter(self, data, strict=False, allow_downcast=None):
        """Return ``data`` as a ``cupy.ndarray`` of this type.

        Raises
        ------
        TypeError
            ``data`` is a Variable, has the wrong number of dimensions or a
            shape that contradicts the static shape, or (``strict``) is not a
            CuPy array of this dtype, or cannot be cast without loss (unless
            ``allow_downcast``).
        ImportError
            ``data`` lives on the host and CuPy is not installed.
        """
        if isinstance(data, Variable):
            raise TypeError(
                "Expected an array-like object, but found a Variable: maybe you are trying to "
                "call a function on a (possibly shared) variable instead of a numeric array?"
            )
        if _is_cupy(data):
            if data.dtype != self.numpy_dtype:
                if strict:
                    raise TypeError(
                        f"{self} expected a cupy.ndarray of dtype {self.dtype}, got {data.dtype}"
                    )
                # TensorType's casting rules depend on the dtypes only: check them
                # on an empty host array of the same dtype.
                TensorType(self.dtype, shape=(None,) * data.ndim).filter(
                    np.zeros((0,) * data.ndim, dtype=data.dtype), allow_downcast=allow_downcast
                )
                data = data.astype(self.dtype)
        else:
            if strict:
                raise TypeError(f"{self} expected a cupy.ndarray, got {type(data).__name__}")
            host = self.host_type().filter(data, strict=False, allow_downcast=allow_downcast)
            data = cupy_module().asarray(host)
        if data.ndim != self.ndim:
            raise TypeError(
                f"Wrong number of dimensions: expected {self.ndim}, got {data.ndim} with shape "
                f"{data.shape}."
            )
        if any(t is not None and d != t for d, t in zip(data.shape, self.shape)):
            raise TypeError(
                f"The type's shape ({self.shape}) is not compatible with the data's ({data.shape})"
            )
        return data

    def filter_variable(self, other, allow_convert=True):
        """``other`` as a variable of this type, transferring a tensor to the GPU."""
        if not isinstance(other, Variable):
            return self.make_constant(self.filter(other))
        if other.type == self:
            return other
        if allow_convert:
            converted = self.convert_variable(other)
            if converted is not None:
                return converted
        raise TypeError(f"Cannot convert Type {other.type} (of Variable {other}) into Type {self}.")

    def in_same_class(self, otype) -> bool:
        """Whether ``otype`` is a GPU type of the same dtype and the same static
        1s (Aesara's ``TensorType.in_same_class``): what an update of a GPU
        shared variable, or a ``givens`` replacement, may have."""
        return (
            isinstance(otype, GpuArrayType)
            and otype.dtype == self.dtype
            and otype.broadcastable == self.broadcastable
        )

    def is_super(self, otype) -> bool:
        """Whether ``otype`` is this type or a more precise one (each static
        length equal, or unknown here)."""
        return (
            isinstance(otype, GpuArrayType)
            and otype.dtype == self.dtype
            and otype.ndim == self.ndim
            and all(s is None or s == o for s, o in zip(self.shape, otype.shape))
        )

    def convert_variable(self, var):
        """``var`` as a variable of this type, or None.

        ``var`` itself when its type is as precise (:meth:`is_super`); a GPU
        variable of a less precise static shape gets it through
        ``specify_shape`` (checked when the function runs, as Aesara's
        ``TensorType.convert_variable`` does); a host tensor of the same dtype
        and number of dimensions is copied to the GPU (``GpuFromHost``).
        """
        if self.is_super(var.type):
            return var
        if isinstance(var.type, GpuArrayType) and var.type.dtype == self.dtype and var.type.ndim == self.ndim:
            var = specify_shape(var, self.shape)  # the host Op, which the lifting puts back on the GPU
        if (
            isinstance(var.type, TensorType)
            and var.type.dtype == self.dtype
            and var.type.ndim == self.ndim
        ):
            try:
                moved = transfer(var, "gpu")  # GpuFromHost, registered by gpu.transfer
            except ValueError:
                return None
            if self.is_super(moved.type):
                return moved
        return None

    @staticmethod
    def values_eq(a, b, force_same_dtype=True):
        return TensorType.values_eq(host_value(a), host_value(b), force_same_dtype=force_same_dtype)

    @staticmethod
    def values_eq_approx(a, b, allow_remove_inf=False, allow_remove_nan=False, rtol=None, atol=None):
        return TensorType.values_eq_approx(
            host_value(a), host_value(b), allow_remove_inf, allow_remove_nan, rtol, atol
        )

    @staticmethod
    def may_share_memory(a, b) -> bool:
        if not (_is_cupy(a) and _is_cupy(b)):
            return False
        if a.data.device_id != b.data.device_id:
            return False
        (alo, ahi), (blo, bhi) = _extent(a), _extent(b)
        return alo < bhi and blo < ahi

    def get_shape_info(self, obj):
        return obj.shape

    def get_size(self, shape_info):
        return int(np.prod(shape_info, dtype=np.int64)) * self.numpy_dtype.itemsize

    # -- C interface (a value is the cupy.ndarray object) -------------------
    def c_declare(self, name, sub, check_input=True):
        return f"PyObject *{name};"

    def c_init(self, name, sub):
        return f"{name} = NULL;"

    def c_extract(self, name, sub, check_input=True, **kwargs):
        return (
            f'if (bc_gpuarray_extract(py_{name}, &{name}, "{self.dtype}", {self.ndim}) != 0) '
            f"{{ {sub['fail']} }}"
        )

    def c_sync(self, name, sub):
        return f"bc_gpuarray_sync(&py_{name}, {name});"

    def c_cleanup(self, name, sub):
        return f"bc_gpuarray_cleanup(&{name});"

    def c_headers(self, **kwargs):
        return ["cuda_host/gpuarray_type.h"]

    def c_header_dirs(self, **kwargs):
        return [_c_code.c_code_dir()]

    def c_code_cache_version(self):
        return (1, _c_code.sources_hash(["cuda_host/gpuarray_type.h"]))


def host_value(a):
    """``a`` as a NumPy array (copied from the device if needed)."""
    if _is_cupy(a):
        return cupy_module().asnumpy(a)
    return np.asarray(a)
