"""The Ops, types and GPU kernel layer behind :mod:`aesara_bincount`.

Importing this package, or any module in it, registers no graph rewrite:
only ``import aesara_bincount`` does that.  Aesara's compile cache unpickles
the Ops and types of the modules it holds (their pickles name the modules of
this package), so a process that never imported :mod:`aesara_bincount` keeps
Aesara's own graphs whatever its compile cache holds.

- :mod:`aesara_bincount_core.semantics`, :mod:`aesara_bincount_core._c_code`:
  the contract (dtypes, errors, the NumPy reference) and the C sources; NumPy
  only.
- :mod:`aesara_bincount_core.cuda`: the stand-alone GPU kernel layer (NVRTC,
  the CUDA driver, the launcher); no Aesara, works with NumPy 1 or 2.
- :mod:`aesara_bincount_core.c_file_op`: the base of the Ops whose C code is
  in ``c_code/`` (reads, includes and hashes the files);
  :mod:`aesara_bincount_core.compile_args`: the extra compiler arguments of
  their modules.
- :mod:`aesara_bincount_core.op`, :mod:`aesara_bincount_core.scatter_add`,
  :mod:`aesara_bincount_core.gpu`: the Aesara Ops and GPU types (they import
  Aesara).

This module itself imports nothing.
"""
