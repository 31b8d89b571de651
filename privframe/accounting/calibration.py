"""Noise calibration: the Gaussian σ for an L2 sensitivity and a budget, and the ρ of a σ.

σ = Δ/sqrt(2ρ) for ρ-zCDP (Bun & Steinke 2016, Prop. 1.6), the analytic
Gaussian for (ε, δ) (Balle & Wang 2018, Thm. 8) and the classical one (Dwork
& Roth 2014, Thm. A.1); σ rounds up, ρ spent rounds up.

Example:
    >>> from privframe.accounting.calibration import gaussian_sigma
    >>> gaussian_sigma(1.0, 0.5)
    1.0
"""

from __future__ import annotations

import math
from fractions import Fraction

from privframe.accounting.conversions import exp_up, gaussian_log_delta, increase_until
from privframe.errors import CalibrationError
from privframe.numeric import (
    GUARD,
    LOG_FLOOR,
    Number,
    check_conversion_delta,
    check_nonnegative,
    check_positive,
    exact,
    round_up,
    solve,
    sqrt_up,
    up,
)

# ---------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------


def gaussian_sigma(l2_sensitivity: float, rho: Number) -> float:
    """The σ at which a Gaussian with L2 sensitivity Δ costs at most ρ: Δ/sqrt(2ρ).

    Bun & Steinke 2016 (arXiv 1605.02065), Prop. 1.6: the Gaussian mechanism
    is Δ²/(2σ²)-zCDP. Returns the smallest float σ with
    Δ²/(2σ²) <= ρ in exact rational arithmetic. ρ is a budget, read exactly
    (:func:`exact`: ``0.1`` is 1/10, a ``Fraction`` is itself); Δ is a float
    taken at its binary value.

    Args:
        l2_sensitivity: Δ > 0.
        rho: ρ > 0.

    Returns:
        σ > 0.

    Raises:
        InvalidBudgetError: on a non-finite or non-positive argument.
        CalibrationError: if σ exceeds the float range.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.accounting.calibration import gaussian_sigma
        >>> gaussian_sigma(1.0, 0.5)
        1.0
        >>> gaussian_sigma(2.0, 0.125)
        4.0
        >>> sigma = gaussian_sigma(1.0, Fraction(1, 30))
        >>> 1 / (2 * Fraction(sigma) ** 2) <= Fraction(1, 30)
        True
    """
    delta_f = Fraction(check_positive("l2_sensitivity", l2_sensitivity))
    rho_f = exact("rho", rho, positive=True)
    try:
        return sqrt_up(delta_f**2 / (2 * rho_f))
    except OverflowError:
        raise CalibrationError(
            f"sigma for l2_sensitivity={float(delta_f)!r} and rho={float(rho_f):.6g} exceeds "
            "the float range; increase rho or reduce the sensitivity"
        ) from None


def gaussian_rho(l2_sensitivity: float, sigma: float) -> float:
    """The zCDP cost ρ = Δ²/(2σ²) of a Gaussian release, rounded up (also as a decimal).

    ``zCDP(gaussian_rho(Δ, σ))`` charges at least the exact ρ: the float
    returned is one whose shortest decimal, as budgets read it, is >= ρ.

    Bun & Steinke 2016 (arXiv 1605.02065), Prop. 1.6; exact in rationals.
    The same bound holds for the discrete Gaussian with scale σ (Canonne,
    Kamath & Steinke 2020, Sec. 2).

    Args:
        l2_sensitivity: Δ > 0.
        sigma: σ > 0.

    Returns:
        ρ > 0.

    Raises:
        InvalidBudgetError: on a non-finite or non-positive argument.
        CalibrationError: if ρ exceeds the float range.

    Example:
        >>> from privframe.accounting.calibration import gaussian_rho
        >>> gaussian_rho(1.0, 2.0)
        0.125
    """
    delta_f = Fraction(check_positive("l2_sensitivity", l2_sensitivity))
    sigma_f = Fraction(check_positive("sigma", sigma))
    rho = delta_f**2 / (2 * sigma_f**2)
    try:
        spend = round_up(rho)
        # A ρ to spend: zCDP(spend) reads the float as its shortest decimal, which may
        # lie below it; the next float up reads above the exact ρ.
        if exact("rho", spend) < rho:
            spend = math.nextafter(spend, math.inf)
    except OverflowError:
        raise CalibrationError(
            f"rho for l2_sensitivity={float(delta_f)!r} and sigma={float(sigma_f)!r} exceeds "
            "the float range; increase sigma"
        ) from None
    return spend


def analytic_gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """The smallest σ at which one Gaussian release is (ε, δ)-DP (analytic Gaussian).

    Balle & Wang 2018 (ICML, arXiv 1805.06530), Thm. 8: the Gaussian mechanism
    is (ε, δ)-DP iff Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) <= δ. The
    left side depends on μ = Δ/σ only and increases with μ; we solve for μ
    with Brent's method on the log-space residual, set σ = Δ/μ rounded up,
    then raise σ until a rounded-up evaluation of δ(σ) is <= δ.

    Valid for every ε >= 0 (unlike :func:`classical_gaussian_sigma`). It
    calibrates a single release; for a session spending in zCDP use
    :func:`gaussian_sigma`.

    Args:
        l2_sensitivity: Δ > 0.
        epsilon: ε >= 0.
        delta: δ in (0, 1).

    Returns:
        σ > 0.

    Raises:
        InvalidBudgetError: on a malformed argument.
        CalibrationError: if no float σ meets the target.

    Example:
        >>> from privframe.accounting.calibration import analytic_gaussian_sigma
        >>> round(analytic_gaussian_sigma(1.0, 1.0, 1e-5), 6)
        3.730632
    """
    sens = check_positive("l2_sensitivity", l2_sensitivity)
    eps = check_nonnegative("epsilon", epsilon)
    delta = check_conversion_delta(delta)
    target = math.log(delta)

    def excess(u: float) -> float:
        return max(gaussian_log_delta(math.exp(u), eps), LOG_FLOOR) - target

    lo, hi, step = 0.0, 0.0, 1.0
    while excess(lo) >= 0:
        lo -= step
        step *= 2
        if lo < -1500:
            raise CalibrationError(f"no sigma reaches delta={delta!r} at epsilon={eps!r}")
    step = 1.0
    while excess(hi) <= 0:
        hi += step
        step *= 2
        if hi > 700:
            raise CalibrationError(f"no sigma reaches delta={delta!r} at epsilon={eps!r}")
    root = solve(excess, lo, hi) if lo < hi else None
    mu = math.exp(lo if root is None else root)
    sens_f = Fraction(sens)

    def certified(sigma: float) -> bool:
        mu_up = round_up(sens_f / Fraction(sigma))
        return exp_up(gaussian_log_delta(mu_up, eps, upper=True)) <= delta

    try:
        start = round_up(sens_f / Fraction(mu))
    except OverflowError:
        start = math.inf
    sigma = None if math.isinf(start) else increase_until(start, certified)
    if sigma is None:
        raise CalibrationError(
            f"no float sigma can be certified for l2_sensitivity={sens!r}, epsilon={eps!r}, "
            f"delta={delta!r} in double precision; use a larger delta or epsilon"
        )
    return sigma


def classical_gaussian_sigma(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """The classical σ = Δ sqrt(2 ln(1.25/δ))/ε, only for 0 < ε < 1.

    Dwork & Roth 2014, *The Algorithmic Foundations of DP*, Thm. A.1: for
    ε ∈ (0, 1) and c² > 2 ln(1.25/δ), σ >= cΔ/ε gives (ε, δ)-DP. The value is
    rounded up a few ulps, which also makes the inequality on c strict. The
    theorem says nothing for ε >= 1 and the formula is indeed wrong for large
    ε (at δ = 1e-5 it fails for every ε above about 8.42), so ε >= 1 is
    refused: use :func:`analytic_gaussian_sigma`, which is also smaller.

    Args:
        l2_sensitivity: Δ > 0.
        epsilon: ε in (0, 1).
        delta: δ in (0, 1).

    Returns:
        σ > 0.

    Raises:
        InvalidBudgetError: on a malformed argument.
        CalibrationError: if ε >= 1.

    Example:
        >>> from privframe.accounting.calibration import classical_gaussian_sigma
        >>> round(classical_gaussian_sigma(1.0, 0.5, 1e-5), 6)
        9.689611
    """
    sens = check_positive("l2_sensitivity", l2_sensitivity)
    eps = check_positive("epsilon", epsilon)
    delta = check_conversion_delta(delta)
    if eps >= 1:
        raise CalibrationError(
            f"classical_gaussian_sigma is proven only for epsilon < 1, got epsilon={eps!r} "
            "(Dwork & Roth 2014, Thm. A.1); use analytic_gaussian_sigma, which is exact "
            "for every epsilon"
        )
    sigma = sens * math.sqrt(2 * math.log(1.25 / delta)) / eps
    if not math.isfinite(sigma):
        raise CalibrationError(
            f"sigma for l2_sensitivity={sens!r}, epsilon={eps!r}, delta={delta!r} exceeds "
            "the float range"
        )
    return up(sigma, GUARD * sigma)
