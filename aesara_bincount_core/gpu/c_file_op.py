"""The base of the GPU Ops whose host C code lives in ``c_code/``.

:class:`GpuCFileOp` is :class:`~aesara_bincount_core.c_file_op.CFileOp` with
what every GPU Op adds to it: the CUDA kernels hashed into the cache version,
``libdl`` (the host code loads the CUDA driver with ``dlopen``), and the
check, when a function is compiled, that a GPU can run the Op.

Neighbours: :mod:`aesara_bincount_core.c_file_op` (the base of all C-file
Ops), :mod:`.op` (``GpuBincount``) and :mod:`.scatter_add`
(``GpuScatterAdd``), built on this one; :mod:`aesara_bincount_core.cuda.kernels`
(what "a usable GPU" means).
"""
from typing import Optional

import aesara

from aesara_bincount_core.c_file_op import CFileOp
from aesara_bincount_core.cuda import kernels, sources

__all__ = ["GpuCFileOp", "check_deterministic", "require_gpu"]


def require_gpu(name: str, cpu_verb: str) -> None:
    """Raise unless a GPU can run the Op named ``name`` (called when a function is compiled).

    Raises
    ------
    aesara_bincount_core.cuda.kernels.GpuUnavailableError
        No CuPy, CUDA driver, device or NVRTC; the message names the cause
        and how to ``cpu_verb`` on the CPU instead.
    """
    ok, why = kernels.availability()
    if not ok:
        raise kernels.GpuUnavailableError(
            f"{name} cannot run here: {why}. Compile with "
            f"mode.excluding('gpu_bincount') to {cpu_verb} on the CPU instead."
        )


def check_deterministic(name: str, deterministic: Optional[str]) -> str:
    """The ``deterministic`` prop of a GPU Op named ``name``: the value given,
    else ``aesara.config.deterministic`` now (when the rewrite makes the Op,
    that is when the function is compiled).

    Raises
    ------
    ValueError
        A value other than ``"default"`` or ``"more"``.
    """
    if deterministic is None:
        deterministic = aesara.config.deterministic
    if deterministic not in sources.DETERMINISTIC_MODES:
        raise ValueError(
            f"{name}: unknown deterministic {deterministic!r}; expected one of "
            f"{sources.DETERMINISTIC_MODES}"
        )
    return deterministic


class GpuCFileOp(CFileOp):
    """A :class:`~aesara_bincount_core.c_file_op.CFileOp` that runs on an NVIDIA GPU.

    Class attributes a subclass sets, beyond those of ``CFileOp``:

    - ``kernel_sources``: the CUDA files of its kernel family,
      :func:`aesara_bincount_core.cuda.sources.kernel_files`, which NVRTC
      compiles when the function first runs: they are not part of the
      module, but the host code depends on their names and launch shapes, so
      they are hashed (with the headers they include).
    - ``cpu_verb``: what the CPU Op does instead ("count", "add"), for the
      message of :meth:`prepare_node`.
    """

    cpu_verb = "run"
    #: ``aesara.config.deterministic`` when the Op was made (a prop of the
    #: subclasses; the class value serves pickles made before it existed).
    deterministic = "default"

    def props_str(self):
        """The Op's name and props, ``deterministic`` only when it is not
        ``"default"``, ``to_host`` and ``checked`` only when set (so that dprint of a
        default graph reads as before).  A subclass with ``__props__`` sets
        ``__str__ = GpuCFileOp.props_str`` (Aesara gives each such class a
        ``__str__`` of its own otherwise)."""
        quiet = {"deterministic": "default", "to_host": False, "checked": False}
        props = [p for p in self.__props__ if p not in quiet or getattr(self, p) != quiet[p]]
        return f"{type(self).__name__}{{{', '.join(f'{p}={getattr(self, p)!r}' for p in props)}}}"

    def c_libraries(self, **kwargs):
        return ["dl"] + super().c_libraries(**kwargs)

    def prepare_node(self, node, storage_map, compute_map, impl):
        """Check that a GPU can run the Op.

        Raises
        ------
        aesara_bincount_core.cuda.kernels.GpuUnavailableError
            No CuPy, CUDA driver, device or NVRTC; the message names the
            cause and how to compile for the CPU instead.
        """
        require_gpu(type(self).__name__, self.cpu_verb)
