"""The per-user record of known ledgers: rollbacks refused, missing ledgers warned, limits.

Every test gets its own state directory (the root conftest sets
PRIVFRAME_STATE_DIR); "another user" is a second, empty state directory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import sys
import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.accounting.ledger import (
    STATE_DIR_ENV,
    LedgerEntry,
    LedgerMissingWarning,
    LedgerStateWarning,
    SQLiteLedger,
    accept_restored,
    state_file,
)
from privframe.errors import LedgerError

BUDGET = pf.zCDP(1.0)


def _spend(path: Path, *costs: float) -> None:
    with SQLiteLedger(path, BUDGET) as ledger:
        for i, cost in enumerate(costs):
            ledger.append(cost, label=f"q{i}")


def _as_another_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "another-user"))


def _sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    conn.close()


def _truncate_with_plain_sql(path: Path, keep: int) -> None:
    """Delete the entries from ``keep`` on and rewrite the head to match: no hash computed."""
    conn = sqlite3.connect(path, isolation_level=None)
    head = conn.execute("SELECT hash FROM entries WHERE idx = ?", (keep - 1,)).fetchone()[0]
    conn.execute("DELETE FROM entries WHERE idx >= ?", (keep,))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head'", (head,))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'count'", (str(keep),))
    conn.close()


def _rewrite_entry_and_rechain(path: Path, idx: int, rho: str) -> None:
    """Change one entry's rho and recompute every hash after it, and the head."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE entries SET rho = ? WHERE idx = ?", (rho, idx))
    prev = conn.execute("SELECT value FROM meta WHERE key = 'genesis'").fetchone()[0]
    rows = conn.execute(
        "SELECT idx, time, label, rho, delta, description, seeded FROM entries ORDER BY idx"
    ).fetchall()
    for i, time, label, r, d, description, seeded in rows:
        entry = LedgerEntry.from_dict(
            {
                "index": i,
                "time": time,
                "label": label,
                "rho": r,
                "delta": d,
                "description": json.loads(description),
                "seeded": bool(seeded),
            }
        )
        prev = hashlib.sha256(bytes.fromhex(prev) + entry.canonical_json().encode()).hexdigest()
        conn.execute("UPDATE entries SET hash = ? WHERE idx = ?", (prev, i))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'head'", (prev,))
    conn.close()


# --------------------------------------------------------------------------- rollbacks


def test_an_older_copy_put_back_is_refused_as_rolled_back(tmp_path: Path) -> None:
    path, backup = tmp_path / "spend.ledger", tmp_path / "backup.ledger"
    _spend(path, 0.25)
    shutil.copyfile(path, backup)
    _spend(path, 0.5)
    shutil.copyfile(backup, path)
    with pytest.raises(LedgerError, match="rolled back") as err:
        SQLiteLedger(path, BUDGET)
    message = str(err.value)
    assert "entry 1, which privframe verified before (when the ledger had 2 entries, " in message
    assert "spending rho=0.75, delta=0)" in message
    assert f"privframe.accounting.ledger.accept_restored({str(path)!r})" in message
    with pytest.raises(LedgerError, match="rolled back"):
        Accountant(BUDGET, path)


def test_accept_restored_takes_the_file_as_it_is(tmp_path: Path) -> None:
    path, backup = tmp_path / "spend.ledger", tmp_path / "backup.ledger"
    _spend(path, 0.25)
    shutil.copyfile(path, backup)
    _spend(path, 0.5)
    shutil.copyfile(backup, path)
    summary = accept_restored(path)
    assert (summary.count, summary.rho) == (1, Fraction(1, 4))
    with SQLiteLedger(path, BUDGET) as ledger:
        assert ledger.totals()[0] == Fraction(1, 4)
        ledger.append(0.125)
    with SQLiteLedger(path, BUDGET) as ledger:  # the record follows the ledger again
        assert len(ledger) == 2


def test_accept_restored_needs_an_existing_sound_ledger(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="does not exist"):
        accept_restored(tmp_path / "nope.ledger")
    assert not (tmp_path / "nope.ledger").exists()
    path = tmp_path / "spend.ledger"
    _spend(path, 0.25, 0.25)
    _sql(path, "UPDATE entries SET rho = '0/1' WHERE idx = 0")
    with pytest.raises(LedgerError, match="entry 0 does not match its hash"):
        accept_restored(path)


def test_plain_sql_truncation_is_refused_as_rolled_back(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    _spend(path, 0.25, 0.25, 0.25)
    _truncate_with_plain_sql(path, keep=1)
    with pytest.raises(LedgerError, match="rolled back"):
        SQLiteLedger(path, BUDGET)


def test_plain_sql_truncation_is_not_detected_by_a_user_who_never_opened_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the chain alone cannot prove (docs/operations.md): the file's head is
    # rewritable by whoever can write the file.
    path = tmp_path / "spend.ledger"
    _spend(path, 0.25, 0.25, 0.25)
    _truncate_with_plain_sql(path, keep=1)
    _as_another_user(monkeypatch, tmp_path)
    with SQLiteLedger(path, BUDGET) as ledger:
        assert ledger.totals()[0] == Fraction(1, 4)


def test_a_rechained_edit_is_refused_by_a_user_who_saw_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "spend.ledger"
    _spend(path, 0.25, 0.5)
    _rewrite_entry_and_rechain(path, 0, "0/1")
    with pytest.raises(LedgerError, match="rolled back"):
        SQLiteLedger(path, BUDGET)
    _as_another_user(monkeypatch, tmp_path)  # the chain alone cannot tell
    with SQLiteLedger(path, BUDGET) as ledger:
        assert ledger.totals()[0] == Fraction(1, 2)


def test_rollback_while_open_is_refused(tmp_path: Path) -> None:
    path, backup = tmp_path / "spend.ledger", tmp_path / "backup.ledger"
    with SQLiteLedger(path, BUDGET) as ledger:
        ledger.append(0.25)
        shutil.copyfile(path, backup)
        ledger.append(0.25)
        shutil.copyfile(backup, path)
        with pytest.raises(LedgerError, match="rolled back"):
            ledger.append(0.25)
        with pytest.raises(LedgerError, match="rolled back"):
            ledger.totals()


def test_entries_added_by_others_are_verified_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    _spend(path, 0.25)
    with SQLiteLedger(path, BUDGET) as mine, SQLiteLedger(path, BUDGET) as theirs:
        theirs.append(0.125, label="theirs")
        assert mine.totals()[0] == Fraction(3, 8)
    _sql(path, "UPDATE entries SET label = 'edited' WHERE idx = 1")
    with pytest.raises(LedgerError, match="entry 1 does not match its hash"):
        SQLiteLedger(path, BUDGET)


def test_a_lowered_total_in_the_state_file_is_caught_by_verify(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    _spend(path, 0.25, 0.5)
    conn = sqlite3.connect(state_file(), isolation_level=None)
    (text,) = conn.execute("SELECT summary FROM ledgers").fetchone()
    conn.execute("UPDATE ledgers SET summary = ?", (text.replace('"3/4"', '"0/1"'),))
    conn.close()
    with SQLiteLedger(path, BUDGET) as ledger, pytest.raises(LedgerError, match="add up to"):
        ledger.verify()


# --------------------------------------------------------------------------- missing ledgers


def test_a_deleted_ledger_warns_with_the_spend_it_held(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    _spend(path, 0.25, 0.5)
    path.unlink()
    with pytest.warns(LedgerMissingWarning) as caught:
        acct = Accountant(BUDGET, path)
    message = str(caught[0].message)
    assert "2 entries spending rho=0.75" in message
    assert "a new, empty ledger was created here" in message
    assert "full budget" in message
    assert acct.remaining == BUDGET
    acct.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Accountant(BUDGET, path).close()  # given once


def test_another_ledger_moved_into_a_known_path_warns(tmp_path: Path) -> None:
    path, other = tmp_path / "spend.ledger", tmp_path / "other.ledger"
    _spend(path, 0.5)
    _spend(other, 0.125)
    shutil.move(other, path)
    with pytest.warns(LedgerMissingWarning, match="this is another ledger"):
        SQLiteLedger(path, BUDGET).close()


def test_a_moved_ledger_keeps_its_spends_at_its_new_path(tmp_path: Path) -> None:
    path, moved = tmp_path / "spend.ledger", tmp_path / "moved.ledger"
    _spend(path, 0.5)
    shutil.move(path, moved)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with SQLiteLedger(moved, BUDGET) as ledger:
            assert ledger.totals()[0] == Fraction(1, 2)
    with pytest.warns(LedgerMissingWarning):
        SQLiteLedger(path, BUDGET).close()


# --------------------------------------------------------------------------- the state file


def test_every_open_and_append_updates_the_record(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"

    def recorded() -> int:
        conn = sqlite3.connect(state_file())
        (count,) = conn.execute(
            "SELECT count FROM ledgers WHERE path = ?", (str(path.resolve()),)
        ).fetchone()
        conn.close()
        return count

    with SQLiteLedger(path, BUDGET) as ledger:
        assert recorded() == 0
        ledger.append(0.25)
        assert recorded() == 1
        ledger.append_all([])
        assert recorded() == 1


def test_an_unusable_state_dir_warns_once_and_ledgers_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(STATE_DIR_ENV, str(blocker / "state"))
    path = tmp_path / "spend.ledger"
    with pytest.warns(LedgerStateWarning, match="cannot keep its record of known ledgers"):
        ledger = SQLiteLedger(path, BUDGET)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ledger.append(0.25)
        ledger.close()
        with SQLiteLedger(path, BUDGET) as again:
            assert again.totals()[0] == Fraction(1, 4)


def test_a_state_file_that_is_not_sqlite_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "known-ledgers.sqlite").write_bytes(b"garbage, not a database" * 100)
    monkeypatch.setenv(STATE_DIR_ENV, str(state))
    with pytest.warns(LedgerStateWarning, match="PRIVFRAME_STATE_DIR"):
        SQLiteLedger(tmp_path / "spend.ledger", BUDGET).close()


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the XDG layout is POSIX's")
def test_default_state_file_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STATE_DIR_ENV)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_file() == tmp_path / "xdg" / "privframe" / "known-ledgers.sqlite"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    assert state_file() == tmp_path / "home" / ".local" / "state" / "privframe" / (
        "known-ledgers.sqlite"
    )
