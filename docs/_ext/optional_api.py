"""The ``if-importable`` directive: document a name only where it exists.

The GPU part of the package lands separately from the CPU part.  Autodoc
directives for a name that cannot be imported fail the build (warnings are
errors), so the API page wraps the GPU-only names::

    .. if-importable:: aesara_bincount.gpu.local_gpu_bincount
       :otherwise: The GPU rewrite is not part of this build.

       .. autodata:: aesara_bincount.gpu.local_gpu_bincount

The content is parsed when the dotted name imports, else the ``otherwise``
text (if any) is shown as a note.  ``if-not-importable`` is the reverse: its
content is parsed only while the name does not import (for a note that
should vanish once the GPU part is in).
"""
import importlib

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


def importable(dotted: str) -> bool:
    module, _, attr = dotted.rpartition(".")
    for mod_name, attr_name in ((dotted, None), (module, attr)):
        if not mod_name:
            continue
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        if attr_name is None or hasattr(mod, attr_name):
            return True
    return False


class IfImportable(SphinxDirective):
    required_arguments = 1
    has_content = True
    option_spec = {"otherwise": directives.unchanged}
    #: Parse the content when importable (True) or when not (False).
    wanted = True

    def run(self):
        container = nodes.container()
        if importable(self.arguments[0]) == self.wanted:
            self.state.nested_parse(self.content, self.content_offset, container)
        elif self.options.get("otherwise"):
            lines = [".. note::", ""]
            lines += ["   " + line.strip() for line in self.options["otherwise"].splitlines()]
            self.state.nested_parse(StringList(lines), self.content_offset, container)
        return container.children


class IfNotImportable(IfImportable):
    wanted = False


def setup(app):
    app.add_directive("if-importable", IfImportable)
    app.add_directive("if-not-importable", IfNotImportable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
