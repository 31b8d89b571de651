"""Public column types do not depend on any one person's value (through Session).

On D (500 people, integer amounts) and its neighbours (one more person whose
amount is ``n/a`` or ``12.5``), everything public is the same: the schema the
session publishes and checks queries against, the explanation, whether a
bounded sum runs or is refused (and the refusal's words), what it charges,
and the ledger's record of the data. The data comes as a CSV file, and as a
pandas frame whose amount is an object column or a category column. Inferred
from the values, the neighbours' amount was String (the sum refused; a pandas
frame refused at open) or Float64.

Columns of a real pandas dtype keep it: their owner gave the type.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
from neighbours_setup import neighbour_frames, write_neighbours

import privframe as pf
from privframe.api.query import Query

DECLARED = {"amount": pf.Column(type="int64", bounds=(0, 1000))}
UNDECLARED = {"amount": pf.Column(bounds=(0, 1000))}
RHO = 0.1


def _categories() -> dict[str, pd.DataFrame]:
    """The pandas neighbours with amount a category column (labels typed by their values)."""
    frames = neighbour_frames()
    return {n: f.assign(amount=f["amount"].astype("category")) for n, f in frames.items()}


@pytest.fixture(scope="module", params=["csv", "pandas_object", "pandas_category"])
def neighbours(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, object]:
    """D and its neighbours (``"na"``, ``"decimal"``), by name, in one form of data."""
    if request.param == "csv":
        return write_neighbours(tmp_path_factory.mktemp("neighbours"))
    return neighbour_frames() if request.param == "pandas_object" else _categories()


def _session(data: object, metadata: dict[str, pf.Column]) -> pf.Session:
    limits = pf.Bound(max_rows=1)
    return pf.Session(data, "user_id", pf.zCDP(1.0), metadata=metadata, contributions=limits)


def _sum(sess: pf.Session) -> Query:
    return sess.query().bound(max_rows=1).agg(pf.sum("amount", bounds=(0, 1000)))


def _published(sess: pf.Session) -> dict[str, pl.DataType]:
    """The column types a session publishes and checks queries against."""
    return dict(sess.check(sess.query().plan))


def _public(sess: pf.Session) -> tuple[object, ...]:
    """What a session publishes about the data before any release."""
    return (sess.columns, _published(sess))


def test_declared_types_are_published_and_released_alike_on_neighbours(
    neighbours: dict[str, object],
) -> None:
    seen = []
    for data in neighbours.values():
        sess = _session(data, DECLARED)
        explained = str(_sum(sess).explain(rho=RHO))
        _sum(sess).release(rho=RHO)
        sql = sess.sql("SELECT SUM(amount) AS total FROM data", rho=RHO)
        seen.append((_public(sess), explained, sess.spent, len(sess.ledger), list(sql.columns)))
    assert seen[0][0][1]["amount"] == pl.Int64
    assert seen[0][2] == pf.zCDP(2 * RHO)
    assert all(s == seen[0] for s in seen), seen


def test_undeclared_untyped_columns_are_text_and_refused_alike_on_neighbours(
    neighbours: dict[str, object],
) -> None:
    seen = []
    for data in neighbours.values():
        sess = _session(data, UNDECLARED)
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
    neighbours: dict[str, object], tmp_path: Path
) -> None:
    # The ledger's data identity holds the types: inferred, a neighbour was "other data".
    ledger = tmp_path / "spend.sqlite"
    first = pf.Session(neighbours["d"], "user_id", pf.zCDP(1.0), ledger, metadata=DECLARED)
    _sum(first).release(rho=RHO)
    first.accountant.close()
    for name in ("na", "decimal"):
        again = pf.Session(neighbours[name], "user_id", pf.zCDP(1.0), ledger, metadata=DECLARED)
        assert again.spent == pf.zCDP(RHO)
        again.accountant.close()


def test_a_query_cannot_retype_a_column_the_data_opened_with(neighbours: dict[str, object]) -> None:
    sess = _session(neighbours["d"], UNDECLARED)
    with pytest.raises(pf.InvalidArgumentError, match=r"Session\(metadata=\.\.\.\)"):
        sess.sql("SELECT SUM(amount) AS total FROM data", rho=RHO, metadata=DECLARED)
    assert sess.spent == pf.zCDP(0)
    same = _session(neighbours["d"], DECLARED)
    same.sql("SELECT SUM(amount) AS total FROM data", rho=RHO, metadata=DECLARED)
    assert same.spent == pf.zCDP(RHO)


HUGE = 10**8  # σ ≈ 7e-5: every count released below is the exact one (see test_unit_ids_exact.py)


def _exact_count(data: pd.DataFrame, where: pl.Expr, metadata: dict[str, pf.Column]) -> int:
    sess = pf.Session(data, "user_id", pf.zCDP(HUGE), metadata=metadata)
    query = sess.query().filter(where).bound(max_rows=1).agg(pf.count())
    return int(query.release(rho=HUGE)["count"].item())


def test_missing_values_of_an_object_column_are_null_and_others_their_text() -> None:
    values = [None, np.nan, pd.NA, pd.NaT, "n/a", 12.5, 7, Decimal("3.0"), True]
    data = pd.DataFrame({"user_id": range(9), "amount": pd.Series(values, dtype=object)})
    nulls = pl.col("amount").is_null()
    assert _exact_count(data, nulls, {}) == 4
    assert _exact_count(data, pl.col("amount") == "12.5", {}) == 1
    declared = {"amount": pf.Column(type="float64")}
    assert _exact_count(data, nulls, declared) == 6  # n/a and True do not parse as numbers
    assert _exact_count(data, pl.col("amount") == 3.0, declared) == 1


@pytest.mark.parametrize(
    "values",
    [
        [{"key": 1}, 5, "x"],
        [{1}, set(), {2}],
        [b"bytes", "text", 3],
        [2**70, 1, 2],
        [Decimal("1e40"), 1, 2],
        [dt.date(2024, 1, 2), "2024-01-03", None],
    ],
    ids=["dicts", "sets", "bytes", "past_2_63", "huge_decimal", "dates"],
)
def test_an_object_column_of_any_values_opens_as_text(values: list[object]) -> None:
    data = pd.DataFrame({"user_id": [1, 2, 3], "amount": pd.Series(values, dtype=object)})
    assert _published(pf.Session(data, "user_id", pf.zCDP(1.0)))["amount"] == pl.String


def test_an_object_column_of_dates_is_parsed_as_declared() -> None:
    values = [dt.date(2024, 1, 2), "2024-01-02", "2 January 2024", None]
    data = pd.DataFrame({"user_id": range(4), "day": pd.Series(values, dtype=object)})
    declared = {"day": pf.Column(type="date")}
    assert _exact_count(data, pl.col("day") == dt.date(2024, 1, 2), declared) == 2


TYPED = {
    "int64": (pd.Series([1, 2, 3]), pl.Int64),
    "float64": (pd.Series([1.0, 2.5, 3.0]), pl.Float64),
    "bool": (pd.Series([True, False, True]), pl.Boolean),
    "datetime64": (pd.Series(pd.to_datetime(["2024-01-01", "2024-01-02", None])), pl.Datetime),
    "nullable_int": (pd.Series([1, None, 3], dtype="Int64"), pl.Int64),
    "string": (pd.Series(["a", None, "c"], dtype="string"), pl.String),
    "default_str": (pd.Series(["a", "b", "c"]), pl.String),  # pandas 3's str dtype
}


@pytest.mark.parametrize("dtype", sorted(TYPED))
def test_a_pandas_column_of_a_real_dtype_keeps_its_type(dtype: str) -> None:
    series, published = TYPED[dtype]
    data = pd.DataFrame({"user_id": [1, 2, 3], "amount": series})
    assert data["amount"].dtype != object
    assert _published(pf.Session(data, "user_id", pf.zCDP(1.0)))["amount"] == published
    other = "string" if published != pl.String else "int64"
    with pytest.raises(pf.InvalidValueError, match="metadata declares column 'amount' as"):
        pf.Session(data, "user_id", pf.zCDP(1.0), metadata={"amount": pf.Column(type=other)})
