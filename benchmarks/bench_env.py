"""What the CPU benchmark scripts set up before they import Aesara, in one place.

``bench_cpu.py``, ``bench_rows.py`` and ``bench_fusion.py`` import this module
first (after putting ``benchmarks/`` on ``sys.path``): on import it links
Aesara's compiled code without BLAS (``blas__ldflags=`` in ``AESARA_FLAGS``,
unless the flag is given; none of the timed graphs needs BLAS, and the link
probe costs seconds), silences warnings, and puts the repository and
``benchmarks/`` at the front of ``sys.path`` (the package as checked out, and
the scripts' neighbours such as ``peers.py``).  The peers the scripts time
are in ``peers.py``.
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

if "blas__ldflags" not in os.environ.get("AESARA_FLAGS", ""):
    os.environ["AESARA_FLAGS"] = ",".join(
        f for f in (os.environ.get("AESARA_FLAGS", ""), "blas__ldflags=") if f
    )
warnings.filterwarnings("ignore")
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
