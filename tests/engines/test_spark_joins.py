"""Steps over units on Spark: private joins, flat_map, per-person values and the per-unit stage.

A Session over Spark DataFrames releases what a Session over the same polars
frames releases, with the same seeded noise, whenever no truncation or bound
binds (the exact aggregates are then equal), and explains the same bounds.
When a truncation binds, Spark keeps other rows than polars (its own keyed
hash) but as many per unit. Spark runs in local mode (``spark`` fixture,
conftest.py); the data are small, and each release is one Spark job.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.spark.engine import SparkEngine
from privframe.engines.spark.frames import plain_frame
from privframe.engines.spark.rows import apply_spark_steps, spark_table
from privframe.engines.spec import (
    COUNT,
    AggregationSpec,
    FlatMap,
    PerUnit,
    PrivateJoin,
    RowStep,
    apply_steps,
)
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

GROUPS = ["a", "b", "c"]
DRUGS = ["d1", "d2", "d3"]
ITEMS = ["tea", "jam", "bun"]
VISITS, PRESCRIPTIONS = 3, 2  # the most rows a unit has in each table
ITEMS_PER_UNIT = VISITS * 3  # each visit's basket holds at most 3 items


def _visits(rng: np.random.Generator, units: int) -> pl.DataFrame:
    """1 to VISITS rows per unit: a group, an amount, a day (sometimes null), a basket."""
    rows: dict[str, list[Any]] = {"u": [], "g": [], "x": [], "t": [], "items": []}
    for unit in range(units):
        for _ in range(rng.integers(1, VISITS + 1)):
            rows["u"].append(unit)
            rows["g"].append(str(rng.choice(GROUPS)))
            rows["x"].append(int(rng.integers(0, 60)))
            rows["t"].append(None if rng.random() < 0.1 else int(rng.integers(1, 6)))
            basket = [str(i) for i in rng.choice(ITEMS, size=rng.integers(0, 4))]
            rows["items"].append(None if rng.random() < 0.1 else basket)
    return pl.DataFrame(rows, schema_overrides={"t": pl.Int64, "items": pl.List(pl.String)})


def _prescriptions(rng: np.random.Generator, units: int) -> pl.DataFrame:
    """0 to PRESCRIPTIONS rows per unit (some units have none, some are not in visits)."""
    rows: dict[str, list[Any]] = {"u": [], "drug": [], "x": []}
    for unit in range(units // 3, units + units // 3):
        for _ in range(rng.integers(0, PRESCRIPTIONS + 1)):
            rows["u"].append(unit)
            rows["drug"].append(str(rng.choice(DRUGS)))
            rows["x"].append(int(rng.integers(1, 10)))
    return pl.DataFrame(rows)


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    rng = np.random.default_rng(31)
    return {"visits": _visits(rng, 90), "drugs": _prescriptions(rng, 90)}


def _joined(sess: pf.Session, how: Literal["inner", "left"]) -> pf.Query:
    drugs = sess.query("drugs").filter(pl.col("x") > 1)
    return (
        sess.query("visits")
        .join_private(drugs, on="u", left_rows=VISITS, right_rows=PRESCRIPTIONS, how=how)
        .bound(max_groups=len(GROUPS), max_rows_per_group=VISITS * PRESCRIPTIONS)
        .group_by("g", keys=GROUPS)  # a left join keeps visits without prescriptions
        .agg(pf.count(), pf.sum("x_right", (0, 10)), pf.count_distinct())
    )


def _inner_join(sess: pf.Session) -> pf.Query:
    return _joined(sess, "inner")


def _left_join(sess: pf.Session) -> pf.Query:
    return _joined(sess, "left")


def _flat_map(sess: pf.Session) -> pf.Query:
    return (
        sess.query("visits")
        .flat_map("items", max_rows=ITEMS_PER_UNIT, name="item")
        .bound(max_groups=len(ITEMS), max_rows_per_group=ITEMS_PER_UNIT)
        .group_by("item", keys=ITEMS)
        .agg(pf.count(), pf.sum("x", (0, 60)))
    )


def _unit_columns(sess: pf.Session) -> pf.Query:
    return (
        sess.query("visits")
        .with_columns(
            total=pf.unit.sum("x"),
            first=pf.unit.first("g", by="t"),
            last=pf.unit.last("g", by="t"),
            visit=pf.unit.rank("t"),
            groups=pf.unit.n_unique("g"),
        )
        .filter(pl.col("visit") == 1)
        .bound(max_groups=1, max_rows_per_group=VISITS)
        .group_by("first", keys=GROUPS)
        .agg(
            pf.count(),
            pf.sum("total", (0, 200)),
            pf.sum("groups", (0, 3)),
            pf.count_distinct(),
        )
    )


def _per_unit(sess: pf.Session) -> pf.Query:
    return (  # from the second table
        sess.query("drugs")
        .per_unit("drug", total=pf.unit.sum("x"), n=pf.unit.count(), most=pf.unit.max("x"))
        .bound(max_groups=len(DRUGS))
        .group_by("drug", keys=DRUGS)
        .agg(pf.mean("total", (0, 20)), pf.sum("n", (0, 2)), pf.sum("most", (0, 10)))
    )


def _combined(sess: pf.Session) -> pf.Query:
    drugs = sess.query("drugs").per_unit(doses=pf.unit.sum("x"))
    return (
        sess.query("visits")
        .flat_map("items", max_rows=ITEMS_PER_UNIT, name="item")
        .join_private(drugs, on="u", left_rows=ITEMS_PER_UNIT, right_rows=1, how="left")
        .with_columns(known_doses=pl.when(pl.col("doses").is_null()).then(0).otherwise("doses"))
        .per_unit("item", n=pf.unit.count(), doses=pf.unit.max("known_doses"))
        .bound(max_groups=len(ITEMS))
        .group_by("item", keys=ITEMS)
        .agg(pf.count(), pf.sum("n", (0, 9)), pf.sum("doses", (0, 20)))
    )


QUERIES = {
    "join_private inner": _inner_join,
    "join_private left": _left_join,
    "flat_map": _flat_map,
    "per-person columns": _unit_columns,
    "per_unit": _per_unit,
    "combined": _combined,
}


def _session(data: dict[str, Any], seed: int) -> pf.Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.SeededRandomnessWarning)
        return pf.Session(data, "u", pf.zCDP(10.0), rng=SeededRandomness(seed))


@pytest.mark.parametrize("construct", list(QUERIES))
def test_spark_releases_and_explains_steps_over_units_as_polars(
    spark, tables: dict[str, pl.DataFrame], construct: str
) -> None:
    # No truncation or bound binds: the exact aggregates are equal, so the same
    # seeded noise gives the same released table.
    build = QUERIES[construct]
    local = _session(tables, 7)
    remote = _session({name: spark_table(spark, df) for name, df in tables.items()}, 7)
    local_query, remote_query = build(local), build(remote)
    explained = local_query.explain(rho=1.0)
    assert str(remote_query.explain(rho=1.0)) == str(explained)
    assert remote_query.explain(rho=1.0).bound == explained.bound
    released = pl.from_pandas(remote_query.release(rho=1.0))
    assert released.equals(local_query.release(rho=1.0))


def _rows_per_unit(engine: Any, steps: tuple[Any, ...], units: pl.DataFrame) -> list[int]:
    """Exact rows per unit after ``steps`` (each unit its own public key ``k``)."""
    spec = AggregationSpec(
        (*steps, RowStep("with_columns", (pl.col("u").alias("k"),))),
        "u",
        ("k",),
        units,
        None,
        10_000,
        None,
        (),
        seed=3,
    )
    return engine.aggregate(spec)[COUNT].to_list()


def test_a_binding_truncation_keeps_at_most_its_rows_per_unit_on_spark(spark, tables) -> None:
    # Spark keeps other rows than polars when a truncation binds, but as many:
    # min(rows, l) per unit.
    visits, drugs = tables["visits"], tables["drugs"]
    units = pl.DataFrame({"k": sorted(visits["u"].unique().to_list())})
    items = visits.group_by("u").agg(pl.col("items").list.len().sum().alias("n"))
    in_both = units.with_columns(pl.col("k").is_in(drugs["u"].implode()).cast(pl.Int64).alias("n"))
    cases = {
        "flat_map": (
            (FlatMap("items", "item", 2),),
            items.sort("u")["n"].clip(0, 2).to_list(),
        ),
        "join": ((PrivateJoin("drugs", (), ("u",), "inner", 1, 1),), in_both["n"].to_list()),
    }
    assert max(items["n"]) > 2  # the flat_map's truncation binds
    on_polars = PolarsEngine(visits.lazy(), tables={"drugs": drugs.lazy()})
    on_spark = SparkEngine(spark_table(spark, visits)).with_tables(
        {"drugs": SparkEngine(spark_table(spark, drugs))}
    )
    for name, (steps, expected) in cases.items():
        assert _rows_per_unit(on_polars, steps, units) == expected, name
        assert _rows_per_unit(on_spark, steps, units) == expected, name


def test_integer_per_unit_sums_past_int64_are_null_on_spark_as_on_polars(spark) -> None:
    big = pl.DataFrame(
        {
            "u": [1, 1, 2, 2, 3, 4],
            "x": [2**62, 2**62, -(2**62), -(2**62) - 1, 7, None],
        },
        schema={"u": pl.Int64, "x": pl.Int64},
    )
    frame, schema = plain_frame(spark_table(spark, big), "u")
    steps = (PerUnit((), (("total", pf.unit.sum("x")),)),)
    on_spark, spark_schema = apply_spark_steps(frame, schema, steps, unit="u")
    result = pl.from_arrow(on_spark.toArrow())
    assert isinstance(result, pl.DataFrame)
    result = result.sort("u")
    # 2^63 and −2^63 − 1 leave Int64; a unit without values sums to 0.
    assert result["total"].to_list() == [None, None, 7, 0]
    on_polars = apply_steps(big.lazy(), steps, unit="u").collect().sort("u")
    assert spark_schema == on_polars.schema
    assert result.equals(on_polars)


def test_a_session_refuses_private_tables_on_spark_and_polars_together(spark, tables) -> None:
    mixed = {"visits": spark_table(spark, tables["visits"]), "drugs": tables["drugs"]}
    with pytest.raises(pf.InvalidArgumentError, match="another engine"):
        pf.Session(mixed, "u", pf.zCDP(1.0))
