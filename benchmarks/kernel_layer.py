"""The stand-alone GPU kernel layer, for the benchmark and the GPU tests.

``aesara_bincount_core.cuda.kernels`` imports neither Aesara nor CuPy at
import time, so a plain import works on a Python with NumPy 2 and CuPy 14
(a GPU machine's own stack) as well as beside Aesara.
"""
import importlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def load():
    """The module ``aesara_bincount_core.cuda.kernels``."""
    return importlib.import_module("aesara_bincount_core.cuda.kernels")
