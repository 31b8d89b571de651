"""The ledger file format: its constants, exact cost text and the hash chain's text.

Everything a ledger stores or hashes is spelled here, once: the SQLite
schema and markers, costs as exact ``"numerator/denominator"`` text (or a
schema-1 float's ``float.hex``), the canonical JSON an entry is hashed as,
the chain's links and its genesis. What the format guarantees is in
:mod:`privframe.accounting.ledger` and ``docs/operations.md``.

Example:
    >>> from fractions import Fraction
    >>> from privframe.accounting.ledger._format import parse_ratio, ratio_text
    >>> ratio_text(Fraction(1, 10)), parse_ratio("1/10")
    ('1/10', Fraction(1, 10))
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from fractions import Fraction
from json.encoder import encode_basestring
from typing import Any

from privframe.accounting._kinds import Spendable, from_columns, kind_of
from privframe.accounting.budgets import zCDP

__all__ = [
    "APPLICATION_ID",
    "FORMAT",
    "READABLE",
    "SCHEMA",
    "SCHEMA_NAMES",
    "SCHEMA_VERSION",
    "SQLITE_HEADER",
    "canonical_json",
    "chain_link",
    "charge_value",
    "cost_text",
    "entry_json",
    "float_excess",
    "genesis_hash",
    "now",
    "parse_ratio",
    "ratio_text",
    "stored_budget",
]

APPLICATION_ID = 0x50464C47
"""``PRAGMA application_id`` of a privframe ledger file (ASCII ``PFLG``)."""

SCHEMA_VERSION = 2
"""``PRAGMA user_version`` of the ledger schema this module writes (it also reads 1).

Schema 2 stores costs and the budget as exact ``"numerator/denominator"``
text; schema 1 stored them as floats.
"""

FORMAT = "privframe-ledger"
SQLITE_HEADER = b"SQLite format 3\x00"

READABLE = (1, SCHEMA_VERSION)
"""The ``user_version`` values this module opens."""

SCHEMA_NAMES = ("1", str(SCHEMA_VERSION))
"""``meta.schema``: the version a file was created with (its genesis hash covers it)."""

SCHEMA = """
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
# by their storage class (charge_value).


def canonical_json(value: Any) -> str:
    """Deterministic JSON text: sorted keys, no whitespace, no NaN/inf."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)  # fmt: skip


_RATIO = re.compile(r"(0|[1-9][0-9]*)/([1-9][0-9]*)")
_FLOAT_HEX = re.compile(r"0x[01]\.[0-9a-f]+p[+-][0-9]+")


def ratio_text(x: Fraction) -> str:
    """The exact text of a rational as stored and hashed: ``"numerator/denominator"``."""
    return f"{x.numerator}/{x.denominator}"


def parse_ratio(text: str) -> Fraction:
    """Inverse of :func:`ratio_text`, refusing any other spelling (it is hashed)."""
    match = _RATIO.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a 'numerator/denominator' ratio")
    value = Fraction(int(match[1]), int(match[2]))
    if ratio_text(value) != text:
        raise ValueError(f"{text!r} is not in lowest terms")
    return value


def charge_value(value: object) -> tuple[Fraction, bool]:
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
            return parse_ratio(value), False
        number = float.fromhex(value)
        if number.hex() != value:
            raise ValueError(f"{value!r} is not the canonical hex of a float")
        return Fraction(number), True
    raise TypeError(f"a stored cost must be text or a float, got {type(value).__name__}")


def cost_text(value: object) -> str:
    """The text a stored cost is hashed as: itself, or a schema-1 float's ``float.hex``."""
    if isinstance(value, float):
        return (value + 0.0).hex()
    if isinstance(value, str):
        return value
    raise TypeError(f"a stored cost must be text or a float, got {type(value).__name__}")


def now() -> str:
    """The current UTC time as an entry records it (ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def entry_json(
    index: int, time: str, label: str, rho: str, delta: str, description: str, seeded: bool
) -> str:
    """The canonical JSON text an entry is hashed as, from its stored fields.

    The same text as ``canonical_json`` of the entry's dict (sorted keys, no
    whitespace, strings escaped as ``json.dumps(ensure_ascii=False)`` does),
    built directly: a ledger is verified entry by entry, and this is its hot loop.
    """
    q = encode_basestring
    return (
        f'{{"delta":{q(delta)},"description":{q(description)},"index":{int(index)},'
        f'"label":{q(label)},"rho":{q(rho)},"seeded":{"true" if seeded else "false"},'
        f'"time":{q(time)}}}'
    )


def chain_link(prev_hash: str, text: str) -> str:
    """Next link of the hash chain: SHA-256(prev_hash || canonical entry JSON), in hex."""
    return hashlib.sha256(bytes.fromhex(prev_hash) + text.encode()).hexdigest()


def float_excess(rho: Fraction, delta: Fraction) -> tuple[Fraction, Fraction]:
    """How far a schema-1 cost's exact binary floats exceed the decimals they print as."""
    return (
        max(rho - Fraction(repr(float(rho))), Fraction(0)),
        max(delta - Fraction(repr(float(delta))), Fraction(0)),
    )


def genesis_hash(meta: Mapping[str, str]) -> str:
    """Root of the hash chain: binds the chain to the ledger's identity, budget and kind.

    The kind (``model``) is covered when it is not zCDP: a zCDP ledger has no
    ``model`` key (every ledger before the other kinds existed), and its root
    is what it always was.
    """
    keys = ("format", "schema", "ledger_id", "created", "budget_rho", "budget_delta")
    root = {k: meta[k] for k in keys}
    if "model" in meta:
        root["model"] = meta["model"]
    payload = canonical_json(root)
    return hashlib.sha256(b"privframe-ledger\x00" + payload.encode()).hexdigest()


def stored_budget(meta: Mapping[str, str]) -> Spendable:
    """The budget a file was created with, exactly, of the kind its ``model`` names.

    Schema 2 writes ``"n/d"``. Schema 1 wrote ``repr(float)``: the decimal the
    user typed for a budget they gave (``0.3``), or the shortest repr of a
    computed float (a converted budget). Either may be meant, and that file
    enforced the float, so it is read as the larger of the decimal and the
    float: reopening it with either exact value is not a "larger" budget.
    A file of another kind than zCDP is always of schema 2 or later, and
    records ``model``; a ``model`` of ``"zcdp"`` is refused (zCDP files have none).

    Raises:
        ValueError: a malformed budget or model.
    """
    if meta["schema"] != "1":
        model = meta.get("model")
        if model == "zcdp":
            raise ValueError("a zCDP ledger records no model")
        kind = zCDP if model is None else kind_of(model)
        return from_columns(
            kind, parse_ratio(meta["budget_rho"]), parse_ratio(meta["budget_delta"])
        )
    if "model" in meta:
        raise ValueError("a schema-1 ledger records no model")
    parts = []
    for key in ("budget_rho", "budget_delta"):
        text = meta[key]
        number = float(text)
        if not math.isfinite(number) or repr(number) != text:
            raise ValueError(f"{key} is not the repr of a float")
        parts.append(max(Fraction(text), Fraction(number)))
    return zCDP(*parts)
