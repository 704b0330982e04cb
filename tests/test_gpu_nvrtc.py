"""The CUDA kernels compile with NVRTC, without a GPU; the NVRTC loader and cache.

Every kernel module (one per family and dtype of x: the histogram family
holds every increment kind and the conversion kernels, the rows family the
scatter-add of rows) is compiled to CUBIN for sm_75 and sm_90 (sm_80 too in make test-long), and
any warning in NVRTC's log fails the test.  NVRTC comes from the
``nvidia-cuda-nvrtc-cu12`` wheel of the test extra.
"""
import fcntl
import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from aesara_bincount_core import _c_code
from aesara_bincount_core.cuda import nvrtc, sources

from conftest import LONG
from procs import run_python

#: The targets every kernel is compiled for: sm_75 (the oldest supported) and
#: sm_90 (the H100 and H200 of the GPU check) in make test, and sm_80 too in
#: make test-long.
ARCHS = (75, 80, 90) if LONG else (75, 90)
X_DTYPES = tuple(d for d in sources.DTYPES if not d.startswith("float"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def nvrtc_lib():
    try:
        return nvrtc.load()
    except nvrtc.NvrtcError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def compiled(nvrtc_lib):
    """{(family, x dtype, arch): CompiledImage}, compiled in parallel (NVRTC releases the GIL).

    The images go to the test cache folder, which the emulated GPU suite
    (tests/test_gpu_emulated.py) reuses for sm_90.  One pytest-xdist worker
    compiles them at a time (a file lock): a second worker then reads them
    from the cache instead of compiling them all again beside the first.
    """
    old = os.environ.get("AESARA_BINCOUNT_CACHE")
    folder = os.path.join(ROOT, ".cache", "tests", "kernels")
    os.makedirs(folder, exist_ok=True)
    os.environ["AESARA_BINCOUNT_CACHE"] = folder
    try:
        jobs = [(f, x, cc) for f in sources.FAMILIES for x in X_DTYPES for cc in ARCHS
                if f not in ("set", "check") or x == "int64"]  # one module each, compiled as int64
        with open(os.path.join(folder, ".nvrtc-test.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
                images = list(
                    pool.map(lambda j: sources.compile_module(j[1], j[2], nvrtc_lib, j[0]), jobs)
                )
    finally:
        if old is None:
            del os.environ["AESARA_BINCOUNT_CACHE"]
        else:
            os.environ["AESARA_BINCOUNT_CACHE"] = old
    return dict(zip(jobs, images))


def _headers():
    names = (sources.KERNEL_HEADER, sources.DEVICE_HEADER) + tuple(
        h for family in sorted(sources.FAMILY_HEADERS) for h in sources.FAMILY_HEADERS[family])
    return {h: _c_code.read_source(h) for h in names}


def _kernel_names(family, x_dtype):
    short = sources.DTYPES[x_dtype][1]
    if family == "set":
        return ["scatter_set_last"] + [f"scatter_set_rows_w{b}" for b in (1, 2, 4, 8)]
    if family == "check":  # every index dtype in one module
        return [f"call_check{r}_{sources.DTYPES[d][1]}" for d in X_DTYPES for r in ("", "_record")]
    if family == "rows":
        return [f"scatter_rows_check_{short}", f"scatter_rows_wide_{short}_f32",
                f"scatter_rows_finish_{short}_f32", f"scatter_rows_det_{short}_f32",
                f"scatter_rows_det_{short}_f64"] + [
            f"scatter_rows_add_{short}_{sources.DTYPES[d][1]}" for d in sources.DTYPES
        ]  # fmt: skip
    incs = ["c32", "c64"] + [sources.DTYPES[d][1] for d in sources.DTYPES]
    finishes = ["u32_u8", "u32_u16", "u64_f32", "u64_f64", "f64_f32"]
    return ([f"bincount_hist_{short}_{i}" for i in incs] + [f"bincount_finish_{f}" for f in finishes]
            + [f"bincount_hist_det_{short}_{w}" for w in ("f32", "f64")]
            + [f"bincount_det_finish_{w}" for w in ("f32", "f64")])


@pytest.mark.parametrize("cc", ARCHS)
@pytest.mark.parametrize("x_dtype", X_DTYPES)
@pytest.mark.parametrize("family", sorted(sources.FAMILIES))
def test_kernels_compile_without_warnings(compiled, family, x_dtype, cc):
    if (family, x_dtype, cc) not in compiled:
        pytest.skip("the set and check families are compiled as int64 only")
    image = compiled[(family, x_dtype, cc)]
    assert image.kind == "cubin" and image.target == f"sm_{cc}"
    assert image.data[:4] == b"\x7fELF"
    assert not re.search(r"warning|error", image.log, re.IGNORECASE), image.log
    for name in _kernel_names(family, x_dtype):
        assert name.encode() in image.data, f"{name} missing from the {family} {x_dtype} module"
    for other in sources.FAMILIES:
        for name in _kernel_names(other, x_dtype) if other != family else ():
            assert name.encode() not in image.data, f"{name} in the {family} module"


def test_every_kernel_the_launchers_name_exists(compiled):
    """Each (out dtype, weighted) accumulation names kernels that were compiled,
    in the family that sources.family_of gives."""
    for x_dtype in X_DTYPES:
        hist, rows = set(_kernel_names("hist", x_dtype)), set(_kernel_names("rows", x_dtype))
        for out_dtype in sources.DTYPES:
            for weighted in (False, True):
                acc = sources.accumulation(out_dtype, weighted)
                assert acc.hist_kernel(x_dtype) in hist
                assert acc.finish is None or acc.finish in hist
                assert sources.family_of(acc.hist_kernel(x_dtype)) == "hist"
                if sources.deterministic_sum(out_dtype, weighted, "more"):
                    assert set(sources.det_hist_kernels(x_dtype, out_dtype)) <= hist
            for mode in sources.DETERMINISTIC_MODES:
                names = sources.rows_kernels(x_dtype, out_dtype, mode)
                names += tuple(n for n in sources.rows_scratch_kernels(names[1]) if n)
                assert set(names) <= rows
                assert {sources.family_of(n) for n in names} == {"rows"}


# The two largest sources with every dtype instantiated take 40 s each: make test-long
# (make test compiles them once per dtype, in the fixture above).
@pytest.mark.parametrize("name", [pytest.param(sources.KERNEL_SOURCE, marks=pytest.mark.long),
                                  pytest.param(sources.ROWS_SOURCE, marks=pytest.mark.long),
                                  sources.DEVICE_HEADER, sources.HIST_HEADER,
                                  "cuda/bincount_det.cuh", "cuda/bincount_det_count.cuh", "cuda/bincount_det_bucket.cuh",
                                  "cuda/bincount_det_defs.h", "cuda/scatter_add_det.cuh", "cuda/det_sort.cuh",
                                  "cuda/scatter_add_det_bucket.cuh", "cuda/scatter_add_det_defs.h",
                                  sources.SET_SOURCE, sources.CHECK_SOURCE])
def test_each_cuda_file_compiles_on_its_own(nvrtc_lib, name):
    """Each CUDA file, the device header included, is valid CUDA by itself
    (with every dtype instantiated: no -DBC_X_DTYPE)."""
    _, log = nvrtc_lib.compile(
        _c_code.read_source(name), name, ["-arch=sm_90", "-std=c++17"], _headers(), kind="ptx"
    )
    assert not re.search(r"warning|error", log, re.IGNORECASE), log


@pytest.mark.parametrize("family", sorted(sources.FAMILIES))
def test_no_local_memory_spills(nvrtc_lib, family):
    """The hot kernels keep their arrays in registers (ptxas reports spills)."""
    source = sources.FAMILIES[family]
    options = ["-arch=sm_90", "--ptxas-options=-v", *sources.module_options("int32")]
    _, log = nvrtc_lib.compile(_c_code.read_source(source), source, options, _headers())
    spills = re.findall(r"(\d+) bytes spill stores", log)
    assert spills, log
    assert all(s == "0" for s in spills), log


def test_no_flushing_float_atomics_on_global_memory(nvrtc_lib):
    """atom/red.global.add.f32 flush float32 subnormals to zero: no kernel uses
    them.  The histogram's float32 weights go to global memory as float64
    (native double atomics, which keep subnormals) and shared memory keeps its
    float atomics (they keep them too); the rows' float32 adds are
    compare-and-swap loops, or native double atomics into the float64 scratch."""
    for family, kernel in (("hist", "bincount_hist_i32_f32"), ("rows", "scatter_rows_add_i32_f32")):
        source = _c_code.read_source(sources.FAMILIES[family])
        for arch in ("compute_75", "compute_90"):
            options = [f"-arch={arch}", *sources.module_options("int32")]
            ptx, _ = nvrtc_lib.compile(source, "k.cu", options, _headers(), kind="ptx")
            text = ptx.decode(errors="replace")
            assert kernel in text
            assert not re.search(r"\b(atom|red)\.global\.add\.f32\b", text), (family, arch)
            if family == "hist":
                assert re.search(r"\b(atom|red)\.shared\.add\.f32\b", text), arch
                assert re.search(r"\b(atom|red)\.global\.add\.f64\b", text), arch
            else:
                assert re.search(r"\batom\.global\.cas\.b32\b", text), arch
                wide = text[text.index(".entry scatter_rows_wide_i32_f32"):]
                wide = wide[: wide.index("\n}\n")]
                assert re.search(r"\b(atom|red)\.global\.add\.f64\b", wide), arch
                assert not re.search(r"\batom\.global\.cas\b", wide), arch


def _entries(ptx: str):
    """{kernel name: its PTX body}."""
    return {
        m.group(1): m.group(2)
        for m in re.finditer(r"\.entry (\w+)\((.*?)\n}\n", ptx, re.DOTALL)
    }


def test_shared_memory_atomics_are_native_or_aggregated(nvrtc_lib):
    """Shared-memory float and 64-bit atomics are compare-and-swap spins in
    SASS (ATOMS.CAST.SPIN): 64-bit integer bins take two native 32-bit adds,
    float and double bins sum equal bins of the warp first (match.any); bins
    with native atomics (32-bit integers) are not aggregated."""
    source = _c_code.read_source(sources.KERNEL_SOURCE)
    options = ["-arch=compute_90", *sources.module_options("int32")]
    ptx, _ = nvrtc_lib.compile(source, "k.cu", options, _headers(), kind="ptx")
    entries = _entries(ptx.decode(errors="replace"))
    for inc in ("i64", "u64"):
        body = entries[f"bincount_hist_i32_{inc}"]
        assert "atom.shared.add.u32" in body and "atom.shared.add.u64" not in body, inc
        assert "match.any" not in body, inc
    for inc in ("f32", "f64"):
        body = entries[f"bincount_hist_i32_{inc}"]
        assert re.search(r"\bmatch\.any\.sync\.b32\b", body), inc
        assert f"atom.shared.add.{inc}" in body, inc
    for inc in ("c32", "c64", "i32"):
        body = entries[f"bincount_hist_i32_{inc}"]
        assert "atom.shared.add.u32" in body and "match.any" not in body, inc


def test_compile_error_raises_with_the_log(nvrtc_lib):
    with pytest.raises(nvrtc.NvrtcError, match="undefined"):
        nvrtc_lib.compile("__global__ void k() { undefined_thing(); }", "bad.cu", ["-arch=sm_90"])


def test_nvrtc_headers_are_needed_and_used(nvrtc_lib):
    """The kernels include their headers only through the headers argument."""
    for name in sources.FAMILIES.values():
        source = _c_code.read_source(name)
        with pytest.raises(nvrtc.NvrtcError):
            nvrtc_lib.compile(source, "k.cu", ["-arch=sm_90", "-std=c++17", "-DBC_X_DTYPE=2"])


def test_target_falls_back_to_ptx_for_a_newer_gpu(nvrtc_lib):
    newest = max(nvrtc_lib.supported_archs())
    assert nvrtc_lib.target(90) == ("sm_90", "cubin")
    arch, kind = nvrtc_lib.target(newest + 1)
    assert (arch, kind) == (f"compute_{newest}", "ptx")
    with pytest.raises(nvrtc.NvrtcError, match="cannot compile"):
        nvrtc_lib.target(10)


def test_cache_on_disk_is_used_and_written_atomically(nvrtc_lib, tmp_path, monkeypatch):
    monkeypatch.setenv("AESARA_BINCOUNT_CACHE", str(tmp_path))
    source = "extern \"C\" __global__ void k(int *p) { p[0] = %d; }"
    calls = []
    real = nvrtc_lib.compile
    monkeypatch.setattr(nvrtc_lib, "compile", lambda *a, **k: calls.append(a) or real(*a, **k))
    first = nvrtc.compile_cached(source % 1, "k.cu", 80, nvrtc=nvrtc_lib)
    files = sorted(os.listdir(tmp_path))
    assert len(calls) == 1 and [f for f in files if f.endswith(".cubin")]
    assert not [f for f in files if f.startswith(".tmp")]
    # A new process (empty memory cache) reads the file instead of compiling.
    monkeypatch.setattr(nvrtc, "_memory", {})
    again = nvrtc.compile_cached(source % 1, "k.cu", 80, nvrtc=nvrtc_lib)
    assert len(calls) == 1 and again.data == first.data
    # Another source, option or architecture is another image.
    nvrtc.compile_cached(source % 2, "k.cu", 80, nvrtc=nvrtc_lib)
    nvrtc.compile_cached(source % 1, "k.cu", 90, nvrtc=nvrtc_lib)
    nvrtc.compile_cached(source % 1, "k.cu", 80, options=["-DX=1"], nvrtc=nvrtc_lib)
    assert len(calls) == 4


def test_unwritable_cache_still_compiles(nvrtc_lib, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("AESARA_BINCOUNT_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(nvrtc, "_memory", {})
    image = nvrtc.compile_cached('extern "C" __global__ void k() {}', "k.cu", 80, nvrtc=nvrtc_lib)
    assert image.data[:4] == b"\x7fELF"


def test_candidates_order(monkeypatch, tmp_path):
    lib = tmp_path / "libnvrtc.so.12"
    lib.write_bytes(b"")
    monkeypatch.setenv("AESARA_BINCOUNT_NVRTC", str(lib))
    found = nvrtc.candidates()
    assert found[0] == str(lib)
    assert found.index("libnvrtc.so.12") < found.index("libnvrtc.so.13") < found.index("libnvrtc.so")
    wheel = [c for c in found if "cuda_nvrtc" in c]
    if wheel:
        assert found.index(wheel[0]) < found.index("libnvrtc.so.12")


def test_load_skips_nvrtc_newer_than_the_driver(monkeypatch):
    class FakeNvrtc:
        def __init__(self, path):
            if path == "missing":
                raise OSError("no such library")
            self.path = path
            self.version = (int(path[-2:]), 0)

    monkeypatch.setattr(nvrtc, "Nvrtc", FakeNvrtc)
    monkeypatch.setattr(nvrtc, "candidates", lambda: ["missing", "libnvrtc.so.13", "libnvrtc.so.12"])
    for driver, expected in [(None, 13), (13000, 13), (12080, 12)]:
        monkeypatch.setattr(nvrtc, "_loaded", {})
        assert nvrtc.load(driver).version[0] == expected, driver
    # Only NVRTCs newer than the driver: none is usable, and the error says why.
    monkeypatch.setattr(nvrtc, "_loaded", {})
    with pytest.raises(nvrtc.NvrtcError, match=r"newer than the CUDA driver \(CUDA 11\.8\)"):
        nvrtc.load(11080)


def test_load_error_names_what_to_install(monkeypatch):
    monkeypatch.setattr(nvrtc, "_loaded", {})
    monkeypatch.setattr(nvrtc, "candidates", lambda: ["/nonexistent/libnvrtc.so.12"])
    with pytest.raises(nvrtc.NvrtcError, match="nvidia-cuda-nvrtc-cu12"):
        nvrtc.load()


def test_builtins_library_is_loaded_with_nvrtc(nvrtc_lib):
    # NVRTC finds libnvrtc-builtins through its own RUNPATH, which a dlopen
    # under AddressSanitizer (make sanitize) loses; loading NVRTC loads it too.
    if not os.path.dirname(nvrtc_lib.path):
        pytest.skip("NVRTC was loaded by name, from the loader's own path")
    out = run_python(
        "from aesara_bincount_core.cuda import nvrtc; nvrtc.load(); "
        "print(any('libnvrtc-builtins' in line for line in open('/proc/self/maps')))",
        timeout=120,
    )
    assert out.stdout.strip().endswith("True"), out.stdout + out.stderr


def _generated_nodes():
    """GpuElemwise and GpuFusedBincount nodes whose generated kernels take the
    vector paths: (name, node)."""
    import aesara.scalar as aes
    import aesara.tensor as at
    import numpy as np

    from aesara_bincount_core.gpu.elemwise import GpuElemwise
    from aesara_bincount_core.gpu.fused import GpuFusedBincount
    from aesara_bincount_core.gpu.type import GpuArrayType

    def comp(dtypes, fn):
        vs = [aes.get_scalar_type(d)() for d in dtypes]
        return aes.Composite(vs, [fn(*vs)])

    def gpu(*dtypes):
        return [GpuArrayType(d, (None,))() for d in dtypes]

    many = [aes.float64() for _ in range(12)]
    wide = many[0]
    for v in many[1:]:
        wide = aes.add(aes.mul(wide, v), aes.sin(v))
    nodes = [
        ("add f64", GpuElemwise(aes.add).make_node(*gpu("float64", "float64"))),
        ("seed f32", GpuElemwise(comp(["float32", "float32"], lambda v, t: aes.exp(-t * v)))
         .make_node(*gpu("float32", "float32"))),
        ("int8 by f64", GpuElemwise(comp(["int8", "float64"], lambda a, b: aes.cast(a, "float64") * b))
         .make_node(*gpu("int8", "float64"))),
        ("12 f64 with sin", GpuElemwise(aes.Composite(many, [wide])).make_node(*gpu(*["float64"] * 12))),
    ]
    n = at.as_tensor_variable(np.int64(10))
    w64 = comp(["float64", "float64"], lambda v, t: aes.exp(-t * v))
    x64 = comp(["int64"], lambda a: aes.floor_divide(a, aes.constant(np.int64(3))))
    for det in ("default", "more"):
        op = GpuFusedBincount("bincount", "float64", None, w64, deterministic=det)
        nodes.append((f"seed {det}", op.make_node(*gpu("int64"), n, *gpu("float64"), at.dscalar())))
        op = GpuFusedBincount("bincount", "float64", x64, w64, deterministic=det)
        nodes.append((f"x and weights {det}", op.make_node(*gpu("int64"), n, *gpu("float64"), at.dscalar())))
    # (a signed x: Aesara's code for // of unsigned integers compares them with 0, a warning)
    x16 = comp(["int16"], lambda a: aes.floor_divide(a, aes.constant(np.int16(2))))
    nodes.append(("int16 x", GpuFusedBincount("bincount", "int64", x16).make_node(*gpu("int16"), n)))
    return nodes


def test_generated_kernels_take_no_spills(nvrtc_lib):
    """The generated kernels (GpuElemwise's, GpuFusedBincount's) with their
    vector paths compile for sm_90 without a warning and keep their vectors
    in registers (a node with many wide arrays takes narrower vectors)."""
    pytest.importorskip("aesara")
    from aesara_bincount_core.gpu import elemwise, fused

    for name, node in _generated_nodes():
        files = elemwise.KERNEL_FILES if isinstance(node.op, elemwise.GpuElemwise) else fused.KERNEL_FILES
        options = elemwise._NVRTC_OPTIONS if files is elemwise.KERNEL_FILES else fused._NVRTC_OPTIONS
        kernel, source = node.op.kernel_source(node)
        headers = {f: _c_code.read_source(f) for f in files}
        _, log = nvrtc_lib.compile(source, kernel + ".cu", ["-arch=sm_90", "--ptxas-options=-v", *options], headers)
        assert not re.search(r"warning|error", log, re.IGNORECASE), (name, log)
        spills = re.findall(r"(\d+) bytes spill stores", log)
        assert spills and all(s == "0" for s in spills), (name, log)
    widths = {name: elemwise.GpuElemwise.vector_width(node) for name, node in _generated_nodes()[:4]}
    assert widths == {"add f64": 4, "seed f32": 4, "int8 by f64": 4, "12 f64 with sin": 2}
