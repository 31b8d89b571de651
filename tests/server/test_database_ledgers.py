"""The server's ledgers in one database: exact budgets, caps, changes while open, and refusals.

Every test runs on both databases the server supports: a new SQLite file,
and a new schema on a real PostgreSQL server started by the tests
(``postgres_service``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)

import privframe as pf
from privframe.accounting.accountant import Accountant, Spend
from privframe.accounting.ledger import Database, DatabaseLedgers, SQLiteLedger
from privframe.errors import BudgetExceededError, LedgerError


@pytest.fixture
def ledgers(database_url: str) -> Iterator[DatabaseLedgers]:  # noqa: F811
    opened = DatabaseLedgers(database_url)
    yield opened
    opened.close()


def test_ten_spends_of_a_tenth_fill_a_budget_of_one_exactly(ledgers: DatabaseLedgers) -> None:
    ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
    acct = Accountant(pf.zCDP(1.0), ledger=ledgers.open("alice/sales"))
    for i in range(10):
        acct.spend(pf.zCDP(0.1), label=f"q{i}")
    assert acct.spent.exact_rho == 1
    assert acct.remaining.exact_rho == 0
    with pytest.raises(BudgetExceededError):
        acct.spend(pf.zCDP(Fraction(1, 10**12)), label="one more")
    assert ledgers.spent("alice/sales").exact_rho == 1
    assert ledgers.pool_spent("sales").exact_rho == 1
    reopened = ledgers.open("alice/sales")
    reopened.verify()
    assert [e.label for e in reopened.entries] == [f"q{i}" for i in range(10)]
    assert sum(e.exact_rho for e in reopened.entries) == 1


def test_the_cap_across_analysts_refuses_and_records_nothing(ledgers: DatabaseLedgers) -> None:
    for analyst in ("alice", "bob"):
        ledgers.create(f"{analyst}/sales", "sales", pf.zCDP(1.0))
    ledgers.set_cap("sales", pf.zCDP(0.5))
    alice = Accountant(pf.zCDP(1.0), ledger=ledgers.open("alice/sales"))
    bob = Accountant(pf.zCDP(1.0), ledger=ledgers.open("bob/sales"))
    alice.spend(pf.zCDP(0.3), label="a")
    with pytest.raises(BudgetExceededError, match="cap") as refused:
        bob.spend(pf.zCDP(0.3), label="b")
    assert "0.3 is spent" not in str(refused.value)  # alice's spending is not bob's to see
    assert len(bob.entries) == 0
    bob.spend(pf.zCDP(0.2), label="b fits exactly")
    assert ledgers.pool_spent("sales").exact_rho == Fraction(1, 2)
    ledgers.set_cap("sales", None)
    bob.spend(pf.zCDP(0.5), label="no cap now")
    assert ledgers.cap("sales") is None
    assert ledgers.pool_spent("sales").exact_rho == 1


def test_a_budget_lowered_in_the_database_refuses_a_stale_accountant(
    ledgers: DatabaseLedgers,
) -> None:
    ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
    stale = Accountant(pf.zCDP(1.0), ledger=ledgers.open("alice/sales"))
    stale.spend(pf.zCDP(0.25), label="before")
    ledgers.set_budget("alice/sales", pf.zCDP(0.5))
    with pytest.raises(BudgetExceededError, match="server database"):
        stale.spend(pf.zCDP(0.5), label="after")
    stale.spend(pf.zCDP(0.25), label="what is left")
    assert stale.spent.exact_rho == Fraction(1, 2)
    assert ledgers.budget("alice/sales") == pf.zCDP(0.5)


def test_a_top_up_lets_the_next_spend_through(ledgers: DatabaseLedgers) -> None:
    ledgers.create("alice/sales", "sales", pf.zCDP(0.5))
    ledger = ledgers.open("alice/sales")
    Accountant(pf.zCDP(0.5), ledger=ledger).spend(pf.zCDP(0.5), label="all of it")
    with pytest.raises(BudgetExceededError):
        Accountant(pf.zCDP(0.5), ledger=ledger).spend(pf.zCDP(0.1))
    assert ledgers.top_up("alice/sales", pf.zCDP(0.1, 1e-6)) == pf.zCDP(0.6, 1e-6)
    assert ledger.budget == pf.zCDP(0.6, 1e-6)
    Accountant(ledger.budget, ledger=ledger).spend(pf.zCDP(0.1, 1e-6), label="topped up")
    assert ledgers.spent("alice/sales") == pf.zCDP(0.6, 1e-6)


def test_a_batch_is_recorded_whole_or_not_at_all(ledgers: DatabaseLedgers) -> None:
    ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
    ledgers.set_budget("alice/sales", pf.zCDP(0.5))
    acct = Accountant(pf.zCDP(1.0), ledger=ledgers.open("alice/sales"))
    with pytest.raises(BudgetExceededError, match="2 spends"):
        acct.spend_all([Spend(pf.zCDP(0.25), "a"), Spend(pf.zCDP(0.5), "b")])
    assert len(acct.entries) == 0
    entries = acct.spend_all([Spend(pf.zCDP(0.25), "a"), Spend(pf.zCDP(0.25), "b")])
    assert [e.index for e in entries] == [0, 1]
    assert ledgers.pool_spent("sales").exact_rho == Fraction(1, 2)


def test_a_zero_cost_is_recorded_even_when_nothing_is_left(ledgers: DatabaseLedgers) -> None:
    ledgers.create("alice/sales", "sales", pf.zCDP(0))
    ledger = ledgers.open("alice/sales")
    ledger.append(0, label="free")
    assert len(ledger) == 1


def test_an_entry_edited_outside_privframe_fails_verification(
    ledgers: DatabaseLedgers,
) -> None:
    ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
    ledger = ledgers.open("alice/sales")
    for i in range(3):
        ledger.append(0.1, label=f"q{i}")
    with ledgers.database.transaction("tampering", write=True) as tx:
        tx.run(
            "UPDATE pf_entries SET rho = ? WHERE ledger = ? AND idx = 1", ("1/100", "alice/sales")
        )
    with pytest.raises(LedgerError, match="does not match its hash"):
        ledgers.open("alice/sales").verify()
    with pytest.raises(LedgerError, match="does not match its hash"):
        list(ledgers.open("alice/sales").entries)


def test_ledger_ids_are_unique_and_must_exist(ledgers: DatabaseLedgers) -> None:
    ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
    with pytest.raises(LedgerError, match="exists already"):
        ledgers.create("alice/sales", "sales", pf.zCDP(2.0))
    with pytest.raises(LedgerError, match="no ledger"):
        ledgers.open("nobody/sales")
    with pytest.raises(LedgerError, match="no ledger"):
        ledgers.set_budget("nobody/sales", pf.zCDP(1.0))
    assert ledgers.budget("nobody/sales") is None
    assert ledgers.ledgers() == {"alice/sales": "sales"}


def test_concurrent_first_opens_create_one_schema(database_url: str) -> None:  # noqa: F811
    barrier, failures = threading.Barrier(6), []

    def first_open() -> None:
        barrier.wait()
        try:
            DatabaseLedgers(database_url).close()
        except Exception as err:  # reported below with the others
            failures.append(err)

    threads = [threading.Thread(target=first_open) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with DatabaseLedgers(database_url) as ledgers:
        ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
        assert ledgers.ledgers() == {"alice/sales": "sales"}


def test_tables_of_another_schema_version_are_refused(database_url: str) -> None:  # noqa: F811
    DatabaseLedgers(database_url).close()
    database = Database(database_url)
    with database.transaction("pretending to be newer", write=True) as tx:
        tx.run("UPDATE pf_schema SET version = 99 WHERE component = 'ledgers'")
    database.close()
    with pytest.raises(LedgerError, match="schema version 99") as refused:
        DatabaseLedgers(database_url)
    assert refused.value.__context__ is None


def _refusal(url: str) -> LedgerError:
    with pytest.raises(LedgerError) as refused:
        DatabaseLedgers(url)
    assert refused.value.__context__ is None
    assert refused.value.__cause__ is None
    return refused.value


def test_unusable_databases_are_refused_with_a_ledger_error(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    assert "does not exist" in str(_refusal(str(tmp_path / "missing" / "server.db")))
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database, " * 100)
    assert "garbage.db" in str(_refusal(str(garbage)))
    ledger_file = tmp_path / "spend.ledger"
    SQLiteLedger(ledger_file, pf.zCDP(1.0)).close()
    assert "another application" in str(_refusal(str(ledger_file)))
    port = postgres_url.rsplit(":", 1)[1].split("/")[0]
    unreachable = postgres_url.replace(f":{port}/", f":{int(port) + 1}/").replace(
        "postgres@", "postgres:secret@"
    )
    message = str(_refusal(unreachable))
    assert "cannot be reached" in message
    assert "secret" not in message
