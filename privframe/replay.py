"""A ledger's guarantee by a chosen accounting method: zCDP, RDP or PLD.

Every ledger entry records its cost (ρ, δ) and, for releases made by
privframe, the mechanism events it was made of (:mod:`privframe.events`).
:func:`guarantee` states what a list of entries adds up to as (ε, δ)-DP:

* ``"zcdp"`` (the default, always valid): the entries' ρ add up and convert
  with the tightest bound valid for every ρ-zCDP mechanism (Canonne, Kamath &
  Steinke 2020, Cor. 13), plus the δ spent outright.
* ``"rdp"``: the events replayed by :class:`privframe.rdp.RDPAccountant`.
* ``"pld"``: the events replayed by :class:`privframe.pld.PLDAccountant`.

An entry without events (written by hand, or by an older privframe) counts
as a ThresholdEvent(ρ, δ): known only through its zCDP cost. privframe's own
noisy releases are discrete Gaussians, which have no proven PLD as vectors
(see :mod:`privframe.pld`), so for them ``"pld"`` states the zCDP bound and
says so in :attr:`Guarantee.basis`.

Example:
    >>> from privframe.ledger import LedgerEntry
    >>> event = {"type": "gaussian", "version": 1, "noise_multiplier": 1.0, "discrete": True}
    >>> entry = LedgerEntry(0, "2026-01-01T00:00:00+00:00", "a", 0.5, 0.0,
    ...                     {"events": [event]}, False)
    >>> g = guarantee([entry], 1e-6, "pld")
    >>> g.method, g.epsilon == guarantee([entry], 1e-6).epsilon
    ('pld', True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from privframe.accounting import zCDP
from privframe.errors import InvalidValueError
from privframe.events import Event, ThresholdEvent, from_dict
from privframe.ledger import LedgerEntry
from privframe.pld import PLDAccountant
from privframe.rdp import RDPAccountant

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


def entry_events(entry: LedgerEntry) -> list[Event]:
    """The events a ledger entry was made of; a ThresholdEvent(ρ, δ) if it records none.

    Raises:
        InvalidValueError: the entry's events are malformed or of an unknown version.
    """
    description = entry.description
    events = description.get("events") if isinstance(description, Mapping) else None
    if not events:
        return [ThresholdEvent(entry.rho, entry.delta)]
    return [from_dict(event) for event in events]


def guarantee(entries: Sequence[LedgerEntry], delta: float, method: str = "zcdp") -> Guarantee:
    """What ``entries`` add up to as (ε, δ)-DP, by ``method``.

    Args:
        entries: ledger entries (e.g. ``session.ledger``).
        delta: the total δ of the statement; it must exceed the δ the entries
            spent outright.
        method: ``"zcdp"``, ``"rdp"`` or ``"pld"`` (see the module docstring).

    Raises:
        InvalidValueError: an unknown method, malformed events, or δ not in
            (0, 1) or not above the δ spent outright (InvalidBudgetError, a
            subclass, for some of these).

    Example:
        >>> guarantee([], 1e-6, "rdp").epsilon
        0.0
    """
    method = _check_method(method)
    if method == "zcdp":
        spent = sum((zCDP(e.rho, e.delta) for e in entries), zCDP(0.0))
        return Guarantee(spent.epsilon(delta), delta, method, _ZCDP_BASIS)
    accountant = RDPAccountant() if method == "rdp" else PLDAccountant()
    for entry in entries:
        for event in entry_events(entry):
            accountant.compose(event)
    epsilon = accountant.epsilon(delta)
    if isinstance(accountant, RDPAccountant):
        basis = (
            "the ledger's mechanism events replayed in Renyi DP over dp_accounting's orders "
            "(Mironov 2017; Mironov, Talwar & Zhang 2019), converted by Canonne, Kamath & "
            "Steinke 2020, Prop. 12"
        )
    elif accountant.fallback is None:
        basis = (
            "the ledger's mechanism events replayed as privacy loss distributions "
            f"(pessimistic connect-the-dots grid of {accountant.value_discretization_interval:g}"
            "; Doroshenko et al. 2022)"
        )
    elif accountant.fallback == "zcdp":
        basis = (
            "no event has a proven privacy loss distribution (discrete Gaussian noise, or "
            f"costs known only as rho), so the PLD accountant states the zCDP bound: {_ZCDP_BASIS}"
        )
    else:
        basis = (
            "some events have no proven privacy loss distribution (discrete Gaussian noise, "
            "or costs known only as rho), so the PLD accountant composed all events in Renyi DP"
        )
    return Guarantee(epsilon, delta, method, basis)
