"""New columns whose names differ from another column's in case only, on polars and Spark.

Spark matches column names ignoring case (``spark.sql.caseSensitive`` is false
by default), so a derived ``U`` would replace the privacy unit column ``u``
there and turn every row into its own unit: one person's 1,000 rows would
count 1,000 times under a sensitivity of 1. Every such new column, derived or
joined, is refused before anything is charged, on both engines; a rewrite by
the exact name of a column other than the unit still runs. Spark runs in local
mode (the ``spark`` fixture, conftest.py).
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Query

# Unit 1 has 1,000 rows, units 2..51 one each: bounded to one row per unit, 51 rows.
ROWS = [(1, float(i), 5.0) for i in range(1000)] + [(i, 1e4 + i, 5.0) for i in range(2, 52)]
UNITS = 51
# A public table on "t" with a column "U": joined, Spark would take it for "u".
LOOKUP = pl.DataFrame({"t": [float(i) for i in range(1000)], "U": list(range(1000))})


@pytest.fixture(params=["polars", "spark"])
def data(request: pytest.FixtureRequest) -> Any:
    frame = pl.DataFrame(ROWS, schema=["u", "t", "x"], orient="row")
    if request.param == "polars":
        return frame
    spark = request.getfixturevalue("spark")
    return spark.createDataFrame(ROWS, "u long, t double, x double")


def session(data: Any) -> pf.Session:
    # A large budget makes the counts exact enough to tell 51 units from 1,050 rows.
    return pf.Session(
        data,
        "u",
        pf.zCDP(1e6),
        metadata={"x": pf.Column(bounds=(0, 10))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
        tables={"lookup": LOOKUP},
    )


def first(released: Any, column: str) -> float:
    """The first row's ``column`` of a release (a pandas frame from Spark, polars from polars)."""
    frame = released if isinstance(released, pl.DataFrame) else pl.from_pandas(released)
    return float(frame[column][0])


def count(query: Query) -> float:
    out = query.bound(max_groups=1, max_rows_per_group=1).agg(pf.count().alias("n"))
    return first(out.release(rho=1e5), "n")


def refused(query: Query, sess: pf.Session) -> str:
    with pytest.raises(pf.InvalidValueError) as info:
        count(query)
    assert sess.ledger == ()
    return str(info.value)


def test_a_derived_column_named_like_the_unit_in_another_case_is_refused(data: Any) -> None:
    sess = session(data)
    message = refused(sess.query().with_columns(U=pl.col("t")), sess)
    assert "column 'U' differs from the column 'u' (the privacy unit column)" in message


def test_a_derived_column_named_like_another_column_in_another_case_is_refused(
    data: Any,
) -> None:
    sess = session(data)
    message = refused(sess.query().with_columns(X=pl.col("x") * 2), sess)
    assert "'X' differs from the column 'x' only in case" in message


def test_two_new_columns_differing_only_in_case_are_refused(data: Any) -> None:
    sess = session(data)
    message = refused(sess.query().with_columns(a=pl.col("x"), A=pl.col("t")), sess)
    assert "'A' differs from the column 'a'" in message


def test_a_later_step_respelling_an_earlier_derived_column_is_refused(data: Any) -> None:
    sess = session(data)
    query = sess.query().with_columns(y=pl.col("x")).filter(pl.col("y") > 0)
    message = refused(query.with_columns(Y=pl.col("t")), sess)
    assert "'Y' differs from the column 'y'" in message


def test_a_joined_column_named_like_the_unit_in_another_case_is_refused(data: Any) -> None:
    sess = session(data)
    message = refused(sess.query().join(LOOKUP, on="t"), sess)
    assert "public table's column 'U' differs from the column 'u'" in message


def test_sql_joining_a_column_named_like_the_unit_in_another_case_is_refused(data: Any) -> None:
    sess = session(data)
    with pytest.raises(pf.SQLError, match="'U' differs from the column 'u'"):
        sess.sql("SELECT COUNT(*) AS n FROM data JOIN lookup USING (t)", rho=1.0)
    assert sess.ledger == ()


def test_sql_an_output_named_like_the_unit_in_another_case_counts_each_unit_once(
    data: Any,
) -> None:
    released = session(data).sql("SELECT COUNT(*) AS n, SUM(t + 0, 0, 1) AS U FROM data", rho=1e5)
    assert abs(first(released, "n") - UNITS) <= 1


def test_a_derived_column_in_a_new_name_keeps_the_unit_bounded(data: Any) -> None:
    assert abs(count(session(data).query().with_columns(v=pl.col("t"))) - UNITS) <= 1


def test_an_exact_rewrite_of_a_column_other_than_the_unit_still_runs(data: Any) -> None:
    query = session(data).query().with_columns(x=pl.lit(0.0))
    query = query.bound(max_groups=1, max_rows_per_group=1)
    released = query.agg(pf.sum("x", (0, 10)).alias("s")).release(rho=1e5)
    assert abs(first(released, "s")) < 1  # every x rewritten to 0: without the rewrite it is 5 × 51


def test_spark_data_with_columns_differing_only_in_case_is_refused_when_opened(spark: Any) -> None:
    # Spark cannot tell "u" from "U" apart (polars can: such data stays allowed there).
    data = spark.createDataFrame([(1, 2, 5.0)], "u long, U long, x double")
    with pytest.raises(pf.InvalidValueError, match="columns 'u' and 'U' differ only in case"):
        pf.Session(data, "u", pf.zCDP(1.0))


@pytest.mark.parametrize(
    "copy", [pl.col("u"), pl.col("u").cast(pl.String, strict=False), pl.col("u") + 0], ids=str
)
def test_grouping_by_a_column_computed_from_the_unit_alone_is_refused(copy: pl.Expr) -> None:
    frame = pl.DataFrame(ROWS, schema=["u", "t", "x"], orient="row")
    sess = session(frame)
    query = sess.query().with_columns(uid=copy).bound(max_groups=1, max_rows_per_group=1)
    with pytest.raises(pf.InvalidValueError, match="computed from the privacy unit column 'u'"):
        query.group_by("uid").agg(pf.count()).release(rho=1.0, delta=1e-9)
    assert sess.ledger == ()
    grouped = sess.query().with_columns(big=pl.col("x") > 1).bound(1, 1)
    assert grouped.group_by("big", keys=[True, False]).agg(pf.count()).explain(1.0)
