"""The on-disk cache of the GPU path: compiled kernel images and the launcher library.

Part of the stand-alone kernel layer (standard library only).  Its two users
are :mod:`.nvrtc` (CUBIN or PTX images, one per compile key) and
:mod:`.launcher` (the C launcher library, one per version of its sources).

Where: ``$AESARA_BINCOUNT_CACHE``, else ``$XDG_CACHE_HOME/aesara_bincount``
(an absolute ``XDG_CACHE_HOME`` only, as the XDG specification asks), else
``~/.cache/aesara_bincount``; when the home folder is unknown (``HOME``
unset and no passwd entry) the folder ``aesara_bincount-<uid>`` of the
system's temporary folder.  The path is always absolute.

An entry heals: what is read is validated before it is used, and a bad
entry is removed and made again.

- Its name ends with the size and the SHA-256 (first 16 hex digits) of its
  content, ``<stem>-<size>-<digest><suffix>``, so a file overwritten with
  other bytes, truncated or emptied no longer matches its name and is
  removed when it is found.
- Only regular files are read, opened with ``O_NONBLOCK``: a FIFO, a device
  or a folder in an entry's place is removed, never waited on.
- A write goes to a temporary file (``.tmp-*``) in the same folder, renamed
  into place (atomic: processes that write the same entry at once each
  write a whole file).  Temporary files older than :data:`STALE_SECONDS`,
  left by a writer killed before its rename, are removed the first time a
  process writes into the folder.
- A consumer that still cannot use a valid-looking entry (the driver
  refuses an image, the loader a library) calls :func:`remove` and makes
  it again once (see :func:`nvrtc.compile_cached` and
  :func:`launcher.library`).
"""
import hashlib
import os
import shutil
import stat
import tempfile
import threading
import time
from typing import Optional, Set, Tuple

__all__ = [
    "STALE_SECONDS",
    "cache_dir",
    "entry_name",
    "find",
    "store",
    "temp_path",
    "remove",
]

#: Age in seconds after which a temporary file of the cache counts as left
#: behind by a killed writer (a write takes milliseconds).
STALE_SECONDS = 600

_cleaned: Set[str] = set()
_cleaned_lock = threading.Lock()


def cache_dir() -> str:
    """The absolute path of the cache folder (see the module docstring)."""
    explicit = os.environ.get("AESARA_BINCOUNT_CACHE")
    if explicit:
        return os.path.abspath(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "aesara_bincount")
    home = os.path.expanduser("~")
    if os.path.isabs(home):
        return os.path.join(home, ".cache", "aesara_bincount")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"aesara_bincount-{uid}")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def entry_name(stem: str, data: bytes, suffix: str) -> str:
    """The file name of an entry: ``<stem>-<size>-<digest><suffix>``."""
    return f"{stem}-{len(data)}-{_digest(data)}{suffix}"


def remove(path: str) -> None:
    """Remove an entry (a file, a FIFO, a folder in its place); never raises."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    try:
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def _read_regular(path: str, size: int) -> Optional[bytes]:
    """The ``size`` bytes of the regular file ``path``; None for anything else
    (a FIFO, a folder, another size, an error).  Never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return None
        chunks, left = [], size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def find(folder: str, stem: str, suffix: str) -> Optional[Tuple[str, bytes]]:
    """A valid entry of ``stem`` in ``folder``: ``(path, content)``, or None.

    Every file that carries the stem's name but whose content does not
    match the size and digest in its name (or that is not a regular file)
    is removed on the way.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    prefix = stem + "-"
    for name in sorted(names):
        if not (name.startswith(prefix) and name.endswith(suffix)):
            continue
        middle = name[len(prefix) : len(name) - len(suffix)]
        size_text, _, digest = middle.partition("-")
        path = os.path.join(folder, name)
        if not size_text.isdigit() or len(digest) != 16:
            continue  # another stem that starts with this one
        data = _read_regular(path, int(size_text))
        if data is not None and _digest(data) == digest:
            return path, data
        remove(path)
    return None


def _clean_stale_temps(folder: str) -> None:
    """Remove the temporary files a killed writer left (once per folder and process)."""
    with _cleaned_lock:
        if folder in _cleaned:
            return
        _cleaned.add(folder)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    now = time.time()
    for name in names:
        if name.startswith(".tmp-"):
            path = os.path.join(folder, name)
            try:
                if now - os.lstat(path).st_mtime > STALE_SECONDS:
                    remove(path)
            except OSError:
                pass


def temp_path(folder: str, suffix: str = "") -> Optional[str]:
    """A new empty temporary file in ``folder`` (for a writer that is not
    :func:`store`, such as a compiler), or None when the folder is not writable."""
    try:
        os.makedirs(folder, exist_ok=True)
        _clean_stale_temps(folder)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=suffix)
        os.close(fd)
        return tmp
    except OSError:
        return None


def store(folder: str, stem: str, data: bytes, suffix: str, tmp: Optional[str] = None) -> Optional[str]:
    """Write an entry (or move the finished temporary file ``tmp`` holding
    ``data`` into place); its path, or None when the folder is not writable
    (the caller then keeps the content in memory only)."""
    path = os.path.join(folder, entry_name(stem, data, suffix))
    try:
        if tmp is None:
            os.makedirs(folder, exist_ok=True)
            _clean_stale_temps(folder)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=suffix)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        if os.path.isdir(path):
            remove(path)
        os.replace(tmp, path)
        return path
    except OSError:
        if tmp is not None:
            remove(tmp)
        return None
