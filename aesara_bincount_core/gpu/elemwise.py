"""Elementwise Ops on the GPU: :class:`GpuElemwise` and :func:`gpu_elemwise_problem`.

One kernel per ``Elemwise`` node (a fused ``Composite`` included), generated
from the scalar ops' own C code by :mod:`aesara_bincount_core.scalar_codegen`
and inlined in the template ``c_code/cuda/elemwise_kernel.cu``, as Theano's
``GpuElemwise`` built its kernels (``theano/gpuarray/elemwise.py``).  The
kernel is compiled with NVRTC and cached on disk
(:func:`aesara_bincount_core.cuda.modules.generated_function`) and launched
on CuPy's current stream (:meth:`aesara_bincount_core.cuda.driver.Driver.launch`).

The lifting rewrite (``aesara_bincount.gpu``) asks :func:`gpu_elemwise_problem`
whether an ``Elemwise`` node can run here and replaces it by
``GpuElemwise(node.op.scalar_op)(*inputs)``, with the array inputs on the GPU.
"""
import ctypes
import hashlib
import math
from typing import List, Optional

import numpy as np
from aesara.graph.basic import Apply, Constant
from aesara.graph.op import Op
from aesara.scalar.basic import Composite, FloorDivide, Mod
from aesara.tensor.basic import get_scalar_constant_value
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.exceptions import NotScalarConstantError
from aesara.tensor.type import TensorType

from aesara_bincount_core import _c_code, scalar_codegen
from aesara_bincount_core.cuda.sources import header_constants
from aesara_bincount_core.gpu import elemwise_layout as layout
from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module, host_value

__all__ = ["GpuElemwise", "gpu_elemwise_problem", "KERNEL_FILES"]

#: The template, its header, the preamble and the headers they include
#: (hashed into every kernel's name).
KERNEL_FILES = _c_code.included_closure(
    ("cuda/elemwise_kernel.cu", "cuda/elemwise.cuh", scalar_codegen.CUDA_PREAMBLE)
)
_LIMITS = header_constants("cuda/elemwise.cuh", "BC_EW_")
MAX_DIMS, MAX_ARGS, THREADS = _LIMITS["MAX_DIMS"], _LIMITS["MAX_ARGS"], _LIMITS["THREADS"]
#: Most elements per thread and iteration of the vector path, and the most
#: bytes of array elements one thread holds there (see :func:`vector_width`).
VEC_MAX, VEC_BYTES = _LIMITS["VEC_MAX"], _LIMITS["VEC_BYTES"]
#: No contraction of a * b + c into one fused multiply-add (NVRTC's default,
#: which x86 code without -mfma never does): so that +, -, * and / round as
#: on the CPU, bit for bit.  Division and sqrt are IEEE (NVRTC's defaults).
_NVRTC_OPTIONS = ("-std=c++17", "-fmad=false")
#: The line before the element code (hashed into the kernel's name with all the source).
_ELEMENT_HEAD = "static __device__ __forceinline__ void bc_ew_element(const bc_ew_params &p, const long long *off)"


class _Params(ctypes.Structure):
    """``bc_ew_params`` of ``c_code/cuda/elemwise.cuh``."""

    _fields_ = [
        ("n", ctypes.c_longlong),
        ("ndim", ctypes.c_int),
        ("contiguous", ctypes.c_int),
        ("status", ctypes.c_void_p),
        ("shape", ctypes.c_longlong * MAX_DIMS),
        ("data", ctypes.c_void_p * MAX_ARGS),
        ("step", ctypes.c_longlong * MAX_ARGS),
        ("strides", (ctypes.c_longlong * MAX_DIMS) * MAX_ARGS),
        ("scalars", ctypes.c_ulonglong * MAX_ARGS),
    ]


def _is_host_scalar(var) -> bool:
    """A host tensor with one element known statically (0-d, or all dims 1)."""
    return isinstance(var.type, TensorType) and all(s == 1 for s in var.type.shape)


def _nonzero_constant(var) -> bool:
    """Whether ``var`` is a constant without a zero (seen through DimShuffle
    and the like: ``x // 10`` divides by ``DimShuffle{x}(10)``); a GPU
    constant is read through a copy to the host (CuPy refuses np.asarray)."""
    if isinstance(var, Constant):
        return bool(np.all(host_value(var.data) != 0))
    try:
        return bool(get_scalar_constant_value(var) != 0)
    except NotScalarConstantError:
        return False


def _division_problem(scalar_op, inputs) -> Optional[str]:
    """Why an integer ``//`` or ``%`` of the node could divide by zero, or None.

    The CPU raises ZeroDivisionError there; a kernel could only report it
    through a sync, so only divisors that are constants without a zero (the
    node's constant inputs, or constants inside a Composite) are taken.
    """
    if isinstance(scalar_op, Composite):
        outer = dict(zip(scalar_op.fgraph.inputs, inputs))
        nodes = scalar_op.fgraph.toposort()
    else:
        outer = {}
        nodes = [Apply(scalar_op, list(inputs), [])]
    for node in nodes:
        if not isinstance(node.op, (FloorDivide, Mod)) or node.inputs[1].type.dtype[0] not in "iub":
            continue
        if not _nonzero_constant(outer.get(node.inputs[1], node.inputs[1])):
            return (
                f"{node.op} of integers by a value that is not a non-zero constant: the CPU "
                "raises ZeroDivisionError for a zero, which a kernel cannot report without a sync"
            )
    return None


def gpu_elemwise_problem(node) -> Optional[str]:
    """Why an ``Elemwise`` node cannot run as a :class:`GpuElemwise`, or None.

    Parameters
    ----------
    node : aesara.graph.basic.Apply
        A node whose op is an ``aesara.tensor.elemwise.Elemwise``; its inputs
        may be host or GPU variables (the array inputs will be moved to the
        GPU by the caller).

    Returns
    -------
    str or None
        None when :class:`GpuElemwise` can compute it with the same results;
        else the reason (for messages and tests): a scalar op that
        :func:`scalar_codegen.inline_problem` refuses for CUDA (no C code,
        complex or float16, code that calls Python), more than
        ``BC_EW_MAX_DIMS`` dimensions or ``BC_EW_MAX_ARGS`` arguments, or an
        integer division whose divisor may be zero.
    """
    if not isinstance(node.op, Elemwise):
        return f"{node.op} is not an Elemwise"
    return _problem(node.op.scalar_op, node.inputs, node.outputs)


def _problem(scalar_op, inputs, outputs) -> Optional[str]:
    ndim = max([v.type.ndim for v in outputs] + [0])
    if ndim > MAX_DIMS:
        return f"{ndim} dimensions; GpuElemwise takes at most {MAX_DIMS}"
    if len(inputs) + len(outputs) > MAX_ARGS:
        return f"{len(inputs) + len(outputs)} arguments; GpuElemwise takes at most {MAX_ARGS}"
    for v in list(inputs) + list(outputs):
        if getattr(v.type, "dtype", None) not in scalar_codegen.DTYPES:
            return f"dtype {getattr(v.type, 'dtype', v.type)} is not one of {scalar_codegen.DTYPES}"
    problem = scalar_codegen.inline_problem(scalar_op, "cuda", [v.type.dtype for v in inputs])
    return problem or _division_problem(scalar_op, inputs)


class GpuElemwise(Op):
    """An ``Elemwise`` computed on the GPU by one generated kernel.

    Parameters
    ----------
    scalar_op : aesara.scalar.ScalarOp
        The scalar op of the ``Elemwise`` (a ``Composite`` for a fused node).

    Notes
    -----
    Inputs (``make_node``): GPU arrays (:class:`~.type.GpuArrayType`) of any
    rank up to ``BC_EW_MAX_DIMS``, any strides (views, negative steps,
    broadcasting), and host tensors with one element, known statically
    (0-d, or every dimension of static length 1: a learning rate,
    ``theta``), whose value becomes a kernel argument (no copy to the
    device).  Outputs: new C-contiguous GPU arrays with the dtypes
    Aesara's ``Elemwise`` gives and its broadcast shape; lengths of 1
    broadcast, other mismatches raise ``ValueError``.  Dtypes: bool,
    int8 ... uint64, float32, float64.

    The results are those of Aesara's C backend, whose scalar C code the
    kernel inlines: integers, comparisons and logic bit for bit; float
    transcendental functions are the device's (CUDA's libdevice, whose
    documented error bounds are a few ulp, per function in the CUDA C++
    Programming Guide, "Mathematical Functions"; on the test-suite's
    emulation the host's libm), which ``docs/semantics.rst`` lists with the
    bounds measured on the emulation.

    Paths: when every array is contiguous and aligned to its vector
    (``min(16, 4 * itemsize)`` bytes), each thread computes groups of 4
    elements (2 for nodes with many wide arrays, see :meth:`vector_width`)
    from vector loads and stores; the rest, contiguous or strided, one
    element at a time.  The element code is the same, so are the bits.

    Sync: none.  The kernel is queued on CuPy's current stream and the call
    returns; nothing is read back.  The first call for a node compiles its
    kernel (NVRTC, cached on disk) and loads it in the current context.

    Raises
    ------
    TypeError
        (``make_node``) an input that is neither a GPU array nor a host
        tensor of one element, or a node :func:`gpu_elemwise_problem` refuses.
    ValueError
        (when called) shapes that do not broadcast, an input on another
        device than the current one, or not aligned to its itemsize.
    """

    __props__ = ("scalar_op",)

    def __init__(self, scalar_op):
        self.scalar_op = scalar_op

    @classmethod
    def from_elemwise(cls, elemwise: Elemwise) -> "GpuElemwise":
        """The GpuElemwise of an ``Elemwise`` Op (its scalar op)."""
        return cls(elemwise.scalar_op)

    def __str__(self):
        return f"GpuElemwise{{{self.scalar_op}}}"

    def _host_node(self, inputs):
        """The host ``Elemwise`` node this node computes (types only)."""
        ndim = max([v.type.ndim for v in inputs if isinstance(v.type, GpuArrayType)] + [0])
        stand_ins = []
        for v in inputs:
            if isinstance(v.type, GpuArrayType):
                shape = (1,) * (ndim - v.type.ndim) + v.type.shape
                stand_ins.append(TensorType(v.type.dtype, shape=shape)())
            else:
                stand_ins.append(TensorType(v.type.dtype, shape=(1,) * ndim)())
        return Elemwise(self.scalar_op).make_node(*stand_ins)

    def make_node(self, *inputs):
        from aesara.tensor import as_tensor_variable

        inputs = [v if isinstance(getattr(v, "type", None), GpuArrayType) else as_tensor_variable(v)
                  for v in inputs]  # fmt: skip
        for v in inputs:
            if not isinstance(v.type, GpuArrayType) and not _is_host_scalar(v):
                raise TypeError(
                    f"{self}: input {v} of type {v.type} is neither a GPU array nor a host tensor "
                    "of one element; move it to the GPU first (gpu_from_host)"
                )
        host = self._host_node(inputs)
        problem = _problem(self.scalar_op, inputs, host.outputs)
        if problem:
            raise TypeError(f"{self}: cannot run on the GPU: {problem}")
        outputs = [GpuArrayType(o.type.dtype, o.type.shape)() for o in host.outputs]
        return Apply(self, inputs, outputs)

    def infer_shape(self, fgraph, node, shapes):
        from aesara.tensor import as_tensor_variable, broadcast_shape

        ndim = node.outputs[0].type.ndim
        one = as_tensor_variable(np.int64(1))
        padded = [(one,) * (ndim - len(s)) + tuple(s)
                  for v, s in zip(node.inputs, shapes) if isinstance(v.type, GpuArrayType)]  # fmt: skip
        if not padded or ndim == 0:
            return [(one,) * ndim] * len(node.outputs)
        # as Elemwise.infer_shape: lengths of 1 broadcast at run time too
        out = tuple(as_tensor_variable(d) for d in broadcast_shape(*padded, arrays_are_shapes=True))
        return [out] * len(node.outputs)

    # -- the kernel ---------------------------------------------------------------
    @staticmethod
    def vector_width(node) -> int:
        """Elements per thread and iteration of the node's vector path: the
        largest of ``VEC_MAX``, 2 whose elements of every array argument fit
        in ``VEC_BYTES`` bytes, or 0 (no vector path: the registers would
        spill)."""
        row = sum(np.dtype(v.type.dtype).itemsize
                  for v in list(node.inputs) + list(node.outputs) if isinstance(v.type, GpuArrayType))  # fmt: skip
        return next((w for w in (VEC_MAX, 2) if w * row <= VEC_BYTES), 0)

    def kernel_source(self, node) -> (str, str):
        """``(name, source)`` of the node's kernel (see ``c_code/cuda/elemwise_kernel.cu``)."""
        args: List[str] = []
        for k, v in enumerate(node.inputs):
            ctype = v.type.dtype_specs()[1]
            macro = "BC_EW_IN" if isinstance(v.type, GpuArrayType) else "BC_EW_SCALAR"
            args.append(f"{macro}({k}, {ctype})")
        nin = len(node.inputs)
        outs = [f"BC_EW_OUT({nin + j}, {o.type.dtype_specs()[1]})" for j, o in enumerate(node.outputs)]
        in_dtypes, out_dtypes = [v.type.dtype for v in node.inputs], [o.type.dtype for o in node.outputs]
        code = scalar_codegen.scalar_code(
            self.scalar_op, args, outs, "cuda", in_dtypes, out_dtypes, "bc_ew_scalar"
        )
        # the vector path: the same element code, on registers (BC_EW_VIN / BC_EW_VOUT)
        vargs = [a.replace("BC_EW_IN(", "BC_EW_VIN(", 1) for a in args]
        vouts = [o.replace("BC_EW_OUT(", "BC_EW_VOUT(", 1) for o in outs]
        vcode = scalar_codegen.scalar_code(
            self.scalar_op, vargs, vouts, "cuda", in_dtypes, out_dtypes, "bc_ew_scalar"
        )
        loads = [a.replace("BC_EW_VIN(", "BC_EW_VLOAD(", 1) for a in vargs if a.startswith("BC_EW_VIN(")]
        width = self.vector_width(node)
        vector = [
            "BC_EW_VECTOR_HEAD",
            "{",
            *loads,
            *[o.replace("BC_EW_VOUT(", "BC_EW_VDECL(", 1) for o in vouts],
            "BC_EW_EACH_ELEMENT",
            vcode.body,
            *[o.replace("BC_EW_VOUT(", "BC_EW_VSTORE(", 1) for o in vouts],
            "}",
        ] if width else []  # fmt: skip
        lines = [
            '#include "cuda/elemwise.cuh"',
            code.support,
            "#define BC_EW_NAME {name}",
            f"#define BC_EW_NARGS {nin + len(outs)}",
            f"#define BC_EW_VEC {width}",
            "#define BC_SCALAR_FAIL(code) bc_ew_fail(p, (code))",
            _ELEMENT_HEAD,
            code.body,
            *vector,
            "#undef BC_SCALAR_FAIL",
            '#include "cuda/elemwise_kernel.cu"',
            "",
        ]  # fmt: skip
        # the name is a hash of everything NVRTC compiles: the source, the headers, the options
        template = "\n".join(lines)
        key = "\0".join((template, _c_code.sources_hash(KERNEL_FILES), *_NVRTC_OPTIONS))
        name = f"bc_elemwise_{hashlib.sha256(key.encode()).hexdigest()[:24]}"
        return name, template.replace("#define BC_EW_NAME {name}", f"#define BC_EW_NAME {name}", 1)

    def _function(self, node):
        from aesara_bincount_core.cuda import modules

        cached = getattr(node.tag, "bc_elemwise_kernel", None)
        if cached is None:
            headers = {f: _c_code.read_source(f) for f in KERNEL_FILES}
            cached = node.tag.bc_elemwise_kernel = (*self.kernel_source(node), headers)
        name, source, headers = cached
        return modules.generated_function(name, source, headers, _NVRTC_OPTIONS)

    def _layout(self, node):
        """What perform needs of the node, computed once: (array argument
        indices, [(scalar index, numpy dtype)], output dtypes, vector width)."""
        found = getattr(node.tag, "bc_elemwise_layout", None)
        if found is None:
            arrays = [k for k, v in enumerate(node.inputs) if isinstance(v.type, GpuArrayType)]
            scalars = [(k, np.dtype(v.type.dtype)) for k, v in enumerate(node.inputs)
                       if not isinstance(v.type, GpuArrayType)]  # fmt: skip
            found = node.tag.bc_elemwise_layout = (
                arrays, scalars, [o.type.dtype for o in node.outputs], self.vector_width(node)
            )
        return found

    def _plan(self, node) -> "_Launch":
        """The launch of ``node`` in the current CUDA context, built once per
        node and context (kernel, grid limit, parameter block)."""
        from aesara_bincount_core.cuda import driver

        drv = driver.driver()
        plans = getattr(node.tag, "bc_elemwise_plans", None)
        if plans is None:
            plans = node.tag.bc_elemwise_plans = {}
        key = drv.context_key(drv.current_context())
        plan = plans.get(key)
        if plan is None:
            func, multiprocessors = self._function(node)  # makes a context current if none was
            key = drv.context_key(drv.current_context())
            plan = plans[key] = _Launch(drv, func, multiprocessors, node.outputs[0].type.ndim)
        return plan

    def perform(self, node, inputs, output_storage):
        cp = cupy_module()
        array_args, scalar_args, out_dtypes, width = self._layout(node)
        arrays = [inputs[k] for k in array_args]
        ndim = node.outputs[0].type.ndim
        shape = layout.broadcast_shape(self, ndim, arrays)
        outs = [cp.empty(shape, dtype=d) for d in out_dtypes]
        for storage, out in zip(output_storage, outs):
            storage[0] = out
        n = math.prod(shape)
        if n == 0:
            return
        layout.check_arrays(self, arrays, cp.cuda.runtime.getDevice())
        plan = self._plan(node)
        block = plan.take()  # this call's own parameter block (f.copy() shares the plan)
        p = block.params
        p.n = n
        for k, dtype in scalar_args:  # host scalars: kernel arguments
            v = inputs[k]
            raw = (v if v.dtype == dtype else np.asarray(v, dtype=dtype)).tobytes()
            p.scalars[k] = int.from_bytes(raw, "little")
        args = list(zip(array_args, arrays)) + list(enumerate(outs, len(inputs)))
        contiguous = all(a.size == 1 or (a.shape == shape and a.flags.c_contiguous) for _, a in args)
        for k, a in args:
            p.data[k] = a.data.ptr
            if contiguous:
                p.step[k] = 0 if a.size == 1 else a.itemsize
            else:
                p.strides[k][:ndim] = layout.strides(shape, a)
        if not contiguous:
            p.shape[:ndim] = shape
        p.contiguous = 2 if contiguous and width and layout.vector_aligned(args, width) else int(contiguous)
        plan.launch(block, min(-(-n // THREADS), plan.max_blocks), cp.cuda.get_current_stream().ptr)


class _Block:
    """One kernel parameter block (``bc_ew_params``) and the argument array
    that points at it."""

    __slots__ = ("params", "args")

    def __init__(self, ndim: int):
        self.params = _Params()
        self.params.ndim = ndim
        self.args = (ctypes.c_void_p * 1)(ctypes.addressof(self.params))


class _Launch:
    """What every launch of one GpuElemwise node in one CUDA context shares,
    built once: the kernel, the most blocks worth launching (those that run at
    once: the multiprocessors times the blocks the driver's occupancy
    calculator grants one of them), and the parameter blocks not in use.

    The plan is shared by a function and its ``f.copy()`` (Aesara copies a
    node's tag shallowly), so by calls from several threads at once, and
    ctypes releases the GIL inside ``cuLaunchKernel``.  So each call takes a
    parameter block of its own (:meth:`take`: one left by an earlier call,
    else a new one), writes every field it uses, and gives it back once
    ``cuLaunchKernel`` has returned (the driver copies the block at launch).
    ``list.pop`` and ``list.append`` are atomic under the GIL: no lock."""

    __slots__ = ("_drv", "_func", "max_blocks", "_ndim", "_free")

    def __init__(self, drv, func: int, multiprocessors: int, ndim: int):
        self._drv, self._func, self._ndim = drv, func, ndim
        per_sm = drv.max_active_blocks(func, THREADS, 0)
        self.max_blocks = max(1, multiprocessors * max(1, per_sm))
        self._free: List[_Block] = [_Block(ndim)]

    def take(self) -> _Block:
        """A parameter block no other call uses until it is given back."""
        try:
            return self._free.pop()
        except IndexError:
            return _Block(self._ndim)

    def launch(self, block: _Block, blocks: int, stream: int) -> None:
        """``cuLaunchKernel`` of ``blocks`` blocks with ``block``'s parameters, on
        ``stream``; then ``block`` is free again (also when the launch fails)."""
        try:
            self._drv.launch_args(self._func, max(1, blocks), THREADS, stream, block.args)
        finally:
            self._free.append(block)
