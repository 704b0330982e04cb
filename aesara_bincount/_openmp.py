"""Keep OpenMP usable in a process forked after it ran.

GNU OpenMP (libgomp, what ``g++ -fopenmp`` links) keeps a pool of worker
threads per thread that started a parallel region.  ``fork()`` copies only
the calling thread, but the child still believes the pool exists: its first
parallel region waits forever for workers that are gone.  A Python program
that runs OpenMP code (an Op compiled with ``-fopenmp``, torch) and then
starts workers with ``multiprocessing`` (the "fork" start method, the default
on Linux) would hang in every worker.

``Bincount`` itself no longer runs OpenMP parallel regions (its threads are
the pool of ``c_code/cpu/worker_pool.h``, which a forked child replaces), but
it takes its thread count from ``omp_get_max_threads()``, and other OpenMP
code in the process (Ops of other packages, torch) still uses GNU OpenMP's
teams.  The handler registered here runs in the child right after
``os.fork()``: if libgomp is loaded, it sets the forking thread's OpenMP
thread count to 1, so that OpenMP code called from that thread runs without
the stale pool, and ``Bincount`` runs on one thread there.  Threads that the
child starts later get their own, fresh pools.  Processes started with
"spawn" or "forkserver" are untouched and keep all their threads.
"""
import ctypes
import os

__all__ = ["register_fork_handler"]

_LIBGOMP = "libgomp.so.1"
_registered = False


def _single_threaded_openmp_after_fork() -> None:
    """In a forked child: ``omp_set_num_threads(1)`` if libgomp is loaded."""
    if not hasattr(os, "RTLD_NOLOAD"):
        return  # cannot ask "is it loaded?" without loading it
    mode = os.RTLD_NOLOAD | os.RTLD_LAZY
    try:
        libgomp = ctypes.CDLL(_LIBGOMP, mode=mode)
    except OSError:
        return  # libgomp is not in this process: no stale pool
    libgomp.omp_set_num_threads(ctypes.c_int(1))


def register_fork_handler() -> None:
    """Register :func:`_single_threaded_openmp_after_fork` once per process."""
    global _registered
    if _registered or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(after_in_child=_single_threaded_openmp_after_fork)
    _registered = True
