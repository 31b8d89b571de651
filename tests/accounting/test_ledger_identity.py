"""A ledger file records the data it is spent on, and refuses other data unless told otherwise.

The record is public facts only (the privacy unit, column names and types):
a ledger reopened for another dataset or privacy unit would carry its spends
over to the other data, or credit the other data's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.accounting.ledger import DataIdentity, SQLiteLedger
from privframe.api.report import SpecError, load_spec

BUDGET = pf.zCDP(1.0)


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {"user": [1, 2, 3, 4], "region": ["n", "s", "n", "s"], "amount": [1.0, 2.0, 3.0, 4.0]}
    )


def _spend(sess: pf.Session) -> None:
    query = sess.query().bound(max_groups=1, max_rows_per_group=1)
    query.group_by("region", keys=["n", "s"]).agg(pf.count()).release(rho=0.25)


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "spend.ledger"
    _spend(pf.Session(_frame(), "user", BUDGET, path))
    return path


def test_the_same_data_reopens_its_ledger(ledger: Path) -> None:
    again = pf.Session(_frame(), "user", BUDGET, ledger)
    assert again.spent == pf.zCDP(0.25)
    reordered = _frame().select("amount", "user", "region")  # the same columns
    assert pf.Session(reordered, "user", BUDGET, ledger).spent == pf.zCDP(0.25)


def test_another_privacy_unit_is_refused(ledger: Path) -> None:
    with pytest.raises(pf.LedgerError, match="the privacy unit is 'region' here but 'user'"):
        pf.Session(_frame(), "region", BUDGET, ledger)
    with pytest.raises(pf.LedgerError, match="privacy unit is None here"):
        pf.Session(_frame(), None, BUDGET, ledger)


def test_another_schema_is_refused_naming_each_difference(ledger: Path) -> None:
    added = _frame().with_columns(pl.lit(0).alias("age"))
    with pytest.raises(pf.LedgerError, match=r"columns \['age'\] are not in the ledger's data"):
        pf.Session(added, "user", BUDGET, ledger)
    with pytest.raises(pf.LedgerError, match=r"has columns \['amount'\] that are not here"):
        pf.Session(_frame().drop("amount"), "user", BUDGET, ledger)
    retyped = _frame().with_columns(pl.col("amount").cast(pl.Int64))
    with pytest.raises(pf.LedgerError) as err:
        pf.Session(retyped, "user", BUDGET, ledger)
    message = str(err.value)
    assert "column 'amount' has type Int64 here but Float64 in the ledger" in message
    assert "same_data=True" in message
    assert "another ledger file" in message
    # Public facts only: no data value is in the message or the file.
    assert "3.0" not in message
    conn = sqlite3.connect(ledger)
    (record,) = conn.execute("SELECT value FROM meta WHERE key = 'data'").fetchone()
    conn.close()
    assert DataIdentity.from_json(record) == DataIdentity.of("user", _frame().schema)


def test_a_refused_data_check_spends_and_changes_nothing(ledger: Path) -> None:
    before = ledger.read_bytes()
    with pytest.raises(pf.LedgerError):
        pf.Session(_frame(), "region", BUDGET, ledger)
    assert ledger.read_bytes() == before


def test_same_data_opts_in_and_records_the_new_columns(ledger: Path) -> None:
    added = _frame().with_columns(pl.lit(0).alias("age"))
    sess = pf.Session(added, "user", BUDGET, ledger, same_data=True)
    assert sess.spent == pf.zCDP(0.25)  # the spends carry over: it is the same data
    _spend(sess)
    assert pf.Session(added, "user", BUDGET, ledger).spent == pf.zCDP(0.5)
    with pytest.raises(pf.LedgerError, match="'age'"):
        pf.Session(_frame(), "user", BUDGET, ledger)


def test_a_ledger_without_a_record_adopts_the_first_sessions_data(tmp_path: Path) -> None:
    path = tmp_path / "spend.ledger"
    with Accountant(BUDGET, path) as acct:  # no data: nothing recorded or checked
        acct.spend(pf.zCDP(0.1), label="by hand")
    sess = pf.Session(_frame(), "user", BUDGET, path)
    assert sess.spent == pf.zCDP(0.1)
    with pytest.raises(pf.LedgerError, match="privacy unit"):
        pf.Session(_frame(), "region", BUDGET, path)
    with Accountant(BUDGET, path) as acct:  # an Accountant without data is not checked
        assert len(acct.entries) == 1


def test_an_edited_record_is_detected(ledger: Path) -> None:
    conn = sqlite3.connect(ledger, isolation_level=None)
    record = DataIdentity.of("region", _frame().schema).to_json()
    conn.execute("UPDATE meta SET value = ? WHERE key = 'data'", (record,))
    conn.close()
    with pytest.raises(pf.LedgerError, match="modified outside privframe"):
        pf.Session(_frame(), "region", BUDGET, ledger)


def test_the_ledger_takes_data_and_same_data_checked() -> None:
    with pytest.raises(pf.InvalidArgumentError, match="data"):
        SQLiteLedger("x.ledger", BUDGET, data=("user",))  # type: ignore[arg-type]
    with pytest.raises(pf.InvalidArgumentError, match="same_data"):
        SQLiteLedger("x.ledger", BUDGET, same_data="yes")  # type: ignore[arg-type]


def _spec(folder: Path, line: str) -> Path:
    path = folder / "spec.toml"
    path.write_text(
        f"""
[report]
title = "T"
[data]
path = "data.parquet"
privacy_unit = "user"
[budget]
rho = 1.0
ledger = "spend.ledger"
{line}
[contributions]
max_rows_per_group = 1
[[queries]]
name = "n"
aggregates = [{{ kind = "count" }}]
rho = 0.1
"""
    )
    return path


def test_a_report_spec_opts_in_with_same_data(tmp_path: Path) -> None:
    assert load_spec(_spec(tmp_path, "same_data = true")).same_data is True
    assert load_spec(_spec(tmp_path, "")).same_data is False
    with pytest.raises(SpecError, match="same_data must be true or false"):
        load_spec(_spec(tmp_path, 'same_data = "yes"'))
