"""The SQLite file behind a persistent ledger: opening, creating, reading and verifying rows.

:class:`LedgerFile` knows the file, not the ledger's running state: it
refuses what is not a privframe ledger, creates a new one race-free, runs
the transactions, reads stored rows and checks them against the hash chain,
and turns every SQLite failure into a :class:`~privframe.errors.LedgerError`
that says whether the file is busy, the disk refused, or the file is damaged.
:class:`~privframe.accounting.ledger.SQLiteLedger` keeps the ledger's state on
top of it.

Example:
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> from privframe import zCDP
    >>> from privframe.accounting.ledger._file import LedgerFile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     file = LedgerFile(Path(d) / "x.ledger", timeout=5.0)
    ...     file.open(zCDP(1.0), None)
    ...     budget, _ = file.load_meta(zCDP(0.5))
    ...     file.close()
    >>> budget
    zCDP(rho=1.0, delta=0.0)
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from privframe.accounting._kinds import Kind, Spendable, columns, model_name, with_article
from privframe.accounting.budgets import PureDP, zCDP
from privframe.accounting.ledger._entry import (
    LedgerEntry,
    LedgerSummary,
    entry_from_file,
    exact_cost,
)
from privframe.accounting.ledger._format import (
    APPLICATION_ID,
    FORMAT,
    READABLE,
    SCHEMA,
    SCHEMA_NAMES,
    SCHEMA_VERSION,
    SQLITE_HEADER,
    chain_link,
    charge_value,
    cost_text,
    entry_json,
    float_excess,
    genesis_hash,
    now,
    ratio_text,
    stored_budget,
)
from privframe.accounting.ledger._identity import DataIdentity, data_meta
from privframe.accounting.ledger._sqlite_codes import sqlite_condition
from privframe.errors import InvalidValueError, LedgerError

__all__ = ["LedgerFile"]


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


class LedgerFile:
    """The SQLite file of one ledger, and the connection this process holds to it.

    Args:
        path: the ledger file.
        timeout: seconds to wait for a lock another process holds.

    Attributes:
        path: the ledger file.
        timeout: the lock timeout in seconds.
        version: the file's ``user_version`` (its ledger schema) once opened.
        created: whether :meth:`open` created the file (this opener published it).
        kind: the kind of budget the file records (zCDP, PureDP or ApproxDP),
            once :meth:`load_meta` has read it.

    Example:
        >>> from pathlib import Path
        >>> LedgerFile(Path("x.ledger"), timeout=1.0).fail("is an example")
        LedgerError("ledger file 'x.ledger': is an example")
    """

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.version = SCHEMA_VERSION
        self.created = False
        self.kind: Kind = zCDP
        self._conn: sqlite3.Connection | None = None

    # -- errors -----------------------------------------------------------------

    def fail(self, what: str) -> LedgerError:
        return LedgerError(f"ledger file {str(self.path)!r}: {what}")

    def corrupt(self, what: str) -> LedgerError:
        return self.fail(
            f"{what}. The file is damaged or was modified outside privframe; it was not "
            "used. Restore it from a backup (or investigate) rather than starting a new "
            "ledger, which would reset the budget (see docs/operations.md)."
        )

    def _busy(self, waited: float) -> LedgerError:
        return self.fail(
            f"is busy: another process holds a lock on it, and privframe gave up after "
            f"waiting {waited:.3g} s (the limit is {self.timeout:g} s). Nothing was read or "
            "recorded, and the file is not damaged: retry when that process is done (a "
            "long-running program, a backup tool, an open SQLite shell). Do not restore a "
            "backup or start a new ledger because of this"
        )

    def _sqlite_error(self, err: sqlite3.Error, doing: str, waited: float,
                      *, damage: bool) -> LedgerError:  # fmt: skip
        """The LedgerError for a SQLite error while ``doing`` something (after ``waited`` s).

        A lock held too long is "busy", a refusal of the disk or the
        operating system says so, and other errors mean damage when they come
        from reading what should be a ledger (``damage``), else a failure.
        """
        condition = sqlite_condition(err)
        if condition == "busy":
            return self._busy(waited)
        if condition == "unusable":
            return self.fail(
                f"{doing} failed: {err} ({getattr(err, 'sqlite_errorname', 'SQLite error')}). "
                "Check the disk, its free space and the file's permissions; nothing was "
                "recorded, and the file was not found damaged"
            )
        if damage:
            return self.corrupt(f"SQLite reports an error while {doing} ({err})")
        return self.fail(f"{doing} failed ({err})")

    @contextlib.contextmanager
    def sqlite(self, doing: str, *, damage: bool = True) -> Iterator[None]:
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
        return self.fail(
            f"exists but is not a privframe ledger ({what}). privframe only initialises "
            "a file it has just created itself: a truncated or partially copied ledger is a "
            "corrupted ledger, not a new one, and starting afresh would reset the budget. "
            "Restore the ledger from a backup, or choose a path that does not exist yet "
            "for a new ledger (a new privacy budget)"
        )

    # -- opening ----------------------------------------------------------------

    def open(self, budget: Spendable, data: DataIdentity | None) -> None:
        """Open the ledger file (creating it with ``budget`` and ``data`` if it does not exist).

        Raises:
            LedgerError: an unusable path, or a file that is not a privframe ledger
                of a known schema.
        """
        path = self.path
        try:
            if not path.parent.is_dir():
                raise self.fail(f"directory {str(path.parent)!r} does not exist; create it first")
            if not os.path.lexists(path):
                self._create(budget, data)
            if not path.is_file():
                raise self.fail("is not a regular file")
            with path.open("rb") as fh:
                header = fh.read(len(SQLITE_HEADER))
        except OSError as err:
            raise self.fail(f"cannot be read ({err.strerror})") from None
        if not header:
            raise self._not_a_ledger("it is empty: 0 bytes")
        if header != SQLITE_HEADER:
            raise self.fail(
                "exists but is not a privframe ledger (not a SQLite database); "
                "choose another path for a new ledger"
            )
        conn = self.connect(path)
        try:
            with self.sqlite("opening it"):
                self._set_pragmas(conn)
                self._check_identity(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def quick_check(self) -> None:
        """``PRAGMA quick_check``: the file's structure is sound (reads every page)."""
        with self.sqlite("checking it"):
            check = [row[0] for row in self.connection().execute("PRAGMA quick_check")]
        if check != ["ok"]:
            raise self.corrupt(f"PRAGMA quick_check failed ({'; '.join(map(str, check))})")

    def connect(self, path: Path, *, read_only: bool = False) -> sqlite3.Connection:
        try:
            if read_only:
                return sqlite3.connect(
                    f"{path.absolute().as_uri()}?mode=ro",
                    uri=True,
                    timeout=self.timeout,
                    isolation_level=None,
                )
            return sqlite3.connect(
                path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as err:
            raise self.fail(f"cannot be opened ({err})") from None

    def _set_pragmas(self, conn: sqlite3.Connection) -> None:
        """Rollback journal and fsync at every commit: the main file holds every commit.

        Not WAL: in WAL mode committed rows live in the ``-wal`` file until a
        checkpoint, so a copy of the main file alone (a backup taken while the
        ledger is open, or after a crash) would lose them.
        """
        mode = str(conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]).lower()
        if mode != "delete":
            raise self.fail(
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
            raise self.fail(
                f"is a SQLite database of another application (application_id={app_id}), "
                "not a privframe ledger; choose another path"
            )
        if version not in READABLE:
            raise self.fail(
                f"has ledger schema version {version}, which this privframe does not know "
                f"(it reads versions {', '.join(map(str, READABLE))}); upgrade privframe"
            )
        self.version = version

    def _create(self, budget: Spendable, data: DataIdentity | None) -> None:
        """Create the ledger file, unless another opener creates it first.

        The ledger is built in a temporary file of this call's own, created
        with ``O_CREAT | O_EXCL``, and published with :func:`os.link`, which
        fails if the path exists. So the path never shows an uninitialised
        file, exactly one of several concurrent creators publishes its ledger
        (the others open that one), and nothing but a file this call created
        is ever initialised.
        """
        path = self.path
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.creating")
        try:
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except OSError as err:
            raise self.fail(f"cannot be created ({err.strerror})") from None
        os.close(fd)
        try:
            conn = self.connect(tmp)
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
                raise self.fail(
                    f"cannot be created: the filesystem refused a hard link ({err.strerror}); "
                    "put the ledger on a local filesystem"
                ) from None
            _fsync_directory(path.parent)
            self.created = True
        except sqlite3.Error as err:
            raise self.fail(f"cannot be created ({err})") from None
        finally:
            for leftover in (tmp, Path(f"{tmp}-journal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()

    def _initialise(
        self, conn: sqlite3.Connection, budget: Spendable, data: DataIdentity | None
    ) -> None:
        """Write the schema and meta rows into the new, private database ``conn``.

        The budget is stored in its two columns (``budget_rho`` holds ε for a
        PureDP or ApproxDP ledger), and a kind other than zCDP as ``model``,
        which the chain's root covers.
        """
        conn.execute("BEGIN IMMEDIATE")
        try:
            # executescript() would COMMIT first: run the statements one by one.
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            first, second = columns(budget)
            meta = {
                "format": FORMAT,
                "schema": str(SCHEMA_VERSION),
                "ledger_id": str(uuid.uuid4()),
                "created": now(),
                "budget_rho": ratio_text(first),
                "budget_delta": ratio_text(second),
            }
            if not isinstance(budget, zCDP):
                meta["model"] = model_name(type(budget))
            meta["genesis"] = genesis_hash(meta)
            meta["head"] = meta["genesis"]
            meta["count"] = "0"
            if data is not None:
                meta.update(data_meta(meta["genesis"], data))
            conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", meta.items())
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def load_meta(self, requested: Spendable | None) -> tuple[Spendable, str]:
        """The budget the file was created with, and its chain's genesis hash.

        Sets :attr:`kind`. ``requested`` None checks no budget (for an
        operator accepting a restored file).

        Raises:
            LedgerError: the meta table is malformed, ``requested`` is of
                another kind than the file's, or larger than the stored budget.
        """
        conn = self.connection()
        with self.sqlite("reading its meta table"):
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        try:
            if meta.get("format") != FORMAT or meta.get("schema") not in SCHEMA_NAMES:
                raise ValueError("format marker")
            stored = stored_budget(meta)
            genesis = genesis_hash(meta)
        except (KeyError, ValueError, TypeError, InvalidValueError) as err:
            raise self.corrupt(f"its meta table is malformed ({err})") from None
        if meta.get("genesis") != genesis:
            raise self.corrupt("its meta table does not match its recorded hash")
        self.kind = type(stored)
        if requested is None:
            return stored, genesis
        if type(requested) is not type(stored):
            mine, theirs = type(stored).__name__, type(requested).__name__
            hint = ""
            if isinstance(stored, zCDP) and not isinstance(requested, PureDP):
                # Before PureDP and ApproxDP accountants, such a budget was spent as zCDP.
                hint = (
                    f" (to keep spending this ledger with that budget, pass its zCDP "
                    f"allowance: {requested!r}.to_zcdp(), as privframe did before it had "
                    f"{theirs} sessions)"
                )
            raise self.fail(
                f"is {with_article(mine)} ledger (created with budget {stored!r}); it cannot "
                f"be opened with the {theirs} budget {requested!r}: a ledger keeps the kind "
                f"of budget it was created with. Pass {with_article(mine)} budget no larger "
                f"than {stored!r}{hint}, or use a new ledger file for the {theirs} budget"
            )
        asked, kept = columns(requested), columns(stored)
        if asked[0] > kept[0] or asked[1] > kept[1]:
            raise self.fail(
                f"was created with budget {stored!r}; it cannot be reopened with the larger "
                f"budget {requested!r} (a persisted ledger keeps its budget). Use a budget "
                f"no larger than {stored!r}, or a new ledger file for a new privacy budget"
            )
        return stored, genesis

    def settle_data(self, genesis: str, data: DataIdentity, same_data: bool) -> None:
        """Check ``data`` against the file's record; record it if there is none (or if same)."""
        with self.immediate("checking its record of the data") as conn:
            rows = conn.execute("SELECT key, value FROM meta WHERE key IN ('data', 'data_hash')")
            recorded = dict(rows.fetchall())
            if recorded:
                if data_meta(genesis, None, recorded.get("data")) != recorded:
                    raise self.corrupt("its record of the data does not match its hash")
                try:
                    previous = DataIdentity.from_json(recorded["data"])
                except ValueError as err:
                    raise self.corrupt(f"its record of the data is malformed ({err})") from None
                differences = data.differences(previous)
                if not differences:
                    return
                if not same_data:
                    raise self.fail(
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
                data_meta(genesis, data).items(),
            )

    # -- the connection, transactions and rows ----------------------------------

    def connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LedgerError("this ledger is closed; open a new one to keep spending")
        return self._conn

    @property
    def is_open(self) -> bool:
        """Whether this process holds its connection to the file (not closed)."""
        return self._conn is not None

    def close(self) -> None:
        """Close the connection (a no-op when closed)."""
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    @contextlib.contextmanager
    def reading(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One read transaction (a consistent view of the file) around the block."""
        with self.sqlite("reading it"):
            conn.execute("BEGIN")
            try:
                yield
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def immediate(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed if the block succeeds, else rolled back.

        ``doing`` names what a SQLite error in the block (or the lock) prevented.
        """
        conn = self.connection()
        with self.sqlite(doing, damage=False):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise

    @staticmethod
    def rows(conn: sqlite3.Connection, lo: int, hi: int | None) -> list[tuple[Any, ...]]:
        """The stored rows of entries ``lo`` to ``hi`` (inclusive; to the last when None)."""
        return conn.execute(
            "SELECT idx, time, label, rho, delta, description, seeded, hash FROM entries "
            "WHERE idx BETWEEN ? AND ? ORDER BY idx",
            (lo, 2**63 - 1 if hi is None else hi),
        ).fetchall()

    def scan(
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
                raise self.corrupt(f"entry {expected} is missing (found entry {idx} instead)")
            problem = ""
            try:
                cost = (cost_text(rho), cost_text(delta))
                if not (isinstance(time, str) and isinstance(label, str)) or flag not in (0, 1):
                    raise TypeError("malformed time, label or seeded flag")
                if not isinstance(description, str):
                    raise TypeError("malformed description")
                text = entry_json(idx, time, label, *cost, description, bool(flag))
                link = chain_link(prev, text)
            except (TypeError, ValueError) as err:
                problem = str(err)
            if problem:
                raise self.corrupt(f"entry {idx} is malformed ({problem})")
            if link != stored:
                raise self.corrupt(f"entry {idx} does not match its hash (the hash chain breaks)")
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
                (r, old_r), (d, old_d) = charge_value(rho_text), charge_value(delta_text)
                if old_r != old_d:
                    raise TypeError("rho and delta are stored differently")
                exact_cost(r, d, self.kind)
            except (TypeError, ValueError, InvalidValueError) as err:
                problem = str(err)
            if problem:
                raise self.corrupt(f"entry {first} is malformed ({problem})")
            parsed[rho_text, delta_text] = (r, d, old_r)
            rho += times * r
            delta += times * d
            if old_r:
                er, ed = float_excess(r, d)
                excess_rho += times * er
                excess_delta += times * ed
        return LedgerSummary(count, rho, delta, (excess_rho, excess_delta), seeded), parsed

    def entry(
        self, row: tuple[Any, ...], costs: Mapping[tuple[str, str], tuple[Fraction, Fraction, bool]]
    ) -> LedgerEntry:
        """The entry a stored row holds, once :meth:`_scan` checked it and parsed ``costs``."""
        idx, time, label, rho, delta, description, flag, _ = row
        cost = costs[cost_text(rho), cost_text(delta)]
        problem = ""
        try:
            return entry_from_file(idx, time, label, cost, description, bool(flag), self.kind)
        except ValueError as err:
            problem = str(err)
        raise self.corrupt(f"entry {idx} is malformed ({problem})")
