"""Build the fake ``libcuda`` of tests/gpu_emu (g++, C++20), cached by source hash."""
import hashlib
import os
import shutil
import subprocess
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
C_CODE = os.path.join(ROOT, "c_code")
SOURCES = [
    os.path.join(HERE, "cuda_emu.h"),
    os.path.join(HERE, "emu_race.h"),
    os.path.join(HERE, "emu_stream.h"),
    os.path.join(HERE, "fake_libcuda.cc"),
    os.path.join(C_CODE, "cuda/kernel_defs.h"),
    os.path.join(C_CODE, "cuda/device_helpers.cuh"),
    os.path.join(C_CODE, "cuda/bincount_hist.cuh"),
    os.path.join(C_CODE, "cuda/bincount_det_defs.h"),
    os.path.join(C_CODE, "cuda/bincount_det.cuh"),
    os.path.join(C_CODE, "cuda/bincount_det_count.cuh"),
    os.path.join(C_CODE, "cuda/bincount_det_bucket.cuh"),
    os.path.join(C_CODE, "cuda/scatter_add_det.cuh"),
    os.path.join(C_CODE, "cuda/scatter_add_det_defs.h"),
    os.path.join(C_CODE, "cuda/scatter_add_det_bucket.cuh"),
    os.path.join(C_CODE, "cuda/det_sort.cuh"),
    os.path.join(C_CODE, "cuda/bincount_kernels.cu"),
    os.path.join(C_CODE, "cuda/scatter_add_kernels.cu"),
    os.path.join(C_CODE, "cuda/scatter_set_kernels.cu"),
    os.path.join(C_CODE, "cuda/call_check_kernels.cu"),
    # generated kernels are built with these when they are first loaded
    os.path.join(HERE, "generated_emu.cc"),
    os.path.join(C_CODE, "cuda/elemwise.cuh"),
    os.path.join(C_CODE, "cuda/elemwise_kernel.cu"),
    os.path.join(C_CODE, "cuda/scalar_preamble.cuh"),
]
#: Where test builds and caches go (git-ignored).
BUILD_DIR = os.path.join(ROOT, ".cache", "tests")
FAKECUPY = os.path.join(HERE, "fakecupy")


def compiler():
    """The C++ compiler, or None."""
    return shutil.which(os.environ.get("CXX", "g++"))


def cxx20_problem() -> Optional[str]:
    """Why the C++ compiler cannot build the emulation (None if it can)."""
    cxx = compiler()
    if cxx is None:
        return "no C++ compiler (g++)"
    probe = '#include "cuda_emu.h"\nint main() { return emu::lane() == 0 ? 0 : 1; }\n'
    proc = subprocess.run(
        [cxx, "-std=c++20", "-pthread", f"-I{HERE}", "-x", "c++", "-", "-o", os.devnull],
        input=probe, capture_output=True, text=True,
    )  # fmt: skip
    return None if proc.returncode == 0 else f"{cxx} cannot compile tests/gpu_emu/cuda_emu.h (C++20)"


#: The options of every generated kernel's build (fake_libcuda.cc: load_generated); its
#: precompiled header is built with the same ones, or g++ would not use it.
GENERATED_FLAGS = ("-std=c++20", "-O1", "-fPIC", "-pthread", "-w")
#: The race check's build (emu_race.h), added to the library's and the generated kernels'
#: options: GCC's ThreadSanitizer instrumentation, whose calls emu_race.h answers (the
#: objects are linked without libtsan), and line tables for the reports.
RACE_FLAGS = ("-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0", "--param=tsan-distinguish-volatile=1",
              "-Wno-tsan", "-DBC_EMU_RACECHECK", "-g1")


def race_mode() -> bool:
    """Whether ``FAKE_CUDA_RACECHECK`` asks for the race check (``1``, or ``shared``:
    shared memory only); :func:`build` then builds the instrumented library."""
    return os.environ.get("FAKE_CUDA_RACECHECK", "") not in ("", "0")


def _precompiled_header(cxx: str, out_dir: str, build_id: str, flags=GENERATED_FLAGS) -> str:
    """Path of a copy of cuda_emu.h beside its precompiled ``.gch``, which the
    generated kernels' builds take with ``-include`` (about 1 s less each of the
    2-3 s; the copy is read instead if g++ finds the ``.gch`` unusable)."""
    folder = os.path.join(out_dir, f"pch-{build_id}")
    header = os.path.join(folder, "cuda_emu.h")
    if os.path.exists(header + ".gch"):
        return header
    tmp = f"{folder}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for name in ("cuda_emu.h", "emu_race.h"):
        shutil.copyfile(os.path.join(HERE, name), os.path.join(tmp, name))
    cmd = [cxx, *flags, "-x", "c++-header", os.path.join(tmp, "cuda_emu.h"), "-o",
           os.path.join(tmp, "cuda_emu.h.gch")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"precompiling cuda_emu.h failed:\n{' '.join(cmd)}\n{proc.stderr}")
    try:
        os.rename(tmp, folder)
    except OSError:  # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return header


def build(out_dir: str = BUILD_DIR, race: Optional[bool] = None) -> str:
    """Path of the fake libcuda shared library, building it if needed: with the
    race check (emu_race.h) when ``race`` (default: :func:`race_mode`).

    Raises
    ------
    RuntimeError
        No compiler, or the build failed (the message holds its output).
    """
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++) to build the fake libcuda")
    race = race_mode() if race is None else race
    h = hashlib.sha256(cxx.encode() + (b"race" if race else b""))
    for path in SOURCES:
        with open(path, "rb") as f:
            h.update(f.read())
    os.makedirs(out_dir, exist_ok=True)
    build_id = h.hexdigest()[:16]
    lib = os.path.join(out_dir, f"libfakecuda-{'race-' if race else ''}{build_id}.so")
    if os.path.exists(lib):
        return lib
    generated = (*GENERATED_FLAGS, *(RACE_FLAGS if race else ()))
    pch = _precompiled_header(cxx, out_dir, build_id, generated)
    tmp = f"{lib}.{os.getpid()}.tmp"
    cmd = [
        cxx, "-std=c++20", "-O1", "-fPIC", "-pthread", "-Wall", "-Wextra",
        "-Wno-unknown-pragmas", "-Werror", f"-I{C_CODE}", f"-I{HERE}",
        f'-DBC_EMU_BUILD_ID="{build_id}"', f'-DBC_EMU_CXX="{cxx}"', f'-DBC_EMU_C_CODE="{C_CODE}"',
        f'-DBC_EMU_DIR="{HERE}"', f'-DBC_EMU_PCH="{pch}"',
        f'-DBC_EMU_GENERATED_FLAGS="{" ".join(generated)}"', os.path.join(HERE, "fake_libcuda.cc"),
    ]  # fmt: skip
    # The race build compiles with the instrumentation, then links without libtsan.
    steps = [cmd + ["-shared", "-o", tmp, "-ldl"]] if not race else [
        cmd + [*RACE_FLAGS, "-c", "-o", tmp + ".o"], [cxx, "-shared", "-pthread", "-o", tmp, tmp + ".o", "-ldl"]]
    for step in steps:
        proc = subprocess.run(step, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building the fake libcuda failed:\n{' '.join(step)}\n{proc.stderr}")
    if race:
        os.remove(tmp + ".o")
    os.replace(tmp, lib)
    return lib


def environment(lib: str) -> dict:
    """Environment variables that put the emulated GPU in front of a Python process."""
    env = dict(os.environ)
    env["AESARA_BINCOUNT_LIBCUDA"] = lib
    env["AESARA_BINCOUNT_EMULATED_GPU"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (FAKECUPY, env.get("PYTHONPATH")) if p)
    env.setdefault("AESARA_BINCOUNT_CACHE", os.path.join(BUILD_DIR, "kernels"))
    flags = env.get("AESARA_FLAGS", "")
    if "blas__ldflags" not in flags:
        env["AESARA_FLAGS"] = ",".join(f for f in (flags, "blas__ldflags=") if f)
    return env
