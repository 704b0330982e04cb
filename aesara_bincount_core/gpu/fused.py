"""The :class:`GpuFusedBincount` Op: a GPU bincount whose weights are computed in its kernel.

The GPU counterpart of :class:`aesara_bincount_core.fused.FusedBincount` for
the weights: the histogram kernel of ``c_code/cuda/bincount_kernels.cu``,
instantiated once per scalar graph with a device function that computes the
weight at each position from the graph's inputs, generated from the scalar
ops' own C code by :mod:`aesara_bincount_core.scalar_codegen` (the generator
of :class:`~aesara_bincount_core.gpu.elemwise.GpuElemwise`'s kernels).  The
host C code and the launcher are GpuBincount's (``cuda_host/gpu_bincount_op.c``,
``cuda_host/bincount_launch.h``); the kernel comes from the one module cache
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
from aesara.tensor.basic import as_tensor_variable
from aesara.tensor.elemwise import Elemwise
from aesara.tensor.type import TensorType

from aesara_bincount_core import _c_code, scalar_codegen
from aesara_bincount_core.cuda import sources
from aesara_bincount_core.gpu.elemwise import _is_host_scalar
from aesara_bincount_core.gpu.op import GpuBincount, _as_gpu
from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module
from aesara_bincount_core.op import _as_length, _constant_int
from aesara_bincount_core.semantics import INDEX_DTYPES, reference_bincount

__all__ = ["GpuFusedBincount", "KERNEL_FILES", "MAX_ARGS"]

#: What a generated source includes (hashed into the kernel's name).
KERNEL_FILES = (
    (sources.KERNEL_SOURCE,)
    + sources.FAMILY_HEADERS["hist"]
    + (sources.DEVICE_HEADER, sources.KERNEL_HEADER, scalar_codegen.CUDA_PREAMBLE)
)
#: Most inputs of the weights' scalar graph (``BC_CUDA_FUSED_MAX_ARGS``).
MAX_ARGS = sources.CONSTANTS["FUSED_MAX_ARGS"]
#: As GpuElemwise's: no contraction into fused multiply-adds, so that the
#: weights round as the unfused kernel's do.
_NVRTC_OPTIONS = ("-std=c++17", "-fmad=false")


def _group_kinds(inputs) -> str:
    """'a' for each GPU array of a fused group, 's' for each host scalar."""
    return "".join("a" if isinstance(v.type, GpuArrayType) else "s" for v in inputs)


class GpuFusedBincount(GpuBincount):
    r"""``GpuBincount`` of weights, or of an ``x``, computed inline by scalar graphs.

    Computes what ``GpuBincount(mode, out_dtype)(x, n, weights)`` computes,
    where ``x = GpuElemwise(x_op)(*x_inputs)`` and ``weights =
    GpuElemwise(w_op)(*w_inputs)``, without those arrays: the histogram
    kernel reads each input once and computes each value in registers.  The
    rewrite ``gpu_bincount_fusion`` (:mod:`aesara_bincount.gpu.fusion`) puts
    it in graphs; there is no reason to build it by hand.

    Parameters
    ----------
    mode : {"bincount", "scatter"}
        As for :class:`GpuBincount`.
    out_dtype : str
        dtype of the output (and of the weights).
    x_op, w_op : aesara.scalar.Composite, optional
        The scalar graphs of ``x`` (an integer output) and of the weights
        (output ``out_dtype``), one output each, accepted by
        :func:`~aesara_bincount_core.gpu.elemwise.gpu_elemwise_problem` (the
        rewrite only takes nodes that already are ``GpuElemwise`` nodes);
        None where ``x`` or the weights are an input as such.
    weighted : bool, optional
        Whether there are weights; defaults to ``w_op is not None``.
    deterministic : {"default", "more"}, optional
        As for :class:`GpuBincount` (the rewrite keeps the replaced node's):
        under ``"more"`` float weights go through the deterministic pass
        (the generated source defines ``BC_FUSED_DET``), the same bits on
        every call.

    Notes
    -----
    Inputs of the Apply node: the ``x_op.nin`` inputs of ``x`` (``x``
    itself, a GPU ``(N,)`` integer array, without ``x_op``), then ``n``
    (host int64 scalar), then the ``w_op.nin`` inputs of the weights (the
    weights themselves without ``w_op``, nothing when counting).  Each input
    of a scalar graph is a GPU array of 0 or 1 dimension (any stride; a
    length of 1 broadcasts) or a host tensor of one element (static shape;
    its value becomes a kernel argument), of the dtype of the graph's
    input; at most ``BC_CUDA_FUSED_MAX_ARGS`` in all.  The arrays of one
    graph have one length, where 1 broadcasts: the length of the computed
    ``x``, or of the weights, which is checked as a weights array's is
    (``ValueError`` naming both lengths).

    ``to_host``: as for ``GpuBincount`` (the output on the host).

    Results: those of ``GpuBincount`` of the computed values.  They are
    computed by the scalar ops' own code as ``GpuElemwise`` computes them
    (same rounding: no fused multiply-adds), so integer results are exact
    and only the order of the float additions differs between runs, as for
    stored weights (unless ``deterministic="more"``); float32 weights are accumulated as GpuBincount
    accumulates them (float32 in shared memory, float64 in global memory,
    rounded once).  A computed negative ``x`` raises ``ValueError`` naming
    the value and its position, as for a stored one.  Errors, sync and
    messages are GpuBincount's.
    """

    __props__ = ("mode", "out_dtype", "x_op", "w_op", "weighted", "deterministic", "to_host", "checked")
    _cop_num_inputs = None
    c_function = "gpu_bincount_fused"
    kernel_sources = GpuBincount.kernel_sources + (scalar_codegen.CUDA_PREAMBLE,)
    version = 1

    def __init__(self, mode: str = "bincount", out_dtype=None, x_op=None, w_op=None, weighted=None,
                 deterministic=None, to_host=False, checked=False):
        super().__init__(mode, out_dtype, deterministic, to_host, checked)
        for what, sop in (("x_op", x_op), ("w_op", w_op)):
            if sop is not None and (not isinstance(sop, aes.Composite) or sop.nout != 1):
                raise TypeError(f"GpuFusedBincount: {what} must be a Composite with one output, got {sop}")
        if x_op is None and w_op is None:
            raise TypeError("GpuFusedBincount: nothing to fuse (no x_op, no w_op)")
        self.weighted = bool(w_op is not None if weighted is None else weighted)
        if w_op is not None and (not self.weighted or w_op.fgraph.outputs[0].type.dtype != self.out_dtype):
            raise TypeError(f"GpuFusedBincount: w_op must give out_dtype {self.out_dtype}, got {w_op}")
        if x_op is not None and x_op.fgraph.outputs[0].type.dtype not in INDEX_DTYPES:
            raise TypeError(f"GpuFusedBincount: x_op must give an integer dtype, got {x_op}")
        nin = (x_op.nin if x_op is not None else 1) + (w_op.nin if w_op is not None else int(self.weighted))
        if nin > MAX_ARGS:
            raise TypeError(f"GpuFusedBincount: at most {MAX_ARGS} inputs of x and weights, got {nin}")
        self.x_op, self.w_op = x_op, w_op

    def __str__(self):
        parts = [f"mode={self.mode!r}", f"out_dtype={self.out_dtype!r}"]
        if self.x_op is not None:
            parts.append(f"x={self.x_op}")
        if self.w_op is not None:
            parts.append(f"weights={self.w_op}")
        if self.to_host:
            parts.append("to_host=True")
        if self.checked:
            parts.append("checked=True")
        if self.deterministic != "default":
            parts.append(f"deterministic={self.deterministic!r}")
        return f"GpuFusedBincount{{{', '.join(parts)}}}"

    # -- layout of the inputs ------------------------------------------------
    @property
    def nx(self) -> int:
        """Number of inputs of ``x``."""
        return self.x_op.nin if self.x_op is not None else 1

    def split_inputs(self, inputs) -> Tuple[list, object, list]:
        """``(x_inputs, n, w_inputs)`` of a list of node inputs."""
        return list(inputs[: self.nx]), inputs[self.nx], list(inputs[self.nx + 1 :])

    def x_dtype(self, node) -> str:
        """dtype of the (computed) ``x``."""
        if self.x_op is not None:
            return self.x_op.fgraph.outputs[0].type.dtype
        return node.inputs[0].type.dtype

    # -- graph -------------------------------------------------------------
    def make_node(self, *inputs):
        name = type(self).__name__
        nw = self.w_op.nin if self.w_op is not None else int(self.weighted)
        if len(inputs) != self.nx + 1 + nw:
            raise TypeError(f"{name}: expected {self.nx + 1 + nw} inputs, got {len(inputs)}")
        x_ins, n, w_ins = self.split_inputs(list(inputs))
        x_ins = self._group(name, "x", self.x_op, x_ins)
        w_ins = self._group(name, "weights", self.w_op, w_ins) if self.weighted else []
        if self.x_op is None and (x_ins[0].type.ndim != 1 or x_ins[0].type.dtype not in INDEX_DTYPES):
            raise TypeError(f"{name}: x must be a 1-D integer GPU array, got {x_ins[0].type}")
        if self.w_op is None and self.weighted and w_ins[0].type.dtype != self.out_dtype:
            raise TypeError(f"{name}: weights must have dtype {self.out_dtype}, got {w_ins[0].type}")
        n = _as_length(n, name)
        length = _constant_int(n) if self.mode == "scatter" else None
        if length is not None and length < 0:
            length = None
        return Apply(self, x_ins + [n] + w_ins, [self.output_type(self.out_dtype, shape=(length,))()])

    @staticmethod
    def _group(name, what, sop, ins) -> list:
        if sop is None:
            return [_as_gpu(ins[0])]
        out = []
        for v in ins:
            v = v if isinstance(getattr(v, "type", None), GpuArrayType) else as_tensor_variable(v)
            if (v.type.ndim > 1) if isinstance(v.type, GpuArrayType) else not _is_host_scalar(v):
                raise TypeError(f"{name}: an input of {what} must be a GPU array of 0 or 1 "
                                f"dimension(s) or a host tensor of one element, got {v.type}")
            out.append(v)
        want = [i.type.dtype for i in sop.fgraph.inputs]
        if [v.type.dtype for v in out] != want:
            raise TypeError(f"{name}: the inputs of {what} must have dtypes {want}, "
                            f"got {[v.type.dtype for v in out]}")
        if "a" not in _group_kinds(out):
            raise TypeError(f"{name}: the inputs of {what} must include a GPU array")
        return out

    def infer_shape(self, fgraph, node, input_shapes):
        if self.mode == "scatter":
            return [(node.inputs[self.nx],)]
        return GpuBincount.infer_shape(self, fgraph, node, input_shapes)

    def connection_pattern(self, node):
        return [[False]] * (self.nx + 1) + [[True]] * (len(node.inputs) - self.nx - 1)

    def L_op(self, inputs, outputs, output_grads):
        raise NotImplementedError(
            "GpuFusedBincount is made by a rewrite after the gradient is built; take the "
            "gradient of the unfused graph"
        )

    def do_constant_folding(self, fgraph, node):
        return False

    def perform(self, node, inputs, output_storage, params=None):
        # The reference, on host copies: x and the weights by Aesara's
        # Elemwise, then reference_bincount.
        cp = cupy_module()
        x_ins, n, w_ins = self.split_inputs(inputs)
        v_x, _, v_w = self.split_inputs(node.inputs)

        def compute(sop, values, variables):
            arrays = [np.asarray(cp.asnumpy(a) if isinstance(v.type, GpuArrayType) else a).reshape(-1)
                      for v, a in zip(variables, values)]  # fmt: skip
            if sop is None:
                return arrays[0]
            lengths = sorted({a.shape[0] for a in arrays} - {1})
            if len(lengths) > 1:
                raise ValueError(f"{self}: the inputs of an elementwise graph differ in length {lengths}")
            length = lengths[0] if lengths else 1
            arrays = [np.broadcast_to(a, (length,)) if a.shape[0] == 1 else a for a in arrays]
            enode = Elemwise(sop).make_node(*[TensorType(a.dtype, shape=(None,))() for a in arrays])
            storage = [[None]]
            enode.op.perform(enode, arrays, storage)
            return storage[0][0]

        x = compute(self.x_op, x_ins, v_x)
        w = compute(self.w_op, w_ins, v_w) if self.weighted else None
        out = reference_bincount(x, int(n), w, mode=self.mode, out_dtype=self.out_dtype)
        output_storage[0][0] = self.host_or_gpu(out)

    # -- the kernel --------------------------------------------------------
    def _device_function(self, sop, variables, first: int, fname: str, tag: str):
        """The generated device functions of a scalar graph whose inputs are
        the fused parameters ``first ...``: ``fname(f, pos)``, its value at
        ``pos``, and the vector forms (``cuda/device_helpers.cuh``,
        ``BC_FUSED_VECTOR``): ``fname_vec``, the values at ``V`` positions
        from vector loads, ``fname_vec_ok`` and ``fname_head``: (lines, support)."""
        args: List[str] = []
        vargs: List[str] = []
        arrays: List[str] = []
        for k, v in enumerate(variables, first):
            ctype = v.type.dtype_specs()[1]
            if isinstance(v.type, GpuArrayType):
                args.append(f"((const {ctype} *)f.data[{k}])[pos * f.stride[{k}]]")
                vargs.append(f"BC_FUSED_VIN({k}, {ctype})")
                arrays.append(f"{k}, {ctype}")
            else:
                args.append(f"(*(const {ctype} *)&f.data[{k}])")
                vargs.append(args[-1])
        out_dtype = sop.fgraph.outputs[0].type.dtype
        out_ctype = aes.get_scalar_type(out_dtype).dtype_specs()[1]
        in_dtypes = [v.type.dtype for v in variables]
        code = scalar_codegen.scalar_code(sop, args, ["bc_r"], "cuda", in_dtypes, [out_dtype], f"bc_fused_{tag}")
        vcode = scalar_codegen.scalar_code(sop, vargs, ["bc_r"], "cuda", in_dtypes, [out_dtype], f"bc_fused_{tag}")
        lines = [
            f"static __device__ __forceinline__ {out_ctype} {fname}(const bc_fused_params &f, bc_i64 pos)",
            "{",
            f"    {out_ctype} bc_r;",
            code.body,
            "    return bc_r;",
            "}",
            f"BC_FUSED_VECTOR({fname}_vec)",
            "{",
            *[f"    BC_FUSED_VLOAD({a})" for a in arrays],
            "    BC_FUSED_EACH_ELEMENT",
            "    {",
            f"        {out_ctype} bc_r;",
            vcode.body,
            "        bc_out[bc_j] = (O)bc_r;",
            "    }",
            "}",
            f"BC_FUSED_VECTOR_OK({fname}_vec_ok)",
            "{",
            f"    return {' && '.join([f'BC_FUSED_ALIGNED({a})' for a in arrays] + ['true'])};",
            "}",
            f"BC_FUSED_VECTOR_HEAD({fname}_head)",
            "{",
            *[f"    BC_FUSED_HEAD({a})" for a in arrays],
            "    return 0;",
            "}",
        ]  # fmt: skip
        return lines, code.support

    def kernel_source(self, node) -> Tuple[str, str]:
        """``(name, source)`` of the node's histogram kernel: the generated
        ``bc_fused_weight`` / ``bc_fused_x`` and ``c_code/cuda/bincount_kernels.cu``."""
        x_ins, _, w_ins = self.split_inputs(node.inputs)
        x_dtype = self.x_dtype(node)
        inc = sources.accumulation(self.out_dtype, self.weighted).inc
        det = sources.deterministic_sum(self.out_dtype, self.weighted, self.deterministic)
        support, body, defines = [], [], ["#define BC_FUSED_DET 1"] if det else []
        if self.x_op is not None:
            lines, sup = self._device_function(self.x_op, x_ins, 0, "bc_fused_x", "x")
            body += lines
            support.append(sup)
            defines.append("#define BC_FUSED_FX 1")
        if self.w_op is not None:
            lines, sup = self._device_function(self.w_op, w_ins, self.nx, "bc_fused_weight", "w")
            body += lines
            support.append(sup)
            defines.append("#define BC_FUSED_FW 1")
        source = "\n".join([
            '#include "cuda/scalar_preamble.cuh"',
            '#include "cuda/device_helpers.cuh"',
            *support,
            "#define BC_FUSED_NAME BC_FUSED_NAME_HERE",
            f"#define BC_FUSED_X {sources.DTYPES[x_dtype][1]}",
            f"#define BC_FUSED_INC {inc}",
            *defines,
            "#define BC_SCALAR_FAIL(code) ((void)(code))",
            *body,
            "#undef BC_SCALAR_FAIL",
            f'#include "{sources.KERNEL_SOURCE}"',
            "",
        ])  # fmt: skip
        # The name carries a hash of the whole source and of the files it
        # includes: the module caches (NVRTC's on disk, the loaded modules,
        # Aesara's, which versions the node by this name) key on it.
        h = hashlib.sha256("\0".join((source, _c_code.sources_hash(KERNEL_FILES), *_NVRTC_OPTIONS)).encode())
        kind = "det_" if det else ""
        name = f"bincount_hist_fused_{kind}{sources.DTYPES[x_dtype][1]}_{inc}_{h.hexdigest()[:24]}"
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
        x_ins, _, w_ins = self.split_inputs(node.inputs)
        x_dtype = self.x_dtype(node)
        kinds = _group_kinds(x_ins) if self.x_op is not None else "x"
        if self.weighted:
            kinds += _group_kinds(w_ins) if self.w_op is not None else "w"
        return {
            **self.hist_flags(x_dtype, self.out_dtype, self.weighted, self._kernel(node)[0]),
            "BC_X_ITEMSIZE": np.dtype(x_dtype).itemsize,
            "BC_FUSED_KINDS": f'"{kinds}"',
            "BC_FUSED_NX": len(x_ins),
            "BC_FUSED_ITEMSIZES": "{" + ", ".join(
                str(np.dtype(v.type.dtype).itemsize) for v in x_ins + w_ins) + "}",
        }

    def c_code(self, node, name, inp, out, sub):
        define, undef = self.get_c_macros(node, name, check_input=False)
        ins = ", ".join(f"(PyObject *){v}" for k, v in enumerate(inp) if k != self.nx)
        return (
            f"{define}\n{{ PyObject *bc_ins[] = {{{ins}}}; "
            f"if (APPLY_SPECIFIC(gpu_bincount_fused)(bc_ins, {inp[self.nx]}, "
            f"(PyObject **)&{out[0]}) != 0) {{ {sub['fail']} }} }}\n{undef}\n"
        )

    def c_code_cache_version_apply(self, node):
        return self.c_code_cache_version() + (self._kernel(node)[0],)
