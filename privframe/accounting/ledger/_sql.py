"""The server's database: a SQLite file or a PostgreSQL database, its connections, transactions.

:class:`Database` opens either from one string (a file path, or a
``postgresql://`` URL), keeps a small pool of connections that threads
borrow one transaction at a time, and runs statements written once, with
``?`` placeholders, on both. Every driver failure becomes a
:class:`~privframe.errors.LedgerError` that says what was being done and
whether the database was busy, unreachable or refused, raised outside the
driver's ``except`` block, so no driver exception is chained to it.

Durability is the driver's: a SQLite file uses the rollback journal with
``synchronous=FULL`` (a commit is on disk, in the main file, when it
returns), PostgreSQL its default ``synchronous_commit=on``. psycopg (the
``[postgres]`` extra) is imported only when a ``postgresql://`` URL is opened.

Example:
    >>> import os, tempfile
    >>> from privframe.accounting.ledger import Database
    >>> with tempfile.TemporaryDirectory() as d:
    ...     db = Database(os.path.join(d, "server.db"))
    ...     with db.transaction("counting", write=False) as tx:
    ...         print(tx.one("SELECT 1 + ?", (1,)))
    ...     db.close()
    (2,)
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from privframe.accounting.ledger._sqlite import DEFAULT_TIMEOUT
from privframe.accounting.ledger._sqlite_codes import sqlite_condition
from privframe.errors import InvalidArgumentError, InvalidValueError, LedgerError

__all__ = ["SERVER_APPLICATION_ID", "Database", "Transaction", "is_postgres_url"]

SERVER_APPLICATION_ID = 0x50465356
"""``PRAGMA application_id`` of a privframe server database file (ASCII ``PFSV``)."""

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SCHEMA_LOCK = 0x5046_5356_0001
"""The PostgreSQL advisory lock that serialises creating the schema."""
_IDLE = 16
"""Connections a :class:`Database` keeps open between transactions."""


def is_postgres_url(url: str) -> bool:
    """Whether ``url`` names a PostgreSQL database (else it is a SQLite file path).

    Example:
        >>> is_postgres_url("postgresql://db.example/privframe"), is_postgres_url("x.db")
        (True, False)
    """
    return url.startswith(_POSTGRES_SCHEMES)


def _redacted(url: str) -> str:
    """``url`` without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


class Transaction:
    """One open transaction: statements with ``?`` placeholders, run on either database.

    Created by :meth:`Database.transaction`; a driver error becomes a
    :class:`~privframe.errors.LedgerError`.

    Example:
        >>> import os, tempfile
        >>> from privframe.accounting.ledger import Database
        >>> with tempfile.TemporaryDirectory() as d:
        ...     db = Database(os.path.join(d, "server.db"))
        ...     with db.transaction("trying", write=True) as tx:
        ...         _ = tx.run("CREATE TABLE t (x INTEGER)")
        ...         tx.many("INSERT INTO t VALUES (?)", [(1,), (2,)])
        ...         print(tx.run("SELECT x FROM t ORDER BY x"))
        ...     db.close()
        [(1,), (2,)]
    """

    __slots__ = ("_cursor", "_database", "_doing", "_started")

    def __init__(self, database: Database, cursor: Any, doing: str) -> None:
        self._database = database
        self._cursor = cursor
        self._doing = doing
        self._started = time.monotonic()

    @property
    def postgres(self) -> bool:
        """Whether the transaction runs on PostgreSQL (else on SQLite)."""
        return self._database.postgres

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (none for a statement that returns none)."""
        failure = None
        try:
            self._cursor.execute(self._database.spelled(sql), tuple(params))
            return (
                [tuple(row) for row in self._cursor.fetchall()] if self._cursor.description else []
            )
        except self._database.driver_errors as err:
            failure = self._database.failure(err, self._doing, self._started)
        raise failure

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """Run one query; its first row, or None."""
        rows = self.run(sql, params)
        return rows[0] if rows else None

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row of parameters."""
        for params in rows:
            self.run(sql, params)


class Database:
    """A SQLite file or a PostgreSQL database, with a pool of connections threads share.

    Args:
        url: a SQLite file path (created if absent; its directory must
            exist), or a ``postgresql://`` (or ``postgres://``) URL, which
            needs the ``[postgres]`` extra (psycopg 3).
        timeout: keyword only; seconds to wait for a lock or a connection
            before giving up with a "busy" :class:`~privframe.errors.LedgerError`.

    Attributes:
        url: the URL or path as given.
        postgres: whether it is a PostgreSQL database.
        id_column: the DDL of an auto-numbered ``BIGINT`` primary key column.

    Raises:
        LedgerError: the database cannot be opened or reached, or the file is
            a SQLite database of another application (a privframe ledger file
            included), or psycopg is not installed for a PostgreSQL URL.

    Example:
        >>> import os, tempfile
        >>> from privframe.accounting.ledger import Database
        >>> with tempfile.TemporaryDirectory() as d:
        ...     db = Database(os.path.join(d, "server.db"))
        ...     print(db.postgres, db)
        ...     db.close()  # doctest: +ELLIPSIS
        False Database('.../server.db')
    """

    def __init__(self, url: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not isinstance(url, str | os.PathLike):
            raise InvalidArgumentError(
                f"the database must be a file path or a postgresql:// URL, got {type(url).__name__}"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise InvalidValueError(f"timeout must be a positive number, got {timeout!r}")
        if not 0 < timeout < math.inf:
            raise InvalidValueError(f"timeout must be a positive number, got {timeout!r}")
        self.url = os.fspath(url)
        self.timeout = float(timeout)
        self.postgres = is_postgres_url(self.url)
        self._where = _redacted(self.url) if self.postgres else self.url
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        # SQLite locks the whole file: threads of this process queue here rather than
        # in SQLite's busy handler, which polls with sleeps.
        self._writer = threading.Lock()
        self._closed = False
        if self.postgres:
            self._psycopg = _import_psycopg()
            self.driver_errors: tuple[type[BaseException], ...] = (self._psycopg.Error,)
            self.id_column = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
        else:
            self._psycopg = None
            self.driver_errors = (sqlite3.Error,)
            self.id_column = "INTEGER PRIMARY KEY"
            if not self.url or "\x00" in self.url:
                raise LedgerError("the server database path is empty or holds a NUL character")
            if not Path(self.url).absolute().parent.is_dir():
                raise self._fail(f"directory {str(Path(self.url).parent)!r} does not exist")
        self._give(self._connect(), healthy=True)

    def __repr__(self) -> str:
        return f"Database({self._where!r})"

    # -- errors -------------------------------------------------------------------------

    def _fail(self, what: str) -> LedgerError:
        return LedgerError(f"server database {self._where!r}: {what}")

    def failure(self, err: BaseException, doing: str, started: float) -> LedgerError:
        """The LedgerError for driver error ``err`` while ``doing`` (begun at ``started``)."""
        waited = time.monotonic() - started
        busy = (
            f"{doing} failed: the database is busy (a lock was held for more than "
            f"{self.timeout:g} s; waited {waited:.3g} s). Nothing was recorded; retry"
        )
        if self.postgres:
            errors = self._psycopg.errors
            if isinstance(err, errors.LockNotAvailable | errors.QueryCanceled):
                return self._fail(busy)
            text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            if isinstance(err, self._psycopg.OperationalError):
                return self._fail(
                    f"{doing} failed: the database cannot be reached or refused ({text}). "
                    "Check that PostgreSQL is running and the URL; a spend in flight was "
                    "not returned"
                )
            return self._fail(f"{doing} failed ({type(err).__name__}: {text})")
        condition = sqlite_condition(err)
        if condition == "busy":
            return self._fail(busy)
        if condition == "unusable":
            return self._fail(
                f"{doing} failed: {err}. Check the disk, its free space and the file's "
                "permissions; nothing was recorded"
            )
        return self._fail(f"{doing} failed ({err})")

    # -- connections --------------------------------------------------------------------

    def _connect(self) -> Any:
        started = time.monotonic()
        failure = None
        try:
            return self._connect_postgres() if self.postgres else self._connect_sqlite()
        except self.driver_errors as err:
            failure = self.failure(err, "connecting", started)
        raise failure

    def _connect_sqlite(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.url, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            if app_id not in (0, SERVER_APPLICATION_ID):
                raise self._fail(
                    f"is a SQLite database of another application (application_id={app_id}), "
                    "not a privframe server database; choose another path"
                )
            # Rollback journal, not WAL: every commit is in the main file, so a copy of
            # that one file is a complete backup; FULL: fsync at every commit.
            mode = str(conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]).lower()
            if mode != "delete":
                raise self._fail(f"cannot use the rollback journal (journal_mode is {mode!r})")
            conn.execute("PRAGMA synchronous=FULL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect_postgres(self) -> Any:
        psycopg = self._psycopg
        assert psycopg is not None
        conn = psycopg.connect(self.url, autocommit=False, connect_timeout=int(self.timeout))
        conn.execute(f"SET lock_timeout = {int(self.timeout * 1000)}")
        conn.commit()
        return conn

    def _take(self) -> Any:
        with self._lock:
            if self._closed:
                raise self._fail("it is closed; open it again")
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _give(self, conn: Any, *, healthy: bool) -> None:
        with self._lock:
            if healthy and not self._closed and len(self._idle) < _IDLE:
                self._idle.append(conn)
                return
        with contextlib.suppress(*self.driver_errors):
            conn.close()

    def close(self) -> None:
        """Close every connection; later transactions raise LedgerError (a no-op when closed).

        Example:
            >>> import os, tempfile
            >>> from privframe.accounting.ledger import Database
            >>> with tempfile.TemporaryDirectory() as d:
            ...     Database(os.path.join(d, "server.db")).close()
        """
        with self._lock:
            self._closed, idle, self._idle = True, self._idle, []
        for conn in idle:
            with contextlib.suppress(*self.driver_errors):
                conn.close()

    def spelled(self, sql: str) -> str:
        """``sql`` with the driver's placeholders (``%s`` for psycopg)."""
        return sql.replace("?", "%s") if self.postgres else sql

    # -- transactions -------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, doing: str, *, write: bool) -> Iterator[Transaction]:
        """One transaction on a pooled connection: committed if the block succeeds, else undone.

        A SQLite write transaction is ``BEGIN IMMEDIATE`` (it holds the
        file's write lock from the start, so it serialises with every other
        writer); a PostgreSQL one serialises where its statements lock rows
        (``SELECT ... FOR UPDATE``). The commit is durable when the block's
        ``with`` statement ends. ``doing`` names what an error prevented.
        """
        with self._serialised(write, doing):
            conn = self._take()
            tx = Transaction(self, conn.cursor(), doing)
            healthy = False
            try:
                if not self.postgres:
                    tx.run("BEGIN IMMEDIATE" if write else "BEGIN")
                yield tx
                self._commit(conn, tx)
                healthy = True
            except BaseException:
                with contextlib.suppress(*self.driver_errors):
                    conn.rollback() if self.postgres else conn.execute("ROLLBACK")
                    healthy = not self.postgres or conn.info.transaction_status == 0
                raise
            finally:
                self._give(conn, healthy=healthy)

    def _commit(self, conn: Any, tx: Transaction) -> None:
        if not self.postgres:
            tx.run("COMMIT")
            return
        failure = None
        try:
            conn.commit()
            return
        except self.driver_errors as err:
            failure = self.failure(err, tx._doing, tx._started)
        raise failure

    @contextlib.contextmanager
    def _serialised(self, write: bool, doing: str) -> Iterator[None]:
        if self.postgres or not write:
            yield
            return
        if not self._writer.acquire(timeout=self.timeout):
            raise self._fail(f"{doing} failed: the database is busy (other threads held it)")
        try:
            yield
        finally:
            self._writer.release()

    def ensure_schema(
        self,
        component: str,
        version: int,
        statements: Sequence[str],
        migrations: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        """Create ``component``'s tables at ``version``, or bring older ones to it; refuse newer.

        Idempotent and safe when several processes open a new database at
        once: creation (or migration) is one transaction under the database's
        write lock (SQLite) or an advisory lock (PostgreSQL). ``statements``
        are the ``CREATE TABLE`` statements, run only when the component is
        new. ``migrations[v]`` are the statements that take the component's
        tables from version ``v`` to ``v + 1``; tables of an older version are
        migrated step by step in that one transaction (all steps or none), and
        ``pf_schema`` then records ``version``.

        Raises:
            LedgerError: the database holds ``component`` at a newer version, or
                at an older one that ``migrations`` cannot bring up to date.

        Example:
            >>> import os, tempfile
            >>> from privframe.accounting.ledger import Database
            >>> with tempfile.TemporaryDirectory() as d:
            ...     db = Database(os.path.join(d, "server.db"))
            ...     for _ in range(2):
            ...         db.ensure_schema("example", 1, ["CREATE TABLE pf_example (x TEXT)"])
            ...     db.ensure_schema("example", 2, ["CREATE TABLE pf_example (x TEXT, y TEXT)"],
            ...                      {1: ["ALTER TABLE pf_example ADD COLUMN y TEXT"]})
            ...     with db.transaction("reading", write=False) as tx:
            ...         print(tx.run("SELECT x, y FROM pf_example"))
            ...     db.close()
            []
        """
        with self.transaction(f"creating the {component} tables", write=True) as tx:
            if self.postgres:
                tx.run("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
            else:
                tx.run(f"PRAGMA application_id={SERVER_APPLICATION_ID}")
            tx.run(
                "CREATE TABLE IF NOT EXISTS pf_schema "
                "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            row = tx.one("SELECT version FROM pf_schema WHERE component = ?", (component,))
            if row is None:
                for statement in statements:
                    tx.run(statement)
                tx.run("INSERT INTO pf_schema(component, version) VALUES (?, ?)",
                       (component, version))  # fmt: skip
            elif row[0] != version:
                steps = migrations or {}
                found = row[0]
                if not (isinstance(found, int) and 0 < found < version) or any(
                    step not in steps for step in range(found, version)
                ):
                    raise self._fail(
                        f"holds {component} tables of schema version {found}, which this "
                        f"privframe does not know (it writes version {version}); upgrade "
                        "privframe"
                    )
                for step in range(found, version):
                    for statement in steps[step]:
                        tx.run(statement)
                tx.run("UPDATE pf_schema SET version = ? WHERE component = ?", (version, component))


def _import_psycopg() -> Any:
    """psycopg, imported only for a PostgreSQL URL (the ``[postgres]`` extra)."""
    try:
        import psycopg
    except ImportError:
        pass
    else:
        return psycopg
    raise LedgerError("a postgresql:// database needs psycopg 3: pip install 'privframe[postgres]'")
