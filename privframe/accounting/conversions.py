"""Conversions between zCDP, (ε, δ)-DP and μ-GDP, each the tightest bound proven valid.

zCDP → (ε, δ): Bun & Steinke 2016, Prop. 1.3, and Canonne, Kamath & Steinke
2020, Cor. 13 and its inverse; μ-GDP ↔ (ε, δ): Dong, Roth & Su 2022, Cor. 2.13
(the exact Gaussian privacy curve of Balle & Wang 2018). Every result is
rounded towards less privacy claimed.

Example:
    >>> from privframe.accounting.conversions import zcdp_epsilon_simple
    >>> round(zcdp_epsilon_simple(0.5, 1e-5), 4)
    5.2985
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import scipy

from privframe.errors import InvalidBudgetError
from privframe.numeric import (
    GUARD,
    LOG_FLOOR,
    ULP,
    decimal,
    down,
    log1p_exp,
    round_down,
    solve,
    up,
)

# ---------------------------------------------------------------------------
# zCDP -> (ε, δ): Bun & Steinke 2016 and Canonne, Kamath & Steinke 2020
# ---------------------------------------------------------------------------


def zcdp_epsilon_simple(rho: float, delta: float) -> float:
    """Upper bound on ε = ρ + 2 sqrt(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    log_inv_delta = -math.log(delta)
    eps = rho + 2 * math.sqrt(rho * log_inv_delta)
    return up(eps, GUARD * eps)


def _zcdp_epsilon_cks(rho: float, delta: float) -> float:
    """Upper bound on the CKS ε for ρ-zCDP at δ; ``inf`` if it cannot be evaluated.

    Canonne, Kamath & Steinke 2020 (arXiv 2004.00010), Sec. 2.3, Prop. 12 and
    Cor. 13: ρ-zCDP implies (ε, δ)-DP for every α > 1 with
    ε(α) = αρ + [ln(1/δ) + (α−1) ln(1 − 1/α) − ln α]/(α−1).
    Differentiating, ε'(α) = ρ − (ln(1/δ) − ln α)/(α−1)², whose sign is that of
    g(α) = ρ(α−1)² + ln(αδ); g is increasing on α > 1 with g(1) = ln δ < 0, so
    its unique root is the minimiser. We solve g = 0 in u = ln(α−1), so that
    α near 1 and α ≫ 1 are both well conditioned, and evaluate ε(α) there.
    Any α gives a valid bound, so an inexact root costs tightness only; the
    evaluation error is guarded by rounding up.
    """
    log_inv_delta = -math.log(delta)
    x_lo = min(math.sqrt(log_inv_delta / (4 * rho)), log_inv_delta / 4)
    x_hi = 2 * math.sqrt(log_inv_delta / rho)  # stationarity >= 3 ln(1/δ) > 0 there
    if not (0 < x_lo < x_hi < math.inf):
        return math.inf

    def stationarity(u: float) -> float:
        x = math.exp(u)
        return rho * x * x + math.log1p(x) - log_inv_delta

    root = solve(stationarity, math.log(x_lo), math.log(x_hi))
    if root is None:
        return math.inf
    x = math.exp(root)
    log_alpha = math.log1p(x)
    log_one_minus_inv_alpha = -math.log1p(1 / x)  # ln(1 − 1/α), no cancellation
    terms = ((1 + x) * rho, (log_inv_delta - log_alpha) / x, log_one_minus_inv_alpha)
    magnitude = (1 + x) * rho + (log_inv_delta + log_alpha) / x - log_one_minus_inv_alpha
    eps = math.fsum(terms)
    if not math.isfinite(eps):
        return math.inf
    return max(0.0, up(eps, GUARD * magnitude))


def zcdp_log_delta_cks(rho: float, epsilon: float) -> float:
    """Upper bound on ln δ of the CKS conversion of ρ-zCDP (ρ > 0) at ε.

    Canonne, Kamath & Steinke 2020, Sec. 2.3, Cor. 13 (δ form):
    δ = inf_{α>1} exp((α−1)(αρ − ε)) (1 − 1/α)^α / (α−1).
    With x = α − 1 the log of the bracket is
    x((1+x)ρ − ε) + x ln x − (1+x) ln(1+x), whose derivative
    (1+2x)ρ − ε + ln(x/(1+x)) is increasing in x, negative at
    ln x = min(ε − 3ρ, 0) − 1 and positive at x = max(1, (ε+1)/ρ).
    """
    u_lo = max(min(epsilon - 3 * rho, 0.0) - 1, -700.0)
    u_hi = math.log(max(1.0, (epsilon + 1) / rho)) + 1

    def slope(u: float) -> float:
        x = math.exp(u)
        return (1 + 2 * x) * rho - epsilon - log1p_exp(-u)

    # If the optimum lies below α − 1 = e^−700, the bound there is δ ≈ 1, and
    # δ = 1 is always valid; likewise if the solve fails.
    u = solve(slope, u_lo, u_hi) if slope(u_lo) < 0 else None
    if u is None:
        return 0.0
    x = math.exp(u)
    # x ln x − (1+x) ln(1+x) = −x ln(1 + 1/x) − ln(1+x), without cancellation.
    terms = (x * (1 + x) * rho, -x * epsilon, -x * math.log1p(1 / x), -math.log1p(x))
    magnitude = math.fsum(abs(t) for t in terms)
    log_delta = up(math.fsum(terms), GUARD * magnitude)
    return min(0.0, log_delta) if math.isfinite(log_delta) else 0.0


# ---------------------------------------------------------------------------
# The μ-GDP / exact Gaussian privacy curve, shared by GDP and analytic σ
# ---------------------------------------------------------------------------


def gaussian_log_delta(mu: float, epsilon: float, *, upper: bool = False) -> float:
    """Natural log of δ_μ(ε) on the exact privacy curve of a Gaussian with Δ/σ = μ.

    δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2): Balle & Wang 2018 (ICML,
    arXiv 1805.06530), Thm. 8, written with μ = Δ/σ; equivalently the μ-GDP
    curve of Dong, Roth & Su 2022 (arXiv 1905.02383), Cor. 2.13.

    Computed in log space: with ln A = log Φ(−ε/μ + μ/2) and
    ln B = ε + log Φ(−ε/μ − μ/2), δ = A · (−expm1(ln B − ln A)).
    With ``upper=True`` every rounding error is pushed towards a larger δ
    (arguments of Φ perturbed by their rounding error, a few ulps of guard on
    each logarithm), giving a value that is >= the exact ln δ.
    Returns ``-inf`` when δ underflows (or when μ = 0).
    """
    if mu == 0:
        return -math.inf
    shift = epsilon / mu
    half = mu / 2
    z_a = half - shift
    z_b = -half - shift
    slack = 4 * ULP * (abs(shift) + half) if upper else 0.0
    log_a = float(scipy.special.log_ndtr(z_a + slack))
    if log_a == -math.inf:
        return -math.inf
    log_phi_b = float(scipy.special.log_ndtr(z_b - slack))
    if upper:
        log_a = up(log_a, GUARD * abs(log_a))
        log_b = down(epsilon + log_phi_b, GUARD * (epsilon + abs(log_phi_b)))
    else:
        log_b = epsilon + log_phi_b
    gap = log_b - log_a
    if gap >= 0:
        # δ is below the resolution of A; A itself is an upper bound on δ.
        return log_a if upper else -math.inf
    log_delta = log_a + math.log(-math.expm1(gap))
    if upper:
        log_delta = up(log_delta, GUARD * (abs(log_a) + abs(log_delta - log_a)))
    return min(0.0, log_delta)


def exp_up(log_value: float) -> float:
    """A float >= exp(``log_value``), capped at 1."""
    if log_value == -math.inf:
        return 0.0
    return min(1.0, up(math.exp(log_value), GUARD * math.exp(log_value)))


def increase_until(value: float, ok: Callable[[float], bool]) -> float | None:
    """First of ``value`` · (1 + 2^(k−52)), k = 0, 1, ..., for which ``ok`` holds.

    The steps grow geometrically, so a value a few ulps short is fixed in a
    few ulps; ``None`` if none of them up to the float range passes.
    """
    if ok(value):
        return value
    for k in range(1200):
        candidate = value * (1 + 2.0 ** (k - 52)) if value > 0 else 2.0 ** (k - 1074)
        if math.isinf(candidate):
            return None
        if ok(candidate):
            return candidate
    return None


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε (rounded up) with δ_μ(ε) <= δ on the μ-GDP curve."""
    if mu == 0:
        return 0.0
    target = math.log(delta)

    def excess(eps: float) -> float:
        return max(gaussian_log_delta(mu, eps), LOG_FLOOR) - target

    def certified(eps: float) -> bool:
        return exp_up(gaussian_log_delta(mu, eps, upper=True)) <= delta

    if certified(0.0):
        return 0.0
    # δ_μ(ε) <= Φ(μ/2 − ε/μ) <= δ once ε >= μ²/2 − μ Φ⁻¹(δ).
    hi = mu * mu / 2 + mu * max(0.0, -float(scipy.special.ndtri(delta))) + 1.0
    while excess(hi) >= 0:
        hi *= 2
        if math.isinf(hi):
            return math.inf
    eps = solve(excess, 0.0, hi) if excess(0.0) > 0 else 0.0
    if eps is None:
        eps = hi
    certified_eps = increase_until(eps, certified)
    return math.inf if certified_eps is None else certified_eps


def check_not_larger(name: str, a: Fraction, b: Fraction) -> None:
    """Refuse taking ``b`` away from a smaller ``a``."""
    if b > a:
        raise InvalidBudgetError(
            f"cannot subtract a larger {name} ({decimal(b) or b}) from a smaller one "
            f"({decimal(a) or a})"
        )


def epsilon_up(rho: float, delta: float) -> float:
    """ε of ρ-zCDP at δ (floats, ρ > 0, 0 < δ < 1): the better of the two bounds, rounded up."""
    return min(zcdp_epsilon_simple(rho, delta), _zcdp_epsilon_cks(rho, delta))


def from_approx_dp(epsilon: Fraction, delta: Fraction) -> float:
    """The float ρ of :meth:`zCDP.from_approx_dp` for exact ε >= 0 and δ in (0, 1)."""
    eps = round_down(epsilon)
    delta_f = round_down(delta)
    if delta_f == 0:
        return 0.0  # δ below the smallest float: certify nothing rather than round δ up
    log_inv_delta = -math.log(delta_f)
    simple = (math.sqrt(log_inv_delta + eps) - math.sqrt(log_inv_delta)) ** 2
    rho = max(0.0, down(simple, GUARD * (simple + eps + log_inv_delta)))
    rho = max(rho, _cks_inverse_rho(eps, log_inv_delta))

    def fits(r: float) -> bool:
        # zCDP(r).epsilon(δ) converts at δ rounded down: exactly delta_f.
        return r == 0 or epsilon_up(r, delta_f) <= eps

    if not fits(rho):
        for k in range(60):
            rho = rho * (1 - 2.0 ** (k - 52))
            if fits(rho):
                break
        else:
            rho = 0.0
    return rho


def _cks_inverse_rho(epsilon: float, log_inv_delta: float) -> float:
    """A lower bound (rounded down) on the CKS ρ* for (ε, δ); 0 if not found.

    With x = α − 1, the CKS optimum over α for a given ρ satisfies
    ρ = (L − ln(1+x))/x² (L = ln(1/δ)); substituting into ε(α) and
    subtracting from ε gives h(x) = ε − (1+2x)(L − ln(1+x))/x² − ln(x/(1+x)),
    which increases from −∞ at x → 0 to ε − ln(1−δ) > 0 at x = 1/δ − 1
    (solved in u = ln x). At its root we evaluate
    r(α) = [ε − (L − ln α)/(α−1) − ln(1−1/α)]/α, which is valid at any α.
    """

    def h(u: float) -> float:
        x = math.exp(u)
        gap = log_inv_delta - math.log1p(x)
        return epsilon - ((1 + 2 * x) * gap / (x * x) - math.log1p(1 / x))

    u_hi = log_inv_delta + math.log(-math.expm1(-log_inv_delta))  # ln(1/δ − 1)
    u_hi = min(u_hi, 700.0)  # keep e^u finite for subnormal δ
    if not (math.isfinite(u_hi) and h(u_hi) > 0):
        return 0.0
    u_lo, step = min(-1.0, u_hi - 1), 1.0
    while h(u_lo) >= 0:
        u_lo -= step
        step *= 2
        if u_lo < -300:  # x² would underflow; the simple bound takes over
            return 0.0
    root = solve(h, u_lo, u_hi)
    if root is None:
        return 0.0
    x = math.exp(root)
    log1p_x = math.log1p(x)
    log1p_inv_x = math.log1p(1 / x)  # −ln(1 − 1/α)
    terms = (epsilon, -(log_inv_delta - log1p_x) / x, log1p_inv_x)
    magnitude = epsilon + (log_inv_delta + log1p_x) / x + log1p_inv_x
    r = math.fsum(terms) / (1 + x)
    return max(0.0, down(r, GUARD * magnitude / (1 + x)))
