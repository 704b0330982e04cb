"""Running test scripts in a fresh Python process."""
import os
import subprocess
import sys
import textwrap
from typing import Dict, Optional

__all__ = ["run_python"]

_PRELUDE = """
import os, sys, warnings
warnings.filterwarnings("ignore")
"""


def run_python(
    code: str, timeout: float = 300, env: Optional[Dict[str, str]] = None, check: bool = True
) -> subprocess.CompletedProcess:
    """Run ``code`` with this interpreter in a new process.

    Parameters
    ----------
    code : str
        Python source; it is dedented.
    timeout : float
        Seconds before the process is killed (``subprocess.TimeoutExpired``).
    env : dict, optional
        Variables added to (or, with the value ``None``, removed from) this
        process's environment.  ``AESARA_FLAGS`` is inherited, so the child
        uses the same compile directory.
    check : bool
        Fail the calling test when the process exits with a non-zero status,
        showing its output.

    Returns
    -------
    subprocess.CompletedProcess
        With ``stdout`` and ``stderr`` as text.
    """
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    proc = subprocess.run(
        [sys.executable, "-c", _PRELUDE + textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"child process exited with {proc.returncode}\n--- stdout\n{proc.stdout}"
            f"\n--- stderr\n{proc.stderr[-6000:]}"
        )
    return proc
