"""A ledger file and the server's database read a SQLite error's result code alike.

Busy (a lock held too long), unusable (the disk, the system or the process
refusing: nothing damaged) or another error, which a ledger file reports as
damage. The two kept separate lists of codes once and drifted (a full memory
or an interrupted call was "damage" to one and "check the disk" to the other).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from privframe.accounting.ledger._file import LedgerFile
from privframe.accounting.ledger._sql import Database
from privframe.errors import LedgerError

CODES = [
    (sqlite3.SQLITE_BUSY, "busy"),
    (sqlite3.SQLITE_LOCKED, "busy"),
    (sqlite3.SQLITE_IOERR_SHORT_READ, "unusable"),  # an extended code: its primary decides
    (sqlite3.SQLITE_FULL, "unusable"),
    (sqlite3.SQLITE_NOMEM, "unusable"),
    (sqlite3.SQLITE_INTERRUPT, "unusable"),
    (sqlite3.SQLITE_AUTH, "unusable"),
    (sqlite3.SQLITE_CORRUPT, None),
    (sqlite3.SQLITE_NOTADB, None),
]
WORDS = {"busy": "busy", "unusable": "Check the disk"}


def _error(code: int) -> sqlite3.OperationalError:
    err = sqlite3.OperationalError("a SQLite error")
    err.sqlite_errorcode = code  # type: ignore[attr-defined]
    err.sqlite_errorname = "SQLITE_TEST"  # type: ignore[attr-defined]
    return err


@pytest.mark.parametrize(("code", "condition"), CODES)
def test_a_ledger_file_and_the_server_database_read_a_code_alike(
    tmp_path: Path, code: int, condition: str | None
) -> None:
    with (
        pytest.raises(LedgerError) as raised,
        LedgerFile(tmp_path / "x.ledger", 1.0).sqlite("reading"),
    ):
        raise _error(code)
    from_file = str(raised.value)
    database = Database(str(tmp_path / "server.db"), timeout=1.0)
    from_database = str(database.failure(_error(code), "reading", time.monotonic()))
    for other, words in WORDS.items():
        assert (words in from_file) == (other == condition), from_file
        assert (words in from_database) == (other == condition), from_database
    assert ("is damaged or was modified" in from_file) == (condition is None)
