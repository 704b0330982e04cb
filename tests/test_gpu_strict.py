"""The emulation's strict modes (race check, asynchronous streams) and ``make gpu-strict``.

- The race check's mechanism, on the small kernels of
  ``tests/gpu_emu/emu_race_selftest.cc`` built both ways: a plain
  read-modify-write of one shared word by every lane, a read of another
  lane's write with only a shuffle between, a read of another warp's write
  with only ``__syncwarp``, a global-memory read of another thread's write
  are reported; their synchronized forms, atomics, compare-and-swap guesses,
  same-value writes and blocks that meet through atomics are not; and the
  normal build gives the same sums with no report at all.
- The asynchronous mode's mechanism, on the fake driver through ctypes: a
  read of page-locked memory before the wait sees the old bytes (the normal
  mode's copy is done at once), two host threads' copies into the same
  page-locked bytes and a free under a copy are reported.
- ``tests/gpu_strict.py``: every case passes under both modes
  (what ``make gpu-strict`` runs), and, marked ``long``, each planted fault of
  ``gpu_strict.PLANTS`` fails its mode and passes the normal one.
"""
import os
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu_strict  # noqa: E402
from gpu_emu import build as emu  # noqa: E402

SELFTEST = os.path.join(emu.HERE, "emu_race_selftest.cc")
#: case: (what the kernel's sum must be, whether the race build reports a race)
RACE_CASES = {
    "lost_update": (64, True),
    "atomic_add": (64, False),
    "missed_warp": (7, True),
    "synced_warp": (7, False),
    "missed_block": (7, True),
    "synced_block": (7, False),
    "global_raw": (0, True),
    "cas_guess": (64, False),
    "shared_atomic_read": (64, True),
    "same_write": (7, False),
    "racing_write": (None, True),
    "blocks": (4, False),
}


@pytest.fixture(scope="module")
def selftests(tmp_path_factory):
    """The self-test built plain and with the race check (compiled with the
    instrumentation, linked without libtsan, as build.py builds the library)."""
    problem = emu.cxx20_problem()
    if problem:
        pytest.skip(problem)
    out = tmp_path_factory.mktemp("race")
    common = [emu.compiler(), "-std=c++20", "-O1", "-pthread", "-Wall", "-Wextra", "-Werror",
              "-Wno-unknown-pragmas", f"-I{emu.HERE}", f"-I{emu.C_CODE}"]  # fmt: skip
    plain, race = str(out / "plain"), str(out / "race")
    steps = [common + ["-o", plain, SELFTEST], common + [*emu.RACE_FLAGS, "-c", "-o", race + ".o", SELFTEST],
             [emu.compiler(), "-pthread", "-o", race, race + ".o", "-ldl"]]  # fmt: skip
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    return {"plain": plain, "race": race}


@pytest.mark.parametrize("case", sorted(RACE_CASES))
def test_race_check_reports_unordered_accesses_and_nothing_else(selftests, case):
    total, racy = RACE_CASES[case]
    runs = {b: subprocess.run([exe, case], capture_output=True, text=True, timeout=120) for b, exe in selftests.items()}
    for build, proc in runs.items():
        assert proc.returncode == 0, (build, proc.stderr)
    sums = {b: int(p.stdout.split()[1]) for b, p in runs.items()}
    assert total is None or sums == {"plain": total, "race": total}, sums
    assert "racecheck" not in runs["plain"].stderr and "races" not in runs["plain"].stdout
    races = int(runs["race"].stdout.split("races")[1])
    report = runs["race"].stderr
    assert (races > 0) == racy, (races, report)
    if racy:  # both locations named, by file and line
        assert "cuda_emu racecheck: " in report and "with no __syncthreads() or __syncwarp()" in report, report
        assert report.count("emu_race_selftest.cc:") >= 2, report


def test_race_check_of_shared_memory_only(selftests):
    """FAKE_CUDA_RACECHECK=shared: the global-memory race goes unchecked, the shared one not."""
    env = dict(os.environ, FAKE_CUDA_RACECHECK="shared")
    for case, racy in (("global_raw", False), ("missed_warp", True)):
        proc = subprocess.run([selftests["race"], case], capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        assert (int(proc.stdout.split("races")[1]) > 0) == racy, (case, proc.stdout, proc.stderr)


ASYNC_PROBE = textwrap.dedent("""
    import ctypes, os, threading
    import numpy as np
    lib = ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])
    lib.fake_cuda_async_reports.restype = ctypes.c_longlong
    assert lib.cuInit(0) == 0
    dev = np.full(256, 7, dtype=np.uint32)  # "device" memory: host memory here
    src = ctypes.c_ulonglong(dev.ctypes.data)
    pinned = ctypes.c_void_p()
    assert lib.cuMemHostAlloc(ctypes.byref(pinned), ctypes.c_size_t(1024), 0) == 0
    host = np.ctypeslib.as_array(ctypes.cast(pinned, ctypes.POINTER(ctypes.c_uint32)), (256,))
    assert lib.cuMemsetD32Async(src, 9, ctypes.c_size_t(256), None) == 0
    assert lib.cuMemcpyDtoHAsync_v2(pinned, src, ctypes.c_size_t(1024), None) == 0
    before = int(host[0])
    assert lib.cuStreamSynchronize(None) == 0
    print("before", hex(before), "after", int(host[0]))
    # Two live host threads' copies into the same page-locked bytes, then a free under a copy.
    queued, done = threading.Semaphore(0), threading.Event()
    def copy():
        lib.cuMemcpyDtoHAsync_v2(pinned, src, ctypes.c_size_t(1024), None)
        queued.release()
        done.wait()
    threads = [threading.Thread(target=copy) for _ in range(2)]
    for t in threads:
        t.start(); queued.acquire()
    done.set()
    for t in threads:
        t.join()
    assert lib.cuMemFreeHost(pinned) == 0
    assert lib.cuStreamSynchronize(None) == 0
    print("reports", lib.fake_cuda_async_reports())
""")


@pytest.mark.parametrize("mode", ["plain", "async"])
def test_async_mode_runs_queued_work_only_at_the_wait(mode, tmp_path):
    problem = emu.cxx20_problem()
    if problem:
        pytest.skip(problem)
    env = emu.environment(emu.build(race=False))
    env.pop("FAKE_CUDA_ASYNC", None)
    env.update(gpu_strict.MODES[mode])
    proc = subprocess.run([sys.executable, "-c", ASYNC_PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    words = proc.stdout.split()
    before, after, reports = words[1], int(words[3]), int(words[5])
    assert after == 9
    if mode == "async":  # the fill of cuMemHostAlloc, the copy not yet run
        assert before == "0xa5a5a5a5" and reports == 2, proc.stdout + proc.stderr
        assert "another host thread, is in flight" in proc.stderr and "freed while a copy" in proc.stderr
    else:
        assert before == "0x9" and reports == 0, proc.stdout + proc.stderr


def test_a_plain_library_refuses_the_race_check():
    """FAKE_CUDA_RACECHECK with a library built without it: cuInit fails, saying why."""
    env = emu.environment(emu.build(race=False))
    env["FAKE_CUDA_RACECHECK"] = "1"
    code = ("import ctypes, os; lib = ctypes.CDLL(os.environ['AESARA_BINCOUNT_LIBCUDA']); "
            "lib.fake_cuda_race_reports.restype = ctypes.c_longlong; "
            "print(lib.cuInit(0), lib.fake_cuda_race_reports())")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["1", "-1"], proc.stdout + proc.stderr
    assert "built without the race check" in proc.stderr


def _strict(*args, timeout=1800):
    return subprocess.run([sys.executable, os.path.join(emu.ROOT, "tests", "gpu_strict.py"), *args],
                          cwd=emu.ROOT, capture_output=True, text=True, timeout=timeout)  # fmt: skip


@pytest.mark.slow
def test_every_case_passes_both_strict_modes():
    """What ``make gpu-strict`` runs: each kernel family under the race check
    and the asynchronous mode, through aesara.function, with no report."""
    if emu.cxx20_problem():
        pytest.skip(emu.cxx20_problem())
    proc = _strict()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    for name, (_, modes) in gpu_strict.cases().items():
        for mode in modes:
            assert f"gpu-strict {mode} {name}: ok" in out, (mode, name, out[-4000:])
    assert "racecheck" not in out and "fake libcuda (async)" not in out, out[-4000:]


@pytest.mark.long
@pytest.mark.parametrize("fault", sorted(gpu_strict.PLANTS))
def test_each_planted_fault_fails_its_strict_mode_and_passes_the_normal_one(fault):
    """``gpu_strict.py --plant``: the fault in a copy of the checkout; its mode
    must report it or give a wrong result, the normal emulation must not see it."""
    proc = _strict("--plant", fault, timeout=3000)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "as expected" in out, out[-8000:]
