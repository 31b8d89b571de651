"""Thresholds for private partition selection with Gaussian noise.

A group observed in the data may be released only if its noisy count of
distinct privacy units clears a threshold τ. A group that exists only because
one unit is in it has a true count of 1, so it appears with probability
P[1 + Z >= τ]; that unit is in at most ``k`` groups, so some such group
appears with probability ``δ = 1 − (1 − P[1 + Z >= τ])^k`` (the noise of the
groups is independent). τ is the smallest threshold whose δ does not exceed
the target (Desfontaines, Voss, Gipson & Mandayam, "Differentially private
partition selection", PoPETs 2022; Google's differential-privacy library,
``GaussianPartitionSelection``). The union bound ``k·P[1 + Z >= τ] <= δ`` is
slightly looser and is provided for comparison.

privframe's noise is the discrete Gaussian, so :func:`discrete_threshold`
uses its exact tail and compares with ``>=``: the probability mass exactly at
the threshold is charged (OpenDP once shipped a version that missed it).
:func:`gaussian_threshold` is the continuous-noise formula, for reference.

Example:
    >>> from privframe.selection import discrete_threshold, gaussian_threshold
    >>> round(gaussian_threshold(sigma=1.0, k=1, delta=1e-6), 6)
    5.753424
    >>> discrete_threshold(sigma=1.0, k=1, delta=1e-6)
    7
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from privframe.accounting import _check_conversion_delta, _check_positive
from privframe.errors import InvalidArgumentError

__all__ = [
    "discrete_selection_delta",
    "discrete_tail",
    "discrete_threshold",
    "gaussian_threshold",
    "gaussian_threshold_union_bound",
]


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InvalidArgumentError(f"k (groups per unit) must be a positive integer, got {k!r}")
    return int(k)


def _per_group_delta(delta: float, k: int) -> float:
    """P with 1 − (1 − p)^k = δ, computed without cancellation: −expm1(log1p(−δ)/k)."""
    return -math.expm1(math.log1p(-delta) / k)


def gaussian_threshold(sigma: float, k: int, delta: float) -> float:
    """τ = 1 + σ·Φ⁻¹((1 − δ)^(1/k)) for continuous Gaussian noise (independent groups).

    Example:
        >>> from privframe.selection import gaussian_threshold
        >>> round(gaussian_threshold(sigma=5.0, k=5, delta=1e-6), 6)
        26.344788
    """
    s = _check_positive("sigma", sigma)
    p = _per_group_delta(_check_conversion_delta(delta), _check_k(k))
    return 1 - s * float(special.ndtri(p))


def gaussian_threshold_union_bound(sigma: float, k: int, delta: float) -> float:
    """τ = 1 + σ·Φ⁻¹(1 − δ/k): the union-bound version, slightly larger.

    Example:
        >>> from privframe.selection import gaussian_threshold_union_bound
        >>> round(gaussian_threshold_union_bound(sigma=5.0, k=5, delta=1e-6), 6)
        26.344789
    """
    s = _check_positive("sigma", sigma)
    p = _check_conversion_delta(delta) / _check_k(k)
    return 1 - s * float(special.ndtri(p))


def discrete_tail(sigma: float, t: int) -> float:
    """P[Z >= t] for Z ~ N_Z(0, σ²), from the pmf (relative accuracy ~1e-12).

    For σ > 10⁴ it returns the upper bound Φ̄((t − 1)/σ) (for t >= 1): the
    tail sum is at most the Gaussian integral from t − 1, and the normaliser
    is at least sqrt(2π)·σ (Canonne, Kamath & Steinke 2020, Fact 18).

    Example:
        >>> from privframe.selection import discrete_tail
        >>> round(2 * discrete_tail(1.0, 3), 12)  # P[|Z| >= 3], cf. the reference values
        0.009134342836
    """
    s = _check_positive("sigma", sigma)
    if s > 1e4 and t >= 1:
        return float(special.ndtr(-(t - 1) / s))
    span = math.ceil(40 * s) + 2
    xs = np.arange(-span, span + 1, dtype=np.float64)
    # Subtract the largest exponent in the tail so tiny tails keep their digits.
    log_w = -(xs**2) / (2 * s * s)
    tail = xs >= t
    if not tail.any():
        return 0.0
    top = log_w[tail].max()
    return float(np.exp(log_w[tail] - top).sum() / np.exp(log_w - top).sum())


def discrete_selection_delta(sigma: float, k: int, threshold: int) -> float:
    """δ of keeping groups whose noisy distinct count is >= ``threshold``.

    ``1 − (1 − P[1 + Z >= τ])^k`` with Z ~ N_Z(0, σ²): the chance that a unit
    alone in each of its k groups makes one of them appear.

    Example:
        >>> from privframe.selection import discrete_selection_delta
        >>> discrete_selection_delta(1.0, 1, 7) <= 1e-6 < discrete_selection_delta(1.0, 1, 6)
        True
    """
    p = discrete_tail(sigma, threshold - 1)
    return -math.expm1(_check_k(k) * math.log1p(-p)) if p < 1 else 1.0


def discrete_threshold(sigma: float, k: int, delta: float) -> int:
    """The smallest integer τ with :func:`discrete_selection_delta` <= δ.

    Example:
        >>> from privframe.selection import discrete_threshold
        >>> discrete_threshold(sigma=10.0, k=5, delta=1e-6)
        53
    """
    s = _check_positive("sigma", sigma)
    k = _check_k(k)
    target = _check_conversion_delta(delta)
    # Start just below the continuous answer and step up: the discrete tail is close.
    tau = max(1, math.floor(gaussian_threshold(s, k, target)) - 2)
    while discrete_selection_delta(s, k, tau) > target:
        tau += 1
    while tau > 1 and discrete_selection_delta(s, k, tau - 1) <= target:
        tau -= 1
    return tau
