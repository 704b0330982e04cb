"""The ``perf-plots`` directive: figures listed in ``_static/plots.json``.

``benchmarks/plot.py`` writes the PNGs and that manifest.  The directive
shows the figures of one kind (``cpu``, ``gpu`` or ``headline``) with the
captions from the manifest, which name the machine, the versions, the date
and the results file.  When the manifest lists no figure of that kind, the
directive's content is shown instead, as a note::

    .. perf-plots:: gpu

       No GPU results yet: ...

so the page says plainly where figures are missing, and a GPU figure appears
once a GPU results file has been plotted.
"""
import json
import os

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

MANIFEST = os.path.join("_static", "plots.json")


class PerfPlots(SphinxDirective):
    required_arguments = 1
    has_content = True

    def run(self):
        kind = self.arguments[0]
        path = os.path.join(self.env.srcdir, MANIFEST)
        self.env.note_dependency(path)
        entries = []
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                entries = [e for e in json.load(f)["plots"] if e["kind"] == kind]
        lines = []
        for e in entries:
            if not os.path.exists(os.path.join(self.env.srcdir, "_static", e["file"])):
                continue
            lines += [
                f".. figure:: /_static/{e['file']}",
                f"   :alt: {e['alt']}",
                "   :width: 100%",
                "",
                f"   {e['caption']}",
                "",
            ]
        if not lines:
            if not self.content:
                return [self.state.document.reporter.warning(
                    f"perf-plots: no {kind} plot in {MANIFEST} and no text to show instead",
                    line=self.lineno,
                )]
            lines = [".. note::", ""] + [f"   {line}" for line in self.content] + [""]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=path), self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("perf-plots", PerfPlots)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
