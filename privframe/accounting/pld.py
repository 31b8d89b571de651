"""Privacy-loss-distribution (PLD) accounting of mechanism events.

:class:`PLDAccountant` replays :mod:`privframe.accounting.events` through their privacy
loss distributions (Koskela, Jälkö & Honkela 2020; Koskela & Honkela 2021;
Gopi, Lee & Wutschitz 2021; Doroshenko, Ghazi, Kamath, Kumar & Manurangsi
2022), which compose by convolution and give (ε, δ) far tighter than Rényi
accounting for many subsampled steps.

The privacy loss of a mechanism on neighbours D, D' is L = ln(P(o)/Q(o)) with
o ~ P = M(D), Q = M(D'); its privacy profile is
δ(ε) = P[L = ∞] + E_P[(1 − e^{ε−L})₊]. A pair (P̃, Q̃) whose profile is >= the
mechanism's at every ε (positive and negative) *dominates* it, and the
product of dominating pairs dominates the adaptive composition (Zhu, Dong &
Wang 2022, "Optimal Accounting of Differential Privacy via Characteristic
Function", Def. 4 and Thm. 10). Under add/remove neighbours both directions
(D' = D − x and D' = D + x) are tracked, and δ is the larger of the two.

**Events with a PLD.**

* Continuous Gaussian with noise multiplier z = σ/Δ: L ~ N(μ²/2, μ²) under P,
  μ = 1/z, in both directions. Gaussians compose *exactly* into one with
  μ² = Σ μᵢ², so a composition of Gaussians alone is evaluated in closed form
  on the μ-GDP curve (Dong, Roth & Su 2022, Cor. 2.13; Balle & Wang 2018,
  Thm. 8) with no discretisation at all.
* Poisson-subsampled Gaussian (sampling probability q, effective multiplier
  σ): remove direction P = (1−q)N(0, σ²) + qN(1, σ²), Q = N(0, σ²), and the add
  direction with P and Q swapped; the loss is monotone in the output, so its
  CDF is a mixture of normal CDFs at one threshold.
* ε-DP mechanisms (:class:`~privframe.accounting.events.LaplaceEvent`,
  :class:`~privframe.accounting.events.PureDPEvent`): ε-randomized response,
  P = (p, 1 − p), Q = (1 − p, p) with p = e^ε/(1 + e^ε), whose loss is ±ε.
  For each pair of neighbours every ε-DP mechanism is a post-processing of
  it (Kairouz, Oh & Viswanath 2015, proof of Thm. 3.3), so it dominates them all in
  both directions (Zhu, Dong & Wang 2022, Def. 4). k of them compose into
  Kairouz et al.'s optimal bound for k ε-DP mechanisms (their Thm. 3.3).
  Its two loss values are discretised like the other losses.
* :class:`~privframe.accounting.events.ThresholdEvent` with ρ = 0 (a δ spent outright):
  the pair with loss ∞ w.p. δ and 0 otherwise, so the composition has
  δ_total(ε) <= δ₀ + δ_PLD(ε).

**Discretisation: a certified bracket.** Losses live on the grid h·ℤ
(``value_discretization_interval``). Two discretisations are computed:

* *pessimistic* (the reported value): the "connect the dots" PLD of
  Doroshenko et al. 2022, whose profile interpolates the exact one linearly in
  e^ε between grid points. The profile is convex in e^ε, so the chord lies
  above it: the discretised pair dominates the mechanism, by construction.
  Each interval's probability mass is split between its two end points in
  proportion to where its likelihood ratio lies; the mass below the grid goes
  to its lowest point and the mass above it to the top point and to +∞.
* *optimistic*: the outputs whose loss falls in each window
  (a − h/2 + h/64, a + h/2 + h/64] are merged (post-processing, so the merged
  pair is dominated by the mechanism), and each merged loss, which lies near
  a + h/64, is rounded *down* to a when certified >= a, else to the point
  below. Its δ(ε) is <= the exact one; a step loses about h/64 of loss where
  losses spread over many grid points, and up to h where a step's loss is
  concentrated within one grid step (very small q).

Tails of a composition whose mass is below ``tail_mass`` are cut the same
way: into +∞ (or the lowest kept point) for the pessimistic PLD, onto the
highest kept point (or dropped) for the optimistic one. The exact ε lies in
``epsilon_bounds(δ)``; its width is the stated discretisation error.

**Floating point.** Every PLD carries two bounds, applied to δ in the
safe direction (added for the pessimistic PLD, subtracted for the optimistic):

* an error in Kolmogorov (sup-CDF) distance. δ(ε) = E[g(L)] with g monotone
  and in [0, 1], so it moves δ by at most that much, and convolving with a
  sub-probability does not increase it, so a k-fold composition has at most k
  times the error of one step. Per step: the normal CDFs' rounding (each CDF
  value within 8 ulps; interval masses telescope). Per FFT (power-of-two
  lengths, run in long double): Higham, "Accuracy and Stability of Numerical
  Algorithms", 2nd ed., §24.1, 10·u·log₂N relative ℓ₂ error per transform,
  with √N from ℓ₂ to ℓ₁, and the mass cut or wrapped around at the tails.
* a location error: how far from its grid point, in loss, rounding evaluated
  each CDF; it adds up under composition and shifts ε by at most that much.

The connect-the-dots split is lowered by its own rounding error bound, so it
can only move mass up. For 1,000 DP-SGD steps the δ error is ~1.5e-11.

**Events without a proven PLD.** The discrete Gaussian's privacy profile is
known only for one dimension and integer sensitivity (Canonne, Kamath &
Steinke 2020, Thm. 7), while privframe's releases are vectors with an L2
bound; what is proven for them is ρ-zCDP (their Rényi divergences are at most
the continuous Gaussian's). A :class:`~privframe.accounting.events.ZCDPEvent` or the
noisy counts of a :class:`~privframe.accounting.events.ThresholdEvent` with ρ > 0 are
likewise known only through ρ, and a Poisson-subsampled discrete Gaussian only
through Zhu & Wang's general subsampled-RDP bound
(:func:`privframe.accounting.rdp.poisson_rdp_general`). There is no dominating pair for
"some ρ-zCDP mechanism" whose compositions stay ρ-zCDP, so such events cannot
be mixed into a PLD soundly. When the events include any, the accountant says
so in :attr:`PLDAccountant.fallback` and reports a bound that is valid: the
zCDP conversion of the total ρ when nothing is subsampled (every event, plain
Gaussians included, has a ρ), otherwise the Rényi accountant over all events.

A :class:`PLDAccountant` *composes*, as :class:`~privframe.accounting.rdp.RDPAccountant`
does: it states the (ε, δ) of a sequence of events, charges no budget and
records nothing. Charging a session's budget on its ledger is the job of
:class:`privframe.accounting.accountant.Accountant`.

Example:
    >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
    >>> acct = PLDAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(1.1)), 1000)
    >>> lower, upper = acct.epsilon_bounds(1e-5)
    >>> lower <= upper == acct.epsilon(1e-5)
    True
    >>> round(upper, 2)
    1.52
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from privframe.accounting._pld_grid import (
    MAX_COUNT,
    GridPLD,
    convolve,
    discretize,
    gaussian_loss,
    randomized_response_loss,
    sampled_loss,
    self_compose,
)
from privframe.accounting._subsampled import effective_noise_multiplier
from privframe.accounting.budgets import GDP, mu_estimate, zCDP
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
from privframe.accounting.rdp import RDPAccountant
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.numeric import (
    check_conversion_delta,
    check_count,
    check_nonnegative,
    check_positive,
    conversion_slack,
    round_up,
    sqrt_down,
    sqrt_up,
)

__all__ = ["PLDAccountant", "mu_estimate"]

# ---------------------------------------------------------------------------
# The accountant
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Parts:
    """What a composition reduces to before any discretisation."""

    gaussian_inverse_square: Fraction  # Σ 1/z² over continuous Gaussians (exact composition)
    sampled: tuple[tuple[float, float, int], ...]  # (q, σ_effective, count), merged
    threshold_delta: float  # δ spent outright
    zcdp_rho: float  # ρ of the events known only through zCDP
    rdp_only: bool = False  # an event bounded only in RDP (a subsampled discrete Gaussian)
    pure: tuple[tuple[float, int], ...] = ()  # (ε, count) of the ε-DP events, merged

    def __add__(self, other: _Parts) -> _Parts:
        counts: dict[tuple[float, float], int] = {}
        for q, sigma, count in self.sampled + other.sampled:
            counts[(q, sigma)] = counts.get((q, sigma), 0) + count
        pure: dict[float, int] = {}
        for eps, count in self.pure + other.pure:
            pure[eps] = pure.get(eps, 0) + count
        return _Parts(
            self.gaussian_inverse_square + other.gaussian_inverse_square,
            tuple((q, s, c) for (q, s), c in counts.items() if c),
            min(1.0, round_up(Fraction(self.threshold_delta) + Fraction(other.threshold_delta))),
            round_up(Fraction(self.zcdp_rho) + Fraction(other.zcdp_rho)),
            self.rdp_only or other.rdp_only,
            tuple((e, c) for e, c in pure.items() if c),
        )

    def times(self, count: int) -> _Parts:
        return _Parts(
            self.gaussian_inverse_square * count,
            tuple((q, s, c * count) for q, s, c in self.sampled if c * count),
            min(1.0, round_up(Fraction(self.threshold_delta) * count)),
            round_up(Fraction(self.zcdp_rho) * count),
            self.rdp_only and count > 0,
            tuple((e, c * count) for e, c in self.pure if c * count),
        )

    def pure_rho(self) -> Fraction:
        """The zCDP ρ of the ε-DP events: Σ ε²/2 (Bun & Steinke 2016, Prop. 1.4), exactly."""
        return sum((count * Fraction(eps) ** 2 / 2 for eps, count in self.pure), Fraction(0))


_EMPTY = _Parts(Fraction(0), (), 0.0, 0.0)


def _parts(event: Event) -> _Parts:
    if isinstance(event, GaussianEvent):
        if event.discrete:
            # Δ²/(2σ²)-zCDP (Canonne, Kamath & Steinke 2020); no proven PLD for vectors.
            rho = round_up(1 / (2 * Fraction(event.noise_multiplier) ** 2))
            return _Parts(Fraction(0), (), 0.0, rho)
        return _Parts(1 / Fraction(event.noise_multiplier) ** 2, (), 0.0, 0.0)
    if isinstance(event, PoissonSampledEvent):
        sigma, discrete = effective_noise_multiplier(event.event)
        q = event.sampling_probability
        if math.isinf(sigma) or q == 0:
            return _EMPTY
        if discrete:
            # Subsampled discrete noise: only Zhu & Wang's general RDP bound is proven.
            return _Parts(Fraction(0), (), 0.0, 0.0, rdp_only=True)
        if q == 1:
            return _Parts(1 / Fraction(sigma) ** 2, (), 0.0, 0.0)
        return _Parts(Fraction(0), ((q, sigma, 1),), 0.0, 0.0)
    if isinstance(event, LaplaceEvent | PureDPEvent):
        eps = event.epsilon
        return _EMPTY if eps == 0 else _Parts(Fraction(0), (), 0.0, 0.0, pure=((eps, 1),))
    if isinstance(event, ThresholdEvent):
        return _Parts(Fraction(0), (), event.delta, event.rho)
    if isinstance(event, ZCDPEvent):
        return _Parts(Fraction(0), (), 0.0, event.rho)
    if isinstance(event, SelfComposedEvent):
        return _parts(event.event).times(event.count)
    if isinstance(event, ComposedEvent):
        total = _EMPTY
        for sub in event.events:
            total = total + _parts(sub)
        return total
    raise InvalidArgumentError(f"event must be a privframe event, got {type(event).__name__}")


class PLDAccountant:
    """Privacy-loss-distribution accountant over privframe events.

    See the module docstring for the construction and its error statement.

    Args:
        value_discretization_interval: the loss grid h, 0 < h <= 1 (default
            1e-4, as dp_accounting). The discretisation error shrinks with h;
            memory and time grow as 1/h.
        tail_mass: mass cut from each tail of every PLD (pessimistically),
            0 < tail_mass < 1e-6 (default 1e-15).

    Raises:
        InvalidValueError: an interval or a tail mass out of range.

    Example:
        >>> from privframe.accounting.events import GaussianEvent
        >>> acct = PLDAccountant().compose(GaussianEvent(2.0), count=4)
        >>> acct.epsilon(1e-5) == GDP(1.0).epsilon(1e-5)  # exact: μ = sqrt(4/2²)
        True
        >>> acct.mu_estimate(1e-5) == 1.0
        True
    """

    def __init__(
        self, value_discretization_interval: float = 1e-4, *, tail_mass: float = 1e-15
    ) -> None:
        self._h = check_positive("value_discretization_interval", value_discretization_interval)
        if self._h > 1:
            raise InvalidValueError(
                f"value_discretization_interval must be <= 1, got {value_discretization_interval!r}"
            )
        self._tail = check_positive("tail_mass", tail_mass)
        if self._tail >= 1e-6:
            raise InvalidValueError(f"tail_mass must be < 1e-6, got {tail_mass!r}")
        self._parts = _EMPTY
        self._events: list[Event] = []
        self._cache: dict[bool, tuple[GridPLD, GridPLD] | None] = {}

    @property
    def value_discretization_interval(self) -> float:
        """The loss grid h."""
        return self._h

    @property
    def events(self) -> tuple[Event, ...]:
        """The events composed so far, in order (``count > 1`` as a SelfComposedEvent)."""
        return tuple(self._events)

    @property
    def fallback(self) -> str | None:
        """Why the (ε, δ) is not a PLD bound, or None when it is.

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> PLDAccountant().compose(GaussianEvent(1.0, discrete=True)).fallback
            'zcdp'
        """
        parts = self._parts
        if parts.zcdp_rho == 0 and not parts.rdp_only:
            return None
        # Without subsampled events every event has a ρ, and the zCDP conversion of
        # their total is the tightest bound both methods know.
        if not parts.sampled and not parts.rdp_only:
            return "zcdp"
        return "rdp"

    def compose(self, event: Event, count: int = 1) -> PLDAccountant:
        """Add ``count`` repetitions of ``event``; returns this accountant.

        Raises:
            InvalidArgumentError: ``event`` is not an event or ``count`` not an int.
            InvalidValueError: a negative count, a Poisson-subsampled event other
                than (composed) Gaussians, or one subsampled event composed more
                than 2^40 times; nothing is composed then.

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> PLDAccountant().compose(GaussianEvent(1.0), 3).events[0].count
            3
        """
        if not isinstance(event, Event):
            raise InvalidArgumentError(
                f"event must be a privframe event, got {type(event).__name__}"
            )
        count = check_count("count", count)
        parts = self._parts + _parts(event).times(count)
        for q, sigma, total in parts.sampled:
            if total > MAX_COUNT:
                raise InvalidValueError(
                    f"the PLD accountant composes a subsampled event at most 2^40 times, got "
                    f"{total} of (q={q!r}, sigma={sigma!r}); use RDP accounting"
                )
        for eps, total in parts.pure:
            if total > MAX_COUNT:
                raise InvalidValueError(
                    f"the PLD accountant composes an epsilon-DP event at most 2^40 times, got "
                    f"{total} of epsilon={eps!r}; use RDP accounting"
                )
        self._parts = parts
        self._events.append(event if count == 1 else SelfComposedEvent(event, count))
        self._cache.clear()
        return self

    # -- PLDs -----------------------------------------------------------------

    def _plds(self, pessimistic: bool) -> tuple[GridPLD, GridPLD] | None:
        """The (remove, add) PLDs of the events with a PLD; None if only Gaussians."""
        if pessimistic in self._cache:
            return self._cache[pessimistic]
        parts = self._parts
        result: tuple[GridPLD, GridPLD] | None = None
        if parts.sampled or parts.pure:
            directions = []
            for remove in (True, False):
                steps = [
                    (sampled_loss(q, sigma, remove=remove), count)
                    for q, sigma, count in parts.sampled
                ]
                # Randomized response is symmetric: its loss is the same in both directions.
                steps += [(randomized_response_loss(eps), count) for eps, count in parts.pure]
                pld: GridPLD | None = None
                for loss, count in steps:
                    step = discretize(loss, self._h, self._tail, pessimistic=pessimistic)
                    composed = self_compose(step, count, self._tail)
                    pld = composed if pld is None else convolve(pld, composed, self._tail)
                assert pld is not None  # parts.sampled or parts.pure is not empty
                if parts.gaussian_inverse_square:
                    gaussian = discretize(
                        gaussian_loss(self._gaussian_mu(pessimistic)),
                        self._h,
                        self._tail,
                        pessimistic=pessimistic,
                    )
                    pld = convolve(pld, gaussian, self._tail)
                directions.append(pld)
            result = (directions[0], directions[1])
        self._cache[pessimistic] = result
        return result

    def _gaussian_mu(self, pessimistic: bool) -> float:
        """μ of the merged Gaussians, rounded in the bound's direction."""
        inverse_square = self._parts.gaussian_inverse_square
        return sqrt_up(inverse_square) if pessimistic else sqrt_down(inverse_square)

    def _zcdp(self) -> zCDP:
        """Every event's ρ added up (continuous Gaussians: 1/(2z²); ε-DP: ε²/2), with δ₀."""
        parts = self._parts
        rho = round_up(
            Fraction(parts.zcdp_rho) + parts.gaussian_inverse_square / 2 + parts.pure_rho()
        )
        # Fractions: computed floats at their exact value (zCDP reads a float as its decimal).
        return zCDP(Fraction(rho), Fraction(parts.threshold_delta))

    def _rdp(self) -> RDPAccountant:
        rdp = RDPAccountant()
        for event in self._events:
            rdp.compose(event)
        return rdp

    def _pld_epsilon(self, delta: float, pessimistic: bool) -> float:
        parts = self._parts
        if pessimistic:
            # δ_total(ε) = δ₀ + (1 − δ₀)·δ_PLD(ε) <= δ₀ + δ_PLD(ε): δ − δ₀ suffices.
            residual = conversion_slack(delta, parts.threshold_delta)
        else:
            # The exact crossing is at δ_PLD = (δ − δ₀)/(1 − δ₀), rounded up for a lower ε.
            d0 = Fraction(parts.threshold_delta)
            residual = min(round_up((Fraction(delta) - d0) / (1 - d0)), delta)
        plds = self._plds(pessimistic)
        if plds is None:
            mu = self._gaussian_mu(pessimistic)
            eps = GDP(mu).epsilon(residual) if mu else 0.0
            if not pessimistic:
                # GDP.epsilon certifies upwards by a few ulps (relative) and ~1e-14 near
                # ε = 0 (absolute); a lower bound steps back by more than both.
                eps = max(0.0, eps * (1 - 1e-9) - 1e-12)
            return eps
        return max(pld.epsilon(residual) for pld in plds)

    def _check_delta(self, delta: float) -> float:
        delta = check_conversion_delta(delta)
        if not delta > self._parts.threshold_delta:
            raise InvalidValueError(
                f"delta={delta!r} must exceed the delta spent outright by threshold "
                f"events ({self._parts.threshold_delta!r})"
            )
        return delta

    def epsilon(self, delta: float) -> float:
        """Upper bound on ε such that everything composed is (ε, δ)-DP.

        The pessimistic PLD's ε (or, with :attr:`fallback`, the zCDP or Rényi
        bound), rounded up.

        Raises:
            InvalidBudgetError: δ not in (0, 1).
            InvalidValueError: δ not above the δ spent outright by threshold events.

        Example:
            >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
            >>> step = PoissonSampledEvent(0.01, GaussianEvent(1.1))
            >>> round(PLDAccountant().compose(step, 1000).epsilon(1e-5), 3)
            1.515
        """
        delta = self._check_delta(delta)
        if self.fallback == "zcdp":
            return self._zcdp().epsilon(delta)
        if self.fallback == "rdp":
            return self._rdp().epsilon(delta)
        return self._pld_epsilon(delta, pessimistic=True)

    def epsilon_bounds(self, delta: float) -> tuple[float, float]:
        """(lower, upper): the exact ε of the composed events lies in between.

        ``upper`` is :meth:`epsilon`; ``lower`` is the optimistic PLD's ε. The
        width is the discretisation error at this δ (zero for Gaussians alone,
        up to rounding). The lower end rounds each step's merged losses down:
        over 10,000 steps at q = 0.01 the bracket is 0.016 wide, but where a
        step's loss sits within one grid step (q = 0.001, z = 0.8) it trails by
        up to h a step (the bracket is [0.60, 0.78] there). The upper end is the
        tight one.

        Raises:
            InvalidValueError: with a :attr:`fallback` (no PLD, so no lower bound).

        Example:
            >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
            >>> acct = PLDAccountant().compose(PoissonSampledEvent(0.1, GaussianEvent(2.0)), 100)
            >>> lower, upper = acct.epsilon_bounds(1e-6)
            >>> 0 < upper - lower < 0.01
            True
        """
        delta = self._check_delta(delta)
        if self.fallback is not None:
            raise InvalidValueError(
                "no PLD bracket: the events include ones known only through zCDP "
                f"(accounted by {self.fallback})"
            )
        return self._pld_epsilon(delta, pessimistic=False), self._pld_epsilon(delta, True)

    def delta(self, epsilon: float) -> float:
        """Upper bound on δ such that everything composed is (ε, δ)-DP (at most 1).

        Example:
            >>> from privframe.accounting.events import GaussianEvent
            >>> PLDAccountant().compose(GaussianEvent(1.0)).delta(1.0) == GDP(1.0).delta(1.0)
            True
        """
        eps = check_nonnegative("epsilon", epsilon)
        parts = self._parts
        if self.fallback == "zcdp":
            return self._zcdp().delta_at(eps)
        if self.fallback == "rdp":
            return self._rdp().delta(eps)
        plds = self._plds(pessimistic=True)
        if plds is None:
            mu = self._gaussian_mu(pessimistic=True)
            value = GDP(mu).delta(eps) if mu else 0.0
        else:
            value = max(pld.delta(eps) for pld in plds)
        return min(1.0, round_up(Fraction(value) + Fraction(parts.threshold_delta)))

    def mu_estimate(self, delta: float) -> float:
        """The μ-GDP summary of this composition at δ (see :func:`mu_estimate`).

        Exact for continuous Gaussians alone; otherwise the μ of the Gaussian
        curve through (:meth:`epsilon` (δ), δ).

        Example:
            >>> from privframe.accounting.events import GaussianEvent, PoissonSampledEvent
            >>> PLDAccountant().compose(GaussianEvent(0.5)).mu_estimate(1e-6)
            2.0
            >>> step = PoissonSampledEvent(0.01, GaussianEvent(1.1))
            >>> round(PLDAccountant().compose(step, 1000).mu_estimate(1e-5), 2)
            0.39
        """
        delta = self._check_delta(delta)
        parts = self._parts
        if (
            self.fallback is None
            and not parts.sampled
            and not parts.pure
            and parts.threshold_delta == 0
        ):
            return self._gaussian_mu(pessimistic=True)
        return mu_estimate(self.epsilon(delta), delta)
