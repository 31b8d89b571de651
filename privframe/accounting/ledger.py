"""The append-only record of every privacy spend, in memory or in a SQLite file.

A ledger holds :class:`LedgerEntry` values: immutable, serialisable records of
one spend each (its ρ and δ, a label, a description, whether the release used
seeded randomness). Entries are only ever appended; their meaning never changes
once written. Costs are exact rationals (:mod:`privframe.accounting`), stored
exactly, and the running total is their exact sum.

A ledger does not decide what may be spent: :meth:`Ledger.append` takes a
``check`` callback that sees the exact totals *inside* the same critical
section as the write, and may refuse by raising. The
:class:`~privframe.accounting.accountant.Accountant` uses it to make check-and-record one
atomic step.

:class:`SQLiteLedger` persists the record (stdlib :mod:`sqlite3`, rollback
journal, ``synchronous=FULL``):

* every append is one ``BEGIN IMMEDIATE`` transaction that reads the entries it
  has not seen yet, runs the check and inserts the new row, so appends from any
  number of threads, connections and processes are serialised and none can
  exceed a budget another one has already used;
* the transaction commits (with ``synchronous=FULL``) before ``append`` returns,
  so a crash right after a spend loses nothing; with a rollback journal
  (``journal_mode=DELETE``, not WAL) a committed spend is in the main file
  itself, so a copy of that one file holds every committed entry;
* a new file is built under a temporary name and published with
  :func:`os.link`, which fails if the path exists: a ledger path is never
  visible uninitialised, and an existing file (even an empty one) is never
  initialised, only opened as a ledger or refused;
* the file remembers the budget it was created with, and refuses to be reopened
  with a larger one;
* the file remembers the data it is spent on (:class:`DataIdentity`: the
  privacy unit and the column names and types, never values), and refuses to
  be reopened for other data unless the caller says it is the same data;
* costs and the budget are stored exactly, as ``"numerator/denominator"``
  text (schema 2). A file of schema 1 (REAL costs, the budget as a float's
  repr) is read as it is: its entries at their exact binary value, which is
  what that privframe charged, and its budget as the larger of the decimal it
  shows and that float (what the user typed, or what the old file enforced).
  Its first new entry marks it schema 2;
* the file is recognised by ``PRAGMA application_id`` and ``user_version``,
  and its entries form a SHA-256 hash chain whose head (the count and last
  hash) is recorded with every append. A ledger is verified in full (``PRAGMA
  quick_check`` and the chain from its first entry) the first time a user
  opens it; privframe then records, per user, its count, last hash and exact
  totals (:func:`state_file`), so that later opens check that the last entry
  verified is unchanged and verify only the entries added since: opening,
  counting, totalling and charging cost the same however long the ledger is.
  Entries are read lazily (:class:`LedgerEntries`) and verified as they are
  read; :meth:`Ledger.verify` re-checks everything. A foreign, damaged, edited
  or rolled-back file raises :class:`~privframe.errors.LedgerError`; it is
  never silently reset. A lock held by another process past the timeout is
  reported as busy, not as damage. What the chain can and cannot prove is in
  ``docs/operations.md``.

Example:
    >>> from fractions import Fraction
    >>> from privframe.accounting.ledger import Ledger
    >>> ledger = Ledger()
    >>> entry = ledger.append(0.25, 0.0, label="q1", description={"query": "count"})
    >>> entry.index, entry.label, entry.rho
    (0, 'q1', 0.25)
    >>> _ = ledger.append(0.1, label="q2")
    >>> ledger.totals() == (Fraction(7, 20), Fraction(0))
    True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import operator
import os
import re
import sqlite3
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from json.encoder import encode_basestring
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, overload

from privframe.accounting.budgets import Number, zCDP
from privframe.errors import InvalidArgumentError, InvalidValueError, LedgerError, PrivframeWarning

__all__ = [
    "APPLICATION_ID",
    "DEFAULT_TIMEOUT",
    "SCHEMA_VERSION",
    "STATE_DIR_ENV",
    "Charge",
    "DataIdentity",
    "Ledger",
    "LedgerEntries",
    "LedgerEntry",
    "LedgerMissingWarning",
    "LedgerStateWarning",
    "LedgerSummary",
    "SQLiteLedger",
    "accept_restored",
    "state_file",
]

APPLICATION_ID = 0x50464C47
"""``PRAGMA application_id`` of a privframe ledger file (ASCII ``PFLG``)."""

SCHEMA_VERSION = 2
"""``PRAGMA user_version`` of the ledger schema this module writes (it also reads 1).

Schema 2 stores costs and the budget as exact ``"numerator/denominator"``
text; schema 1 stored them as floats.
"""

_FORMAT = "privframe-ledger"
_SQLITE_HEADER = b"SQLite format 3\x00"

DEFAULT_TIMEOUT = 30.0
"""Seconds a :class:`SQLiteLedger` waits for a lock another process holds (its ``timeout``)."""

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
"""SQLite result codes of a lock held by another connection for longer than the timeout."""

_ENVIRONMENT_CODES = frozenset(
    {
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_INTERRUPT,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_AUTH,
    }
)
"""SQLite result codes of the disk or the operating system refusing, not of a damaged file."""

Check = Callable[[Fraction, Fraction], None]
"""A budget check: called with the exact (ρ, δ) totals already recorded; raises to refuse."""


class LedgerMissingWarning(PrivframeWarning):
    """A ledger privframe recorded at a path is gone, and a new one there restores the full budget.

    Given when a ledger path privframe saw before no longer holds that ledger
    (it was deleted, renamed or replaced): the spends it recorded would be
    spent again on the same data. See ``docs/operations.md``.
    """


class LedgerStateWarning(PrivframeWarning):
    """privframe cannot read or write its per-user record of known ledgers (:func:`state_file`).

    Ledgers keep working and keep their hash chain, but a rollback or a missing
    ledger is not detected, and each open verifies the whole ledger. See
    ``docs/operations.md``.
    """


class Charge(Protocol):
    """One spend for :meth:`Ledger.append_all`, as :class:`privframe.Spend` holds it."""

    @property
    def cost(self) -> zCDP:
        """The spend's (ρ, δ)."""

    @property
    def label(self) -> str:
        """A short public name for the release."""

    @property
    def description(self) -> Mapping[str, Any] | str:
        """Public parameters of the release, a str or a JSON-serialisable mapping."""

    @property
    def seeded(self) -> bool:
        """Whether the release used a seeded (non-private) random stream."""


_Draft = tuple[Fraction, Fraction, str, str, bool]
"""A validated spend not yet recorded: exact ρ and δ, label, description JSON, seeded."""


# --------------------------------------------------------------------------- helpers


def _canonical_json(value: Any) -> str:
    """Deterministic JSON text: sorted keys, no whitespace, no NaN/inf."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)  # fmt: skip


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


def _description_json(description: object) -> str:
    """Canonical JSON text of a description (a string or a JSON-serialisable mapping).

    Raises:
        InvalidArgumentError: ``description`` (or a value in it) has a type JSON
            cannot hold, or a mapping has a non-str key.
        InvalidValueError: it holds NaN or an infinity.
    """
    if isinstance(description, str):
        text = _canonical_json(description)
    elif isinstance(description, Mapping):
        _check_json(description, "description")
        text = _canonical_json(_thaw(description))
    else:
        raise InvalidArgumentError(
            f"description must be a str or a mapping, got {type(description).__name__}"
        )
    _check_text(text, "description")
    return text


def _cost(rho: object, delta: object) -> tuple[Fraction, Fraction]:
    """Validate a (ρ, δ) pair the way :class:`~privframe.accounting.zCDP` does; exact."""
    budget = zCDP(rho, delta)  # type: ignore[arg-type]
    return budget.exact_rho, budget.exact_delta


_RATIO = re.compile(r"(0|[1-9][0-9]*)/([1-9][0-9]*)")
_FLOAT_HEX = re.compile(r"0x[01]\.[0-9a-f]+p[+-][0-9]+")


def _ratio_text(x: Fraction) -> str:
    """The exact text of a rational as stored and hashed: ``"numerator/denominator"``."""
    return f"{x.numerator}/{x.denominator}"


def _parse_ratio(text: str) -> Fraction:
    """Inverse of :func:`_ratio_text`, refusing any other spelling (it is hashed)."""
    match = _RATIO.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a 'numerator/denominator' ratio")
    value = Fraction(int(match[1]), int(match[2]))
    if _ratio_text(value) != text:
        raise ValueError(f"{text!r} is not in lowest terms")
    return value


def _charge_value(value: object) -> tuple[Fraction, bool]:
    """A stored cost: ``"n/d"`` text (exact), or a schema-1 float (a float or its ``hex``).

    Returns the exact value and whether it was a schema-1 float, which the
    hash chain covers as ``float.hex``.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("a stored cost is not finite")
        return Fraction(value + 0.0), True
    if isinstance(value, str):
        if _FLOAT_HEX.fullmatch(value) is None:
            return _parse_ratio(value), False
        number = float.fromhex(value)
        if number.hex() != value:
            raise ValueError(f"{value!r} is not the canonical hex of a float")
        return Fraction(number), True
    raise TypeError(f"a stored cost must be text or a float, got {type(value).__name__}")


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


def _check_label_and_seeded(label: object, seeded: object) -> None:
    if not isinstance(label, str):
        raise InvalidArgumentError(f"label must be a str, got {type(label).__name__}")
    _check_text(label, "label")
    if not isinstance(seeded, bool):
        raise InvalidArgumentError(f"seeded must be a bool, got {type(seeded).__name__}")


def _draft(rho: object, delta: object, label: object, description: object,
           seeded: object) -> _Draft:  # fmt: skip
    """Validate one spend's fields as :meth:`Ledger.append` takes them."""
    exact_rho, exact_delta = _cost(rho, delta)
    _check_label_and_seeded(label, seeded)
    return exact_rho, exact_delta, label, _description_json(description), seeded  # type: ignore[return-value]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _entry_json(
    index: int, time: str, label: str, rho: str, delta: str, description: str, seeded: bool
) -> str:
    """The canonical JSON text an entry is hashed as, from its stored fields.

    The same text as ``_canonical_json`` of the entry's dict (sorted keys, no
    whitespace, strings escaped as ``json.dumps(ensure_ascii=False)`` does),
    built directly: a ledger is verified entry by entry, and this is its hot loop.
    """
    q = encode_basestring
    return (
        f'{{"delta":{q(delta)},"description":{q(description)},"index":{int(index)},'
        f'"label":{q(label)},"rho":{q(rho)},"seeded":{"true" if seeded else "false"},'
        f'"time":{q(time)}}}'
    )


def _link(prev_hash: str, text: str) -> str:
    """Next link of the hash chain: SHA-256(prev_hash || canonical entry JSON), in hex."""
    return hashlib.sha256(bytes.fromhex(prev_hash) + text.encode()).hexdigest()


def _float_excess(rho: Fraction, delta: Fraction) -> tuple[Fraction, Fraction]:
    """How far a schema-1 cost's exact binary floats exceed the decimals they print as."""
    return (
        max(rho - Fraction(repr(float(rho))), Fraction(0)),
        max(delta - Fraction(repr(float(delta))), Fraction(0)),
    )


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True, init=False)
class LedgerEntry:
    """One recorded spend: immutable, serialisable, and its meaning never changes.

    Args:
        index: position in the ledger, 0-based and contiguous.
        time: when it was recorded, a UTC ISO-8601 string.
        label: the caller's short name for the release.
        rho: the ρ spent (zCDP), read exactly as budgets are
            (:func:`privframe.accounting.exact`).
        delta: the δ spent outright (approximate zCDP); 0 for Gaussian releases.
        description: a str or a JSON-serialisable mapping describing the
            release (public parameters only). It is stored as canonical JSON
            text; mappings come back read-only (nested objects as mapping
            proxies, arrays as tuples).
        seeded: True when the release used a seeded, non-private random stream.
        legacy_floats: keyword only; the entry was written by a schema-1
            ledger, which recorded ρ and δ as floats: they are then floats,
            taken at their exact binary value (what that privframe charged),
            and the hash chain covers them as ``float.hex``.

    Attributes:
        exact_rho: the exact ρ; ``rho`` is the nearest float, for display.
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
    """

    index: int
    time: str
    label: str
    exact_rho: Fraction
    exact_delta: Fraction
    description: Mapping[str, Any] | str
    seeded: bool
    legacy_floats: bool = False
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
    ) -> None:
        if isinstance(index, bool) or not isinstance(index, int):
            raise InvalidArgumentError(f"index must be an int, got {type(index).__name__}")
        if index < 0:
            raise InvalidValueError(f"index must be >= 0, got {index!r}")
        if not isinstance(time, str):
            raise InvalidArgumentError(f"time must be an ISO-8601 str, got {type(time).__name__}")
        _check_label_and_seeded(label, seeded)
        if not isinstance(legacy_floats, bool):
            raise InvalidArgumentError(
                f"legacy_floats must be a bool, got {type(legacy_floats).__name__}"
            )
        if legacy_floats:
            if not (isinstance(rho, float) and isinstance(delta, float)):
                raise InvalidArgumentError("a legacy_floats entry's rho and delta must be floats")
            rho, delta = Fraction(rho + 0.0), Fraction(delta + 0.0)
        exact_rho, exact_delta = _cost(rho, delta)
        text = _description_json(description)
        self._set(index, time, label, exact_rho, exact_delta, json.loads(text), text, seeded,
                  legacy_floats)  # fmt: skip

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
            ("_description_json", text),
        ):
            object.__setattr__(self, name, value)

    @classmethod
    def _from_file(
        cls,
        index: int,
        time: str,
        label: str,
        cost: tuple[Fraction, Fraction, bool],
        text: str,
        seeded: bool,
    ) -> LedgerEntry:
        """An entry read back from a ledger file, whose fields the reader has validated.

        Reading a ledger builds one entry per row; the checks of ``__init__``
        (types, the cost, each description value) were done by the reader or
        hold for any JSON text, so only the description text's canonical form
        is checked here.

        Raises:
            ValueError: ``text`` is not canonical JSON (or holds NaN or an infinity).
        """
        parsed = json.loads(text)
        if _canonical_json(parsed) != text:
            raise ValueError("its description is not canonical JSON")
        entry = cls.__new__(cls)
        entry._set(index, time, label, cost[0], cost[1], parsed, text, seeded, cost[2])
        return entry

    def __hash__(self) -> int:
        return hash(self.canonical_json())

    @property
    def rho(self) -> float:
        """ρ as the nearest float, for display; :attr:`exact_rho` is the exact value.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.1, 0.0, "", False).rho
            0.1
        """
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
    def cost(self) -> zCDP:
        """The spend as an exact :class:`~privframe.accounting.zCDP` budget.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> LedgerEntry(0, "2024-01-01T00:00:00+00:00", "", 0.5, 0.0, "", False).cost
            zCDP(rho=0.5, delta=0.0)
        """
        return zCDP(self.exact_rho, self.exact_delta)

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
        return _float_excess(self.exact_rho, self.exact_delta)

    def _stored(self, value: Fraction) -> str:
        """The text a cost is stored and hashed as: ``float.hex`` for schema-1 floats."""
        return float(value).hex() if self.legacy_floats else _ratio_text(value)

    def to_dict(self) -> dict[str, Any]:
        """A plain, JSON-serialisable dict; ρ and δ as their exact stored text.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> d = LedgerEntry(0, "2024-01-01T00:00:00+00:00", "q", 0.1, 0.0, {"k": 1},
            ...                 False).to_dict()
            >>> d["rho"], d["delta"], d["description"]
            ('1/10', '0/1', {'k': 1})
        """
        return {
            "index": self.index,
            "time": self.time,
            "label": self.label,
            "rho": self._stored(self.exact_rho),
            "delta": self._stored(self.exact_delta),
            "description": _thaw(self.description),
            "seeded": self.seeded,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LedgerEntry:
        """Rebuild an entry from :meth:`to_dict` output (exactly these keys).

        ρ and δ are ``"n/d"`` text, or (from a schema-1 ledger) floats or
        their ``float.hex``, which are taken at their binary value.

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> d = {"index": 0, "time": "2024-01-01T00:00:00+00:00", "label": "q",
            ...      "rho": "1/2", "delta": "0/1", "description": "", "seeded": False}
            >>> LedgerEntry.from_dict(d).rho
            0.5
        """
        expected = {"index", "time", "label", "rho", "delta", "description", "seeded"}
        if not isinstance(data, Mapping) or set(data) != expected:
            raise InvalidArgumentError(
                f"data must be a ledger entry dict with exactly the keys {sorted(expected)}"
            )
        try:
            (rho, old_rho), (delta, old_delta) = (
                _charge_value(data["rho"]),
                _charge_value(data["delta"]),
            )
        except (TypeError, ValueError) as err:
            raise InvalidValueError(
                f"a ledger entry's rho and delta are malformed ({err})"
            ) from None
        if old_rho != old_delta:
            raise InvalidValueError("a ledger entry's rho and delta must be stored alike")
        values = {k: v for k, v in data.items() if k not in ("rho", "delta")}
        if old_rho:
            return cls(**values, rho=float(rho), delta=float(delta), legacy_floats=True)
        return cls(**values, rho=rho, delta=delta)

    def canonical_json(self) -> str:
        """The exact text the hash chain covers (ρ and δ as their stored text).

        Example:
            >>> from privframe.accounting.ledger import LedgerEntry
            >>> import json
            >>> text = LedgerEntry(0, "t", "q", 0.5, 0.0, "", False).canonical_json()
            >>> json.loads(text)["rho"]
            '1/2'
        """
        return _entry_json(
            self.index,
            self.time,
            self.label,
            self._stored(self.exact_rho),
            self._stored(self.exact_delta),
            self._description_json,
            self.seeded,
        )


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


_PAGE = 512
"""Entries read per query when a ledger's entries are iterated."""


class LedgerEntries(Sequence[LedgerEntry]):
    """A ledger's entries as a read-only sequence, read (and verified) as they are used.

    It holds the entries the ledger had when it was taken (its ``len`` is
    fixed; take a new one to see later entries) and keeps none in memory: an
    index reads that entry, a slice reads its range and returns a tuple, and
    iterating reads pages of entries in order. A file ledger's entries are
    checked against the hash chain as they are read (iterating from the first
    verifies the whole chain). It compares equal to a tuple or list of the
    same entries, so ``entries == ()`` tests for an empty ledger; ``tuple(...)``
    copies it. It stays readable after its ledger is closed.

    Example:
        >>> from privframe.accounting.ledger import Ledger
        >>> ledger = Ledger()
        >>> for i in range(3):
        ...     _ = ledger.append(0.1, label=f"q{i}")
        >>> entries = ledger.entries
        >>> len(entries), entries[-1].label, [e.label for e in entries[:2]]
        (3, 'q2', ['q0', 'q1'])
        >>> entries == tuple(entries), Ledger().entries == ()
        (True, True)
    """

    __slots__ = ("_cache", "_count", "_head", "_ledger")

    def __init__(self, ledger: Ledger, count: int, head: str) -> None:
        self._ledger = ledger
        self._count = count
        self._head = head
        self._cache: tuple[int, list[LedgerEntry]] = (0, [])

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> LedgerEntry: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[LedgerEntry, ...]: ...

    def __getitem__(self, index: int | slice) -> LedgerEntry | tuple[LedgerEntry, ...]:
        if isinstance(index, slice):
            wanted = range(self._count)[index]
            if not wanted:
                return ()
            lo, hi = min(wanted), max(wanted) + 1
            page = self._read(lo, hi)
            return tuple(page[i - lo] for i in wanted)
        i = operator.index(index)
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(f"ledger entry index {index} out of range ({self._count} entries)")
        return self._read(i, i + 1)[0]

    def __iter__(self) -> Iterator[LedgerEntry]:
        for lo in range(0, self._count, _PAGE):
            yield from self._read(lo, min(lo + _PAGE, self._count))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LedgerEntries | tuple | list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{self._count} ledger entr{'y' if self._count == 1 else 'ies'}>"

    def _read(self, start: int, stop: int) -> list[LedgerEntry]:
        first, cached = self._cache
        if first <= start and stop <= first + len(cached):
            return cached[start - first : stop - first]
        page = self._ledger._read(start, stop, self._count, self._head)
        self._cache = (start, page)
        return page


# --------------------------------------------------------------------------- in memory


class Ledger:
    """An in-memory, append-only, thread-safe ledger.

    The running totals are the exact sums of the recorded costs.
    :meth:`append` runs an optional ``check`` and the write under one lock, so
    a check cannot be overtaken by a concurrent append.

    Example:
        >>> from privframe.accounting.ledger import Ledger
        >>> ledger = Ledger()
        >>> _ = ledger.append(0.1, 0.0, label="a")
        >>> _ = ledger.append(0.2, 0.0, label="b")
        >>> [e.label for e in ledger.entries], len(ledger)
        (['a', 'b'], 2)
        >>> ledger.totals()[0] == Fraction(3, 10)  # 0.1 + 0.2 exactly, not 0.30000000000000004
        True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[LedgerEntry] = []
        self._summary = LedgerSummary()
        self._head = ""
        self._closed = False

    # -- public API -------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The file backing this ledger, or None when it lives in memory.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().path is None
            True
        """
        return None

    @property
    def entries(self) -> LedgerEntries:
        """Every entry so far, in order, as a lazy read-only :class:`LedgerEntries`.

        Taking it costs the same however long the ledger is; its entries are
        read (and, from a file, verified) when they are used.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().entries
            <0 ledger entries>
        """
        with self._lock:
            self._ensure_open()
            self._refresh()
            return LedgerEntries(self, self._summary.count, self._head)

    def summary(self) -> LedgerSummary:
        """The count, exact totals and seeded count of every recorded entry.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().summary().count
            0
        """
        with self._lock:
            self._ensure_open()
            self._refresh()
            return self._summary

    def totals(self) -> tuple[Fraction, Fraction]:
        """The exact sums (ρ, δ) of every recorded entry.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().totals()
            (Fraction(0, 1), Fraction(0, 1))
        """
        summary = self.summary()
        return summary.rho, summary.delta

    def float_excess(self) -> tuple[Fraction, Fraction]:
        """The sums (ρ, δ) of the entries' :attr:`LedgerEntry.float_excess`.

        Nonzero only for a file written by an older privframe (schema 1).

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().float_excess()
            (Fraction(0, 1), Fraction(0, 1))
        """
        return self.summary().float_excess

    def append(
        self,
        rho: Number,
        delta: Number = 0.0,
        *,
        label: str = "",
        description: Mapping[str, Any] | str = "",
        seeded: bool = False,
        check: Check | None = None,
    ) -> LedgerEntry:
        """Record one spend, atomically with ``check``.

        ``check`` is called with the exact (ρ, δ) totals already recorded,
        inside the same critical section (for a file: the same ``BEGIN
        IMMEDIATE`` transaction) as the write; if it raises, nothing is
        recorded and the exception propagates.

        Args:
            rho: ρ spent, >= 0, read exactly (a float as its decimal, a
                ``Fraction`` as itself).
            delta: δ spent, 0 <= δ < 1, read the same way.
            label: a short public name for the release.
            description: a str or JSON-serialisable mapping of public parameters.
            seeded: whether the release used a seeded (non-private) stream.
            check: optional budget check, see above.

        Returns:
            The entry as recorded.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> ledger = Ledger()
            >>> def at_most_half(rho, delta):
            ...     if rho + Fraction(0.5) > Fraction(0.5):
            ...         raise RuntimeError("full")
            >>> ledger.append(0.5, check=at_most_half).index
            0
            >>> ledger.append(0.5, check=at_most_half)
            Traceback (most recent call last):
            RuntimeError: full
            >>> len(ledger)
            1
        """
        return self._append([_draft(rho, delta, label, description, seeded)], check)[0]

    def append_all(
        self, charges: Sequence[Charge], *, check: Check | None = None
    ) -> list[LedgerEntry]:
        """Record several spends in one step: every one of them, or none.

        Each charge is validated as :meth:`append` validates its arguments
        before anything is written. ``check`` is called once, with the exact
        (ρ, δ) totals already recorded, inside the same critical section (for
        a file: the same ``BEGIN IMMEDIATE`` transaction) that then writes all
        the entries; if it raises, or a write fails, nothing is recorded.

        Args:
            charges: the spends, in order (e.g. :class:`privframe.accounting.accountant.Spend`
                values); an empty sequence records nothing.
            check: optional budget check, see above.

        Returns:
            The entries as recorded, in order (consecutive indexes).

        Example:
            >>> from privframe import zCDP
            >>> from privframe.accounting.accountant import Spend
            >>> from privframe.accounting.ledger import Ledger
            >>> ledger = Ledger()
            >>> entries = ledger.append_all([Spend(zCDP(0.25), "a"), Spend(zCDP(0.5), "b")])
            >>> [(e.index, e.label) for e in entries], ledger.totals()[0]
            ([(0, 'a'), (1, 'b')], Fraction(3, 4))
        """
        if isinstance(charges, str | bytes) or not isinstance(charges, Sequence):
            raise InvalidArgumentError(
                f"charges must be a sequence of spends, got {type(charges).__name__}"
            )
        drafts = []
        for i, charge in enumerate(charges):
            cost = getattr(charge, "cost", None)
            if not isinstance(cost, zCDP):
                raise InvalidArgumentError(
                    f"charge {i} must have a zCDP cost (a privframe.accounting.accountant.Spend), "
                    f"got {type(charge).__name__}"
                )
            drafts.append(
                _draft(cost.exact_rho, cost.exact_delta, charge.label, charge.description,
                       charge.seeded)
            )  # fmt: skip
        if not drafts:
            return []
        return self._append(drafts, check)

    def _append(self, drafts: list[_Draft], check: Check | None) -> list[LedgerEntry]:
        """Check and write validated drafts in one critical section."""
        with self._lock:
            self._ensure_open()
            with self._write_transaction():
                if check is not None:
                    check(self._summary.rho, self._summary.delta)
                start = self._summary.count
                entries = [
                    LedgerEntry(start + i, _now(), label, rho, delta, json.loads(text), seeded)
                    for i, (rho, delta, label, text, seeded) in enumerate(drafts)
                ]
                self._write(entries)
            # Only committed entries enter the summary.
            self._remember(entries)
            return entries

    def verify(self) -> None:
        """Re-check the whole record; a file ledger re-verifies its file and its hash chain.

        Raises:
            LedgerError: the record is damaged or was modified outside privframe.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> Ledger().verify()
        """
        with self._lock:
            self._ensure_open()
            self._verify_all()

    def close(self) -> None:
        """Release the ledger's resources; later use raises LedgerError.

        :class:`LedgerEntries` taken before stay readable.

        Example:
            >>> from privframe.accounting.ledger import Ledger
            >>> ledger = Ledger()
            >>> ledger.close()
        """
        with self._lock:
            self._closed = True

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.summary().count

    def __repr__(self) -> str:
        return f"{type(self).__name__}(entries={self._summary.count})"

    # -- hooks for persistent subclasses (called with the lock held) -------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise LedgerError("this ledger is closed; open a new one to keep spending")

    def _refresh(self) -> None:
        """Bring the summary up to date with the backing store (entries others appended)."""

    def _verify_all(self) -> None:
        """Re-verify everything the backing store holds."""

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[None]:
        """Critical section of one append; a store refreshes its view at the start."""
        yield

    def _write(self, entries: list[LedgerEntry]) -> None:
        """Persist ``entries`` inside the current write transaction."""

    def _remember(self, entries: list[LedgerEntry]) -> None:
        """Take committed ``entries`` into the summary."""
        self._entries.extend(entries)
        self._summary += LedgerSummary.of(entries)

    def _read(self, start: int, stop: int, count: int, head: str) -> list[LedgerEntry]:
        """Entries ``start`` to ``stop`` of the first ``count`` (whose last hash is ``head``)."""
        with self._lock:
            return self._entries[start:stop]


# --------------------------------------------------------------------------- SQLite

_SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE entries (
    idx         INTEGER PRIMARY KEY,
    time        TEXT    NOT NULL,
    label       TEXT    NOT NULL,
    rho         TEXT    NOT NULL,
    delta       TEXT    NOT NULL,
    description TEXT    NOT NULL,
    seeded      INTEGER NOT NULL,
    hash        TEXT    NOT NULL
);
"""
# Schema 1 declared rho and delta REAL and stored floats. Its files keep that
# table: their old rows stay floats, and new rows hold "n/d" text, which SQLite
# keeps as TEXT in a REAL column since it is not a number literal. Rows are read
# by their storage class (privframe.accounting.ledger._charge_value).


def _fsync_directory(directory: Path) -> None:
    """Make a new directory entry durable (POSIX; a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _genesis(meta: Mapping[str, str]) -> str:
    """Root of the hash chain: binds the chain to the ledger's identity and budget."""
    keys = ("format", "schema", "ledger_id", "created", "budget_rho", "budget_delta")
    payload = _canonical_json({k: meta[k] for k in keys})
    return hashlib.sha256(b"privframe-ledger\x00" + payload.encode()).hexdigest()


_READABLE = (1, SCHEMA_VERSION)
"""The ``user_version`` values this module opens."""

_SCHEMA_NAMES = ("1", str(SCHEMA_VERSION))
"""``meta.schema``: the version a file was created with (its genesis hash covers it)."""


def _stored_budget(meta: Mapping[str, str]) -> zCDP:
    """The budget a file was created with, exactly.

    Schema 2 writes ``"n/d"``. Schema 1 wrote ``repr(float)``: the decimal the
    user typed for a budget they gave (``0.3``), or the shortest repr of a
    computed float (a converted budget). Either may be meant, and that file
    enforced the float, so it is read as the larger of the decimal and the
    float: reopening it with either exact value is not a "larger" budget.
    """
    if meta["schema"] != "1":
        return zCDP(_parse_ratio(meta["budget_rho"]), _parse_ratio(meta["budget_delta"]))
    parts = []
    for key in ("budget_rho", "budget_delta"):
        text = meta[key]
        number = float(text)
        if not math.isfinite(number) or repr(number) != text:
            raise ValueError(f"{key} is not the repr of a float")
        parts.append(max(Fraction(text), Fraction(number)))
    return zCDP(*parts)


def _data_meta(genesis: str, data: DataIdentity | None, text: str | None = None) -> dict[str, str]:
    """The meta rows recording ``data`` (or its JSON ``text``), with a hash bound to the file."""
    text = data.to_json() if data is not None else text
    if text is None:
        return {}
    digest = hashlib.sha256(bytes.fromhex(genesis) + b"data\x00" + text.encode()).hexdigest()
    return {"data": text, "data_hash": digest}


@dataclass(frozen=True)
class DataIdentity:
    """What a ledger file records of the data it is spent on: public facts only.

    The privacy unit column and the input's columns with their types, as the
    session sees them after loading; never a data value. A ledger spent on
    one dataset must not be reopened for another: its spends would be carried
    over to (or credited to) the wrong data.

    Args:
        privacy_unit: the privacy unit column, or None (each row a person).
        columns: (name, type) pairs, in the data's order; types as strings
            (e.g. polars' ``str(dtype)``).

    Example:
        >>> from privframe.accounting.ledger import DataIdentity
        >>> old = DataIdentity("user", (("user", "Int64"), ("amount", "Float64")))
        >>> new = DataIdentity("user", (("user", "String"), ("amount", "Float64")))
        >>> new.differences(old)
        ["column 'user' has type String here but Int64 in the ledger"]
        >>> DataIdentity.from_json(old.to_json()) == old
        True
    """

    privacy_unit: str | None
    columns: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if self.privacy_unit is not None and not isinstance(self.privacy_unit, str):
            raise InvalidArgumentError(
                f"privacy_unit must be a str or None, got {type(self.privacy_unit).__name__}"
            )
        columns = tuple(tuple(c) for c in self.columns)
        if not all(
            len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], str) for c in columns
        ):
            raise InvalidArgumentError("columns must be (name, type) pairs of strings")
        object.__setattr__(self, "columns", columns)

    @classmethod
    def of(cls, privacy_unit: str | None, schema: Mapping[str, object]) -> DataIdentity:
        """The identity of data with this unit and schema (a mapping of names to dtypes).

        Example:
            >>> import polars as pl
            >>> from privframe.accounting.ledger import DataIdentity
            >>> DataIdentity.of("u", pl.Schema({"u": pl.Int64})).columns
            (('u', 'Int64'),)
        """
        return cls(privacy_unit, tuple((str(name), str(t)) for name, t in schema.items()))

    def to_json(self) -> str:
        """Canonical JSON text, as stored in the ledger file.

        Example:
            >>> from privframe.accounting.ledger import DataIdentity
            >>> DataIdentity(None, (("x", "Float64"),)).to_json()
            '{"columns":[["x","Float64"]],"privacy_unit":null}'
        """
        return _canonical_json(
            {"privacy_unit": self.privacy_unit, "columns": [list(c) for c in self.columns]}
        )

    @classmethod
    def from_json(cls, text: str) -> DataIdentity:
        """Inverse of :meth:`to_json`.

        Raises:
            ValueError: the text is not such JSON.

        Example:
            >>> from privframe.accounting.ledger import DataIdentity
            >>> DataIdentity.from_json('{"columns":[],"privacy_unit":"u"}').privacy_unit
            'u'
        """
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != {"privacy_unit", "columns"}:
            raise ValueError("not a data identity")
        try:
            return cls(data["privacy_unit"], tuple(tuple(c) for c in data["columns"]))
        except (InvalidArgumentError, TypeError) as err:
            raise ValueError(f"not a data identity ({err})") from None

    def differences(self, recorded: DataIdentity) -> list[str]:
        """How this data differs from the ``recorded`` one, one phrase per difference.

        Example:
            >>> from privframe.accounting.ledger import DataIdentity
            >>> DataIdentity("a", ()).differences(DataIdentity("b", ()))
            ["the privacy unit is 'a' here but 'b' in the ledger"]
        """
        found = []
        if self.privacy_unit != recorded.privacy_unit:
            found.append(
                f"the privacy unit is {self.privacy_unit!r} here but "
                f"{recorded.privacy_unit!r} in the ledger"
            )
        mine, theirs = dict(self.columns), dict(recorded.columns)
        added = [c for c in mine if c not in theirs]
        removed = [c for c in theirs if c not in mine]
        if added:
            found.append(f"columns {added} are not in the ledger's data")
        if removed:
            found.append(f"the ledger's data has columns {removed} that are not here")
        for name, kind in mine.items():
            if name in theirs and theirs[name] != kind:
                found.append(
                    f"column {name!r} has type {kind} here but {theirs[name]} in the ledger"
                )
        return found  # the columns' order does not matter: the data is the same


class SQLiteLedger(Ledger):
    """A ledger persisted in a SQLite file, safe across threads, processes and crashes.

    Opening a path that does not exist creates a ledger bound to ``budget``
    (race-free: of several processes creating it at once, exactly one
    ledger results and all of them open it). An existing file is never
    initialised, even an empty one: it must already be a privframe ledger.
    Opening an existing ledger checks that it is a privframe ledger of a known
    schema and refuses a ``budget`` larger (in ρ or δ, compared exactly) than
    the one the file was created with. A smaller budget is accepted: enforcing
    it is the caller's job (the :class:`~privframe.accounting.accountant.Accountant` does).

    Opening costs the same however many entries the file holds, once this user
    has opened it before: privframe keeps a per-user record of the ledgers it
    verified (:func:`state_file`: each path's entry count, last hash and exact
    totals), and an open checks that the entry it recorded last is still
    there, unchanged, then verifies only the entries added since. A ledger
    with fewer entries, or another entry at that place, was rolled back (an
    older copy restored, or edited) and is refused, unless an operator
    accepts it (:func:`accept_restored`). A ledger this user never opened
    is checked in full (``PRAGMA quick_check`` and the hash chain from the
    first entry). A path whose recorded ledger is gone (deleted, renamed,
    replaced) gives a :class:`LedgerMissingWarning`. Entries are verified
    again as they are read, and in full by :meth:`verify`.

    With ``data``, the file records the data it is spent on (at creation, or
    the first time a file that has no record is opened with one), and
    opening it for other data (another privacy unit, columns added, removed
    or of another type) is refused, unless ``same_data=True``: the caller
    states that it is the same data (say, with a column added), and the file
    then records this ``data`` instead. Without ``data`` nothing is checked.

    Args:
        path: the ledger file; its directory must exist.
        budget: the budget the caller intends to enforce.
        data: keyword only; the :class:`DataIdentity` of the data spent on.
        same_data: keyword only; accept ``data`` that differs from the
            file's record as the same data, and record it.
        timeout: keyword only; how long, in seconds, to wait for a lock
            another process holds on the file before giving up with a "busy"
            :class:`~privframe.errors.LedgerError` (default 30).

    Raises:
        LedgerError: missing directory or an unusable path; an existing file
            that is not a privframe ledger (including an empty or truncated
            file); a corrupted file; a rolled-back file; unknown schema
            version; a budget larger than the persisted one; other data than
            the file records; or the file is busy (locked by another process
            for longer than ``timeout``).
        InvalidValueError: ``timeout`` is not a positive number.

    Example:
        >>> import os, tempfile
        >>> from privframe import zCDP
        >>> from privframe.accounting.ledger import SQLiteLedger
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = os.path.join(d, "spend.ledger")
        ...     with SQLiteLedger(path, zCDP(1.0)) as ledger:
        ...         _ = ledger.append(0.25, label="q1")
        ...     with SQLiteLedger(path, zCDP(1.0)) as ledger:
        ...         print(len(ledger), ledger.budget)
        1 zCDP(rho=1.0, delta=0.0)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        budget: zCDP,
        *,
        data: DataIdentity | None = None,
        same_data: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        _restored: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(budget, zCDP):
            raise InvalidArgumentError(f"budget must be a zCDP, got {type(budget).__name__}")
        if data is not None and not isinstance(data, DataIdentity):
            raise InvalidArgumentError(
                f"data must be a DataIdentity or None, got {type(data).__name__}"
            )
        if not isinstance(same_data, bool):
            raise InvalidArgumentError(f"same_data must be a bool, got {type(same_data).__name__}")
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < math.inf
        ):
            raise InvalidValueError(
                f"timeout must be a positive number of seconds, got {timeout!r}"
            )
        self._path = _ledger_path(path)
        self._timeout = float(timeout)
        self._conn: sqlite3.Connection | None = None
        self._genesis = ""
        self._pending_head = ""
        self._version = SCHEMA_VERSION
        self._created = False
        try:
            self._conn = self._open(budget, data)
            self._budget = self._load_meta(budget)
            self._head = self._genesis
            self._key = _state_key(self._path)
            record = None if _restored else self._known_record()
            if record is None:
                self._quick_check()
            else:
                self._summary, self._head = record.summary, record.head
            self._refresh()
            if data is not None:
                self._settle_data(data, same_data)
            self._record_known(force=_restored)
        except BaseException:
            self._close_connection()
            raise

    @property
    def path(self) -> Path:
        """The ledger file.

        Example:
            >>> import os, tempfile
            >>> from privframe import zCDP
            >>> from privframe.accounting.ledger import SQLiteLedger
            >>> with tempfile.TemporaryDirectory() as d:
            ...     with SQLiteLedger(os.path.join(d, "x.ledger"), zCDP(1.0)) as ledger:
            ...         print(ledger.path.name)
            x.ledger
        """
        return self._path

    @property
    def budget(self) -> zCDP:
        """The budget the file was created with (the most any opener may enforce).

        Example:
            >>> import os, tempfile
            >>> from privframe import zCDP
            >>> from privframe.accounting.ledger import SQLiteLedger
            >>> with tempfile.TemporaryDirectory() as d:
            ...     with SQLiteLedger(os.path.join(d, "x.ledger"), zCDP(2.0)) as ledger:
            ...         print(ledger.budget.rho)
            2.0
        """
        return self._budget

    def close(self) -> None:
        """Close the database connection; later use raises LedgerError.

        Example:
            >>> import os, tempfile
            >>> from privframe import zCDP
            >>> from privframe.accounting.ledger import SQLiteLedger
            >>> with tempfile.TemporaryDirectory() as d:
            ...     ledger = SQLiteLedger(os.path.join(d, "x.ledger"), zCDP(1.0))
            ...     ledger.close()
        """
        with self._lock:
            self._closed = True
            self._close_connection()

    def __repr__(self) -> str:
        return f"SQLiteLedger({str(self._path)!r}, entries={self._summary.count})"

    # -- opening ----------------------------------------------------------------

    def _fail(self, what: str) -> LedgerError:
        return LedgerError(f"ledger file {str(self._path)!r}: {what}")

    def _corrupt(self, what: str) -> LedgerError:
        return self._fail(
            f"{what}. The file is damaged or was modified outside privframe; it was not "
            "used. Restore it from a backup (or investigate) rather than starting a new "
            "ledger, which would reset the budget (see docs/operations.md)."
        )

    def _busy(self, waited: float) -> LedgerError:
        return self._fail(
            f"is busy: another process holds a lock on it, and privframe gave up after "
            f"waiting {waited:.3g} s (the limit is {self._timeout:g} s). Nothing was read or "
            "recorded, and the file is not damaged: retry when that process is done (a "
            "long-running program, a backup tool, an open SQLite shell). Do not restore a "
            "backup or start a new ledger because of this"
        )

    def _rolled_back(self, count: int) -> LedgerError:
        spent = self._summary
        then = f"{count} entries"
        if spent.count == count:
            then += f", spending rho={float(spent.rho):.6g}, delta={float(spent.delta):.6g}"
        return self._fail(
            f"was rolled back or modified outside privframe: entry {count - 1}, which "
            f"privframe verified before (when the ledger had {then}), changed or "
            "disappeared, so spends recorded since are missing (an older copy was "
            "restored, or entries were deleted or rewritten). It was not used. Restore "
            "the newest copy; if you restored an older backup on purpose, accept it with "
            "privframe.accounting.ledger.accept_restored("
            f"{str(self._path)!r}) and open it again (the "
            "privacy loss of the spends it lacks then goes uncounted; see docs/operations.md)"
        )

    def _sqlite_error(self, err: sqlite3.Error, doing: str, waited: float,
                      *, damage: bool) -> LedgerError:  # fmt: skip
        """The LedgerError for a SQLite error while ``doing`` something (after ``waited`` s).

        A lock held too long is "busy", a refusal of the disk or the
        operating system says so, and other errors mean damage when they come
        from reading what should be a ledger (``damage``), else a failure.
        """
        code = getattr(err, "sqlite_errorcode", None)
        primary = None if code is None else code & 0xFF
        if primary in _BUSY_CODES:
            return self._busy(waited)
        if primary in _ENVIRONMENT_CODES:
            return self._fail(
                f"{doing} failed: {err} ({getattr(err, 'sqlite_errorname', 'SQLite error')}). "
                "Check the disk, its free space and the file's permissions; nothing was "
                "recorded, and the file was not found damaged"
            )
        if damage:
            return self._corrupt(f"SQLite reports an error while {doing} ({err})")
        return self._fail(f"{doing} failed ({err})")

    @contextlib.contextmanager
    def _sqlite(self, doing: str, *, damage: bool = True) -> Iterator[None]:
        """Turn a SQLite error in the block into a LedgerError (see :meth:`_sqlite_error`)."""
        started = time.monotonic()
        failure = None
        try:
            yield
        except sqlite3.Error as err:
            failure = self._sqlite_error(err, doing, time.monotonic() - started, damage=damage)
        if failure is not None:
            raise failure

    def _not_a_ledger(self, what: str) -> LedgerError:
        return self._fail(
            f"exists but is not a privframe ledger ({what}). privframe only initialises "
            "a file it has just created itself: a truncated or partially copied ledger is a "
            "corrupted ledger, not a new one, and starting afresh would reset the budget. "
            "Restore the ledger from a backup, or choose a path that does not exist yet "
            "for a new ledger (a new privacy budget)"
        )

    def _open(self, budget: zCDP, data: DataIdentity | None) -> sqlite3.Connection:
        path = self._path
        try:
            if not path.parent.is_dir():
                raise self._fail(f"directory {str(path.parent)!r} does not exist; create it first")
            if not os.path.lexists(path):
                self._create(budget, data)
            if not path.is_file():
                raise self._fail("is not a regular file")
            with path.open("rb") as fh:
                header = fh.read(len(_SQLITE_HEADER))
        except OSError as err:
            raise self._fail(f"cannot be read ({err.strerror})") from None
        if not header:
            raise self._not_a_ledger("it is empty: 0 bytes")
        if header != _SQLITE_HEADER:
            raise self._fail(
                "exists but is not a privframe ledger (not a SQLite database); "
                "choose another path for a new ledger"
            )
        conn = self._connect(path)
        try:
            with self._sqlite("opening it"):
                self._set_pragmas(conn)
                self._check_identity(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _quick_check(self) -> None:
        """``PRAGMA quick_check``: the file's structure is sound (reads every page)."""
        with self._sqlite("checking it"):
            check = [row[0] for row in self._connection().execute("PRAGMA quick_check")]
        if check != ["ok"]:
            raise self._corrupt(f"PRAGMA quick_check failed ({'; '.join(map(str, check))})")

    def _connect(self, path: Path, *, read_only: bool = False) -> sqlite3.Connection:
        try:
            if read_only:
                return sqlite3.connect(
                    f"{path.absolute().as_uri()}?mode=ro",
                    uri=True,
                    timeout=self._timeout,
                    isolation_level=None,
                )
            return sqlite3.connect(
                path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as err:
            raise self._fail(f"cannot be opened ({err})") from None

    def _set_pragmas(self, conn: sqlite3.Connection) -> None:
        """Rollback journal and fsync at every commit: the main file holds every commit.

        Not WAL: in WAL mode committed rows live in the ``-wal`` file until a
        checkpoint, so a copy of the main file alone (a backup taken while the
        ledger is open, or after a crash) would lose them.
        """
        mode = str(conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]).lower()
        if mode != "delete":
            raise self._fail(
                f"cannot switch to the rollback journal (journal_mode is {mode!r}); another "
                "program has it open in WAL mode. Close it and open the ledger again"
            )
        conn.execute("PRAGMA synchronous=FULL")

    def _check_identity(self, conn: sqlite3.Connection) -> None:
        """Raise unless the database is a privframe ledger of the known schema."""
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        n_objects = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id == 0 and version == 0 and n_objects == 0:
            raise self._not_a_ledger(
                "it is a SQLite database with no tables, as the main file of a ledger "
                "copied without its journal can be"
            )
        if app_id != APPLICATION_ID:
            raise self._fail(
                f"is a SQLite database of another application (application_id={app_id}), "
                "not a privframe ledger; choose another path"
            )
        if version not in _READABLE:
            raise self._fail(
                f"has ledger schema version {version}, which this privframe does not know "
                f"(it reads versions {', '.join(map(str, _READABLE))}); upgrade privframe"
            )
        self._version = version

    def _create(self, budget: zCDP, data: DataIdentity | None) -> None:
        """Create the ledger file, unless another opener creates it first.

        The ledger is built in a temporary file of this call's own, created
        with ``O_CREAT | O_EXCL``, and published with :func:`os.link`, which
        fails if the path exists. So the path never shows an uninitialised
        file, exactly one of several concurrent creators publishes its ledger
        (the others open that one), and nothing but a file this call created
        is ever initialised.
        """
        path = self._path
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.creating")
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except OSError as err:
            raise self._fail(f"cannot be created ({err.strerror})") from None
        os.close(fd)
        try:
            conn = self._connect(tmp)
            try:
                self._set_pragmas(conn)
                self._initialise(conn, budget, data)
            finally:
                conn.close()
            try:
                os.link(tmp, path)
            except FileExistsError:
                return  # a concurrent opener created it first: open theirs
            except OSError as err:
                raise self._fail(
                    f"cannot be created: the filesystem refused a hard link ({err.strerror}); "
                    "put the ledger on a local filesystem"
                ) from None
            _fsync_directory(path.parent)
            self._created = True
        except sqlite3.Error as err:
            raise self._fail(f"cannot be created ({err})") from None
        finally:
            for leftover in (tmp, Path(f"{tmp}-journal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()

    def _initialise(
        self, conn: sqlite3.Connection, budget: zCDP, data: DataIdentity | None
    ) -> None:
        """Write the schema and meta rows into the new, private database ``conn``."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            # executescript() would COMMIT first: run the statements one by one.
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            meta = {
                "format": _FORMAT,
                "schema": str(SCHEMA_VERSION),
                "ledger_id": str(uuid.uuid4()),
                "created": _now(),
                "budget_rho": _ratio_text(budget.exact_rho),
                "budget_delta": _ratio_text(budget.exact_delta),
            }
            meta["genesis"] = _genesis(meta)
            meta["head"] = meta["genesis"]
            meta["count"] = "0"
            if data is not None:
                meta.update(_data_meta(meta["genesis"], data))
            conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", meta.items())
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _load_meta(self, requested: zCDP) -> zCDP:
        conn = self._connection()
        with self._sqlite("reading its meta table"):
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        try:
            if meta.get("format") != _FORMAT or meta.get("schema") not in _SCHEMA_NAMES:
                raise ValueError("format marker")
            stored = _stored_budget(meta)
            genesis = _genesis(meta)
        except (KeyError, ValueError, TypeError, InvalidValueError) as err:
            raise self._corrupt(f"its meta table is malformed ({err})") from None
        if meta.get("genesis") != genesis:
            raise self._corrupt("its meta table does not match its recorded hash")
        self._genesis = genesis
        if requested.exact_rho > stored.exact_rho or requested.exact_delta > stored.exact_delta:
            raise self._fail(
                f"was created with budget {stored!r}; it cannot be reopened with the larger "
                f"budget {requested!r} (a persisted ledger keeps its budget). Use a budget "
                f"no larger than {stored!r}, or a new ledger file for a new privacy budget"
            )
        return stored

    def _settle_data(self, data: DataIdentity, same_data: bool) -> None:
        """Check ``data`` against the file's record; record it if there is none (or if same)."""
        with self._immediate("checking its record of the data") as conn:
            rows = conn.execute("SELECT key, value FROM meta WHERE key IN ('data', 'data_hash')")
            recorded = dict(rows.fetchall())
            if recorded:
                if _data_meta(self._genesis, None, recorded.get("data")) != recorded:
                    raise self._corrupt("its record of the data does not match its hash")
                try:
                    previous = DataIdentity.from_json(recorded["data"])
                except ValueError as err:
                    raise self._corrupt(f"its record of the data is malformed ({err})") from None
                differences = data.differences(previous)
                if not differences:
                    return
                if not same_data:
                    raise self._fail(
                        "records spending on other data: "
                        + "; ".join(differences)
                        + ". Its spends would be carried over to this data (and this data's "
                        "to the other). Use another ledger file for other data; if it is "
                        "the same data (e.g. a column was added or renamed), open it with "
                        "same_data=True (a report spec: [budget] same_data = true), and the "
                        "ledger then records this data's columns"
                    )
            conn.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                _data_meta(self._genesis, data).items(),
            )

    # -- reading and writing (lock held) -----------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LedgerError("this ledger is closed; open a new one to keep spending")
        return self._conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def _reading(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One read transaction (a consistent view of the file) around the block."""
        with self._sqlite("reading it"):
            conn.execute("BEGIN")
            try:
                yield
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @staticmethod
    def _rows(conn: sqlite3.Connection, lo: int, hi: int | None) -> list[tuple[Any, ...]]:
        """The stored rows of entries ``lo`` to ``hi`` (inclusive; to the last when None)."""
        return conn.execute(
            "SELECT idx, time, label, rho, delta, description, seeded, hash FROM entries "
            "WHERE idx BETWEEN ? AND ? ORDER BY idx",
            (lo, 2**63 - 1 if hi is None else hi),
        ).fetchall()

    def _scan(
        self, rows: list[tuple[Any, ...]], start: int, prev: str
    ) -> tuple[str, LedgerSummary, dict[tuple[str, str], tuple[Fraction, Fraction, bool]]]:
        """Verify ``rows`` as entries ``start``, ``start + 1``, ... chained from ``prev``.

        Returns the last link, the rows' summary, and their costs as stored
        (text) and parsed (exact ρ, δ, and whether schema-1 floats). Each row's hash is checked
        against its stored text directly (no entry is built): this is how a
        whole ledger is verified, so it is kept lean. Each distinct cost is
        parsed once.
        """
        costs: dict[tuple[str, str], list[int]] = {}
        seeded = 0
        for offset, row in enumerate(rows):
            idx, time, label, rho, delta, description, flag, stored = row
            expected = start + offset
            if idx != expected:
                raise self._corrupt(f"entry {expected} is missing (found entry {idx} instead)")
            problem = ""
            try:
                cost = (_cost_text(rho), _cost_text(delta))
                if not (isinstance(time, str) and isinstance(label, str)) or flag not in (0, 1):
                    raise TypeError("malformed time, label or seeded flag")
                if not isinstance(description, str):
                    raise TypeError("malformed description")
                text = _entry_json(idx, time, label, *cost, description, bool(flag))
                link = _link(prev, text)
            except (TypeError, ValueError) as err:
                problem = str(err)
            if problem:
                raise self._corrupt(f"entry {idx} is malformed ({problem})")
            if link != stored:
                raise self._corrupt(f"entry {idx} does not match its hash (the hash chain breaks)")
            seen = costs.setdefault(cost, [0, idx])
            seen[0] += 1
            seeded += 1 if flag else 0
            prev = link
        return (prev, *self._summarize(costs, seeded, len(rows)))

    def _summarize(
        self, costs: dict[tuple[str, str], list[int]], seeded: int, count: int
    ) -> tuple[LedgerSummary, dict[tuple[str, str], tuple[Fraction, Fraction, bool]]]:
        """The summary of ``count`` entries, with their costs as stored: [times, first index]."""
        rho = delta = excess_rho = excess_delta = Fraction(0)
        parsed = {}
        for (rho_text, delta_text), (times, first) in costs.items():
            problem = ""
            try:
                (r, old_r), (d, old_d) = _charge_value(rho_text), _charge_value(delta_text)
                if old_r != old_d:
                    raise TypeError("rho and delta are stored differently")
                _cost(r, d)
            except (TypeError, ValueError, InvalidValueError) as err:
                problem = str(err)
            if problem:
                raise self._corrupt(f"entry {first} is malformed ({problem})")
            parsed[rho_text, delta_text] = (r, d, old_r)
            rho += times * r
            delta += times * d
            if old_r:
                er, ed = _float_excess(r, d)
                excess_rho += times * er
                excess_delta += times * ed
        return LedgerSummary(count, rho, delta, (excess_rho, excess_delta), seeded), parsed

    def _entry(
        self, row: tuple[Any, ...], costs: Mapping[tuple[str, str], tuple[Fraction, Fraction, bool]]
    ) -> LedgerEntry:
        """The entry a stored row holds, once :meth:`_scan` checked it and parsed ``costs``."""
        idx, time, label, rho, delta, description, flag, _ = row
        cost = costs[_cost_text(rho), _cost_text(delta)]
        problem = ""
        try:
            return LedgerEntry._from_file(idx, time, label, cost, description, bool(flag))
        except ValueError as err:
            problem = str(err)
        raise self._corrupt(f"entry {idx} is malformed ({problem})")

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        """Verify the entries added since the summary, and take them in. Caller holds a transaction.

        The last entry verified must still be there, unchanged (its hash, and
        its text against it): an entry deleted or rewritten after it was
        verified (or a file rolled back to an older copy) shows up here. The
        head (count and last hash) is updated with every append, in the same
        transaction: a removed (or added) last entry shows up as a head that
        does not match.
        """
        count, head = self._summary.count, self._head
        if count:
            rows = self._rows(conn, max(count - 2, 0), count - 1)
            prev = self._genesis
            if count > 1:
                if not rows or rows[0][0] != count - 2:
                    raise self._rolled_back(count)
                prev, rows = rows[0][-1], rows[1:]
            if len(rows) != 1 or rows[0][-1] != head:
                raise self._rolled_back(count)
            self._scan(rows, count - 1, prev)  # and its text still matches its hash
        last, added, _ = self._scan(self._rows(conn, count, None), count, head)
        total = count + added.count
        recorded = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('count', 'head')"))
        if recorded != {"count": str(total), "head": last}:
            raise self._corrupt(
                f"its entries ({total}) do not match its recorded head; "
                "an entry was removed or added"
            )
        if added.count:
            self._summary += added
            self._head = last

    def _refresh(self) -> None:
        conn = self._connection()
        with self._reading(conn):
            self._catch_up(conn)

    def _verify_all(self) -> None:
        """The whole file: its structure, and the hash chain and totals from the first entry."""
        self._quick_check()
        conn = self._connection()
        count = self._summary.count
        with self._reading(conn):
            rows = self._rows(conn, 0, count - 1)
            last, known, _ = self._scan(rows, 0, self._genesis)
            if len(rows) < count or last != self._head:
                raise self._rolled_back(count)
            if known != self._summary:
                raise self._corrupt(
                    f"its first {count} entries add up to rho={known.rho}, delta={known.delta} "
                    f"(seeded: {known.seeded}), not to the rho={self._summary.rho}, "
                    f"delta={self._summary.delta} (seeded: {self._summary.seeded}) privframe "
                    f"recorded for it in {str(state_file())!r}"
                )
            self._catch_up(conn)

    def _read(self, start: int, stop: int, count: int, head: str) -> list[LedgerEntry]:
        with self._lock:
            temporary = self._conn is None  # entries taken before close() stay readable
            conn = self._connect(self._path, read_only=True) if temporary else self._conn
            assert conn is not None
            try:
                with self._reading(conn):
                    if temporary:
                        self._check_same_ledger(conn)
                    hi = min(stop, count - 1)  # one more entry: its link checks the last one
                    rows = self._rows(conn, max(start - 1, 0), hi)
                    if start:
                        if not rows or rows[0][0] != start - 1:
                            raise self._corrupt(f"entry {start - 1} is missing")
                        prev, rows = rows[0][-1], rows[1:]
                    else:
                        prev = self._genesis
                    last, _, costs = self._scan(rows, start, prev)
                    if len(rows) < hi - start + 1 or (hi == count - 1 and last != head):
                        raise self._rolled_back(count)
                    return [self._entry(row, costs) for row in rows[: stop - start]]
            finally:
                if temporary:
                    conn.close()

    def _check_same_ledger(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'genesis'").fetchone()
        if row is None or row[0] != self._genesis:
            raise self._fail(
                "holds another ledger than the one these entries were taken from (it was "
                "replaced after the ledger was closed); open it again to read its entries"
            )

    @contextlib.contextmanager
    def _immediate(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed if the block succeeds, else rolled back.

        ``doing`` names what a SQLite error in the block (or the lock) prevented.
        """
        conn = self._connection()
        with self._sqlite(doing, damage=False):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[None]:
        with self._immediate("recording the spend") as conn:
            self._catch_up(conn)
            yield

    def _write(self, entries: list[LedgerEntry]) -> None:
        prev = self._head
        rows = []
        for entry in entries:
            prev = _link(prev, entry.canonical_json())
            rows.append(
                (
                    entry.index,
                    entry.time,
                    entry.label,
                    entry._stored(entry.exact_rho),
                    entry._stored(entry.exact_delta),
                    entry.description_json,
                    int(entry.seeded),
                    prev,
                )
            )
        conn = self._connection()
        if self._version != SCHEMA_VERSION:
            # A schema-1 file gets its first exact entry: a privframe that reads only
            # schema 1 must now refuse it (as an unknown version), not misread it.
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.executemany(
            "INSERT INTO entries(idx, time, label, rho, delta, description, seeded, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.executemany(
            "UPDATE meta SET value = ? WHERE key = ?",
            ((prev, "head"), (str(entries[-1].index + 1), "count")),
        )
        self._pending_head = prev

    def _remember(self, entries: list[LedgerEntry]) -> None:
        self._summary += LedgerSummary.of(entries)
        self._head = self._pending_head
        self._version = SCHEMA_VERSION
        self._record_known()

    # -- this user's record of known ledgers ---------------------------------------

    def _known_record(self) -> _Known | None:
        """This user's record of the ledger at this path, if it is this ledger.

        A record of another ledger at this path means the ledger privframe saw
        here is gone: warn (once; the record then follows this ledger).
        """
        record = _KNOWN.get(self._key)
        if record is None or record.genesis == self._genesis:
            return record
        now = "a new, empty ledger was created here" if self._created else "this is another ledger"
        old = record.summary
        warnings.warn(
            f"ledger file {str(self._path)!r}: privframe last saw a different ledger at this "
            f"path, with {old.count} entries spending rho={float(old.rho):.6g} "
            f"(delta={float(old.delta):.6g}), and it is gone: {now}. A new ledger "
            "starts with the full budget, so the privacy loss recorded in the old one would "
            "be spent again on the same data. If the old ledger was deleted or moved by "
            "mistake, stop, and put it back (or restore it from a backup) at this path; if a "
            "new budget is intended, this warning is given once (see docs/operations.md)",
            LedgerMissingWarning,
            stacklevel=4,
        )
        return None

    def _record_known(self, *, force: bool = False) -> None:
        _KNOWN.put(self._key, _Known(self._genesis, self._head, self._summary), force=force)


# --------------------------------------------------------------------------- known ledgers


def _cost_text(value: object) -> str:
    """The text a stored cost is hashed as: itself, or a schema-1 float's ``float.hex``."""
    if isinstance(value, float):
        return (value + 0.0).hex()
    if isinstance(value, str):
        return value
    raise TypeError(f"a stored cost must be text or a float, got {type(value).__name__}")


def _ledger_path(path: object) -> Path:
    """``path`` as a Path, refusing what cannot name a file (the refusal names the problem)."""
    if not isinstance(path, str | os.PathLike):
        raise InvalidArgumentError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    text = os.fspath(path)
    if not isinstance(text, str):
        raise InvalidArgumentError(
            f"path must be a str path, got a {type(text).__name__} path; decode it with os.fsdecode"
        )
    if not text:
        raise LedgerError("the ledger path is empty; give the path of the ledger file")
    if "\x00" in text:
        raise LedgerError(
            f"ledger path {text!r} contains a NUL character, which no file name can hold; "
            "choose another path"
        )
    return Path(text)


def _state_key(path: Path) -> str:
    """The key of a ledger in the record of known ledgers: its absolute, resolved path.

    A name that is not valid Unicode (undecodable bytes) is keyed by its bytes,
    with each undecodable byte spelled as a backslash escape: SQLite text must be UTF-8.
    """
    try:
        key = str(path.resolve())
    except (OSError, RuntimeError):
        key = os.path.abspath(path)
    try:
        key.encode()
    except UnicodeEncodeError:
        key = os.fsencode(key).decode(errors="backslashreplace")
    return key


STATE_DIR_ENV = "PRIVFRAME_STATE_DIR"
"""The environment variable naming the directory of privframe's per-user state."""


def state_file() -> Path:
    """The file where privframe records, per user, the ledgers it verified.

    For each ledger path: its entry count, last hash and exact totals when
    privframe last opened or charged it, which lets a later open verify only
    the entries added since, and detect a ledger rolled back or gone (see
    :class:`SQLiteLedger` and ``docs/operations.md``). The directory is
    ``$PRIVFRAME_STATE_DIR`` when set, else the platform's per-user state
    directory: ``$XDG_STATE_HOME/privframe`` (default
    ``~/.local/state/privframe``) on Linux and other POSIX systems,
    ``~/Library/Application Support/privframe`` on macOS, and
    ``%LOCALAPPDATA%/privframe`` on Windows.

    Example:
        >>> from privframe.accounting.ledger import state_file
        >>> state_file().name
        'known-ledgers.sqlite'
    """
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        directory = Path(configured)
    elif sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        directory = (Path(local) if local else Path.home() / "AppData" / "Local") / "privframe"
    elif sys.platform == "darwin":
        directory = Path.home() / "Library" / "Application Support" / "privframe"
    else:
        xdg = os.environ.get("XDG_STATE_HOME", "")
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "state"
        directory = base / "privframe"
    return directory / "known-ledgers.sqlite"


@dataclass(frozen=True)
class _Known:
    """What privframe verified of one ledger: its genesis, last hash and summary."""

    genesis: str
    head: str
    summary: LedgerSummary


_KNOWN_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledgers (
    path    TEXT PRIMARY KEY,
    genesis TEXT NOT NULL,
    count   INTEGER NOT NULL,
    head    TEXT NOT NULL,
    summary TEXT NOT NULL,
    seen    TEXT NOT NULL
)
"""


class _KnownLedgers:
    """The per-user record of known ledgers (:func:`state_file`), shared by the process.

    It only adds checks: when it cannot be read or written, ledgers keep
    working as before and one :class:`LedgerStateWarning` says so. A record
    only moves forward (a larger count) unless the path now holds another
    ledger or an operator accepts a restored one, so concurrent writers
    cannot make it older.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: tuple[int, Path, sqlite3.Connection] | None = None
        self._warned: set[Path | None] = set()

    def get(self, key: str) -> _Known | None:
        with self._lock:
            found = self._attempt(
                lambda conn: conn.execute(
                    "SELECT genesis, count, head, summary FROM ledgers WHERE path = ?", (key,)
                ).fetchone()
            )
            if found is None:
                return None
            genesis, count, head, text = found
            try:
                values = json.loads(text)
                summary = LedgerSummary(
                    count,
                    _parse_ratio(values["rho"]),
                    _parse_ratio(values["delta"]),
                    (_parse_ratio(values["excess_rho"]), _parse_ratio(values["excess_delta"])),
                    values["seeded"],
                )
                if not (isinstance(count, int) and isinstance(values["seeded"], int)):
                    raise TypeError("a count is not an integer")
            except (TypeError, ValueError, KeyError) as err:
                self._warn(f"its record of {key!r} is malformed ({err})")
                return None
            return _Known(genesis, head, summary)

    def put(self, key: str, known: _Known, *, force: bool) -> None:
        s = known.summary
        text = _canonical_json(
            {
                "rho": _ratio_text(s.rho),
                "delta": _ratio_text(s.delta),
                "excess_rho": _ratio_text(s.float_excess[0]),
                "excess_delta": _ratio_text(s.float_excess[1]),
                "seeded": s.seeded,
            }
        )
        with self._lock:
            self._attempt(
                lambda conn: conn.execute(
                    "INSERT INTO ledgers(path, genesis, count, head, summary, seen) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET "
                    "genesis = excluded.genesis, count = excluded.count, head = excluded.head, "
                    "summary = excluded.summary, seen = excluded.seen "
                    "WHERE ? OR excluded.genesis != ledgers.genesis "
                    "OR excluded.count >= ledgers.count",
                    (key, known.genesis, s.count, known.head, text, _now(), force),
                )
            )

    def _attempt(self, action: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``action`` on the state file; on failure warn (once) and return None."""
        path: Path | None = None
        try:
            path = state_file()
            return action(self._connection(path))
        except (sqlite3.Error, OSError, RuntimeError, ValueError) as err:
            self._drop()
            self._warn(str(err), path)
            return None

    def _connection(self, path: Path) -> sqlite3.Connection:
        if self._open is not None:
            pid, opened, conn = self._open
            if pid == os.getpid() and opened == path:
                return conn
            self._drop()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
        try:
            # Losing the latest record on a power cut only makes it older: harmless.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_KNOWN_SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._open = (os.getpid(), path, conn)
        return conn

    def _drop(self) -> None:
        if self._open is not None:
            pid, _, conn = self._open
            if pid == os.getpid():  # a connection inherited across fork() is not touched
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._open = None

    def _warn(self, problem: str, path: Path | None = None) -> None:
        where = str(path) if path is not None else "its state directory"
        if path in self._warned:
            return
        self._warned.add(path)
        warnings.warn(
            f"privframe cannot keep its record of known ledgers in {where!r} ({problem}). "
            "Ledgers still work and keep their hash chain, but a ledger rolled back or "
            "gone is not detected, and each open verifies the whole ledger. Make that "
            f"directory writable, or set {STATE_DIR_ENV} to a writable directory "
            "(see docs/operations.md)",
            LedgerStateWarning,
            stacklevel=5,
        )


_KNOWN = _KnownLedgers()


def accept_restored(path: str | os.PathLike[str]) -> LedgerSummary:
    """Accept a ledger file restored from an older copy on purpose, as it is now.

    privframe refuses a ledger with fewer entries than it recorded, or whose
    entries it verified have changed ("rolled back"): spends recorded since
    would go uncounted. An operator who restored an older backup on purpose
    (the newer file was lost) calls this once: the whole file is verified,
    and this user's record of the ledger is reset to it. Its spends after the
    backup are forgotten, although their privacy loss happened: lower the
    budget you enforce by what they spent, if you know it. Other users who
    opened the ledger must accept it too.

    Args:
        path: the ledger file, which must exist.

    Returns:
        The summary of the ledger as accepted.

    Raises:
        LedgerError: the file does not exist, or is not a sound privframe ledger.

    Example:
        >>> import os, tempfile
        >>> from privframe import zCDP
        >>> from privframe.accounting.ledger import SQLiteLedger, accept_restored
        >>> with tempfile.TemporaryDirectory() as d:
        ...     path = os.path.join(d, "spend.ledger")
        ...     with SQLiteLedger(path, zCDP(1.0)) as ledger:
        ...         _ = ledger.append(0.25, label="q1")
        ...     accept_restored(path).count
        1
    """
    checked = _ledger_path(path)
    if not os.path.lexists(checked):
        raise LedgerError(
            f"ledger file {str(checked)!r} does not exist; restore the backup there first"
        )
    with SQLiteLedger(checked, zCDP(0), _restored=True) as ledger:
        return ledger.summary()
