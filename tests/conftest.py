"""Shared test set-up.

- Hypothesis profiles: ``ci`` (the default, bounded) and ``long`` (by hand:
  ``pytest --hypothesis-profile=long``).
- Aesara's BLAS probe is skipped (bincount uses no BLAS), which keeps the
  output readable.
"""
import os

if "blas__ldflags" not in os.environ.get("AESARA_FLAGS", ""):
    os.environ["AESARA_FLAGS"] = ",".join(
        f for f in (os.environ.get("AESARA_FLAGS", ""), "blas__ldflags=") if f
    )

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)


@pytest.fixture(params=[False, True], ids=["openmp_off", "openmp_on"])
def openmp(request):
    """Compile under ``aesara.config.openmp`` off and on."""
    import aesara

    with aesara.config.change_flags(openmp=request.param):
        yield request.param
