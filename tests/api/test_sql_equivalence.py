"""SQL conformance: each supported construct equals the builder.

Equivalence is checked twice: the SQL query's plan must equal the plan the
builder makes (group_by, keys, bound, aggregates with their bounds and names,
the row steps), and two sessions with the same seeded randomness must release
identical noisy tables, one through ``sess.sql`` and one through the builder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import polars as pl
import pytest
from sql_setup import (
    AGE,
    AMOUNT,
    DATA,
    MONTHS,
    REGIONS,
    RHO,
    SEASONS,
    WHOLE_ROWS,
    ZONES,
    assert_same_release,
    bounded,
    check,
    session,
    whole_rows,
)

import privframe as pf
from privframe.api.query import Query

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


class Case(NamedTuple):
    id: str
    sql: str
    build: Callable[[Query], Query]
    unsampled: bool = False  # quantiles: see WHOLE_ROWS


CASES = [
    # -- the README's example
    Case(
        "readme",
        "SELECT region, COUNT(*) AS n, SUM(amount) AS total, AVG(amount) "
        "FROM data WHERE age >= 18 GROUP BY region",
        lambda q: (
            bounded(q.filter(pl.col("age") >= 18))
            .group_by("region", keys=REGIONS)
            .agg(
                pf.count().alias("n"),
                pf.sum("amount", AMOUNT).alias("total"),
                pf.mean("amount", AMOUNT),
            )
        ),
    ),
    # -- aggregates
    Case("count_star", "SELECT COUNT(*) FROM data", lambda q: bounded(q).agg(pf.count())),
    Case(
        "count_distinct_unit",
        "SELECT region, COUNT(DISTINCT user_id) AS users, COUNT(*) FROM data GROUP BY region",
        lambda q: (
            bounded(q)
            .group_by("region", keys=REGIONS)
            .agg(pf.count_distinct().alias("users"), pf.count())
        ),
    ),
    Case(
        "sum_avg_mean",
        "SELECT SUM(amount), AVG(amount) AS avg_amount, MEAN(age) FROM data",
        lambda q: bounded(q).agg(
            pf.sum("amount", AMOUNT),
            pf.mean("amount", AMOUNT).alias("avg_amount"),
            pf.mean("age", AGE),
        ),
    ),
    Case(
        "variance",
        "SELECT VARIANCE(amount), VAR_SAMP(age) AS vs, VAR_POP(age) AS vp FROM data",
        lambda q: bounded(q).agg(
            pf.var("amount", AMOUNT), pf.var("age", AGE).alias("vs"), pf.var("age", AGE).alias("vp")
        ),
    ),
    Case(
        "stddev",
        "SELECT STDDEV(amount), STDDEV_SAMP(age) AS ss, STDDEV_POP(age) AS sp FROM data",
        lambda q: bounded(q).agg(
            pf.std("amount", AMOUNT), pf.std("age", AGE).alias("ss"), pf.std("age", AGE).alias("sp")
        ),
    ),
    Case(
        "median",
        "SELECT region, MEDIAN(amount), MEDIAN(age) AS age_mid FROM data GROUP BY region",
        lambda q: (
            bounded(q)
            .group_by("region", keys=REGIONS)
            .agg(
                pf.median("amount", AMOUNT),
                pf.median("age", AGE, candidates=75).alias("age_mid"),  # candidates from metadata
            )
        ),
        unsampled=True,
    ),
    Case(
        "quantiles",
        "SELECT QUANTILE(amount, 0.25), APPROX_QUANTILE(age, 0.75) AS age_q3, "
        "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY amount) AS p90 FROM data",
        lambda q: bounded(q).agg(
            pf.quantile("amount", 0.25, AMOUNT),
            pf.quantile("age", 0.75, AGE, candidates=75).alias("age_q3"),
            pf.quantile("amount", 0.9, AMOUNT).alias("p90"),
        ),
        unsampled=True,
    ),
    # -- row expressions (aggregates of expressions take their bounds from the alias)
    Case(
        "arithmetic",
        "SELECT SUM(amount * 2 + 1) AS doubled, SUM(amount / 4 - age % 7) AS mixed, "
        "SUM(0 - amount) AS negated FROM data",
        lambda q: bounded(
            q.with_columns(
                doubled=pl.col("amount") * 2 + 1,
                mixed=pl.col("amount") / 4 - pl.col("age") % 7,
                negated=pl.lit(0) - pl.col("amount"),
            )
        ).agg(
            pf.sum("doubled", (0, 2001)).alias("doubled"),
            pf.sum("mixed", (-10, 250)).alias("mixed"),
            pf.sum("negated", (-1000, 0)).alias("negated"),
        ),
    ),
    Case(
        "comparisons_and_or",
        "SELECT COUNT(*) FROM data WHERE (age > 20 AND age <= 60 AND month <> 3 AND month != 4) "
        "OR (region = 'north' AND age < 30 AND age >= 18)",
        lambda q: bounded(
            q.filter(
                (
                    (pl.col("age") > 20)
                    & (pl.col("age") <= 60)
                    & (pl.col("month") != 3)
                    & (pl.col("month") != 4)
                )
                | ((pl.col("region") == "north") & (pl.col("age") < 30) & (pl.col("age") >= 18))
            )
        ).agg(pf.count()),
    ),
    Case(
        "not",
        "SELECT COUNT(*) FROM data WHERE NOT (age > 30 OR region = 'east')",
        lambda q: bounded(q.filter(~((pl.col("age") > 30) | (pl.col("region") == "east")))).agg(
            pf.count()
        ),
    ),
    Case(
        "in_not_in",
        "SELECT COUNT(*) FROM data WHERE region IN ('north', 'east') AND month NOT IN (1, 2)",
        lambda q: bounded(
            q.filter(pl.col("region").is_in(["north", "east"]) & ~pl.col("month").is_in([1, 2]))
        ).agg(pf.count()),
    ),
    Case(
        "between",
        "SELECT COUNT(*) FROM data WHERE age BETWEEN 20 AND 30 OR age NOT BETWEEN 18 AND 70",
        lambda q: bounded(
            q.filter(pl.col("age").is_between(20, 30) | ~pl.col("age").is_between(18, 70))
        ).agg(pf.count()),
    ),
    Case(
        "is_null",
        "SELECT COUNT(*) AS missing FROM data WHERE amount IS NULL",
        lambda q: bounded(q.filter(pl.col("amount").is_null())).agg(pf.count().alias("missing")),
    ),
    Case(
        "is_not_null",
        "SELECT COUNT(*) AS present FROM data WHERE amount IS NOT NULL",
        lambda q: bounded(q.filter(pl.col("amount").is_not_null())).agg(
            pf.count().alias("present")
        ),
    ),
    Case(
        "like_prefix",
        "SELECT COUNT(*) FROM data WHERE region LIKE 'n%'",
        lambda q: bounded(q.filter(pl.col("region").str.starts_with("n"))).agg(pf.count()),
    ),
    Case(
        "like_suffix",
        "SELECT COUNT(*) FROM data WHERE region LIKE '%st'",
        lambda q: bounded(q.filter(pl.col("region").str.ends_with("st"))).agg(pf.count()),
    ),
    Case(
        "like_contains",
        "SELECT COUNT(*) FROM data WHERE region LIKE '%ou%'",
        lambda q: bounded(q.filter(pl.col("region").str.contains("ou", literal=True))).agg(
            pf.count()
        ),
    ),
    Case(
        "like_exact",
        "SELECT COUNT(*) FROM data WHERE region LIKE 'west'",
        lambda q: bounded(q.filter(pl.col("region") == "west")).agg(pf.count()),
    ),
    Case(
        "case_searched",
        "SELECT SUM(CASE WHEN age < 30 THEN 1 WHEN age < 50 THEN 2 ELSE 3 END) AS score FROM data",
        lambda q: bounded(
            q.with_columns(
                score=pl.when(pl.col("age") < 30)
                .then(1)
                .when(pl.col("age") < 50)
                .then(2)
                .otherwise(3)
            )
        ).agg(pf.sum("score", (1, 3)).alias("score")),
    ),
    Case(
        "case_simple",
        "SELECT SUM(CASE region WHEN 'north' THEN amount WHEN 'south' THEN amount / 2 ELSE 0 END)"
        " AS weighted FROM data",
        lambda q: bounded(
            q.with_columns(
                weighted=pl.when(pl.col("region") == "north")
                .then(pl.col("amount"))
                .when(pl.col("region") == "south")
                .then(pl.col("amount") / 2)
                .otherwise(0)
            )
        ).agg(pf.sum("weighted", AMOUNT).alias("weighted")),
    ),
    Case(
        "cast_try_cast",
        "SELECT SUM(CAST(region = 'north' AS INT)) AS is_north FROM data "
        "WHERE CAST(age AS VARCHAR) LIKE '2%' AND TRY_CAST(month AS DOUBLE) > 2.5",
        lambda q: bounded(
            q.filter(
                pl.col("age").cast(pl.String, strict=False).str.starts_with("2")
                & (pl.col("month").cast(pl.Float64, strict=False) > 2.5)
            ).with_columns(is_north=(pl.col("region") == "north").cast(pl.Int64, strict=False))
        ).agg(pf.sum("is_north", (0, 1)).alias("is_north")),
    ),
    Case(
        "abs",
        "SELECT SUM(ABS(amount - 500)) AS dev FROM data",
        lambda q: bounded(q.with_columns(dev=(pl.col("amount") - 500).abs())).agg(
            pf.sum("dev", (0, 500)).alias("dev")
        ),
    ),
    # -- GROUP BY
    Case(
        "group_by_two_columns",
        "SELECT region, month, COUNT(*) AS n, AVG(amount) FROM data GROUP BY region, month",
        lambda q: (
            bounded(q)
            .group_by(["region", "month"], keys=pf.keys.product(region=REGIONS, month=MONTHS))
            .agg(pf.count().alias("n"), pf.mean("amount", AMOUNT))
        ),
    ),
    Case(
        "group_by_position",
        "SELECT COUNT(*) AS n, region FROM data GROUP BY 2",
        lambda q: bounded(q).group_by("region", keys=REGIONS).agg(pf.count().alias("n")),
    ),
    Case(
        "group_by_expression_alias",
        "SELECT age >= 40 AS older, COUNT(*) AS n FROM data GROUP BY older",
        lambda q: (
            bounded(q.with_columns(older=pl.col("age") >= 40))
            .group_by("older", keys=[False, True])
            .agg(pf.count().alias("n"))
        ),
    ),
    Case(
        "group_by_expression_repeated",
        "SELECT age >= 40 AS older, COUNT(*) AS n FROM data GROUP BY age >= 40",
        lambda q: (
            bounded(q.with_columns(older=pl.col("age") >= 40))
            .group_by("older", keys=[False, True])
            .agg(pf.count().alias("n"))
        ),
    ),
    Case(
        "group_by_case",
        "SELECT CASE WHEN age < 40 THEN 'young' ELSE 'old' END AS band, COUNT(*) AS n, "
        "SUM(amount) FROM data WHERE amount IS NOT NULL GROUP BY band",
        lambda q: (
            bounded(
                q.filter(pl.col("amount").is_not_null()).with_columns(
                    band=pl.when(pl.col("age") < 40).then(pl.lit("young")).otherwise(pl.lit("old"))
                )
            )
            .group_by("band", keys=["young", "old"])
            .agg(pf.count().alias("n"), pf.sum("amount", AMOUNT))
        ),
    ),
    Case(
        "group_by_derived_and_aggregate_of_expression",
        "SELECT age >= 40 AS older, SUM(amount * 2 + 1) AS doubled FROM data GROUP BY older",
        lambda q: (
            bounded(q.with_columns(older=pl.col("age") >= 40, doubled=pl.col("amount") * 2 + 1))
            .group_by("older", keys=[False, True])
            .agg(pf.sum("doubled", (0, 2001)).alias("doubled"))
        ),
    ),
    # -- joins with registered public tables, table aliases
    Case(
        "join_on",
        "SELECT zone, COUNT(*) AS n FROM data JOIN zones ON data.region = zones.region "
        "GROUP BY zone",
        lambda q: (
            bounded(q.join(ZONES, on="region", how="inner"))
            .group_by("zone", keys=["cold", "warm"])
            .agg(pf.count().alias("n"))
        ),
    ),
    Case(
        "left_join_aliases_where",
        "SELECT zone, COUNT(*) AS n, AVG(amount) FROM data d LEFT JOIN zones z "
        "ON d.region = z.region WHERE z.zone = 'warm' OR d.age > 60 GROUP BY zone",
        lambda q: (
            bounded(
                q.join(ZONES, on="region", how="left").filter(
                    (pl.col("zone") == "warm") | (pl.col("age") > 60)
                )
            )
            .group_by("zone", keys=["cold", "warm"])
            .agg(pf.count().alias("n"), pf.mean("amount", AMOUNT))
        ),
    ),
    Case(
        "left_outer_join",
        "SELECT COUNT(*) AS n FROM data d LEFT OUTER JOIN zones z ON d.region = z.region",
        lambda q: bounded(q.join(ZONES, on="region", how="left")).agg(pf.count().alias("n")),
    ),
    Case(
        "inner_join_using",
        "SELECT z.zone, COUNT(*) AS n FROM data AS d INNER JOIN zones AS z USING (region) "
        "GROUP BY z.zone",
        lambda q: (
            bounded(q.join(ZONES, on="region", how="inner"))
            .group_by("zone", keys=["cold", "warm"])
            .agg(pf.count().alias("n"))
        ),
    ),
    Case(
        "join_on_two_columns",
        "SELECT season, COUNT(*) AS n FROM data d JOIN seasons s "
        "ON d.region = s.region AND d.month = s.month GROUP BY season",
        lambda q: (
            bounded(q.join(SEASONS, on=["region", "month"], how="inner"))
            .group_by("season", keys=["winter", "summer"])
            .agg(pf.count().alias("n"))
        ),
    ),
    Case(
        "two_joins",
        "SELECT zone, season, COUNT(*) AS n FROM data d JOIN zones z USING (region) "
        "LEFT JOIN seasons s ON d.region = s.region AND (d.month = s.month) GROUP BY zone, season",
        lambda q: (
            bounded(
                q.join(ZONES, on="region", how="inner").join(
                    SEASONS, on=["region", "month"], how="left"
                )
            )
            .group_by(
                ["zone", "season"],
                keys=pf.keys.product(zone=["cold", "warm"], season=["winter", "summer"]),
            )
            .agg(pf.count().alias("n"))
        ),
    ),
    Case(
        "table_alias",
        "SELECT d.region, COUNT(*) AS n FROM data d WHERE d.age > 30 GROUP BY d.region",
        lambda q: (
            bounded(q.filter(pl.col("age") > 30))
            .group_by("region", keys=REGIONS)
            .agg(pf.count().alias("n"))
        ),
    ),
    Case(
        "table_alias_as_and_qualified_name",
        "SELECT region, COUNT(*) AS n FROM data AS d WHERE data.age > 30 AND d.month < 7 "
        "GROUP BY region",
        lambda q: (
            bounded(q.filter((pl.col("age") > 30) & (pl.col("month") < 7)))
            .group_by("region", keys=REGIONS)
            .agg(pf.count().alias("n"))
        ),
    ),
    Case(
        "case_insensitive_keywords_and_quoted_names",
        'select "region", count(*) as n from DATA where "age" >= 18 group by "region"',
        lambda q: (
            bounded(q.filter(pl.col("age") >= 18))
            .group_by("region", keys=REGIONS)
            .agg(pf.count().alias("n"))
        ),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_equivalent_to_builder(case: Case) -> None:
    if case.unsampled:
        check(case.sql, whole_rows(case.build), contributions=WHOLE_ROWS)
    else:
        check(case.sql, case.build)


def test_default_output_names_match_the_builder() -> None:
    got = check(
        "SELECT SUM(amount), AVG(amount), VARIANCE(amount), STDDEV(amount), MEDIAN(amount), "
        "QUANTILE(amount, 0.25), COUNT(*), COUNT(DISTINCT user_id) FROM data",
        whole_rows(
            lambda q: q.agg(
                pf.sum("amount", AMOUNT),
                pf.mean("amount", AMOUNT),
                pf.var("amount", AMOUNT),
                pf.std("amount", AMOUNT),
                pf.median("amount", AMOUNT),
                pf.quantile("amount", 0.25, AMOUNT),
                pf.count(),
                pf.count_distinct(),
            )
        ),
        contributions=WHOLE_ROWS,
    )
    assert got.columns == [
        "amount_sum",
        "amount_mean",
        "amount_var",
        "amount_std",
        "amount_median",
        "amount_p25",
        "count",
        "count_distinct",
    ]


def test_select_list_order_is_kept() -> None:
    got = check(
        "SELECT AVG(amount), region, COUNT(*) AS n FROM data GROUP BY region",
        lambda q: (
            bounded(q)
            .group_by("region", keys=REGIONS)
            .agg(pf.mean("amount", AMOUNT), pf.count().alias("n"))
        ),
    )
    assert got.columns == ["amount_mean", "region", "n"]
    assert got["region"].to_list() == REGIONS


def test_group_column_not_selected_is_left_out() -> None:
    got = check(
        "SELECT COUNT(*) AS n FROM data GROUP BY region",
        lambda q: bounded(q).group_by("region", keys=REGIONS).agg(pf.count().alias("n")),
    )
    assert got.columns == ["n"]
    assert got.height == len(REGIONS)


def test_count_column_counts_non_null_rows() -> None:
    # COUNT(amount) counts the rows whose amount is not null (a sum of 0/1 flags).
    # With a huge rho the noise is negligible: compare with the exact bounded count.
    text = "SELECT COUNT(amount) AS present, COUNT(*) AS rows FROM data"
    sess = session(budget=pf.zCDP(rho=1e6))
    limits = pf.Bound(max_rows=10_000)
    explained = sess.sql(text, contributions=limits).explain(rho=1e6).plan
    sigma = max(m.sigma for m in explained.measurements)  # 5σ: fails with p < 1e-6
    got = sess.sql(text, rho=1e6, contributions=limits)
    present = DATA["amount"].is_not_null().sum()
    assert got["present"].item() == pytest.approx(present, abs=5 * sigma)
    assert got["rows"].item() == pytest.approx(DATA.height, abs=5 * sigma)


def test_count_column_equals_builder() -> None:
    # COUNT(col) is a sum of 0/1 flags, derived with a non-strict cast (a strict cast is not
    # on the expression allow-list), released rounded to an integer as COUNT(*) is.
    check(
        "SELECT region, COUNT(amount) FROM data GROUP BY region",
        lambda q: (
            bounded(
                q.with_columns(
                    count_amount_flag=pl.col("amount").is_not_null().cast(pl.Int64, strict=False)
                )
            )
            .group_by("region", keys=REGIONS)
            .agg(pf.sum("count_amount_flag", (0, 1)).alias("count_amount"))
        ),
        post=lambda frame: frame.with_columns(pl.col("count_amount").round(0).cast(pl.Int64)),
    )


def _released_equal(text: str, build: Callable[[Query], Query]) -> None:
    """Releases only: for SQL that builds a different but equivalent expression."""
    a, b = session(9), session(9)
    assert_same_release(a.sql(text, rho=RHO), build(b.query()).release(rho=RHO))


@pytest.mark.parametrize(
    ("pattern", "expr"),
    [
        ("n%", pl.col("region").str.starts_with("n")),
        ("%st", pl.col("region").str.ends_with("st")),
        ("%ou%", pl.col("region").str.contains("ou", literal=True)),
        ("west", pl.col("region") == "west"),
    ],
)
def test_not_like_negates_like(pattern: str, expr: pl.Expr) -> None:
    # sqlglot parses `x NOT LIKE 'p'` as Like(..., negate=True), not Not(Like(...)):
    # the negation must still reach the filter, or the release counts the wrong rows.
    check(
        f"SELECT COUNT(*) FROM data WHERE region NOT LIKE '{pattern}'",
        lambda q: bounded(q.filter(~expr)).agg(pf.count()),
    )


def test_not_before_like_negates() -> None:
    check(
        "SELECT COUNT(*) FROM data WHERE NOT region LIKE 'n%'",
        lambda q: bounded(q.filter(~pl.col("region").str.starts_with("n"))).agg(pf.count()),
    )


def test_unary_minus_in_an_aggregate_equals_builder() -> None:
    # -x is translated as `pl.lit(0) - x`: polars' Negate is not on the allow-list.
    _released_equal(
        "SELECT SUM(-amount) AS negated FROM data",
        lambda q: bounded(q.with_columns(negated=pl.lit(0) - pl.col("amount"))).agg(
            pf.sum("negated", (-1000, 0)).alias("negated")
        ),
    )


def test_negative_literals_in_where_equal_builder() -> None:
    # A negative literal is one literal, not a negation the allow-list would refuse.
    _released_equal(
        "SELECT COUNT(*) FROM data WHERE age > -5 AND amount * -1 < 0",
        lambda q: bounded(q.filter((pl.col("age") > -5) & (pl.col("amount") * -1 < 0))).agg(
            pf.count()
        ),
    )


def test_case_without_else_equals_builder() -> None:
    # CASE without ELSE gets a typed null branch: an untyped Null branch would be
    # refused by check_types (branches of types Float64 and Null).
    _released_equal(
        "SELECT SUM(CASE WHEN region = 'north' THEN amount END) AS north_amount FROM data",
        lambda q: bounded(
            q.with_columns(
                north_amount=pl.when(pl.col("region") == "north")
                .then(pl.col("amount"))
                .otherwise(pl.lit(None, dtype=pl.Float64))
            )
        ).agg(pf.sum("north_amount", AMOUNT).alias("north_amount")),
    )


def test_case_without_else_as_a_group_column() -> None:
    # The same with string branches, a CASE without ELSE used as a group column.
    sess = session()
    out = sess.sql(
        "SELECT CASE WHEN age < 40 THEN 'young' END AS band, COUNT(*) AS n FROM data GROUP BY band",
        rho=RHO,
    )
    assert out["band"].to_list() == ["young", "old"]


def test_between_string_bounds_are_literals() -> None:
    # polars' is_between reads a plain str as a column name: the bounds must be passed
    # as literals, or `BETWEEN 'east' AND 'north'` would compare with columns of those names.
    check(
        "SELECT COUNT(*) FROM data WHERE region BETWEEN 'east' AND 'north'",
        lambda q: bounded(
            q.filter(pl.col("region").is_between(pl.lit("east"), pl.lit("north")))
        ).agg(pf.count()),
    )


def test_an_in_list_mixing_ints_and_floats_is_accepted() -> None:
    # A plain SQL list of numbers: is_in([30, 40.5]) on an integer column must not raise
    # polars' TypeError.
    sess = session()
    sess.sql("SELECT COUNT(*) FROM data WHERE age IN (30, 40.5)").explain(0.1)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT d.region, COUNT(*) AS n FROM data d GROUP BY region",
        "SELECT region, COUNT(*) AS n FROM data d GROUP BY d.region",
        "SELECT z.zone, COUNT(*) AS n FROM data d JOIN zones z USING (region) GROUP BY zone",
    ],
)
def test_a_group_column_may_be_qualified_in_one_place_only(text: str) -> None:
    # A group column written qualified in one place and bare in the other is one column:
    # resolved names are compared, not syntax nodes.
    plan = session().sql(text).query.plan
    assert len(plan.group_by) == 1
