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

:func:`joint_selection_delta` and :func:`joint_selection_epsilon` give the
(ε, δ) of *one* release with selection by the joint analysis of Wilkins,
Kifer, Zhang & Karrer (2023), which is never worse than the standard
``δ_τ + δ_ρ(ε)`` of :func:`standard_selection_epsilon`; the derivation is in
``docs/privacy.md`` §6.

Example:
    >>> from privframe.mechanisms.selection import discrete_threshold, gaussian_threshold
    >>> round(gaussian_threshold(sigma=1.0, k=1, delta=1e-6), 6)
    5.753424
    >>> discrete_threshold(sigma=1.0, k=1, delta=1e-6)
    7
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy

from privframe.accounting.budgets import zCDP
from privframe.errors import InvalidArgumentError, InvalidBudgetError
from privframe.numeric import (
    GUARD,
    check_conversion_delta,
    check_nonnegative,
    check_positive,
    down,
    sum_up,
    up,
)

__all__ = [
    "discrete_selection_delta",
    "discrete_tail",
    "discrete_threshold",
    "gaussian_threshold",
    "gaussian_threshold_union_bound",
    "joint_selection_delta",
    "joint_selection_epsilon",
    "standard_selection_epsilon",
]


# Below this σ the discrete Gaussian is a point mass at 0 in double precision.
_POINT_MASS_SIGMA = 1 / 40


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
        >>> from privframe.mechanisms.selection import gaussian_threshold
        >>> round(gaussian_threshold(sigma=5.0, k=5, delta=1e-6), 6)
        26.344788
    """
    s = check_positive("sigma", sigma)
    p = _per_group_delta(check_conversion_delta(delta), _check_k(k))
    return 1 - s * float(scipy.special.ndtri(p))


def gaussian_threshold_union_bound(sigma: float, k: int, delta: float) -> float:
    """τ = 1 + σ·Φ⁻¹(1 − δ/k): the union-bound version, slightly larger.

    Example:
        >>> from privframe.mechanisms.selection import gaussian_threshold_union_bound
        >>> round(gaussian_threshold_union_bound(sigma=5.0, k=5, delta=1e-6), 6)
        26.344789
    """
    s = check_positive("sigma", sigma)
    p = check_conversion_delta(delta) / _check_k(k)
    return 1 - s * float(scipy.special.ndtri(p))


def discrete_tail(sigma: float, t: int) -> float:
    """P[Z >= t] for Z ~ N_Z(0, σ²), from the pmf (relative accuracy ~1e-12).

    For σ > 10⁴ it returns the upper bound Φ̄((t − 1)/σ) (for t >= 1): the
    tail sum is at most the Gaussian integral from t − 1, and the normaliser
    is at least sqrt(2π)·σ (Canonne, Kamath & Steinke 2020, Fact 18). For
    σ <= 1/40 every weight but the one at 0 is below e^-800 of it, under half
    the smallest double, so the correctly rounded answer is 1 for t <= 0 and
    0 for t >= 1; it is returned without forming weights that underflow.

    Example:
        >>> from privframe.mechanisms.selection import discrete_tail
        >>> round(2 * discrete_tail(1.0, 3), 12)  # P[|Z| >= 3], cf. the reference values
        0.009134342836
    """
    s = check_positive("sigma", sigma)
    if s > 1e4 and t >= 1:
        return float(scipy.special.ndtr(-(t - 1) / s))
    if s <= _POINT_MASS_SIGMA:
        return 1.0 if t <= 0 else 0.0
    span = math.ceil(40 * s) + 2
    xs = np.arange(-span, span + 1, dtype=np.float64)
    log_w = -(xs**2) / (2 * s * s)
    tail = xs >= t
    if not tail.any():
        return 0.0
    # Both sums are taken relative to their largest weight (the tail's, and 1 at
    # x = 0), so tiny tails keep their digits and no exponential overflows; the
    # tail's scale e^top is applied last, where underflow to 0 is the right rounding.
    top = float(log_w[tail].max())
    ratio = float(np.exp(log_w[tail] - top).sum() / np.exp(log_w).sum())
    return math.exp(top) * ratio


def discrete_selection_delta(sigma: float, k: int, threshold: int) -> float:
    """δ of keeping groups whose noisy distinct count is >= ``threshold``.

    ``1 − (1 − P[1 + Z >= τ])^k`` with Z ~ N_Z(0, σ²): the chance that a unit
    alone in each of its k groups makes one of them appear.

    Example:
        >>> from privframe.mechanisms.selection import discrete_selection_delta
        >>> discrete_selection_delta(1.0, 1, 7) <= 1e-6 < discrete_selection_delta(1.0, 1, 6)
        True
    """
    p = discrete_tail(sigma, threshold - 1)
    return -math.expm1(_check_k(k) * math.log1p(-p)) if p < 1 else 1.0


def discrete_threshold(sigma: float, k: int, delta: float) -> int:
    """The smallest integer τ with :func:`discrete_selection_delta` <= δ.

    Example:
        >>> from privframe.mechanisms.selection import discrete_threshold
        >>> discrete_threshold(sigma=10.0, k=5, delta=1e-6)
        53
    """
    s = check_positive("sigma", sigma)
    k = _check_k(k)
    target = check_conversion_delta(delta)
    # Start just below the continuous answer and step up: the discrete tail is close.
    tau = max(1, math.floor(gaussian_threshold(s, k, target)) - 2)
    while discrete_selection_delta(s, k, tau) > target:
        tau += 1
    while tau > 1 and discrete_selection_delta(s, k, tau - 1) <= target:
        tau -= 1
    return tau


# ---------------------------------------------------------------------------
# The joint analysis of one release (Wilkins, Kifer, Zhang & Karrer 2023)
# ---------------------------------------------------------------------------


def _check_survival(p: object) -> float:
    """The survival probability ``p`` of a single-unit group: 0 <= p < 1."""
    v = check_nonnegative("p", p)
    if v >= 1:
        raise InvalidBudgetError(
            f"p (the survival probability of a single-unit group) must be < 1, got {v!r}"
        )
    return v


def _log_hidden_bounds(j: int, p: float) -> tuple[float, float]:
    """Floats ``lo <= ln((1 − p)^j) <= hi <= 0``: all j new groups stay hidden."""
    if j == 0 or p == 0:
        return 0.0, 0.0
    value = j * math.log1p(-p)
    error = GUARD * -value
    return down(value, error), min(0.0, up(value, error))


def _any_survives(j: int, p: float) -> float:
    """``1 − (1 − p)^j`` rounded up: some of j single-unit groups is released.

    Example:
        >>> from privframe.mechanisms.selection import _any_survives
        >>> _any_survives(1, 0.25), _any_survives(2, 0.5) >= 0.75
        (0.25, True)
    """
    if j == 0 or p == 0:
        return 0.0
    if j == 1:
        return p
    value = -math.expm1(_log_hidden_bounds(j, p)[0])
    return min(1.0, up(value, GUARD * value))


def _existing_part_delta(epsilon: float, rho: float, j: int, p: float) -> float:
    """Upper bound on δ(ε) when j of the unit's groups are new and the rest exist.

    With ``q = (1 − p)^j`` the chance that the j new groups all stay hidden,
    and δ_ρ the CKS curve of :meth:`privframe.zCDP.delta_at` for the whole
    release's ρ (charged to the existing groups, however many):

    - adding the unit: ``1 − q + q·δ_ρ(ε − ln q)``;
    - removing it: ``H_{q·e^ε}`` of the existing part, bounded by
      ``δ_ρ(ε + ln q)`` (by ``1 − e^{ε'} + e^{ε'}·δ_ρ(−ε')`` when
      ``ε' = ε + ln q < 0``) and by ``1 − q + q·δ_ρ(ε)``; the smaller is used.

    Every rounding goes towards a larger result. ``j = 0`` gives δ_ρ(ε).

    Example:
        >>> import privframe as pf
        >>> from privframe.mechanisms.selection import _existing_part_delta
        >>> _existing_part_delta(2.0, 0.5, 0, 0.1) == pf.zCDP(0.5).delta_at(2.0)
        True
    """
    curve = zCDP(rho).delta_at
    if j == 0 or p == 0:
        return curve(epsilon)
    log_lo, log_hi = _log_hidden_bounds(j, p)
    hidden = math.exp(log_hi)
    hidden = min(1.0, up(hidden, GUARD * hidden))  # >= q
    shown = _any_survives(j, p)  # >= 1 − q

    def mix(d: float) -> float:
        """``1 − q + q·d`` rounded up (it decreases in q, so q's bounds suffice)."""
        product = hidden * d
        return min(1.0, sum_up("delta", shown, up(product, GUARD * product)))

    # Adding: the effective ε is raised by −ln q >= 0; round it down.
    raised = down(epsilon - log_hi, GUARD * (epsilon - log_hi))
    add = mix(curve(max(epsilon, raised)))
    # Removing: the effective ε' = ε + ln q is lowered; lo <= ε' <= hi.
    lo = down(epsilon + log_lo, GUARD * (epsilon - log_lo))
    hi = min(epsilon, up(epsilon + log_hi, GUARD * (epsilon - log_hi)))
    if lo >= 0:
        shifted = curve(lo)
    else:
        # H_{e^-x}(A||A') = 1 − e^-x + e^-x H_{e^x}(A'||A) for x = −ε' > 0.
        x_lo, x_hi = max(0.0, -hi), -lo
        gap = -math.expm1(-x_hi)
        tail = math.exp(-x_lo) * curve(x_lo)
        shifted = min(1.0, sum_up("delta", up(gap, GUARD * gap), up(tail, GUARD * tail)))
    remove = min(shifted, mix(curve(epsilon)))
    return max(add, remove)


def joint_selection_delta(epsilon: float, rho: float, k: int, p: float) -> float:
    """δ(ε) of one release with private key selection, by the joint analysis.

    A unit in at most ``k`` groups, ``j`` of them new (held by it alone and
    released with probability ``p`` each), the rest already present:

    - ``j = k``: nothing else changes, so δ is ``δ_τ = 1 − (1 − p)^k``;
    - ``j < k``: the existing groups' outputs are a post-processing of the
      release's Gaussian measurements (ρ-zCDP, the whole ρ charged), and the
      new groups' noise is independent; the hockey-stick divergence of that
      product is :func:`_existing_part_delta`, which increases with j, so
      ``j = k − 1`` is the worst.

    δ(ε) is the larger of the two (Wilkins, Kifer, Zhang & Karrer 2023; the
    derivation is in ``docs/privacy.md`` §6). It is never above the standard
    ``δ_τ + δ_ρ(ε)`` and tends to δ_τ as ε grows. For k = 1 it is
    ``max(p, δ_ρ(ε))``. Rounded up.

    Args:
        epsilon: ε >= 0.
        rho: the release's whole ρ >= 0 (selection counts and aggregates).
        k: the most groups one unit may contribute to (``max_groups``).
        p: ``P[1 + Z >= τ]`` for the selection noise Z, i.e.
            ``discrete_tail(sigma, threshold - 1)``, in [0, 1); an upper bound
            on it also gives a valid (larger) δ.

    Returns:
        δ in [0, 1].

    Raises:
        InvalidBudgetError: a malformed ε, ρ or p.
        InvalidArgumentError: k is not a positive integer.

    Example:
        >>> import privframe as pf
        >>> from privframe.mechanisms.selection import joint_selection_delta
        >>> joint_selection_delta(5.0, 0.0, 1, 1e-7)  # no Gaussian part: δ_τ alone
        1e-07
        >>> joint = joint_selection_delta(5.0, 0.5, 1, 1e-7)  # k = 1: max(p, δ_ρ(ε))
        >>> joint == pf.zCDP(0.5).delta_at(5.0)
        True
        >>> joint < pf.zCDP(0.5, delta=1e-7).delta_at(5.0)  # standard: δ_τ + δ_ρ(ε)
        True
    """
    eps = check_nonnegative("epsilon", epsilon)
    rho = check_nonnegative("rho", rho)
    k = _check_k(k)
    p = _check_survival(p)
    return max(_any_survives(k, p), _existing_part_delta(eps, rho, k - 1, p))


def _check_reachable(delta: float, k: int, p: float, *, strict: bool) -> float:
    """δ_τ = 1 − (1 − p)^k (rounded up), after checking that ``delta`` exceeds it."""
    floor = _any_survives(k, p)
    if delta < floor or (strict and delta == floor):
        raise InvalidBudgetError(
            f"delta={delta!r} is not reachable: the selection alone has "
            f"delta_tau = 1 - (1 - p)^k = {floor!r} (k={k}, p={p!r}), which no epsilon "
            f"removes; give a delta {'above' if strict else 'of at least'} delta_tau, "
            "or a larger threshold (smaller p)"
        )
    return floor


def joint_selection_epsilon(delta: float, rho: float, k: int, p: float) -> float:
    """The smallest ε with :func:`joint_selection_delta` <= ``delta``, rounded up.

    Found by bisection on ε, keeping the upper end, at which the (rounded-up)
    δ is checked to be <= ``delta``. δ(ε) decreases to δ_τ = 1 − (1 − p)^k,
    so ``delta`` must be at least δ_τ.

    Args:
        delta: the total δ of the statement, in (0, 1).
        rho: the release's whole ρ >= 0.
        k: the most groups one unit may contribute to.
        p: the survival probability of a single-unit group, in [0, 1).

    Returns:
        ε >= 0.

    Raises:
        InvalidBudgetError: a malformed argument, or ``delta`` < δ_τ.
        InvalidArgumentError: k is not a positive integer.

    Example:
        >>> from privframe.mechanisms.selection import (
        ...     joint_selection_delta, joint_selection_epsilon)
        >>> eps = joint_selection_epsilon(1e-6, 0.5, 1, 1e-7)
        >>> joint_selection_delta(eps, 0.5, 1, 1e-7) <= 1e-6
        True
        >>> round(eps, 4)  # k = 1: the whole 1e-6 goes to ρ (standard: 9e-7)
        5.2215
    """
    target = check_conversion_delta(delta)
    rho = check_nonnegative("rho", rho)
    k = _check_k(k)
    p = _check_survival(p)
    floor = _check_reachable(target, k, p, strict=False)

    def fits(eps: float) -> bool:
        return max(floor, _existing_part_delta(eps, rho, k - 1, p)) <= target

    if fits(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while not fits(hi):
        lo, hi = hi, 2 * hi
        if math.isinf(hi):
            raise InvalidBudgetError(
                f"delta={target!r} is too close to delta_tau = {floor!r} to be certified "
                "in double precision; give a larger delta"
            )
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi


def standard_selection_epsilon(delta: float, rho: float, k: int, p: float) -> float:
    """ε by the standard analysis: ρ converted at ``delta`` − δ_τ, rounded up.

    The release is (ρ, δ_τ)-approximate zCDP with δ_τ = 1 − (1 − p)^k, so it
    is (ε, δ_τ + δ_ρ(ε))-DP: this is :meth:`privframe.zCDP.epsilon` of
    ``zCDP(rho, delta_tau)``, for comparison with :func:`joint_selection_epsilon`.

    Args:
        delta: the total δ, in (δ_τ, 1).
        rho: the release's whole ρ >= 0.
        k: the most groups one unit may contribute to.
        p: the survival probability of a single-unit group, in [0, 1).

    Returns:
        ε >= 0.

    Raises:
        InvalidBudgetError: a malformed argument, or ``delta`` <= δ_τ.
        InvalidArgumentError: k is not a positive integer.

    Example:
        >>> from privframe.mechanisms.selection import (
        ...     joint_selection_epsilon, standard_selection_epsilon)
        >>> standard = standard_selection_epsilon(1e-6, 0.5, 1, 1e-7)
        >>> round(standard, 4), joint_selection_epsilon(1e-6, 0.5, 1, 1e-7) < standard
        (5.243, True)
    """
    target = check_conversion_delta(delta)
    rho = check_nonnegative("rho", rho)
    k = _check_k(k)
    p = _check_survival(p)
    floor = _check_reachable(target, k, p, strict=True)
    # Fractions: the computed floats at their exact value (a float given to zCDP is
    # read as its decimal, which may lie below it).
    return zCDP(Fraction(rho), Fraction(floor)).epsilon(target)
