"""Many ledgers in one database, grouped in pools that may share a cap: the server's budgets.

:class:`DatabaseLedgers` keeps every ledger of a server in one SQLite file or
PostgreSQL database (:class:`~privframe.accounting.ledger.Database`): one row
per entry, keyed by (ledger, index) and hash-chained as a ledger file's
entries are, one row per ledger with its kind, budget and exact running
totals, and one row per pool (a dataset) with its optional cap across all its
ledgers and the exact total they spent. :class:`DatabaseLedger` is one of
those ledgers as a :class:`~privframe.accounting.ledger.Ledger`, for an
:class:`~privframe.accounting.accountant.Accountant`.

A ledger keeps one kind of budget, as a ledger file does: zCDP (its costs
are (ρ, δ)), PureDP (ε) or ApproxDP ((ε, δ)); its row records the kind and
its hash chain's root covers it, and its budget can change (a top-up, a new
budget) only to another budget of that kind.

An append is one database transaction that

1. locks the pool (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: ``SELECT ... FOR
   UPDATE`` on the pool's row), so appends to the ledgers of one pool are
   serialised across threads, processes and servers sharing the database;
2. reads the ledger's and the pool's exact totals from their rows (an append
   costs the same however many entries exist) and checks that the ledger's
   last entry is the head its row records;
3. runs the caller's check (the accountant's budget) on the ledger's totals;
4. refuses with :class:`~privframe.errors.BudgetExceededError`, recording
   nothing, if the ledger's budget *in the database* or the pool's cap would
   be exceeded: the database is authoritative, since an administrator may
   change a budget while a server runs. A zCDP or PureDP ledger's spends add
   up against its budget; an ApproxDP ledger is charged the tight
   composition of its entries, as its accountant charges it
   (:mod:`privframe.accounting.accountant`: the same entries fold to the
   same total), so the database refuses exactly what the accountant would
   under the budget the database holds. A cap is checked against what the
   pool's ledgers' spends add up to (basic composition: conservative, and
   sound across analysts whatever each ledger is charged);
5. inserts the entries, updates both totals, and commits (durably: SQLite's
   rollback journal with ``synchronous=FULL``, PostgreSQL's
   ``synchronous_commit``) before the append returns.

A crash at any point leaves either the whole append or none of it.

A capped pool holds ledgers of one kind, which its cap bounds: a cap of
their kind, or for zCDP ledgers an ApproxDP cap, which bounds them by the
zCDP budget it allows (:func:`privframe.accounting.to_zcdp`). A pool without
a cap may hold ledgers of any kinds.

Example:
    >>> import os, tempfile
    >>> import privframe as pf
    >>> from privframe.accounting.ledger import DatabaseLedgers
    >>> with tempfile.TemporaryDirectory() as d:
    ...     ledgers = DatabaseLedgers(os.path.join(d, "server.db"))
    ...     ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
    ...     with ledgers.open("alice/sales") as ledger:
    ...         print(ledger.append(0.25, label="q1").index, ledger.totals()[0])
    ...     print(ledgers.pool_spent("sales"))
    ...     ledgers.create("bob/visits", "visits", pf.PureDP(2.0))
    ...     with ledgers.open("bob/visits") as ledger:
    ...         print(ledger.kind.__name__, ledger.append(0.5, label="q2").cost)
    ...     ledgers.close()
    0 1/4
    zCDP(rho=0.25, delta=0.0)
    PureDP PureDP(epsilon=0.5)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from privframe.accounting._composition import Composition, recorded_events
from privframe.accounting._kinds import (
    Kind,
    Spendable,
    check_kind,
    columns,
    from_columns,
    model_name,
    parameters,
    with_article,
)
from privframe.accounting._report import figure, refusal
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.accounting.ledger._database_rows import (
    LEDGERS_SCHEMA_VERSION,
    MIGRATIONS,
    TABLES,
    ZERO,
    Columns,
    admits,
    cap_limit,
    checked_budget,
    checked_name,
    damaged,
    database_genesis,
    exceeds,
    kinds_text,
    lock_pool,
    missing_ledger,
    mixed_cap,
    pool_kinds,
    stored_amount,
    stored_cap,
    stored_kind,
    stored_ratio,
)
from privframe.accounting.ledger._entry import (
    LedgerEntry,
    LedgerSummary,
    entry_from_file,
    exact_cost,
    stored_costs,
)
from privframe.accounting.ledger._format import (
    chain_link,
    entry_json,
    now,
    parse_ratio,
    ratio_text,
)
from privframe.accounting.ledger._memory import Ledger
from privframe.accounting.ledger._sql import Database, Transaction
from privframe.accounting.ledger._sqlite import DEFAULT_TIMEOUT
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    LedgerError,
)

__all__ = ["LEDGERS_SCHEMA_VERSION", "DatabaseLedger", "DatabaseLedgers"]

_PAGE = 512
"""Entries read per query when a ledger is verified."""


class DatabaseLedgers:
    """The ledgers of a server in one database: create them, set budgets and caps, open them.

    Each ledger has an id (the server uses ``"<analyst>/<dataset>"``), a
    kind and a budget of that kind stored exactly in the database, and a pool
    (the dataset); a pool may have a cap that the total of all its ledgers
    may not exceed (see the module doc for which kinds a cap bounds). Budgets
    and caps may be changed at any time, also while ledgers are open: every
    append checks the values in the database (see the module doc). Changes
    lock the pool as appends do, so each is ordered with every append.

    A database whose ledger tables were written by an older privframe
    (schema version 1, zCDP only) is migrated when it is opened: its ledgers
    and caps are zCDP ones.

    Args:
        url: a SQLite file path (created if absent) or a ``postgresql://``
            URL (the ``[postgres]`` extra); see :class:`Database`.
        timeout: keyword only; seconds to wait for a lock (default 30).

    Raises:
        LedgerError: the database cannot be opened, or holds ledger tables of
            an unknown schema version.

    Example:
        >>> import os, tempfile
        >>> import privframe as pf
        >>> from privframe.accounting.ledger import DatabaseLedgers
        >>> with tempfile.TemporaryDirectory() as d:
        ...     ledgers = DatabaseLedgers(os.path.join(d, "server.db"))
        ...     ledgers.create("bob/sales", "sales", pf.zCDP(0.5))
        ...     print(ledgers.top_up("bob/sales", pf.zCDP(0.25)), ledgers.ledgers())
        ...     ledgers.set_cap("sales", pf.zCDP(2.0))
        ...     print(ledgers.cap("sales"), ledgers.spent("bob/sales"))
        ...     try:
        ...         ledgers.top_up("bob/sales", pf.PureDP(1.0))
        ...     except pf.InvalidBudgetError as err:
        ...         print(str(err)[:53])
        ...     ledgers.close()
        zCDP(rho=0.75, delta=0.0) {'bob/sales': 'sales'}
        zCDP(rho=2.0, delta=0.0) zCDP(rho=0.0, delta=0.0)
        ledger 'bob/sales' keeps a zCDP budget (zCDP(rho=0.75
    """

    def __init__(self, url: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.database = Database(url, timeout=timeout)
        try:
            self.database.ensure_schema("ledgers", LEDGERS_SCHEMA_VERSION, TABLES, MIGRATIONS)
        except BaseException:
            self.database.close()
            raise

    def __repr__(self) -> str:
        return f"DatabaseLedgers({self.database!r})"

    def __enter__(self) -> DatabaseLedgers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database's connections; ledgers opened from it stop working."""
        self.database.close()

    # -- ledgers and budgets --------------------------------------------------------------

    def create(self, ledger_id: str, pool: str, budget: Spendable) -> None:
        """Create an empty ledger in ``pool`` (created if new, without a cap) with ``budget``.

        The ledger keeps the kind of ``budget`` (zCDP, PureDP or ApproxDP).

        Raises:
            LedgerError: a ledger ``ledger_id`` exists already.
            InvalidValueError: the pool has a cap that does not bound a ledger
                of this kind, or holds ledgers of another kind (a capped
                pool's ledgers are all of one kind).
        """
        checked_name(ledger_id, "ledger_id")
        checked_name(pool, "pool")
        kind = type(checked_budget(budget, "budget"))
        first, second = columns(budget)
        created = now()
        with self.database.transaction(f"creating ledger {ledger_id!r}", write=True) as tx:
            if tx.one("SELECT 1 FROM pf_ledgers WHERE id = ?", (ledger_id,)) is not None:
                raise LedgerError(f"ledger {ledger_id!r} exists already in the server database")
            tx.run(
                "INSERT INTO pf_pools(name, cap_rho, cap_delta, entries, spent_rho, spent_delta, "
                "cap_kind) VALUES (?, NULL, NULL, 0, ?, ?, NULL) ON CONFLICT (name) DO NOTHING",
                (pool, ZERO, ZERO),
            )
            cap = stored_cap(lock_pool(tx, pool), pool)
            if cap is not None:
                others = [k for k in pool_kinds(tx, pool) if k is not kind]
                if not admits(type(cap), kind) or others:
                    reason = (
                        f"its ledgers are {kinds_text(others)}, and a capped pool's ledgers are "
                        "all of one kind"
                        if admits(type(cap), kind)
                        else "a cap bounds ledgers of its own kind (and an ApproxDP cap zCDP "
                        "ledgers, by the zCDP budget it allows)"
                    )
                    raise InvalidValueError(
                        f"{with_article(kind.__name__)} ledger {ledger_id!r} cannot join pool "
                        f"{pool!r}, which has the cap {cap!r}: {reason}. Give a budget of the "
                        "kind its cap bounds, or remove the cap"
                    )
            genesis = database_genesis(ledger_id, pool, created, kind)
            tx.run(
                "INSERT INTO pf_ledgers(id, pool, created, genesis, budget_rho, budget_delta, "
                "entries, spent_rho, spent_delta, seeded, head, kind) "
                "VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, 0, ?, ?)",
                (ledger_id, pool, created, genesis, ratio_text(first), ratio_text(second), ZERO,
                 ZERO, genesis, model_name(kind)),
            )  # fmt: skip

    def ledgers(self, prefix: str = "") -> dict[str, str]:
        """The ledgers whose id starts with ``prefix``, each with its pool, sorted by id."""
        if not isinstance(prefix, str):
            raise InvalidArgumentError(f"prefix must be a str, got {type(prefix).__name__}")
        with self.database.transaction("listing the ledgers", write=False) as tx:
            rows = tx.run(
                "SELECT id, pool FROM pf_ledgers WHERE substr(id, 1, ?) = ? ORDER BY id",
                (len(prefix), prefix),
            )
        return dict(rows)

    def budget(self, ledger_id: str) -> Spendable | None:
        """The budget of ledger ``ledger_id`` in the database (of its kind), or None if none."""
        checked_name(ledger_id, "ledger_id")
        with self.database.transaction("reading a budget", write=False) as tx:
            row = tx.one(
                "SELECT budget_rho, budget_delta, kind FROM pf_ledgers WHERE id = ?", (ledger_id,)
            )
        return None if row is None else _stored(row, f"ledger {ledger_id!r}")

    def spent(self, ledger_id: str) -> Spendable:
        """The exact sum of the spends ledger ``ledger_id`` has recorded, of its kind.

        For an ApproxDP ledger this is what basic composition charges (an
        accountant charges their tight composition, which is never more).

        Raises:
            LedgerError: there is no such ledger.
        """
        checked_name(ledger_id, "ledger_id")
        with self.database.transaction("reading a ledger's total", write=False) as tx:
            row = tx.one(
                "SELECT spent_rho, spent_delta, kind FROM pf_ledgers WHERE id = ?", (ledger_id,)
            )
        if row is None:
            raise missing_ledger(ledger_id)
        return _stored(row, f"ledger {ledger_id!r}")

    def set_budget(self, ledger_id: str, budget: Spendable) -> None:
        """Set the budget of ledger ``ledger_id`` (smaller than its spent total: nothing more fits).

        Raises:
            LedgerError: there is no such ledger.
            InvalidBudgetError: ``budget`` is of another kind than the ledger's.
        """
        checked_budget(budget, "budget")
        self._change_budget(ledger_id, budget, "the new budget", lambda _: budget)

    def top_up(self, ledger_id: str, extra: Spendable) -> Spendable:
        """Add ``extra`` to the budget of ledger ``ledger_id`` (atomically); the new budget.

        Raises:
            LedgerError: there is no such ledger.
            InvalidBudgetError: ``extra`` is of another kind than the ledger's,
                or the new δ would reach 1.
        """
        checked_budget(extra, "extra")
        return self._change_budget(ledger_id, extra, "a top-up of", lambda old: old + extra)

    def _change_budget(self, ledger_id: str, given: Spendable, what: str, change: Any) -> Spendable:
        checked_name(ledger_id, "ledger_id")
        where = f"ledger {ledger_id!r}"
        with self.database.transaction(f"changing the budget of {ledger_id!r}", write=True) as tx:
            row = tx.one("SELECT pool FROM pf_ledgers WHERE id = ?", (ledger_id,))
            if row is None:
                raise missing_ledger(ledger_id)
            lock_pool(tx, row[0])
            old = tx.one(
                "SELECT budget_rho, budget_delta, kind FROM pf_ledgers WHERE id = ?", (ledger_id,)
            )
            assert old is not None
            current = _stored(old, where)
            kind = type(current)
            if type(given) is not kind:
                raise InvalidBudgetError(
                    f"{where} keeps {with_article(kind.__name__)} budget ({current!r}): a "
                    f"ledger keeps the kind of budget it was created with, so {what} "
                    f"{given!r} is refused. Give {with_article(kind.__name__)} budget "
                    f"({parameters(kind)}), or create another ledger for the other kind"
                )
            budget: Spendable = change(current)
            first, second = columns(budget)
            tx.run(
                "UPDATE pf_ledgers SET budget_rho = ?, budget_delta = ? WHERE id = ?",
                (ratio_text(first), ratio_text(second), ledger_id),
            )
        return budget

    # -- pools ----------------------------------------------------------------------------

    def set_cap(self, pool: str, cap: Spendable | None) -> None:
        """Set (or, with None, remove) the cap on the total of all of ``pool``'s ledgers.

        The pool is created if it does not exist yet. A cap below what the
        pool has spent lets nothing more be spent from it.

        Raises:
            InvalidValueError: the pool holds ledgers the cap cannot bound:
                ledgers of several kinds, or of a kind the cap does not bound
                (see the module doc).
        """
        checked_name(pool, "pool")
        values: tuple[str | None, str | None, str | None] = (None, None, None)
        if cap is not None:
            first, second = columns(checked_budget(cap, "cap"))
            values = (ratio_text(first), ratio_text(second), model_name(type(cap)))
        with self.database.transaction(f"setting the cap of {pool!r}", write=True) as tx:
            tx.run(
                "INSERT INTO pf_pools(name, cap_rho, cap_delta, entries, spent_rho, spent_delta, "
                "cap_kind) VALUES (?, NULL, NULL, 0, ?, ?, NULL) ON CONFLICT (name) DO NOTHING",
                (pool, ZERO, ZERO),
            )
            lock_pool(tx, pool)
            problem = None if cap is None else mixed_cap(cap, pool_kinds(tx, pool), pool)
            if problem is not None:
                raise InvalidValueError(f"the cap {cap!r} cannot be set: {problem}")
            tx.run(
                "UPDATE pf_pools SET cap_rho = ?, cap_delta = ?, cap_kind = ? WHERE name = ?",
                (*values, pool),
            )

    def cap(self, pool: str) -> Spendable | None:
        """The cap of ``pool`` (of its kind), or None (no cap, or no such pool)."""
        checked_name(pool, "pool")
        with self.database.transaction("reading a cap", write=False) as tx:
            row = tx.one(
                "SELECT cap_rho, cap_delta, spent_rho, spent_delta, entries, cap_kind "
                "FROM pf_pools WHERE name = ?",
                (pool,),
            )
        return None if row is None else stored_cap(row, pool)

    def pool_spent(self, pool: str, kind: Kind | None = None) -> Spendable:
        """The exact total all of ``pool``'s ledgers recorded, a budget of their kind.

        What their spends add up to (basic composition, which a cap is
        checked against). A pool's ledgers are usually of one kind, which is
        then the total's (an unknown or empty pool: its cap's kind, else
        zCDP, and the total zero). A pool without a cap may hold ledgers of
        several kinds: pass ``kind`` to total those of one kind.

        Raises:
            InvalidValueError: the pool holds ledgers of several kinds and
                ``kind`` is not given.

        Example:
            >>> import os, tempfile
            >>> import privframe as pf
            >>> from privframe.accounting.ledger import DatabaseLedgers
            >>> with DatabaseLedgers(os.path.join(tempfile.mkdtemp(), "db.sqlite")) as ledgers:
            ...     for name, budget in (("a/s", pf.zCDP(1.0)), ("b/s", pf.PureDP(1.0))):
            ...         ledgers.create(name, "s", budget)
            ...         _ = ledgers.open(name).append(0.25, label="q")
            ...     print(ledgers.pool_spent("s", pf.PureDP), ledgers.pool_spent("s", pf.zCDP))
            PureDP(epsilon=0.25) zCDP(rho=0.25, delta=0.0)
        """
        checked_name(pool, "pool")
        if kind is not None:
            check_kind(kind)
        where = f"pool {pool!r}"
        with self.database.transaction("reading a pool's total", write=False) as tx:
            row = tx.one(
                "SELECT cap_rho, cap_delta, spent_rho, spent_delta, entries, cap_kind "
                "FROM pf_pools WHERE name = ?",
                (pool,),
            )
            kinds = [] if row is None else pool_kinds(tx, pool)
            if kind is not None and kinds and kinds != [kind]:
                rows = tx.run(
                    "SELECT spent_rho, spent_delta FROM pf_ledgers WHERE pool = ? AND kind = ?",
                    (pool, model_name(kind)),
                )
                first = sum((stored_ratio(r[0], where) for r in rows), Fraction(0))
                second = sum((stored_ratio(r[1], where) for r in rows), Fraction(0))
                return from_columns(kind, first, second)
        if len(kinds) > 1 and kind is None:
            raise InvalidValueError(
                f"{where} holds ledgers of several kinds ({kinds_text(kinds)}), whose totals do "
                "not add up: pass kind= to total the ledgers of one kind"
            )
        cap = None if row is None else stored_cap(row, pool)
        found: Kind = kind or (kinds[0] if kinds else type(cap) if cap is not None else zCDP)
        if row is None or not kinds:
            return from_columns(found, Fraction(0), Fraction(0))
        return stored_amount(found, row[2:4], where)

    def verify_pool(self, pool: str) -> None:
        """Check that ``pool``'s total (what its cap is checked against) is its ledgers' sum.

        Read under the pool's lock, so that no append falls between the two
        reads: a server may keep charging meanwhile.

        Raises:
            LedgerError: the totals disagree (the database was changed outside privframe).

        Example:
            >>> import os, tempfile
            >>> from privframe import zCDP
            >>> from privframe.accounting.ledger import DatabaseLedgers
            >>> with DatabaseLedgers(os.path.join(tempfile.mkdtemp(), "db.sqlite")) as ledgers:
            ...     ledgers.create("alice/sales", "sales", zCDP(1.0))
            ...     ledgers.verify_pool("sales")
        """
        checked_name(pool, "pool")
        where = f"pool {pool!r}"
        with self.database.transaction(f"verifying {where}", write=True) as tx:
            row = lock_pool(tx, pool)
            rows = tx.run(
                "SELECT spent_rho, spent_delta, entries, kind FROM pf_ledgers WHERE pool = ?",
                (pool,),
            )
            stored_cap(row, pool)  # a malformed cap is damage too
        # Each ledger's total as its kind holds it; the pool's is their columns' sum.
        totals = [columns(_stored((r[0], r[1], r[3]), where)) for r in rows]
        first = sum((t[0] for t in totals), Fraction(0))
        second = sum((t[1] for t in totals), Fraction(0))
        pool_total = (stored_ratio(row[2], where), stored_ratio(row[3], where))
        if (first, second) != pool_total or sum(int(r[2]) for r in rows) != int(row[4]):
            raise damaged(where, "its total does not equal the sum of its ledgers' totals")

    def open(self, ledger_id: str) -> DatabaseLedger:
        """The ledger ``ledger_id`` as a :class:`DatabaseLedger` (of its kind).

        Raises:
            LedgerError: there is no such ledger.
        """
        return DatabaseLedger(self, ledger_id)


def _stored(row: tuple[Any, ...], where: str) -> Spendable:
    """The budget a row's two amount columns and kind (third column) hold."""
    return stored_amount(stored_kind(row[2], where), row[:2], where)


class DatabaseLedger(Ledger):
    """One ledger of a :class:`DatabaseLedgers`: its entries, totals and budget in the database.

    Open it with :meth:`DatabaseLedgers.open`. Its :attr:`kind` is the one it
    was created with. Appends are checked and recorded as the module doc
    says; :attr:`budget` is the budget in the database now, which an
    administrator may change at any time. Entries are verified against the
    ledger's hash chain as they are read, and all of them, with the totals,
    by :meth:`verify`. Closing it does not close the database;
    :class:`~privframe.accounting.ledger.LedgerEntries` taken from it stay
    readable while the database is open.

    Args:
        ledgers: the :class:`DatabaseLedgers` it is in.
        ledger_id: its id.

    Raises:
        LedgerError: there is no such ledger, or its row is damaged.

    Example:
        >>> import os, tempfile
        >>> import privframe as pf
        >>> from privframe.accounting.accountant import Accountant
        >>> from privframe.accounting.ledger import DatabaseLedgers
        >>> with tempfile.TemporaryDirectory() as d:
        ...     ledgers = DatabaseLedgers(os.path.join(d, "server.db"))
        ...     ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
        ...     acct = Accountant(pf.zCDP(1.0), ledger=ledgers.open("alice/sales"))
        ...     _ = acct.spend(pf.zCDP(0.5), label="q1")
        ...     ledgers.set_budget("alice/sales", pf.zCDP(0.75))  # while it is open
        ...     try:
        ...         acct.spend(pf.zCDP(0.5), label="q2")
        ...     except pf.BudgetExceededError:
        ...         print("refused:", acct.spent)
        ...     ledgers.create("bob/sales", "sales", pf.ApproxDP(1.0, 1e-6))
        ...     bob = Accountant(pf.ApproxDP(1.0, 1e-6), ledger=ledgers.open("bob/sales"))
        ...     print(bob.spend(pf.ApproxDP(0.25, 1e-7), label="q3").cost)
        ...     ledgers.close()
        refused: zCDP(rho=0.5, delta=0.0)
        ApproxDP(epsilon=0.25, delta=1e-07)
    """

    def __init__(self, ledgers: DatabaseLedgers, ledger_id: str) -> None:
        super().__init__()
        if not isinstance(ledgers, DatabaseLedgers):
            raise InvalidArgumentError(
                f"ledgers must be a DatabaseLedgers, got {type(ledgers).__name__}"
            )
        self._db = ledgers.database
        self.ledger_id = checked_name(ledger_id, "ledger_id")
        self._where = f"ledger {ledger_id!r}"
        self._pending_head = ""
        self._tx: Transaction | None = None
        self._pool_row: tuple[Any, ...] = ()
        # ApproxDP: the tight composition of the entries folded so far, and after a write.
        self._composition = Composition()
        self._pending: Composition | None = None
        with self._db.transaction(f"opening {self._where}", write=False) as tx:
            row = tx.one("SELECT pool, created, genesis, kind FROM pf_ledgers WHERE id = ?",
                         (ledger_id,))  # fmt: skip
            if row is None:
                raise missing_ledger(ledger_id)
            self.pool, created, self._genesis, kind = row
            self._kind = stored_kind(kind, self._where)
            if database_genesis(ledger_id, self.pool, created, self._kind) != self._genesis:
                raise damaged(self._where, "its genesis hash does not match its id, pool and kind")
            self._budget: Spendable = from_columns(self._kind, Fraction(0), Fraction(0))
            self._load(tx)

    def __repr__(self) -> str:
        return f"DatabaseLedger({self.ledger_id!r}, entries={self._summary.count})"

    @property
    def budget(self) -> Spendable:
        """The ledger's budget in the database now (an administrator may change it).

        A budget of the ledger's :attr:`kind`.
        """
        with self._lock:
            self._ensure_open()
            self._refresh()
            return self._budget

    # -- hooks (lock held) ----------------------------------------------------------------

    def _load(self, tx: Transaction) -> None:
        """Take the ledger's row (budget, totals and head) into this object."""
        row = tx.one(
            "SELECT budget_rho, budget_delta, entries, spent_rho, spent_delta, seeded, head "
            "FROM pf_ledgers WHERE id = ?",
            (self.ledger_id,),
        )
        if row is None:
            raise missing_ledger(self.ledger_id)
        budget_rho, budget_delta, count, rho, delta, seeded, head = row
        self._budget = stored_amount(self._kind, (budget_rho, budget_delta), self._where)
        rho, delta = stored_ratio(rho, self._where), stored_ratio(delta, self._where)
        if count < self._summary.count:
            raise damaged(self._where, f"it holds {count} entries, fewer than it held before")
        self._summary = LedgerSummary(count, rho, delta, (Fraction(0), Fraction(0)), seeded)
        self._head = head

    def _refresh(self) -> None:
        with self._db.transaction(f"reading {self._where}", write=False) as tx:
            self._load(tx)

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[None]:
        if self._kind is ApproxDP:
            # Fold the entries recorded so far before taking the pool's lock: inside it,
            # only those another process added meanwhile are left to fold.
            with self._db.transaction(f"reading {self._where}", write=False) as tx:
                self._load(tx)
                self._folded(tx)
        with self._db.transaction(f"recording a spend on {self._where}", write=True) as tx:
            self._pool_row = lock_pool(tx, self.pool)
            self._load(tx)
            count = self._summary.count
            if count:
                last = tx.one("SELECT hash FROM pf_entries WHERE ledger = ? AND idx = ?",
                              (self.ledger_id, count - 1))  # fmt: skip
                if last is None or last[0] != self._head:
                    raise damaged(self._where, f"its last entry ({count - 1}) is not its head")
            self._tx = tx
            try:
                yield
            finally:
                self._tx = None

    def _write(self, entries: list[LedgerEntry]) -> None:
        tx = self._tx
        assert tx is not None
        self._pending = None
        if any("\x00" in entry.label for entry in entries):
            # PostgreSQL's text cannot hold NUL; refused on SQLite too, so both answer alike.
            raise InvalidValueError(
                "a label holds a NUL character (\\x00), which the server's ledger database "
                "cannot store; remove it. Nothing was charged"
            )
        cost = (sum(e.exact_rho for e in entries), sum(e.exact_delta for e in entries))
        self._check_limits(tx, entries, (Fraction(cost[0]), Fraction(cost[1])))
        prev, rows = self._head, []
        for entry in entries:
            prev = chain_link(prev, entry.canonical_json())
            rho, delta = stored_costs(entry)
            rows.append((self.ledger_id, entry.index, entry.time, entry.label, rho, delta,
                         entry.description_json, int(entry.seeded), prev))  # fmt: skip
        tx.many(
            "INSERT INTO pf_entries(ledger, idx, recorded, label, rho, delta, description, "
            "seeded, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        summary = self._summary + LedgerSummary.of(entries)
        tx.run(
            "UPDATE pf_ledgers SET entries = ?, spent_rho = ?, spent_delta = ?, seeded = ?, "
            "head = ? WHERE id = ?",
            (summary.count, ratio_text(summary.rho), ratio_text(summary.delta), summary.seeded,
             prev, self.ledger_id),
        )  # fmt: skip
        pool_rho, pool_delta, pool_count = self._pool_row[2:5]
        tx.run(
            "UPDATE pf_pools SET entries = ?, spent_rho = ?, spent_delta = ? WHERE name = ?",
            (pool_count + len(entries),
             ratio_text(stored_ratio(pool_rho, self._where) + cost[0]),
             ratio_text(stored_ratio(pool_delta, self._where) + cost[1]), self.pool),
        )  # fmt: skip
        self._pending_head = prev

    def _check_limits(self, tx: Transaction, entries: list[LedgerEntry], cost: Columns) -> None:
        """Refuse ``cost`` if the ledger's budget or the pool's cap in the database is exceeded."""
        if not cost[0] and not cost[1]:
            return  # a zero cost always fits, so the ledger lists every release
        label = entries[0].label
        what = (
            f"{len(entries)} spends"
            if len(entries) > 1
            else "spend" + (f" {label!r}" if label else "")
        )
        kind, budget = self._kind, self._budget
        limit = columns(budget)
        spent: Columns = (self._summary.rho, self._summary.delta)
        after: Fraction | None = None
        if kind is ApproxDP:
            # Charged as its accountant charges it: the tight composition of its entries.
            state = self._folded(tx)
            composed = state
            for entry in entries:
                composed = composed.add(
                    entry.exact_rho, entry.exact_delta, recorded_events(entry.description)
                )
            self._pending = composed
            spent, after = (state.epsilon, state.delta), composed.epsilon
            over = composed.epsilon > limit[0] or composed.delta > limit[1]
        else:
            over = exceeds(spent, cost, limit)
        if over:
            left = from_columns(kind, max(limit[0] - spent[0], Fraction(0)),
                                max(limit[1] - spent[1], Fraction(0)))  # fmt: skip
            asked = from_columns(kind, *cost)
            message = refusal(asked, what, "it requests", spent, budget, left, after=after)
            raise BudgetExceededError(
                f"{message} (The budget that counts is {self._where}'s in the server "
                "database, which its administrator sets.)"
            )
        self._check_cap(what, cost)

    def _check_cap(self, what: str, cost: Columns) -> None:
        """Refuse ``cost`` if it takes the pool's total past its cap (basic composition)."""
        row = self._pool_row
        cap = stored_cap(row, self.pool)
        if cap is None:
            return
        kind = self._kind
        limit = cap_limit(cap, kind)
        if limit is None:
            raise BudgetExceededError(
                f"{what} refused, nothing was recorded: the cap of {self.pool!r} is "
                f"{with_article(type(cap).__name__)} budget, which does not bound "
                f"{with_article(kind.__name__)} ledger such as {self.ledger_id!r}. Ask the "
                "administrator about the cap"
            )
        total = (stored_ratio(row[2], self._where), stored_ratio(row[3], self._where))
        if not exceeds(total, cost, limit):
            return
        # What the other ledgers spent is theirs: the message does not tell it.
        if kind is zCDP:
            asks, capped = (
                f"rho={figure(cost[0])}",
                (f"rho={figure(limit[0])}, delta={figure(limit[1])}"),
            )
            if isinstance(cap, ApproxDP):
                capped += f", the zCDP budget its cap {cap!r} allows"
        elif kind is PureDP:
            asks, capped = f"epsilon={figure(cost[0])}", f"epsilon={figure(limit[0])}"
        else:
            asks = f"epsilon={figure(cost[0])} and delta={figure(cost[1])}"
            capped = (
                f"epsilon={figure(limit[0])}, delta={figure(limit[1])}; every release's "
                "epsilon and delta add up against it"
            )
        raise BudgetExceededError(
            f"{what} refused, nothing was recorded: it requests {asks}, which would take the "
            f"total spent on {self.pool!r} by all its ledgers past the cap its administrator "
            f"set ({capped}). Ask the administrator about the cap"
        )

    def _folded(self, tx: Transaction) -> Composition:
        """The composition of every entry recorded (ApproxDP), folding those not seen yet.

        The entries are read in ``tx`` (they are committed) and checked
        against the hash chain as they are read.
        """
        state, count = self._composition, self._summary.count
        if state.count >= count:
            return state
        start = state.count
        last, entries, _ = self._linked(tx, start, count - 1)
        if len(entries) != count - start or last != self._head:
            raise damaged(self._where, "its entries do not end at its recorded head")
        for entry in entries:
            state = state.add(
                entry.exact_rho, entry.exact_delta, recorded_events(entry.description)
            )
        self._composition = state
        return state

    def _remember(self, entries: list[LedgerEntry]) -> None:
        self._summary += LedgerSummary.of(entries)
        self._head = self._pending_head
        if self._pending is not None and self._pending.count == self._summary.count:
            self._composition = self._pending
        self._pending = None

    def _read(self, start: int, stop: int, count: int, head: str) -> list[LedgerEntry]:
        with self._lock:
            hi = min(stop, count - 1)  # one more entry: its link checks the last one
            with self._db.transaction(f"reading {self._where}", write=False) as tx:
                last, entries, read = self._linked(tx, start, hi)
            if read < hi - start + 1 or (hi == count - 1 and last != head):
                raise damaged(self._where, "its entries do not end at its recorded head")
            return entries[: stop - start]

    def _linked(self, tx: Transaction, start: int, hi: int) -> tuple[str, list[LedgerEntry], int]:
        """Entries ``start`` to ``hi`` read in ``tx``, checked from the link of the one before.

        Returns the last hash, the entries and how many rows from ``start`` were read.
        """
        rows = self._rows(tx, max(start - 1, 0), hi)
        prev = self._genesis
        if start:
            if not rows or rows[0][1] != start - 1:
                raise damaged(self._where, f"entry {start - 1} is missing")
            prev, rows = rows[0][-1], rows[1:]
        last, entries, _ = self._scan(rows, start, prev)
        return last, entries, len(rows)

    def _verify_all(self) -> None:
        """Every entry against the hash chain, and their sums against the ledger's row."""
        self._refresh()
        count, prev, total = self._summary.count, self._genesis, LedgerSummary()
        for lo in range(0, count, _PAGE):
            with self._db.transaction(f"verifying {self._where}", write=False) as tx:
                rows = self._rows(tx, lo, min(lo + _PAGE, count) - 1)
            prev, _, summary = self._scan(rows, lo, prev)
            total += summary
        if total.count != count or prev != self._head:
            raise damaged(self._where, "its entries do not end at its recorded head")
        if total != self._summary:
            raise damaged(self._where, "its entries do not add up to its recorded totals")

    def _rows(self, tx: Transaction, lo: int, hi: int) -> list[tuple[Any, ...]]:
        return tx.run(
            "SELECT ledger, idx, recorded, label, rho, delta, description, seeded, hash "
            "FROM pf_entries WHERE ledger = ? AND idx BETWEEN ? AND ? ORDER BY idx",
            (self.ledger_id, lo, hi),
        )

    def _scan(
        self, rows: list[tuple[Any, ...]], start: int, prev: str
    ) -> tuple[str, list[LedgerEntry], LedgerSummary]:
        """Verify ``rows`` as entries ``start``, ``start + 1``, ... chained from ``prev``."""
        entries = []
        for offset, (_, idx, time, label, rho, delta, text, seeded, stored) in enumerate(rows):
            if idx != start + offset:
                raise damaged(self._where, f"entry {start + offset} is missing")
            problem = ""
            try:
                link = chain_link(
                    prev, entry_json(idx, time, label, rho, delta, text, bool(seeded))
                )
                first, second = exact_cost(parse_ratio(rho), parse_ratio(delta), self._kind)
                entry = entry_from_file(
                    idx, time, label, (first, second, False), text, bool(seeded), self._kind
                )
            except (TypeError, ValueError) as err:
                problem = str(err)
            if problem:
                raise damaged(self._where, f"entry {idx} is malformed ({problem})")
            if link != stored:
                raise damaged(self._where, f"entry {idx} does not match its hash")
            entries.append(entry)
            prev = link
        return prev, entries, LedgerSummary.of(entries)
