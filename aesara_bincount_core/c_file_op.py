"""The base of the Ops whose C code lives in plain files of ``c_code/``.

:class:`CFileOp` does, once, what each such Op needs from Aesara's
``ExternalCOp``: it reads the Op's files (no ``#section`` markers), includes
their headers, reads them again when an Op is unpickled, turns a dict of
flags into ``#define`` lines, and hashes every file the Op uses into its
cache version.  :class:`OpenMPCFileOp` adds Aesara's OpenMP switch.

Neighbours: :mod:`aesara_bincount_core._c_code` (where the files are, how
they are read and hashed), :mod:`aesara_bincount_core.compile_args` (the
extra compiler arguments), and the Ops built on this base:
:mod:`.op` (``Bincount``), :mod:`.scatter_add` (``ScatterAdd``),
:mod:`.gpu.op` (``GpuBincount``), :mod:`.gpu.scatter_add` (``GpuScatterAdd``).
"""
from typing import Dict, List, Optional, Tuple

from aesara.link.c.op import ExternalCOp, OpenMPOp

from aesara_bincount_core import _c_code, compile_args

__all__ = ["CFileOp", "OpenMPCFileOp"]


class CFileOp(ExternalCOp):
    """An Op whose C implementation is a set of plain files in ``c_code/``.

    A subclass names its files and its C function, and says which macros a
    node gets; it keeps its props, ``make_node``, ``perform``, gradient and
    the like.  Class attributes a subclass sets:

    - ``c_sources``: the files of its module, by name in ``c_code/``.  The
      headers (``.h``) are included at the top of the module, before
      Aesara's code; the text of the ``.c`` files, in order, is the
      ``support_code_apply`` section, compiled after the macros of
      :meth:`c_flags` are defined.
    - ``kernel_sources``: files the Op's code depends on without compiling
      them into its module (CUDA kernels that NVRTC compiles when the
      function runs); hashed only.
    - ``c_function``: the C function that the ``.c`` files define as
      ``APPLY_SPECIFIC(<c_function>)``, called with the inputs, outputs and
      ``sub["fail"]``-style arguments of ``ExternalCOp``.
    - ``version``: bumped by hand only for a change that is in none of the
      files (the files are hashed).

    The cache version is ``(version, hash)``, where the hash is
    :func:`~aesara_bincount_core._c_code.sources_hash` over ``c_sources``,
    ``kernel_sources`` and every file of ``c_code/`` they include, directly or
    not (:func:`~aesara_bincount_core._c_code.included_closure`), so an edit
    of any of them compiles the Op again.

    A pickled Op holds its props only: the C text is read again from the
    installed files when it is unpickled, so a pickle made before an edit of
    the files compiles the edited code.
    """

    _cop_num_inputs: Optional[int] = None
    _cop_num_outputs: Optional[int] = None
    c_sources: Tuple[str, ...] = ()
    kernel_sources: Tuple[str, ...] = ()
    c_function: str = ""
    version: int = 1

    def __init__(self):
        ExternalCOp.__init__(
            self, [_c_code.c_code_path(f) for f in self.c_sources], f"APPLY_SPECIFIC({self.c_function})"
        )

    # -- reading the files -----------------------------------------------------------------
    def load_c_code(self, func_files: List[str]) -> None:
        """Read the plain files of :attr:`c_sources` (``func_files`` names the same files).

        The ``.c`` files become the ``support_code_apply`` section; the
        headers are included through :meth:`c_headers`.

        Raises
        ------
        FileNotFoundError
            If the package's ``c_code/`` folder or one of the files is missing.
        """
        self.func_codes = [_c_code.read_source(f) for f in self.c_sources]
        self.code_sections = {
            "support_code_apply": "\n".join(
                code for name, code in zip(self.c_sources, self.func_codes) if name.endswith(".c")
            )
        }

    def __getstate__(self):
        state = self.__dict__.copy()
        # The C text is read again from the installed files when unpickled.
        for key in ("func_codes", "code_sections", "func_files"):
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        parent = getattr(super(), "__setstate__", None)
        if parent is not None:  # OpenMPOp's, which defaults a missing openmp
            parent(state)
        else:
            self.__dict__.update(state)
        self.func_files = [_c_code.c_code_path(f) for f in self.c_sources]
        self.load_c_code(self.func_files)

    # -- what Aesara's C linker asks -------------------------------------------------------
    def c_headers(self, **kwargs):
        ours = [f for f in self.c_sources if f.endswith(".h")]
        return ours + super().c_headers(**kwargs)

    def c_header_dirs(self, **kwargs):
        return [_c_code.c_code_dir()] + super().c_header_dirs(**kwargs)

    def c_compile_args(self, **kwargs):
        return super().c_compile_args(**kwargs) + compile_args.extra_compile_args()

    def c_flags(self, node) -> Dict[str, object]:
        """The macros the C code of ``node`` is compiled with, as ``{name: value}``.

        Each value is written as it prints (``1``, ``"int64"`` with its
        quotes for a C string): a subclass returns C text.  Defined before
        the ``.c`` files, undefined after them.
        """
        return {}

    def get_c_macros(self, node, name, check_input=None):
        define, undef = ExternalCOp.get_c_macros(self, node, name, check_input)
        flags = self.c_flags(node)
        define += "".join(f"\n#define {k} {v}" for k, v in flags.items())
        undef += "".join(f"\n#undef {k}" for k in flags)
        return define, undef

    @classmethod
    def hashed_sources(cls) -> Tuple[str, ...]:
        """Every file of ``c_code/`` that the cache version covers (see the class notes)."""
        return _c_code.included_closure(cls.c_sources + cls.kernel_sources)

    def c_code_cache_version(self):
        return (self.version, _c_code.sources_hash(self.hashed_sources()))


class OpenMPCFileOp(CFileOp, OpenMPOp):
    """A :class:`CFileOp` with Aesara's OpenMP switch (``openmp`` prop).

    Adds ``-fopenmp`` and ``omp.h`` when ``openmp`` is true and the compiler
    supports it (Aesara's ``OpenMPOp``), and the switch to the cache version:
    ``(version, hash, openmp)``.
    """

    def __init__(self, openmp: Optional[bool] = None):
        OpenMPOp.__init__(self, openmp=openmp)
        CFileOp.__init__(self)

    def c_code_cache_version(self):
        return CFileOp.c_code_cache_version(self) + (int(bool(self.openmp)),)
