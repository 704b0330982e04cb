"""The CPU plan: which of two equivalent loops the CPU Ops take, chosen on the user's machine.

Some loops of :class:`~aesara_bincount_core.op.Bincount` and
:class:`~aesara_bincount_core.fused.FusedBincount` come in two forms that
add the same values in the same order, so they give the same bits, and
differ only in the instructions that feed the additions.  Which form is
faster depends on the core (how many loads, stores and shuffles it issues a
cycle, how it runs AVX-512) and on where the data lie: on the 2-core AMD
EPYC of family 25, model 17 (Zen 4) where they were written, the faster form
changed with the size of the data and the load of the machine, by 5-15%
either way.  So, as FFTW's planner times the
ways to compute a transform before it picks one (Frigo and Johnson, "The
Design and Implementation of FFTW3", Proc. IEEE 93(2), 2005) and cuDNN's
benchmark mode times its convolution algorithms on first use, the plan is
chosen by timing the forms on the machine that runs them.

The choices (:data:`CHOICES`, the first value of each is the default; the C
side is ``c_code/cpu/plan.h``):

``weights``
    ``vector``: the weights of a group of eight, stored or computed by the
    fused loop, are read or computed as vectors and taken out lane by lane;
    ``scalar``: each weight is read, or computed, as it is added.
``test``
    ``avx2``: the range test and the running maximum of a group of eight
    8-byte values that the fused loop reads in place take two AVX2 vectors;
    ``avx512``: one AVX-512 vector (where the module is built for AVX-512).

Where the plan comes from, at the first compile of a ``Bincount`` (its
``prepare_node``) in a process (:func:`current`):

1. ``AESARA_BINCOUNT_CPU_PLAN`` (:data:`ENV`), when set: ``choice=value``
   pairs separated by commas (``weights=scalar,test=avx512``; a choice not
   named takes its default), ``default``, ``auto`` (as if unset), or
   ``calibrate`` (time the loops again and rewrite the cached plan).  A
   value it does not know raises ``ValueError``.
2. The cache file ``aesara_bincount_cpu_plan.json`` in Aesara's compile
   directory (``aesara.config.compiledir``), which maps a CPU model
   (:func:`~aesara_bincount_core.cpu_plan_cache.cpu_key`: vendor, family,
   model, name and its AVX2 and AVX-512 flags) to its plan, so that
   machines that share a home folder each keep theirs.
3. :func:`calibrate`: each form is timed on a small synthetic case, through
   the Ops themselves (their modules, compiled once like any other), calls
   interleaved, the best of several rounds, by the CPU time of the calling
   thread; a form other than the default must be at least
   :data:`MARGIN` faster to be chosen.  It takes a few milliseconds of
   timing (under a second in all, with the building of the two functions),
   and writes the cache: the plan only (no times, no dates), keys sorted,
   written to a temporary file and renamed into place, so that processes
   calibrating at once each leave a whole file.

The plan reaches the C code as one word, the attribute :data:`ATTR` of
:mod:`aesara_bincount_core`, read at each call (:func:`use` sets another for
a while, for tests).  The loops of a plan give the same results; only the
speed differs.  This module imports Aesara only when it calibrates or reads the cache; the
CPU model and the cache file are in :mod:`aesara_bincount_core.cpu_plan_cache`.
"""
import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

from aesara_bincount_core import cpu_plan_cache
from aesara_bincount_core.cpu_plan_cache import CACHE_NAME, FORMAT, ISA_FLAGS, cache_path, cpu_key, cpu_model

__all__ = [
    "ATTR",
    "all_plans",
    "CACHE_NAME",
    "CHOICES",
    "ENV",
    "FORMAT",
    "MARGIN",
    "Plan",
    "cache_path",
    "calibrate",
    "choose",
    "cpu_key",
    "cpu_model",
    "current",
    "parse",
    "use",
]

#: The environment variable that forces a plan (see the module docstring).
ENV = "AESARA_BINCOUNT_CPU_PLAN"
#: The attribute of ``aesara_bincount_core`` the C code reads (BC_PLAN_ATTR).
ATTR = "_cpu_plan_v1"
#: Each choice and its values, the default first.
CHOICES: Dict[str, Tuple[str, ...]] = {"weights": ("vector", "scalar"), "test": ("avx2", "avx512")}
#: The bit of the plan word that each value other than the default sets
#: (BC_PLAN_SCALAR_WEIGHTS, BC_PLAN_AVX512_TEST of cpu/plan.h).
_BITS = {("weights", "scalar"): 0x1, ("test", "avx512"): 0x2}
#: A plan other than the default must be this much faster to be chosen (the
#: calibration of one machine moved by a few per cent from run to run).
MARGIN = 0.05


@dataclass(frozen=True)
class Plan:
    """A plan: the value of each choice, and where it came from.

    Attributes
    ----------
    choices : tuple of (str, str)
        ``(choice, value)`` for every choice of :data:`CHOICES`, in its order.
    source : str
        ``"default"``, ``"forced"`` (:data:`ENV`), ``"cache"`` or ``"calibrated"``.
    """

    choices: Tuple[Tuple[str, str], ...]
    source: str = "default"

    @property
    def word(self) -> int:
        """The plan word of ``c_code/cpu/plan.h``."""
        return sum(_BITS.get(c, 0) for c in self.choices)

    def text(self) -> str:
        """``choice=value,...``, which :func:`parse` reads back."""
        return ",".join(f"{k}={v}" for k, v in self.choices)

    def as_dict(self) -> Dict[str, str]:
        return dict(self.choices)


def _plan(values: Dict[str, str], source: str) -> Plan:
    return Plan(tuple((k, values.get(k, opts[0])) for k, opts in CHOICES.items()), source)


DEFAULT = _plan({}, "default")


def parse(text: str, source: str = "forced") -> Plan:
    """The plan that ``text`` names.

    Parameters
    ----------
    text : str
        ``choice=value`` pairs separated by commas (:data:`CHOICES`); a choice
        not named takes its default, so ``""`` is the default plan.
    source : str
        The plan's :attr:`Plan.source`.

    Returns
    -------
    Plan

    Raises
    ------
    ValueError
        An unknown choice or value, or a pair without ``=``; the message lists
        the choices and their values.
    """
    values: Dict[str, str] = {}
    allowed = "; ".join(f"{k}: {' or '.join(v)}" for k, v in CHOICES.items())
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or key not in CHOICES or value not in CHOICES[key]:
            raise ValueError(
                f"{ENV}: cannot read {part!r} of {text!r}; give choice=value pairs separated by "
                f"commas ({allowed}), or one of default, auto, calibrate"
            )
        values[key] = value
    return _plan(values, source)


# -- the cache -----------------------------------------------------------------
def _cached(path: str, key: str) -> Optional[Plan]:
    values = cpu_plan_cache.read(path).get(key)
    if values is None:
        return None
    try:
        return parse(",".join(f"{k}={v}" for k, v in sorted(values.items())), source="cache")
    except ValueError:
        return None  # a plan of choices this version does not have: calibrate again


def _write_cache(path: str, key: str, plan: Plan) -> None:
    cpu_plan_cache.write(path, key, plan.as_dict())


# -- the plan of this process --------------------------------------------------
_lock = threading.RLock()
_plan_now: Optional[Plan] = None
_busy = False  # a calibration is running (its own Ops must not start another)


def _set_word(word: int) -> None:
    import aesara_bincount_core

    setattr(aesara_bincount_core, ATTR, int(word))


def current() -> Plan:
    """The plan of this process, made on first use.

    The first call forces, reads or calibrates the plan (see the module
    docstring), sets the word the C code reads, and keeps the plan for the
    process; later calls return it.  ``Bincount.prepare_node`` calls it, so
    the plan is made when the first function with a CPU ``Bincount`` (or
    ``FusedBincount``) is compiled.  Thread-safe (one lock); a calibration
    runs on the calling thread and holds the GIL while it times.

    Returns
    -------
    Plan

    Raises
    ------
    ValueError
        :data:`ENV` holds a value it does not know.

    Warns
    -----
    RuntimeWarning
        The calibration failed (no C compiler, a failed build): the default
        plan is used, and nothing is cached.
    """
    global _plan_now
    with _lock:
        if _plan_now is not None or _busy:
            return _plan_now or DEFAULT
        forced = os.environ.get(ENV, "").strip()
        if forced in ("", "auto", "calibrate"):
            path, key = cache_path(), cpu_key()
            plan = None if forced == "calibrate" else _cached(path, key)
            if plan is None:
                plan = _calibrate_or_default(path, key)
        elif forced == "default":
            plan = Plan(DEFAULT.choices, "forced")
        else:
            plan = parse(forced)
        _plan_now = plan
        _set_word(plan.word)
        return plan


def _calibrate_or_default(path: str, key: str) -> Plan:
    try:
        plan, _ = calibrate()
    except Exception as exc:  # noqa: BLE001  (no compiler, a failed build: keep the default)
        import warnings

        warnings.warn(f"aesara_bincount: the CPU plan could not be calibrated ({exc!r}); "
                      "the default loops are used", RuntimeWarning, stacklevel=3)
        return DEFAULT
    with contextlib.suppress(OSError):
        _write_cache(path, key, plan)
    return plan


@contextlib.contextmanager
def use(plan) -> Iterator[Plan]:
    """Run the CPU Ops with ``plan`` inside a ``with`` block.

    Parameters
    ----------
    plan : Plan or str
        The plan, or its text (:func:`parse`).

    Yields
    ------
    Plan
        The plan in force; the one before is put back at the end.

    Raises
    ------
    ValueError
        A text :func:`parse` refuses.

    Notes
    -----
    The word is process-wide: calls in other threads meanwhile take it too.
    Results do not depend on the plan, only the speed (the tests run every
    plan through it).
    """
    global _plan_now
    if not isinstance(plan, Plan):
        plan = parse(plan)
    with _lock:
        before = _plan_now
        _plan_now = plan
        _set_word(plan.word)
    try:
        yield plan
    finally:
        with _lock:
            _plan_now = before
            _set_word(before.word if before is not None else 0)


# -- calibration -----------------------------------------------------------------
def _probes(n: int, bins: int, seed: int):
    """The two synthetic cases: weighted Bincount and the fused ``th * v``; (name, call) pairs."""
    import numpy as np

    import aesara
    import aesara.scalar as aes
    import aesara.tensor as at

    from aesara_bincount_core.fused import FusedBincount
    from aesara_bincount_core.op import Bincount

    rng = np.random.default_rng(seed)
    x = aesara.shared(rng.integers(0, bins, n), name="x")
    w = aesara.shared(rng.random(n), name="w")
    th = at.dscalar("th")
    a, b = aes.float64(), aes.float64()
    mul = aes.Composite([a, b], [a * b])
    mode = aesara.compile.mode.get_default_mode()
    with aesara.config.change_flags(openmp=False):
        weighted = aesara.function([], Bincount("bincount", "float64", openmp=False)(x, 0, w), mode=mode)
        fused = aesara.function(
            [th], FusedBincount("bincount", "float64", openmp=False, w_op=mul)(x, 0, th, w), mode=mode
        )
    return [("weighted", weighted, ()), ("fused", fused, (2.5,))]


def calibrate(n: int = 1 << 18, bins: int = 1000, rounds: int = 5, calls: int = 3,
              seed: int = 0) -> Tuple[Plan, Dict[str, float]]:
    """Time every plan on the synthetic cases and return the fastest, with the times.

    Each case (a weighted ``Bincount`` and the fused ``bincount(x, weights=th
    * v)``, ``n`` values in ``bins`` bins, one thread) is called under every
    plan, the plans interleaved call by call, each timed call right after an
    untimed one of the same plan; a plan's time is the sum over the cases of
    the best, over ``rounds`` rounds, of the median of ``calls`` calls, in the
    CPU time of the calling thread.  The default plan is kept unless another
    is :data:`MARGIN` faster.  Sets nothing and writes nothing.

    Parameters
    ----------
    n : int
        Values of the synthetic cases (2**18 by default: 2 MiB of int64,
        beyond a core's L2 cache, as the cases the benchmarks time).
    bins : int
        Their bins (1000, as the seed case).
    rounds, calls : int
        Rounds, and calls of each plan and case per round.
    seed : int
        Seed of the synthetic values.

    Returns
    -------
    (Plan, dict)
        The plan (source ``"calibrated"``), and the time of each plan in
        microseconds, by its text.

    Raises
    ------
    Exception
        Whatever compiling the two functions raises (no C compiler, a failed
        build); :func:`current` then keeps the default plan.

    Notes
    -----
    The first calibration on a machine compiles the two functions it times
    (seconds, once: Aesara's compile cache keeps them); then it takes about
    0.1 s of timing, 0.25-0.75 s in all on the 2-core development machine at
    a load average of 8.  It leaves the plan word as it was.
    """
    import numpy as np

    global _busy
    plans = all_plans()
    with _lock:
        _busy = True
        try:
            probes = _probes(n, bins, seed)
            best: Dict[Tuple[str, str], float] = {}
            for _ in range(rounds):
                samples: Dict[Tuple[str, str], List[float]] = {}
                for _ in range(calls):
                    for name, f, args in probes:
                        for p in plans:
                            _set_word(p.word)
                            f(*args)  # the lead-in
                            t0 = time.thread_time_ns()
                            f(*args)
                            samples.setdefault((p.text(), name), []).append(time.thread_time_ns() - t0)
                for k, v in samples.items():
                    med = float(np.median(v)) / 1e3
                    best[k] = min(best.get(k, med), med)
        finally:
            _busy = False
            _set_word(_plan_now.word if _plan_now is not None else 0)
    totals = {p.text(): sum(best[(p.text(), name)] for name, _, _ in probes) for p in plans}
    return choose(totals), totals


def choose(totals: Dict[str, float]) -> Plan:
    """The plan of the smallest time in ``totals`` (by plan text), unless the
    default's is within :data:`MARGIN` of it; source ``"calibrated"``."""
    default = DEFAULT.text()
    fastest = min(totals, key=lambda t: (totals[t], t != default, t))
    if default in totals and totals[fastest] * (1 + MARGIN) > totals[default]:
        fastest = default
    return parse(fastest, source="calibrated")


def all_plans() -> List[Plan]:
    plans = [DEFAULT]
    for key, values in CHOICES.items():
        plans = [_plan(dict(p.choices, **{key: v}), "default") for p in plans for v in values]
    return plans
