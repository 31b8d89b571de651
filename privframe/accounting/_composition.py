"""The tight composition an (ε, δ) budget is charged: a privacy filter sound under adaptivity.

An :class:`~privframe.accounting.accountant.Accountant` with an
:class:`~privframe.accounting.ApproxDP` budget (E, D) records each release's
cost (ε_i, δ_i) and charges, instead of their sum Σε_i, the smaller total
T_n that :class:`Composition` folds from the entries in order. A spend fits
when T_{n+1} <= E and Σδ_i <= D. This module states T and proves that
stopping there keeps the whole session (E, D)-DP, however the analyst picks
each release from the results of the earlier ones.

**Why not the PLD of the releases.** The privacy loss distribution of the
releases made so far gives the tightest (ε, δ) of that *fixed* sequence. But
a session's releases are chosen adaptively, and the rule "continue while
the composition of what was released fits" is a privacy *filter* (Rogers,
Roth, Ullman & Vadhan 2016). For exact privacy profiles that natural filter
is not valid in general (Koskela, Tran, Räisä & Honkela 2026, arXiv
2602.06756; Regehr, Hu, Leeman, Manurangsi, Tholoniat & Lécuyer 2026, arXiv
2602.15815: only families totally ordered under composition admit it). A
two-step example: release ε₁-randomized response; on the output that
raises the loss, release a Gaussian whose composition with it is exactly
(E, D)-DP; on the other, a release spending δ = D outright. Each path's
composition is (E, D)-DP, but the session's δ at E is p·g(E−ε₁) + (1−p)·D,
which exceeds D because g(E−ε₁) > D (g the Gaussian's profile). So privframe
charges a bound that *is* a valid filter.

**The bound.** Fix neighbours x, x′ and let L_n be the privacy loss of the
first n outputs. Each release is replaced by a pair that dominates it (a
post-processing argument, Kairouz, Oh & Viswanath 2015, proof of Thm. 3.3),
chosen when the release is asked for, from its parameters only:

* (a) any release charged (ε_i, δ_i): the (ε_i, δ_i)-randomized response,
  whose loss is +∞ with probability δ_i (an *atom*) and else ±ε_i; so
  L_i − L_{i−1} <= ε_i surely outside the atom, and its Rényi divergence of
  order α is that of ε_i-randomized response (:func:`~privframe.accounting.rdp.pure_dp_rdp`).
  When the release's events (below) show it is (ε_i, δ′)-DP for some δ′ < δ_i,
  the same pair at (ε_i, δ′): the atom is δ′ and the rest of δ_i is *slack*;
* (b) a release whose ``description["events"]`` say what it ran (events of
  ε-DP mechanisms only must add up to its charged ε, else they are not
  believed and it counts by its charge): the events' own Rényi curve
  (:class:`~privframe.accounting.rdp.RDPAccountant`), atoms the δ₀ its
  threshold events spend outright (plus ln(1/(1 − δ₀)) at every
  order, for the mass the other side's atom takes away), a sure bound Σε_e
  only if every event is ε_e-DP (Laplace, exponential mechanism); the rest of
  δ_i, s_i = δ_i − δ₀, is *slack*.

Whichever gives the smaller T_n is taken (it depends on parameters only, so
the choice is predictable). For each release i with slack s_i > 0 and each
order α of :data:`ORDERS` (λ = α − 1), M_n = exp(λ(L_n − L_{i−1}) − λ Σ_{j=i..n}
r_j(α)), frozen at 0 after an atom, is a nonnegative supermartingale from
step i on (each r_j bounds the step's conditional Rényi divergence of order
α, as in the Rényi filter of Feldman & Zrnic 2021), so by Ville's inequality
with probability at least 1 − s_i/|ORDERS| it never exceeds |ORDERS|/s_i:
for all n >= i, L_n − L_{i−1} < Σ_{j=i..n} r_j(α) + ln(|ORDERS|/s_i)/λ. With
T_0 = 0 and

    T_n = min(T_{n−1} + ε̄_n, min over starts i <= n and orders α of
              T_{i−1} + Σ_{j=i..n} r_j(α) + ln(|ORDERS|/s_i)/(α − 1)),

where ε̄_n is release n's sure bound (the first term is left out when it
has none), induction gives L_n <= T_n for every n outside the union of the
atoms and the Ville events. That union has probability at most
E[Σ_i (atoms_i + s_i)] <= E[Σ_i δ_i] <= D, since each release's atoms and slack
are at most its charged δ_i and the accountant keeps Σδ_i <= D on every path.
A session stopped by "T <= E" thus has P[L > E] <= D: it is (E, D)-DP (on the
complement, P(o) <= e^E P′(o)), for every pair of neighbours and every
adaptive analyst. Option (a) alone makes T_n <= T_{n−1} + ε_n, so T never
exceeds basic composition and spending exactly what remains always fits.

A release's δ is what buys tightness: a Laplace release charged (ε, δ) under
option (b) turns all of δ into slack, and the first release with slack
starts the Rényi bound; with δ = 0 everywhere T is Σε. Slack is not pooled
across releases (a supermartingale's threshold must be fixed when it starts),
so one release with a larger δ is worth more than many small ones.

Numbers: each r_j is a float rounded up and used at its exact binary value,
each ln(|ORDERS|/s)/λ is rounded up, and sums are exact, so T is exact and
compared exactly. T depends on the entries alone (not on the budget), so
every process sharing a ledger folds the same T.

Example:
    >>> from fractions import Fraction
    >>> from privframe.accounting.events import LaplaceEvent
    >>> state = Composition()
    >>> for _ in range(50):
    ...     state = state.add(Fraction(1, 10), Fraction(1, 10**7), [LaplaceEvent(10.0)])
    >>> state.basic_epsilon, float(state.epsilon) < 4.3
    (Fraction(5, 1), True)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from privframe.accounting.events import (
    ComposedEvent,
    Event,
    LaplaceEvent,
    PureDPEvent,
    SelfComposedEvent,
    from_dict,
)
from privframe.accounting.rdp import RDPAccountant, pure_dp_rdp
from privframe.errors import InvalidArgumentError, InvalidValueError, PrivframeError
from privframe.numeric import ULP, round_down, round_up, up

__all__ = ["ORDERS", "Composition", "description_events"]

ORDERS: tuple[float, ...] = (
    1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 11.0, 16.0, 23.0, 32.0, 45.0, 64.0, 91.0, 128.0, 256.0, 512.0,
)  # fmt: skip
"""The Rényi orders α of the bound; each start's slack is split evenly among them."""


def description_events(description: object) -> list[Event] | None:
    """The events a ledger description records (``description["events"]``), or None.

    None when the description records none (it is a str, or has no
    ``"events"``); an empty list when it records that the entry ran no
    mechanism (its δ is then all slack).

    Raises:
        InvalidValueError: ``"events"`` is not a list of valid event dicts.

    Example:
        >>> description_events({"events": [{"type": "pure_dp", "version": 3, "epsilon": 0.5}]})
        [PureDPEvent(epsilon=0.5)]
        >>> description_events("a note") is None
        True
    """
    if not isinstance(description, Mapping) or "events" not in description:
        return None
    raw = description["events"]
    try:
        if isinstance(raw, str | bytes | Mapping) or not isinstance(raw, Sequence):
            raise InvalidValueError(
                f"events must be a list of event dicts, got {type(raw).__name__}"
            )
        return [from_dict(event) for event in raw]
    except PrivframeError as err:
        problem = str(err)
    raise InvalidValueError(f"the description's events are malformed: {problem}")


def recorded_events(description: object) -> list[Event] | None:
    """A recorded entry's events, or None when it has none or they do not parse.

    Events that do not parse (written by hand, or by a newer privframe) make
    the entry count as a generic (ε, δ)-DP release: never less than charged.

    Example:
        >>> recorded_events({"events": [{"type": "unknown"}]}) is None
        True
    """
    try:
        return description_events(description)
    except InvalidValueError:
        return None


def _pure_epsilon(events: Sequence[Event]) -> Fraction | None:
    """Σε of the events if every one is ε-DP (the sure bound of their loss), else None.

    Exact: a Laplace event's ε is 1/``noise_multiplier`` of its float multiplier.
    """
    total = Fraction(0)
    for event in events:
        if isinstance(event, LaplaceEvent):
            total += 1 / Fraction(event.noise_multiplier)
        elif isinstance(event, PureDPEvent):
            total += Fraction(event.epsilon)
        elif isinstance(event, SelfComposedEvent):
            inner = _pure_epsilon([event.event])
            if inner is None:
                return None
            total += event.count * inner
        elif isinstance(event, ComposedEvent):
            inner = _pure_epsilon(event.events)
            if inner is None:
                return None
            total += inner
        else:
            return None
    return total


@dataclass(frozen=True)
class _Option:
    """One way to bound a release: its Rényi curve, atoms, slack and sure loss bound."""

    rdp: tuple[float, ...]
    slack: Fraction
    sure: Fraction | None


def _generic(epsilon: Fraction, delta: Fraction, atoms: Fraction) -> _Option:
    """Option (a): the (ε, δ′)-randomized response for a release that is (ε, δ′)-DP, δ′ <= δ.

    Its atom is δ′; the rest of the charged δ is slack.
    """
    return _Option(tuple(pure_dp_rdp(round_up(epsilon), ORDERS)), delta - atoms, epsilon)


def _events_delta(
    epsilon: Fraction, events: Sequence[Event], rdp: RDPAccountant | None
) -> Fraction | None:
    """A δ for which the events together are (ε, δ)-DP, or None if they cannot be bounded.

    When they are ε_e-DP, with e = Σε_e: 0 if e <= ε, else the profile of
    e-randomized response at ε, (e^e − e^ε)/(1 + e^e), which bounds every
    e-DP mechanism's (Kairouz, Oh & Viswanath 2015): the float rounding of a
    recorded ε then costs a δ of the order of the rounding. Otherwise the
    Rényi conversion of their curve ``rdp`` (Canonne, Kamath & Steinke 2020,
    Prop. 12) plus the δ their threshold events spend outright, at ε rounded
    down (None when they have no Rényi curve). The events of one release are
    fixed before it runs, so composing them is not a filter.
    """
    pure = _pure_epsilon(events)
    if pure is not None:
        if pure <= epsilon:
            return Fraction(0)
        total, eps = round_up(pure), round_down(epsilon)
        value = -math.expm1(eps - total) / (1 + math.exp(-total))
        return Fraction(up(value, 8 * ULP * value))
    if rdp is None:
        return None
    return Fraction(rdp.delta(round_down(epsilon)))


_CHARGE_SLACK = Fraction(1, 2**20)
"""Relative rounding allowed between a release's charged ε and its events' own ε."""


def _accounts_for(epsilon: Fraction, events: Sequence[Event]) -> bool:
    """Whether events made of ε-DP mechanisms only claim at least the charged ε.

    A release is charged (ε, δ) as it asked, and its events say what it ran.
    A Gaussian's events are tighter than its charge (that is where slack
    comes from), but a pure-DP release is charged its ε exactly: events of
    ε-DP mechanisms whose ε add up to less than the charge (``"events": []``
    for a release charged ε > 0, a Laplace of another ε) do not describe it,
    and are not believed: it then counts as a generic (ε, δ)-DP release.
    """
    pure = _pure_epsilon(events)
    return pure is None or pure >= epsilon * (1 - _CHARGE_SLACK)


def _renyi(events: Sequence[Event]) -> RDPAccountant | None:
    """The events composed in Rényi DP at :data:`ORDERS`, or None if they have no bound."""
    try:
        rdp = RDPAccountant(ORDERS)
        for event in events:
            rdp.compose(event)
    except PrivframeError:
        return None  # e.g. a subsampled event no Rényi bound is implemented for
    return rdp


def _described(
    delta: Fraction, events: Sequence[Event], rdp: RDPAccountant | None
) -> _Option | None:
    """Option (b): the events' own curve; None if they cannot be bounded within δ."""
    if rdp is None:
        return None
    atoms = Fraction(rdp.threshold_delta)
    if atoms > delta or atoms >= 1:
        return None  # the events spend more δ outright than the release was charged
    curve = list(rdp.rdp)
    if atoms:
        # The other side's atom takes mass 1 − (1 − δ₀) from its ratio: ln(1/(1 − δ₀)) more.
        shift = -math.log1p(-float(atoms))
        shift = up(shift, 4 * ULP * shift + ULP * float(atoms))
        curve = [r if math.isinf(r) else round_up(Fraction(r) + Fraction(shift)) for r in curve]
    return _Option(tuple(curve), delta - atoms, _pure_epsilon(events))


@functools.lru_cache(maxsize=4096)
def _options(
    epsilon: Fraction, delta: Fraction, events: tuple[Event, ...] | None
) -> tuple[_Option, ...]:
    """The ways to bound one release, best first on a tie in T (cached: releases repeat).

    On a tie: more slack first (it may start a Rényi bound), then the events'
    own curve (better for later releases), then the generic pair.
    """
    options = [_generic(epsilon, delta, delta)]
    if not epsilon and not delta:
        # Charged (0, 0): 0-DP, whatever its events say. Such an entry changes nothing,
        # which the accountant relies on (equal totals mean an equal composition).
        return tuple(options)
    if events is not None and _accounts_for(epsilon, events):
        rdp = _renyi(events)
        certified = _events_delta(epsilon, events, rdp)
        if certified is not None and certified < delta:
            options.insert(0, _generic(epsilon, delta, certified))
        described = _described(delta, events, rdp)
        if described is not None:
            options.insert(0, described)
    return tuple(options)


@dataclass(frozen=True)
class Composition:
    """The tight (ε, δ) total of the entries folded so far (see the module docstring).

    Immutable: :meth:`add` returns the state after one more entry.

    Attributes:
        count: how many entries were folded.
        epsilon: T_n, the ε charged, exactly (<= ``basic_epsilon``).
        basic_epsilon: Σε_i, what basic composition charges.
        delta: Σδ_i, exactly.
        sums: per order of :data:`ORDERS`, the exact sum of the Rényi bounds so far.
        offsets: per order, min over starts i of T_{i−1} − sums_{i−1} + ln(|ORDERS|/s_i)/λ,
            or None before the first start.

    Example:
        >>> from fractions import Fraction
        >>> Composition().add(Fraction(1, 2), Fraction(0), None).epsilon
        Fraction(1, 2)
    """

    count: int = 0
    epsilon: Fraction = Fraction(0)
    basic_epsilon: Fraction = Fraction(0)
    delta: Fraction = Fraction(0)
    sums: tuple[Fraction, ...] = (Fraction(0),) * len(ORDERS)
    offsets: tuple[Fraction | None, ...] = (None,) * len(ORDERS)

    def add(
        self, epsilon: Fraction, delta: Fraction, events: Sequence[Event] | None
    ) -> Composition:
        """The state after one more entry charged (ε, δ), made of ``events`` (None: unknown).

        Example:
            >>> from fractions import Fraction
            >>> s = Composition().add(Fraction(1), Fraction(1, 10**6), None)
            >>> s.epsilon, s.delta == Fraction(1, 10**6)
            (Fraction(1, 1), True)
        """
        if not isinstance(epsilon, Fraction) or not isinstance(delta, Fraction):
            raise InvalidArgumentError("a composed cost is exact: pass Fractions")
        recorded = None if events is None else tuple(events)
        best: tuple[Fraction, Fraction, int] | None = None
        chosen: Composition | None = None
        for rank, option in enumerate(_options(epsilon, delta, recorded)):
            state = self._with(option, epsilon, delta)
            if state is None:
                continue
            order = (state.epsilon, -option.slack, rank)
            if best is None or order < best:
                best, chosen = order, state
        assert chosen is not None  # the generic option always has a sure bound
        return chosen

    def _with(self, option: _Option, epsilon: Fraction, delta: Fraction) -> Composition | None:
        offsets = list(self.offsets)
        start = round_down(option.slack) / len(ORDERS) if option.slack else 0.0
        if start > 0:
            log_ratio = -math.log(start)
            log_ratio = up(log_ratio, 4 * ULP * log_ratio)
            for k, alpha in enumerate(ORDERS):
                term = up(log_ratio / (alpha - 1), 2 * ULP * log_ratio / (alpha - 1))
                offset = self.epsilon - self.sums[k] + Fraction(term)
                current = offsets[k]
                offsets[k] = offset if current is None else min(current, offset)
        sums = []
        candidates = []
        for k, r in enumerate(option.rdp):
            if math.isinf(r):
                # No bound at this order: its sums and starts are of no use any more.
                sums.append(self.sums[k])
                offsets[k] = None
                continue
            total = self.sums[k] + Fraction(r)
            sums.append(total)
            start_offset = offsets[k]
            if start_offset is not None:
                candidates.append(total + start_offset)
        if option.sure is not None:
            candidates.append(self.epsilon + option.sure)
        if not candidates:
            return None
        return Composition(
            self.count + 1,
            min(candidates),
            self.basic_epsilon + epsilon,
            self.delta + delta,
            tuple(sums),
            tuple(offsets),
        )
