"""``make gpu-strict``: each kernel family under the emulation's race check and its asynchronous mode.

The normal emulation (``tests/gpu_emu``) runs each CUDA thread to its next
barrier and each launch and copy inside the call that queues it, so a lost
update inside a block, a missing ``__syncwarp`` and a host that reads before
it waits all give the right answer there.  Its two strict modes show them:

- **race** (``FAKE_CUDA_RACECHECK=1``, ``tests/gpu_emu/emu_race.h``): the
  fake libcuda and the generated kernels are built with GCC's
  ThreadSanitizer instrumentation, and every access to shared and global
  memory is checked against the others of its block's barrier interval;
  any report fails the case;
- **async** (``FAKE_CUDA_ASYNC=1``, ``tests/gpu_emu/emu_stream.h``):
  launches and ``*Async`` copies wait on a stream thread until a host thread
  waits, so a read of page-locked memory before the wait sees old bytes;
  page-locked bytes lent to two threads' copies at once are reported.

Each mode runs the cases of ``tests/gpu/strict_cases.py`` (through
``aesara.function``, two rounds of data each, against NumPy) in a process of
its own; the exit status is the number of failed cases.  ``make test`` runs
it (``tests/test_gpu_strict.py``).  Usage, from the repository root::

    .venv/bin/python tests/gpu_strict.py [--modes race,async] [--cases hist,rows]
    .venv/bin/python tests/gpu_strict.py --plant lost-update

``--plant NAME`` copies the checkout, plants one of :data:`PLANTS` in the
copy, and runs its cases there in the mode that must catch it and in the
normal mode (``plain``): it exits 0 when the strict mode fails and the
normal mode passes, as each fault's note in :data:`PLANTS` expects.
"""
import argparse
import ctypes
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gpu_emu import build as emu  # noqa: E402

ROOT = emu.ROOT
#: The modes: their environment variables.
MODES = {"race": {"FAKE_CUDA_RACECHECK": "1"}, "async": {"FAKE_CUDA_ASYNC": "1"}, "plain": {}}
#: Faults to plant in a copy: (file, text, replacement, the mode that catches it, what it is).
PLANTS = {
    "lost-update": (
        "c_code/cuda/device_helpers.cuh",
        "static __device__ __forceinline__ void add(T *p, T v, unsigned) { atomicAdd(p, v); }",
        "static __device__ __forceinline__ void add(T *p, T v, unsigned) { *p += v; }",
        "race", "shared_adder<T>::add a plain read-modify-write (lanes of a warp lose updates on a GPU)",
    ),
    "lost-update-u64": (
        "c_code/cuda/device_helpers.cuh",
        "const unsigned int old = atomicAdd(word, lo);",
        "const unsigned int old = *word;\n        *word = old + lo;",
        "race", "shared_adder<bc_u64>::add's low word a plain read-modify-write",
    ),
    "lost-update-float": (
        "c_code/cuda/device_helpers.cuh",
        "        if ((peers & ((1u << (threadIdx.x & 31u)) - 1u)) == 0u)\n            atomicAdd(p, v);",
        "        if ((peers & ((1u << (threadIdx.x & 31u)) - 1u)) == 0u)\n            *p += v;",
        "race", "shared_float_adder's add of the peers' sum a plain read-modify-write",
    ),
    "lost-update-det-count": (
        "c_code/cuda/bincount_det_count.cuh",
        "atomicAdd(count + key * step, (bc_u32)__popc(peers));",
        "count[key * step] += (bc_u32)__popc(peers);",
        "race", "the bucket count's per-window counters a plain read-modify-write (the review's plant)",
    ),
    "missing-syncwarp": (
        "c_code/cuda/bincount_det_bucket.cuh",
        "            __syncwarp(FULL_WARP); /* before other lanes use these words in the next round */\n",
        "",
        "race", "the bucket scatter's per-warp counters cleared, then read by other lanes, no __syncwarp",
    ),
    "missing-syncwarp-det-add": (
        "c_code/cuda/bincount_det.cuh",
        "        mine[key] += sum;\n    __syncwarp(FULL_WARP);",
        "        mine[key] += sum;",
        "race", "det_add_group without the __syncwarp that orders one group's add before the next's",
    ),
    "missing-wait": (
        "c_code/cuda_host/driver.h",
        'rc = bc_cuda_check(api, api->StreamSynchronize(stream), "cuStreamSynchronize",\n'
        "                           queued != 0 ? &later : err);",
        "rc = 0;",
        "async", "bc_cuda_copy_wait returns without cuStreamSynchronize",
    ),
    "staging-reuse": (
        "c_code/cuda_host/driver.h",
        "const int slot = slots != NULL ? bc_cuda_slot_take() : -1;",
        "const int slot = slots != NULL ? 0 : -1;",
        "async", "every status read-back lands in page-locked slot 0, taken by no call: two calls at once "
        "reuse it while its copy is in flight",
    ),
}


def cases() -> dict:
    """``strict_cases.CASES``: ``{name: (function(check), modes)}``."""
    sys.path.insert(0, os.path.join(HERE, "gpu"))
    import strict_cases

    return strict_cases.CASES


def _driver():
    return ctypes.CDLL(os.environ["AESARA_BINCOUNT_LIBCUDA"])


def _reports(mode: str) -> int:
    lib = _driver()
    if mode == "race":
        lib.fake_cuda_race_reports.restype = ctypes.c_longlong
        return lib.fake_cuda_race_reports()
    if mode == "async":
        lib.fake_cuda_async_reports.restype = ctypes.c_longlong
        return lib.fake_cuda_async_reports()
    return 0


def check(got, want, exact=False, scale=None):
    """``got`` (a GPU or host array) against NumPy's ``want``: dtype, shape and
    values (floats to 1e-5 of ``scale``, the sum of the magnitudes added, for
    atomics add in another order)."""
    import numpy as np

    from aesara_bincount_core.gpu.type import host_value

    got, want = host_value(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if exact or want.dtype.kind != "f":
        bad = np.flatnonzero(got != want)
    else:
        tol = 1e-5 * (np.abs(want) if scale is None else np.asarray(scale)) + 1e-30
        bad = np.flatnonzero(~(np.abs(got.astype("float64") - want) <= tol))
    assert bad.size == 0, f"{bad.size} of {want.size} elements differ, first {bad[:4]}: {got.ravel()[bad[:4]]} != {want.ravel()[bad[:4]]}"


def child(mode: str, names) -> int:
    """Run the cases in this process (the emulation's environment is set): the failures."""
    sys.path.insert(0, os.path.join(HERE, "gpu"))
    import strict_cases

    failed = 0
    for name in names:
        fn, modes = strict_cases.CASES[name]
        if mode not in modes and mode != "plain":
            continue
        before, start = _reports(mode), time.process_time()
        try:
            fn(check)
            problem = None
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            lines = str(exc).strip().splitlines() or [""]
            problem = f"{type(exc).__name__}: {lines[0][:300]}"
        found = _reports(mode) - before
        if found:
            problem = f"{found} {mode} report(s) (above){'; ' + problem if problem else ''}"
        sticky = _driver().fake_cuda_sticky(1)
        if sticky:
            problem = f"sticky CUDA error {sticky}{'; ' + problem if problem else ''}"
        failed += problem is not None
        print(f"gpu-strict {mode} {name}: {'FAIL: ' + problem if problem else 'ok'} "
              f"({time.process_time() - start:.1f} s)", flush=True)
    return failed


def run_mode(mode: str, names, root: str = ROOT, timeout: int = 1200) -> int:
    """Run the cases in a process of their own under ``mode`` (in the checkout
    ``root``); prints what it prints, returns its exit status."""
    env = dict(os.environ, **MODES[mode])
    for var in ("FAKE_CUDA_RACECHECK", "FAKE_CUDA_ASYNC"):
        if var not in MODES[mode]:
            env.pop(var, None)
    build = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, 'tests'); from gpu_emu import build; "
         "print(build.build())"], cwd=root, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if build.returncode != 0:
        print(f"gpu-strict {mode}: building the fake libcuda failed\n{build.stderr[-3000:]}", flush=True)
        return 1
    env = emu.environment(build.stdout.strip())
    env.update(MODES[mode])
    env.setdefault("FAKE_CUDA_RUNNERS", "1")
    env["PYTHONPATH"] = os.pathsep.join([root, env["PYTHONPATH"]])
    proc = subprocess.run([sys.executable, os.path.join(root, "tests", "gpu_strict.py"), "--child", mode,
                           "--cases", ",".join(names)], cwd=root, env=env, timeout=timeout)  # fmt: skip
    if proc.returncode < 0:
        print(f"gpu-strict {mode}: FAIL: the process died of signal {-proc.returncode} in the case "
              "after the last one above", flush=True)
        return 1
    return proc.returncode


def plant(name: str, names) -> int:
    """Plant fault ``name`` in a copy of the checkout; 0 when its mode fails and ``plain`` passes."""
    path, text, replacement, mode, what = PLANTS[name]
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split("\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix=f"gpu-strict-{name}-") as tmp:
        for rel in filter(None, files):
            if os.path.isfile(os.path.join(ROOT, rel)):
                os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
                shutil.copy2(os.path.join(ROOT, rel), os.path.join(tmp, rel))
        with open(os.path.join(tmp, path)) as f:
            source = f.read()
        assert source.count(text) == 1, f"{name}: the text to replace is not once in {path}"
        with open(os.path.join(tmp, path), "w") as f:
            f.write(source.replace(text, replacement))
        # The fake libcuda is built from the copy's sources, into the copy: a library of the
        # checkout with the same hash (the fault is on the host side) serves it as it is.
        os.makedirs(os.path.join(tmp, ".cache", "tests"))
        for lib in glob.glob(os.path.join(emu.BUILD_DIR, "libfakecuda-*.so")):
            shutil.copy2(lib, os.path.join(tmp, ".cache", "tests"))
        # The NVRTC kernel cache is keyed by source: the checkout's serves the copy too.
        os.environ.setdefault("AESARA_BINCOUNT_CACHE", os.path.join(emu.BUILD_DIR, "kernels"))
        print(f"gpu-strict --plant {name} ({what}), in {mode} mode, then the normal mode:", flush=True)
        strict, plain = run_mode(mode, names, tmp), run_mode("plain", names, tmp)
    ok = strict != 0 and plain == 0
    print(f"gpu-strict --plant {name}: {mode} mode {'failed' if strict else 'PASSED'}, normal mode "
          f"{'passed' if plain == 0 else 'FAILED'}: {'as expected' if ok else 'NOT AS EXPECTED'}", flush=True)
    return 0 if ok else 1


def main(argv=None) -> int:
    sys.path.insert(0, os.path.join(HERE, "gpu"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", default="race,async")
    parser.add_argument("--cases", default="")
    parser.add_argument("--plant", choices=sorted(PLANTS))
    parser.add_argument("--child", choices=sorted(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.cases.split(","))
    import strict_cases

    names = [n for n in args.cases.split(",") if n] or list(strict_cases.CASES)
    unknown = [n for n in names if n not in strict_cases.CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; the cases: {', '.join(strict_cases.CASES)}")
    if args.plant:
        return plant(args.plant, names)
    failed = 0
    for mode in args.modes.split(","):
        failed += run_mode(mode, names)
    print(f"gpu-strict: {'every case passed' if failed == 0 else f'{failed} case(s) failed'} "
          f"({args.modes})", flush=True)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
