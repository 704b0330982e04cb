"""pytest plugin loaded into Aesara's own test-suite by ``test_aesara_suite.py``.

It imports :mod:`aesara_bincount` (so the rewrite is registered, as for any
user) and counts how often the rewrite fired, so that the calling test can
check that Aesara's tests really ran through ``Bincount``.
"""
import os

from aesara_bincount.rewriting import local_bincount

_fired = 0
_original = local_bincount.fn


def _counting_rewrite(fgraph, node):
    global _fired
    result = _original(fgraph, node)
    if result:
        _fired += 1
    return result


local_bincount.fn = _counting_rewrite


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("AESARA_BINCOUNT_FIRED_FILE")
    if path:
        with open(path, "w") as f:
            f.write(str(_fired))
