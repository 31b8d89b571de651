"""The subsampled Gaussian in log space: RDP series, and the Gaussian a composition equals.

Shared by the Rényi DP accountant (:mod:`privframe.accounting.rdp`) and the
privacy loss distribution accountant (:mod:`privframe.accounting.pld`):

* :func:`subsampled_gaussian_rdp`: RDP at one order of the Poisson-subsampled
  Gaussian, ln(A_α)/(α−1), with the integer-order binomial series and the
  fractional-order erfc series of Mironov, Talwar & Zhang 2019, "Rényi
  Differential Privacy of the Sampled Gaussian Mechanism" (arXiv 1908.10530,
  Sec. 3.2-3.3), computed by the same sums as Google's ``dp_accounting`` and
  rounded up by a guard for their rounding error;
* :func:`zhu_wang_rdp`: Zhu & Wang 2019's bound for *any* subsampled
  ρ-zCDP mechanism at one integer order;
* :func:`effective_noise_multiplier`: the one Gaussian equivalent (for RDP at
  every order) to a composition of Gaussians;
* :func:`log_sum_exp`: ln Σ e^v without overflow.

Example:
    >>> round(subsampled_gaussian_rdp(0.01, 1.0, 2.0, guard=True), 6)
    0.000172
"""

from __future__ import annotations

import math

import numpy as np
import scipy

from privframe.accounting.events import ComposedEvent, Event, GaussianEvent, SelfComposedEvent
from privframe.errors import InvalidValueError
from privframe.numeric import ULP, up

__all__ = [
    "effective_noise_multiplier",
    "log_sum_exp",
    "subsampled_gaussian_rdp",
    "zhu_wang_rdp",
]

_TERM_GUARD = 16 * ULP
"""Relative error allowed per term of a log-space series (lgamma, log_ndtr, sums)."""

_MAX_STEPS_LOG_A_FRAC = 1000
"""Iteration cap of the fractional-order series, as in dp_accounting."""


def _log_add(logx: float, logy: float) -> float:
    """ln(e^x + e^y), as dp_accounting computes it."""
    a, b = min(logx, logy), max(logx, logy)
    if a == -math.inf:
        return b
    return math.log1p(math.exp(a - b)) + b


def log_sum_exp(values: np.ndarray) -> float:
    """The natural log of Σ e^{v}, over a non-empty array of finite values.

    Plain numpy: scipy's ``logsumexp`` costs more in its array-API wrapper than
    in the sum, and this runs once per order or per λ of a Chernoff bound.
    """
    top = float(values.max())
    return top + math.log(float(np.exp(values - top).sum()))


def _log_erfc(x: float) -> float:
    """The natural log of erfc(x), accurate for large x."""
    return math.log(2) + float(scipy.special.log_ndtr(-x * 2**0.5))


def _series_error(weighted: float, largest: float, n_terms: int) -> float:
    """A bound on the floating-point error of a computed ln A.

    ``weighted`` is Σ exp(s_i − ln A)·(magnitude of the parts of s_i): the
    error of each term, in its share of the total; ``largest`` is the largest
    absolute running value of the sum, which each log-add rounds (a few ulps:
    exp, log1p and the add).
    """
    return _TERM_GUARD * weighted + 4 * ULP * (n_terms + 1) * largest


def _log_a_int(q: float, sigma: float, alpha: int) -> tuple[float, float]:
    """The log-moment ln A_α and its rounding-error bound; integer α, 0 < q < 1.

    Mironov, Talwar & Zhang 2019, Sec. 3.2.
    """
    i = np.arange(alpha + 1, dtype=np.float64)
    g_n = float(scipy.special.gammaln(alpha + 1))
    g_k = scipy.special.gammaln(i + 1)
    g_nk = scipy.special.gammaln(alpha - i + 1)
    log_q, log1mq = math.log(q), math.log1p(-q)
    two_var = 2 * (sigma**2)
    log_a = -math.inf
    terms = []
    largest = 0.0
    for k in range(alpha + 1):
        log_coef = (g_n - float(g_k[k]) - float(g_nk[k])) + k * log_q + (alpha - k) * log1mq
        s = log_coef + (k * k - k) / two_var
        magnitude = (
            abs(g_n)
            + abs(float(g_k[k]))
            + abs(float(g_nk[k]))
            + abs(k * log_q)
            + abs((alpha - k) * log1mq)
            + (k * k - k) / two_var
            + 1.0
        )
        terms.append((s, magnitude))
        log_a = _log_add(log_a, s)
        largest = max(largest, abs(log_a))
    weighted = sum(math.exp(s - log_a) * m for s, m in terms)
    return log_a, _series_error(weighted, largest, alpha + 1)


def _log_a_frac(q: float, sigma: float, alpha: float) -> tuple[float, float]:
    """The log-moment ln A_α and its rounding-error bound; fractional α, 0 < q < 1.

    Mironov, Talwar & Zhang 2019, Sec. 3.3.

    ``(inf, 0)`` when the series does not converge within the iteration cap (the
    order is then useless, as in dp_accounting).
    """
    log_a0, log_a1 = -math.inf, -math.inf
    z0 = sigma**2 * math.log(1 / q - 1) + 0.5
    log_q, log1mq = math.log(q), math.log1p(-q)
    last_s0 = last_s1 = -math.inf
    terms = []
    largest = 0.0
    g_n = float(scipy.special.gammaln(alpha + 1))
    for i in range(_MAX_STEPS_LOG_A_FRAC):
        g_k = float(scipy.special.gammaln(i + 1))
        g_nk = float(scipy.special.gammaln(alpha - i + 1))
        log_coef = g_n - g_k - g_nk
        j = alpha - i
        log_t0 = log_coef + i * log_q + j * log1mq
        log_t1 = log_coef + j * log_q + i * log1mq
        log_e0 = math.log(0.5) + _log_erfc((i - z0) / (math.sqrt(2) * sigma))
        log_e1 = math.log(0.5) + _log_erfc((z0 - j) / (math.sqrt(2) * sigma))
        log_s0 = log_t0 + (i * i - i) / (2 * (sigma**2)) + log_e0
        log_s1 = log_t1 + (j * j - j) / (2 * (sigma**2)) + log_e1
        common = abs(g_n) + abs(g_k) + abs(g_nk) + abs(i * log_q) + abs(j * log_q) + 1.0
        common += abs(i * log1mq) + abs(j * log1mq)
        terms.append((log_s0, common + abs(log_e0) + (i * i + abs(i)) / (2 * sigma**2)))
        terms.append((log_s1, common + abs(log_e1) + (j * j + abs(j)) / (2 * sigma**2)))
        log_a0 = _log_add(log_a0, log_s0)
        log_a1 = _log_add(log_a1, log_s1)
        total = _log_add(log_a0, log_a1)
        largest = max(largest, abs(log_a0), abs(log_a1), abs(total))
        if log_s0 < last_s0 and log_s1 < last_s1 and max(log_s0, log_s1) < total - 30:
            weighted = sum(math.exp(s - total) * m for s, m in terms)
            return total, _series_error(weighted, largest, len(terms))
        last_s0, last_s1 = log_s0, log_s1
    return math.inf, 0.0


def subsampled_gaussian_rdp(q: float, sigma: float, alpha: float, *, guard: bool) -> float:
    """RDP at one order of the subsampled Gaussian, 0 < q < 1.

    With ``guard=False`` the value dp_accounting computes (same sums, no
    rounding guard); tests compare that one with dp_accounting to 1e-9.
    """
    if alpha.is_integer():
        log_a, error = _log_a_int(q, sigma, int(alpha))
    else:
        log_a, error = _log_a_frac(q, sigma, alpha)
    if not math.isfinite(log_a):
        return math.inf
    if not guard:
        return log_a / (alpha - 1)
    rdp = up(log_a, error) / (alpha - 1)
    return max(0.0, up(rdp, 2 * ULP * abs(rdp)))


def effective_noise_multiplier(event: Event) -> tuple[float, bool]:
    """σ of the one Gaussian equivalent to a composition of Gaussians (rounded down).

    A composition of Gaussians with multipliers σ_i is, for RDP at every order,
    one Gaussian with σ = (Σ σ_i^−2)^−1/2 (as dp_accounting's
    ``_effective_gaussian_noise_multiplier``). Also returns whether any of them
    is discrete: their RDP adds the same way (each is at most the continuous
    one's), but the subsampled analysis of Mironov, Talwar & Zhang 2019 is for
    continuous noise only.
    """
    inverse_square, discrete = _inverse_square_sum(event)
    if inverse_square == 0:
        return math.inf, discrete
    sigma = (1 / inverse_square) ** 0.5
    return math.nextafter(sigma * (1 - 4 * ULP), 0.0), discrete


def _inverse_square_sum(event: Event) -> tuple[float, bool]:
    if isinstance(event, GaussianEvent):
        try:
            return event.noise_multiplier**-2, event.discrete
        except OverflowError:
            raise InvalidValueError(
                f"noise_multiplier={event.noise_multiplier!r} is too small to subsample: "
                "1/z² exceeds the float range"
            ) from None
    if isinstance(event, SelfComposedEvent):
        total, discrete = _inverse_square_sum(event.event)
        return event.count * total, discrete and event.count > 0
    if isinstance(event, ComposedEvent):
        parts = [_inverse_square_sum(e) for e in event.events]
        return math.fsum(t for t, _ in parts), any(d for _, d in parts)
    raise InvalidValueError(
        f"a PoissonSampledEvent must wrap Gaussian events (possibly composed), got "
        f"{type(event).__name__}; the subsampled RDP of other events is not implemented"
    )


def zhu_wang_rdp(q: float, rho: float, alpha: int) -> float:
    """Zhu & Wang 2019, Thm. 6 at one integer order α >= 2, rounded up."""
    log_q, log1mq = math.log(q), math.log1p(-q)
    ell = np.arange(2, alpha + 1, dtype=np.float64)
    log_binom = float(scipy.special.gammaln(alpha + 1)) - scipy.special.gammaln(ell + 1)
    log_binom = log_binom - scipy.special.gammaln(alpha - ell + 1)
    with np.errstate(over="ignore"):
        terms = log_binom + ell * log_q + (alpha - ell) * log1mq + (ell - 1) * ell * rho
    terms[1:] += math.log(3)
    first = (alpha - 1) * log1mq + math.log1p(q * (alpha - 1))
    everything = np.concatenate([[first], terms])
    if not np.isfinite(everything).all():
        return math.inf  # a term past the float range: no finite bound at this order
    top = float(everything.max())
    log_a = log_sum_exp(everything)
    magnitude = float(np.abs(everything).max()) + abs(float(scipy.special.gammaln(alpha + 1))) + 1.0
    rdp = up(log_a, _series_error(magnitude, abs(log_a) + abs(top), alpha)) / (alpha - 1)
    return max(0.0, up(rdp, 2 * ULP * abs(rdp)))
