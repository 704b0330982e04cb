"""The :class:`GpuFusedBincount` Op: a GPU bincount whose weights are computed in its kernel.

The GPU counterpart of :class:`aesara_bincount_core.fused.FusedBincount` for
the weights: the histogram kernel of ``c_code/bincount_cuda_kernel.cu``,
instantiated once per scalar graph with a device function that computes the
weight at each position from the graph's inputs, generated from the scalar
ops' own C code by :mod:`aesara_bincount_core.scalar_codegen` (the generator
of :class:`~aesara_bincount_core.gpu.elemwise.GpuElemwise`'s kernels).  The
host C code and the launcher are GpuBincount's (``bincount_cuda_host.c``,
``bincount_cuda_launch.h``); the kernel comes from the one module cache
(:func:`aesara_bincount_core.cuda.modules.register_generated_hist`).

Neighbours: :mod:`.op` (``GpuBincount``, the base), :mod:`.elemwise` (the
acceptance rule of the scalar graphs), :mod:`aesara_bincount.gpu.fusion`
(the rewrite that puts the Op in graphs).
"""
import hashlib
from typing import List, Tuple

import numpy as np
from aesara.graph.basic import Apply
from aesara.scalar import basic as aes
from aesara.tensor.basic import as_tensor_variable, cast
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.type import TensorType

from aesara_bincount_core import _c_code, scalar_codegen
from aesara_bincount_core.cuda import sources
from aesara_bincount_core.gpu.elemwise import _is_host_scalar
from aesara_bincount_core.gpu.op import GpuBincount, _as_gpu
from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module
from aesara_bincount_core.op import _constant_int
from aesara_bincount_core.semantics import INDEX_DTYPES, reference_bincount

__all__ = ["GpuFusedBincount", "KERNEL_FILES", "MAX_ARGS"]

#: What a generated source includes (hashed into the kernel's name).
KERNEL_FILES = (sources.KERNEL_SOURCE, sources.DEVICE_HEADER, sources.KERNEL_HEADER, scalar_codegen.CUDA_PREAMBLE)
#: Most inputs of the weights' scalar graph (``BC_CUDA_FUSED_MAX_ARGS``).
MAX_ARGS = sources.CONSTANTS["FUSED_MAX_ARGS"]
#: As GpuElemwise's: no contraction into fused multiply-adds, so that the
#: weights round as the unfused kernel's do.
_NVRTC_OPTIONS = ("-std=c++17", "-fmad=false")


class GpuFusedBincount(GpuBincount):
    r"""``GpuBincount`` of weights computed inline by a scalar graph.

    Computes what ``GpuBincount(mode, out_dtype)(x, n, GpuElemwise(w_op)(*ins))``
    computes without the weights array: the histogram kernel reads each input
    of ``w_op`` once and computes each weight in registers.  The rewrite
    ``gpu_bincount_fusion`` (:mod:`aesara_bincount.gpu.fusion`) puts it in
    graphs; there is no reason to build it by hand.

    Parameters
    ----------
    mode : {"bincount", "scatter"}
        As for :class:`GpuBincount`.
    out_dtype : str
        dtype of the output and of the weights (``w_op``'s output).
    w_op : aesara.scalar.Composite
        The scalar graph of the weights, one output, accepted by
        :func:`~aesara_bincount_core.gpu.elemwise.gpu_elemwise_problem` (the
        rewrite only takes nodes that already are ``GpuElemwise`` nodes).

    Notes
    -----
    Inputs of the Apply node: ``x`` (GPU ``(N,)``, integer), ``n`` (host
    int64 scalar), then the ``w_op.nin`` inputs of the weights, each a GPU
    array of 0 or 1 dimension (any stride; a length of 1 broadcasts) or a
    host tensor of one element (static shape; its value becomes a kernel
    argument), of the dtypes of ``w_op``'s inputs.  The arrays have one
    length, where 1 broadcasts; that length is the weights' and is checked
    as a weights array's is (``ValueError`` naming both lengths).

    Results: those of ``GpuBincount`` of the computed weights.  The weights
    are computed by the scalar ops' own code as ``GpuElemwise`` computes them
    (same rounding: no fused multiply-adds), so only the order of the float
    additions differs between runs, as for stored weights; float32 weights
    are accumulated as GpuBincount accumulates them (float32 in shared
    memory, float64 in global memory, rounded once).  Errors, sync and
    messages are GpuBincount's.
    """

    __props__ = ("mode", "out_dtype", "w_op")
    _cop_num_inputs = None
    c_function = "gpu_bincount_fused"
    kernel_sources = GpuBincount.kernel_sources + (scalar_codegen.CUDA_PREAMBLE,)
    version = 1

    def __init__(self, mode: str = "bincount", out_dtype=None, w_op=None):
        super().__init__(mode, out_dtype)
        if not isinstance(w_op, aes.Composite) or w_op.nout != 1:
            raise TypeError(f"GpuFusedBincount: w_op must be a Composite with one output, got {w_op}")
        if self.out_dtype is None or w_op.fgraph.outputs[0].type.dtype != self.out_dtype:
            raise TypeError(f"GpuFusedBincount: w_op must give out_dtype {self.out_dtype}, got {w_op}")
        if w_op.nin > MAX_ARGS:
            raise TypeError(f"GpuFusedBincount: at most {MAX_ARGS} inputs of the weights, got {w_op.nin}")
        self.w_op = w_op

    def __str__(self):
        return f"GpuFusedBincount{{mode={self.mode!r}, out_dtype={self.out_dtype!r}, weights={self.w_op}}}"

    # -- graph -------------------------------------------------------------
    def make_node(self, x, n, *w_inputs):
        name = type(self).__name__
        x = _as_gpu(x)
        if x.type.ndim != 1 or x.type.dtype not in INDEX_DTYPES:
            raise TypeError(f"{name}: x must be a 1-D integer GPU array, got {x.type}")
        n = as_tensor_variable(n)
        if n.type.ndim != 0 or n.type.dtype not in INDEX_DTYPES:
            raise TypeError(f"{name}: n must be an integer scalar, got {n.type}")
        if n.type.dtype != "int64":
            n = cast(n, "int64")
        ins = []
        for v in w_inputs:
            v = v if isinstance(getattr(v, "type", None), GpuArrayType) else as_tensor_variable(v)
            if isinstance(v.type, GpuArrayType) and v.type.ndim > 1 or not (
                isinstance(v.type, GpuArrayType) or _is_host_scalar(v)
            ):
                raise TypeError(f"{name}: an input of the weights must be a GPU array of 0 or 1 "
                                f"dimension(s) or a host tensor of one element, got {v.type}")
            ins.append(v)
        want = [i.type.dtype for i in self.w_op.fgraph.inputs]
        if [v.type.dtype for v in ins] != want:
            raise TypeError(f"{name}: the inputs of the weights must have dtypes {want}, "
                            f"got {[v.type.dtype for v in ins]}")
        length = _constant_int(n) if self.mode == "scatter" else None
        if length is not None and length < 0:
            length = None
        return Apply(self, [x, n] + ins, [GpuArrayType(self.out_dtype, shape=(length,))()])

    def connection_pattern(self, node):
        return [[False], [False]] + [[True]] * (len(node.inputs) - 2)

    def L_op(self, inputs, outputs, output_grads):
        raise NotImplementedError(
            "GpuFusedBincount is made by a rewrite after the gradient is built; take the "
            "gradient of the unfused graph"
        )

    def do_constant_folding(self, fgraph, node):
        return False

    def perform(self, node, inputs, output_storage, params=None):
        # The reference, on host copies: the weights by Aesara's Elemwise,
        # then reference_bincount.
        cp = cupy_module()
        x, n, ins = inputs[0], inputs[1], inputs[2:]
        arrays = [np.asarray(cp.asnumpy(a) if isinstance(v.type, GpuArrayType) else a).reshape(-1)
                  for v, a in zip(node.inputs[2:], ins)]  # fmt: skip
        lengths = sorted({a.shape[0] for a in arrays} - {1})
        if len(lengths) > 1:
            raise ValueError(f"{self}: the inputs of the weights differ in length {lengths}")
        length = lengths[0] if lengths else 1
        arrays = [np.broadcast_to(a, (length,)) if a.shape[0] == 1 else a for a in arrays]
        enode = Elemwise(self.w_op).make_node(*[TensorType(a.dtype, shape=(None,))() for a in arrays])
        storage = [[None]]
        enode.op.perform(enode, arrays, storage)
        out = reference_bincount(cp.asnumpy(x), int(n), storage[0][0], mode=self.mode,
                                 out_dtype=self.out_dtype)  # fmt: skip
        output_storage[0][0] = cp.asarray(out)

    # -- the kernel --------------------------------------------------------
    def kernel_source(self, node) -> Tuple[str, str]:
        """``(name, source)`` of the node's histogram kernel: the generated
        ``bc_fused_weight`` and ``c_code/bincount_cuda_kernel.cu``."""
        args: List[str] = []
        for k, v in enumerate(node.inputs[2:]):
            ctype = v.type.dtype_specs()[1]
            if isinstance(v.type, GpuArrayType):
                args.append(f"((const {ctype} *)f.data[{k}])[pos * f.stride[{k}]]")
            else:
                args.append(f"(*(const {ctype} *)&f.data[{k}])")
        out_ctype = aes.get_scalar_type(self.out_dtype).dtype_specs()[1]
        code = scalar_codegen.scalar_code(
            self.w_op, args, ["bc_w"], "cuda",
            [v.type.dtype for v in node.inputs[2:]], [self.out_dtype], "bc_fused_scalar",
        )  # fmt: skip
        x_dtype = node.inputs[0].type.dtype
        inc = sources.DTYPES[self.out_dtype][1]
        source = "\n".join((
            '#include "scalar_cuda_preamble.cuh"',
            '#include "bincount_cuda_device.cuh"',
            code.support,
            "#define BC_FUSED_NAME BC_FUSED_NAME_HERE",
            f"#define BC_FUSED_X {sources.DTYPES[x_dtype][1]}",
            f"#define BC_FUSED_INC {inc}",
            "#define BC_SCALAR_FAIL(code) ((void)(code))",
            f"static __device__ __forceinline__ {out_ctype} bc_fused_weight(const bc_fused_params &f, bc_i64 pos)",
            "{",
            f"    {out_ctype} bc_w;",
            code.body,
            "    return bc_w;",
            "}",
            "#undef BC_SCALAR_FAIL",
            f'#include "{sources.KERNEL_SOURCE}"',
            "",
        ))  # fmt: skip
        # The name carries a hash of the whole source and of the files it
        # includes: the module caches (NVRTC's on disk, the loaded modules,
        # Aesara's, which versions the node by this name) key on it.
        h = hashlib.sha256((source + _c_code.sources_hash(KERNEL_FILES)).encode())
        name = f"bincount_hist_fused_{sources.DTYPES[x_dtype][1]}_{inc}_{h.hexdigest()[:24]}"
        return name, source.replace("BC_FUSED_NAME_HERE", name)

    def _kernel(self, node):
        cached = getattr(node.tag, "bc_fused_kernel", None)
        if cached is None:
            cached = node.tag.bc_fused_kernel = self.kernel_source(node)
        return cached

    def prepare_node(self, node, storage_map, compute_map, impl):
        super().prepare_node(node, storage_map, compute_map, impl)
        from aesara_bincount_core.cuda import modules

        name, source = self._kernel(node)
        headers = {f: _c_code.read_source(f) for f in KERNEL_FILES}
        modules.register_generated_hist(name, source, headers, _NVRTC_OPTIONS)

    # -- C code ------------------------------------------------------------
    def c_flags(self, node):
        flags = super().c_flags(node)
        ins = node.inputs[2:]
        flags["BC_HIST_KERNEL"] = f'"{self._kernel(node)[0]}"'
        kinds = "".join("a" if isinstance(v.type, GpuArrayType) else "s" for v in ins)
        flags["BC_FUSED_KINDS"] = f'"{kinds}"'
        flags["BC_FUSED_ITEMSIZES"] = "{" + ", ".join(str(np.dtype(v.type.dtype).itemsize) for v in ins) + "}"
        return flags

    def c_code(self, node, name, inp, out, sub):
        define, undef = self.get_c_macros(node, name, check_input=False)
        ins = ", ".join(f"(PyObject *){v}" for v in inp[2:])
        return (
            f"{define}\n{{ PyObject *bc_ins[] = {{{ins}}}; "
            f"if (APPLY_SPECIFIC(gpu_bincount_fused)((PyObject *){inp[0]}, {inp[1]}, bc_ins, "
            f"(PyObject **)&{out[0]}) != 0) {{ {sub['fail']} }} }}\n{undef}\n"
        )

    def c_code_cache_version_apply(self, node):
        return self.c_code_cache_version() + (self._kernel(node)[0],)
