"""The :class:`GpuScatterAdd` Op: the scatter-add of rows on an NVIDIA GPU."""
from aesara.gradient import DisconnectedType
from aesara.graph.basic import Apply

from aesara_bincount_core.cuda import sources
from aesara_bincount_core.gpu.c_file_op import GpuCFileOp, check_deterministic
from aesara_bincount_core.gpu.op import _as_gpu
from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module
from aesara_bincount_core.scatter_add import ScatterAdd, check_scatter_props
from aesara_bincount_core.semantics import reference_scatter_add

__all__ = ["GpuScatterAdd"]


class GpuScatterAdd(GpuCFileOp):
    r"""Add rows of increments into the rows of a base that integer indices name, on the GPU.

    The GPU counterpart of :class:`~aesara_bincount_core.scatter_add.ScatterAdd`
    (``out = base; out[idx[i]] += increments[i]``, that is
    ``inc_subtensor(base[idx], increments)`` and ``np.add.at``), with the same
    forms, dtypes, semantics, errors and messages.  The base, the increments,
    the indices and the output are GPU arrays (:class:`GpuArrayType`, values
    ``cupy.ndarray``); the shape of a zero-filled base stays on the host.  The
    GPU rewrite puts it in place of ``ScatterAdd`` when the base (``onto="base"``)
    or the increments (``onto="zeros"``) come from the GPU.

    Parameters
    ----------
    onto : {"base", "zeros"}
        As for ``ScatterAdd``.
    inplace : bool, optional
        Add into the base array itself (``destroy_map = {0: [0]}``): the
        update of a GPU shared variable, with no copy of it.  Set by
        ``local_inplace_scatter_add``.
    deterministic : {"default", "more"}, optional
        ``aesara.config.deterministic`` when the Op is made (when the
        function is compiled), by default.  ``"more"``: float rows are added
        in index order, each add rounded in the output dtype
        (``c_code/cuda/scatter_add_det.cuh``), so every call returns the
        bits of :func:`numpy.add.at`; slower, above all for hot rows (the
        semantics page gives the cost).  Shown by ``dprint`` when
        ``"more"``; part of the cache key.
    call_status : bool, optional
        ``idx`` holds int64 rows already checked on the device
        (:class:`~aesara_bincount_core.gpu.index_check.GpuIndexCheck`), and
        the Op takes the call's status (:mod:`~aesara_bincount_core.gpu.call_status`)
        as a fourth input: the kernels read it and add nothing when a check
        of the call failed, and the Op does not wait (the call reads its
        status once, when it ends).  Set by the lifting pass.

    Notes
    -----
    Inputs of the Apply node, in order: ``base`` (GPU ``(V, *rest)``, any
    strides; or, ``onto="zeros"``, the host int64 shape), ``increments``
    (GPU, the output's dtype, broadcast to ``(N, *rest)`` when the function
    runs), ``idx`` (GPU ``(N,)``, int8 ... uint64, any stride).  Output: GPU
    ``(V, *rest)``, C-contiguous unless it is the base itself.

    The C implementation (``c_code/cuda_host/gpu_scatter_add_op.c``) runs the one
    launcher of the rows kernels (``c_code/cuda_host/scatter_add_launch.h``, which
    the kernel layer's :func:`~aesara_bincount_core.cuda.kernels.scatter_add_cupy`
    runs too) on CuPy's current stream: a kernel checks every index, the call
    waits once for its status (with the GIL released), and only then is the
    adding kernel queued, so a bad index leaves an in-place base unchanged;
    the call returns without waiting for the adds.  With ``call_status`` it
    does not wait at all: the indices were checked before, and the adding
    kernel reads the call's status on the device.

    Layouts: the kernels need the elements of each row of the output and of
    the increments C-contiguous (any stride between rows; increments may also
    be one value per row or one row for every index).  Anything else is
    copied first: increments into a C-contiguous ``(N, *rest)`` array; an
    in-place base with non-contiguous rows into a C-contiguous copy, copied
    back after the indices are checked (the time then follows the size of the
    base).  The algorithm (a warp per row for rows of 32 elements or more,
    running sums for runs of equal indices, atomics) is described in
    ``c_code/cuda/scatter_add_kernels.cu``.

    Integer sums are exact and wrap modulo ``2**bits``; float32 subnormals are
    kept.  Float sums are added with atomics in an order that varies between
    runs, so float results can differ in the last bits from run to run and
    from :func:`numpy.add.at` (which adds in index order), unless
    ``deterministic="more"`` (above).  float32 rows are
    summed in a float64 scratch the size of the output and rounded once per
    element when it fits (at most 256 MiB, at most 4 rows of the output per
    index), else in float32 with compare-and-swap loops (the semantics page
    says in which precision each GPU path accumulates).

    Errors, when the compiled function runs (the base and every shared
    variable are left unchanged, the process stays usable): ``IndexError``
    for an index outside ``[-V, V)``, naming the first one and its position;
    ``ValueError`` for increments that cannot be broadcast to ``(N, *rest)``
    (after any ``IndexError``), a negative dimension of the zero-filled base,
    inputs on another device; ``MemoryError`` when an output or a copy does
    not fit in device memory (CuPy's ``OutOfMemoryError``).  Without a usable
    GPU, compiling raises :class:`~aesara_bincount_core.cuda.kernels.GpuUnavailableError`.

    ``perform`` is the reference (:func:`~aesara_bincount_core.semantics.reference_scatter_add`
    on host copies, copied back; in place, the result is written back into
    the base), slow and meant for the Python linker only.
    """

    __props__ = ("onto", "inplace", "deterministic", "call_status")
    #: For Ops pickled before the prop existed.
    call_status = False
    __str__ = GpuCFileOp.props_str
    _cop_num_inputs = 3
    _cop_num_outputs = 1
    c_sources = (
        "common/host_helpers.h",
        "common/scatter_checks.h",
        "cuda/kernel_defs.h",
        "cuda_host/driver.h",
        "cuda_host/bincount_launch.h",
        "cuda/bincount_det_defs.h",
        "cuda/scatter_add_det_defs.h",
        "cuda_host/scatter_add_launch.h",
        "cuda_host/gpuarray_type.h",
        "cuda_host/cupy_callbacks.h",
        "cuda_host/gpu_scatter_add_op.c",
    )
    c_function = "gpu_scatter_add"
    cpu_verb = "add"
    kernel_sources = sources.kernel_files("rows")
    #: Bump by hand only for changes outside the C/CUDA files (which are hashed).
    version = 1

    def __init__(self, onto: str = "base", inplace: bool = False, deterministic=None,
                 call_status: bool = False):  # fmt: skip
        self.onto, self.inplace = check_scatter_props(type(self).__name__, onto, inplace)
        self.deterministic = check_deterministic(type(self).__name__, deterministic)
        self.call_status = bool(call_status)
        if self.call_status:
            self._cop_num_inputs = 4
        if self.inplace:
            self.destroy_map = {0: [0]}
        GpuCFileOp.__init__(self)

    def clone_inplace(self) -> "GpuScatterAdd":
        """The same Op, adding into its base in place."""
        return type(self)(onto=self.onto, inplace=True, deterministic=self.deterministic,
                          call_status=self.call_status)  # fmt: skip

    def c_flags(self, node):
        idx_dtype = node.inputs[2].type.dtype
        check, add = sources.rows_kernels(idx_dtype, node.outputs[0].type.dtype, self.deterministic)
        return {
            "SA_ONTO_ZEROS": int(self.onto == "zeros"),
            "SA_INPLACE": int(self.inplace),
            "SA_IDX_SIGNED": int(idx_dtype.startswith("int")),
            "SA_IDX_DTYPE_NAME": f'"{idx_dtype}"',
            "SA_OUT_DTYPE_NAME": f'"{node.outputs[0].type.dtype}"',
            "SA_CHECK_KERNEL": f'"{check}"',
            "SA_ADD_KERNEL": f'"{add}"',
            "SA_ADD_DET": int(add.startswith("scatter_rows_det_")),
            "SA_CALL_STATUS": int(self.call_status),
        }

    # -- graph -------------------------------------------------------------
    # ScatterAdd's make_node, with GPU arrays (a tensor is transferred) and a
    # GPU output; the shape of a zero-filled base stays on the host.
    as_array = staticmethod(_as_gpu)
    output_type = GpuArrayType

    def make_node(self, base, increments, idx, *status):
        if len(status) != int(self.call_status):
            raise TypeError(f"GpuScatterAdd: the call's status is {'' if self.call_status else 'not '}an input")
        node = ScatterAdd.make_node(self, base, increments, idx)
        if status and (not isinstance(idx.type, GpuArrayType) or idx.type.dtype != "int64"):
            raise TypeError("GpuScatterAdd: with the call's status, idx must be checked GPU int64 rows")
        return Apply(self, node.inputs + list(status), [o.type() for o in node.outputs])

    def perform(self, node, inputs, output_storage, params=None):
        # The reference, on host copies (see the class docstring).
        cp = cupy_module()
        base, increments, idx = inputs[:3]
        host_base = base if self.onto == "zeros" else cp.asnumpy(base)
        out = reference_scatter_add(
            host_base, cp.asnumpy(increments), cp.asnumpy(idx), onto=self.onto
        )
        if self.inplace:
            base[...] = cp.asarray(out)
            output_storage[0][0] = base
        else:
            output_storage[0][0] = cp.asarray(out)

    def do_constant_folding(self, fgraph, node):
        return False  # GPU values are not folded into the graph

    infer_shape = ScatterAdd.infer_shape

    def connection_pattern(self, node):
        return ScatterAdd.connection_pattern(self, node) + [[False]] * int(self.call_status)

    def L_op(self, inputs, outputs, output_grads):
        # ScatterAdd's gradient, computed on the host; GPU inputs get theirs back.
        grads = ScatterAdd.L_op(self, inputs[:3], outputs, output_grads)
        grads += [DisconnectedType()()] * int(self.call_status)
        for k in (0, 1):
            if isinstance(inputs[k].type, GpuArrayType) and not isinstance(grads[k].type, GpuArrayType):
                grads[k] = _as_gpu(grads[k])
        return grads
