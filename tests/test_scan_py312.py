"""A ``scan`` compiles and runs after ``import aesara_bincount``, on every supported Python.

On Python 3.12, Aesara 2.9's compiled ``Scan`` loop does not build
(``aesara_bincount/_scan_py312.py``); the package has ``Scan`` run its Python
loop there.  ``make test-py312``'s GPU dry run scans too (the RNN row).
"""
import sys

import aesara
import aesara.tensor as at
import numpy as np

import aesara_bincount  # noqa: F401
from aesara_bincount._scan_py312 import SCAN_C_MODULE


def test_a_scan_compiles_and_matches_numpy():
    x = at.dvector("x")
    out, _ = aesara.scan(lambda v, acc: acc + v * v, sequences=x, outputs_info=at.as_tensor(np.float64(0)))
    f = aesara.function([x], out)
    xv = np.array([1.0, -2.0, 0.5, 3.0])
    np.testing.assert_allclose(f(xv), np.cumsum(xv * xv))
    refused = sys.modules.get(SCAN_C_MODULE, "absent") is None
    assert refused == (sys.version_info >= (3, 12)), sys.modules.get(SCAN_C_MODULE, "absent")
