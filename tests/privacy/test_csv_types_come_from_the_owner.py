"""A CSV's public column types do not depend on any one person's value (through Session).

On D (500 people, integer amounts) and its neighbours (one more person whose
amount is ``n/a`` or ``12.5``), everything public is the same: the schema the
session publishes and checks queries against, the explanation, whether a
bounded sum runs or is refused (and the refusal's words), what it charges,
and the ledger's record of the data. Inferred from the values, the
neighbours' amount was String (the sum refused) or Float64.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from csv_setup import write_neighbours

import privframe as pf
from privframe.api.query import Query

DECLARED = {"amount": pf.Column(type="int64", bounds=(0, 1000))}
UNDECLARED = {"amount": pf.Column(bounds=(0, 1000))}
RHO = 0.1


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_neighbours(tmp_path_factory.mktemp("neighbours"))


def _session(path: Path, metadata: dict[str, pf.Column]) -> pf.Session:
    limits = pf.Bound(max_rows=1)
    return pf.Session(path, "user_id", pf.zCDP(1.0), metadata=metadata, contributions=limits)


def _sum(sess: pf.Session) -> Query:
    return sess.query().bound(max_rows=1).agg(pf.sum("amount", bounds=(0, 1000)))


def _public(sess: pf.Session) -> tuple[object, ...]:
    """What a session publishes about the data before any release."""
    return (sess.columns, dict(sess.check(sess.query().plan)))


def test_declared_types_are_published_and_released_alike_on_neighbours(
    files: dict[str, Path],
) -> None:
    seen = []
    for path in files.values():
        sess = _session(path, DECLARED)
        explained = str(_sum(sess).explain(rho=RHO))
        _sum(sess).release(rho=RHO)
        sql = sess.sql("SELECT SUM(amount) AS total FROM data", rho=RHO)
        seen.append((_public(sess), explained, sess.spent, len(sess.ledger), list(sql.columns)))
    assert seen[0][0][1]["amount"] == pl.Int64
    assert seen[0][2] == pf.zCDP(2 * RHO)
    assert all(s == seen[0] for s in seen), seen


def test_undeclared_csv_columns_are_text_and_refused_alike_on_neighbours(
    files: dict[str, Path],
) -> None:
    seen = []
    for path in files.values():
        sess = _session(path, UNDECLARED)
        with pytest.raises(pf.InvalidArgumentError) as built:
            _sum(sess).release(rho=RHO)
        with pytest.raises(pf.SQLError) as sql:
            sess.sql("SELECT SUM(amount) AS total FROM data", rho=RHO)
        seen.append((_public(sess), str(built.value), str(sql.value), sess.spent, sess.ledger))
    assert seen[0][0][1]["amount"] == pl.String
    assert "metadata={'amount': pf.Column(type='float64')}" in seen[0][1]
    assert 'metadata.amount = { type = "float64" }' in seen[0][1]
    assert seen[0][3] == pf.zCDP(0)
    assert seen[0][4] == ()
    assert all(s == seen[0] for s in seen), seen


def test_a_ledger_records_the_same_data_for_neighbours(
    files: dict[str, Path], tmp_path: Path
) -> None:
    # The ledger's data identity holds the types: inferred, a neighbour's file was "other data".
    ledger = tmp_path / "spend.sqlite"
    first = pf.Session(files["d"], "user_id", pf.zCDP(1.0), ledger, metadata=DECLARED)
    _sum(first).release(rho=RHO)
    first.accountant.close()
    for name in ("na", "decimal"):
        again = pf.Session(files[name], "user_id", pf.zCDP(1.0), ledger, metadata=DECLARED)
        assert again.spent == pf.zCDP(RHO)
        again.accountant.close()


def test_a_query_cannot_retype_a_column_the_data_opened_with(files: dict[str, Path]) -> None:
    sess = _session(files["d"], UNDECLARED)
    with pytest.raises(pf.InvalidArgumentError, match=r"Session\(metadata=\.\.\.\)"):
        sess.sql("SELECT SUM(amount) AS total FROM data", rho=RHO, metadata=DECLARED)
    assert sess.spent == pf.zCDP(0)
    same = _session(files["d"], DECLARED)
    same.sql("SELECT SUM(amount) AS total FROM data", rho=RHO, metadata=DECLARED)
    assert same.spent == pf.zCDP(RHO)
