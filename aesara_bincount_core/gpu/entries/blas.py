"""Table entries of the matrix products: Dot, Dot22, Dot22Scalar, Gemm, Gemv, Ger, BatchedDot.

The subclasses that Aesara's BLAS rewrites put in graphs before the
lifting pass (``CGemv``, ``CGer`` with a C BLAS, ``ScipyGer`` with SciPy)
have the entries of their base classes.  The products are CuPy's
(``cupy.dot``, ``cupy.matmul``, ``cupy.outer``),
which call cuBLAS for float32 and float64 and a kernel of CuPy's for
integers.  CuPy computes float32 products in float32 (cuBLAS's
``CUBLAS_COMPUTE_32F``) unless the user sets ``CUPY_TF32=1`` (then
TF32 tensor cores, 10 bits of mantissa in the products; CuPy reads the
variable once per process), so float32 stays IEEE float32 by default.
The scalars (``alpha``, ``beta``, the scale of ``Dot22Scalar``) stay on the
host, where Aesara's special cases read them (``beta == 0`` ignores ``z``,
NaN included), as the host Ops' ``perform`` does.  Dtypes follow the host
Op's output (Aesara's upcast); float16 and complex stay on the host.
A host scalar multiplies a CuPy array from the right (``d * a``), so that
the CuPy array's operator runs, not NumPy's scalar's.
"""
from aesara.tensor.blas import BatchedDot, Dot22, Dot22Scalar, Gemm, Gemv, Ger
from aesara.tensor.blas_c import CGemv, CGer
from aesara.tensor.blas_scipy import ScipyGer
from aesara.tensor.math import Dot

from aesara_bincount_core.gpu.entries._common import FLOATS, dtype_problem, host_scalar
from aesara_bincount_core.gpu.table import register
from aesara_bincount_core.gpu.type import cupy_module

_NUMBERS = FLOATS + ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_ORDER = "float bits: cuBLAS adds the products in another order than the host BLAS"


def _floats(node):
    return dtype_problem(node, FLOATS)


def _dot_accepts(node):
    if any(v.type.ndim > 2 for v in node.inputs):
        return "Dot of more than 2 dimensions"
    return dtype_problem(node, _NUMBERS)


@register(
    Dot, family="blas", cupy="cupy.dot", accepts=_dot_accepts,
    accepts_text="vectors and matrices, float32, float64 and integers (CuPy's integer kernel); "
    "mixed dtypes upcast as in Aesara; " + _ORDER,
    outputs="a new array (0-d for two vectors)",
)  # fmt: skip
def _dot_funcify(op, node):
    cp = cupy_module()

    def dot(x, y):
        return [cp.dot(x, y)]

    return dot


@register(
    Dot22, family="blas", cupy="cupy.dot (cuBLAS gemm)", accepts=_floats,
    accepts_text="float32, float64 matrices; " + _ORDER, outputs="a new C-contiguous matrix",
)  # fmt: skip
def _dot22_funcify(op, node):
    return _dot_funcify(op, node)


@register(
    Dot22Scalar, family="blas", cupy="cupy.dot, then a scale", host_inputs=(2,), accepts=_floats,
    accepts_text="float32, float64 matrices; the scale is a host scalar; " + _ORDER,
    outputs="a new C-contiguous matrix",
)  # fmt: skip
def _dot22scalar_funcify(op, node):
    cp = cupy_module()

    def dot22scalar(x, y, a):
        return [cp.dot(x, y) * host_scalar(a)]

    return dot22scalar


def _scaled_sum(z, a, d, b):
    """``b * z + a * d`` with the host Ops' special cases (``b == 0`` ignores ``z``)."""
    a, b = host_scalar(a), host_scalar(b)
    term = d if a == 1 else -d if a == -1 else d * a
    if b == 0:
        return term
    return (z if b == 1 else z * b) + term


@register(
    Gemm, family="blas", cupy="cupy.dot, then b * z + a * dot", host_inputs=(1, 4), accepts=_floats,
    accepts_text="float32, float64; alpha and beta are host scalars; z broadcast as on the host; "
    + _ORDER,
    outputs="a new matrix (z is never overwritten)",
)  # fmt: skip
def _gemm_funcify(op, node):
    cp = cupy_module()

    def gemm(z, a, x, y, b):
        d = cp.dot(x, y)
        if z.shape != d.shape:
            shape = (max(d.shape[0], z.shape[0]), max(d.shape[1], z.shape[1]))
            z = cp.broadcast_to(z, shape)
        return [_scaled_sum(z, a, d, b)]

    return gemm


def _gemv_funcify(op, node):
    cp = cupy_module()

    def gemv(y, alpha, A, x, beta):
        if A.shape[0] != y.shape[0] or A.shape[1] != x.shape[0]:
            raise ValueError(
                "Incompatible shapes for gemv "
                f"(beta * y + alpha * dot(A, x)). y: {y.shape}, A: {A.shape}, x: {x.shape}"
            )
        return [_scaled_sum(y, alpha, cp.dot(A, x), beta)]

    return gemv


def _ger_funcify(op, node):
    cp = cupy_module()

    def ger(A, alpha, x, y):
        alpha = host_scalar(alpha)
        outer = cp.outer(x, y)
        return [A + (outer if alpha == 1 else outer * alpha)]

    return ger


for _gemv in (Gemv, CGemv):
    register(
        _gemv, family="blas", cupy="cupy.dot, then beta * y + alpha * dot", host_inputs=(1, 4),
        accepts=_floats,
        accepts_text="float32, float64; alpha and beta are host scalars; " + _ORDER,
        outputs="a new vector (y is never overwritten)",
    )(_gemv_funcify)  # fmt: skip
for _ger in (Ger, CGer, ScipyGer):
    register(
        _ger, family="blas", cupy="cupy.outer, then A + alpha * outer", host_inputs=(1,),
        accepts=_floats, accepts_text="float32, float64; alpha is a host scalar",
        outputs="a new matrix (A is never overwritten)",
    )(_ger_funcify)  # fmt: skip


@register(
    BatchedDot, family="blas", cupy="cupy.matmul (cuBLAS batched gemm)", accepts=_floats,
    accepts_text="float32, float64, 2 or 3 dimensions each; " + _ORDER,
    outputs="a new array",
)  # fmt: skip
def _batched_dot_funcify(op, node):
    cp = cupy_module()
    x_ndim, y_ndim = (v.type.ndim for v in node.inputs)

    def batched_dot(x, y):
        if x.shape[0] != y.shape[0]:
            # the host Op's exception class and text
            raise TypeError(
                f"Inputs must have the same size in axis 0, but have sizes [{x.shape[0]}, {y.shape[0]}]."
            )
        x3 = x if x_ndim == 3 else x[:, None, :]
        y3 = y if y_ndim == 3 else y[:, :, None]
        out = cp.matmul(x3, y3)
        if x_ndim == 2:
            out = out[:, 0]
        if y_ndim == 2:
            out = out[..., 0]
        return [out if x_ndim == y_ndim == 3 else out.copy()]

    return batched_dot
