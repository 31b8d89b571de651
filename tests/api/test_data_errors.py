"""Errors about the data say what is wrong and what to do, never what the data holds.

Column names are public schema, but a CSV without a header row makes its first
row of data the names: errors then name the likely cause instead of listing
them. Every refusal here is a PrivframeError with no exception chain (the
original error, which may quote a value, is not its ``__context__``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest
from sql_setup import small_session

import privframe as pf
from privframe.errors import NAMES_WITHHELD, names_look_like_data

MARKER = "MARKER-5c1e"
LIMITS = {"max_groups": 1, "max_rows_per_group": 1}


def _refusal(action: Any, error: type[pf.PrivframeError] = pf.InvalidValueError) -> str:
    """The message of ``action``'s refusal, after checking it carries no chain or marker."""
    with pytest.raises(error) as info:
        action()
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    message = str(info.value)
    assert MARKER not in message
    return message


@pytest.mark.parametrize(
    ("names", "like_data"),
    [
        (["user_id", "amount"], False),
        (["Region", "2024 total"], False),
        (["17", "north"], True),
        (["user_id", "-1.5"], True),
        (["a", "3e8"], True),
        (["a", ""], True),
        (["a", "   "], True),
        (["north", "north_duplicated_0"], True),
        (["PAR1\x00\x01"], True),
        # The rule's stated limit: a first row of words looks like a header.
        (["north", "alice"], False),
    ],
)
def test_column_names_look_like_data_by_the_documented_rule(
    names: list[str], like_data: bool
) -> None:
    assert names_look_like_data(names) is like_data


def test_a_headerless_csv_is_named_as_the_likely_cause_without_listing_its_first_row(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data.csv"
    path.write_text(f"1,{MARKER},250.5\n2,south,7.5\n")
    message = _refusal(lambda: pf.Session(path, "user_id", pf.zCDP(1.0)))
    assert "privacy unit column 'user_id' is not in the data" in message
    assert "no header row" in message
    assert "250.5" not in message


def test_a_query_on_a_headerless_csv_does_not_list_its_first_row(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text(f"1,{MARKER},250.5\n2,south,7.5\n")
    sess = pf.Session(path, None, pf.zCDP(1.0))
    message = _refusal(lambda: sess.query().agg(pf.sum("amount", (0, 10))).release(rho=0.1))
    assert message.endswith(NAMES_WITHHELD)
    sql = _refusal(lambda: sess.sql("SELECT SUM(amount) FROM data"), pf.SQLError)
    assert NAMES_WITHHELD in sql
    assert "did you mean" not in sql
    assert sess.ledger == ()


def test_a_csv_with_a_header_still_lists_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("user_id,region\n1,north\n")
    message = _refusal(lambda: pf.Session(path, "customer", pf.zCDP(1.0)))
    assert "columns: ['user_id', 'region']" in message


def test_csv_rows_with_extra_fields_are_refused_when_the_session_opens(tmp_path: Path) -> None:
    # polars reads only the columns a query uses, and would accept this file for a
    # query that reads user_id alone.
    path = tmp_path / "data.csv"
    path.write_text(f"user_id,amount\n1,2.5\n2,3.5,{MARKER}\n")
    message = _refusal(lambda: pf.Session(path, "user_id", pf.zCDP(1.0)))
    assert "'data.csv' has more fields than its header row" in message
    _refusal(lambda: pf.Session(path, None, pf.zCDP(1.0)))


def test_csv_rows_with_fewer_fields_read_as_nulls(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("user_id,amount\n1,2.5\n2\n")
    sess = pf.Session(path, "user_id", pf.zCDP(1.0))
    assert sess.columns == ["user_id", "amount"]


def test_a_lazyframe_whose_python_function_fails_is_refused_without_its_message() -> None:
    def fail(value: object) -> object:
        raise ValueError(f"{MARKER}: {value}")

    frame = pl.LazyFrame({"user_id": [1, 2]}).with_columns(
        pl.col("user_id").map_elements(fail, return_dtype=pl.Int64)
    )
    message = _refusal(lambda: pf.Session(frame, "user_id", pf.zCDP(1.0)))
    assert "ValueError" in message


def test_the_privacy_unit_must_be_one_column_name() -> None:
    frame = pl.DataFrame({"user_id": [1], "shop": [2]})
    message = _refusal(
        lambda: pf.Session(frame, ["user_id", "shop"], pf.zCDP(1.0)), pf.InvalidArgumentError
    )
    assert "privacy_unit must be the name of one column" in message
    assert "make them one ID column first" in message
    _refusal(lambda: pf.Session(frame, 3, pf.zCDP(1.0)), pf.InvalidArgumentError)


def test_session_arguments_are_named_with_what_to_pass() -> None:
    frame = pl.DataFrame({"user_id": [1]})
    message = _refusal(
        lambda: pf.Session(frame, "user_id", epsilon=1.0),  # type: ignore[call-arg]
        pf.InvalidArgumentError,
    )
    assert message.startswith("Session() got an argument it does not take: 'epsilon'")
    assert "budget=pf.ApproxDP(epsilon=..., delta=...)" in message


def test_bounds_below_the_smallest_grid_are_refused_as_too_extreme() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1.0))
    for aggregate in (pf.sum("x", (0, 5e-324)), pf.mean("x", (-5e-324, 0))):
        query = sess.query().bound(**LIMITS).agg(aggregate)
        assert "too extreme" in _refusal(lambda q=query: q.release(rho=0.1))
    assert sess.ledger == ()


def test_key_products_refuse_mixed_types_as_key_lists_do() -> None:
    message = _refusal(lambda: pf.keys.product(region=["north", 1]), pf.InvalidArgumentError)
    assert "keys for 'region' must be values of one type" in message
    assert "got int, str" in message
    sess = pf.Session(
        pl.DataFrame({"region": ["north"]}),
        None,
        pf.zCDP(1.0),
        metadata={"region": pf.Column(keys=["north", 1])},
    )
    # SQL refuses with an SQLError carrying the builder's reason.
    message = _refusal(
        lambda: sess.sql("SELECT region, COUNT(*) FROM data GROUP BY region", rho=0.1),
        pf.SQLError,
    )
    assert "keys for 'region' must be values of one type" in message
    assert sess.ledger == ()


def test_pandas_keys_of_mixed_types_are_refused() -> None:
    keys = pd.DataFrame({"region": ["north", 3]})
    message = _refusal(lambda: pf.keys.from_dataframe(keys), pf.InvalidArgumentError)
    assert "columns ['region']" in message


def test_builder_arguments_of_the_wrong_kind_are_refused() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "region": ["north"]}), "u", pf.zCDP(1.0))
    table = pl.DataFrame({"region": ["north"], "zone": [1]})
    _refusal(lambda: sess.query().join(table, on=3), pf.InvalidArgumentError)  # type: ignore[arg-type]
    nested = sess.query().bound(**LIMITS)
    _refusal(
        lambda: nested.group_by("region", keys=[["north"]], other="rest"),
        pf.InvalidArgumentError,
    )
    missing = nested.group_by("zone", keys=["a"], other="rest").agg(pf.count())
    assert "group_by column 'zone' is not in the data" in _refusal(lambda: missing.release(0.1))


def test_csv_types_come_from_the_whole_file(tmp_path) -> None:
    # Integers for 200 rows, then a decimal: a type guessed from the first rows would
    # make SUM(x) fail only because of that later value.
    path = tmp_path / "data.csv"
    rows = [f"{i},a,{i % 7}" for i in range(200)] + ["999,b,12.5"]
    path.write_text("u,g,x\n" + "\n".join(rows) + "\n")
    sess = small_session(str(path))
    assert sess.sql("SELECT g, SUM(x) AS s FROM data GROUP BY g", rho=0.5).height == 2


def test_an_unreadable_unit_column_is_withheld(tmp_path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("u,g,x\n1,a,1\nbob@example.com,a,2\n")
    with pytest.raises(pf.InvalidValueError) as info:
        pf.Session(
            pl.scan_csv(path, schema={"u": pl.Int64, "g": pl.String, "x": pl.Float64}),
            "u",
            pf.zCDP(1.0),
        )
    assert "bob" not in str(info.value)


def test_an_engine_failure_keeps_no_trace_of_the_original_error(monkeypatch) -> None:
    # The withheld message must not survive as the error's __context__ either.
    from privframe.engines.polars import PolarsEngine

    def fail(self, spec):  # type: ignore[no-untyped-def]
        raise RuntimeError("private value 4242")

    monkeypatch.setattr(PolarsEngine, "aggregate", fail)
    sess = small_session(pl.DataFrame({"u": [1], "g": ["a"], "x": [1.0]}))
    with pytest.raises(pf.InvalidValueError) as info:
        sess.query().bound(max_groups=1, max_rows_per_group=1).agg(pf.count()).release(rho=0.1)
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
    assert "4242" not in str(info.value)
    assert sess.spent.rho == 0


# ----------------------------------------------------------------------------- Spark


@pytest.fixture(scope="module")
def marked(spark: Any) -> Any:
    return spark.createDataFrame(
        [("1", "a", 1.0), (MARKER, "b", 2.0)], "user_id string, region string, amount double"
    )


def test_a_spark_unit_column_whose_cast_fails_is_refused_without_its_value(marked: Any) -> None:
    from pyspark.sql import functions as f

    frame = marked.withColumn("user_id", f.col("user_id").cast("long"))
    message = _refusal(lambda: pf.Session(frame, "user_id", pf.zCDP(1.0)))
    assert "reading the privacy unit column 'user_id' failed on Spark" in message
    assert "CAST_INVALID_INPUT" in message


def test_a_spark_raise_error_is_refused_without_its_text_and_not_logged(marked: Any) -> None:
    from pyspark.logger import PySparkLogger
    from pyspark.sql import functions as f

    failing = f.when(f.col("user_id") == MARKER, f.raise_error(f.col("user_id")))
    frame = marked.withColumn("user_id", failing.otherwise(f.col("user_id")))
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    log = PySparkLogger.getLogger("DataFrameQueryContextLogger")
    log.addHandler(handler)
    try:
        message = _refusal(lambda: pf.Session(frame, "user_id", pf.zCDP(1.0)))
    finally:
        log.removeHandler(handler)
    assert "USER_RAISED_EXCEPTION" in message
    assert records == []


def test_spark_columns_named_twice_are_refused(marked: Any) -> None:
    frame = marked.toDF("user_id", "user_id", "amount")
    message = _refusal(lambda: pf.Session(frame, None, pf.zCDP(1.0)))
    assert "several columns named ['user_id']" in message


def test_spark_column_names_with_backticks_and_dots_are_read(spark: Any) -> None:
    frame = spark.createDataFrame([(1, 2.0), (2, 3.0)], "`user.id` long, `a``b` double")
    sess = pf.Session(frame, "user.id", pf.zCDP(1.0))
    assert sess.columns == ["user.id", "a`b"]


def test_a_missing_spark_catalog_table_is_named(spark: Any) -> None:
    message = _refusal(lambda: pf.Session.from_spark_table(spark, "no_db.orders", "u", pf.zCDP(1)))
    assert "the Spark catalog has no table 'no_db.orders'" in message
    _refusal(
        lambda: pf.Session.from_spark_table(spark, 3, "u", pf.zCDP(1)),  # type: ignore[arg-type]
        pf.InvalidArgumentError,
    )
