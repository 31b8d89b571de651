"""Row steps (filters, derived columns, joins) through the public API.

A step that could fail on some values but not others would let a query learn
whether a row holds such a value without being charged for it: every such step
(a cast that can fail, decimal arithmetic that can overflow, a type clash
between branches) is refused from the schema before any data is read, and
charges nothing. Decimal and categorical columns are worked on as floats and
strings, so no data value can make a step fail. Names starting with ``__``
belong to the engine's working columns: a derived column may not take one,
and a data column named like one is simply not read.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import polars as pl
import pytest
from internals import spec_of

import privframe as pf
from privframe.api.query import Query
from privframe.plan.planner import plan_release

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")


def _people() -> pl.DataFrame:
    return pl.DataFrame(
        {"u": [1, 2, 3], "name": ["alice", "bob", "carol"], "age": [37, 50, 20], "g": ["a"] * 3}
    )


def _release(sess: pf.Session, query: Query) -> None:
    query.bound(max_rows_per_group=1).agg(pf.count()).release(rho=0.1)


def test_decimal_overflow_oracle_is_refused_before_any_data_is_read() -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    probe = (
        pl.when(pl.col("name") == "alice")
        .then(pl.col("age"))
        .otherwise(0)
        .cast(pl.Decimal(38, 0), strict=False)
        * pl.lit(10**38 // 30)
    ) > 0
    with pytest.raises(pf.InvalidArgumentError, match=r"(?i)decimal|cast"):
        _release(sess, sess.query().filter(probe))
    assert sess.ledger == ()


def test_decimal_literal_arithmetic_is_refused() -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    with pytest.raises(pf.InvalidArgumentError, match=r"(?i)decimal"):
        _release(sess, sess.query().filter(pl.col("age") * pl.lit(Decimal("1e30")) > 0))


def test_decimal_data_columns_are_worked_on_as_floats() -> None:
    df = _people().with_columns(pl.col("age").cast(pl.Decimal(38, 0)))
    sess = pf.Session(df, "u", pf.zCDP(10.0))
    _release(sess, sess.query().filter(pl.col("age") * 1e30 > 0))  # float arithmetic: fine
    assert len(sess.ledger) == 1


@pytest.mark.parametrize("target", [pl.Boolean, pl.Date, pl.Datetime("us"), pl.Decimal(38, 0)])
def test_casts_that_can_fail_on_some_values_are_refused(target: pl.DataType) -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    probe = (
        pl.when((pl.col("name") == "alice") & (pl.col("age") >= 30))
        .then(pl.col("name"))
        .otherwise(None)
        .cast(target, strict=False)
        .is_null()
    )
    with pytest.raises(pf.InvalidArgumentError, match="cast"):
        _release(sess, sess.query().filter(probe))
    assert sess.ledger == ()


def test_a_type_error_for_every_input_is_found_before_any_data_is_read() -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    with pytest.raises(pf.InvalidArgumentError, match="comparing String"):
        _release(sess, sess.query().filter(pl.col("name") > 3))
    with pytest.raises(pf.InvalidValueError, match="do not fit"):
        _release(sess, sess.query().filter(pl.col("missing") > 3))
    assert sess.ledger == ()


def _typed_data() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "age": [40],
            "d": [pl.Series([1], dtype=pl.Int32).cast(pl.Date)[0]],
            "dur": pl.Series([1], dtype=pl.Duration("us")),
            "s": ["a"],
            "u64": pl.Series([1], dtype=pl.UInt64),
            "cat": pl.Series(["a"], dtype=pl.Categorical),
            "g": ["x"],
        }
    )


ENUM = pl.Enum(["a", "b"])
REFUSED_STEPS = {
    "duration to string": pl.col("dur").cast(pl.String, strict=False) == "x",
    "date to string": pl.col("d").cast(pl.String, strict=False) == "x",
    "date between datetime literals": pl.col("d").is_between(
        pl.lit(datetime(2000, 1, 1), dtype=pl.Datetime("ns")),
        pl.lit(datetime(2001, 1, 1), dtype=pl.Datetime("ns")),
    ),
    "when/then date vs datetime": pl.when(pl.col("age") > 1)
    .then(pl.lit(datetime(2000, 1, 1), dtype=pl.Datetime("ns")))
    .otherwise(pl.col("d"))
    .is_null(),
    "when/then string vs date": pl.when(pl.col("age") > 1)
    .then(pl.lit("s"))
    .otherwise(pl.col("d"))
    .is_null(),
    "string vs enum literal": pl.col("s") > pl.lit("a", dtype=ENUM),
    "string between enum literals": pl.col("s").is_between(
        pl.lit("a", dtype=ENUM), pl.lit("b", dtype=ENUM)
    ),
    "when/then unsigned 64 vs signed": pl.when(pl.col("u64") > 0)
    .then(pl.col("u64"))
    .otherwise(pl.lit(-1))
    > 0,
    "string concatenation": (pl.col("s") + pl.col("s")) == "aa",
}


@pytest.mark.parametrize("name", list(REFUSED_STEPS))
def test_steps_that_could_fail_for_some_values_are_refused(name: str) -> None:
    sess = pf.Session(_typed_data(), None, pf.zCDP(1.0))
    with pytest.raises(pf.InvalidArgumentError, match="not supported"):
        _release(sess, sess.query().filter(REFUSED_STEPS[name]))
    assert sess.ledger == ()


def test_categorical_and_decimal_columns_are_used_as_strings_and_floats() -> None:
    sess = pf.Session(_typed_data(), None, pf.zCDP(1.0))
    _release(sess, sess.query().filter(pl.col("cat") == "a"))  # a string comparison now
    assert len(sess.ledger) == 1


def test_a_public_tables_decimal_columns_are_used_as_floats() -> None:
    sess = pf.Session(pl.DataFrame({"k": [1], "x": [10**12]}), None, pf.zCDP(1.0))
    table = pl.DataFrame(
        {"k": [1], "dec": [Decimal("1.5")]}, schema={"k": pl.Int64, "dec": pl.Decimal(38, 30)}
    )
    query = (
        sess.query()
        .join(table, on="k")
        .filter(pl.col("x").is_between(pl.col("dec"), pl.col("dec")))
    )
    _release(sess, query)  # floats: no decimal overflow is possible
    assert len(sess.ledger) == 1


def test_reserved_column_names_cannot_reach_the_engine() -> None:
    sess = pf.Session(_people(), "u", pf.zCDP(10.0))
    query = (
        sess.query()
        .with_columns(__weight=pl.col("age") % 3)
        .bound(max_groups=3, max_rows_per_group=1)
        .group_by("__weight", keys=[0, 1, 2])
        .agg(pf.count())
    )
    with pytest.raises(pf.InvalidValueError, match="'__'"):
        query.release(rho=0.1)
    assert sess.ledger == ()


def test_unrelated_reserved_looking_columns_do_not_interfere() -> None:
    # A data column named like an engine working column is simply not read.
    df = _people().with_columns(__weight=pl.lit(999), __rows=pl.lit(5))
    sess = pf.Session(df, "u", pf.zCDP(1e6))
    query = sess.query().bound(max_rows_per_group=1).group_by("g", keys=["a"]).agg(pf.count())
    plan = query.plan
    release = plan_release(plan, True, 1.0)
    exact = sess._engine.aggregate(spec_of(sess, plan, release))
    assert exact["__count"].to_list() == [3]
