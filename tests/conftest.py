"""Shared test set-up.

- Hypothesis profiles: ``ci`` (the default, bounded), ``few`` (8 examples,
  the same on every run: the default on the CPU emulation of the GPU, where
  a call costs a second, and the GPU check's test stage, where each new
  configuration costs an Aesara compile)
  and ``long`` (by hand: ``pytest --hypothesis-profile=long``).
- Aesara's BLAS probe is skipped (bincount uses no BLAS), which keeps the
  output readable.  The CPU plan is the default one (``AESARA_BINCOUNT_CPU_PLAN``,
  unless set): no calibration at a worker's first compile.  Under pytest-xdist each worker compiles into a compile
  directory of its own.
- Backends: a test that takes a ``backend`` argument runs on the CPU and on
  the GPU (``tests/backends.py``: ``BACKENDS``), unless it parametrizes
  ``backend`` itself.  Its GPU variant is skipped, with the reason, where it
  is marked ``cpu_only(reason)`` or is the ``openmp_on`` variant (OpenMP is
  a CPU setting); a known GPU fault (``backends.GPU_KNOWN_FAULTS``) makes
  it an xfail (strict on the emulation, where the fault shows every time).
"""
import os

if "blas__ldflags" not in os.environ.get("AESARA_FLAGS", ""):
    os.environ["AESARA_FLAGS"] = ",".join(
        f for f in (os.environ.get("AESARA_FLAGS", ""), "blas__ldflags=") if f
    )
if os.environ.get("PYTEST_XDIST_WORKER"):
    # One Aesara compile directory per pytest-xdist worker (scripts/gpu_check.sh runs the
    # GPU tests so): Aesara compiles under a lock of its directory, one module at a time.
    os.environ["AESARA_FLAGS"] += (
        ",compiledir_format=compiledir_%(short_platform)s-%(processor)s-%(python_version)s-"
        "%(python_bitwidth)s-" + os.environ["PYTEST_XDIST_WORKER"]
    )

# The CPU plan (aesara_bincount_core.cpu_plan): the test-suite runs the default loops,
# unless a test chooses others (tests/test_cpu_plan.py runs every plan and the
# calibration itself), so that no worker times loops, nor compiles the functions the
# calibration times, on its first compile.
os.environ.setdefault("AESARA_BINCOUNT_CPU_PLAN", "default")

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
settings.register_profile(
    "few",
    max_examples=8,
    deadline=None,
    derandomize=True,  # the same examples on every run: no flaky CI
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_EMULATED = os.environ.get("AESARA_BINCOUNT_EMULATED_GPU") == "1"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "few" if _EMULATED else "ci"))

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


#: The skip reason of the GPU variant of an ``openmp_on`` test.
OPENMP_ON_GPU = "CPU only: OpenMP is a CPU setting that GpuBincount ignores (the openmp_off variant runs on the GPU)"


#: ``AESARA_BINCOUNT_LONG=1`` (``make test-long``): run the tests marked ``long`` too (the
#: exhaustive grids and the long fuzzing); without it they are deselected.
LONG = os.environ.get("AESARA_BINCOUNT_LONG") == "1"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "cpu_only(reason): the test's GPU variant (backend=gpu) is skipped with this reason",
    )


def _parametrizes(metafunc, name: str) -> bool:
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if name in names:
            return True
    return False


def pytest_generate_tests(metafunc):
    """Run every test that takes ``backend`` on each of ``backends.BACKENDS``."""
    if "backend" in metafunc.fixturenames and not _parametrizes(metafunc, "backend"):
        from backends import BACKENDS

        metafunc.parametrize("backend", BACKENDS)


#: ``AESARA_BINCOUNT_GPU_PER_FILE=N``: of each file's GPU tests, run N only (the short
#: GPU set of ``make gpu-emulated-short``; ``tests/test_gpu_emulated.py`` passes it on).
GPU_PER_FILE = int(os.environ.get("AESARA_BINCOUNT_GPU_PER_FILE") or 0)


#: ``AESARA_BINCOUNT_GPU_GRID=each`` (``make test``'s emulated GPU suite, which
#: ``tests/test_gpu_emulated.py`` runs so unless ``AESARA_BINCOUNT_LONG=1``): of each
#: parametrized GPU test, only the cases that give each value of each parameter once
#: (the each-choice cover); ``make test-long`` runs every case.
GPU_GRID = os.environ.get("AESARA_BINCOUNT_GPU_GRID", "")


def each_choice(items):
    """``items`` with each parametrized GPU test cut to the cases that cover every value
    of every parameter at least once (the others are returned apart).

    A case is kept, in the collection's order, when it brings a value of a parameter
    that no kept case of its test has yet; a test's first case is always kept, so is
    every test without parameters, and every CPU test.  Cases already skipped cover
    nothing.
    """
    covered, kept, dropped = {}, [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if item.get_closest_marker("gpu") is None or callspec is None or item.get_closest_marker("skip"):
            kept.append(item)
            continue
        seen = covered.setdefault(item.nodeid.split("[")[0], set())
        # the values, not the indices: a list of tuples gives each case an index of its own
        choices = {(name, repr(value)) for name, value in callspec.params.items()}
        if not seen or not choices <= seen:
            seen |= choices
            kept.append(item)
        else:
            dropped.append(item)
    return kept, dropped


def gpu_sample(items, per_file: int):
    """``items`` with at most ``per_file`` GPU tests of each file (the others are returned apart).

    The kept tests are spread over the file (first, last, evenly between), among
    those not already skipped; the CPU tests are all kept.
    """
    by_file = {}
    for item in items:
        if item.get_closest_marker("gpu") is not None and item.get_closest_marker("skip") is None:
            by_file.setdefault(item.nodeid.split("::")[0], []).append(item)
    keep = set()
    for tests in by_file.values():
        step = max(1, len(tests) - 1) / max(1, per_file - 1)
        keep |= {id(tests[min(len(tests) - 1, round(k * step))]) for k in range(min(per_file, len(tests)))}
    kept = [i for i in items if i.get_closest_marker("gpu") is None or id(i) in keep]
    return kept, [i for i in items if i.get_closest_marker("gpu") is not None and id(i) not in keep]


def pytest_collection_modifyitems(config, items):
    """Skip (with the reason) or xfail the GPU variants that cannot pass; leave out
    the ``long`` tests unless ``AESARA_BINCOUNT_LONG=1``; cut the GPU grids to
    their each-choice cover when ``AESARA_BINCOUNT_GPU_GRID=each``; keep a few GPU
    tests per file when ``AESARA_BINCOUNT_GPU_PER_FILE`` says so."""
    _mark_gpu_variants(items)
    if not LONG:
        dropped = [i for i in items if i.get_closest_marker("long") is not None]
        if dropped:
            items[:] = [i for i in items if i.get_closest_marker("long") is None]
            config.hook.pytest_deselected(items=dropped)
    if GPU_GRID == "each" and not LONG:
        items[:], dropped = each_choice(items)
        config.hook.pytest_deselected(items=dropped)
    if GPU_PER_FILE > 0:
        items[:], dropped = gpu_sample(items, GPU_PER_FILE)
        config.hook.pytest_deselected(items=dropped)
    if os.environ.get("PYTEST_XDIST_WORKER") or getattr(config.option, "numprocesses", None):
        # Under pytest-xdist the long tests (marked slow: the emulated GPU suite, the GPU
        # dry run...) go first, so that no worker starts one when the others are done;
        # the emulated GPU suite, the longest by far, first of all (the first worker's
        # share of the tests starts with it, and each worker runs its own in order).  A
        # stable sort: every worker must collect the same order.  The workers collect
        # (xdist sets their numprocesses to None: their environment says they are workers).
        items.sort(key=lambda item: (not item.nodeid.endswith("::test_gpu_suite_on_the_cpu_emulation"),
                                     item.get_closest_marker("slow") is None))


def _mark_gpu_variants(items):
    faults = None
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(params.get("backend"), "name", None) != "gpu":
            continue
        cpu_only = item.get_closest_marker("cpu_only")
        if cpu_only is not None:
            reason = cpu_only.args[0] if cpu_only.args else cpu_only.kwargs["reason"]
            item.add_marker(pytest.mark.skip(reason=f"CPU only: {reason}"))
        elif params.get("openmp") is True:
            item.add_marker(pytest.mark.skip(reason=OPENMP_ON_GPU))
        if faults is None:
            from backends import GPU_KNOWN_FAULTS as faults
        test_id = item.nodeid.split("[")[0]
        for key in (item.nodeid, test_id):
            if key in faults:
                reason, strict, run = faults[key]
                # Strict on the emulation only: on a real GPU a use after release may go unseen.
                item.add_marker(
                    pytest.mark.xfail(reason=f"known GPU fault: {reason}", strict=strict and _EMULATED, run=run)
                )
                break
