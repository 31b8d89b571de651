"""The filter allow-list: row-wise expressions that cannot fail on any value, nothing else."""

from __future__ import annotations

import polars as pl
import pytest

import privframe as pf
from privframe.engines.expressions import check_filter, check_types, is_safe_filter

SAFE = [
    pl.col("age") >= 18,
    (pl.col("age") >= 18) & pl.col("x").is_not_null(),
    pl.col("r").is_in(["a", "b"]),
    ~pl.col("r").is_in([1, 2]),
    pl.col("s").str.contains("x", literal=True),
    pl.col("s").str.starts_with("x"),
    pl.col("s").str.ends_with("x"),
    pl.col("a").is_between(1, 3),
    pl.col("a").is_between(pl.col("lo"), pl.col("hi")),
    pl.when(pl.col("a") > 1).then(True).otherwise(False),
    pl.col("a").cast(pl.Int64, strict=False) > 0,
    pl.col("a").alias("z").abs() > 1,
    pl.col("x").is_finite() & pl.col("x").is_not_nan(),
    pl.col("x").sqrt() > 1,  # IEEE's root: NaN below 0, never an error
    pl.when(pl.col("x") < 0).then(None).otherwise(pl.col("x").sqrt()) > 1,  # SQL's SQRT
    (pl.col("a") / pl.col("b")) > 1,
    pl.lit(True),
]
UNSAFE = [
    # not row-wise: other rows (other people) would decide
    pl.col("a") > pl.col("a").mean(),
    pl.col("a") >= pl.col("a").max(),
    pl.col("a").is_in(pl.col("b")),
    pl.col("a").is_in(pl.col("a").unique()),
    pl.col("a").is_in(pl.Series([1, 2])),
    pl.col("a") > pl.lit(pl.Series([1, 2])),
    pl.col("a").is_unique(),
    pl.col("a").is_duplicated(),
    pl.col("a").is_first_distinct(),
    pl.col("b").any(),
    pl.col("a").rank() < 3,
    pl.col("a").shift() > 0,
    pl.col("a").cum_sum() < 3,
    pl.col("a").sort() > 1,
    pl.col("a").fill_null(strategy="forward") > 0,
    pl.col("a").count() > 2,
    pl.int_range(pl.len()) < 5,
    (pl.col("a") >= 18).over("g"),
    pl.col("x").map_batches(lambda s: s > s.mean(), is_elementwise=True),
    # can fail on some values: a free yes/no question about the data
    pl.col("name").cast(pl.Int64) > 0,
    pl.when(pl.col("a") > 5).then(pl.lit("x")).otherwise(pl.lit("1")).cast(pl.Int64) > 0,
    pl.col("s").str.contains("x"),  # a regex
    pl.col("s").str.contains(pl.col("pattern"), literal=True),
    # last digits differ between polars and Spark (different math libraries)
    pl.col("x").exp() > 1,
    pl.col("x").log() > 1,
    pl.col("x").pow(pl.col("y")) > 1,
]


@pytest.mark.parametrize("predicate", SAFE, ids=str)
def test_safe_filters_are_accepted(predicate: pl.Expr) -> None:
    assert is_safe_filter(predicate)
    assert check_filter(predicate) is predicate


@pytest.mark.parametrize("predicate", UNSAFE, ids=str)
def test_unsafe_filters_are_refused(predicate: pl.Expr) -> None:
    assert not is_safe_filter(predicate)
    with pytest.raises(pf.InvalidArgumentError, match=r"cannot|must not"):
        check_filter(predicate)


def test_query_filter_refuses_before_any_data_is_read() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidArgumentError, match="row"):
        sess.query().filter(pl.col("x") > pl.col("x").mean())
    with pytest.raises(pf.InvalidArgumentError, match="polars expression"):
        sess.query().filter("x > 1")  # type: ignore[arg-type]
    assert sess.ledger == ()


def test_a_null_literal_is_allowed_only_as_a_case_branch() -> None:
    schema = pl.Schema({"x": pl.Float64, "name": pl.String})
    check_types(pl.when(pl.col("x") > 1).then(pl.col("x")), schema)  # CASE without ELSE
    for oracle in (
        pl.when(pl.col("x") > 0).then(pl.lit(None).abs()).otherwise(0),
        pl.lit(None) + 1,
        pl.col("x") == pl.lit(None),
    ):
        with pytest.raises(pf.InvalidArgumentError):
            check_types(oracle, schema)


def test_sqrt_takes_numbers_only() -> None:
    schema = pl.Schema({"x": pl.Float64, "k": pl.Int64, "name": pl.String, "b": pl.Boolean})
    check_types(pl.col("x").sqrt() + pl.col("k").sqrt(), schema)
    for refused in (pl.col("name").sqrt(), pl.col("b").sqrt()):
        with pytest.raises(pf.InvalidArgumentError, match="square root of a number"):
            check_types(refused, schema)
