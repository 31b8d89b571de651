"""The database ledgers' tables, names and stored amounts, shared by the ledgers and their manager.

The SQL schema of the ledger tables, the checks of ledger ids, pool names and
budgets, how exact amounts are read back (a malformed one means a damaged
database), and the pool lock every append and budget change takes.

Example:
    >>> from privframe.accounting.ledger._database_rows import stored_zcdp
    >>> stored_zcdp(("1/10", "0/1"), "ledger 'a'")
    zCDP(rho=0.1, delta=0.0)
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from typing import Any

from privframe.accounting.budgets import zCDP
from privframe.accounting.ledger._format import canonical_json, parse_ratio
from privframe.accounting.ledger._sql import Transaction
from privframe.errors import InvalidArgumentError, LedgerError

__all__ = [
    "LEDGERS_SCHEMA_VERSION",
    "TABLES",
    "ZERO",
    "checked_name",
    "checked_zcdp",
    "damaged",
    "database_genesis",
    "exceeds",
    "lock_pool",
    "missing_ledger",
    "stored_ratio",
    "stored_zcdp",
]

LEDGERS_SCHEMA_VERSION = 1
"""The version of the ledger tables (``pf_schema`` row ``ledgers``) this module writes."""

TABLES = (
    """CREATE TABLE pf_pools (
        name        TEXT PRIMARY KEY,
        cap_rho     TEXT,
        cap_delta   TEXT,
        entries     BIGINT NOT NULL,
        spent_rho   TEXT NOT NULL,
        spent_delta TEXT NOT NULL
    )""",
    """CREATE TABLE pf_ledgers (
        id           TEXT PRIMARY KEY,
        pool         TEXT NOT NULL REFERENCES pf_pools(name),
        created      TEXT NOT NULL,
        genesis      TEXT NOT NULL,
        budget_rho   TEXT NOT NULL,
        budget_delta TEXT NOT NULL,
        entries      BIGINT NOT NULL,
        spent_rho    TEXT NOT NULL,
        spent_delta  TEXT NOT NULL,
        seeded       BIGINT NOT NULL,
        head         TEXT NOT NULL
    )""",
    "CREATE INDEX pf_ledgers_pool ON pf_ledgers(pool)",
    """CREATE TABLE pf_entries (
        ledger      TEXT NOT NULL REFERENCES pf_ledgers(id),
        idx         BIGINT NOT NULL,
        recorded    TEXT NOT NULL,
        label       TEXT NOT NULL,
        rho         TEXT NOT NULL,
        delta       TEXT NOT NULL,
        description TEXT NOT NULL,
        seeded      INTEGER NOT NULL,
        hash        TEXT NOT NULL,
        PRIMARY KEY (ledger, idx)
    )""",
)

ZERO = "0/1"


def checked_name(value: object, what: str) -> str:
    """A ledger id or pool name: non-empty text, at most 200 characters, no NUL."""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a str, got {type(value).__name__}")
    if not 0 < len(value) <= 200 or "\x00" in value or not value.isprintable():
        raise InvalidArgumentError(
            f"{what} must be 1 to 200 printable characters, got {value[:40]!r}"
        )
    return value


def checked_zcdp(value: object, what: str) -> zCDP:
    """``value`` if it is a zCDP budget: a database's ledgers account in zCDP only."""
    if not isinstance(value, zCDP):
        hint = ""
        if type(value).__name__ in ("ApproxDP", "GDP"):
            hint = (
                f"; a server's database ledgers account in zCDP only: give "
                f"{type(value).__name__}(...).to_zcdp(), the zCDP budget it allows"
            )
        raise InvalidArgumentError(f"{what} must be a zCDP, got {type(value).__name__}{hint}")
    return value


def database_genesis(ledger_id: str, pool: str, created: str) -> str:
    """Root of a database ledger's hash chain: binds its entries to its id, pool and creation."""
    payload = canonical_json({"created": created, "ledger": ledger_id, "pool": pool})
    return hashlib.sha256(b"privframe-database-ledger\x00" + payload.encode()).hexdigest()


def exceeds(spent: tuple[Fraction, Fraction], cost: zCDP, limit: zCDP) -> bool:
    """Whether ``cost`` on top of ``spent`` exceeds ``limit``, in ρ or in δ (exactly)."""
    return (
        spent[0] + cost.exact_rho > limit.exact_rho
        or spent[1] + cost.exact_delta > limit.exact_delta
    )


def missing_ledger(ledger_id: str) -> LedgerError:
    return LedgerError(f"there is no ledger {ledger_id!r} in the server database")


def damaged(where: str, what: str) -> LedgerError:
    return LedgerError(
        f"{where} in the server database: {what}. The database is damaged or was modified "
        "outside privframe; it was not used. Restore it from a backup (docs/server.md)"
    )


def stored_ratio(text: object, where: str) -> Fraction:
    problem = ""
    try:
        if not isinstance(text, str):
            raise ValueError(f"{type(text).__name__} where a ratio belongs")
        return parse_ratio(text)
    except ValueError as err:
        problem = str(err)
    raise damaged(where, f"a stored amount is malformed ({problem})")


def stored_zcdp(row: tuple[Any, ...], where: str) -> zCDP:
    rho, delta = stored_ratio(row[0], where), stored_ratio(row[1], where)
    if delta >= 1:
        raise damaged(where, "a stored delta is not below 1")
    return zCDP(rho, delta)


def lock_pool(tx: Transaction, pool: str) -> tuple[Any, ...]:
    """Lock ``pool``'s row for the transaction (SQLite's write transaction holds it already)."""
    lock = " FOR UPDATE" if tx.postgres else ""
    row = tx.one(
        f"SELECT cap_rho, cap_delta, spent_rho, spent_delta, entries FROM pf_pools "
        f"WHERE name = ?{lock}",
        (pool,),
    )
    if row is None:
        raise damaged(f"pool {pool!r}", "its row is missing")
    return row
