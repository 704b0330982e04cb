"""The kernel disk cache heals: a damaged entry is found out, removed and made again.

Each case damages a copy of a warm cache folder (compiled once per module)
the way a reliability trial did, then runs a fresh process on it, through
the kernel layer and through ``aesara.function``; the process must give the
right result, within a time limit (a FIFO must not hang it, a truncated
library must not kill it with SIGBUS).  ``aesara_bincount_core/cuda/disk_cache.py``
holds the rules.
"""
import glob
import os
import shutil
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gpu_cases import AVAILABLE, WHY  # noqa: E402
from procs import run_python  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not AVAILABLE, reason=f"no GPU: {WHY}")]

KERNEL_LAYER = """
import numpy as np, cupy
from aesara_bincount_core.cuda import kernels
x = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype="int64")
got = cupy.asnumpy(kernels.bincount_cupy(cupy.asarray(x)))
assert got.tolist() == np.bincount(x).tolist(), got
print("ok")
"""

THROUGH_AESARA = """
import numpy as np, aesara
from aesara.tensor.extra_ops import bincount
import aesara_bincount
from aesara_bincount import gpu
x = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype="int64")
f = aesara.function([], bincount(gpu.shared(x)))
assert "GpuBincount" in str(f.maker.fgraph.toposort()), f.maker.fgraph.toposort()
assert np.asarray(f()).tolist() == np.bincount(x).tolist()
print("ok")
"""


def run_on(cache: str, code: str = KERNEL_LAYER, timeout: float = 180):
    out = run_python(code, timeout=timeout, env={"AESARA_BINCOUNT_CACHE": cache})
    assert out.stdout.strip().endswith("ok"), out.stdout + out.stderr
    return out


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A cache folder with the int64 histogram module and the launcher library."""
    folder = str(tmp_path_factory.mktemp("pristine-cache"))
    run_on(folder)
    assert images(folder) and libraries(folder), os.listdir(folder)
    return folder


def images(folder):
    return sorted(glob.glob(os.path.join(folder, "bincount_kernels-*.cubin")))


def libraries(folder):
    return sorted(glob.glob(os.path.join(folder, "libbincount_cuda-*.so")))


@pytest.fixture
def cache(pristine, tmp_path):
    folder = str(tmp_path / "cache")
    shutil.copytree(pristine, folder)
    return folder


def overwrite_same_size(path):
    size = os.path.getsize(path)
    with open(path, "wb") as f:
        f.write(np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes())


@pytest.mark.parametrize("code", [KERNEL_LAYER, THROUGH_AESARA], ids=["kernel-layer", "aesara"])
def test_an_image_overwritten_with_other_bytes_is_compiled_again(cache, code):
    (image,) = images(cache)
    overwrite_same_size(image)
    run_on(cache, code)
    for path in images(cache):
        with open(path, "rb") as f:
            assert f.read(4) == b"\x7fELF", path  # the damaged one is gone


@pytest.mark.parametrize("code", [KERNEL_LAYER, THROUGH_AESARA], ids=["kernel-layer", "aesara"])
def test_a_fifo_in_place_of_an_image_does_not_block(cache, code):
    (image,) = images(cache)
    os.unlink(image)
    os.mkfifo(image)
    run_on(cache, code, timeout=120)
    assert all(os.path.isfile(p) for p in images(cache))


@pytest.mark.parametrize("damage", ["half", "empty", "random", "directory"])
def test_a_damaged_launcher_library_is_rebuilt(cache, damage):
    (lib,) = libraries(cache)
    size = os.path.getsize(lib)
    if damage == "half":
        with open(lib, "r+b") as f:
            f.truncate(size // 2)  # loading it would raise SIGBUS
    elif damage == "empty":
        open(lib, "wb").close()
    elif damage == "random":
        overwrite_same_size(lib)
    else:
        os.unlink(lib)
        os.mkdir(lib)
    run_on(cache)
    assert libraries(cache) and all(os.path.isfile(p) for p in libraries(cache))


def test_an_image_the_driver_refuses_is_removed_and_compiled_again(cache):
    """A cache entry valid on disk (its size and digest match its name) that the
    driver cannot load: removed, compiled once more, and the call works."""
    from aesara_bincount_core.cuda import disk_cache

    (image,) = images(cache)
    stem = os.path.basename(image).rsplit("-", 2)[0]
    os.unlink(image)
    bogus = disk_cache.store(cache, stem, b"not an image", ".cubin")
    run_on(cache)
    assert not os.path.exists(bogus)
    assert len(images(cache)) == 1


def test_temporary_files_of_a_killed_writer_are_removed(cache):
    old = os.path.join(cache, ".tmp-killed.so")
    new = os.path.join(cache, ".tmp-writing.so")
    for path in (old, new):
        with open(path, "wb") as f:
            f.write(b"partial")
    stale = time.time() - 3600
    os.utime(old, (stale, stale))
    for lib in libraries(cache):
        os.unlink(lib)  # the process writes into the folder
    run_on(cache)
    assert not os.path.exists(old)
    assert os.path.exists(new)  # a writer may still be at work on it
