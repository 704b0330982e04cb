"""The thread model of the CPU emulation of CUDA (tests/gpu_emu/cuda_emu.h).

The GPU suite trusts the emulation to run kernels as a device would and to
stop on what a device leaves undefined.  These cases build
``tests/gpu_emu/emu_selftest.cc`` once (g++, C++20) and run it: barriers,
shuffles and votes give the device's sums; blocks run on more than one OS
thread (so they race on global memory); a read that misses a barrier sees
the garbage fill; a barrier or warp intrinsic that not every thread reaches
aborts at once, naming the deadlock, instead of hanging; the warp helpers of
``c_code/cuda/device_helpers.cuh`` (equal keys summed with
``__match_any_sync``, 64-bit shared adds with carry) give exact sums.
"""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_emu import build as emu  # noqa: E402


@pytest.fixture(scope="module")
def selftest(tmp_path_factory):
    problem = emu.cxx20_problem()
    if problem:
        pytest.skip(problem)
    exe = str(tmp_path_factory.mktemp("emu") / "emu_selftest")
    cmd = [emu.compiler(), "-std=c++20", "-O1", "-pthread", "-Wall", "-Wextra", "-Werror",
           "-Wno-unknown-pragmas", f"-I{emu.HERE}", f"-I{emu.C_CODE}", "-o", exe, os.path.join(emu.HERE, "emu_selftest.cc")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe


def _run(exe, case):
    return subprocess.run([exe, case], capture_output=True, text=True, timeout=120)


def test_barriers_shuffles_and_votes_give_the_device_results(selftest):
    proc = _run(selftest, "sums")
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_equal_keys_of_a_warp_are_summed_once_and_64_bit_shared_adds_carry(selftest):
    proc = _run(selftest, "peers")
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr


def test_blocks_run_on_several_os_threads(selftest):
    proc = _run(selftest, "runners")
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) >= 2


def test_blocks_start_in_order_or_in_a_random_order_per_launch(selftest):
    """FAKE_CUDA_BLOCK_ORDER=random: each launch claims its blocks in an order
    of its own (what tests/gpu/test_cuda_deterministic.py relies on to show the
    default mode's drift); otherwise in increasing order."""
    def orders(**env):
        proc = subprocess.run([selftest, "order"], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, FAKE_CUDA_RUNNERS="1", **env))
        assert proc.returncode == 0, proc.stderr
        return [[int(b) for b in line.split()] for line in proc.stdout.splitlines()]

    assert orders() == [list(range(16))] * 2
    first, second = orders(FAKE_CUDA_BLOCK_ORDER="random")
    assert sorted(first) == sorted(second) == list(range(16))
    assert first != second and list(range(16)) not in (first, second)


def test_a_read_that_misses_a_barrier_sees_garbage_whichever_way_the_turn_goes(selftest):
    proc = _run(selftest, "missed")
    assert proc.returncode == 0, proc.stderr
    counts = [int(line) for line in proc.stdout.split()]
    # 3 blocks of 512 threads: half the reads in each launch come before the neighbour's write.
    assert counts == [3 * 256, 3 * 256], counts


@pytest.mark.parametrize("case, message", [
    ("exit_early", "cuda_emu: deadlock"),
    ("half_warp", "cuda_emu: deadlock"),
    ("partial_mask", "cuda_emu: warp intrinsic with a partial mask"),
])
def test_undefined_synchronisation_aborts_with_its_cause(selftest, case, message):
    proc = _run(selftest, case)
    assert proc.returncode != 0 and message in proc.stderr, (proc.returncode, proc.stderr)
