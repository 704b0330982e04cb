"""GpuArrayType, GPU variables and shared variables, the transfer Ops, GpuBincount.make_node.

No GPU: symbolic tests need nothing; value tests use the NumPy-backed fake
CuPy of tests/gpu_emu/fakecupy (no kernel runs here).
"""
import importlib.util
import os
import pickle
import sys

import aesara
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.sharedvalue import shared_constructor
from aesara.tensor.type import TensorType
from aesara.tensor.var import TensorVariable

import aesara_bincount.gpu as gpu
from aesara_bincount.gpu import (
    GpuArrayConstant,
    GpuArraySharedVariable,
    GpuArrayType,
    GpuArrayVariable,
    GpuBincount,
    gpu_from_host,
    host_from_gpu,
)
from aesara_bincount_core.gpu.type import CupyArray

FAKECUPY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_emu", "fakecupy", "cupy", "__init__.py")


@pytest.fixture
def fake_cupy(monkeypatch):
    """The NumPy-backed fake CuPy, as ``cupy``, for this test only: loaded as a
    package (its ``__init__`` imports its submodule ``cupy._routines``), and
    its submodules dropped from ``sys.modules`` afterwards."""
    before = {name for name in sys.modules if name.startswith("cupy.")}
    spec = importlib.util.spec_from_file_location(
        "cupy", FAKECUPY, submodule_search_locations=[os.path.dirname(FAKECUPY)]
    )
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "cupy", module)
    spec.loader.exec_module(module)
    yield module
    for name in [n for n in sys.modules if n.startswith("cupy.") and n not in before]:
        del sys.modules[name]


# -- the type -----------------------------------------------------------------


def test_type_basics():
    t = GpuArrayType("int32", shape=(None, 3))
    assert t == GpuArrayType(np.dtype("int32"), (None, 3)) and hash(t) == hash(GpuArrayType("int32", (None, 3)))
    assert t != GpuArrayType("int64", (None, 3)) and t != TensorType("int32", (None, 3))
    assert t.ndim == 2 and t.broadcastable == (False, False) and t.dtype == "int32"
    assert str(GpuArrayType("float32", (None,))) == "GpuArrayType(float32, (?,))"
    assert t.clone(dtype="uint8").dtype == "uint8" and t.clone(shape=(1,)).shape == (1,)
    assert t.dtype_specs()[1] == "npy_int32"
    assert t.host_type() == TensorType("int32", shape=(None, 3))
    assert pickle.loads(pickle.dumps(t)) == t
    with pytest.raises(TypeError, match="unsupported dtype"):
        GpuArrayType("complex64", (None,))


def test_is_super_and_convert_variable():
    general, specific = GpuArrayType("int64", (None,)), GpuArrayType("int64", (4,))
    assert general.is_super(specific) and not specific.is_super(general)
    assert not general.is_super(GpuArrayType("int32", (None,)))
    v = specific()
    assert general.convert_variable(v) is v
    h = at.lvector("h")
    moved = general.filter_variable(h)
    assert moved.owner.op == gpu_from_host and moved.type == general
    with pytest.raises(TypeError):
        general.filter_variable(at.dvector())


def test_cupy_arrays_are_recognised_without_cupy():
    class ndarray:  # noqa: N801 - the class name CuPy uses
        pass

    ndarray.__module__ = "cupy._core.core"
    assert isinstance(ndarray(), CupyArray)
    assert not isinstance(np.zeros(2), CupyArray)
    other = type("ndarray", (), {"__module__": "notcupy"})
    assert not isinstance(other(), CupyArray)
    # aesara.shared dispatches CuPy arrays to the GPU constructor.
    assert shared_constructor.dispatch(ndarray) is gpu.shared
    assert shared_constructor.dispatch(np.ndarray) is not gpu.shared


def test_filter_checks_host_data_before_needing_cupy():
    t = GpuArrayType("int32", (None,))
    with pytest.raises(TypeError, match="Wrong number of dimensions"):
        t.filter(np.zeros((2, 2), dtype="int32"))
    with pytest.raises(TypeError, match="Variable"):
        t.filter(at.ivector())
    with pytest.raises(TypeError, match="expected a cupy.ndarray"):
        t.filter(np.zeros(2, dtype="int32"), strict=True)
    with pytest.raises(TypeError):
        t.filter(np.array([1.5]))  # would lose precision


def test_filter_without_cupy_explains(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(ImportError, match=r"aesara-bincount\[cuda12\]"):
        GpuArrayType("int32", (None,)).filter(np.zeros(2, dtype="int32"))


def test_filter_values(fake_cupy):
    t = GpuArrayType("int64", (3,))
    v = t.filter(np.array([1, 2, 3]))
    assert isinstance(v, fake_cupy.ndarray) and v.dtype == np.int64
    assert t.filter(v) is v and t.filter(v, strict=True) is v
    cast = t.filter(fake_cupy.asarray(np.array([1, 2, 3], dtype="int32")))
    assert cast.dtype == np.int64
    with pytest.raises(TypeError, match="dtype"):
        t.filter(fake_cupy.asarray(np.array([1, 2, 3], dtype="int32")), strict=True)
    with pytest.raises(TypeError, match="shape"):
        t.filter(np.arange(4))
    with pytest.raises(TypeError):
        GpuArrayType("int32", (None,)).filter(fake_cupy.asarray(np.array([1.5])))
    f32 = GpuArrayType("float32", (None,))
    with pytest.raises(TypeError, match="loss of precision"):
        f32.filter(fake_cupy.asarray(np.array([1.5])))  # as TensorType does
    assert f32.filter(fake_cupy.asarray(np.array([1.5])), allow_downcast=True).dtype == np.float32
    assert t.values_eq(v, np.array([1, 2, 3])) and not t.values_eq(v, np.array([1, 2, 4]))
    assert GpuArrayType.may_share_memory(v, v[1:]) and not GpuArrayType.may_share_memory(v, v.copy())
    assert not GpuArrayType.may_share_memory(v[:1], v[1:])
    assert t.get_size(t.get_shape_info(v)) == 24


# -- variables in expressions ---------------------------------------------------


def test_gpu_variables_work_as_tensors():
    x = GpuArrayType("int64", (None,))("x")
    assert isinstance(x, GpuArrayVariable)
    for expr in (x + 1, x.max(), x.sum(), x[1:], at.exp(x)):
        assert isinstance(expr, TensorVariable)
        inputs = aesara.graph.basic.ancestors([expr])
        assert any(v.owner is not None and v.owner.op == host_from_gpu for v in inputs)
    assert x.transfer("gpu") is x and x.transfer("cpu").owner.op == host_from_gpu
    with pytest.raises(ValueError):
        x.transfer("tpu")


def test_transfer_ops():
    x = GpuArrayType("float32", (None, 2))("x")
    h = host_from_gpu(x)
    assert h.type == TensorType("float32", (None, 2))
    back = gpu_from_host(h)
    assert back.type == x.type
    (g,) = host_from_gpu.grad([x], [at.matrix("g", dtype="float32")])
    assert g.owner.op == gpu_from_host
    (g,) = gpu_from_host.grad([h], [x])
    assert g.owner.op == host_from_gpu
    fg = aesara.graph.fg.FunctionGraph([x], [h], clone=False)
    assert host_from_gpu.infer_shape(fg, h.owner, [("a", "b")]) == [("a", "b")]
    with pytest.raises(TypeError):
        host_from_gpu(at.vector())


def test_transfer_values(fake_cupy):
    x = GpuArrayType("int16", (None,))("x")
    f = aesara.function([x], [host_from_gpu(x) * 2, gpu_from_host(host_from_gpu(x) + 1)], mode="FAST_COMPILE")
    doubled, plus = f(np.array([1, 2], dtype="int16"))
    assert isinstance(doubled, np.ndarray) and doubled.tolist() == [2, 4]
    assert isinstance(plus, fake_cupy.ndarray) and plus.tolist() == [2, 3]


# -- shared variables -----------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"]
)
def test_shared_variables(fake_cupy, dtype):
    value = np.arange(6, dtype=dtype).reshape(2, 3)
    for v in (gpu.shared(value, name="v"), aesara.shared(fake_cupy.asarray(value), name="v")):
        assert isinstance(v, GpuArraySharedVariable) and v.type == GpuArrayType(dtype, (None, None))
        host = v.get_value()
        assert type(host) is np.ndarray and np.array_equal(host, value)
        inner = v.get_value(borrow=True, return_internal_type=True)
        assert isinstance(inner, fake_cupy.ndarray)
        assert v.get_value(return_internal_type=True) is not inner
        v.set_value(value + 1)
        assert np.array_equal(v.get_value(), value + 1)
        new = fake_cupy.asarray(value)
        v.set_value(new, borrow=True)
        assert v.get_value(borrow=True, return_internal_type=True) is new
        v.set_value(new)
        assert v.get_value(borrow=True, return_internal_type=True) is not new
        v.zero()
        assert not v.get_value().any()


def test_shared_copies_unless_borrowed(fake_cupy):
    value = fake_cupy.asarray(np.arange(3))
    assert gpu.shared(value).get_value(borrow=True, return_internal_type=True) is not value
    assert gpu.shared(value, borrow=True).get_value(borrow=True, return_internal_type=True) is value
    assert gpu.shared(np.zeros(3), shape=(3,)).type.shape == (3,)
    with pytest.raises(TypeError):
        gpu.shared(np.zeros(2, dtype="complex64"))
    with pytest.raises(TypeError):
        gpu.shared(value, target="cpu")


def test_constants_merge_by_value(fake_cupy):
    t = GpuArrayType("int32", (3,))
    a = GpuArrayConstant(t, fake_cupy.asarray(np.array([1, 2, 3], dtype="int32")))
    b = GpuArrayConstant(t, fake_cupy.asarray(np.array([1, 2, 3], dtype="int32")))
    c = GpuArrayConstant(t, fake_cupy.asarray(np.array([1, 2, 4], dtype="int32")))
    assert a.signature() == b.signature() and hash(a.signature()) == hash(b.signature())
    assert a.signature() != c.signature()


# -- GpuBincount.make_node ------------------------------------------------------


def test_make_node_types():
    x = GpuArrayType("int32", (None,))("x")
    out = GpuBincount()(x, 0)
    assert out.type == GpuArrayType("int32", (None,))
    w = GpuArrayType("float32", (None,))("w")
    assert GpuBincount()(x, 3, w).type.dtype == "float32"
    assert GpuBincount("scatter")(x, 10, GpuArrayType("float64", ())("s")).type == GpuArrayType("float64", (10,))
    assert GpuBincount(out_dtype="float64")(x, 0).type.dtype == "float64"
    # A 0-d weight, added for every element, in both modes.
    assert GpuBincount()(x, 0, GpuArrayType("float32", ())("s")).type == GpuArrayType("float32", (None,))
    # A host x is moved to the GPU; a HostFromGpu is undone.
    assert GpuBincount()(at.ivector(), 0).owner.inputs[0].owner.op == gpu_from_host
    assert GpuBincount()(host_from_gpu(x), 0).owner.inputs[0] is x


@pytest.mark.parametrize(
    "build",
    [
        lambda: GpuBincount()(GpuArrayType("float32", (None,))(), 0),
        lambda: GpuBincount()(GpuArrayType("int32", (None, None))(), 0),
        lambda: GpuBincount()(GpuArrayType("int32", (None,))(), at.dscalar()),
        lambda: GpuBincount()(GpuArrayType("int32", (None,))(), 0, GpuArrayType("float32", (None, None))()),
        lambda: GpuBincount(out_dtype="float64")(
            GpuArrayType("int32", (None,))(), 0, GpuArrayType("float32", (None,))()
        ),
        lambda: GpuBincount(out_dtype="complex64"),
    ],
)
def test_make_node_refuses(build):
    with pytest.raises(TypeError):
        build()


def test_gradient_of_the_weights_is_a_gpu_array():
    x = GpuArrayType("int32", (None,))("x")
    w = GpuArrayType("float64", (None,))("w")
    out = GpuBincount()(x, 0, w)
    gw = aesara.grad(host_from_gpu(out).sum(), w)
    assert gw.type == w.type
    wi = GpuArrayType("int64", (None,))("wi")
    assert isinstance(aesara.grad(host_from_gpu(GpuBincount()(x, 0, wi)).sum(), wi).type, GpuArrayType)


def test_unknown_mode():
    with pytest.raises(ValueError):
        GpuBincount("histogram")


def test_op_pickles_and_prints():
    op = GpuBincount("scatter", "float32")
    again = pickle.loads(pickle.dumps(op))
    assert again == op and hash(again) == hash(op)
    assert again.c_code_cache_version() == op.c_code_cache_version()
    assert "GpuBincount" in str(op) and "scatter" in str(op)


def test_type_transfer_and_var_form_no_cycle():
    """type.py imports neither transfer.py nor var.py (not even inside a
    function); transfer.py imports type.py only; var.py both."""
    import ast

    import aesara_bincount_core.gpu as pkg

    def imported(name):
        path = os.path.join(os.path.dirname(pkg.__file__), name + ".py")
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aesara_bincount_core.gpu"):
                found.add(node.module.rsplit(".", 1)[-1])
            elif isinstance(node, ast.Import):
                found |= {a.name.rsplit(".", 1)[-1] for a in node.names if a.name.startswith("aesara_bincount_core.gpu")}
        return found

    assert imported("type") == set()
    assert imported("transfer") == {"type"}
    assert imported("var") == {"type", "transfer"}


def test_tensors_transfer_to_the_gpu_through_aesara():
    h = at.lvector("h")
    moved = h.transfer("gpu")
    assert moved.owner.op == gpu_from_host and isinstance(moved.type, GpuArrayType)
    assert h.transfer("cpu") is h
    with pytest.raises(ValueError):
        h.transfer("tpu")


def test_fake_cupy_refuses_implicit_conversion_to_numpy(fake_cupy):
    """As CuPy 13: a device array is not a NumPy array; np.asarray, NumPy
    functions and operators that would mix it with host arrays raise TypeError;
    get(), cupy.asnumpy and NumPy ufuncs of device arrays only work."""
    a = fake_cupy.asarray(np.arange(6.0).reshape(2, 3))
    assert not isinstance(a, np.ndarray)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError):
        np.testing.assert_array_equal(a, np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError):
        a + np.ones(3)
    assert isinstance(np.exp(a), fake_cupy.ndarray) and isinstance(a.sum(), fake_cupy.ndarray)
    np.testing.assert_array_equal(a.get(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(fake_cupy.asnumpy(a.T[1:] * 2), np.arange(6.0).reshape(2, 3).T[1:] * 2)
    assert a.__cuda_array_interface__["data"][0] == a.data.ptr


def test_fake_cupy_counts_a_wait_for_every_read_of_device_values(fake_cupy):
    """As CuPy 13, whose reads of a device array on the host synchronise: bool,
    int, float, complex, index, item, tolist, tobytes, printing, get and
    asnumpy each count a wait and a device-to-host copy; shapes, views,
    device arithmetic and a Python loop over the rows do not."""
    a = fake_cupy.asarray(np.array([2.5, -1.0, 3.0]))
    reads = [
        lambda: bool(a[0]), lambda: int(a[1]), lambda: float(a[2]), lambda: complex(a[0]),
        lambda: [0, 1, 2, 3][a[1].astype("int64") + 2], lambda: a[0].item(), lambda: a.tolist(),
        lambda: a.tobytes(), lambda: repr(a), lambda: str(a), lambda: a.get(), lambda: fake_cupy.asnumpy(a),
        lambda: a[0] > 0 and 1,
    ]  # fmt: skip
    for read in reads:
        before = fake_cupy.counters["sync"], fake_cupy.counters["d2h"]
        read()
        assert (fake_cupy.counters["sync"] - before[0], fake_cupy.counters["d2h"] - before[1]) == (1, 1), read
    before = fake_cupy.counters["sync"], fake_cupy.counters["d2h"]
    b = (a * 2)[1:].reshape(2, 1) + a.sum()
    rows = [r for r in b]
    assert len(rows) == 2 and b.shape == (2, 1) and b.dtype == np.float64
    assert (fake_cupy.counters["sync"], fake_cupy.counters["d2h"]) == before


def test_in_same_class_updates_and_givens_with_a_more_precise_shape(fake_cupy):
    """Issue 39, item 4: an update or a ``givens`` replacement whose static
    shape is more precise than the GPU shared variable's is accepted, as
    ``aesara.shared`` accepts it; another dtype or pattern of 1s is refused."""
    t = GpuArrayType("float32", (None, None))
    assert t.in_same_class(GpuArrayType("float32", (3, None))) and t.in_same_class(t)
    assert not t.in_same_class(GpuArrayType("float32", (1, None)))  # a static 1 is another class
    assert not t.in_same_class(GpuArrayType("float64", (3, None)))
    assert not t.in_same_class(TensorType("float32", (3, None)))
    # the less precise GPU variable gets the shape through specify_shape, on the GPU
    narrowed = GpuArrayType("float32", (3, None)).convert_variable(t())
    assert narrowed.type == GpuArrayType("float32", (3, None))
    W = gpu.shared(np.zeros((3, 2), "float32"), name="W")
    x = at.vector("x", dtype="float32")
    g = at.reshape(x, (-1, 3)).T  # static shape (3, ?)
    mode = aesara.compile.mode.get_default_mode().excluding("gpu_bincount")
    f = aesara.function([x], [], updates=[(W, W - g)], mode=mode)
    assert f.maker.fgraph.outputs[0].type.in_same_class(W.type)
    G = gpu_from_host(g)
    f2 = aesara.function([x], (W * 2).sum(), givens={W: G}, mode=mode)
    assert float(f2(np.arange(6, dtype="float32"))) == 30.0
    with pytest.raises(TypeError):
        aesara.function([x], [], updates=[(W, W.astype("float64") - g)], mode=mode)
