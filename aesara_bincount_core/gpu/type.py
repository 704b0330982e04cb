"""GPU-resident Aesara variables whose values are ``cupy.ndarray`` objects.

:class:`GpuArrayType` is the :class:`~aesara.tensor.type.TensorType` of the
GPU: a dtype and a static shape.  Its variables behave like tensors in
expressions (``x.max()``, ``x + 1``, ``bincount(x)``): converting one to a
tensor inserts a :class:`~aesara_bincount_core.gpu.transfer.HostFromGpu`
transfer, and the GPU rewrite removes the transfer again where a GPU Op can
take the GPU value.

Shared variables: ``aesara.shared(cupy_array)`` and
:func:`gpu_shared` (``aesara_bincount.gpu.shared``) of a NumPy or CuPy
array give a :class:`GpuArraySharedVariable`, for every int, uint and float
dtype.  The constructor is registered with Aesara's ``shared_constructor``
for CuPy arrays without importing CuPy: :class:`CupyArray` recognises them by
their class.  CuPy is imported only when a value must be made or read.
"""
import abc
import importlib
from typing import Iterable, Optional, Union

import numpy as np
from aesara.compile.sharedvalue import SharedVariable, shared_constructor
from aesara.graph.basic import Constant, Variable
from aesara.graph.type import HasDataType, HasShape
from aesara.link.c.type import CType
from aesara.tensor import _as_tensor_variable
from aesara.tensor.type import TensorType, dtype_specs_map
from aesara.tensor.var import _tensor_py_operators

from aesara_bincount_core import _c_code

__all__ = [
    "CupyArray",
    "GpuArrayType",
    "GpuArrayVariable",
    "GpuArrayConstant",
    "GpuArraySharedVariable",
    "gpu_shared",
    "cupy_module",
]

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
    CuPy array); ``c_code/gpuarray_helper.h`` has the helpers that Ops use
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
            other = self.filter(other)
            return GpuArrayConstant(self, other)
        if other.type == self:
            return other
        if allow_convert:
            converted = self.convert_variable(other)
            if converted is not None:
                return converted
        raise TypeError(f"Cannot convert Type {other.type} (of Variable {other}) into Type {self}.")

    def is_super(self, otype) -> bool:
        return (
            isinstance(otype, GpuArrayType)
            and otype.dtype == self.dtype
            and otype.ndim == self.ndim
            and all(s is None or s == o for s, o in zip(self.shape, otype.shape))
        )

    def convert_variable(self, var):
        if self.is_super(var.type):
            return var
        if (
            isinstance(var.type, TensorType)
            and var.type.dtype == self.dtype
            and var.type.ndim == self.ndim
        ):
            from aesara_bincount_core.gpu.transfer import gpu_from_host

            moved = gpu_from_host(var)
            if self.is_super(moved.type):
                return moved
        return None

    @staticmethod
    def values_eq(a, b, force_same_dtype=True):
        return TensorType.values_eq(_host(a), _host(b), force_same_dtype=force_same_dtype)

    @staticmethod
    def values_eq_approx(a, b, allow_remove_inf=False, allow_remove_nan=False, rtol=None, atol=None):
        return TensorType.values_eq_approx(
            _host(a), _host(b), allow_remove_inf, allow_remove_nan, rtol, atol
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
        return ["gpuarray_helper.h"]

    def c_header_dirs(self, **kwargs):
        return [_c_code.c_code_dir()]

    def c_code_cache_version(self):
        return (1, _c_code.sources_hash(["gpuarray_helper.h"]))


def _host(a):
    """``a`` as a NumPy array (copied from the device if needed)."""
    if _is_cupy(a):
        return cupy_module().asnumpy(a)
    return np.asarray(a)


class _gpu_py_operators(_tensor_py_operators):
    """Tensor methods for GPU variables; each first moves the value to the host."""

    def transfer(self, target: str):
        """``"cpu"``: a tensor with this value (``HostFromGpu``); ``"gpu"``: itself."""
        if target == "gpu":
            return self
        if target == "cpu":
            from aesara_bincount_core.gpu.transfer import host_from_gpu

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
        return GpuArrayConstantSignature((self.type, _host(self.data)))

    def __str__(self):
        return self.name or f"GpuArrayConstant{{{_host(self.data)}}}"


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


@shared_constructor.register(CupyArray)
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

    ``aesara.shared(cupy_array)`` calls this (it is registered with
    ``aesara.compile.sharedvalue.shared_constructor`` for CuPy arrays);
    ``aesara_bincount.gpu.shared`` is this function, and also takes NumPy
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
    from aesara.tensor.basic import as_tensor_variable

    from aesara_bincount_core.gpu.transfer import host_from_gpu

    return as_tensor_variable(host_from_gpu(x), name=name, ndim=ndim, **kwargs)


@_as_tensor_variable.register(CupyArray)
def _as_tensor_cupy_array(x, name, ndim, **kwargs):
    """A CuPy array used as a tensor: a GPU constant moved to the host."""
    gtype = GpuArrayType(x.dtype, shape=x.shape)
    return _as_tensor_gpu_variable(GpuArrayConstant(gtype, x, name=name), name, ndim, **kwargs)
