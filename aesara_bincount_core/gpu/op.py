"""The :class:`GpuBincount` Op: bincount and scatter-add on an NVIDIA GPU."""
from typing import Optional

import numpy as np
from aesara.tensor.basic import as_tensor_variable
from aesara.tensor.type import TensorType

from aesara_bincount_core.cuda import sources
from aesara_bincount_core.gpu.c_file_op import GpuCFileOp, check_deterministic
from aesara_bincount_core.gpu.transfer import gpu_from_host, host_from_gpu
from aesara_bincount_core.gpu.type import GpuArrayType, cupy_module
from aesara_bincount_core.op import Bincount, check_props
from aesara_bincount_core.semantics import reference_bincount

__all__ = ["GpuBincount", "gpu_bincount"]


def _as_gpu(v):
    """``v`` as a GPU variable (a tensor is transferred, a HostFromGpu undone)."""
    if not isinstance(getattr(v, "type", None), GpuArrayType):
        v = as_tensor_variable(v)
        if v.owner is not None and v.owner.op == host_from_gpu:
            return v.owner.inputs[0]
        v = gpu_from_host(v)
    return v


class GpuBincount(GpuCFileOp):
    r"""Count, or sum weights, into integer-indexed bins on the GPU.

    The GPU counterpart of :class:`aesara_bincount.Bincount`, with the same
    modes, output dtypes, semantics and error messages; the inputs ``x`` and
    ``weights`` and the output are GPU arrays (:class:`GpuArrayType`, values
    ``cupy.ndarray``), ``n`` stays on the host.  The GPU rewrite puts it in
    place of ``Bincount`` when ``x`` comes from the GPU.

    Parameters
    ----------
    mode : {"bincount", "scatter"}
        As for :class:`~aesara_bincount.Bincount`.
    out_dtype : str, optional
        As for :class:`~aesara_bincount.Bincount`.
    deterministic : {"default", "more"}, optional
        ``aesara.config.deterministic`` when the Op is made (the rewrite
        makes it when the function is compiled), by default.  ``"more"``:
        float weights are summed in an order fixed by the device and the
        sizes alone (``c_code/cuda/bincount_det.cuh``), so that every call
        returns the same bits; integer results are exact either way.  Shown
        by ``dprint`` when ``"more"``; part of the cache key.
    checked : bool, optional
        ``"scatter"`` mode only: ``x`` holds int64 indices already checked
        on the device
        (:class:`~aesara_bincount_core.gpu.index_check.GpuIndexCheck`, into
        the call's status, read once when the call ends), so the Op does not
        wait: with exactly ``n`` bins nothing is left to read back.  Set by
        the lifting pass (issue 39); not meant to be set by hand.
    to_host : bool, optional
        The output is a host tensor (``numpy.ndarray``) instead of a GPU
        array: the Op also does the work of the ``HostFromGpu`` that would
        follow it.  The rewrite ``gpu_bincount_to_host`` sets it when that
        copy is the output's only client; not meant to be set by hand.

    Notes
    -----
    Inputs of the Apply node, in order:

    - ``x``: GPU ``(N,)``, int8 ... uint64, any strides.
    - ``n``: host ``()`` integer (cast to int64): ``minlength`` or the exact
      length.
    - ``weights`` (optional): GPU ``(N,)`` or ``()`` (broadcast) of
      ``out_dtype``; in ``"scatter"`` mode also ``(1,)``, broadcast.

    Output: GPU ``(n_bins,)`` of ``out_dtype`` (host with ``to_host``).

    The C implementation (``c_code/cuda_host/gpu_bincount_op.c``) runs the one
    launcher of the kernels (``c_code/cuda_host/bincount_launch.h``, which the
    stand-alone kernel layer :func:`~aesara_bincount_core.cuda.kernels.bincount_cupy`
    runs too) through the CUDA driver API, loaded at run time, on CuPy's
    current stream.  It waits for the stream once per call (the output's
    length depends on ``max(x)``), with the GIL released.  With ``to_host``
    that wait is also the copy of the result: the bins and the status come
    back in one device-to-host copy into page-locked memory, with device and
    page-locked memory kept per context from call to call, so that a call
    allocates nothing on the device (a second pass, with a second wait,
    only when ``max(x) + 1`` exceeds the previous call's length; outputs of
    more than 16 MiB take the device path and a copy).  Without it, the
    buffer comes from CuPy's pool (``cupy.empty``) and is cleared on the
    stream by ``cuMemsetD32Async``; the result stays on the GPU.

    ``perform`` is the reference, as for the CPU Op: it copies the inputs to
    the host, runs :func:`~aesara_bincount_core.semantics.reference_bincount`
    and copies the result back, so that the C and Python linkers give the
    same results (up to the order of float additions) and a graph under the
    Python linker checks the C code rather than repeating it.  It is slow
    (two copies per call and NumPy on the host); only the C code is meant to
    be timed.

    Counts and integer sums are exact and wrap modulo ``2**bits``; float32
    subnormals are kept.  Float weights are summed with atomics whose order
    varies between runs, so float results can differ in the last bits from
    run to run, unless ``deterministic="more"``: then the same inputs give
    the same bits on the same device with the same package version (the
    semantics page, "Deterministic float sums on the GPU", gives what is
    and is not guaranteed, and the cost).

    Errors, when the compiled function runs (inputs and shared variables are
    left unchanged, the process stays usable): ``ValueError`` (a negative
    value in ``"bincount"`` mode, naming the first; ``max(x) + 1`` too large;
    bad weights length; negative ``n``; inputs on another device),
    ``IndexError`` (``"scatter"`` mode, an index outside ``[-n, n)``, naming
    the first), ``MemoryError`` (the output does not fit in device memory).
    When the function is compiled without a usable GPU (no CuPy, driver,
    device or NVRTC), :class:`~aesara_bincount_core.cuda.kernels.GpuUnavailableError`
    names the cause.
    """

    __props__ = ("mode", "out_dtype", "deterministic", "to_host", "checked")
    #: For Ops pickled before the props existed.
    to_host = False
    checked = False
    __str__ = GpuCFileOp.props_str
    _cop_num_inputs = 3
    _cop_num_outputs = 1
    c_sources = (
        "common/host_helpers.h",
        "cuda/kernel_defs.h",
        "cuda_host/driver.h",
        "cuda_host/bincount_launch.h",
        "cuda_host/bincount_to_host.h",
        "cuda/bincount_det_defs.h",
        "cuda_host/bincount_det_launch.h",
        "cuda_host/gpuarray_type.h",
        "cuda_host/cupy_callbacks.h",
        "cuda_host/staging.h",
        "cuda_host/gpu_bincount_op.c",
    )
    c_function = "gpu_bincount"
    cpu_verb = "count"
    kernel_sources = sources.kernel_files("hist")
    #: Bump by hand only for changes outside the C/CUDA files (which are hashed).
    version = 2

    def __init__(self, mode: str = "bincount", out_dtype: Optional[str] = None,
                 deterministic: Optional[str] = None, to_host: bool = False, checked: bool = False):
        self.mode, self.out_dtype = check_props(type(self).__name__, mode, out_dtype)
        self.to_host = bool(to_host)
        self.checked = bool(checked)
        if self.checked and self.mode != "scatter":
            raise ValueError(f"{type(self).__name__}: checked indices are for the 'scatter' mode only")
        self.deterministic = check_deterministic(type(self).__name__, deterministic)
        GpuCFileOp.__init__(self)

    def with_host_output(self) -> "GpuBincount":
        """The same Op with ``to_host`` set (its output a host tensor)."""
        props = {p: getattr(self, p) for p in self.__props__ if p != "to_host"}
        return type(self)(**props, to_host=True)

    def hist_flags(self, x_dtype: str, out_dtype: str, weighted: bool, hist_kernel: str) -> dict:
        """The macros of the host C code that say how the histogram is summed
        (``hist_kernel``: the default pass's name; the deterministic kernels
        when :func:`~aesara_bincount_core.cuda.sources.deterministic_sum`) and
        where the result goes (``to_host``)."""
        acc = sources.accumulation(out_dtype, weighted)
        det = sources.deterministic_sum(out_dtype, weighted, self.deterministic)
        finish = sources.det_hist_kernels(x_dtype, out_dtype)[1] if det else acc.finish or ""
        return {
            "BC_SCATTER": int(self.mode == "scatter"),
            "BC_X_DTYPE_NAME": f'"{x_dtype}"',
            "BC_X_SIGNED": int(x_dtype.startswith("int")),
            "BC_HIST_KERNEL": f'"{hist_kernel}"',
            "BC_FINISH_KERNEL": f'"{finish}"',
            "BC_OUT_DTYPE": sources.DTYPES[out_dtype][0],
            "BC_BUF_DTYPE": sources.DTYPES[acc.buffer_dtype][0],
            "BC_BUF_ITEMSIZE": np.dtype(acc.buffer_dtype).itemsize,
            "BC_SHARED_ITEMSIZE": np.dtype(out_dtype).itemsize if det else acc.shared_itemsize,
            "BC_DETERMINISTIC": int(det),
            "BC_TO_HOST": int(self.to_host),
            "BC_CHECKED": int(self.checked),
        }

    def c_flags(self, node):
        x_dtype = node.inputs[0].type.dtype
        out_dtype = node.outputs[0].type.dtype
        weighted = len(node.inputs) > 2
        if sources.deterministic_sum(out_dtype, weighted, self.deterministic):
            hist = sources.det_hist_kernels(x_dtype, out_dtype)[0]
        else:
            hist = sources.accumulation(out_dtype, weighted).hist_kernel(x_dtype)
        return self.hist_flags(x_dtype, out_dtype, weighted, hist)

    # -- graph -------------------------------------------------------------
    # Bincount's make_node, with GPU inputs and output: x and weights are GPU
    # arrays (a tensor is transferred), n stays on the host.
    as_array = staticmethod(_as_gpu)
    make_node = Bincount.make_node

    @property
    def output_type(self):
        """The type of the output: a GPU array, or a host tensor with ``to_host``."""
        return TensorType if self.to_host else GpuArrayType

    def host_or_gpu(self, out):
        """``out`` (a NumPy array) as the output's value: itself with
        ``to_host``, else a copy on the GPU."""
        return out if self.to_host else cupy_module().asarray(out)

    def perform(self, node, inputs, output_storage, params=None):
        # The reference, on host copies (see the class docstring).
        cp = cupy_module()
        x, n = inputs[:2]
        weights = cp.asnumpy(inputs[2]) if len(inputs) > 2 else None
        out = reference_bincount(
            cp.asnumpy(x), int(n), weights, mode=self.mode, out_dtype=node.outputs[0].type.dtype
        )
        output_storage[0][0] = self.host_or_gpu(out)

    infer_shape = Bincount.infer_shape
    connection_pattern = Bincount.connection_pattern

    def L_op(self, inputs, outputs, output_grads):
        # Bincount's gradient, computed on the host; the weights' comes back.
        grads = Bincount.L_op(self, inputs, outputs, output_grads)
        if len(grads) > 2:
            grads[2] = _as_gpu(grads[2])
        return grads


def gpu_bincount(x, weights=None, minlength=None):
    """Build a :class:`GpuBincount` graph directly (``numpy.bincount`` semantics).

    Most users need not call this: the GPU rewrite turns
    :func:`aesara.tensor.extra_ops.bincount` of a GPU variable into it.

    Parameters
    ----------
    x : GPU or tensor variable, shape ``(N,)``, integer dtype
    weights : GPU or tensor variable, shape ``(N,)``, optional
    minlength : int or integer scalar, optional

    Returns
    -------
    GpuArrayVariable, shape ``(max(max(x) + 1, minlength),)``
        dtype of ``weights``, else of ``x``.

    Raises
    ------
    TypeError
        When the graph is built, for a bad ``x``; at run time see
        :class:`GpuBincount`.
    """
    n = 0 if minlength is None else minlength
    if weights is None:
        return GpuBincount("bincount")(x, n)
    return GpuBincount("bincount")(x, n, weights)
