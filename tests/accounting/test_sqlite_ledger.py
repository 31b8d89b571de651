"""The SQLite ledger of privframe.accounting.ledger: its file, reopening, tampering, threads."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from fractions import Fraction
from pathlib import Path

import pytest

from privframe.accounting.accountant import Spend
from privframe.accounting.budgets import zCDP
from privframe.accounting.ledger import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    SQLiteLedger,
)
from privframe.errors import (
    InvalidArgumentError,
    LedgerError,
)


def _ledger(path: Path, rho: float = 1.0, delta: float = 0.0) -> SQLiteLedger:
    return SQLiteLedger(path, zCDP(rho, delta))


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


class TestSQLiteLedger:
    def test_create_and_reopen(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        values = [0.1, 0.30000000000000004, 1e-300, 5e-324, 0.125]
        with _ledger(path) as ledger:
            written = [
                ledger.append(v, label=f"q{i}", description={"i": i}) for i, v in enumerate(values)
            ]
            assert ledger.path == path
        with _ledger(path) as ledger:
            assert ledger.entries == tuple(written)
            assert [e.rho for e in ledger.entries] == values
            assert ledger.totals()[0] == sum(Fraction(repr(v)) for v in values)
            assert ledger.budget == zCDP(1.0)
        conn = _raw(path)
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        conn.close()

    def test_durability_pragmas(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:
            ledger.append(0.1)
            conn = (
                ledger._file.connection()
            )  # the ledger's own connection: pragmas are per connection
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
            # a rollback-journal (not WAL) database: file format bytes 18-19 are 1, 1
            assert path.read_bytes()[18:20] == b"\x01\x01"
            assert not Path(f"{path}-wal").exists()

    def test_main_file_alone_holds_every_entry(self, tmp_path: Path) -> None:
        # A backup made while the ledger is open (or a copy after a crash) that
        # takes only the main file must still hold every committed spend.
        path = tmp_path / "a.ledger"
        copy = tmp_path / "copy.ledger"
        with _ledger(path) as ledger:
            written = [ledger.append(0.3, label=f"q{i}") for i in range(3)]
            copy.write_bytes(path.read_bytes())
        with _ledger(copy) as again:
            assert again.entries == tuple(written)
            assert again.totals()[0] == Fraction(9, 10)

    def test_reopen_converts_a_wal_ledger(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:
            ledger.append(0.25)
        conn = _raw(path)
        assert conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        conn.close()
        with _ledger(path) as ledger:
            ledger.append(0.25)
            conn = ledger._file.connection()
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert path.read_bytes()[18:20] == b"\x01\x01"

    def test_truncated_ledger_is_not_a_new_one(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:
            ledger.append(0.9)
        path.write_bytes(b"")
        with pytest.raises(LedgerError, match="exists but is not a privframe ledger"):
            _ledger(path)
        assert path.read_bytes() == b""  # never initialised

    def test_existing_empty_file_is_not_initialised(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        path.touch()
        with pytest.raises(LedgerError, match="exists but is not a privframe ledger"):
            _ledger(path)
        assert path.read_bytes() == b""

    def test_sqlite_file_without_tables_is_refused(self, tmp_path: Path) -> None:
        # e.g. a copy of the main file of a WAL-mode ledger whose data was in the -wal file
        path = tmp_path / "a.ledger"
        conn = _raw(path)
        conn.execute("VACUUM")
        conn.close()
        before = path.read_bytes()
        assert before.startswith(b"SQLite format 3\x00")
        with pytest.raises(LedgerError, match="exists but is not a privframe ledger"):
            _ledger(path)
        assert path.read_bytes() == before

    def test_concurrent_creation(self, tmp_path: Path) -> None:
        # Many handles race to create one file: exactly one ledger results.
        path = tmp_path / "a.ledger"
        n = 8
        barrier = threading.Barrier(n)
        opened: list[SQLiteLedger] = []
        errors: list[BaseException] = []

        def open_it() -> None:
            barrier.wait()
            try:
                opened.append(_ledger(path))
            except BaseException as err:  # pragma: no cover - reported below
                errors.append(err)

        threads = [threading.Thread(target=open_it) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(opened) == n
        opened[0].append(0.5)
        for ledger in opened:
            assert ledger.totals()[0] == Fraction(1, 2)
            ledger.close()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ledger"]

    def test_entry_times_are_utc_iso(self, tmp_path: Path) -> None:
        from datetime import datetime, timedelta

        with _ledger(tmp_path / "a.ledger") as ledger:
            e = ledger.append(0.1)
        t = datetime.fromisoformat(e.time)
        assert t.utcoffset() == timedelta(0)

    def test_two_handles_see_each_other(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as a, _ledger(path) as b:
            a.append(0.25)
            b.append(0.25)
            a.append(0.25)
            assert a.totals()[0] == b.totals()[0] == Fraction(3, 4)
            assert [e.index for e in b.entries] == [0, 1, 2]

    def test_check_sees_other_handles_spends(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as a, _ledger(path) as b:
            a.append(0.5)
            seen = []
            b.append(0.1, check=lambda r, d: seen.append(r))
            assert seen == [Fraction(0.5)]

    def test_append_all_is_one_transaction(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as a, _ledger(path) as b:
            a.append(0.25, label="first")
            written = b.append_all([Spend(zCDP(0.25), "x"), Spend(zCDP(0.125), "y")])
            before = path.read_bytes()

            def refuse(rho: Fraction, delta: Fraction) -> None:
                raise RuntimeError("over")

            with pytest.raises(RuntimeError):
                a.append_all([Spend(zCDP(0.1), "z"), Spend(zCDP(0.1), "w")], check=refuse)
            assert path.read_bytes() == before
            assert a.totals()[0] == Fraction(5, 8)
        with _ledger(path) as ledger:
            assert list(ledger.entries)[1:] == written
            assert [e.label for e in ledger.entries] == ["first", "x", "y"]

    def test_refused_append_leaves_file_unchanged(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:
            ledger.append(0.5)

            def refuse(rho: Fraction, delta: Fraction) -> None:
                raise RuntimeError("over")

            with pytest.raises(RuntimeError):
                ledger.append(0.6, check=refuse)
            ledger.append(0.1)
        with _ledger(path) as ledger:
            assert [e.rho for e in ledger.entries] == [0.5, 0.1]

    def test_larger_budget_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        _ledger(path, 1.0, 1e-6).close()
        with pytest.raises(LedgerError, match="a persisted ledger keeps its budget") as err:
            _ledger(path, 1.5, 1e-6)
        assert "rho=1.0" in str(err.value)
        assert "rho=1.5" in str(err.value)
        with pytest.raises(LedgerError, match="keeps its budget"):
            _ledger(path, 1.0, 1e-5)
        with _ledger(path, 0.5, 0.0) as ledger:  # smaller: allowed
            assert ledger.budget == zCDP(1.0, 1e-6)

    def test_missing_directory(self, tmp_path: Path) -> None:
        with pytest.raises(LedgerError, match="does not exist"):
            _ledger(tmp_path / "nope" / "a.ledger")

    def test_argument_types(self, tmp_path: Path) -> None:
        with pytest.raises(InvalidArgumentError, match="budget"):
            SQLiteLedger(tmp_path / "a.ledger", 1.0)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="path"):
            SQLiteLedger(b"a.ledger", zCDP(1.0))  # type: ignore[arg-type]
        assert list(tmp_path.iterdir()) == []

    def test_directory_path(self, tmp_path: Path) -> None:
        with pytest.raises(LedgerError, match="not a regular file"):
            _ledger(tmp_path)

    @pytest.mark.parametrize(
        "content",
        [os.urandom(4096), b"hello, this is a text file\n" * 10],
        ids=["random-bytes", "text"],
    )
    def test_not_sqlite(self, tmp_path: Path, content: bytes) -> None:
        path = tmp_path / "a.ledger"
        path.write_bytes(content)
        with pytest.raises(LedgerError, match="not a SQLite database"):
            _ledger(path)
        assert path.read_bytes() == content  # never reset

    def test_other_application_db(self, tmp_path: Path) -> None:
        path = tmp_path / "other.db"
        conn = _raw(path)
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.close()
        before = path.read_bytes()
        with pytest.raises(LedgerError, match="another application"):
            _ledger(path)
        assert path.read_bytes() == before

    def test_other_application_id(self, tmp_path: Path) -> None:
        path = tmp_path / "other.db"
        conn = _raw(path)
        conn.execute("PRAGMA application_id=1234")
        conn.close()
        with pytest.raises(LedgerError, match="application_id=1234"):
            _ledger(path)

    def test_unknown_schema_version(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        _ledger(path).close()
        conn = _raw(path)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
        conn.close()
        with pytest.raises(LedgerError, match="schema version"):
            _ledger(path)

    def _two_entries(self, path: Path, *, then: str = "") -> None:
        """A ledger of two entries at ``path``, then the SQL statement ``then`` run on it."""
        with _ledger(path) as ledger:
            ledger.append(0.5, label="a")
            ledger.append(0.25, label="b")
        if then:
            conn = _raw(path)
            conn.execute(then)
            conn.close()

    _EARLIER = (
        "UPDATE entries SET rho = 0.0 WHERE idx = 0",
        "UPDATE entries SET label = 'x' WHERE idx = 0",
        "UPDATE entries SET rho = 'abc' WHERE idx = 0",
    )
    _LAST = (
        "UPDATE entries SET rho = 0.0 WHERE idx = 1",
        "UPDATE entries SET seeded = 1 WHERE idx = 1",
        "UPDATE entries SET description = '\"x\"' WHERE idx = 1",
        "DELETE FROM entries WHERE idx = 0",
        "DELETE FROM entries WHERE idx = 1",
        "UPDATE meta SET value = '1' WHERE key = 'count'",
        "UPDATE meta SET value = '9.0' WHERE key = 'budget_rho'",
    )

    @pytest.mark.parametrize("sql", _EARLIER + _LAST)
    def test_tampering_detected_on_first_open(
        self, tmp_path: Path, sql: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A user who never opened the ledger (no record of it) verifies it in full.
        path = tmp_path / "a.ledger"
        self._two_entries(path, then=sql)
        monkeypatch.setenv("PRIVFRAME_STATE_DIR", str(tmp_path / "another-user"))
        with pytest.raises(LedgerError, match="modified outside privframe"):
            _ledger(path, 0.5)

    @pytest.mark.parametrize("sql", _LAST)
    def test_tampering_with_the_last_entry_detected_on_reopen(
        self, tmp_path: Path, sql: str
    ) -> None:
        path = tmp_path / "a.ledger"
        self._two_entries(path, then=sql)
        with pytest.raises(LedgerError, match="modified outside privframe"):
            _ledger(path, 0.5)

    @pytest.mark.parametrize("sql", _EARLIER)
    def test_tampering_with_an_earlier_entry_found_when_read_and_by_verify(
        self, tmp_path: Path, sql: str
    ) -> None:
        # A reopen checks the entry it verified last, not each earlier one; the
        # totals it enforces are the ones it verified, whatever an edit says.
        path = tmp_path / "a.ledger"
        self._two_entries(path, then=sql)
        with _ledger(path) as ledger:
            assert ledger.totals() == (Fraction(3, 4), Fraction(0))
            with pytest.raises(LedgerError, match="modified outside privframe"):
                ledger.entries[0]
            with pytest.raises(LedgerError, match="modified outside privframe"):
                list(ledger.entries)
            with pytest.raises(LedgerError, match="modified outside privframe"):
                ledger.verify()

    def test_a_non_canonical_description_is_refused_when_read(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Even with its hash recomputed, for a user who never saw the ledger (one who
        # did refuses it as rolled back): an entry's text has exactly one spelling.
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:
            entry = ledger.append(0.5, description={"a": 1, "b": 2})
        loose = '{"b": 2, "a": 1}'
        conn = _raw(path)
        genesis = conn.execute("SELECT value FROM meta WHERE key = 'genesis'").fetchone()[0]
        fields = {**json.loads(entry.canonical_json()), "description": loose}
        text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        link = hashlib.sha256(bytes.fromhex(genesis) + text.encode()).hexdigest()
        conn.execute("UPDATE entries SET description = ?, hash = ? WHERE idx = 0", (loose, link))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'head'", (link,))
        conn.close()
        monkeypatch.setenv("PRIVFRAME_STATE_DIR", str(tmp_path / "another-user"))
        with _ledger(path) as ledger, pytest.raises(LedgerError, match="not canonical JSON"):
            ledger.entries[0]

    def test_tampered_rho_names_hash_chain(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = tmp_path / "a.ledger"
        self._two_entries(path)
        conn = _raw(path)
        conn.execute("UPDATE entries SET rho = '1/16' WHERE idx = 0")
        conn.close()
        with _ledger(path) as ledger, pytest.raises(LedgerError, match="entry 0 does not match"):
            ledger.entries[0]
        monkeypatch.setenv("PRIVFRAME_STATE_DIR", str(tmp_path / "another-user"))
        with pytest.raises(LedgerError, match="entry 0 does not match its hash"):
            _ledger(path)

    def test_deleting_last_entry_is_detected_while_open(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:
            ledger.append(0.5)
            conn = _raw(path)
            conn.execute("DELETE FROM entries WHERE idx = 0")
            conn.close()
            with pytest.raises(LedgerError, match="changed or disappeared"):
                ledger.append(0.1)
            with pytest.raises(LedgerError):
                ledger.totals()

    def test_tampering_detected_when_reading(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:
            ledger.append(0.5)
            ledger.append(0.25)
            conn = _raw(path)
            conn.execute("UPDATE entries SET rho = '0/1' WHERE idx = 0")
            conn.close()
            entries = ledger.entries
            with pytest.raises(LedgerError, match="hash"):
                tuple(entries)
            with pytest.raises(LedgerError, match="hash"):
                ledger.verify()

    def test_damaged_pages(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:
            for i in range(200):
                ledger.append(0.001, description={"text": "x" * 200, "i": i})
        data = bytearray(path.read_bytes())
        page = 4096
        assert len(data) > 4 * page
        data[2 * page : 4 * page] = os.urandom(2 * page)
        path.write_bytes(bytes(data))
        with pytest.raises(LedgerError):
            _ledger(path)

    def test_closed(self, tmp_path: Path) -> None:
        ledger = _ledger(tmp_path / "a.ledger")
        ledger.close()
        with pytest.raises(LedgerError, match="closed"):
            ledger.append(0.1)
        with pytest.raises(LedgerError, match="closed"):
            ledger.totals()

    def test_threads_share_one_handle(self, tmp_path: Path) -> None:
        path = tmp_path / "a.ledger"
        with _ledger(path) as ledger:

            def work() -> None:
                for _ in range(20):
                    ledger.append(0.001)

            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(ledger) == 80
        with _ledger(path) as ledger:
            assert [e.index for e in ledger.entries] == list(range(80))
