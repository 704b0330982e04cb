"""The ``gpu-table`` directive: the GPU table of Ops, generated from the registry.

``.. gpu-table::`` imports :mod:`aesara_bincount_core.gpu.entries` (which
fills :data:`aesara_bincount_core.gpu.table.TABLE`) and renders one table
per family of entries (Op, CuPy call or kernel, what is accepted, how the
outputs are allocated), then the notes (Ops served by rewrites of their
own, Ops that stay on the host, and why).  Adding an entry adds its row.
"""
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


def _cell(text: str) -> str:
    return " ".join(str(text).split())


def table_lines():
    """The reStructuredText of the tables (a list of lines)."""
    from aesara_bincount_core.gpu import entries  # noqa: F401 (fills the table)
    from aesara_bincount_core.gpu.table import NOTES, rows

    lines = []
    families = sorted({e.family for e in rows()})
    for family in families:
        lines += [".. list-table:: " + family, "   :header-rows: 1", "   :widths: 18 24 38 20", ""]
        lines += ["   * - Op", "     - GPU implementation", "     - accepted (anything else stays on the host)",
                  "     - outputs"]  # fmt: skip
        for e in rows(family):
            name = e.op_class.__name__ + (" (own GpuTwin class)" if e.twin is not None else "")
            lines += [f"   * - ``{name}``", f"     - {_cell(e.cupy)}", f"     - {_cell(e.accepts_text)}",
                      f"     - {_cell(e.outputs)}"]  # fmt: skip
        lines.append("")
    lines += [".. list-table:: outside the table", "   :header-rows: 1", "   :widths: 30 10 60", ""]
    lines += ["   * - Op", "     - runs on", "     - why"]
    for name, where, why in NOTES:
        lines += [f"   * - {_cell(name)}", f"     - {where}", f"     - {_cell(why)}"]
    lines.append("")
    return lines


class GpuTable(SphinxDirective):
    has_content = False

    def run(self):
        container = nodes.container()
        self.state.nested_parse(StringList(table_lines()), self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("gpu-table", GpuTable)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
