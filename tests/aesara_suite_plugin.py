"""pytest plugin loaded into Aesara's own test-suite by ``test_aesara_suite.py``.

It imports :mod:`aesara_bincount` (so the rewrites are registered, as for any
user) and counts how often the rewrites fired, so that the calling test can
check that Aesara's tests really ran through ``Bincount``, ``ScatterAdd``
and ``ScatterSet``.
"""
import os

from aesara_bincount.rewriting import local_bincount
from aesara_bincount.multi_index import local_multi_index_scatter_add
from aesara_bincount.scatter_rewriting import local_scatter_add
from aesara_bincount.scatter_set_rewriting import local_scatter_set

_fired = 0


def _counting(rewriter):
    original = rewriter.fn

    def counting_rewrite(fgraph, node):
        global _fired
        result = original(fgraph, node)
        if result:
            _fired += 1
        return result

    rewriter.fn = counting_rewrite


_counting(local_bincount)
_counting(local_scatter_add)
_counting(local_multi_index_scatter_add)
_counting(local_scatter_set)


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("AESARA_BINCOUNT_FIRED_FILE")
    if path:
        with open(path, "w") as f:
            f.write(str(_fired))
