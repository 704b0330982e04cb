"""Run the README's two examples: the CPU one here, the GPU one on the CPU emulation of the GPU.

Usage, from the repository root (``make doctest`` runs it after the Sphinx
doctest; ``tests/test_readme.py`` in the test-suite)::

    .venv/bin/python tests/readme_examples.py [--readme PATH]

The README's examples are plain reStructuredText doctest blocks (``>>>``),
which a code host renders as code; each belongs to the section it stands in.
The blocks of the section whose title names the CPU run in this process; those
of the GPU section run in a subprocess with the emulation in front of it
(``tests/gpu_emu``: fake libcuda, fake CuPy, NVRTC), where
``aesara_bincount.gpu.is_available()`` must hold.  Nothing is skipped: a
section without examples, an example that fails, or an emulation that cannot
be built fails the run (exit status 1), so the GPU example cannot pass
unchecked.
"""
import doctest
import os
import subprocess
import sys
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
README = os.path.join(ROOT, "README.rst")
#: Section titles of the README's examples, by where they run.
SECTIONS = {"cpu": "Example on the CPU", "gpu": "Example on the GPU"}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def examples(path: str = README) -> Dict[str, List[Tuple[int, str]]]:
    """The doctest blocks of each example section: ``{kind: [(line, text)]}``."""
    from docutils import nodes
    from docutils.core import publish_doctree

    with open(path, encoding="utf-8") as f:
        tree = publish_doctree(f.read(), settings_overrides={"report_level": 5})
    found: Dict[str, List[Tuple[int, str]]] = {kind: [] for kind in SECTIONS}
    for block in tree.findall(nodes.doctest_block):
        section = block.parent
        while section is not None and not isinstance(section, nodes.section):
            section = section.parent
        title = section[0].astext() if section is not None else ""
        for kind, wanted in SECTIONS.items():
            if title == wanted:
                found[kind].append((block.line or 0, block.astext()))
    return found


def run(kind: str, path: str = README) -> doctest.TestResults:
    """Run the blocks of one section in this process, in order, in one namespace."""
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=FLAGS)
    globs: dict = {}
    for line, text in examples(path)[kind]:
        test = parser.get_doctest(text, globs, f"README {SECTIONS[kind]}", path, line)
        runner.run(test)
    return runner.summarize(verbose=False)


def main(argv: List[str]) -> int:
    """``[--readme PATH] [--in-process cpu|gpu]``: exit status 0 when every example passed."""
    path = README
    if argv[:1] == ["--readme"]:
        path, argv = os.path.abspath(argv[1]), argv[2:]
    if argv[:1] == ["--in-process"]:
        kind = argv[1]
        if kind == "gpu":
            import aesara_bincount.gpu

            ok, why = aesara_bincount.gpu.availability()
            if not ok or os.environ.get("AESARA_BINCOUNT_EMULATED_GPU") != "1":
                print(f"readme_examples: no emulated GPU in this process ({why})")
                return 1
        result = run(kind, path)
        print(f"readme_examples: {SECTIONS[kind]}: {result.attempted} examples, {result.failed} failed")
        return 1 if result.failed or not result.attempted else 0

    sys.path.insert(0, HERE)
    from gpu_emu import build

    env = dict(os.environ)
    status = 0
    for kind in SECTIONS:
        if kind == "gpu":
            problem = build.cxx20_problem()
            if problem:
                print(f"readme_examples: the GPU example cannot run: {problem}")
                return 1
            env = build.environment(build.build())
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--readme", path, "--in-process", kind],
                              cwd=ROOT, env=env)
        status = status or proc.returncode
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
