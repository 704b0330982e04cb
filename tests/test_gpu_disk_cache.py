"""The rules of the GPU path's disk cache (``aesara_bincount_core/cuda/disk_cache.py``), without a GPU.

Entries are named by their size and digest, read only when they are regular
files (never blocking), removed when damaged; the folder is always absolute.
The end-to-end cases (a damaged image or launcher library, in fresh
processes on the emulated GPU) are in ``tests/gpu/test_cuda_cache_heals.py``.
"""
import os
import threading

import pytest

from aesara_bincount_core.cuda import disk_cache, nvrtc


def test_an_entry_is_found_by_its_stem_and_checked(tmp_path):
    folder = str(tmp_path)
    path = disk_cache.store(folder, "k-sm_90-abc", b"image bytes", ".cubin")
    assert os.path.basename(path).startswith("k-sm_90-abc-11-")
    assert disk_cache.find(folder, "k-sm_90-abc", ".cubin") == (path, b"image bytes")
    assert disk_cache.find(folder, "k-sm_90-ab", ".cubin") is None  # another stem
    assert disk_cache.find(folder, "k-sm_90-abc", ".ptx") is None


@pytest.mark.parametrize("damage", ["same size", "truncated", "empty", "fifo", "directory"])
def test_a_damaged_entry_is_removed_not_used(tmp_path, damage):
    folder = str(tmp_path)
    path = disk_cache.store(folder, "stem", b"0123456789", ".so")
    os.unlink(path)
    if damage == "same size":
        open(path, "wb").write(b"9876543210")
    elif damage == "truncated":
        open(path, "wb").write(b"01234")
    elif damage == "empty":
        open(path, "wb").close()
    elif damage == "fifo":
        os.mkfifo(path)
    else:
        os.mkdir(path)
        open(os.path.join(path, "inside"), "w").close()
    found = []
    reader = threading.Thread(target=lambda: found.append(disk_cache.find(folder, "stem", ".so")))
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "find blocked"
    assert found == [None]
    assert not os.path.lexists(path)
    again = disk_cache.store(folder, "stem", b"0123456789", ".so")
    assert again == path and disk_cache.find(folder, "stem", ".so") == (path, b"0123456789")


def test_store_replaces_a_directory_and_leaves_no_temporary_file(tmp_path):
    folder = str(tmp_path)
    name = disk_cache.entry_name("s", b"abc", ".x")
    os.mkdir(os.path.join(folder, name))
    assert disk_cache.store(folder, "s", b"abc", ".x") == os.path.join(folder, name)
    assert sorted(os.listdir(folder)) == [name]


def test_an_unwritable_folder_stores_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert disk_cache.store(str(blocker / "cache"), "s", b"abc", ".x") is None
    assert disk_cache.temp_path(str(blocker / "cache")) is None


def test_the_cache_folder_is_always_absolute(monkeypatch, tmp_path):
    monkeypatch.delenv("AESARA_BINCOUNT_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    # HOME unset and no passwd entry: expanduser leaves "~" as it is.
    monkeypatch.setattr(os.path, "expanduser", lambda p: p)
    folder = disk_cache.cache_dir()
    assert os.path.isabs(folder) and "~" not in folder, folder
    assert nvrtc.cache_dir() == folder
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as XDG asks
    assert disk_cache.cache_dir() == folder
    monkeypatch.setenv("AESARA_BINCOUNT_CACHE", "here")
    assert disk_cache.cache_dir() == str(tmp_path / "here")
