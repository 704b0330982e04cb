"""Expected results, computed with NumPy, and how results are compared.

Counts and integer sums are compared exactly.  Float sums are compared with a
bound that holds for *any* order of summation, because ``Bincount`` adds in
another order than NumPy (interleaved copies, one partial histogram per
thread) and Aesara's graph adds in yet another:

For a bin that receives ``k`` finite terms whose absolute values sum to ``S``,
any order of floating-point additions in a format with unit roundoff ``u``
is within ``gamma(k, u) * S`` of the exact sum, where
``gamma(k, u) = k u / (1 - k u)`` (Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., section 4.2).  The reference is the float64
sum, within ``gamma(k, 2**-53) * S`` of the exact one, and the result is
rounded once more to the output dtype (``u * |sum|``).  That bound is loose
for float32 bins with many terms (a lost term can hide under it), so the
fuzz tests also draw integer-valued weights whose sums are exact in every
order as long as ``S`` stays below ``2**mantissa_bits``: those are checked for
equality.

NaN and infinities do not depend on the order: a bin is NaN if it receives a
NaN or both infinities, else +inf or -inf if it receives one, provided no
finite partial sum overflows (the strategies keep ``S`` far below the
dtype's maximum).
"""
from typing import Optional

import numpy as np

__all__ = ["expected_counts", "assert_same_histogram", "gamma"]


def gamma(k, u: float):
    """Higham's ``gamma_k = k u / (1 - k u)`` (elementwise over ``k``)."""
    ku = np.asarray(k, dtype=np.float64) * u
    return ku / (1.0 - ku)


def expected_counts(idx: np.ndarray, nbins: int, out_dtype) -> np.ndarray:
    """``numpy.bincount`` of non-negative ``idx``, cast to ``out_dtype`` (wrapping).

    ``idx`` must hold small non-negative values: never hand this helper a
    value near the top of int64 (numpy 1.26 corrupts its heap computing
    ``max + 1`` there).
    """
    idx = np.asarray(idx)
    if idx.size:
        assert 0 <= int(idx.min()) and int(idx.max()) < 2**40, "refusing a huge value"
    counts = np.bincount(idx.astype(np.int64), minlength=nbins)
    return counts.astype(out_dtype)


def _broadcast_weights(w, size: int) -> Optional[np.ndarray]:
    if w is None:
        return None
    w = np.asarray(w)
    return np.broadcast_to(w.reshape(-1), (size,)) if w.size == 1 else w


def assert_same_histogram(
    got: np.ndarray,
    idx: np.ndarray,
    w,
    nbins: int,
    out_dtype,
    what: str = "",
    starts_at_zero: bool = True,
) -> None:
    """Assert that ``got`` is the scatter-add of ``w`` (or 1) at ``idx``.

    Parameters
    ----------
    got : ndarray
        The result under test.
    idx : ndarray of int
        Bin of each element, already wrapped into ``[0, nbins)``.
    w : ndarray or None
        Increments in ``out_dtype``, one per element or a single one
        (broadcast); ``None`` counts.
    nbins : int
        Expected length.
    out_dtype : dtype
        Expected dtype.  Integer sums wrap modulo ``2**bits``.
    what : str
        Names the comparison in failure messages.
    starts_at_zero : bool
        True: every bin starts at +0.0 before its terms (``numpy.bincount``),
        so a bin that only receives zeros is +0.0.  False: the terms include
        each bin's start (a base), so a bin whose terms are all -0.0 is -0.0
        and one with a +0.0 term is +0.0 (``np.add.at``; -0.0 is the
        additive identity).  The sign of such bins is compared exactly.
    """
    out_dtype = np.dtype(out_dtype)
    assert got.dtype == out_dtype, f"{what}: dtype {got.dtype}, expected {out_dtype}"
    assert got.shape == (nbins,), f"{what}: shape {got.shape}, expected {(nbins,)}"
    idx = np.asarray(idx, dtype=np.int64)
    w = _broadcast_weights(w, idx.size)
    if w is None:
        np.testing.assert_array_equal(got, expected_counts(idx, nbins, out_dtype), err_msg=what)
        return
    if out_dtype.kind in "iu":
        # numpy.bincount sums in float64, which is inexact for large int64
        # weights; np.add.at in the output dtype wraps exactly like Bincount.
        expected = np.zeros(nbins, dtype=out_dtype)
        np.add.at(expected, idx, w.astype(out_dtype))
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    w64 = w.astype(out_dtype).astype(np.float64)
    _assert_float_sums(got, idx, w64, nbins, what, starts_at_zero)


def _assert_float_sums(got, idx, w64, nbins, what, starts_at_zero=True):
    finite = np.isfinite(w64)

    def per_bin(values):
        return np.bincount(idx, weights=values, minlength=nbins)

    k = np.bincount(idx, minlength=nbins)
    s = per_bin(np.where(finite, np.abs(w64), 0.0))
    has_nan = per_bin(np.isnan(w64).astype(np.float64)) > 0
    has_pinf = per_bin((w64 == np.inf).astype(np.float64)) > 0
    has_ninf = per_bin((w64 == -np.inf).astype(np.float64)) > 0
    want_nan = has_nan | (has_pinf & has_ninf)
    want_pinf = has_pinf & ~want_nan
    want_ninf = has_ninf & ~want_nan
    np.testing.assert_array_equal(np.isnan(got), want_nan, err_msg=f"{what}: NaN bins")
    np.testing.assert_array_equal(got == np.inf, want_pinf, err_msg=f"{what}: +inf bins")
    np.testing.assert_array_equal(got == -np.inf, want_ninf, err_msg=f"{what}: -inf bins")

    fin = ~(want_nan | want_pinf | want_ninf)
    ref = per_bin(np.where(finite, w64, 0.0))
    g = got.astype(np.float64)
    info = np.finfo(got.dtype)
    u = float(info.eps) / 2
    bits = info.nmant + 1
    if np.all(w64[finite] == np.round(w64[finite])) and s.max(initial=0) < 2.0**bits:
        # Integer-valued terms whose sums fit the mantissa: exact in any order.
        np.testing.assert_array_equal(g[fin], ref[fin], err_msg=f"{what}: exact sums")
    tol = (gamma(k, u) + gamma(k, 2.0**-53)) * s + u * np.abs(ref) + float(info.smallest_subnormal)
    err = np.abs(g - ref)
    bad = fin & ~(err <= tol)
    if bad.any():
        b = np.flatnonzero(bad)[:5]
        raise AssertionError(
            f"{what}: float sums off by more than the order-independent bound at bins "
            f"{b.tolist()}: got {g[b].tolist()}, float64 reference {ref[b].tolist()}, "
            f"bound {tol[b].tolist()} ({k[b].tolist()} terms)"
        )
    # A bin that only received zeros: +0.0 when it starts at +0.0 (as
    # numpy.bincount gives it), else -0.0 exactly when every term is -0.0.
    zero = fin & (s == 0)
    if starts_at_zero:
        want_neg = np.zeros(nbins, dtype=bool)
    else:
        positive_terms = per_bin((~np.signbit(w64)).astype(np.float64))
        want_neg = (k > 0) & (positive_terms == 0)
    bad = zero & (np.signbit(g) != want_neg)
    if bad.any():
        b = np.flatnonzero(bad)[:5]
        raise AssertionError(
            f"{what}: the sign of zero bins {b.tolist()}: got {g[b].tolist()}, "
            f"expected {np.where(want_neg[b], -0.0, 0.0).tolist()} ({k[b].tolist()} terms)"
        )
