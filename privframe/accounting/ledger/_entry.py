"""Ledger entries and their sums: what one spend records, and what many add up to.

A :class:`LedgerEntry` is immutable and its meaning never changes once
written; a :class:`LedgerSummary` is the exact sum of a run of entries. The
checks here are the ones every spend passes before it is recorded: an exact
(ρ, δ), a str label, and a description that JSON holds exactly.

Example:
    >>> from privframe.accounting.ledger._entry import LedgerEntry, LedgerSummary
    >>> e = LedgerEntry(0, "2024-01-01T00:00:00+00:00", "q", 0.25, 0.0, {"k": 1}, False)
    >>> LedgerSummary.of([e, e]).rho
    Fraction(1, 2)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from privframe.accounting._kinds import KINDS, Kind, Spendable, check_kind, from_columns, kind_of
from privframe.accounting.budgets import PureDP, zCDP
from privframe.accounting.ledger._format import (
    canonical_json,
    charge_value,
    entry_json,
    float_excess,
    ratio_text,
)
from privframe.errors import InvalidArgumentError, InvalidBudgetError, InvalidValueError
from privframe.numeric import Number

__all__ = [
    "LedgerEntry",
    "LedgerSummary",
    "canonical_description",
    "check_label_and_seeded",
    "entry_from_file",
    "exact_cost",
    "stored_costs",
]


def _freeze(value: Any) -> Any:
    """Read-only view of parsed JSON: objects become mapping proxies, arrays tuples."""
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """Plain ``dict``/``list`` copy of a frozen JSON value."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _check_json(value: object, where: str) -> None:
    """Raise unless ``value`` is plain JSON: str-keyed mappings, lists, finite numbers."""
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidValueError(
                f"{where} is not a finite number; a ledger entry description must hold "
                "finite numbers only (no NaN or inf): record such a value as a string"
            )
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgumentError(
                    f"{where} has a key of type {type(key).__name__}; the mappings in a "
                    "ledger entry description must have str keys only"
                )
            _check_json(item, f"{where}[{key!r}]")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]")
        return
    raise InvalidArgumentError(
        f"{where} is a {type(value).__name__}, which a ledger entry description cannot "
        "hold; use str, int, float, bool, None, lists and str-keyed mappings"
    )


def canonical_description(description: object) -> str:
    """Canonical JSON text of a description (a string or a JSON-serialisable mapping).

    Raises:
        InvalidArgumentError: ``description`` (or a value in it) has a type JSON
            cannot hold, or a mapping has a non-str key.
        InvalidValueError: it holds NaN or an infinity.
    """
    if isinstance(description, str):
        text = canonical_json(description)
    elif isinstance(description, Mapping):
        _check_json(description, "description")
        text = canonical_json(_thaw(description))
    else:
        raise InvalidArgumentError(
            f"description must be a str or a mapping, got {type(description).__name__}"
        )
    _check_text(text, "description")
    return text


def exact_cost(rho: object, delta: object, kind: Kind = zCDP) -> tuple[Fraction, Fraction]:
    """Validate a cost's two columns the way the budgets do; exact.

    The first column is ρ or ε (each >= 0), the second δ (0 <= δ < 1, and 0
    for a :class:`~privframe.accounting.PureDP` ledger).

    Raises:
        InvalidBudgetError: a malformed value, or a δ in a PureDP cost.
    """
    budget = zCDP(rho, delta)  # type: ignore[arg-type]  # zCDP refuses a non-number itself
    if kind is PureDP and budget.exact_delta:
        raise InvalidBudgetError(
            f"a PureDP ledger's cost has no delta, got delta={float(budget.exact_delta)!r}"
        )
    return budget.exact_rho, budget.exact_delta


def _check_text(text: str, where: str) -> None:
    """Raise unless ``text`` is valid Unicode: the file stores, and the chain hashes, UTF-8."""
    if text.isascii():
        return
    try:
        text.encode()
    except UnicodeEncodeError as err:
        position = err.start
    else:
        return
    raise InvalidValueError(
        f"{where} holds a lone surrogate at position {position}, which is not valid Unicode "
        "text; a ledger stores UTF-8 text only (decode bytes with errors='replace')"
    )


def check_label_and_seeded(label: object, seeded: object) -> tuple[str, bool]:
    """Raise unless ``label`` is valid str text and ``seeded`` a bool, as an entry holds them."""
    if not isinstance(label, str):
        raise InvalidArgumentError(f"label must be a str, got {type(label).__name__}")
    _check_text(label, "label")
    if not isinstance(seeded, bool):
        raise InvalidArgumentError(f"seeded must be a bool, got {type(seeded).__name__}")
    return label, seeded


@dataclass(frozen=True, init=False)
class LedgerEntry:
    """One recorded spend: immutable, serialisable, and its meaning never changes.

    An entry belongs to a ledger of one kind (:attr:`kind`): its two cost
    columns are (ρ, δ) for a :class:`~privframe.accounting.zCDP` ledger,
    (ε, 0) for a :class:`~privframe.accounting.PureDP` one and (ε, δ) for an
    :class:`~privframe.accounting.ApproxDP` one. :attr:`cost` is the cost as a
    budget of that kind; :attr:`rho` is there for zCDP entries only and
    :attr:`epsilon` for the others, so neither is misread as the other.

    Args:
        index: position in the ledger, 0-based and contiguous.
        time: when it was recorded, a UTC ISO-8601 string.
        label: the caller's short name for the release.
        rho: the first cost column: ρ spent (zCDP), or ε spent (PureDP,
            ApproxDP), read exactly as budgets are (:func:`privframe.accounting.exact`).
        delta: the δ spent outright (approximate zCDP; 0 for Gaussian
            releases), or the δ of an (ε, δ) cost; 0 for a PureDP entry.
        description: a str or a JSON-serialisable mapping describing the
            release (public parameters only). It is stored as canonical JSON
            text; mappings come back read-only (nested objects as mapping
            proxies, arrays as tuples).
        seeded: True when the release used a seeded, non-private random stream.
        legacy_floats: keyword only; the entry was written by a schema-1
            ledger, which recorded ρ and δ as floats: they are then floats,
            taken at their exact binary value (what that privframe charged),
            and the hash chain covers them as ``float.hex``.
        kind: keyword only; the kind of the ledger: ``privframe.zCDP`` (the
            default), ``PureDP`` or ``ApproxDP``. The hash chain does not
            cover it (its ledger's root does).

    Attributes:
        exact_rho: the exact first column (ρ, or ε for PureDP and ApproxDP entries).
        exact_delta: the exact δ; ``delta`` is the nearest float.

    Example:
        >>> from privframe.accounting.ledger import LedgerEntry
        >>> e = LedgerEntry(0, "2024-01-01T00:00:00.000000+00:00", "q1", 0.1, 0.0,
        ...                 {"query": "count", "keys": ["a", "b"]}, False)
        >>> e.description["keys"], e.exact_rho
        (('a', 'b'), Fraction(1, 10))
        >>> e.description_json
        '{"keys":["a","b"],"query":"count"}'
        >>> LedgerEntry.from_dict(e.to_dict()) == e
        True
        >>> import privframe as pf
        >>> pure = LedgerEntry(1, "2024-01-01T00:00:00.000000+00:00", "q2", 0.5, 0.0, "",
        ...                    False, kind=pf.PureDP)
        >>> pure.cost, pure.epsilon
        (PureDP(epsilon=0.5), 0.5)
    """

    index: int
    time: str
    label: str
    exact_rho: Fraction
    exact_delta: Fraction
    description: Mapping[str, Any] | str
    seeded: bool
    legacy_floats: bool = False
    kind: Kind = field(default=zCDP, repr=False)
    _description_json: str = field(default="", repr=False, compare=False)

    def __init__(
        self,
        index: int,
        time: str,
        label: str,
        rho: Number,
        delta: Number,
        description: Mapping[str, Any] | str,
        seeded: bool,
        *,
        legacy_floats: bool = False,
        kind: Kind = zCDP,
    ) -> None:
        if isinstance(index, bool) or not isinstance(index, int):
            raise InvalidArgumentError(f"index must be an int, got {type(index).__name__}")
        if index < 0:
            raise InvalidValueError(f"index must be >= 0, got {index!r}")
        if not isinstance(time, str):
            raise InvalidArgumentError(f"time must be an ISO-8601 str, got {type(time).__name__}")
        check_label_and_seeded(label, seeded)
        if not isinstance(legacy_floats, bool):
            raise InvalidArgumentError(
                f"legacy_floats must be a bool, got {type(legacy_floats).__name__}"
            )
        if legacy_floats:
            if not (isinstance(rho, float) and isinstance(delta, float)):
                raise InvalidArgumentError("a legacy_floats entry's rho and delta must be floats")
            rho, delta = Fraction(rho + 0.0), Fraction(delta + 0.0)
        kind = check_kind(kind)
        exact_rho, exact_delta = exact_cost(rho, delta, kind)
        text = canonical_description(description)
        self._set(index, time, label, exact_rho, exact_delta, json.loads(text), text, seeded,
                  legacy_floats, kind)  # fmt: skip

    def _set(
        self,
        index: int,
        time: str,
        label: str,
        exact_rho: Fraction,
        exact_delta: Fraction,
        parsed: Any,
        text: str,
        seeded: bool,
        legacy_floats: bool,
        kind: Kind = zCDP,
    ) -> None:
        for name, value in (
            ("index", index),
            ("time", time),
            ("label", label),
            ("exact_rho", exact_rho),
            ("exact_delta", exact_delta),
            ("description", _freeze(parsed)),
            ("seeded", seeded),
            ("legacy_floats", legacy_floats),
            ("kind", kind),
            ("_description_json", text),
        ):
            object.__setattr__(self, name, value)

    def __hash__(self) -> int:
        return hash(self.canonical_json())

    @property
    def rho(self) -> float:
        """ρ as the nearest float, for display; :attr:`exact_rho` is the exact value.

        Raises:
            InvalidArgumentError: the entry is not a zCDP one (its first column is
                ε: read :attr:`epsilon`).

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.1, 0.0, "", False).rho
            0.1
        """
        if self.kind is not zCDP:
            raise InvalidArgumentError(
                f"ledger entry {self.index} is from a {self.kind.__name__} ledger, which "
                "charges epsilon, not rho: read entry.epsilon (or entry.cost)"
            )
        return float(self.exact_rho)

    @property
    def epsilon(self) -> float:
        """ε as the nearest float, for an entry of a PureDP or ApproxDP ledger.

        :attr:`exact_rho` holds the exact ε (the entry's first cost column).

        Raises:
            InvalidArgumentError: the entry is a zCDP one (read :attr:`rho`).

        Example:
            >>> import privframe as pf
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.1, 1e-7, "", False,
            ...             kind=pf.ApproxDP).epsilon
            0.1
        """
        if self.kind is zCDP:
            raise InvalidArgumentError(
                f"ledger entry {self.index} is from a zCDP ledger, which charges rho, not "
                "epsilon: read entry.rho (or entry.cost)"
            )
        return float(self.exact_rho)

    @property
    def delta(self) -> float:
        """δ as the nearest float, for display; :attr:`exact_delta` is the exact value.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.0, 1e-7, "", False).delta
            1e-07
        """
        return float(self.exact_delta)

    @property
    def description_json(self) -> str:
        """The description as the canonical JSON text that is stored and hashed.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.0, 0.0, "hi",
            ...             False).description_json
            '"hi"'
        """
        return self._description_json

    @property
    def cost(self) -> Spendable:
        """The spend as an exact budget of the entry's :attr:`kind`.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.5, 0.0, "", False).cost
            zCDP(rho=0.5, delta=0.0)
        """
        return from_columns(self.kind, self.exact_rho, self.exact_delta)

    @property
    def float_excess(self) -> tuple[Fraction, Fraction]:
        """How far a schema-1 entry's floats exceed the decimals they print as, in (ρ, δ).

        Such an entry counts at its exact binary value (never undercounted),
        which can exceed the decimal the user typed by half an ulp; (0, 0) for
        every other entry.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> old = LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.1, 0.0, "", False,
            ...                   legacy_floats=True)
            >>> old.float_excess[0] == Fraction(0.1) - Fraction(1, 10)
            True
        """
        if not self.legacy_floats:
            return Fraction(0), Fraction(0)
        return float_excess(self.exact_rho, self.exact_delta)

    def _stored(self, value: Fraction) -> str:
        """The text a cost is stored and hashed as: ``float.hex`` for schema-1 floats."""
        return float(value).hex() if self.legacy_floats else ratio_text(value)

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-serialisable dict; ρ and δ as their exact stored text.

        The two cost columns keep their stored names ``"rho"`` and ``"delta"``
        for every kind; an entry of a PureDP or ApproxDP ledger adds its kind
        (``"kind": "pure_dp"`` or ``"approx_dp"``), so a zCDP entry's dict is
        what it always was.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> d = LedgerEntry(0, "2024-01-01T00:00:00+00:00", "q", 0.1, 0.0, {"k": 1},
            ...                 False).to_dict()
            >>> d["rho"], d["delta"], d["description"]
            ('1/10', '0/1', {'k': 1})
        """
        data = {
            "index": self.index,
            "time": self.time,
            "label": self.label,
            "rho": self._stored(self.exact_rho),
            "delta": self._stored(self.exact_delta),
            "description": _thaw(self.description),
            "seeded": self.seeded,
        }
        if self.kind is not zCDP:
            data["kind"] = KINDS[self.kind]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LedgerEntry:
        """Rebuild an entry from :meth:`to_dict` output (exactly these keys).

        ρ and δ are ``"n/d"`` text, or (from a schema-1 ledger) floats or
        their ``float.hex``, which are taken at their binary value. ``"kind"``
        is there for the entries of PureDP and ApproxDP ledgers only.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> d = {"index": 0, "time": "2024-01-01T00:00:00+00:00", "label": "q",
            ...      "rho": "1/2", "delta": "0/1", "description": "", "seeded": False}
            >>> LedgerEntry.from_dict(d).rho
            0.5
        """
        expected = {"index", "time", "label", "rho", "delta", "description", "seeded"}
        if not isinstance(data, Mapping) or set(data) - {"kind"} != expected:
            raise InvalidArgumentError(
                f"data must be a ledger entry dict with exactly the keys {sorted(expected)} "
                "(and 'kind' for a PureDP or ApproxDP ledger's entry)"
            )
        kind: Kind = zCDP
        if "kind" in data:
            try:
                kind = kind_of(data["kind"])
                if kind is zCDP:
                    raise ValueError("a zCDP entry's dict has no kind")
            except (TypeError, ValueError) as err:
                raise InvalidValueError(f"a ledger entry's kind is malformed ({err})") from None
        try:
            (rho, old_rho), (delta, old_delta) = (
                charge_value(data["rho"]),
                charge_value(data["delta"]),
            )
        except (TypeError, ValueError) as err:
            raise InvalidValueError(
                f"a ledger entry's rho and delta are malformed ({err})"
            ) from None
        if old_rho != old_delta:
            raise InvalidValueError("a ledger entry's rho and delta must be stored alike")
        values = {k: v for k, v in data.items() if k not in ("rho", "delta", "kind")}
        if old_rho:
            return cls(**values, rho=float(rho), delta=float(delta), legacy_floats=True, kind=kind)
        return cls(**values, rho=rho, delta=delta, kind=kind)

    def canonical_json(self) -> str:
        """The exact text the hash chain covers (ρ and δ as their stored text).

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> import json
            >>> text = LedgerEntry(0, "t", "q", 0.5, 0.0, "", False).canonical_json()
            >>> json.loads(text)["rho"]
            '1/2'
        """
        return entry_json(
            self.index,
            self.time,
            self.label,
            self._stored(self.exact_rho),
            self._stored(self.exact_delta),
            self._description_json,
            self.seeded,
        )


def entry_from_file(
    index: int,
    time: str,
    label: str,
    cost: tuple[Fraction, Fraction, bool],
    text: str,
    seeded: bool,
    kind: Kind = zCDP,
) -> LedgerEntry:
    """An entry read back from a ledger file, whose fields the reader has validated.

    Reading a ledger builds one entry per row; the checks of ``__init__``
    (types, the cost, each description value) were done by the reader or
    hold for any JSON text, so only the description text's canonical form
    is checked here. ``cost`` is the exact (ρ, δ) and whether they were
    schema-1 floats; ``kind`` the ledger's kind (its file checked the costs
    against it).

    Raises:
        ValueError: ``text`` is not canonical JSON (or holds NaN or an infinity).

    Example:
        >>> from fractions import Fraction
        >>> entry_from_file(0, "t", "q", (Fraction(1, 2), Fraction(0), False), '"hi"',
        ...                 False).rho
        0.5
    """
    parsed = json.loads(text)
    if canonical_json(parsed) != text:
        raise ValueError("its description is not canonical JSON")
    entry = LedgerEntry.__new__(LedgerEntry)
    entry._set(index, time, label, cost[0], cost[1], parsed, text, seeded, cost[2], kind)
    return entry


def stored_costs(entry: LedgerEntry) -> tuple[str, str]:
    """An entry's (ρ, δ) as the text a ledger file stores and hashes.

    Example:
        >>> stored_costs(LedgerEntry(0, "t", "q", 0.5, 0.0, "", False))
        ('1/2', '0/1')
    """
    return entry._stored(entry.exact_rho), entry._stored(entry.exact_delta)


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True)
class LedgerSummary:
    """What a ledger's entries add up to: kept as entries are recorded, never re-read.

    Summaries of consecutive runs of entries add up (``+``) to the summary of
    the whole run.

    Attributes:
        count: the number of entries.
        rho: the exact sum of their ρ.
        delta: the exact sum of their δ.
        float_excess: the sums (ρ, δ) of their :attr:`LedgerEntry.float_excess`
            (nonzero only for entries an older privframe wrote as floats).
        seeded: how many of them used seeded (non-private) randomness.

    Example:
        >>> from privframe.accounting.ledger import Ledger
        >>> ledger = Ledger()
        >>> _ = ledger.append(0.1, label="a")
        >>> _ = ledger.append(0.2, label="b", seeded=True)
        >>> s = ledger.summary()
        >>> s.count, s.rho, s.seeded
        (2, Fraction(3, 10), 1)
    """

    count: int = 0
    rho: Fraction = Fraction(0)
    delta: Fraction = Fraction(0)
    float_excess: tuple[Fraction, Fraction] = (Fraction(0), Fraction(0))
    seeded: int = 0

    def __add__(self, other: LedgerSummary) -> LedgerSummary:
        if not isinstance(other, LedgerSummary):
            return NotImplemented
        return LedgerSummary(
            self.count + other.count,
            self.rho + other.rho,
            self.delta + other.delta,
            (
                self.float_excess[0] + other.float_excess[0],
                self.float_excess[1] + other.float_excess[1],
            ),
            self.seeded + other.seeded,
        )

    @classmethod
    def of(cls, entries: Iterable[LedgerEntry]) -> LedgerSummary:
        """The summary of ``entries``, computed from them.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry, LedgerSummary
            >>> e = LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.25, 0.0, "", False)
            >>> LedgerSummary.of([e, e]).rho
            Fraction(1, 2)
        """
        total = cls()
        for e in entries:
            total += cls(1, e.exact_rho, e.exact_delta, e.float_excess, int(e.seeded))
        return total
