"""The ledger persisted in a SQLite file: safe across threads, processes and crashes.

:class:`SQLiteLedger` keeps a ledger's running state (its summary and the
head of its hash chain) over a :class:`~privframe.accounting.ledger._file.LedgerFile`,
checks the entries others appended before each write, and keeps this user's
record of the ledgers it verified up to date
(:mod:`~privframe.accounting.ledger._state`). What it guarantees is in
:mod:`privframe.accounting.ledger` and ``docs/operations.md``.

Example:
    >>> import os, tempfile
    >>> from privframe import zCDP
    >>> from privframe.accounting.ledger import SQLiteLedger
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with SQLiteLedger(os.path.join(d, "x.ledger"), zCDP(1.0)) as ledger:
    ...         print(ledger.append(0.5, label="q").index)
    0
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path

from privframe.accounting._kinds import KINDS, Spendable
from privframe.accounting.budgets import zCDP
from privframe.accounting.ledger._entry import LedgerEntry, LedgerSummary, stored_costs
from privframe.accounting.ledger._file import LedgerFile
from privframe.accounting.ledger._format import SCHEMA_VERSION, chain_link
from privframe.accounting.ledger._identity import DataIdentity
from privframe.accounting.ledger._memory import Ledger
from privframe.accounting.ledger._state import (
    KNOWN_LEDGERS,
    Known,
    LedgerMissingWarning,
    state_file,
    state_key,
)
from privframe.errors import InvalidArgumentError, InvalidValueError, LedgerError

__all__ = ["DEFAULT_TIMEOUT", "SQLiteLedger", "accept_restored"]

DEFAULT_TIMEOUT = 30.0
"""Seconds a :class:`SQLiteLedger` waits for a lock another process holds (its ``timeout``)."""


class SQLiteLedger(Ledger):
    """A ledger persisted in a SQLite file, safe across threads, processes and crashes.

    Opening a path that does not exist creates a ledger bound to ``budget``
    (race-free: of several processes creating it at once, exactly one
    ledger results and all of them open it). An existing file is never
    initialised, even an empty one: it must already be a privframe ledger.
    Opening an existing ledger checks that it is a privframe ledger of a known
    schema, refuses a ``budget`` of another kind than the file's (a zCDP,
    PureDP or ApproxDP ledger records costs of its own kind only: :attr:`kind`)
    and refuses a ``budget`` larger (in ρ or ε, or δ, compared exactly) than
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
        budget: the budget the caller intends to enforce: a
            :class:`~privframe.accounting.zCDP`, :class:`~privframe.accounting.PureDP`
            or :class:`~privframe.accounting.ApproxDP`, whose kind a new file takes.
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
            version; a budget of another kind than the file's, or larger than
            the persisted one; other data than
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
        budget: Spendable,
        *,
        data: DataIdentity | None = None,
        same_data: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        _restored: bool = False,
    ) -> None:
        super().__init__()
        if type(budget) not in KINDS:
            raise InvalidArgumentError(
                f"budget must be a zCDP, PureDP or ApproxDP, got {type(budget).__name__}"
            )
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
        self._file = LedgerFile(_ledger_path(path), float(timeout))
        self._genesis = ""
        self._pending_head = ""
        try:
            self._file.open(budget, data)
            self._budget, self._genesis = self._file.load_meta(None if _restored else budget)
            self._kind = self._file.kind
            self._head = self._genesis
            self._key = state_key(self._file.path)
            record = None if _restored else self._known_record()
            if record is None:
                self._file.quick_check()
            else:
                self._summary, self._head = record.summary, record.head
            self._refresh()
            if data is not None:
                self._file.settle_data(self._genesis, data, same_data)
            self._record_known(force=_restored)
        except BaseException:
            self._file.close()
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
        return self._file.path

    @property
    def budget(self) -> Spendable:
        """The budget the file was created with (the most any opener may enforce), of its kind.

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
            self._file.close()

    def __repr__(self) -> str:
        return f"SQLiteLedger({str(self._file.path)!r}, entries={self._summary.count})"

    # -- opening ----------------------------------------------------------------
    # -- reading and writing (lock held) -----------------------------------------

    def _rolled_back(self, count: int) -> LedgerError:
        spent = self._summary
        then = f"{count} entries"
        if spent.count == count:
            first = "rho" if self._kind is zCDP else "epsilon"
            then += f", spending {first}={float(spent.rho):.6g}, delta={float(spent.delta):.6g}"
        return self._file.fail(
            f"was rolled back or modified outside privframe: entry {count - 1}, which "
            f"privframe verified before (when the ledger had {then}), changed or "
            "disappeared, so spends recorded since are missing (an older copy was "
            "restored, or entries were deleted or rewritten). It was not used. Restore "
            "the newest copy; if you restored an older backup on purpose, accept it with "
            "privframe.accounting.ledger.accept_restored("
            f"{str(self._file.path)!r}) and open it again (the "
            "privacy loss of the spends it lacks then goes uncounted; see docs/operations.md)"
        )

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
            rows = self._file.rows(conn, max(count - 2, 0), count - 1)
            prev = self._genesis
            if count > 1:
                if not rows or rows[0][0] != count - 2:
                    raise self._rolled_back(count)
                prev, rows = rows[0][-1], rows[1:]
            if len(rows) != 1 or rows[0][-1] != head:
                raise self._rolled_back(count)
            self._file.scan(rows, count - 1, prev)  # and its text still matches its hash
        last, added, _ = self._file.scan(self._file.rows(conn, count, None), count, head)
        total = count + added.count
        recorded = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('count', 'head')"))
        if recorded != {"count": str(total), "head": last}:
            raise self._file.corrupt(
                f"its entries ({total}) do not match its recorded head; "
                "an entry was removed or added"
            )
        if added.count:
            self._summary += added
            self._head = last

    def _refresh(self) -> None:
        conn = self._file.connection()
        with self._file.reading(conn):
            self._catch_up(conn)

    def _verify_all(self) -> None:
        """The whole file: its structure, and the hash chain and totals from the first entry."""
        self._file.quick_check()
        conn = self._file.connection()
        count = self._summary.count
        with self._file.reading(conn):
            rows = self._file.rows(conn, 0, count - 1)
            last, known, _ = self._file.scan(rows, 0, self._genesis)
            if len(rows) < count or last != self._head:
                raise self._rolled_back(count)
            if known != self._summary:
                raise self._file.corrupt(
                    f"its first {count} entries add up to rho={known.rho}, delta={known.delta} "
                    f"(seeded: {known.seeded}), not to the rho={self._summary.rho}, "
                    f"delta={self._summary.delta} (seeded: {self._summary.seeded}) privframe "
                    f"recorded for it in {str(state_file())!r}"
                )
            self._catch_up(conn)

    def _read(self, start: int, stop: int, count: int, head: str) -> list[LedgerEntry]:
        with self._lock:
            temporary = not self._file.is_open  # entries taken before close() stay readable
            conn = (
                self._file.connect(self._file.path, read_only=True)
                if temporary
                else self._file.connection()
            )
            try:
                with self._file.reading(conn):
                    if temporary:
                        self._check_same_ledger(conn)
                    hi = min(stop, count - 1)  # one more entry: its link checks the last one
                    rows = self._file.rows(conn, max(start - 1, 0), hi)
                    if start:
                        if not rows or rows[0][0] != start - 1:
                            raise self._file.corrupt(f"entry {start - 1} is missing")
                        prev, rows = rows[0][-1], rows[1:]
                    else:
                        prev = self._genesis
                    last, _, costs = self._file.scan(rows, start, prev)
                    if len(rows) < hi - start + 1 or (hi == count - 1 and last != head):
                        raise self._rolled_back(count)
                    return [self._file.entry(row, costs) for row in rows[: stop - start]]
            finally:
                if temporary:
                    conn.close()

    def _check_same_ledger(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'genesis'").fetchone()
        if row is None or row[0] != self._genesis:
            raise self._file.fail(
                "holds another ledger than the one these entries were taken from (it was "
                "replaced after the ledger was closed); open it again to read its entries"
            )

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[None]:
        with self._file.immediate("recording the spend") as conn:
            self._catch_up(conn)
            yield

    def _write(self, entries: list[LedgerEntry]) -> None:
        prev = self._head
        rows = []
        for entry in entries:
            prev = chain_link(prev, entry.canonical_json())
            rows.append(
                (
                    entry.index,
                    entry.time,
                    entry.label,
                    *stored_costs(entry),
                    entry.description_json,
                    int(entry.seeded),
                    prev,
                )
            )
        conn = self._file.connection()
        if self._file.version != SCHEMA_VERSION:
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
        self._file.version = SCHEMA_VERSION
        self._record_known()

    # -- this user's record of known ledgers ---------------------------------------

    def _known_record(self) -> Known | None:
        """This user's record of the ledger at this path, if it is this ledger.

        A record of another ledger at this path means the ledger privframe saw
        here is gone: warn (once; the record then follows this ledger).
        """
        record = KNOWN_LEDGERS.get(self._key)
        if record is None or record.genesis == self._genesis:
            return record
        now = (
            "a new, empty ledger was created here"
            if self._file.created
            else "this is another ledger"
        )
        old = record.summary
        warnings.warn(
            f"ledger file {str(self._file.path)!r}: privframe last saw a different ledger at this "
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
        KNOWN_LEDGERS.put(self._key, Known(self._genesis, self._head, self._summary), force=force)


# --------------------------------------------------------------------------- known ledgers


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
