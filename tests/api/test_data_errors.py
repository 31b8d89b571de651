"""Errors about the data say what is wrong and what to do, never what the data holds.

Column names are public schema, but a CSV without a header row makes its first
row of data the names: errors then name the likely cause instead of listing
them. Every refusal here is a PrivframeError with no exception chain (the
original error, which may quote a value, is not its ``__context__``).
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest
from sql_setup import small_session

import privframe as pf
from privframe.errors import NAMES_WITHHELD, names_look_like_data
from privframe.mechanisms.noise import SeededRandomness

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


def _exact_sum(path: Path, types: dict[str, str]) -> float:
    """The sum of ``x`` over a CSV, exact (huge budget, seeded noise), x declared as ``types``."""
    metadata = {name: pf.Column(type=kind) for name, kind in types.items()}
    sess = pf.Session(path, "u", pf.zCDP(1e12), rng=SeededRandomness(0), metadata=metadata)
    released = (
        sess.query().bound(max_rows=1).agg(pf.sum("x", (0, 100)).alias("s")).release(rho=1e11)
    )
    return round(float(released["s"][0]), 2)


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
def test_csv_fields_past_the_header_are_dropped_for_their_row_alone(tmp_path: Path) -> None:
    # Refusing such a file would let one person's row decide whether every query runs.
    extra = tmp_path / "extra.csv"
    extra.write_text(f"u,x\n1,2\n2,3,{MARKER}\n3,4,5,6\n")
    plain = tmp_path / "plain.csv"
    plain.write_text("u,x\n1,2\n2,3\n3,4\n")
    assert pf.Session(extra, "u", pf.zCDP(1.0)).columns == ["u", "x"]
    assert _exact_sum(extra, {"x": "int64"}) == _exact_sum(plain, {"x": "int64"}) == 9


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
def test_csv_bytes_that_are_not_utf8_change_their_own_field_alone(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(b"u,x,note\n1,2,caf\xe9\n2,\xff3,b\n3,4,c\n")
    # The undecodable "\xff3" is null, which a sum counts as its bounds' midpoint (50).
    assert _exact_sum(path, {"x": "int64"}) == 2 + 50 + 4


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


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
def test_a_csv_column_is_read_as_its_declared_type_each_value_alone(tmp_path: Path) -> None:
    # Integers for 200 rows, then a decimal: the declared type decides, the values do not.
    path = tmp_path / "data.csv"
    rows = [f"{i},a,{i % 7}" for i in range(200)] + ["999,b,12.5", "1000,b,n/a"]
    path.write_text("u,g,x\n" + "\n".join(rows) + "\n")
    undeclared = small_session(str(path))
    assert dict(undeclared.check(undeclared.query().plan))["x"] == pl.String
    whole = sum(i % 7 for i in range(200))
    # A value that does not parse is null, which a sum counts as the bounds' midpoint (50).
    assert _exact_sum(path, {"x": "float64"}) == whole + 12.5 + 50
    assert _exact_sum(path, {"x": "int64"}) == whole + 2 * 50


@pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")
def test_a_declared_type_is_parsed_by_a_fixed_rule_per_value(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text(
        "u,on,day,at\n"
        "1,TRUE,2024-01-31,2024-01-31T10:00:00\n"
        "2,false,31/01/2024,2024-01-31 10:00:00.5\n"
        "3,yes,2024-02-30,10:00\n"
    )
    types = {"on": "bool", "day": "date", "at": "datetime"}
    metadata = {name: pf.Column(type=kind) for name, kind in types.items()}
    sess = pf.Session(path, "u", pf.zCDP(1e12), rng=SeededRandomness(0), metadata=metadata)

    def count(where: pl.Expr) -> int:
        query = sess.query().bound(max_rows=1).filter(where).agg(pf.count())
        return int(query.release(rho=1e10)["count"][0])

    assert [count(pl.col(c).is_null()) for c in types] == [1, 2, 1]
    assert count(pl.col("on")) == 1
    assert count(pl.col("day") == pl.lit(dt.date(2024, 1, 31))) == 1
    assert count(pl.col("at") == pl.lit(dt.datetime(2024, 1, 31, 10, 0, 0, 500_000))) == 1


def test_a_declared_type_names_a_column_of_the_data(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("user_id,amount\n1,2\n")
    metadata = {"amonut": pf.Column(type="int64")}
    message = _refusal(lambda: pf.Session(path, "user_id", pf.zCDP(1.0), metadata=metadata))
    assert "metadata declares a type for 'amonut'" in message
    assert "columns: ['user_id', 'amount']" in message


def test_a_declared_type_on_a_headerless_csv_does_not_list_its_first_row(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text(f"1,{MARKER},250.5\n2,south,7.5\n")
    metadata = {"amount": pf.Column(type="float64")}
    message = _refusal(lambda: pf.Session(path, None, pf.zCDP(1.0), metadata=metadata))
    assert message.endswith(NAMES_WITHHELD)
    assert "250.5" not in message


def test_a_csv_unit_column_stays_text_whatever_is_declared(tmp_path: Path) -> None:
    # Parsed as integers, 007 and 7 would be one person.
    path = tmp_path / "data.csv"
    path.write_text("u,x\n007,1\n7,2\n")
    metadata = {"u": pf.Column(type="int64")}
    message = _refusal(lambda: pf.Session(path, "u", pf.zCDP(1.0), metadata=metadata))
    assert "unit column is read as the text it holds" in message
    text = pf.Session(path, "u", pf.zCDP(1.0), metadata={"u": pf.Column(type="string")})
    assert dict(text.check(text.query().plan))["u"] == pl.String


@pytest.mark.parametrize(
    ("data", "declared"),
    [
        (pl.DataFrame({"u": [1], "x": [1.5]}), "int64"),
        (pd.DataFrame({"u": [1], "x": ["a"]}), "float64"),
        (pl.DataFrame({"u": [1], "x": [1]}), "date"),
    ],
)
def test_typed_data_must_have_the_declared_type(data: Any, declared: str) -> None:
    metadata = {"x": pf.Column(type=declared)}
    message = _refusal(lambda: pf.Session(data, "u", pf.zCDP(1.0), metadata=metadata))
    assert "metadata declares column 'x' as" in message
    assert "declare the type it has" in message


def test_typed_data_of_the_declared_type_opens(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    pl.DataFrame({"u": [1], "x": [1], "t": [pl.datetime(2024, 1, 1)]}).select(
        "u", "x", pl.lit(None, pl.Datetime("ns")).alias("t")
    ).write_parquet(path)
    metadata = {"x": pf.Column(type="int64"), "t": pf.Column(type="datetime")}
    sess = pf.Session(path, "u", pf.zCDP(1.0), metadata=metadata)
    assert dict(sess.check(sess.query().plan))["t"] == pl.Datetime("ns")


@pytest.mark.parametrize("given", ["int32", "decimal", pl.Int32, pl.Datetime("us", "UTC"), 5])
def test_a_column_type_must_be_one_privframe_can_read_exactly(given: Any) -> None:
    message = _refusal(lambda: pf.Column(type=given), pf.InvalidArgumentError)
    assert "is not one a column may be declared as" in message
    assert "'int64', 'float64', 'string', 'bool', 'date', 'datetime'" in message


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
