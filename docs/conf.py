"""Sphinx configuration of the aesara_bincount documentation.

Build with ``make docs`` (HTML, warnings are errors); the code examples run
with ``make doctest`` and in the test-suite (``tests/test_docs.py``).
"""
import datetime
import doctest
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "_ext"))
sys.path.insert(0, ROOT)

# bincount needs no BLAS: skip Aesara's BLAS probe, which only adds noise to
# the build log (the same setting as the main job and the test-suite).
if "blas__ldflags" not in os.environ.get("AESARA_FLAGS", ""):
    os.environ["AESARA_FLAGS"] = ",".join(
        f for f in (os.environ.get("AESARA_FLAGS", ""), "blas__ldflags=") if f
    )

import aesara_bincount  # noqa: E402

project = "aesara_bincount"
author = "the aesara_bincount developers"
copyright = f"{datetime.date.today().year}, {author}"
release = aesara_bincount.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "numpydoc",
    "perfplots",
    "optional_api",
    "gpu_table",
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path = []
html_static_path = ["_static"]
html_theme = "furo"
html_title = f"aesara_bincount {release}"
# Plots are files in _static; no source file links to the raw JSON.
html_copy_source = False

# -- autodoc / numpydoc ------------------------------------------------------
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc sections carry the types
# Methods that only override Aesara's Op/Type interface (make_node, perform,
# c_code_cache_version, ...) have no docstring of their own; do not show
# Aesara's generic text for them: the class docstrings describe the contract.
autodoc_inherit_docstrings = False
# Class members are documented by explicit directives, not by numpydoc's
# autosummary tables (which would need generated stub pages).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- doctest -----------------------------------------------------------------
# Every example group starts from a clean state: a fixed seed and the package
# imported (so the rewrites are registered).
doctest_global_setup = """
import numpy as np
import aesara
import aesara.tensor as at
from aesara.compile.mode import get_default_mode
from aesara.tensor.extra_ops import bincount
import aesara_bincount

try:  # the GPU part's code (not a GPU): examples about it run where it is
    import aesara_bincount.gpu.rewriting  # noqa: F401

    HAS_GPU_CODE = True
except ImportError:
    HAS_GPU_CODE = False
"""
doctest_default_flags = (
    doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.DONT_ACCEPT_TRUE_FOR_1
)


# -- rewriters ---------------------------------------------------------------
def _rewriter_docstring(app, what, name, obj, options, lines):
    """Show the docstring of the function a node rewriter was made from.

    ``@node_rewriter`` returns an object whose ``__doc__`` is its class's;
    the documentation that matters is that of the decorated function.
    """
    from aesara.graph.rewriting.basic import NodeRewriter
    from sphinx.util.docstrings import prepare_docstring

    fn = getattr(obj, "fn", None)
    if isinstance(obj, NodeRewriter) and fn is not None and fn.__doc__:
        lines[:] = prepare_docstring(fn.__doc__)


def setup(app):
    # Before numpydoc (priority 500), so that numpydoc formats the new text.
    app.connect("autodoc-process-docstring", _rewriter_docstring, priority=400)
