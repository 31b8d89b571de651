"""A ledger's guarantee by a chosen accounting method: zCDP, RDP or PLD.

Every ledger entry records its cost (ρ, δ) and, for releases made by
privframe, the mechanism events it was made of (:mod:`privframe.accounting.events`).
:func:`guarantee` states what a list of entries adds up to as (ε, δ)-DP:

* ``"zcdp"`` (the default, always valid): the entries' ρ add up and convert
  with the tightest bound valid for every ρ-zCDP mechanism (Canonne, Kamath &
  Steinke 2020, Cor. 13), plus the δ spent outright.
* ``"rdp"``: the events replayed by :class:`privframe.accounting.rdp.RDPAccountant`.
* ``"pld"``: the events replayed by :class:`privframe.accounting.pld.PLDAccountant`.

An entry without events (written by hand, or by an older privframe), or
whose events do not account for its charged (ρ, δ), counts as
ThresholdEvent(ρ, δ): known only through its zCDP cost.

A ledger of a :class:`~privframe.accounting.PureDP` or
:class:`~privframe.accounting.ApproxDP` budget is stated in ε: ``"zcdp"``
(the default: the ledger's own accounting) gives what its accountant
charged, Σε_i for PureDP (basic composition, exact) and the tight
composition T of :mod:`privframe.accounting._composition` for ApproxDP, at
the δ the entries were charged; ``"rdp"`` and ``"pld"`` replay their events
(an entry without events as a generic (ε, δ)-DP release: ε-randomized
response plus δ spent outright, which dominates it, Kairouz, Oh & Viswanath
2015). A replay states the composition of the releases as one fixed
sequence; the accountant's charge is what holds for releases chosen
adaptively within a budget (see :mod:`privframe.accounting._composition`). privframe's own
noisy releases are discrete Gaussians, which have no proven PLD as vectors
(see :mod:`privframe.accounting.pld`), so for them ``"pld"`` states the zCDP bound and
says so in :attr:`Guarantee.basis`.

Example:
    >>> from privframe.accounting.ledger import LedgerEntry
    >>> event = {"type": "gaussian", "version": 1, "noise_multiplier": 1.0, "discrete": True}
    >>> entry = LedgerEntry(0, "2026-01-01T00:00:00+00:00", "a", 0.5, 0.0,
    ...                     {"events": [event]}, False)
    >>> g = guarantee([entry], 1e-6, "pld")
    >>> g.method, g.epsilon == guarantee([entry], 1e-6).epsilon
    ('pld', True)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from privframe.accounting._composition import Composition, description_events
from privframe.accounting._kinds import Kind, Spendable, columns
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
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
    from_dict,
)
from privframe.accounting.ledger import LedgerEntry
from privframe.accounting.pld import PLDAccountant
from privframe.accounting.rdp import RDPAccountant
from privframe.errors import InvalidValueError, PrivframeError
from privframe.numeric import check_conversion_delta, round_up

__all__ = ["METHODS", "Guarantee", "entry_events", "guarantee"]

METHODS = ("zcdp", "rdp", "pld")
"""The accounting methods :func:`guarantee` knows."""

_ZCDP_BASIS = (
    "total rho converted with the tightest bound valid for every rho-zCDP mechanism "
    "(Canonne, Kamath & Steinke 2020, Cor. 13)"
)


@dataclass(frozen=True)
class Guarantee:
    """(ε, δ)-DP of a list of ledger entries, and how it was derived.

    Attributes:
        epsilon: ε (rounded up).
        delta: the total δ, including any δ spent outright.
        method: the method asked for: ``"zcdp"``, ``"rdp"`` or ``"pld"``.
        basis: how the number was obtained, with citations; says when a
            method fell back to another because an event has no bound in it.

    Example:
        >>> g = Guarantee(1.5, 1e-6, "rdp", "the ledger's events replayed in Renyi DP")
        >>> str(g)
        "(epsilon = 1.5, delta = 1e-06)-DP by rdp: the ledger's events replayed in Renyi DP"
    """

    epsilon: float
    delta: float
    method: str
    basis: str

    def __str__(self) -> str:
        return (
            f"(epsilon = {self.epsilon:.6g}, delta = {self.delta:.3g})-DP "
            f"by {self.method}: {self.basis}"
        )


def _check_method(method: object) -> str:
    if method not in METHODS:
        raise InvalidValueError(f"method must be one of {METHODS}, got {method!r}")
    return str(method)


def _cost(event: Event) -> tuple[Fraction, Fraction]:
    """The zCDP (ρ, δ) an event stands for; a subsampled event at its unsampled cost."""
    if isinstance(event, GaussianEvent):
        return 1 / (2 * Fraction(event.noise_multiplier) ** 2), Fraction(0)
    if isinstance(event, LaplaceEvent):
        return 1 / (2 * Fraction(event.noise_multiplier) ** 2), Fraction(0)  # ε²/2
    if isinstance(event, PureDPEvent):
        return Fraction(event.epsilon) ** 2 / 2, Fraction(0)
    if isinstance(event, PoissonSampledEvent):
        return _cost(event.event)
    if isinstance(event, ThresholdEvent):
        return Fraction(event.rho), Fraction(event.delta)
    if isinstance(event, ZCDPEvent):
        return Fraction(event.rho), Fraction(0)
    if isinstance(event, SelfComposedEvent):
        rho, delta = _cost(event.event)
        return rho * event.count, delta * event.count
    assert isinstance(event, ComposedEvent)
    costs = [_cost(e) for e in event.events]
    return sum((r for r, _ in costs), Fraction(0)), sum((d for _, d in costs), Fraction(0))


_COST_SLACK = Fraction(1, 10**9)
"""Relative rounding allowed between an entry's charge and its events' cost."""


def _recorded(entry: LedgerEntry) -> object:
    """The entry's ``description["events"]`` as stored, or None."""
    description = entry.description
    return description.get("events") if isinstance(description, Mapping) else None


def entry_events(entry: LedgerEntry) -> tuple[list[Event], bool]:
    """The events a ledger entry was made of, and whether they were used.

    An entry's recorded events are used only when they account for its charge:
    their zCDP cost (subsampled events at their unsampled cost) is at least the
    charged (ρ, δ). Otherwise, and when it records none, the entry counts as
    ``ThresholdEvent(ρ, δ)``: a description must never make a statement weaker
    than what the ledger charged.

    An entry of a PureDP or ApproxDP ledger (:attr:`LedgerEntry.kind`) uses
    its events when they spend no more δ outright than it was charged (and,
    for PureDP, when they are ε-DP events whose ε adds up to at least the
    charge); otherwise it counts as ``[PureDPEvent(ε), ThresholdEvent(0, δ)]``,
    the (ε, δ)-randomized response that dominates every (ε, δ)-DP release.

    Raises:
        InvalidValueError: the entry's events are malformed or of an unknown
            version; the message names the entry.

    Example:
        >>> from privframe.accounting.ledger import LedgerEntry
        >>> event = GaussianEvent(1.0, discrete=True)
        >>> entry = LedgerEntry(0, "2026-01-01T00:00:00+00:00", "q", 0.5, 0.0,
        ...                     {"events": [event.to_dict()]}, False)
        >>> entry_events(entry)
        ([GaussianEvent(noise_multiplier=1.0, discrete=True, dimension=None)], True)
    """
    raw = _recorded(entry)
    if entry.kind is not zCDP:
        return _epsilon_events(entry, raw)
    # The charge as an event: floats rounded up, so it never states less than was charged.
    charge: list[Event] = [ThresholdEvent(round_up(entry.exact_rho), round_up(entry.exact_delta))]
    if not raw:
        return charge, False
    try:
        if isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
            raise InvalidValueError(f"events must be a list of event dicts, got {raw!r}")
        events = [from_dict(event) for event in raw]
    except PrivframeError as err:
        raise InvalidValueError(
            f"ledger entry {entry.index} ({entry.label!r}) has malformed events: {err}"
        ) from None
    rho = delta = Fraction(0)
    for event in events:
        r, d = _cost(event)
        rho, delta = rho + r, delta + d
    if rho < entry.exact_rho * (1 - _COST_SLACK) or delta < entry.exact_delta * (1 - _COST_SLACK):
        return charge, False
    return events, True


def _epsilon_events(entry: LedgerEntry, raw: object) -> tuple[list[Event], bool]:
    """:func:`entry_events` for an entry of a PureDP or ApproxDP ledger."""
    charge: list[Event] = [PureDPEvent(round_up(entry.exact_rho))]
    if entry.exact_delta:
        charge.append(ThresholdEvent(0.0, round_up(entry.exact_delta)))
    if not raw:
        return charge, False
    try:
        events = description_events({"events": raw}) or []
    except InvalidValueError as err:
        raise InvalidValueError(
            f"ledger entry {entry.index} ({entry.label!r}) has malformed events: {err}"
        ) from None
    outright = Fraction(0)
    pure = Fraction(0)
    for event in _walk(events):
        if isinstance(event, ThresholdEvent):
            outright += Fraction(event.delta)
    if outright > entry.exact_delta:
        return charge, False
    if entry.kind is PureDP:
        for event in events:
            epsilon = _pure_total(event)
            if epsilon is None:
                return charge, False
            pure += epsilon
        if pure < entry.exact_rho * (1 - _COST_SLACK):
            return charge, False
    return events, True


def _pure_total(event: Event) -> Fraction | None:
    """Σε of an event made of ε-DP events only, else None."""
    if isinstance(event, LaplaceEvent):
        return 1 / Fraction(event.noise_multiplier)
    if isinstance(event, PureDPEvent):
        return Fraction(event.epsilon)
    if isinstance(event, SelfComposedEvent):
        inner = _pure_total(event.event)
        return None if inner is None else inner * event.count
    if isinstance(event, ComposedEvent):
        total = Fraction(0)
        for sub in event.events:
            part = _pure_total(sub)
            if part is None:
                return None
            total += part
        return total
    return None


def _walk(events: Sequence[Event]) -> Iterator[Event]:
    for event in events:
        yield event
        if isinstance(event, PoissonSampledEvent | SelfComposedEvent):
            yield from _walk([event.event])
        elif isinstance(event, ComposedEvent):
            yield from _walk(event.events)


def _rdp_basis(events: Sequence[Event]) -> str:
    parts = ["Renyi DP over dp_accounting's orders (Mironov 2017)"]
    sampled = [e for e in _walk(events) if isinstance(e, PoissonSampledEvent)]
    discrete = [e for e in sampled if any(_discrete(g) for g in _walk([e.event]))]
    if len(discrete) < len(sampled):
        parts.append("Poisson-subsampled Gaussians by Mironov, Talwar & Zhang 2019")
    if discrete:
        parts.append("subsampled discrete Gaussians by Zhu & Wang 2019's general bound")
    if any(isinstance(e, ThresholdEvent) and e.delta for e in _walk(events)):
        parts.append("the delta spent outright added")
    return "; ".join(parts) + "; converted by Canonne, Kamath & Steinke 2020, Prop. 12"


def _discrete(event: Event) -> bool:
    return isinstance(event, GaussianEvent) and event.discrete


def guarantee(
    entries: Sequence[LedgerEntry],
    delta: float,
    method: str = "zcdp",
    total: Spendable | None = None,
) -> Guarantee:
    """What ``entries`` add up to as (ε, δ)-DP, by ``method``.

    The entries are of one kind (zCDP, PureDP or ApproxDP: their
    :attr:`~privframe.accounting.ledger.LedgerEntry.kind`, or ``total``'s
    when there are none); see the module docstring for each.

    Args:
        entries: ledger entries (e.g. ``session.ledger``).
        delta: the total δ of the statement; it must exceed the δ the entries
            spent outright (for an ApproxDP ledger's default method, be at
            least the δ they were charged).
        method: ``"zcdp"`` (the ledger's own accounting), ``"rdp"`` or
            ``"pld"`` (see the module docstring).
        total: the exact sum of the entries' costs when the caller already
            keeps it (an accountant does: its ``spent``); ``"zcdp"`` then reads
            no entry of a zCDP or PureDP ledger, so its cost does not grow with
            the ledger. For an ApproxDP ledger it is the charge
            (:attr:`~privframe.accounting.accountant.Accountant.spent`), used as it is.

    Raises:
        InvalidValueError: an unknown method, malformed events (naming the
            entry), entries of several kinds, or δ not in (0, 1) or not above
            the δ spent outright (InvalidBudgetError, a subclass, for some of these).

    Example:
        >>> guarantee([], 1e-6, "rdp").epsilon
        0.0
        >>> import privframe as pf
        >>> guarantee([], 1e-6, total=pf.PureDP(0.5)).epsilon
        0.5
    """
    method = _check_method(method)
    kind = _kind(entries, total)
    if kind is not zCDP and method == "zcdp":
        return _charged(entries, delta, kind, total)
    if method == "zcdp":
        spent = total if total is not None else sum((e.cost for e in entries), zCDP(0))
        assert isinstance(spent, zCDP)  # a zCDP ledger's
        return Guarantee(spent.epsilon(delta), delta, method, _ZCDP_BASIS)
    accountant = RDPAccountant() if method == "rdp" else PLDAccountant()
    replayed: list[Event] = []
    by_charge = []
    for entry in entries:
        events, used = entry_events(entry)
        if not used and _recorded(entry):
            by_charge.append(entry.index)
        replayed += events
    for event in replayed:
        accountant.compose(event)
    epsilon = accountant.epsilon(delta)
    capped = False
    if kind is not zCDP:
        # Adding the ε's (and δ's) is valid too; a replay never states more than that.
        first = sum((e.exact_rho for e in entries), Fraction(0))
        second = sum((e.exact_delta for e in entries), Fraction(0))
        if Fraction(delta) >= second and round_up(first) < epsilon:
            epsilon, capped = round_up(first), True
    if isinstance(accountant, RDPAccountant):
        basis = "the ledger's mechanism events replayed in " + _rdp_basis(replayed)
    elif accountant.fallback is None:
        basis = (
            "the ledger's mechanism events replayed as privacy loss distributions "
            f"(pessimistic connect-the-dots grid of {accountant.value_discretization_interval:g}"
            "; Doroshenko et al. 2022)"
        )
    elif accountant.fallback == "zcdp":
        basis = (
            "every event is a plain Gaussian or known only through its rho (discrete "
            "Gaussian noise has no proven privacy loss distribution as a vector), so the "
            f"PLD accountant states the zCDP bound of their total: {_ZCDP_BASIS}"
        )
    else:
        basis = (
            "events without a proven privacy loss distribution (discrete Gaussian noise, or "
            "costs known only as rho) come with subsampled ones, so the PLD accountant "
            "composed all events in " + _rdp_basis(replayed)
        )
    if by_charge:
        basis += (
            f". Entries {by_charge} record events that do not account for their charged "
            f"({'rho' if kind is zCDP else 'epsilon'}, delta); they count by their charge"
        )
    if capped:
        basis += "; capped by basic composition (the sum of the epsilons), which is smaller here"
    if kind is not zCDP:
        basis += (
            f". This replays the {kind.__name__} ledger's releases as one fixed sequence; "
            "for releases chosen adaptively, what holds is the accountant's charge "
            "(method 'zcdp')"
        )
    return Guarantee(epsilon, delta, method, basis)


def _kind(entries: Sequence[LedgerEntry], total: Spendable | None) -> Kind:
    """The kind of ``total``, or else of ``entries`` (zCDP when there are none).

    Given a total, no entry is read: the caller keeps the entries' kind.
    """
    if total is not None:
        if not isinstance(total, zCDP | PureDP | ApproxDP):
            raise InvalidValueError(
                f"total must be a zCDP, PureDP or ApproxDP, got {type(total).__name__}"
            )
        return type(total)
    if not entries:
        return zCDP
    kinds = {entries[0].kind, entries[-1].kind}
    if len(kinds) > 1:
        raise InvalidValueError(
            "the entries are of several kinds of budget "
            f"({', '.join(sorted(k.__name__ for k in kinds))}); a ledger keeps one"
        )
    return kinds.pop()


def _charged(
    entries: Sequence[LedgerEntry], delta: float, kind: Kind, total: Spendable | None
) -> Guarantee:
    """What a PureDP or ApproxDP ledger's accountant charged, as (ε, δ)-DP at ``delta``."""
    asked = check_conversion_delta(delta) if kind is ApproxDP else delta
    if kind is PureDP:
        spent = total if total is not None else sum((e.cost for e in entries), PureDP(0))
        epsilon = round_up(columns(spent)[0])
        basis = (
            "pure DP: the entries' epsilons add up (basic composition, Dwork & Roth 2014, "
            "Thm. 3.16); an epsilon-DP statement holds at every delta"
        )
        return Guarantee(epsilon, delta, "zcdp", basis)
    if total is not None:
        charged = columns(total)
    else:
        state = Composition()
        for entry in entries:
            try:
                events = description_events(entry.description)
            except InvalidValueError:
                events = None
            state = state.add(entry.exact_rho, entry.exact_delta, events)
        charged = (state.epsilon, state.delta)
    if Fraction(asked) < charged[1]:
        raise InvalidValueError(
            f"delta={delta!r} is below the delta the entries were charged "
            f"({round_up(charged[1])!r}); the charge is stated at that delta or more"
        )
    basis = (
        "the tight composition the accountant charged: Renyi bounds of the releases from "
        "each one's slack (Ville's inequality; Feldman & Zrnic 2021), capped by basic "
        "composition, a privacy filter valid for releases chosen adaptively within the budget"
    )
    return Guarantee(round_up(charged[0]), delta, "zcdp", basis)
