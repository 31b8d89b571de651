"""What a SQLite error's result code says: a lock held too long, or a database unusable here.

Ledger files (:class:`~privframe.accounting.ledger._file.LedgerFile`) and the
server's database (:class:`~privframe.accounting.ledger._sql.Database`) both
tell these two apart from other errors, which in a ledger file mean damage.

Example:
    >>> import sqlite3
    >>> from privframe.accounting.ledger._sqlite_codes import sqlite_condition
    >>> full = sqlite3.OperationalError("database or disk is full")
    >>> full.sqlite_errorcode = sqlite3.SQLITE_FULL
    >>> sqlite_condition(full), sqlite_condition(sqlite3.DatabaseError("no code"))
    ('unusable', None)
"""

from __future__ import annotations

import sqlite3
from typing import Literal

__all__ = ["BUSY", "UNUSABLE", "sqlite_condition"]

BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
"""A lock held by another connection for longer than the timeout: retry later."""

UNUSABLE = frozenset(
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
"""The disk, the operating system or the process refusing (permissions, space, memory,
I/O, an interrupted call): the database cannot be used here and now, and is not damaged.
Every other code (CORRUPT, NOTADB, SCHEMA, CONSTRAINT, ...) is about the file's contents."""


def sqlite_condition(err: BaseException) -> Literal["busy", "unusable"] | None:
    """``"busy"``, ``"unusable"`` or None (another error) by the error's primary result code."""
    code = getattr(err, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF  # an extended code keeps it in its low byte
    if primary in BUSY:
        return "busy"
    if primary in UNUSABLE:
        return "unusable"
    return None
