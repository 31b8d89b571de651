"""A ledger under faults: a lock held by another program, unusable paths, bad knobs.

A busy ledger must say "busy, retry", never "damaged, restore from a backup"
(following that advice would roll back recorded spends), and record nothing.
"""

from __future__ import annotations

import math
import os
import sqlite3
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant, Spend
from privframe.accounting.ledger import SQLiteLedger
from privframe.errors import InvalidArgumentError, InvalidValueError, LedgerError

BUDGET = pf.zCDP(1.0)
SHORT = 0.05  # seconds: the lock below is never released while a test waits on it


@contextmanager
def _held_exclusively(path: Path) -> Iterator[None]:
    """Another program holding the file's lock (as a SQLite shell in BEGIN EXCLUSIVE does)."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def _assert_busy(err: pytest.ExceptionInfo[LedgerError]) -> None:
    message = str(err.value)
    assert "is busy: another process holds a lock on it" in message
    assert f"the limit is {SHORT:g} s" in message
    assert "waiting" in message
    assert "not damaged" in message
    assert "retry" in message
    assert "damaged or was modified" not in message
    assert "Restore it from a backup" not in message


def test_opening_a_locked_ledger_says_busy(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    SQLiteLedger(path, BUDGET).close()
    with _held_exclusively(path), pytest.raises(LedgerError) as err:
        SQLiteLedger(path, BUDGET, timeout=SHORT)
    _assert_busy(err)


@pytest.mark.parametrize(
    "use",
    [
        lambda ledger: ledger.append(0.25),
        lambda ledger: ledger.append_all([Spend(pf.zCDP(0.25))]),
        lambda ledger: ledger.totals(),
        lambda ledger: len(ledger),
        lambda ledger: ledger.entries,
        lambda ledger: ledger.verify(),
    ],
    ids=["append", "append_all", "totals", "len", "entries", "verify"],
)
def test_using_a_locked_ledger_says_busy_and_records_nothing(tmp_path: Path, use) -> None:
    path = tmp_path / "spend.ledger"
    with SQLiteLedger(path, BUDGET, timeout=SHORT) as ledger:
        ledger.append(0.125)
        with _held_exclusively(path), pytest.raises(LedgerError) as err:
            use(ledger)
        _assert_busy(err)
        assert ledger.totals()[0] == Fraction(1, 8)
        ledger.append(0.125)  # usable again once the lock is released
    with SQLiteLedger(path, BUDGET) as ledger:
        assert [e.rho for e in ledger.entries] == [0.125, 0.125]


def test_reading_entries_of_a_locked_ledger_says_busy(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    with SQLiteLedger(path, BUDGET, timeout=SHORT) as ledger:
        ledger.append(0.125)
        entries = ledger.entries
        with _held_exclusively(path), pytest.raises(LedgerError) as err:
            entries[0]
        _assert_busy(err)
        assert entries[0].rho == 0.125


@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf, "1", True, None])
def test_timeout_must_be_a_positive_number(tmp_path: Path, timeout: object) -> None:
    with pytest.raises(InvalidValueError, match="timeout must be a positive number"):
        SQLiteLedger(tmp_path / "spend.ledger", BUDGET, timeout=timeout)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("spend\x00.ledger", "contains a NUL character"),
        ("", "the ledger path is empty"),
        ("x" * 300, "File name too long"),
    ],
    ids=["nul", "empty", "too-long"],
)
def test_an_unusable_path_is_a_ledger_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, match: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LedgerError, match=match):
        SQLiteLedger(name, BUDGET)
    with pytest.raises(LedgerError, match=match):
        Accountant(BUDGET, name)
    assert list(tmp_path.iterdir()) == []


def test_a_nul_in_a_path_object_is_a_ledger_error(tmp_path: Path) -> None:
    class Named(os.PathLike[str]):
        def __fspath__(self) -> str:
            return str(tmp_path / "a\x00b")

    with pytest.raises(LedgerError, match="NUL"):
        Accountant(BUDGET, Named())


def test_a_bytes_path_is_refused_by_type(tmp_path: Path) -> None:
    class Raw(os.PathLike[bytes]):
        def __fspath__(self) -> bytes:
            return os.fsencode(tmp_path / "a.ledger")

    with pytest.raises(InvalidArgumentError, match="got a bytes path"):
        SQLiteLedger(Raw(), BUDGET)  # type: ignore[arg-type]


def test_a_path_under_a_file_is_a_ledger_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(LedgerError, match="does not exist"):
        SQLiteLedger(blocker / "spend.ledger", BUDGET)


def test_a_path_that_is_not_valid_unicode_works(tmp_path: Path) -> None:
    path = tmp_path / os.fsdecode(b"spend-\xff.ledger")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its record is kept too
        ledger = SQLiteLedger(path, BUDGET)
    with ledger:
        ledger.append(0.25)
        entries = ledger.entries
    assert entries[0].rho == 0.25  # read back through a read-only connection
    with SQLiteLedger(path, BUDGET) as ledger:
        assert len(ledger) == 1
