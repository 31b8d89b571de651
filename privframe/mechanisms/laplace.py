"""The discrete Laplace for pure ε-DP: exact samples, their spread, and the Laplace mechanism.

:func:`discrete_laplace` draws P[X = x] ∝ exp(−|x|/b) on the integers exactly,
by Canonne, Kamath & Steinke 2020, Algorithm 2, for any rational scale b (a
float is one), from the CSPRNG (:class:`~privframe.mechanisms.sampler.DiscreteLaplaceSampler`).
:func:`laplace_mechanism` adds it to integer values, or to real values snapped
to a power-of-two grid, with b = Δ₁/ε rounded up: for a query of L1
sensitivity Δ₁ the release is ε-DP (the geometric mechanism of Ghosh,
Roughgarden & Sundararajan 2009). No floating-point noise is ever sampled
(Mironov 2012); ``docs/privacy.md`` ("The discrete Laplace sampler") gives the
argument.

Example:
    >>> import numpy as np
    >>> from privframe.mechanisms.laplace import laplace_mechanism
    >>> laplace_mechanism(np.array([1, 2]), l1_sensitivity=1.0, epsilon=0.5).dtype.name
    'int64'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from privframe.accounting.accountant import Accountant
from privframe.accounting.budgets import PureDP
from privframe.errors import CalibrationError, InvalidValueError
from privframe.mechanisms._coins import exp_neg_bounds
from privframe.mechanisms.gaussian import numeric_array, snap_to_grid
from privframe.mechanisms.randomness import Randomness, resolve_randomness
from privframe.mechanisms.sampler import (
    MAX_LAPLACE_SCALE,
    MIN_LAPLACE_SCALE,
    DiscreteLaplaceSampler,
    check_laplace_scale,
    sample_shape,
)
from privframe.numeric import Number, check_positive, check_real, exact, round_up

__all__ = [
    "discrete_laplace",
    "discrete_laplace_halfwidth",
    "discrete_laplace_std",
    "laplace_mechanism",
    "laplace_scale",
]


def discrete_laplace(
    scale: float | Fraction,
    size: int | tuple[int, ...] | None = None,
    *,
    rng: Randomness | None = None,
) -> npt.NDArray[np.int64]:
    """Draw exact samples of the discrete Laplace with scale b: P[X = x] ∝ exp(−|x|/b) on ℤ.

    Canonne, Kamath & Steinke 2020 (arXiv 2004.00010), Algorithm 2, with every
    coin decided exactly: the output distribution is the discrete Laplace with
    the scale's exact value, no approximation (Mironov 2012 shows what floats
    would leak). With p = e^(−1/b), P[X = x] = (1 − p)/(1 + p)·p^|x|; the std is
    :func:`discrete_laplace_std`, at most sqrt(2)·b. Adding it to an integer
    query of L1 sensitivity Δ is (Δ/b)-DP (see :func:`laplace_mechanism`).

    Args:
        scale: b in [MIN_LAPLACE_SCALE, MAX_LAPLACE_SCALE] = [2^-10, 2^40]: a float,
            taken at its exact binary value, an int, or a Fraction whose numerator
            (in lowest terms) is below 2^53.
        size: an int or shape; ``None`` gives a 0-d array.
        rng: the random source; the OS CSPRNG by default. A
            :class:`SeededRandomness` gives reproducible output and warns that it is
            not private.

    Returns:
        An int64 array of the requested shape.

    Raises:
        InvalidArgumentError: ``scale`` is not a number, or ``size`` or ``rng`` is of
            the wrong type.
        InvalidValueError: ``scale`` is not finite, not positive or out of range
            (an :class:`~privframe.errors.InvalidBudgetError`), or ``size`` is negative.

    Example:
        >>> import privframe as pf
        >>> x = pf.discrete_laplace(scale=2.0, size=100_000)
        >>> x.dtype.name, bool(abs(x.std() - 2.80) < 0.05)
        ('int64', True)
    """
    b = check_laplace_scale(scale)
    shape = sample_shape(size)
    sampler = DiscreteLaplaceSampler(b, resolve_randomness(rng))
    return sampler.sample(math.prod(shape)).reshape(shape)


def discrete_laplace_std(scale: float | Fraction) -> float:
    """The standard deviation of the discrete Laplace with scale b: sqrt(2p)/(1 − p), p = e^(−1/b).

    The variance is 2p/(1 − p)² (the difference of two geometrics); written as
    1/(2·sinh²(1/(2b))) and since sinh(u) >= u, the std is at most sqrt(2)·b,
    the continuous Laplace's, and approaches it as b grows (2.80 against 2.83
    at b = 2). Computed in floats, to a few ulps.

    Example:
        >>> from privframe.mechanisms.laplace import discrete_laplace_std
        >>> round(discrete_laplace_std(2.0), 4), round(discrete_laplace_std(1000.0), 2)
        (2.7992, 1414.21)
    """
    b = float(check_laplace_scale(scale))
    return 1.0 / (math.sqrt(2.0) * math.sinh(0.5 / b))


def _tail_fits(h: int, b: Fraction, q: Fraction) -> bool:
    """True if P(|X| > h) = 2p^(h+1)/(1 + p) <= q is certain, p = e^(−1/b) bracketed exactly."""
    x = (h + 1) / b
    prec = 64 + math.ceil(1.45 * x)  # 2^-prec is far below e^-x: a relative bracket
    _, hi, w = exp_neg_bounds(x, prec)  # p^(h+1) <= hi/2^w
    lo_p, _, w_p = exp_neg_bounds(1 / b, 64 + math.ceil(1.45 / b))  # p >= lo_p/2^w_p
    return 2 * Fraction(hi, 1 << w) <= q * (1 + Fraction(lo_p, 1 << w_p))


def discrete_laplace_halfwidth(scale: float | Fraction, level: float = 0.95) -> int:
    """The smallest h with P(|X| <= h) >= level for the discrete Laplace with scale b.

    P(|X| > h) = 2p^(h+1)/(1 + p) with p = e^(−1/b), so h is about
    b·ln(2/((1 − level)(1 + p))) − 1. The float estimate is checked against
    exact integer brackets of the exponentials (the coins' arithmetic), so [−h, h]
    really has the coverage asked for; only where the tail is within 2^-60 of
    1 − level can h come out one larger than the smallest. ``level`` is taken
    as the larger of its binary value and the decimal it prints as.

    Raises:
        InvalidValueError: ``level`` is not in (0, 1), or ``scale`` is refused as in
            :func:`discrete_laplace`.

    Example:
        >>> from privframe.mechanisms.noise import discrete_laplace_halfwidth
        >>> discrete_laplace_halfwidth(1.0), discrete_laplace_halfwidth(100.0)
        (3, 300)
    """
    b = check_laplace_scale(scale)
    v = check_real("level", level)
    if not 0 < v < 1:
        raise InvalidValueError(f"level must be in (0, 1), got {v!r}")
    q = 1 - max(Fraction(v), Fraction(repr(v)))
    p = math.exp(-1 / float(b))
    h = max(0, math.ceil(float(b) * math.log(2 / (float(q) * (1 + p)))) - 1)
    while not _tail_fits(h, b, q):
        h += 1
    while h > 0 and _tail_fits(h - 1, b, q):
        h -= 1
    return h


def laplace_scale(l1_sensitivity: float, epsilon: Number) -> float:
    """The smallest float b with Δ₁/b <= ε: the discrete Laplace scale of an ε-DP release.

    ε is a budget, read exactly (:func:`~privframe.numeric.exact`: ``0.1`` is
    1/10); Δ₁ is a float taken at its binary value. Rounding b up keeps the
    release ε-DP exactly.

    Raises:
        InvalidBudgetError: a non-finite or non-positive argument.
        CalibrationError: b exceeds the float range.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.mechanisms.laplace import laplace_scale
        >>> laplace_scale(1.0, 0.5), laplace_scale(3.0, 0.3)
        (2.0, 10.0)
        >>> 1 / Fraction(laplace_scale(1.0, 0.3)) <= Fraction(3, 10)
        True
    """
    d = Fraction(check_positive("l1_sensitivity", l1_sensitivity))
    return _scale_up(d, exact("epsilon", epsilon, positive=True))


def _scale_up(sensitivity: Fraction, epsilon: Fraction) -> float:
    """Δ/ε rounded up to a float, or a CalibrationError naming both."""
    try:
        return round_up(sensitivity / epsilon)
    except OverflowError:
        raise CalibrationError(
            f"the Laplace scale for l1_sensitivity={float(sensitivity):.6g} and "
            f"epsilon={float(epsilon):.6g} exceeds the float range; increase epsilon or "
            "reduce the sensitivity"
        ) from None


def _grid_exponent(l1_sensitivity: float, epsilon: Fraction, n: int) -> int:
    """The j of the grid g = 2^-j: the largest power of two with g <= b/2^12 and g·n <= Δ₁/2^12.

    With b = Δ₁/ε both bounds say g <= Δ₁/max(ε, n)/2^12, computed exactly.
    Rounding n coordinates to the grid moves each by at most g/2, so the L1
    sensitivity grows from Δ₁ to Δ₁ + g·n <= Δ₁(1 + 2^-12). Only public
    parameters choose j.
    """
    width = Fraction(l1_sensitivity) / max(epsilon, Fraction(max(n, 1)))
    k = width.numerator.bit_length() - width.denominator.bit_length()
    if Fraction(2) ** k > width:
        k -= 1  # now 2^k <= width < 2^(k+1)
    if not -1000 <= k <= 1000:
        raise CalibrationError(
            f"l1_sensitivity/max(epsilon, n) = {float(width):.4g} is outside [2^-1000, 2^1000]: "
            "rescale the values so the noise grid stays within float range"
        )
    return 12 - k


def laplace_mechanism(
    values: npt.ArrayLike,
    l1_sensitivity: float,
    epsilon: Number,
    *,
    rng: Randomness | None = None,
    accountant: Accountant | None = None,
    label: str = "",
    description: Mapping[str, Any] | str = "",
) -> npt.NDArray[np.int64] | npt.NDArray[np.float64]:
    """Release ``values`` with discrete Laplace noise calibrated to pure ε-DP.

    Integer arrays get independent discrete Laplace noise of scale b = Δ₁/ε,
    rounded up (:func:`laplace_scale`), on each coordinate. For neighbouring
    inputs a, a' with ‖a − a'‖₁ <= Δ₁ the output densities differ by at most
    exp(Σ|aᵢ − a'ᵢ|/b) <= exp(Δ₁/b) <= e^ε: the release is ε-DP (the geometric
    mechanism, Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath &
    Steinke 2020, §2). Real arrays are snapped to the grid 2^-j (g <= b/2^12
    and g·n <= Δ₁/2^12, chosen from public parameters only), which moves each
    of the n coordinates by at most g/2 and so the L1 sensitivity from Δ₁ to
    Δ₁ + g·n; they are noised in grid units with b computed for that inflated
    sensitivity and scaled back, so every output is a grid point and no
    floating-point noise is ever sampled (Mironov 2012).

    With an ``accountant`` (of a pure-DP budget), ``PureDP(epsilon)`` is
    charged to it (with ``label``, ``description`` and the ``seeded`` flag of
    ``rng``) after the input is validated and before any noise is drawn: a
    release that does not fit raises
    :class:`~privframe.errors.BudgetExceededError` and produces nothing.

    Args:
        values: an int or float array: the exact query answer.
        l1_sensitivity: Δ₁ > 0, the L1 sensitivity of the query under add/remove
            of one privacy unit.
        epsilon: ε > 0 spent by this release, read exactly (``0.1`` is 1/10).
        rng: the random source; the OS CSPRNG by default.
        accountant: charge ``PureDP(epsilon)`` here first; without it the caller
            must charge it.
        label: the ledger label, with ``accountant``.
        description: the ledger description, with ``accountant``.

    Returns:
        A noisy copy of the same shape: int64 for integer input, float64 for real input.

    Raises:
        InvalidArgumentError: ``values`` is not an int or float array.
        InvalidValueError: a value is not finite, or too large for int64 grid units
            (|value| >= 2^62 in grid units).
        InvalidBudgetError: ``l1_sensitivity`` or ``epsilon`` is not a positive number.
        CalibrationError: the noise scale in grid units is outside
            [MIN_LAPLACE_SCALE, MAX_LAPLACE_SCALE]; for real values that needs
            n/ε beyond about 2^27.

    Example:
        >>> import numpy as np
        >>> import privframe as pf
        >>> noisy = pf.laplace_mechanism(np.array([10, 20, 30]), l1_sensitivity=1.0, epsilon=0.5)
        >>> noisy.dtype.name, noisy.shape
        ('int64', (3,))
        >>> pf.laplace_mechanism(np.array([0.25]), l1_sensitivity=1.0, epsilon=1.0).dtype.name
        'float64'
        >>> acct = pf.accounting.Accountant(pf.PureDP(1.0))
        >>> _ = pf.laplace_mechanism(np.array([3]), 1.0, 0.25, accountant=acct, label="q")
        >>> acct.remaining
        PureDP(epsilon=0.75)
    """
    arr = numeric_array(values)
    delta_1 = Fraction(check_positive("l1_sensitivity", l1_sensitivity))
    eps = exact("epsilon", epsilon, positive=True)
    if arr.dtype.kind in "iu":
        if arr.size and not np.abs(arr.astype(np.float64)).max() < 2.0**62:
            raise InvalidValueError("integer values must satisfy |value| < 2^62 to be noised")
        j = 0
        units = arr.astype(np.int64)
        sensitivity = delta_1
    else:
        j = _grid_exponent(float(delta_1), eps, arr.size)
        units = snap_to_grid(arr, j)
        # Δ₁ + g·n exactly: the L1 sensitivity after snapping (see _grid_exponent).
        sensitivity = delta_1 + arr.size * Fraction(2) ** -j
    # b in grid units, rounded up: (Δ₁ + g·n)·2^j / b <= ε holds exactly.
    scale = _scale_up(sensitivity * Fraction(2) ** j, eps)
    if not MIN_LAPLACE_SCALE <= scale <= MAX_LAPLACE_SCALE:
        raise CalibrationError(
            f"l1_sensitivity={float(delta_1)!r}, epsilon={float(eps):.6g} over n={arr.size} "
            f"values call for noise of scale {scale:.4g} grid units, outside "
            f"[{MIN_LAPLACE_SCALE:.4g}, {MAX_LAPLACE_SCALE:.4g}]; use another epsilon or "
            "rescale the values"
        )
    sampler = DiscreteLaplaceSampler(Fraction(scale), resolve_randomness(rng))
    if accountant is not None:
        accountant.spend(
            PureDP(eps), label=label, description=description, seeded=sampler.rng.seeded
        )
    noisy = units + sampler.sample(arr.size).reshape(arr.shape)
    return np.asarray(noisy if arr.dtype.kind in "iu" else np.ldexp(noisy.astype(np.float64), -j))
