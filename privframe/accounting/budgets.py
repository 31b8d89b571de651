"""Privacy budgets as value types, their conversions, and noise calibration.

Every release in privframe is charged in zero-concentrated DP (zCDP, Bun &
Steinke 2016): a Gaussian release with L2 sensitivity Δ and noise scale σ costs
ρ = Δ²/(2σ²), and releases compose by adding ρ. (ε, δ)-DP and μ-GDP are
reporting units, converted with the tightest conversion proven valid.

Budgets are exact rationals (:class:`fractions.Fraction`), as in Tumult
Analytics. A number the user writes is read as written: a float as the
shortest decimal that rounds to it (``0.1`` is exactly 1/10), an int, a
:class:`~fractions.Fraction` or a :class:`~decimal.Decimal` as itself. Sums
and differences of budgets are then exact, so three spends of 0.1 use up a
budget of 0.3 exactly and leave exactly 0. Each budget keeps its exact
parameters in ``exact_*`` fields; ``.rho``, ``.delta``, ``.epsilon`` and
``.mu`` are the nearest floats, for display and plotting.

A value privframe computes (a conversion, a calibration) is a float rounded
conservatively and then used at its exact binary value. A *guarantee* (the ε
a ρ-zCDP mechanism satisfies at δ, the ρ a Gaussian costs, the σ needed for a
target) is rounded towards less privacy claimed: ε, δ, ρ spent and σ round
up. An *allowance* (the ρ a user's (ε, δ) budget lets a session spend)
rounds down. Transcendental functions cannot be evaluated exactly, so each
one carries an explicit floating-point error guard of a few ulps in the safe
direction; their exact inputs are rounded to floats in the safe direction
first.

Example:
    >>> import privframe as pf
    >>> pf.zCDP(0.5) + pf.zCDP(0.25)
    zCDP(rho=0.75, delta=0.0)
    >>> pf.zCDP(0.3) - pf.zCDP(0.1) - pf.zCDP(0.1) - pf.zCDP(0.1)
    zCDP(rho=0.0, delta=0.0)
    >>> pf.zCDP(0.1) <= pf.zCDP(1.0)
    True
    >>> round(pf.zCDP(0.5).epsilon(1e-5), 6)
    4.728387
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from decimal import Decimal
from fractions import Fraction
from typing import TypeAlias

from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtri

from privframe.errors import CalibrationError, InvalidArgumentError, InvalidBudgetError

__all__ = [
    "GDP",
    "ApproxDP",
    "Budget",
    "Number",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "exact",
    "gaussian_rho",
    "gaussian_sigma",
    "mu_estimate",
    "round_down",
    "round_up",
    "to_zcdp",
    "zCDP",
]

_ULP = 2.0**-52
"""Relative spacing of doubles near 1 (machine epsilon)."""

_GUARD = 8 * _ULP
"""Relative error allowed per evaluated term of a transcendental formula."""

_LOG_FLOOR = -1e4
"""Clamp for logs of probabilities that underflow; far below ln(min double)."""


# ---------------------------------------------------------------------------
# Exact rounding helpers
# ---------------------------------------------------------------------------


def round_up(x: Fraction) -> float:
    """Smallest float that is >= the exact rational ``x``: a guarantee stated as a float.

    Raises:
        OverflowError: ``x`` is beyond the float range.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.accounting.budgets import round_up
        >>> round_up(Fraction(1, 10)) == 0.1  # the float 0.1 is a little above 1/10
        True
    """
    f = float(x)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def round_down(x: Fraction) -> float:
    """Largest float that is <= the exact rational ``x``: an allowance stated as a float.

    Example:
        >>> from fractions import Fraction
        >>> from privframe.accounting.budgets import round_down
        >>> round_down(Fraction(1, 10)) < 0.1  # the float below 0.1
        True
    """
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


# The names the numeric modules (noise, selection, rdp, pld) have always imported.
_round_up = round_up
_round_down = round_down


def _sqrt_up(x: Fraction) -> float:
    """Smallest float whose exact square is >= the rational ``x >= 0``.

    Raises:
        OverflowError: if that float does not exist.
    """
    if x == 0:
        return 0.0
    # Scale by an even power of two so the float square root is accurate to an
    # ulp even when x itself is outside the float range.
    half_exponent = (x.numerator.bit_length() - x.denominator.bit_length()) // 2
    scaled = x / Fraction(4) ** half_exponent
    root = math.ldexp(math.sqrt(float(scaled)), half_exponent)
    if math.isinf(root):
        raise OverflowError("square root exceeds the largest float")
    while root > 0 and Fraction(math.nextafter(root, 0.0)) ** 2 >= x:
        root = math.nextafter(root, 0.0)
    while Fraction(root) ** 2 < x:
        root = math.nextafter(root, math.inf)
        if math.isinf(root):
            raise OverflowError("square root exceeds the largest float")
    return root


def _sqrt_down(x: Fraction) -> float:
    """Largest float whose exact square is <= the rational ``x >= 0``."""
    root = _sqrt_up(x)
    return math.nextafter(root, 0.0) if Fraction(root) ** 2 > x else root


def _up(value: float, error: float) -> float:
    """A float >= every real within ``error`` of the computed ``value``."""
    return math.nextafter(value + error, math.inf)


def _down(value: float, error: float) -> float:
    """A float <= every real within ``error`` of the computed ``value``."""
    return math.nextafter(value - error, -math.inf)


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


def _check_real(name: str, value: object) -> float:
    """``value`` as a finite float, or an error naming the parameter ``name``.

    Accepts every :class:`numbers.Real` except ``bool``: Python ints and floats,
    :class:`fractions.Fraction` and numpy scalars. A value that no double
    represents exactly (``Fraction(1, 3)``, ``10**17 + 1``) is refused rather
    than rounded, since rounding to nearest could go in the unsafe direction.
    ``-0.0`` becomes ``0.0``.

    Raises:
        InvalidArgumentError: ``value`` is not a real number (a str, None, a bool).
        InvalidBudgetError: ``value`` is NaN, infinite, beyond the float range or
            not exactly a float.

    Example:
        >>> import numpy as np
        >>> _check_real("rho", np.float32(0.5))
        0.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        v = float(value) + 0.0
    except OverflowError:
        raise InvalidBudgetError(
            f"{name} is beyond the float range (about 1.8e308); give a finite float"
        ) from None
    if not math.isfinite(v):
        raise InvalidBudgetError(f"{name} must be finite, got {v!r}")
    # Python ints compare with floats exactly; numpy integers would not.
    exact = int(value) if isinstance(value, numbers.Integral) else value
    if v != exact:
        raise InvalidBudgetError(
            f"{name}={value!r} is not exactly a float; round it yourself in the "
            f"direction that is safe for your use, e.g. {name}=float(...)"
        )
    return v


def _check_nonnegative(name: str, value: object) -> float:
    """:func:`_check_real`, and ``value >= 0``."""
    v = _check_real(name, value)
    if v < 0:
        raise InvalidBudgetError(f"{name} must be >= 0, got {v!r}")
    return v


def _check_positive(name: str, value: object) -> float:
    """:func:`_check_real`, and ``value > 0``.

    The positive-real check of the whole package (:mod:`privframe.mechanisms.noise` uses
    it for σ): keep the signature ``(name, value) -> float``.
    """
    v = _check_real(name, value)
    if v <= 0:
        raise InvalidBudgetError(f"{name} must be > 0, got {v!r}")
    return v


def _check_delta(value: object) -> float:
    """The δ of a budget: 0 <= δ < 1."""
    d = _check_nonnegative("delta", value)
    if d >= 1:
        raise InvalidBudgetError(f"delta must be < 1, got {d!r}")
    return d


def _check_conversion_delta(value: object) -> float:
    """δ for an (ε, δ) conversion: strictly inside (0, 1).

    Also the check of an accountant's reporting δ; keep the signature.
    """
    d = _check_delta(value)
    if d == 0:
        raise InvalidBudgetError(
            "delta must be in (0, 1) for an (epsilon, delta) conversion, got 0.0; "
            "zCDP and GDP imply pure epsilon-DP for no finite epsilon"
        )
    return d


def _sum_up(name: str, a: float, b: float) -> float:
    """``a + b`` rounded up; a sum beyond the float range is a budget error."""
    try:
        return _round_up(Fraction(a) + Fraction(b))
    except OverflowError:
        raise InvalidBudgetError(
            f"composed {name} of {a!r} and {b!r} exceeds the float range"
        ) from None


# ---------------------------------------------------------------------------
# Exact budget parameters
# ---------------------------------------------------------------------------

Number: TypeAlias = int | float | Fraction | Decimal
"""A number a user may give as a budget parameter; numpy scalars are accepted too."""

_FLOAT_MAX = Fraction(sys.float_info.max)


def exact(name: str, value: object, *, positive: bool = False) -> Fraction:
    """A budget parameter as the exact rational the user wrote; >= 0 (> 0 if ``positive``).

    A float is read as the shortest decimal that rounds to it (its ``repr``):
    ``0.1`` is 1/10, not the binary double nearest to it, because 0.1 is
    what the user typed. A numpy float of another precision (``float32``) is
    read the same way at its own precision. Ints, :class:`~fractions.Fraction`
    and :class:`~decimal.Decimal` are exact as they are. privframe passes the
    values it computes as ``Fraction(x)``, which keeps their binary value.

    Args:
        name: the parameter's name, for error messages.
        value: the number.
        positive: refuse 0 as well as negative values.

    Raises:
        InvalidArgumentError: ``value`` is not a real number (a str, None, a bool).
        InvalidBudgetError: ``value`` is NaN, infinite, negative (or 0 with
            ``positive``), or beyond the float range (about 1.8e308).

    Example:
        >>> from fractions import Fraction
        >>> from decimal import Decimal
        >>> from privframe.accounting.budgets import exact
        >>> exact("rho", 0.1), exact("rho", Decimal("0.25")), exact("rho", Fraction(1, 3))
        (Fraction(1, 10), Fraction(1, 4), Fraction(1, 3))
        >>> exact("rho", Fraction(0.1)) == Fraction(0.1)  # a binary value, kept as is
        True
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
        raise InvalidArgumentError(f"{name} must be a real number, got {type(value).__name__}")
    if isinstance(value, Decimal):
        finite = value.is_finite()
    else:
        finite = not isinstance(value, float) or math.isfinite(value)
    if not finite:
        raise InvalidBudgetError(f"{name} must be finite, got {value!r}")
    if isinstance(value, numbers.Rational):
        x = Fraction(int(value.numerator), int(value.denominator))
    elif isinstance(value, float):
        x = Fraction(float.__repr__(value))  # np.float64 is a float; its repr is decorated
    elif isinstance(value, Decimal):
        x = Fraction(value)
    else:
        # Other reals (numpy float32/float16/longdouble): their str is the shortest
        # decimal at their own precision.
        text = str(value)
        try:
            x = Fraction(text)
        except ValueError:
            problem = "must be finite" if text.lower().lstrip("+-") in ("nan", "inf") else None
            if problem is None:
                raise InvalidArgumentError(
                    f"{name}={value!r} cannot be read exactly; give a float, int, "
                    "fractions.Fraction or decimal.Decimal"
                ) from None
            raise InvalidBudgetError(f"{name} {problem}, got {text}") from None
    if abs(x) > _FLOAT_MAX:
        raise InvalidBudgetError(
            f"{name} is beyond the float range (about 1.8e308); give a smaller value"
        )
    if x < 0 or (positive and x == 0):
        raise InvalidBudgetError(f"{name} must be {'>' if positive else '>='} 0, got {value!r}")
    return x


def _exact_delta(value: object) -> Fraction:
    """The δ of a budget, exactly: 0 <= δ < 1."""
    d = exact("delta", value)
    if d >= 1:
        raise InvalidBudgetError(f"delta must be < 1, got {value!r}")
    return d


def _exact_conversion_delta(value: object) -> Fraction:
    """δ for an (ε, δ) statement, exactly: strictly inside (0, 1)."""
    d = _exact_delta(value)
    if d == 0:
        raise InvalidBudgetError(
            "delta must be in (0, 1) for an (epsilon, delta) conversion, got 0; "
            "zCDP and GDP imply pure epsilon-DP for no finite epsilon"
        )
    return d


def _literal(name: str, x: Fraction) -> str:
    """``name=value`` for a repr: the exact short decimal, else ``name≈`` six digits.

    ``0.9``, ``1e-06`` and ``1.0`` are shown as typed and read back as the
    same exact value (floats are read as their decimal). A value no short
    decimal is (1/3, a converted budget's binary ρ) is shown rounded, marked
    ``≈`` so it is not mistaken for the exact value (``exact_*`` holds that).
    """
    shown = _decimal(x)
    return f"{name}={shown}" if shown else f"{name}≈{float(x):.6g}"


def _decimal(x: Fraction) -> str | None:
    """The shortest float repr that is exactly ``x``, or None if none is."""
    shown = repr(float(x))
    return shown if Fraction(shown) == x else None


def _conversion_slack(total: float, reserved: float) -> float:
    """The δ left for a ρ → (ε, δ) conversion when ``reserved`` of ``total`` is spent outright.

    The largest float ``s`` with ``s + reserved <= total`` exactly (``total -
    reserved`` rounded down), for floats ``0 <= reserved < total``. It is the
    one rule by which privframe splits a total δ: :meth:`zCDP.epsilon` converts
    ρ at ``_conversion_slack(delta, δ₀)`` and :meth:`ApproxDP.to_zcdp` sizes ρ
    at it. It round-trips exactly: with ``t = _round_up(Fraction(s) +
    Fraction(reserved))`` (the total an accountant states), ``t <= total`` and
    ``_conversion_slack(t, reserved) == s``, because ``t - reserved`` lies in
    ``[s, total - reserved]`` and ``s`` is the largest float at or below its top.

    Example:
        >>> _conversion_slack(1e-6, 1e-7)
        9e-07
        >>> _conversion_slack(1e-6, 0.0)
        1e-06
    """
    return _round_down(Fraction(total) - Fraction(reserved))


def _solve(func: Callable[[float], float], lo: float, hi: float) -> float | None:
    """Root of an increasing ``func`` bracketed by ``func(lo) < 0 < func(hi)``.

    Returns ``None`` when the bracket is not valid in floating point or the
    solver fails; callers then fall back to a bound that is trivially valid.
    """
    try:
        return float(brentq(func, lo, hi, xtol=1e-15, rtol=4 * _ULP, maxiter=500))
    except (ValueError, RuntimeError, OverflowError, ZeroDivisionError):
        return None


def _log1p_exp(t: float) -> float:
    """ln(1 + e^t) without overflow."""
    return t + math.log1p(math.exp(-t)) if t > 0 else math.log1p(math.exp(t))


# ---------------------------------------------------------------------------
# zCDP -> (ε, δ): Bun & Steinke 2016 and Canonne, Kamath & Steinke 2020
# ---------------------------------------------------------------------------


def _zcdp_epsilon_simple(rho: float, delta: float) -> float:
    """Upper bound on ε = ρ + 2 sqrt(ρ ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    log_inv_delta = -math.log(delta)
    eps = rho + 2 * math.sqrt(rho * log_inv_delta)
    return _up(eps, _GUARD * eps)


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

    root = _solve(stationarity, math.log(x_lo), math.log(x_hi))
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
    return max(0.0, _up(eps, _GUARD * magnitude))


def _zcdp_log_delta_cks(rho: float, epsilon: float) -> float:
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
        return (1 + 2 * x) * rho - epsilon - _log1p_exp(-u)

    # If the optimum lies below α − 1 = e^−700, the bound there is δ ≈ 1, and
    # δ = 1 is always valid; likewise if the solve fails.
    u = _solve(slope, u_lo, u_hi) if slope(u_lo) < 0 else None
    if u is None:
        return 0.0
    x = math.exp(u)
    # x ln x − (1+x) ln(1+x) = −x ln(1 + 1/x) − ln(1+x), without cancellation.
    terms = (x * (1 + x) * rho, -x * epsilon, -x * math.log1p(1 / x), -math.log1p(x))
    magnitude = math.fsum(abs(t) for t in terms)
    log_delta = _up(math.fsum(terms), _GUARD * magnitude)
    return min(0.0, log_delta) if math.isfinite(log_delta) else 0.0


# ---------------------------------------------------------------------------
# The μ-GDP / exact Gaussian privacy curve, shared by GDP and analytic σ
# ---------------------------------------------------------------------------


def _gaussian_log_delta(mu: float, epsilon: float, *, upper: bool = False) -> float:
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
    slack = 4 * _ULP * (abs(shift) + half) if upper else 0.0
    log_a = float(log_ndtr(z_a + slack))
    if log_a == -math.inf:
        return -math.inf
    log_phi_b = float(log_ndtr(z_b - slack))
    if upper:
        log_a = _up(log_a, _GUARD * abs(log_a))
        log_b = _down(epsilon + log_phi_b, _GUARD * (epsilon + abs(log_phi_b)))
    else:
        log_b = epsilon + log_phi_b
    gap = log_b - log_a
    if gap >= 0:
        # δ is below the resolution of A; A itself is an upper bound on δ.
        return log_a if upper else -math.inf
    log_delta = log_a + math.log(-math.expm1(gap))
    if upper:
        log_delta = _up(log_delta, _GUARD * (abs(log_a) + abs(log_delta - log_a)))
    return min(0.0, log_delta)


def _exp_up(log_value: float) -> float:
    """A float >= exp(``log_value``), capped at 1."""
    if log_value == -math.inf:
        return 0.0
    return min(1.0, _up(math.exp(log_value), _GUARD * math.exp(log_value)))


def _increase_until(value: float, ok: Callable[[float], bool]) -> float | None:
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


def _gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε (rounded up) with δ_μ(ε) <= δ on the μ-GDP curve."""
    if mu == 0:
        return 0.0
    target = math.log(delta)

    def excess(eps: float) -> float:
        return max(_gaussian_log_delta(mu, eps), _LOG_FLOOR) - target

    def certified(eps: float) -> bool:
        return _exp_up(_gaussian_log_delta(mu, eps, upper=True)) <= delta

    if certified(0.0):
        return 0.0
    # δ_μ(ε) <= Φ(μ/2 − ε/μ) <= δ once ε >= μ²/2 − μ Φ⁻¹(δ).
    hi = mu * mu / 2 + mu * max(0.0, -float(ndtri(delta))) + 1.0
    while excess(hi) >= 0:
        hi *= 2
        if math.isinf(hi):
            return math.inf
    eps = _solve(excess, 0.0, hi) if excess(0.0) > 0 else 0.0
    if eps is None:
        eps = hi
    certified_eps = _increase_until(eps, certified)
    return math.inf if certified_eps is None else certified_eps


def mu_estimate(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP curve passes through (ε, δ): a one-number summary.

    μ-GDP (Dong, Roth & Su 2022) describes a whole privacy curve by one number;
    a curve that is not Gaussian has no exact μ, and this is the μ of the
    Gaussian curve that agrees with it at δ. It is exact for compositions of
    continuous Gaussians and an estimate otherwise (the GDP central limit
    theorem, their Thm. 3.4, says subsampled compositions approach a Gaussian
    curve). It is a summary, not a guarantee at other δ.

    Args:
        epsilon: ε >= 0 (``inf`` gives ``inf``).
        delta: δ in (0, 1).

    Example:
        >>> round(mu_estimate(GDP(1.5).epsilon(1e-6), 1e-6), 6)
        1.5
    """
    eps = _check_nonnegative("epsilon", epsilon) if not math.isinf(epsilon) else math.inf
    delta = _check_conversion_delta(delta)
    if math.isinf(eps):
        return math.inf
    if eps == 0:
        return 0.0
    hi = 1.0
    while GDP(hi).epsilon(delta) < eps:
        hi *= 2
        if hi > 2.0**60:
            return math.inf
    return float(brentq(lambda mu: GDP(mu).epsilon(delta) - eps, 0.0, hi, xtol=1e-12))


# ---------------------------------------------------------------------------
# Budget value types
# ---------------------------------------------------------------------------


class _Ordered:
    """The partial order of budgets of one type: ``a <= b`` when every field is.

    Budgets are dataclasses whose fields are all privacy parameters, so
    ``a <= b`` means ``a`` is at least as private as ``b`` in every one;
    ``a < b`` means ``a <= b`` and ``a != b``. Budgets of different types do
    not compare (``TypeError``), and some of one type are incomparable.

    Example:
        >>> import privframe as pf
        >>> pf.ApproxDP(0.5, 1e-9) < pf.ApproxDP(1.0, 1e-9)
        True
        >>> a, b = pf.zCDP(1.0), pf.zCDP(0.5, delta=1e-9)
        >>> a <= b or b <= a
        False
    """

    __slots__ = ()

    def _parameters(self) -> tuple[Fraction, ...]:
        # Privacy parameters only: fields excluded from == (provenance) do not order either.
        return tuple(
            getattr(self, f.name)
            for f in fields(self)  # type: ignore[arg-type]
            if f.compare
        )

    def __le__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return all(a <= b for a, b in zip(self._parameters(), other._parameters(), strict=True))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return self <= other and self._parameters() != other._parameters()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return other <= self

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return other < self


@dataclass(frozen=True, slots=True, init=False, repr=False)
class zCDP(_Ordered):
    """A ρ-zCDP budget, optionally approximate: (ρ, δ)-zCDP.

    ``delta`` is nonzero only for sessions that spend δ outright, e.g. on
    private partition selection; Gaussian releases cost ρ alone.

    ρ and δ are exact rationals (see the module docstring for how a float is
    read): ``exact_rho`` and ``exact_delta`` hold them, and ``rho`` and
    ``delta`` are the nearest floats, for display. Sums and differences are
    exact. The repr shows a value as a float literal when that literal is
    exact (``0.9``), and rounded to six digits, marked ``≈``, otherwise (1/3,
    or the binary value of a converted budget).

    ``converted_from`` records the (ε, δ) budget this one was converted from
    by :meth:`ApproxDP.to_zcdp` (or :func:`to_zcdp`). It is provenance, not a
    privacy parameter: it takes no part in ``==``, hashing, ordering or
    arithmetic (a sum or difference has none). An
    :class:`~privframe.accounting.accountant.Accountant` given such a budget reports
    (ε, δ) at the source's δ by default. Giving it is a claim that is checked:
    this budget stated at the source's total δ must be within the source's ε,
    i.e. ``self.epsilon(source.delta) <= source.epsilon``.

    Args:
        rho: the zCDP parameter ρ >= 0 (Bun & Steinke 2016, Def. 1.1).
        delta: the additive δ of approximate zCDP, 0 <= δ < 1.
        converted_from: keyword only; the :class:`ApproxDP` budget this one
            implies, or None.

    Raises:
        InvalidArgumentError: ``converted_from`` is neither None nor an ApproxDP.
        InvalidBudgetError: a malformed ρ or δ, or a ``converted_from`` this
            budget does not imply.

    Example:
        >>> from fractions import Fraction
        >>> import privframe as pf
        >>> b = pf.zCDP(0.5)
        >>> b.rho, b.delta
        (0.5, 0.0)
        >>> pf.zCDP(0.1, delta=1e-9) + pf.zCDP(0.2)
        zCDP(rho=0.3, delta=1e-09)
        >>> pf.zCDP(1.0) - pf.zCDP(0.1)
        zCDP(rho=0.9, delta=0.0)
        >>> third = pf.zCDP(Fraction(1, 3))
        >>> third, third + third + third == pf.zCDP(1)
        (zCDP(rho≈0.333333, delta=0.0), True)
        >>> c = pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
        >>> c.converted_from, c == pf.zCDP(c.exact_rho, delta=1e-7)
        (ApproxDP(epsilon=1.0, delta=1e-06), True)
    """

    exact_rho: Fraction
    exact_delta: Fraction
    converted_from: ApproxDP | None = field(default=None, compare=False)

    def __init__(
        self, rho: Number, delta: Number = 0.0, *, converted_from: ApproxDP | None = None
    ) -> None:
        object.__setattr__(self, "exact_rho", exact("rho", rho))
        object.__setattr__(self, "exact_delta", _exact_delta(delta))
        object.__setattr__(self, "converted_from", converted_from)
        source = converted_from
        if source is None:
            return
        if not isinstance(source, ApproxDP):
            raise InvalidArgumentError(
                f"converted_from must be an ApproxDP or None, got {type(source).__name__}"
            )
        if not self.exact_delta < source.exact_delta:
            raise InvalidBudgetError(
                f"converted_from={source!r} must have a delta larger than this budget's "
                f"delta={self.delta!r}, which is spent outright"
            )
        if self.epsilon(source.exact_delta) > source.exact_epsilon:
            raise InvalidBudgetError(
                f"{self!r} does not imply converted_from={source!r}; use "
                f"{source!r}.to_zcdp(...) to convert"
            )

    @property
    def rho(self) -> float:
        """ρ as the nearest float, for display; :attr:`exact_rho` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.zCDP(0.1).rho, pf.zCDP(0.1).exact_rho
            (0.1, Fraction(1, 10))
        """
        return float(self.exact_rho)

    @property
    def delta(self) -> float:
        """δ as the nearest float, for display; :attr:`exact_delta` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.zCDP(1.0, delta=1e-7).delta
            1e-07
        """
        return float(self.exact_delta)

    def __repr__(self) -> str:
        # The provenance is shown when present: it sets an accountant's reporting δ.
        source = "" if self.converted_from is None else f", converted_from={self.converted_from!r}"
        rho, delta = _literal("rho", self.exact_rho), _literal("delta", self.exact_delta)
        return f"zCDP({rho}, {delta}{source})"

    def __add__(self, other: zCDP) -> zCDP:
        """Compose two zCDP budgets: ρ and δ add (Bun & Steinke 2016, Lemma 2.3), exactly."""
        if not isinstance(other, zCDP):
            return NotImplemented
        return zCDP(self.exact_rho + other.exact_rho, self.exact_delta + other.exact_delta)

    def __sub__(self, other: zCDP) -> zCDP:
        """What is left of ``self`` after ``other``, exactly; refused if negative."""
        if not isinstance(other, zCDP):
            return NotImplemented
        _check_not_larger("rho", self.exact_rho, other.exact_rho)
        _check_not_larger("delta", self.exact_delta, other.exact_delta)
        return zCDP(self.exact_rho - other.exact_rho, self.exact_delta - other.exact_delta)

    def epsilon(self, delta: Number) -> float:
        """The ε for which every mechanism with this budget is (ε, ``delta``)-DP.

        The minimum of two bounds valid for *any* ρ-zCDP mechanism, rounded up:

        - Bun & Steinke 2016 (arXiv 1605.02065), Prop. 1.3:
          ε = ρ + 2 sqrt(ρ ln(1/δ));
        - Canonne, Kamath & Steinke 2020 (arXiv 2004.00010), Sec. 2.3,
          Prop. 12 / Cor. 13: ε = inf_{α>1} αρ + [ln(1/δ) + (α−1) ln(1−1/α)
          − ln α]/(α−1), minimised at the root of ρ(α−1)² + ln(αδ) = 0.

        The CKS bound is never larger in exact arithmetic; the simple bound is
        kept as a floor against numerical trouble. Tighter *Gaussian-only*
        curves (:meth:`GDP.epsilon`) are not used here, because sessions also
        run mechanisms (discrete Gaussian, partition selection) that are
        ρ-zCDP but not exactly Gaussian.

        For an approximate budget (ρ, δ₀) with δ₀ > 0, ``delta`` is the total:
        it must exceed δ₀, and ρ is converted at ``delta`` − δ₀. The formulas
        are evaluated in floats at ρ rounded up and δ − δ₀ rounded down, both
        of which can only raise ε. ρ = 0 gives ε = 0.

        Args:
            delta: the total δ of the (ε, δ) statement, δ₀ < δ < 1 (read
                exactly, as budgets are).

        Returns:
            ε >= 0, rounded up.

        Raises:
            InvalidBudgetError: if ``delta`` is not in (δ₀, 1).

        Example:
            >>> import privframe as pf
            >>> round(pf.zCDP(0.5).epsilon(1e-5), 6)
            4.728387
            >>> pf.zCDP(0.0).epsilon(1e-5)
            0.0
        """
        total = _exact_conversion_delta(delta)
        if total <= self.exact_delta:
            raise InvalidBudgetError(
                f"delta must exceed this budget's own delta ({self.delta!r}), got {delta!r}"
            )
        if self.exact_rho == 0:
            return 0.0
        residual = _round_down(total - self.exact_delta)
        if residual == 0:
            return math.inf  # a residual below the smallest float: no finite ε is certified
        return _epsilon_up(_round_up(self.exact_rho), residual)

    def delta_at(self, epsilon: Number) -> float:
        """The δ for which every mechanism with this budget is (``epsilon``, δ)-DP.

        Named ``delta_at`` because ``delta`` is the budget's own δ₀ field.
        Canonne, Kamath & Steinke 2020 (arXiv 2004.00010), Sec. 2.3, Cor. 13:
        δ = inf_{α>1} exp((α−1)(αρ − ε)) (1 − 1/α)^α / (α−1), minimised where
        (2α−1)ρ − ε + ln(1 − 1/α) = 0; plus δ₀, rounded up and capped at 1.
        Evaluated at ρ rounded up and ε rounded down.

        Args:
            epsilon: ε >= 0.

        Returns:
            δ in [0, 1].

        Raises:
            InvalidBudgetError: on a malformed ε.

        Example:
            >>> import privframe as pf
            >>> b = pf.zCDP(0.5)
            >>> abs(b.delta_at(b.epsilon(1e-5)) / 1e-5 - 1) < 1e-12
            True
            >>> pf.zCDP(0.0, delta=1e-9).delta_at(1.0)
            1e-09
        """
        eps = _round_down(exact("epsilon", epsilon))
        rho = _round_up(self.exact_rho)
        base = 0.0 if rho == 0 else _exp_up(_zcdp_log_delta_cks(rho, eps))
        return min(1.0, _round_up(Fraction(base) + self.exact_delta))

    def to_gdp(self) -> GDP:
        """The Gaussian-equivalent μ = sqrt(2ρ), rounded up.

        A reporting unit, not an implication. A composition of continuous
        Gaussian releases with total ρ is exactly sqrt(2ρ)-GDP (Bun & Steinke
        2016, Prop. 1.6; Dong, Roth & Su 2022, Cor. 3.3), but ρ-zCDP does *not*
        imply sqrt(2ρ)-GDP for general mechanisms. privframe's discrete
        Gaussian releases are ρ-zCDP (Canonne, Kamath & Steinke 2020) without
        being exactly GDP, so the (ε, δ) privframe states is
        :meth:`epsilon`, not :meth:`GDP.epsilon`.

        Returns:
            ``GDP(mu)`` with ``mu`` the smallest float with mu² >= 2ρ.

        Example:
            >>> import privframe as pf
            >>> pf.zCDP(0.5).to_gdp()
            GDP(mu=1.0)
        """
        return GDP(Fraction(_sqrt_up(2 * self.exact_rho)))

    @classmethod
    def from_approx_dp(cls, epsilon: Number, delta: Number) -> zCDP:
        """The largest ρ such that ρ-zCDP implies (ε, δ)-DP, rounded down.

        Inverts the Canonne, Kamath & Steinke 2020 (Sec. 2.3, Cor. 13)
        conversion: ρ* = sup_{α>1} [ε − (ln(1/δ) − ln α)/(α−1) − ln(1−1/α)]/α.
        Every α gives a valid ρ, so the sup is taken at the α where the CKS
        optimum ρ(α−1)² = ln(1/(αδ)) meets ε(α) = ε (a root of a decreasing
        function of α on (1, 1/δ)), floored by the Bun & Steinke 2016 inverse
        (sqrt(ln(1/δ) + ε) − sqrt(ln(1/δ)))². ε and δ enter rounded down to
        floats (a smaller ρ). Finally ρ is lowered until
        ``zCDP(rho).epsilon(delta) <= epsilon`` holds for privframe's own
        (rounded-up) conversion, so a round trip never exceeds ε. The result
        is that float, kept at its exact binary value.

        Args:
            epsilon: ε >= 0.
            delta: δ in (0, 1). A pure ε-DP budget (δ = 0) cannot be met by
                zCDP mechanisms and is refused.

        Returns:
            ``zCDP(rho)`` with ``delta=0``.

        Raises:
            InvalidBudgetError: on a malformed ε or δ.

        Example:
            >>> import privframe as pf
            >>> b = pf.zCDP.from_approx_dp(1.0, 1e-5)
            >>> round(b.rho, 8)
            0.0305566
            >>> b.epsilon(1e-5) <= 1.0
            True
        """
        return cls(
            Fraction(_from_approx_dp(exact("epsilon", epsilon), _exact_conversion_delta(delta)))
        )


def _check_not_larger(name: str, a: Fraction, b: Fraction) -> None:
    """Refuse taking ``b`` away from a smaller ``a``."""
    if b > a:
        raise InvalidBudgetError(
            f"cannot subtract a larger {name} ({_decimal(b) or b}) from a smaller one "
            f"({_decimal(a) or a})"
        )


def _epsilon_up(rho: float, delta: float) -> float:
    """ε of ρ-zCDP at δ (floats, ρ > 0, 0 < δ < 1): the better of the two bounds, rounded up."""
    return min(_zcdp_epsilon_simple(rho, delta), _zcdp_epsilon_cks(rho, delta))


def _from_approx_dp(epsilon: Fraction, delta: Fraction) -> float:
    """The float ρ of :meth:`zCDP.from_approx_dp` for exact ε >= 0 and δ in (0, 1)."""
    eps = _round_down(epsilon)
    delta_f = _round_down(delta)
    if delta_f == 0:
        return 0.0  # δ below the smallest float: certify nothing rather than round δ up
    log_inv_delta = -math.log(delta_f)
    simple = (math.sqrt(log_inv_delta + eps) - math.sqrt(log_inv_delta)) ** 2
    rho = max(0.0, _down(simple, _GUARD * (simple + eps + log_inv_delta)))
    rho = max(rho, _cks_inverse_rho(eps, log_inv_delta))

    def fits(r: float) -> bool:
        # zCDP(r).epsilon(δ) converts at δ rounded down: exactly delta_f.
        return r == 0 or _epsilon_up(r, delta_f) <= eps

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
    root = _solve(h, u_lo, u_hi)
    if root is None:
        return 0.0
    x = math.exp(root)
    log1p_x = math.log1p(x)
    log1p_inv_x = math.log1p(1 / x)  # −ln(1 − 1/α)
    terms = (epsilon, -(log_inv_delta - log1p_x) / x, log1p_inv_x)
    magnitude = epsilon + (log_inv_delta + log1p_x) / x + log1p_inv_x
    r = math.fsum(terms) / (1 + x)
    return max(0.0, _down(r, _GUARD * magnitude / (1 + x)))


@dataclass(frozen=True, slots=True, init=False, repr=False)
class ApproxDP(_Ordered):
    """An (ε, δ)-DP budget (Dwork & Roth 2014, Def. 2.4).

    Adding two composes them by basic composition (ε and δ add);
    subtracting gives what is left. Both are exact: ε and δ are exact
    rationals (``exact_epsilon``, ``exact_delta``; ``epsilon`` and ``delta``
    are the nearest floats), read as :class:`zCDP` reads its parameters.

    Args:
        epsilon: ε >= 0.
        delta: 0 <= δ < 1.

    Example:
        >>> import privframe as pf
        >>> pf.ApproxDP(1.0, 1e-6) + pf.ApproxDP(0.5, 1e-6)
        ApproxDP(epsilon=1.5, delta=2e-06)
    """

    exact_epsilon: Fraction
    exact_delta: Fraction

    def __init__(self, epsilon: Number, delta: Number = 0.0) -> None:
        object.__setattr__(self, "exact_epsilon", exact("epsilon", epsilon))
        object.__setattr__(self, "exact_delta", _exact_delta(delta))

    @property
    def epsilon(self) -> float:
        """ε as the nearest float; :attr:`exact_epsilon` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.ApproxDP(1.0, 1e-6).epsilon
            1.0
        """
        return float(self.exact_epsilon)

    @property
    def delta(self) -> float:
        """δ as the nearest float; :attr:`exact_delta` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.ApproxDP(1.0, 1e-6).delta
            1e-06
        """
        return float(self.exact_delta)

    def __repr__(self) -> str:
        return (
            f"ApproxDP({_literal('epsilon', self.exact_epsilon)}, "
            f"{_literal('delta', self.exact_delta)})"
        )

    def __add__(self, other: ApproxDP) -> ApproxDP:
        """Basic composition (Dwork & Roth 2014, Thm. 3.16), exactly."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        return ApproxDP(
            self.exact_epsilon + other.exact_epsilon, self.exact_delta + other.exact_delta
        )

    def __sub__(self, other: ApproxDP) -> ApproxDP:
        """What is left of ``self`` after ``other`` under basic composition, exactly."""
        if not isinstance(other, ApproxDP):
            return NotImplemented
        _check_not_larger("epsilon", self.exact_epsilon, other.exact_epsilon)
        _check_not_larger("delta", self.exact_delta, other.exact_delta)
        return ApproxDP(
            self.exact_epsilon - other.exact_epsilon, self.exact_delta - other.exact_delta
        )

    def to_zcdp(self, selection_delta: Number = 0.0) -> zCDP:
        """The zCDP allowance this (ε, δ) budget lets a session spend, rounded down.

        Returns ``zCDP(rho, delta=selection_delta, converted_from=self)``: δ_s =
        ``selection_delta`` is kept exactly, to be spent outright on private
        partition selection (privacy.md §6), and ρ = :meth:`zCDP.from_approx_dp`
        (ε, δ₁) with δ₁ = δ − δ_s (exact), so δ₁ + δ_s = δ.
        ``selection_delta=0`` (the default) is the all-to-ρ conversion of
        :func:`to_zcdp`.

        Why it is valid. A session that spends at most (ρ, δ_s) is (ρ, δ_s)-
        approximately zCDP: ρ and δ add under composition (Bun & Steinke
        2016, arXiv 1605.02065, approximate zCDP). That is, for neighbouring
        inputs x, x′ there are events E, E′ with probability >= 1 − δ_s such
        that P = M(x)|E and P′ = M(x′)|E′ have D_α(P‖P′) <= ρα for all α > 1.
        The CKS conversion applies to the pair: P(S) <= e^ε₁ P′(S) + δ₁ with
        ε₁ = ``zCDP(rho).epsilon(δ₁)`` (Canonne, Kamath & Steinke 2020,
        Prop. 12 / Cor. 13). Since P[E] >= 1 − δ_s, M(x) = (1 − δ_s)P + δ_s Q for
        some Q, and (1 − δ_s)P′(S) <= P[E′]P′(S) <= M(x′)(S); so for every S,
        M(x)(S) <= (1 − δ_s)(e^ε₁ P′(S) + δ₁) + δ_s <= e^ε₁ M(x′)(S) + δ₁ + δ_s.
        ρ is chosen so that ε₁ <= ε (certified with privframe's rounded-up
        conversion), and δ₁ + δ_s = δ: the session is (ε, δ)-DP.

        This is an allowance, the budget-side conversion. (The other
        direction, which :meth:`GDP.to_zcdp` takes, does not exist here: an
        (ε, δ)-DP mechanism need not be ρ-zCDP for any ρ.)

        Args:
            selection_delta: δ_s, 0 <= δ_s < δ: the part of δ to reserve.

        Returns:
            the :class:`zCDP` allowance, carrying this budget as
            ``converted_from`` so that an accountant reports (ε, δ) at this δ.

        Raises:
            InvalidArgumentError: ``selection_delta`` is not a real number.
            InvalidBudgetError: ``selection_delta`` is NaN, infinite, negative
                or not below δ; or δ = 0 (pure DP, which Gaussian releases
                cannot meet).

        Example:
            >>> import privframe as pf
            >>> b = pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
            >>> round(b.rho, 8), b.delta
            (0.02412962, 1e-07)
            >>> b.epsilon(1e-6) <= 1.0  # stated at the total δ: within ε
            True
            >>> pf.ApproxDP(1.0, 1e-6).to_zcdp() == pf.zCDP.from_approx_dp(1.0, 1e-6)
            True
        """
        reserve = exact("selection_delta", selection_delta)
        if self.exact_delta == 0:
            raise InvalidBudgetError(
                f"{self!r} is a pure-DP budget, which Gaussian (zCDP) releases cannot "
                "meet; give a delta in (0, 1), e.g. 1e-6"
            )
        if reserve >= self.exact_delta:
            raise InvalidBudgetError(
                f"selection_delta must be below the budget's delta={self.delta!r}, got "
                f"{selection_delta!r}; the rest of delta converts to rho (e.g. reserve a "
                f"tenth: selection_delta={float(self.exact_delta / 10)!r})"
            )
        rho = _from_approx_dp(self.exact_epsilon, self.exact_delta - reserve)
        return zCDP(Fraction(rho), reserve, converted_from=self)


@dataclass(frozen=True, slots=True, init=False, repr=False)
class GDP(_Ordered):
    """A μ-Gaussian-DP budget (Dong, Roth & Su 2022, Def. 2.6).

    μ-GDP composes as μ = sqrt(μ₁² + μ₂²) (their Cor. 3.3). A Gaussian
    mechanism with sensitivity Δ and std σ is exactly (Δ/σ)-GDP, which is also
    Δ²/(2σ²)-zCDP; so μ = sqrt(2ρ) for Gaussian releases. μ is read exactly
    (``exact_mu``; ``mu`` is the nearest float); a composition, being a square
    root, is rounded up to a float (a difference down).

    Args:
        mu: μ >= 0.

    Example:
        >>> import privframe as pf
        >>> pf.GDP(3.0) + pf.GDP(4.0)
        GDP(mu=5.0)
        >>> pf.GDP(5.0) - pf.GDP(4.0)
        GDP(mu=3.0)
    """

    exact_mu: Fraction

    def __init__(self, mu: Number) -> None:
        object.__setattr__(self, "exact_mu", exact("mu", mu))

    @property
    def mu(self) -> float:
        """μ as the nearest float; :attr:`exact_mu` is the exact value.

        Example:
            >>> import privframe as pf
            >>> pf.GDP(0.5).mu
            0.5
        """
        return float(self.exact_mu)

    def __repr__(self) -> str:
        return f"GDP({_literal('mu', self.exact_mu)})"

    def __add__(self, other: GDP) -> GDP:
        """Compose: μ = sqrt(μ₁² + μ₂²), rounded up."""
        if not isinstance(other, GDP):
            return NotImplemented
        try:
            return GDP(Fraction(_sqrt_up(self.exact_mu**2 + other.exact_mu**2)))
        except OverflowError:
            raise InvalidBudgetError(
                f"composed mu of {self.mu!r} and {other.mu!r} exceeds the float range"
            ) from None

    def __sub__(self, other: GDP) -> GDP:
        """What is left of ``self`` after ``other``: μ = sqrt(μ₁² − μ₂²), rounded down.

        The inverse of composition (Dong, Roth & Su 2022, Cor. 3.3): spending
        μ₂ out of μ₁ leaves every μ with μ₂² + μ² <= μ₁².
        """
        if not isinstance(other, GDP):
            return NotImplemented
        _check_not_larger("mu", self.exact_mu, other.exact_mu)
        return GDP(Fraction(_sqrt_down(self.exact_mu**2 - other.exact_mu**2)))

    def delta(self, epsilon: Number) -> float:
        """δ(ε) on the exact μ-GDP curve, rounded up.

        δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022,
        Cor. 2.13; Balle & Wang 2018, Thm. 8), evaluated in log space at μ
        rounded up and ε rounded down.

        Args:
            epsilon: ε >= 0.

        Returns:
            δ in [0, 1].

        Example:
            >>> import privframe as pf
            >>> round(pf.GDP(1.0).delta(1.0), 6)
            0.126937
        """
        eps = _round_down(exact("epsilon", epsilon))
        return _exp_up(_gaussian_log_delta(_round_up(self.exact_mu), eps, upper=True))

    def epsilon(self, delta: Number) -> float:
        """The smallest ε with δ(ε) <= ``delta`` on the exact μ-GDP curve, rounded up.

        Same curve as :meth:`delta` (Dong, Roth & Su 2022, Cor. 2.13), solved
        with Brent's method and then raised until a rounded-up evaluation of
        δ(ε) is <= ``delta``, at μ rounded up and δ rounded down. Exact for
        compositions of *continuous* Gaussian releases only; see
        :meth:`zCDP.to_gdp` for why privframe's stated (ε, δ) is the zCDP one.

        Args:
            delta: δ in (0, 1).

        Returns:
            ε >= 0.

        Example:
            >>> import privframe as pf
            >>> round(pf.GDP(1.0).epsilon(1e-5), 6)
            4.377178
        """
        delta_f = _round_down(_exact_conversion_delta(delta))
        if delta_f == 0:
            return math.inf
        return _gdp_epsilon(_round_up(self.exact_mu), delta_f)

    def to_zcdp(self) -> zCDP:
        """The ρ = μ²/2 that a μ-GDP mechanism satisfies, exactly.

        μ-GDP implies (μ²/2)-zCDP: by Blackwell's theorem (Dong, Roth & Su
        2022, Sec. 2) a μ-GDP pair is a post-processing of
        (N(0,1), N(μ,1)), whose Rényi divergence of order α is αμ²/2. μ is
        exact, so μ²/2 is too: no rounding either way.

        Example:
            >>> import privframe as pf
            >>> pf.GDP(1.0).to_zcdp()
            zCDP(rho=0.5, delta=0.0)
        """
        return _half_square(self)


Budget = zCDP | ApproxDP | GDP
"""Any budget a user may hand to privframe; sessions account in :class:`zCDP`."""


def _half_square(budget: GDP) -> zCDP:
    """zCDP(μ²/2), exactly; refused beyond the float range."""
    rho = budget.exact_mu**2 / 2
    if rho > _FLOAT_MAX:
        raise InvalidBudgetError(
            f"mu={budget.mu!r} is too large: rho = mu**2/2 exceeds the float range"
        )
    return zCDP(rho)


def to_zcdp(budget: Budget) -> zCDP:
    """The zCDP allowance a session may spend under a user's budget.

    - ``zCDP``: itself (including any δ for partition selection).
    - ``ApproxDP(ε, δ)``: :meth:`zCDP.from_approx_dp` (Canonne, Kamath &
      Steinke 2020 inverse), rounded down; all of δ goes to the conversion,
      so a session with this budget cannot choose groups privately. δ = 0 is
      refused. To keep part of δ for partition selection, convert it
      yourself with :meth:`ApproxDP.to_zcdp` (``selection_delta=...``) and
      give the result.
    - ``GDP(μ)``: ρ = μ²/2, exactly. Caveat: the session then guarantees
      ρ-zCDP; that equals μ-GDP only if every release is a continuous Gaussian
      (Dong, Roth & Su 2022). privframe's discrete Gaussian releases are ρ-zCDP
      (Canonne, Kamath & Steinke 2020) but not exactly μ-GDP.

    Args:
        budget: a :class:`zCDP`, :class:`ApproxDP` or :class:`GDP`.

    Returns:
        the session's :class:`zCDP` allowance.

    Raises:
        InvalidBudgetError: for an unknown budget type or an ApproxDP with δ = 0.

    Example:
        >>> import privframe as pf
        >>> from privframe.accounting.budgets import to_zcdp
        >>> to_zcdp(pf.GDP(1.0))
        zCDP(rho=0.5, delta=0.0)
        >>> round(to_zcdp(pf.ApproxDP(1.0, 1e-5)).rho, 8)
        0.0305566
    """
    if isinstance(budget, zCDP):
        return budget
    if isinstance(budget, ApproxDP):
        return budget.to_zcdp()
    if isinstance(budget, GDP):
        return _half_square(budget)
    raise InvalidBudgetError(f"budget must be a zCDP, ApproxDP or GDP, got {type(budget).__name__}")


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
        >>> from privframe.accounting.budgets import gaussian_sigma
        >>> gaussian_sigma(1.0, 0.5)
        1.0
        >>> gaussian_sigma(2.0, 0.125)
        4.0
        >>> sigma = gaussian_sigma(1.0, Fraction(1, 30))
        >>> 1 / (2 * Fraction(sigma) ** 2) <= Fraction(1, 30)
        True
    """
    delta_f = Fraction(_check_positive("l2_sensitivity", l2_sensitivity))
    rho_f = exact("rho", rho, positive=True)
    try:
        return _sqrt_up(delta_f**2 / (2 * rho_f))
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
        >>> from privframe.accounting.budgets import gaussian_rho
        >>> gaussian_rho(1.0, 2.0)
        0.125
    """
    delta_f = Fraction(_check_positive("l2_sensitivity", l2_sensitivity))
    sigma_f = Fraction(_check_positive("sigma", sigma))
    rho = delta_f**2 / (2 * sigma_f**2)
    try:
        spend = _round_up(rho)
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
        >>> from privframe.accounting.budgets import analytic_gaussian_sigma
        >>> round(analytic_gaussian_sigma(1.0, 1.0, 1e-5), 6)
        3.730632
    """
    sens = _check_positive("l2_sensitivity", l2_sensitivity)
    eps = _check_nonnegative("epsilon", epsilon)
    delta = _check_conversion_delta(delta)
    target = math.log(delta)

    def excess(u: float) -> float:
        return max(_gaussian_log_delta(math.exp(u), eps), _LOG_FLOOR) - target

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
    root = _solve(excess, lo, hi) if lo < hi else None
    mu = math.exp(lo if root is None else root)
    sens_f = Fraction(sens)

    def certified(sigma: float) -> bool:
        mu_up = _round_up(sens_f / Fraction(sigma))
        return _exp_up(_gaussian_log_delta(mu_up, eps, upper=True)) <= delta

    try:
        start = _round_up(sens_f / Fraction(mu))
    except OverflowError:
        start = math.inf
    sigma = None if math.isinf(start) else _increase_until(start, certified)
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
        >>> from privframe.accounting.budgets import classical_gaussian_sigma
        >>> round(classical_gaussian_sigma(1.0, 0.5, 1e-5), 6)
        9.689611
    """
    sens = _check_positive("l2_sensitivity", l2_sensitivity)
    eps = _check_positive("epsilon", epsilon)
    delta = _check_conversion_delta(delta)
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
    return _up(sigma, _GUARD * sigma)
