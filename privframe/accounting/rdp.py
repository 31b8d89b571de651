"""Rényi DP accounting of mechanism events.

:class:`RDPAccountant` replays :mod:`privframe.accounting.events` in Rényi differential
privacy (Mironov 2017, "Rényi Differential Privacy"): each event has an RDP
curve ε(α) over a fixed grid of orders α, curves of composed events add, and
the total converts to (ε, δ)-DP. The orders, the per-event formulas and the
conversion are those of Google's ``dp_accounting`` (``RdpAccountant``, version
0.4 and later), so that both give the same numbers for the same events:

* Gaussian with noise multiplier σ/Δ: ε(α) = α/(2σ²) (Mironov 2017, Prop. 7).
* ε-DP mechanisms (:class:`~privframe.accounting.events.LaplaceEvent`,
  :class:`~privframe.accounting.events.PureDPEvent`): the curve of ε-randomized
  response, which dominates every ε-DP mechanism (:func:`pure_dp_rdp`).
  The discrete Gaussian has at most this RDP (Canonne, Kamath & Steinke 2020,
  "The Discrete Gaussian for Differential Privacy", Thm. 4).
* Poisson-subsampled Gaussian (sampling probability q, add/remove-one
  neighbours): ε(α) = ln(A_α)/(α−1), with A_α the exact binomial series for
  integer α and the two-sided erfc series for fractional α of Mironov, Talwar
  & Zhang 2019, "Rényi Differential Privacy of the Sampled Gaussian
  Mechanism" (arXiv 1908.10530, Sec. 3.2-3.3; Abadi et al. 2016 for DP-SGD).
  Their analysis is for continuous noise; a subsampled *discrete* Gaussian gets
  Zhu & Wang 2019's general bound for any mechanism (:func:`poisson_rdp_general`),
  looser (ε +18% for 1,000 steps at q = 0.01, z = 1.1).
* RDP → (ε, δ): ε = min over α of ε(α) + ln(1 − 1/α) − (ln δ + ln α)/(α − 1)
  (Canonne, Kamath & Steinke 2020, arXiv 2004.00010, Prop. 12; Asoodeh et
  al. 2020, arXiv 2001.05990, Eq. 20), for α > 1.01, together with the
  total-variation bound δ <= sqrt(1 − e^{−ε(α)}) (KL divergence <= ε(α) and the
  Bretagnolle–Huber inequality), exactly as ``dp_accounting.rdp`` does.

Partition selection (:class:`~privframe.accounting.events.ThresholdEvent`) is not a pure
RDP mechanism: its noisy counts cost ρ (RDP αρ at every order) and its
threshold spends δ outright. The accountant therefore tracks (α, ε(α), δ₀)-
approximate RDP: the δ₀ of threshold events add up (approximate zCDP composes
this way, Bun & Steinke 2016, Sec. 8), and a conversion at total δ uses
δ − δ₀ for the RDP part, the same split as :meth:`privframe.zCDP.epsilon`.

Floating point: the RDP values are computed by the same sums as
``dp_accounting`` and then rounded up by an explicit guard for the rounding
error of those sums (a few ulps of each term's magnitude, weighted by the
term's share of the total); conversions round ε and δ up. The fractional-order
series is truncated by ``dp_accounting``'s rule (terms decreasing and below
e^{−30} of the total); that truncation is not separately guarded.

An :class:`RDPAccountant` *composes*: it states the (ε, δ) of a sequence of
events and is immutable (``compose`` returns a new one). It charges no
budget and records nothing; charging a session's budget on its ledger is the
job of :class:`privframe.accounting.accountant.Accountant`, which
:mod:`privframe.accounting.replay` complements by replaying a ledger's
events through this accountant or :class:`~privframe.accounting.pld.PLDAccountant`.

Example:
    >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
    >>> acct = RDPAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(1.1)), 1000)
    >>> round(acct.epsilon(1e-5), 4)
    1.7118
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from privframe.accounting._subsampled import (
    effective_noise_multiplier,
    subsampled_gaussian_rdp,
    zhu_wang_rdp,
)
from privframe.accounting.budgets import mu_estimate
from privframe.accounting.conversions import exp_up
from privframe.accounting.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SelfComposedEvent,
    ThresholdEvent,
    ZCDPEvent,
)
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.numeric import (
    ULP,
    check_conversion_delta,
    check_count,
    check_nonnegative,
    check_positive,
    check_probability,
    conversion_slack,
    round_up,
    up,
)

__all__ = [
    "DEFAULT_ORDERS",
    "RDPAccountant",
    "gaussian_rdp",
    "poisson_gaussian_rdp",
    "poisson_rdp_general",
    "pure_dp_rdp",
    "rdp_to_delta",
    "rdp_to_epsilon",
]

DEFAULT_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10.0 for x in range(1, 100)]
    + [float(a) for a in range(11, 64)]
    + [128.0, 256.0, 512.0, 1024.0]
)
"""The Rényi orders of ``dp_accounting.rdp.rdp_privacy_accountant.DEFAULT_RDP_ORDERS``."""

# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


def _up_or_inf(value: Fraction) -> float:
    """``value`` rounded up to a float, or ``inf`` past the float range (a valid RDP bound)."""
    try:
        return round_up(value)
    except OverflowError:
        return math.inf


def _check_orders(orders: object) -> tuple[float, ...]:
    if isinstance(orders, str | bytes) or not isinstance(orders, Sequence | np.ndarray):
        raise InvalidArgumentError(
            f"orders must be a sequence of floats > 1, got {type(orders).__name__}"
        )
    checked = tuple(check_positive("orders", float(a)) for a in orders)
    if not checked:
        raise InvalidValueError("orders must not be empty")
    for a in checked:
        if a <= 1:
            raise InvalidValueError(f"orders must all be > 1, got {a!r}")
    return checked


# ---------------------------------------------------------------------------
# Per-event RDP curves
# ---------------------------------------------------------------------------


def gaussian_rdp(noise_multiplier: float, orders: Sequence[float] = DEFAULT_ORDERS) -> list[float]:
    """RDP of the Gaussian mechanism, α/(2σ²) at each order, rounded up.

    Mironov 2017, Prop. 7; also bounds the discrete Gaussian (Canonne, Kamath
    & Steinke 2020).

    Args:
        noise_multiplier: σ/Δ > 0.
        orders: Rényi orders α > 1.

    Example:
        >>> gaussian_rdp(2.0, [2.0, 32.0])
        [0.25, 4.0]
    """
    sigma = check_positive("noise_multiplier", noise_multiplier)
    return [_up_or_inf(Fraction(a) / (2 * Fraction(sigma) ** 2)) for a in _check_orders(orders)]


def _log_cosh(x: float) -> float:
    """The natural log of cosh x for x >= 0, to a few ulps relative (no cancellation near 0)."""
    if x < 20:
        return math.log1p(2 * math.sinh(x / 2) ** 2)
    return x - math.log(2) + math.log1p(math.exp(-2 * x))


def pure_dp_rdp(epsilon: float, orders: Sequence[float] = DEFAULT_ORDERS) -> list[float]:
    """RDP of any ε-DP mechanism at each order: that of ε-randomized response, rounded up.

    Randomized response P = (p, 1 − p), Q = (1 − p, p) with p = e^ε/(1 + e^ε)
    has D_α(P‖Q) = ln(p^α(1−p)^{1−α} + (1−p)^α p^{1−α})/(α − 1) = ln(cosh((α −
    ½)ε)/cosh(ε/2))/(α − 1) (the randomized-response curve of Mironov 2017,
    Sec. on basic mechanisms). For a given pair of neighbours every ε-DP
    mechanism is a post-processing of this pair (Kairouz, Oh & Viswanath 2015,
    proof of Thm. 3.3, with δ = 0), and Rényi divergence does not grow under
    post-processing (van Erven & Harremoës 2014, Thm. 9), so the curve bounds
    them all, in both directions. Two simpler bounds cap it: D_α <= D_∞ = ε,
    and D_α <= αε²/2 (ε-DP implies (ε²/2)-zCDP, Bun & Steinke 2016, Prop.
    3.3). The formula is evaluated in floats with a guard for its rounding.

    Args:
        epsilon: ε >= 0.
        orders: Rényi orders α > 1.

    Example:
        >>> [round(r, 6) for r in pure_dp_rdp(0.1, [2.0, 32.0])]
        [0.009959, 0.079272]
        >>> pure_dp_rdp(50.0, [2.0])  # capped by ε
        [50.0]
    """
    eps = check_nonnegative("epsilon", epsilon)
    curve = []
    for a in _check_orders(orders):
        if eps == 0:
            curve.append(0.0)
            continue
        cap = min(eps, _up_or_inf(Fraction(a) * Fraction(eps) ** 2 / 2))
        top, bottom = _log_cosh((a - 0.5) * eps), _log_cosh(eps / 2)
        # Each ln cosh is within a few ulps of its value; α − 1 is exact for α in (1, 2^53].
        value = up((top - bottom) / (a - 1), 16 * ULP * (top + bottom) / (a - 1))
        curve.append(max(0.0, min(cap, value)))
    return curve


def poisson_gaussian_rdp(
    sampling_probability: float,
    noise_multiplier: float,
    orders: Sequence[float] = DEFAULT_ORDERS,
) -> list[float]:
    """RDP of the Poisson-subsampled Gaussian mechanism at each order (upper bounds).

    Mironov, Talwar & Zhang 2019 (arXiv 1908.10530): ln(A_α)/(α − 1), with the
    exact series for integer α and the erfc series for fractional α, for
    add/remove-one neighbours; q = 1 is the plain Gaussian and q = 0 costs 0.
    An order whose fractional series does not converge gets ``inf``.

    Args:
        sampling_probability: q in [0, 1].
        noise_multiplier: σ/Δ > 0.
        orders: Rényi orders α > 1.

    Example:
        >>> [round(r, 6) for r in poisson_gaussian_rdp(0.01, 1.0, [2.0, 8.0])]
        [0.000172, 0.000894]
    """
    q = check_probability("sampling_probability", sampling_probability)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    orders = _check_orders(orders)
    if q == 0:
        return [0.0 for _ in orders]
    if q == 1:
        return gaussian_rdp(sigma, orders)
    return [subsampled_gaussian_rdp(q, sigma, a, guard=True) for a in orders]


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------


def _check_curve(orders: Sequence[float], rdp: Sequence[float]) -> tuple[tuple, tuple]:
    orders = _check_orders(orders)
    if isinstance(rdp, str | bytes) or not isinstance(rdp, Sequence | np.ndarray):
        raise InvalidArgumentError(f"rdp must be a sequence of floats, got {type(rdp).__name__}")
    values = tuple(float(r) for r in rdp)
    if len(values) != len(orders):
        raise InvalidValueError(
            f"rdp must have one value per order: {len(values)} values for {len(orders)} orders"
        )
    for r in values:
        if math.isnan(r) or r < 0:
            raise InvalidValueError(f"rdp values must be >= 0 (inf allowed), got {r!r}")
    return orders, values


def rdp_to_epsilon(orders: Sequence[float], rdp: Sequence[float], delta: float) -> float:
    """Upper bound on the ε of (ε, δ)-DP implied by an RDP curve.

    min over α of ε(α) + ln(1 − 1/α) − ln(δα)/(α − 1) for α > 1.01 (Canonne,
    Kamath & Steinke 2020, Prop. 12), and 0 where δ >= sqrt(1 − e^{−ε(α)})
    (Bretagnolle–Huber); the conversion of ``dp_accounting.rdp.compute_epsilon``,
    rounded up.

    Args:
        orders: Rényi orders α > 1.
        rdp: ε(α) at each order, >= 0.
        delta: 0 < δ < 1.

    Example:
        >>> round(rdp_to_epsilon([2.0, 10.0, 20.0], [0.1, 0.5, 1.0], 1e-5), 6)
        1.39698
    """
    orders, values = _check_curve(orders, rdp)
    delta = check_conversion_delta(delta)
    best = math.inf
    for a, r in zip(orders, values, strict=True):
        if math.isinf(r):
            continue
        if delta**2 + math.expm1(-r) > 0:
            return 0.0
        if a > 1.01:
            log1p_term = math.log1p(-1 / a)
            log_term = math.log(delta * a) / (a - 1)
            eps = r + log1p_term - log_term
            magnitude = r + abs(log1p_term) + abs(log_term)
            best = min(best, up(eps, 8 * ULP * magnitude))
    return max(0.0, best)


def rdp_to_delta(orders: Sequence[float], rdp: Sequence[float], epsilon: float) -> float:
    """Upper bound on the δ of (ε, δ)-DP implied by an RDP curve at ε.

    min over α of exp((α−1)(ε(α) − ε + ln(1 − 1/α)) − ln α) for α > 1.01
    (Canonne, Kamath & Steinke 2020, Prop. 12) and sqrt(1 − e^{−ε(α)}); the
    conversion of ``dp_accounting.rdp.compute_delta``, rounded up, capped at 1.

    Args:
        orders: Rényi orders α > 1.
        rdp: ε(α) at each order, >= 0.
        epsilon: ε >= 0.

    Example:
        >>> rdp_to_delta([2.0, 10.0, 20.0], [0.1, 0.5, 1.0], 1.39699) <= 1e-5
        True
    """
    orders, values = _check_curve(orders, rdp)
    epsilon = check_nonnegative("epsilon", epsilon)
    best = 0.0  # ln 1
    for a, r in zip(orders, values, strict=True):
        if math.isinf(r):
            continue
        if r == 0:
            return 0.0
        log_tv = 0.5 * math.log1p(-math.exp(-r))
        candidate = up(log_tv, 4 * ULP * abs(log_tv) + 4 * ULP)
        if a > 1.01:
            log1p_term = math.log1p(-1 / a)
            bound = (a - 1) * (r - epsilon + log1p_term) - math.log(a)
            magnitude = (a - 1) * (r + epsilon + abs(log1p_term)) + math.log(a)
            candidate = min(candidate, up(bound, 8 * ULP * magnitude))
        best = min(best, candidate)
    return exp_up(best)


def poisson_rdp_general(
    sampling_probability: float, rho: float, orders: Sequence[float] = DEFAULT_ORDERS
) -> list[float]:
    """RDP of *any* ρ-zCDP mechanism run on a Poisson subsample (upper bounds).

    Zhu & Wang 2019, "Poisson Subsampled Rényi Differential Privacy" (ICML),
    Thm. 6, for a base mechanism with RDP ε(ℓ) = ℓρ at integer orders α >= 2:
    ε'(α) <= ln{(1−q)^{α−1}(αq − q + 1) + C(α,2)q²(1−q)^{α−2}e^{ε(2)}
    + 3 Σ_{ℓ=3}^{α} C(α,ℓ)(1−q)^{α−ℓ}q^ℓ e^{(ℓ−1)ε(ℓ)}}/(α − 1), and never
    more than the base's αρ (quasi-convexity of Rényi divergence). Without the
    factor 3 the bound is Mironov, Talwar & Zhang's exact series for the
    continuous Gaussian; with it, it holds for every mechanism, so for the
    discrete Gaussian. A fractional order α takes the bound at ⌈α⌉ (Rényi
    divergence does not decrease with the order).

    Args:
        sampling_probability: q in [0, 1].
        rho: the base mechanism's zCDP ρ >= 0 (for a discrete Gaussian 1/(2z²)).
        orders: Rényi orders α > 1.

    Example:
        >>> general = poisson_rdp_general(0.01, 1 / (2 * 1.1**2), [2.0, 8.0, 8.5])
        >>> exact = poisson_gaussian_rdp(0.01, 1.1, [2.0, 8.0])
        >>> general[0] >= exact[0] and general[1] >= exact[1]
        True
    """
    q = check_probability("sampling_probability", sampling_probability)
    rho = check_nonnegative("rho", rho)
    orders = _check_orders(orders)
    base = [_up_or_inf(Fraction(rho) * Fraction(a)) for a in orders]
    if q == 1 or rho == 0:
        return base
    if q == 0:
        return [0.0 for _ in orders]
    if math.isinf(rho):
        return base
    # RDP does not decrease with the order, so a fractional α takes the bound at ⌈α⌉;
    # each integer order is computed once (the default grid has ten per integer).
    integer = {a: max(2, math.ceil(a)) for a in orders}
    bounds = {k: zhu_wang_rdp(q, rho, k) for k in set(integer.values())}
    return [min(ceiling, bounds[integer[a]]) for a, ceiling in zip(orders, base, strict=True)]


# ---------------------------------------------------------------------------
# The accountant
# ---------------------------------------------------------------------------


class RDPAccountant:
    """Rényi DP accountant over a fixed grid of orders, replaying privframe events.

    Composition adds RDP curves order by order (Mironov 2017, Prop. 1);
    :class:`~privframe.accounting.events.ThresholdEvent` adds αρ and accumulates its δ
    separately (see the module docstring).

    Args:
        orders: Rényi orders α > 1; by default :data:`DEFAULT_ORDERS`, those of
            dp_accounting's ``RdpAccountant``.

    Raises:
        InvalidArgumentError: ``orders`` is not a sequence.
        InvalidValueError: an order <= 1, or no orders.

    Example:
        >>> from privframe.accounting.events import GaussianEvent, ThresholdEvent
        >>> acct = RDPAccountant().compose(GaussianEvent(2.0), count=8)
        >>> acct.compose(ThresholdEvent(rho=0.01, delta=1e-7)).threshold_delta
        1e-07
        >>> round(acct.epsilon(1e-5), 4), acct.delta(10.0) < 1e-5
        (7.1225, True)
        >>> len(acct.events)
        2
    """

    def __init__(self, orders: Sequence[float] = DEFAULT_ORDERS) -> None:
        self._orders = _check_orders(orders)
        self._rdp = [0.0] * len(self._orders)
        self._threshold_delta = 0.0
        self._events: list[Event] = []

    @property
    def orders(self) -> tuple[float, ...]:
        """The Rényi orders α."""
        return self._orders

    @property
    def rdp(self) -> tuple[float, ...]:
        """The composed RDP ε(α) at each order (upper bounds)."""
        return tuple(self._rdp)

    @property
    def threshold_delta(self) -> float:
        """The δ spent outright by composed threshold events (rounded up)."""
        return self._threshold_delta

    @property
    def events(self) -> tuple[Event, ...]:
        """The events composed so far, in order (``count > 1`` as a SelfComposedEvent)."""
        return tuple(self._events)

    def _curve(self, event: Event) -> tuple[list[float], float]:
        """The RDP curve and the outright δ of one event."""
        if isinstance(event, GaussianEvent):
            return gaussian_rdp(event.noise_multiplier, self._orders), 0.0
        if isinstance(event, PoissonSampledEvent):
            sigma, discrete = effective_noise_multiplier(event.event)
            if math.isinf(sigma) or event.sampling_probability == 0:
                return [0.0] * len(self._orders), 0.0
            if discrete:
                rho = _up_or_inf(1 / (2 * Fraction(sigma) ** 2))
                curve = poisson_rdp_general(event.sampling_probability, rho, self._orders)
                return curve, 0.0
            return poisson_gaussian_rdp(event.sampling_probability, sigma, self._orders), 0.0
        if isinstance(event, LaplaceEvent | PureDPEvent):
            return pure_dp_rdp(event.epsilon, self._orders), 0.0
        if isinstance(event, ThresholdEvent | ZCDPEvent):
            exact_rho = Fraction(event.rho)
            delta = event.delta if isinstance(event, ThresholdEvent) else 0.0
            return [_up_or_inf(exact_rho * Fraction(a)) for a in self._orders], delta
        if isinstance(event, SelfComposedEvent):
            curve, delta = self._curve(event.event)
            return self._scale(curve, delta, event.count)
        if isinstance(event, ComposedEvent):
            total, total_delta = [0.0] * len(self._orders), 0.0
            for sub in event.events:
                curve, delta = self._curve(sub)
                total, total_delta = self._add(total, total_delta, curve, delta)
            return total, total_delta
        raise InvalidArgumentError(f"event must be a privframe event, got {type(event).__name__}")

    @staticmethod
    def _scale(curve: list[float], delta: float, count: int) -> tuple[list[float], float]:
        scaled = [r if math.isinf(r) else _up_or_inf(count * Fraction(r)) for r in curve]
        if count == 0:
            scaled = [0.0] * len(curve)
        return scaled, min(1.0, round_up(count * Fraction(delta)))

    @staticmethod
    def _add(
        curve: list[float], delta: float, other: list[float], other_delta: float
    ) -> tuple[list[float], float]:
        added = [
            a + b if math.isinf(a) or math.isinf(b) else _up_or_inf(Fraction(a) + Fraction(b))
            for a, b in zip(curve, other, strict=True)
        ]
        return added, min(1.0, round_up(Fraction(delta) + Fraction(other_delta)))

    def compose(self, event: Event, count: int = 1) -> RDPAccountant:
        """Add ``count`` repetitions of ``event``; returns this accountant.

        Raises:
            InvalidArgumentError: ``event`` is not an event or ``count`` not an int.
            InvalidValueError: a negative count, or an event this accountant
                cannot bound (a Poisson-subsampled threshold or zCDP event);
                nothing is composed then.

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> RDPAccountant([2.0, 4.0]).compose(GaussianEvent(1.0), 3).rdp
            (3.0, 6.0)
        """
        if not isinstance(event, Event):
            raise InvalidArgumentError(
                f"event must be a privframe event, got {type(event).__name__}"
            )
        count = check_count("count", count)
        curve, delta = self._scale(*self._curve(event), count)
        self._rdp, self._threshold_delta = self._add(self._rdp, self._threshold_delta, curve, delta)
        self._events.append(event if count == 1 else SelfComposedEvent(event, count))
        return self

    def epsilon(self, delta: float) -> float:
        """Upper bound on ε such that everything composed is (ε, δ)-DP.

        The RDP part is converted at δ minus :attr:`threshold_delta` by
        :func:`rdp_to_epsilon`.

        Raises:
            InvalidBudgetError: δ not in (0, 1), or not above :attr:`threshold_delta`.

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> round(RDPAccountant().compose(GaussianEvent(1.0)).epsilon(1e-5), 4)
            4.7285
        """
        delta = check_conversion_delta(delta)
        if not delta > self._threshold_delta:
            raise InvalidValueError(
                f"delta={delta!r} must exceed the delta spent outright by threshold "
                f"events ({self._threshold_delta!r})"
            )
        return rdp_to_epsilon(
            self._orders, self._rdp, conversion_slack(delta, self._threshold_delta)
        )

    def mu_estimate(self, delta: float) -> float:
        """The μ-GDP summary at δ: the μ whose Gaussian curve passes through (ε(δ), δ).

        See :func:`privframe.accounting.mu_estimate`; a summary, not a guarantee.

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> round(RDPAccountant().compose(GaussianEvent(1.0)).mu_estimate(1e-5), 3)
            1.069

            (the exact μ is 1.0: RDP's conversion is looser than the Gaussian curve)
        """
        return mu_estimate(self.epsilon(delta), delta)

    def delta(self, epsilon: float) -> float:
        """Upper bound on δ such that everything composed is (ε, δ)-DP (at most 1).

        :func:`rdp_to_delta` of the RDP part plus :attr:`threshold_delta`.

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> RDPAccountant().compose(GaussianEvent(1.0)).delta(4.73) <= 1e-5
            True
        """
        rdp_delta = rdp_to_delta(self._orders, self._rdp, epsilon)
        return min(1.0, round_up(Fraction(rdp_delta) + Fraction(self._threshold_delta)))
