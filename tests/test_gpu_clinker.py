"""The host C code of GpuBincount compiles through Aesara's CLinker (no GPU, not run)."""
import os

import pytest
from aesara.graph.fg import FunctionGraph
from aesara.link.c.basic import CLinker
from aesara.tensor.type import TensorType

from aesara_bincount.gpu import GpuArrayType, GpuBincount, GpuScatterAdd


@pytest.mark.parametrize(
    "mode,x_dtype,w_dtype,out_dtype",
    [
        ("bincount", "int64", None, None),  # the accumulator is the output
        ("bincount", "uint16", None, "float64"),  # counts converted by the finish kernel
        ("scatter", "int8", "float32", None),  # weighted, broadcastable weights
        ("bincount", "int32", "int16", None),  # narrow integer weights
    ],
)
def test_host_code_compiles(mode, x_dtype, w_dtype, out_dtype):
    x = GpuArrayType(x_dtype, shape=(None,))("x")
    n = TensorType("int64", shape=())("n")
    inputs = [x, n]
    if w_dtype:
        inputs.append(GpuArrayType(w_dtype, shape=(None,))("w"))
    node = GpuBincount(mode, out_dtype=out_dtype)(*inputs).owner
    fg = FunctionGraph(inputs, node.outputs, clone=False)
    module = CLinker().accept(fg).compile_cmodule()
    assert module is not None


@pytest.mark.parametrize(
    "op_class,kernel_files",
    [
        (GpuBincount, ("cuda/bincount_kernels.cu", "cuda/bincount_hist.cuh", "cuda/bincount_det.cuh",
                       "cuda/bincount_det_count.cuh", "cuda/bincount_det_bucket.cuh", "cuda/bincount_det_defs.h",
                       "cuda/det_sort.cuh", "cuda/device_helpers.cuh")),
        (GpuScatterAdd, ("cuda/scatter_add_kernels.cu", "cuda/scatter_add_det.cuh", "cuda/scatter_add_det_bucket.cuh",
                         "cuda/scatter_add_det_defs.h", "cuda/det_sort.cuh", "cuda/bincount_det_defs.h",
                         "cuda/device_helpers.cuh")),
    ],
)
def test_cache_version_covers_every_source(monkeypatch, op_class, kernel_files):
    from aesara_bincount_core import _c_code

    op = op_class()
    version = op.c_code_cache_version()
    assert op_class.kernel_sources == kernel_files
    assert set(op.c_sources + op.kernel_sources) <= set(op_class.hashed_sources())
    for name in op_class.hashed_sources():
        real = _c_code.read_source

        def edited(n, _name=name, _real=real):
            return _real(n) + ("\n/* edited */" if n == _name else "")

        monkeypatch.setattr(_c_code, "read_source", edited)
        assert op.c_code_cache_version() != version, name
        monkeypatch.setattr(_c_code, "read_source", real)


@pytest.mark.parametrize("op_class", [GpuBincount, GpuScatterAdd])
def test_cache_version_covers_every_included_file(op_class):
    """Every file of c_code/ that the Op's sources or its kernels include,
    directly or not, is hashed."""
    import re

    from aesara_bincount_core import _c_code

    op = op_class()
    hashed = set(op_class.hashed_sources())
    seen, todo = set(), list(op.c_sources + op.kernel_sources)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for inc in re.findall(r'^#include "([^"]+)"', _c_code.read_source(name), re.MULTILINE):
            if os.path.exists(_c_code.c_code_path(inc)):
                todo.append(inc)
    assert seen <= hashed, seen - hashed
    assert set(op.c_headers()) <= set(op.c_sources)
