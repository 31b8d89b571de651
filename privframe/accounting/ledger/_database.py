"""Many ledgers in one database, grouped in pools that may share a cap: the server's budgets.

:class:`DatabaseLedgers` keeps every ledger of a server in one SQLite file or
PostgreSQL database (:class:`~privframe.accounting.ledger.Database`): one row
per entry, keyed by (ledger, index) and hash-chained as a ledger file's
entries are, one row per ledger with its budget and exact running totals, and
one row per pool (a dataset) with its optional cap across all its ledgers and
the exact total they spent. :class:`DatabaseLedger` is one of those ledgers as
a :class:`~privframe.accounting.ledger.Ledger`, for an
:class:`~privframe.accounting.accountant.Accountant`.

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
   change a budget while a server runs;
5. inserts the entries, updates both totals, and commits (durably: SQLite's
   rollback journal with ``synchronous=FULL``, PostgreSQL's
   ``synchronous_commit``) before the append returns.

A crash at any point leaves either the whole append or none of it.

Example:
    >>> import os, tempfile
    >>> from privframe import zCDP
    >>> from privframe.accounting.ledger import DatabaseLedgers
    >>> with tempfile.TemporaryDirectory() as d:
    ...     ledgers = DatabaseLedgers(os.path.join(d, "server.db"))
    ...     ledgers.create("alice/sales", "sales", zCDP(1.0))
    ...     with ledgers.open("alice/sales") as ledger:
    ...         print(ledger.append(0.25, label="q1").index, ledger.totals()[0])
    ...     print(ledgers.pool_spent("sales"))
    ...     ledgers.close()
    0 1/4
    zCDP(rho=0.25, delta=0.0)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from privframe.accounting._report import figure, refusal
from privframe.accounting.budgets import zCDP
from privframe.accounting.ledger._database_rows import (
    LEDGERS_SCHEMA_VERSION,
    TABLES,
    ZERO,
    checked_name,
    checked_zcdp,
    damaged,
    database_genesis,
    exceeds,
    lock_pool,
    missing_ledger,
    stored_ratio,
    stored_zcdp,
)
from privframe.accounting.ledger._entry import (
    LedgerEntry,
    LedgerSummary,
    entry_from_file,
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
    InvalidValueError,
    LedgerError,
)

__all__ = ["LEDGERS_SCHEMA_VERSION", "DatabaseLedger", "DatabaseLedgers"]

_PAGE = 512
"""Entries read per query when a ledger is verified."""


class DatabaseLedgers:
    """The ledgers of a server in one database: create them, set budgets and caps, open them.

    Each ledger has an id (the server uses ``"<analyst>/<dataset>"``), a
    budget stored exactly in the database, and a pool (the dataset); a pool
    may have a cap that the total of all its ledgers may not exceed. Budgets
    and caps may be changed at any time, also while ledgers are open: every
    append checks the values in the database (see the module doc). Changes
    lock the pool as appends do, so each is ordered with every append.

    Args:
        url: a SQLite file path (created if absent) or a ``postgresql://``
            URL (the ``[postgres]`` extra); see :class:`Database`.
        timeout: keyword only; seconds to wait for a lock (default 30).

    Raises:
        LedgerError: the database cannot be opened, or holds ledger tables of
            an unknown schema version.

    Example:
        >>> import os, tempfile
        >>> from privframe import zCDP
        >>> from privframe.accounting.ledger import DatabaseLedgers
        >>> with tempfile.TemporaryDirectory() as d:
        ...     ledgers = DatabaseLedgers(os.path.join(d, "server.db"))
        ...     ledgers.create("bob/sales", "sales", zCDP(0.5))
        ...     print(ledgers.top_up("bob/sales", zCDP(0.25)), ledgers.ledgers())
        ...     ledgers.set_cap("sales", zCDP(2.0))
        ...     print(ledgers.cap("sales"), ledgers.spent("bob/sales"))
        ...     ledgers.close()
        zCDP(rho=0.75, delta=0.0) {'bob/sales': 'sales'}
        zCDP(rho=2.0, delta=0.0) zCDP(rho=0.0, delta=0.0)
    """

    def __init__(self, url: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.database = Database(url, timeout=timeout)
        try:
            self.database.ensure_schema("ledgers", LEDGERS_SCHEMA_VERSION, TABLES)
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

    def create(self, ledger_id: str, pool: str, budget: zCDP) -> None:
        """Create an empty ledger in ``pool`` (created if new, without a cap) with ``budget``.

        Raises:
            LedgerError: a ledger ``ledger_id`` exists already.
        """
        checked_name(ledger_id, "ledger_id")
        checked_name(pool, "pool")
        checked_zcdp(budget, "budget")
        created = now()
        with self.database.transaction(f"creating ledger {ledger_id!r}", write=True) as tx:
            if tx.one("SELECT 1 FROM pf_ledgers WHERE id = ?", (ledger_id,)) is not None:
                raise LedgerError(f"ledger {ledger_id!r} exists already in the server database")
            tx.run(
                "INSERT INTO pf_pools(name, cap_rho, cap_delta, entries, spent_rho, spent_delta) "
                "VALUES (?, NULL, NULL, 0, ?, ?) ON CONFLICT (name) DO NOTHING",
                (pool, ZERO, ZERO),
            )
            genesis = database_genesis(ledger_id, pool, created)
            tx.run(
                "INSERT INTO pf_ledgers(id, pool, created, genesis, budget_rho, budget_delta, "
                "entries, spent_rho, spent_delta, seeded, head) "
                "VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, 0, ?)",
                (ledger_id, pool, created, genesis, ratio_text(budget.exact_rho),
                 ratio_text(budget.exact_delta), ZERO, ZERO, genesis),
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

    def budget(self, ledger_id: str) -> zCDP | None:
        """The budget of ledger ``ledger_id`` in the database, or None if there is no such one."""
        checked_name(ledger_id, "ledger_id")
        with self.database.transaction("reading a budget", write=False) as tx:
            row = tx.one(
                "SELECT budget_rho, budget_delta FROM pf_ledgers WHERE id = ?", (ledger_id,)
            )
        return None if row is None else stored_zcdp(row, f"ledger {ledger_id!r}")

    def spent(self, ledger_id: str) -> zCDP:
        """The exact total ledger ``ledger_id`` has recorded.

        Raises:
            LedgerError: there is no such ledger.
        """
        checked_name(ledger_id, "ledger_id")
        with self.database.transaction("reading a ledger's total", write=False) as tx:
            row = tx.one("SELECT spent_rho, spent_delta FROM pf_ledgers WHERE id = ?", (ledger_id,))
        if row is None:
            raise missing_ledger(ledger_id)
        return stored_zcdp(row, f"ledger {ledger_id!r}")

    def set_budget(self, ledger_id: str, budget: zCDP) -> None:
        """Set the budget of ledger ``ledger_id`` (smaller than its spent total: nothing more fits).

        Raises:
            LedgerError: there is no such ledger.
        """
        checked_zcdp(budget, "budget")
        self._change_budget(ledger_id, lambda _: budget)

    def top_up(self, ledger_id: str, extra: zCDP) -> zCDP:
        """Add ``extra`` to the budget of ledger ``ledger_id`` (atomically); the new budget.

        Raises:
            LedgerError: there is no such ledger.
            InvalidBudgetError: the new δ would reach 1.
        """
        checked_zcdp(extra, "extra")
        return self._change_budget(ledger_id, lambda old: old + extra)

    def _change_budget(self, ledger_id: str, change: Any) -> zCDP:
        checked_name(ledger_id, "ledger_id")
        with self.database.transaction(f"changing the budget of {ledger_id!r}", write=True) as tx:
            row = tx.one("SELECT pool FROM pf_ledgers WHERE id = ?", (ledger_id,))
            if row is None:
                raise missing_ledger(ledger_id)
            lock_pool(tx, row[0])
            old = tx.one(
                "SELECT budget_rho, budget_delta FROM pf_ledgers WHERE id = ?", (ledger_id,)
            )
            assert old is not None
            budget: zCDP = change(stored_zcdp(old, f"ledger {ledger_id!r}"))
            tx.run(
                "UPDATE pf_ledgers SET budget_rho = ?, budget_delta = ? WHERE id = ?",
                (ratio_text(budget.exact_rho), ratio_text(budget.exact_delta), ledger_id),
            )
        return budget

    # -- pools ----------------------------------------------------------------------------

    def set_cap(self, pool: str, cap: zCDP | None) -> None:
        """Set (or, with None, remove) the cap on the total of all of ``pool``'s ledgers.

        The pool is created if it does not exist yet. A cap below what the
        pool has spent lets nothing more be spent from it.
        """
        checked_name(pool, "pool")
        values: tuple[str | None, str | None] = (None, None)
        if cap is not None:
            values = (ratio_text(checked_zcdp(cap, "cap").exact_rho), ratio_text(cap.exact_delta))
        with self.database.transaction(f"setting the cap of {pool!r}", write=True) as tx:
            tx.run(
                "INSERT INTO pf_pools(name, cap_rho, cap_delta, entries, spent_rho, spent_delta) "
                "VALUES (?, NULL, NULL, 0, ?, ?) ON CONFLICT (name) DO NOTHING",
                (pool, ZERO, ZERO),
            )
            lock_pool(tx, pool)
            tx.run("UPDATE pf_pools SET cap_rho = ?, cap_delta = ? WHERE name = ?", (*values, pool))

    def cap(self, pool: str) -> zCDP | None:
        """The cap of ``pool``, or None (no cap, or no such pool)."""
        checked_name(pool, "pool")
        with self.database.transaction("reading a cap", write=False) as tx:
            row = tx.one("SELECT cap_rho, cap_delta FROM pf_pools WHERE name = ?", (pool,))
        if row is None or row[0] is None:
            return None
        return stored_zcdp(row, f"pool {pool!r}")

    def pool_spent(self, pool: str) -> zCDP:
        """The exact total all of ``pool``'s ledgers recorded (zero for an unknown pool)."""
        checked_name(pool, "pool")
        with self.database.transaction("reading a pool's total", write=False) as tx:
            row = tx.one("SELECT spent_rho, spent_delta FROM pf_pools WHERE name = ?", (pool,))
        return zCDP(0) if row is None else stored_zcdp(row, f"pool {pool!r}")

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
                "SELECT spent_rho, spent_delta, entries FROM pf_ledgers WHERE pool = ?", (pool,)
            )
        spent = [stored_zcdp(r, where) for r in rows]
        total = sum(spent, zCDP(0))
        if total != stored_zcdp(row[2:4], where) or sum(int(r[2]) for r in rows) != int(row[4]):
            raise damaged(where, "its total does not equal the sum of its ledgers' totals")

    def open(self, ledger_id: str) -> DatabaseLedger:
        """The ledger ``ledger_id`` as a :class:`DatabaseLedger`.

        Raises:
            LedgerError: there is no such ledger.
        """
        return DatabaseLedger(self, ledger_id)


class DatabaseLedger(Ledger):
    """One ledger of a :class:`DatabaseLedgers`: its entries, totals and budget in the database.

    Open it with :meth:`DatabaseLedgers.open`. Appends are checked and
    recorded as the module doc says; :attr:`budget` is the budget in the
    database now, which an administrator may change at any time. Entries are
    verified against the ledger's hash chain as they are read, and all of
    them, with the totals, by :meth:`verify`. Closing it does not close the
    database; :class:`~privframe.accounting.ledger.LedgerEntries` taken
    from it stay readable while the database is open.

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
        ...     ledgers.close()
        refused: zCDP(rho=0.5, delta=0.0)
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
        self._budget = zCDP(0)
        with self._db.transaction(f"opening {self._where}", write=False) as tx:
            row = tx.one("SELECT pool, created, genesis FROM pf_ledgers WHERE id = ?",
                         (ledger_id,))  # fmt: skip
            if row is None:
                raise missing_ledger(ledger_id)
            self.pool, created, self._genesis = row
            if database_genesis(ledger_id, self.pool, created) != self._genesis:
                raise damaged(self._where, "its genesis hash does not match its id and pool")
            self._load(tx)

    def __repr__(self) -> str:
        return f"DatabaseLedger({self.ledger_id!r}, entries={self._summary.count})"

    @property
    def budget(self) -> zCDP:
        """The ledger's budget in the database now (an administrator may change it)."""
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
        self._budget = stored_zcdp((budget_rho, budget_delta), self._where)
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
        if any("\x00" in entry.label for entry in entries):
            # PostgreSQL's text cannot hold NUL; refused on SQLite too, so both answer alike.
            raise InvalidValueError(
                "a label holds a NUL character (\\x00), which the server's ledger database "
                "cannot store; remove it. Nothing was charged"
            )
        cost = zCDP(sum(e.exact_rho for e in entries), sum(e.exact_delta for e in entries))
        self._check_limits(entries, cost)
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
        _, _, pool_rho, pool_delta, pool_count = self._pool_row
        tx.run(
            "UPDATE pf_pools SET entries = ?, spent_rho = ?, spent_delta = ? WHERE name = ?",
            (pool_count + len(entries),
             ratio_text(stored_ratio(pool_rho, self._where) + cost.exact_rho),
             ratio_text(stored_ratio(pool_delta, self._where) + cost.exact_delta), self.pool),
        )  # fmt: skip
        self._pending_head = prev

    def _check_limits(self, entries: list[LedgerEntry], cost: zCDP) -> None:
        """Refuse ``cost`` if the ledger's budget or the pool's cap in the database is exceeded."""
        if not cost.exact_rho and not cost.exact_delta:
            return  # a zero cost always fits, so the ledger lists every release
        label = entries[0].label
        what = (
            f"{len(entries)} spends"
            if len(entries) > 1
            else "spend" + (f" {label!r}" if label else "")
        )
        spent = (self._summary.rho, self._summary.delta)
        budget = self._budget
        if exceeds(spent, cost, budget):
            left = zCDP(max(budget.exact_rho - spent[0], Fraction(0)),
                        max(budget.exact_delta - spent[1], Fraction(0)))  # fmt: skip
            message = refusal(cost, what, "it requests", spent, budget, left)
            raise BudgetExceededError(
                f"{message} (The budget that counts is {self._where}'s in the server "
                "database, which its administrator sets.)"
            )
        cap_rho, cap_delta, pool_rho, pool_delta, _ = self._pool_row
        if cap_rho is None:
            return
        cap = stored_zcdp((cap_rho, cap_delta), f"pool {self.pool!r}")
        if exceeds(
            (stored_ratio(pool_rho, self._where), stored_ratio(pool_delta, self._where)), cost, cap
        ):
            # What the other ledgers spent is theirs: the message does not tell it.
            raise BudgetExceededError(
                f"{what} refused, nothing was recorded: it requests rho={figure(cost.exact_rho)}, "
                f"which would take the total spent on {self.pool!r} by all its ledgers past the "
                f"cap its administrator set (rho={figure(cap.exact_rho)}, "
                f"delta={figure(cap.exact_delta)}). Ask the administrator about the cap"
            )

    def _remember(self, entries: list[LedgerEntry]) -> None:
        self._summary += LedgerSummary.of(entries)
        self._head = self._pending_head

    def _read(self, start: int, stop: int, count: int, head: str) -> list[LedgerEntry]:
        with self._lock:
            hi = min(stop, count - 1)  # one more entry: its link checks the last one
            with self._db.transaction(f"reading {self._where}", write=False) as tx:
                rows = self._rows(tx, max(start - 1, 0), hi)
            prev = self._genesis
            if start:
                if not rows or rows[0][1] != start - 1:
                    raise damaged(self._where, f"entry {start - 1} is missing")
                prev, rows = rows[0][-1], rows[1:]
            last, entries, _ = self._scan(rows, start, prev)
            if len(rows) < hi - start + 1 or (hi == count - 1 and last != head):
                raise damaged(self._where, "its entries do not end at its recorded head")
            return entries[: stop - start]

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
                cost = (parse_ratio(rho), parse_ratio(delta), False)
                entry = entry_from_file(idx, time, label, cost, text, bool(seeded))
            except (TypeError, ValueError) as err:
                problem = str(err)
            if problem:
                raise damaged(self._where, f"entry {idx} is malformed ({problem})")
            if link != stored:
                raise damaged(self._where, f"entry {idx} does not match its hash")
            entries.append(entry)
            prev = link
        return prev, entries, LedgerSummary.of(entries)
