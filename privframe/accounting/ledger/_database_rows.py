"""The database ledgers' tables, names and stored amounts, shared by the ledgers and their manager.

The SQL schema of the ledger tables (and how tables of an older version are
migrated), the checks of ledger ids, pool names and budgets, how exact
amounts and kinds are read back (a malformed one means a damaged database),
which kinds of ledger a pool's cap admits, and the pool lock every append and
budget change takes.

A ledger keeps one kind of budget, like a ledger file (:mod:`privframe.accounting._kinds`):
zCDP, whose amounts are (ρ, δ), PureDP, (ε, 0), or ApproxDP, (ε, δ), in the
same two exact columns; its row names the kind (``kind``), and its hash
chain's root covers it. A pool's cap has a kind too (``cap_kind``).

Example:
    >>> import privframe as pf
    >>> from privframe.accounting.ledger._database_rows import stored_amount
    >>> stored_amount(pf.zCDP, ("1/10", "0/1"), "ledger 'a'")
    zCDP(rho=0.1, delta=0.0)
    >>> stored_amount(pf.PureDP, ("1/2", "0/1"), "ledger 'b'")
    PureDP(epsilon=0.5)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

from privframe.accounting._kinds import (
    KINDS,
    Kind,
    Spendable,
    columns,
    from_columns,
    kind_of,
    model_name,
    with_article,
)
from privframe.accounting.budgets import ApproxDP, to_zcdp, zCDP
from privframe.accounting.ledger._format import canonical_json, parse_ratio
from privframe.accounting.ledger._sql import Transaction
from privframe.errors import InvalidArgumentError, InvalidBudgetError, LedgerError

__all__ = [
    "LEDGERS_SCHEMA_VERSION",
    "MIGRATIONS",
    "TABLES",
    "ZERO",
    "Columns",
    "admits",
    "cap_limit",
    "checked_budget",
    "checked_name",
    "damaged",
    "database_genesis",
    "exceeds",
    "kinds_text",
    "lock_pool",
    "missing_ledger",
    "mixed_cap",
    "pool_kinds",
    "stored_amount",
    "stored_cap",
    "stored_kind",
    "stored_ratio",
]

LEDGERS_SCHEMA_VERSION = 2
"""The version of the ledger tables (``pf_schema`` row ``ledgers``) this module writes.

Version 2 adds each ledger's kind (``pf_ledgers.kind``) and its cap's
(``pf_pools.cap_kind``); version 1 had zCDP ledgers and caps only, which is
what :data:`MIGRATIONS` records them as.
"""

TABLES = (
    """CREATE TABLE pf_pools (
        name        TEXT PRIMARY KEY,
        cap_rho     TEXT,
        cap_delta   TEXT,
        entries     BIGINT NOT NULL,
        spent_rho   TEXT NOT NULL,
        spent_delta TEXT NOT NULL,
        cap_kind    TEXT
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
        head         TEXT NOT NULL,
        kind         TEXT NOT NULL DEFAULT 'zcdp'
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
"""The ``CREATE`` statements of a new database's ledger tables. The amount columns are named
``rho`` and ``delta`` for every kind (ε in the first for PureDP and ApproxDP), as in a file."""

MIGRATIONS = {
    1: (
        # Every ledger and cap of version 1 is zCDP; a zCDP ledger's hash chain root is
        # unchanged (its kind is covered only when it is not zCDP).
        "ALTER TABLE pf_ledgers ADD COLUMN kind TEXT NOT NULL DEFAULT 'zcdp'",
        "ALTER TABLE pf_pools ADD COLUMN cap_kind TEXT",
        "UPDATE pf_pools SET cap_kind = 'zcdp' WHERE cap_rho IS NOT NULL",
    ),
}
"""The statements that take the ledger tables of version ``v`` to ``v + 1``, by ``v``."""

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


def checked_budget(value: object, what: str) -> Spendable:
    """``value`` if it is a budget a database ledger keeps: a zCDP, PureDP or ApproxDP."""
    if type(value) not in KINDS:
        hint = ""
        if type(value).__name__ == "GDP":
            hint = "; give GDP(...).to_zcdp(), the zCDP budget it allows"
        raise InvalidArgumentError(
            f"{what} must be a zCDP, PureDP or ApproxDP budget, got {type(value).__name__}{hint}"
        )
    return value  # type: ignore[return-value]  # one of KINDS, checked above


def database_genesis(ledger_id: str, pool: str, created: str, kind: Kind = zCDP) -> str:
    """Root of a database ledger's hash chain: binds its entries to its id, pool, creation, kind.

    The kind is covered when it is not zCDP, so a zCDP ledger's root is what it
    was before there were other kinds (as a ledger file's ``model``).

    Example:
        >>> import privframe as pf
        >>> a = database_genesis("alice/sales", "sales", "2024-01-01T00:00:00+00:00")
        >>> a == database_genesis("alice/sales", "sales", "2024-01-01T00:00:00+00:00", pf.PureDP)
        False
    """
    root = {"created": created, "ledger": ledger_id, "pool": pool}
    if kind is not zCDP:
        root["kind"] = model_name(kind)
    payload = canonical_json(root)
    return hashlib.sha256(b"privframe-database-ledger\x00" + payload.encode()).hexdigest()


Columns = tuple[Fraction, Fraction]
"""A ledger's two exact amount columns: (ρ, δ), or (ε, δ) for PureDP and ApproxDP."""


def exceeds(spent: Columns, cost: Columns, limit: Columns) -> bool:
    """Whether ``cost`` on top of ``spent`` exceeds ``limit`` in either column (exactly).

    Example:
        >>> from fractions import Fraction as F
        >>> exceeds((F(1, 2), F(0)), (F(1, 2), F(0)), (F(1), F(0)))
        False
    """
    return spent[0] + cost[0] > limit[0] or spent[1] + cost[1] > limit[1]


def admits(cap_kind: Kind, kind: Kind) -> bool:
    """Whether a pool capped in ``cap_kind`` may hold ledgers of ``kind``.

    A cap bounds ledgers of its own kind; an ApproxDP cap also bounds zCDP
    ledgers, by the zCDP allowance it converts to (as a zCDP session spends an
    (ε, δ) budget). A capped pool holds ledgers of one kind only: the cap is
    checked against the sum of its ledgers' amounts, which must be in one unit.

    Example:
        >>> import privframe as pf
        >>> admits(pf.ApproxDP, pf.zCDP), admits(pf.PureDP, pf.zCDP)
        (True, False)
    """
    return cap_kind is kind or (cap_kind is ApproxDP and kind is zCDP)


def cap_limit(cap: Spendable, kind: Kind) -> Columns | None:
    """The two columns the total of a pool's ``kind`` ledgers may reach under ``cap``, or None.

    ``cap`` itself for ledgers of its kind; for zCDP ledgers under an ApproxDP
    cap, the zCDP allowance it converts to (:func:`privframe.accounting.to_zcdp`);
    None when the cap does not bound that kind (:func:`admits`).

    Example:
        >>> import privframe as pf
        >>> cap_limit(pf.PureDP(2), pf.PureDP)
        (Fraction(2, 1), Fraction(0, 1))
        >>> cap_limit(pf.ApproxDP(1, 1e-6), pf.zCDP) == columns(pf.ApproxDP(1, 1e-6).to_zcdp())
        True
    """
    if not admits(type(cap), kind):
        return None
    if kind is zCDP and isinstance(cap, ApproxDP):
        return columns(to_zcdp(cap))
    return columns(cap)


def missing_ledger(ledger_id: str) -> LedgerError:
    return LedgerError(f"there is no ledger {ledger_id!r} in the server database")


def damaged(where: str, what: str) -> LedgerError:
    return LedgerError(
        f"{where} in the server database: {what}. The database is damaged or was modified "
        "outside privframe; it was not used. Restore it from a backup (docs/server.md)"
    )


T = TypeVar("T")


def _parsed(text: object, parse: Callable[[str], T], holds: str, names: str, where: str) -> T:
    """``parse(text)`` of a stored text that ``holds`` a value; malformed: a damaged database."""
    problem = ""
    try:
        if not isinstance(text, str):
            raise ValueError(f"{type(text).__name__} where a {holds} belongs")
        return parse(text)
    except ValueError as err:
        problem = str(err)
    raise damaged(where, f"a stored {names} is malformed ({problem})")


def stored_ratio(text: object, where: str) -> Fraction:
    return _parsed(text, parse_ratio, "ratio", "amount", where)


def stored_kind(text: object, where: str) -> Kind:
    """The kind a stored name (``pf_ledgers.kind``, ``pf_pools.cap_kind``) stands for."""
    return _parsed(text, kind_of, "kind", "kind", where)


def stored_amount(kind: Kind, row: tuple[Any, ...], where: str) -> Spendable:
    """The budget of ``kind`` two stored columns hold (a malformed one: a damaged database)."""
    first, second = stored_ratio(row[0], where), stored_ratio(row[1], where)
    problem = "a stored delta is not below 1" if second >= 1 else ""
    if not problem:
        try:
            return from_columns(kind, first, second)
        except InvalidBudgetError as err:
            problem = f"a stored amount does not fit its kind ({err})"
    raise damaged(where, problem)


def lock_pool(tx: Transaction, pool: str) -> tuple[Any, ...]:
    """Lock ``pool``'s row for the transaction (SQLite's write transaction holds it already).

    Returns the row: cap_rho, cap_delta, spent_rho, spent_delta, entries, cap_kind.
    """
    lock = " FOR UPDATE" if tx.postgres else ""
    row = tx.one(
        f"SELECT cap_rho, cap_delta, spent_rho, spent_delta, entries, cap_kind FROM pf_pools "
        f"WHERE name = ?{lock}",
        (pool,),
    )
    if row is None:
        raise damaged(f"pool {pool!r}", "its row is missing")
    return row


def stored_cap(row: tuple[Any, ...], pool: str) -> Spendable | None:
    """The cap a pool's locked row (:func:`lock_pool`) holds, of its kind; None without one."""
    if row[0] is None:
        return None
    where = f"pool {pool!r}"
    return stored_amount(stored_kind(row[5], where), row[:2], where)


def pool_kinds(tx: Transaction, pool: str) -> list[Kind]:
    """The kinds of the ledgers ``pool`` holds, each once, in the order of :data:`KINDS`."""
    where = f"pool {pool!r}"
    rows = tx.run("SELECT DISTINCT kind FROM pf_ledgers WHERE pool = ?", (pool,))
    found = {stored_kind(row[0], where) for row in rows}
    return [kind for kind in KINDS if kind in found]


def kinds_text(kinds: list[Kind]) -> str:
    """Kinds for a message: "zCDP", "zCDP and PureDP"."""
    return " and ".join(kind.__name__ for kind in kinds)


def mixed_cap(cap: Spendable, kinds: list[Kind], pool: str) -> str | None:
    """Why ``cap`` cannot bound ``pool`` holding ledgers of ``kinds``; None if it can."""
    name = type(cap).__name__
    if len(kinds) > 1:
        return (
            f"pool {pool!r} holds ledgers of several kinds ({kinds_text(kinds)}), whose amounts "
            "cannot be added up against one cap; a capped pool holds ledgers of one kind"
        )
    if kinds and not admits(type(cap), kinds[0]):
        return (
            f"pool {pool!r} holds {kinds[0].__name__} ledgers, which {with_article(name)} cap "
            "cannot bound: a cap bounds ledgers of its own kind (and an ApproxDP cap zCDP "
            "ledgers, by the zCDP budget it allows)"
        )
    return None
