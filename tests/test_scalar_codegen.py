"""The scalar code generator (aesara_bincount_core/scalar_codegen.py).

- The inline rule on chosen ops (what it accepts and refuses, and why).
- The C target: every scalar op and dtype the rule accepts, compiled into one
  shared library with g++ against Python's and NumPy's headers (as Aesara's
  modules are), run over edge values and compared with the same Elemwise
  graph compiled by Aesara's C linker (one module).
- The CUDA target: the same cases, one NVRTC compile (skipped without NVRTC);
  they run on the emulation in tests/gpu/test_cuda_elemwise.py.
"""
import builtins
import ctypes
import os
import re
import subprocess
import sysconfig

import aesara
import aesara.scalar as aes
import aesara.scalar.math as scalar_math
import aesara.tensor as at
import numpy as np
import pytest
from aesara.compile.mode import Mode
from aesara.tensor.elemwise import Elemwise

from aesara_bincount_core import _c_code, scalar_codegen, vector_codegen
from aesara_bincount_core.scalar_codegen import inline_problem, scalar_code
import scalar_cases

BUILD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "tests")


def _composite_exp():
    theta, v = aes.float64("theta"), aes.float32("v")
    return aes.Composite([theta, v], [aes.exp(-theta * v)])


class _PythonOp(aes.UnaryScalarOp):
    """A scalar op whose C code calls Python."""

    nfunc_spec = None

    def impl(self, x):
        return x

    def c_code(self, node, name, inputs, outputs, sub):
        return f"{outputs[0]} = PyFloat_AsDouble(PyFloat_FromDouble({inputs[0]}));"


class _UnknownCallOp(aes.UnaryScalarOp):
    def impl(self, x):
        return x

    def c_code(self, node, name, inputs, outputs, sub):
        return f"{outputs[0]} = my_helper({inputs[0]});"


@pytest.mark.parametrize("target", scalar_codegen.TARGETS)
def test_inline_rule(target):
    assert inline_problem(aes.exp, target, ["float64"]) is None
    assert inline_problem(aes.add, target, ["int8", "int8"]) is None
    assert inline_problem(aes.int_div, target, ["int64", "int64"]) is None  # errors: BC_SCALAR_FAIL
    assert inline_problem(aes.psi, target, ["float32"]) is None  # WITHIN_KERNEL support code
    assert inline_problem(_composite_exp(), target) is None
    assert "complex" in inline_problem(aes.exp, target, ["complex128"])
    assert "float16" in inline_problem(aes.exp, target, ["float16"])
    assert "no C code" in inline_problem(aes.psi, target, ["int8"])
    assert "header files" in inline_problem(scalar_math.erfcx, target, ["float64"])
    assert "NPY_NAN" in inline_problem(scalar_math.gammainc, target, ["float64", "float64"])
    assert "j0()" in inline_problem(scalar_math.j0, target, ["float64"])  # POSIX, not C99
    assert "Python" in inline_problem(_PythonOp(aes.upgrade_to_float), target, ["float64"])
    assert "my_helper" in inline_problem(_UnknownCallOp(aes.upgrade_to_float), target, ["float64"])
    with pytest.raises(ValueError, match="unknown target"):
        inline_problem(aes.exp, "opencl")


def test_casts_of_floats_on_the_cuda_target():
    """Casts of floats to integers become the preamble's bc_float_to_<dtype>
    (x86-64's values) for CUDA, in a Composite too; to uint32 and uint64 the
    rule refuses them for CUDA only; other casts are Aesara's code."""
    x = aes.float32()
    comp = aes.Composite([x], [aes.convert_to_int64(aes.floor(x * 10)), aes.convert_to_uint8(x)])
    code = scalar_code(comp, ["a"], ["z", "w"], "cuda", ["float32"], ["int64", "uint8"])
    assert "bc_float_to_int64(" in code.body and "bc_float_to_uint8(" in code.body
    assert "bc_float_to_" not in scalar_code(comp, ["a"], ["z", "w"], "c", ["float32"], ["int64", "uint8"]).body
    assert "bc_float_to_" not in scalar_code(aes.convert_to_int8, ["a"], ["z"], "cuda", ["int64"], ["int8"]).body
    for dtype in ("uint32", "uint64"):
        cast = getattr(aes, f"convert_to_{dtype}")
        assert "disagree" in inline_problem(cast, "cuda", ["float64"])
        assert inline_problem(cast, "c", ["float64"]) is None
        assert inline_problem(cast, "cuda", ["int64"]) is None


def test_scalar_code_contract():
    code = scalar_code(aes.int_div, ["a[i]", "b[i]"], ["z[i]"], "c", ["int32", "int32"], ["int32"])
    assert code.errors == (1,) and "BC_SCALAR_FAIL(1);" in code.body
    assert "PyErr" not in code.body and "AESARA_MACRO_MOD" in code.support
    # each input expression is read once, into a temporary, before any output is written
    assert code.body.count("a[i]") == 1 and code.body.index("a[i]") < code.body.index("z[i] =")
    other = scalar_code(aes.int_div, ["a[i]", "b[i]"], ["z[i]"], "cuda", ["int32", "int32"], ["int32"])
    assert other.version != code.version
    with pytest.raises(ValueError, match="gives"):
        scalar_code(aes.add, ["a", "b"], ["z"], "c", ["int8", "int8"], ["int16"])
    with pytest.raises(ValueError, match="cannot inline"):
        scalar_code(aes.exp, ["a"], ["z"], "c", ["complex64"], ["complex64"])
    with pytest.raises(ValueError, match="takes 2 inputs"):
        scalar_code(aes.add, ["a"], ["z"], "c", ["int8", "int8"], ["int8"])


def _ctype(dtype):
    return aes.get_scalar_type(dtype).dtype_specs()[1]


def _case_code(k, op, dtype, target, out_format):
    """The scalar code of case ``k`` (``op`` on ``dtype`` inputs ``in0``, ``in1``, ... at
    index ``i``), into ``out_format`` filled with the output's C type; and its inputs."""
    node = op.make_node(*[aes.get_scalar_type(dtype)() for _ in range(op.nin if op.nin > 0 else 2)])
    in_dtypes = [i.type.dtype for i in node.inputs]
    out_dtypes = [o.type.dtype for o in node.outputs]
    ins = [f"((const {_ctype(d)} *)in{j})[i]" for j, d in enumerate(in_dtypes)]
    outs = [out_format.format(_ctype(out_dtypes[0]))]
    return scalar_code(op, ins, outs, target, in_dtypes, out_dtypes, name=f"case{k}"), ins


def _case_functions(cases, target, out_expr, function):
    """(support code, one function per case) for ``target``: ``function(k, params,
    body)`` wraps case k's body, ``params`` its input pointers."""
    support, functions = [], []
    for k, (name, op, dtype) in enumerate(cases):
        code, ins = _case_code(k, op, dtype, target, out_expr)
        if code.support not in support:
            support.append(code.support)
        params = ", ".join(f"const void *in{j}" for j in range(len(ins)))
        functions.append(function(k, params, code.body))
    return support, functions


def _c_library(cases):
    """Build one shared library with a loop ``case_k`` per case (C target)."""
    support, functions = _case_functions(cases, "c", "((({} *)out)[i])", lambda k, params, body: (
        f'extern "C" int case{k}({params}, void *out, long n) {{\n'
        f"#define BC_SCALAR_FAIL(code) return (code)\n"
        f"for (long i = 0; i < n; i++) {body}\n#undef BC_SCALAR_FAIL\nreturn 0;\n}}\n"
    ))
    text = "#include <Python.h>\n#include <numpy/arrayobject.h>\n#include <math.h>\n"
    text += "\n".join(support) + "\n" + "\n".join(functions)
    os.makedirs(BUILD, exist_ok=True)
    key = scalar_codegen.hashlib.sha256(text.encode()).hexdigest()[:16]
    lib = os.path.join(BUILD, f"scalar_c_cases-{key}.so")
    if not os.path.exists(lib):
        src = lib[:-3] + ".cpp"
        with open(src, "w") as f:
            f.write(text)
        cmd = ["g++", "-O2", "-shared", "-fPIC", "-w", f"-I{sysconfig.get_paths()['include']}",
               f"-I{np.get_include()}", "-o", lib + ".tmp", src]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-4000:]
        os.replace(lib + ".tmp", lib)
    return ctypes.CDLL(lib)


#: dtypes whose exhaustive comparison runs in the default selection; the
#: others (the middle widths) are marked slow.
QUICK_DTYPES = ("bool", "int64", "float32", "float64")
DTYPE_PARAMS = [d if d in QUICK_DTYPES else pytest.param(d, marks=pytest.mark.slow)
                for d in scalar_codegen.DTYPES]  # fmt: skip


def _run_case(lib, k, op, name, arrays, like):
    nin = op.nin if op.nin > 0 else 2
    args = scalar_cases.special_args(name, arrays[0].dtype.name, arrays) or arrays[:nin]
    got = np.empty_like(like)
    rc = getattr(lib, f"case{k}")(*[ctypes.c_void_p(x.ctypes.data) for x in args],
                                   ctypes.c_void_p(got.ctypes.data), ctypes.c_long(got.size))  # fmt: skip
    assert rc == 0, name
    return got


@pytest.mark.parametrize("dtype", DTYPE_PARAMS)
def test_c_target_equals_cpu_graph(dtype):
    """Every op of ``dtype`` the rule accepts, in a loop of ours, against the
    same ops in one Composite compiled by Aesara (FAST_RUN): bit for bit, NaN
    payloads aside (the same code, the same compiler)."""
    cases = [c for c in scalar_cases.cases("c")[0] if c[2] == dtype]
    assert cases
    lib = _c_library(cases)
    expected, arrays = scalar_cases.cpu_reference("c", dtype)
    for k, (name, op, _) in enumerate(cases):
        got = _run_case(lib, k, op, name, arrays, expected[name])
        np.testing.assert_array_equal(got, expected[name], err_msg=f"{name} {dtype}", strict=True)
        if got.dtype.kind == "f":  # the sign of zeros too
            np.testing.assert_array_equal(np.signbit(got), np.signbit(expected[name]), err_msg=name)


def test_rule_refuses_for_a_reason():
    ok, refused = scalar_cases.cases("c")
    assert len(ok) > 600
    assert all(reason for _, _, reason in refused)
    assert {d for _, _, d in ok} == set(scalar_codegen.DTYPES)


def test_c_target_reports_division_by_zero():
    cases = [("floor_divide", aes.int_div, "int32"), ("mod", aes.mod, "int64")]
    lib = _c_library(cases)
    for k, (name, op, dtype) in enumerate(cases):
        a = np.array([7, 8], dtype=dtype)
        b = np.array([2, 0], dtype=dtype)
        got = np.empty(2, dtype=dtype)
        rc = getattr(lib, f"case{k}")(ctypes.c_void_p(a.ctypes.data), ctypes.c_void_p(b.ctypes.data), ctypes.c_void_p(got.ctypes.data),
                                       ctypes.c_long(2))  # fmt: skip
        assert rc == k + 1 and got[0] == (3 if name == "floor_divide" else 1)  # stopped at 8 / 0
        exc, message = scalar_codegen.SCALAR_ERRORS[rc - 1]
        x, y = at.vector(dtype=dtype), at.vector(dtype=dtype)
        f = aesara.function([x, y], Elemwise(op)(x, y), mode=Mode(linker="c", optimizer=None))
        with pytest.raises(getattr(builtins, exc), match=message):
            f(a, b)


def _nvrtc_or_skip():
    """(the nvrtc module, its loaded library), or skip where NVRTC is missing."""
    nvrtc = pytest.importorskip("aesara_bincount_core.cuda.nvrtc")
    try:
        return nvrtc, nvrtc.load()
    except nvrtc.NvrtcError as exc:
        pytest.skip(str(exc))


def test_cuda_target_compiles_with_nvrtc():
    nvrtc, lib = _nvrtc_or_skip()
    cases, _ = scalar_cases.cases("cuda")
    support, functions = _case_functions(cases, "cuda", "(({} *)out)[i]", lambda k, params, body: (
        f'extern "C" __global__ void case{k}({params}, void *out, long n, int *err) {{\n'
        "long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i >= n) return;\n"
        "#define BC_SCALAR_FAIL(code) *err = (code)\n"
        f"{body}\n#undef BC_SCALAR_FAIL\n}}\n"
    ))
    source = f'#include "{scalar_codegen.CUDA_PREAMBLE}"\n' + "\n".join(support) + "\n".join(functions)
    headers = {scalar_codegen.CUDA_PREAMBLE: _c_code.read_source(scalar_codegen.CUDA_PREAMBLE)}
    image = nvrtc.compile_cached(source, "scalar_cuda_cases.cu", 80, ("-std=c++17",), headers, lib)
    assert image.data


def test_cuda_target_compiles_every_dtype_combination():
    """Every scalar op with every input dtype pair that the rule accepts for
    CUDA (scalar_cases.mixed_cases: about 4000 cases, ``int64 ** int8``,
    ``float32 ** int32``, ``uint64 % int64``) compiles with NVRTC: one
    program of device functions, compiled to PTX (NVRTC's front end checks
    each function; unused ones cost no code generation, so this takes about
    a second).  The rule may accept nothing that NVRTC cannot compile."""
    nvrtc, lib = _nvrtc_or_skip()
    cases = scalar_cases.mixed_cases("cuda")
    assert len(cases) > 3000
    support, functions = [], []
    for k, (name, op, dtypes) in enumerate(cases):
        node = op.make_node(*[aes.get_scalar_type(d)() for d in dtypes])
        out_dtypes = [o.type.dtype for o in node.outputs]
        ins, outs = [f"in{j}" for j in range(len(dtypes))], [f"*out{j}" for j in range(len(out_dtypes))]
        code = scalar_code(op, ins, outs, "cuda", list(dtypes), out_dtypes, name=f"case{k}")
        if code.support not in support:
            support.append(code.support)
        params = [f"{_ctype(d)} in{j}" for j, d in enumerate(dtypes)]
        params += [f"{_ctype(d)} *out{j}" for j, d in enumerate(out_dtypes)]
        functions.append(
            f"/* case {k} */ __device__ void case{k}({', '.join(params)}, int *err) {{\n"
            f"#define BC_SCALAR_FAIL(code) (*err = (code))\n{code.body}\n#undef BC_SCALAR_FAIL\n}}"
        )
    source = f'#include "{scalar_codegen.CUDA_PREAMBLE}"\n' + "\n".join(support + functions) + "\n"
    headers = {scalar_codegen.CUDA_PREAMBLE: _c_code.read_source(scalar_codegen.CUDA_PREAMBLE)}
    try:
        lib.compile(source, "scalar_cuda_sweep.cu", ["-arch=compute_90", "-std=c++17"], headers, kind="ptx")
    except nvrtc.NvrtcError as exc:
        lines = source.split("\n")
        failing = set()
        for line in re.findall(r"scalar_cuda_sweep\.cu\((\d+)\): error", str(exc)):
            header = next(t for t in reversed(lines[: int(line)]) if t.startswith("/* case "))
            name, _, dtypes = cases[int(header.split()[2])]
            failing.add(f"{name}{dtypes}")
        pytest.fail(f"NVRTC cannot compile (its first errors): {sorted(failing)}\n{str(exc)[:3000]}")


def test_gpu_elemwise_problem():
    """Which Elemwise nodes GpuElemwise takes (a rule on types and constants;
    no GPU needed)."""
    from aesara_bincount_core.gpu.elemwise import gpu_elemwise_problem

    x, y = at.ivector("x"), at.ivector("y")
    assert gpu_elemwise_problem(at.exp(at.fvector()).owner) is None
    assert gpu_elemwise_problem((x // 10).owner) is None
    assert gpu_elemwise_problem((x % np.int32(-3)).owner) is None
    assert "ZeroDivisionError" in gpu_elemwise_problem((x // y).owner)
    assert "ZeroDivisionError" in gpu_elemwise_problem((x // 0).owner)
    s = aes.int32()
    inner = aes.Composite([s], [aes.int_div(s, aes.constant(np.int32(4)))])
    assert gpu_elemwise_problem(Elemwise(inner)(x).owner) is None
    outer = aes.Composite([s, aes.int32()], [aes.int_div(s, s)])
    assert "ZeroDivisionError" in gpu_elemwise_problem(Elemwise(outer)(x, y).owner)
    assert "complex" in gpu_elemwise_problem(at.exp(at.cvector()).owner)
    assert "float16" in gpu_elemwise_problem(at.exp(at.vector(dtype="float16")).owner)
    assert "dimensions" in gpu_elemwise_problem(at.exp(at.tensor("float64", shape=(None,) * 7)).owner)
    assert "Elemwise" in gpu_elemwise_problem(at.sum(x).owner)


def test_elemwise_template_compiles_alone():
    """c_code/cuda/elemwise_kernel.cu is valid CUDA on its own (its default kernel)."""
    nvrtc, lib = _nvrtc_or_skip()
    from aesara_bincount_core.gpu.elemwise import KERNEL_FILES

    headers = {f: _c_code.read_source(f) for f in KERNEL_FILES[1:]}
    image = nvrtc.compile_cached(_c_code.read_source(KERNEL_FILES[0]), KERNEL_FILES[0], 80,
                                 ("-std=c++17", "-fmad=false"), headers, lib)  # fmt: skip
    assert image.data


# -- the vector form (issue 41: the fused loop's weights as vectors) ----------------
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_vector_ops_are_one_ieee_operation_in_aesaras_code(dtype):
    """Each op of VECTOR_OPS is, in Aesara's own C code, its one operation of
    the inputs left to right: what vector_code writes on vectors."""
    a, b, c = (aes.get_scalar_type(dtype)() for _ in range(3))
    for op_class, sign in vector_codegen.VECTOR_OPS.items():
        args = (a,) if op_class is aes.Neg else (a, b) if sign in "-/" else (a, b, c)
        node = op_class(aes.upcast_out)(*args).owner if op_class is not aes.Neg else aes.neg(a).owner
        code = node.op.c_code(node, "n", [f"i{k}" for k in range(len(args))], ["z"], {"fail": "F"})
        want = f"z = -i0;" if op_class is aes.Neg else "z = " + f" {sign} ".join(f"i{k}" for k in range(len(args))) + ";"
        assert code.strip() == want, (op_class, code)


def test_vector_code_takes_arithmetic_of_one_float_dtype_only():
    d = [aes.float64() for _ in range(3)]
    f = [aes.float32() for _ in range(2)]

    def vec(ins, out, dtype="float64", scalars=()):
        return vector_codegen.vector_code(aes.Composite(ins, [out]), [f"a{k}" for k in range(len(ins))], "dst",
                                          dtype, scalars=scalars)

    code = vec(d, -(d[0] / d[1]) - aes.constant(0.1, dtype="float64") * d[2] + d[0])
    assert code is not None and "(0.1)" in code and code.strip().endswith("}")
    assert "dst = bc_vt" in code and " / " in code and "-(a0)" not in code  # the quotient is negated
    assert vec(d[:2], d[0] * d[1] + d[1], scalars=[True, False]) is not None
    assert vec(d[:2], d[0] * aes.constant(2.0, dtype="float64"), scalars=[True, False]) is None  # no vector in it
    assert vec(f, f[0] * f[1], "float32") is not None
    assert vec(f[:1], f[0] * aes.constant(0.1, dtype="float32"), "float32") is None  # a double literal in float32 code
    assert vec(d[:1], aes.exp(d[0])) is None
    assert vec(d[:1], d[0] * aes.constant(np.inf, dtype="float64")) is None
    i = aes.int64()
    assert vec([i], i * 2, "int64") is None
    assert vec([d[0], f[0]], d[0] * f[0]) is None  # a cast inside
