"""query.tune on Spark: the same contribution histograms, tuned bounds, table and charge as polars.

Spark runs in local mode (``local[2]``), started by the ``spark`` fixture in
conftest.py. Kept small: every Spark job costs seconds on two cores.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.tune import Tuned
from privframe.engines.contributions import ContributionSpec
from privframe.engines.polars import PolarsEngine
from privframe.engines.spark.engine import SparkEngine
from privframe.engines.spec import AggregationSpec, RowStep
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.tuning import MAGNITUDE_EDGES, SCALE, group_edges, integer_edges

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

KEYS = ["a", "b", "c"]


def _frame(seed: int, n: int = 300) -> pl.DataFrame:
    """Null unit ids, null and non-public keys, float values with NaN and ±inf, ints with nulls."""
    rng = np.random.default_rng(seed)
    x = rng.standard_cauchy(n) * rng.choice([0.01, 1.0, 1e4], n)
    x[rng.random(n) < 0.05] = np.nan
    x[rng.random(n) < 0.03] = np.inf
    x[rng.random(n) < 0.03] = -np.inf
    x[rng.random(n) < 0.05] = 0.0
    y = rng.integers(-50, 50, n)
    return pl.DataFrame(
        {
            "u": rng.integers(0, n // 6, n),
            "g": rng.choice([*KEYS, "zz"], n),
            "h": rng.choice(["p", "q"], n),
            "x": x,
            "y": y,
            "age": rng.integers(10, 90, n),
        }
    ).with_columns(
        pl.when(pl.Series(rng.random(n) < 0.05)).then(None).otherwise(pl.col("u")).alias("u"),
        pl.when(pl.Series(rng.random(n) < 0.05)).then(None).otherwise(pl.col("g")).alias("g"),
        pl.when(pl.Series(rng.random(n) < 0.05)).then(None).otherwise(pl.col("y")).alias("y"),
        pl.when(pl.Series(rng.random(n) < 0.05)).then(None).otherwise(pl.col("h")).alias("h"),
        # A float unit column with NaN ids (dropped, as null ones).
        pl.when(pl.Series(rng.random(n) < 0.05))
        .then(float("nan"))
        .otherwise(pl.col("u").cast(pl.Float64))
        .alias("v"),
    )


def _spec(unit: str | None, group_by: tuple[str, ...], keyed: bool) -> ContributionSpec:
    keys = pl.DataFrame({"g": KEYS}) if keyed else None
    steps = (RowStep("filter", (pl.col("age") >= 18,)),)
    rows = AggregationSpec(steps, unit, group_by, keys, None, 1, None, (), seed=3)
    return ContributionSpec(
        rows,
        scale=SCALE,
        group_edges=group_edges(len(KEYS)),
        row_edges=integer_edges(1 << 31),
        value_columns=("x", "y"),
        value_edges=MAGNITUDE_EDGES,
    )


@pytest.mark.parametrize(
    ("seed", "unit", "group_by", "keyed"),
    [
        (0, "u", ("g",), True),  # public keys
        (1, "u", ("g", "h"), True),  # public keys and key selection
        (2, None, ("g",), True),  # each row its own unit
        (3, "u", (), False),  # one global group
        (5, "v", ("h", "g"), True),  # NaN unit ids
    ],
)
def test_spark_contributions_equal_the_polars_engines_bin_for_bin(
    spark, seed: int, unit: str | None, group_by: tuple[str, ...], keyed: bool
) -> None:
    data = _frame(seed)
    spec = _spec(unit, group_by, keyed)
    local = PolarsEngine(data.lazy()).contributions(spec)
    remote = SparkEngine(spark.createDataFrame(data.to_pandas())).contributions(spec)
    assert local.groups.sum() > 0  # not vacuous
    assert local.values["x"].sum() > 0
    np.testing.assert_array_equal(remote.groups, local.groups)
    np.testing.assert_array_equal(remote.rows, local.rows)
    assert remote.values.keys() == local.values.keys()
    for column in local.values:
        np.testing.assert_array_equal(remote.values[column], local.values[column])


def _tuned(data: object) -> tuple[pf.Session, Tuned[Any]]:
    sess = pf.Session(data, "u", pf.zCDP(10), rng=SeededRandomness(11))
    query = (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("g", keys=KEYS)
        .agg(pf.count(), pf.sum("y", (-1000, 1000)), pf.mean("y", (-1000, 1000)))
    )
    return sess, query.tune(rho=5.0, plan_rho=0.5)


def test_tune_on_a_spark_session_equals_tune_on_a_polars_session(spark) -> None:
    # A large rho: the bins clear their threshold, so tune moves the given limits and bounds.
    data = _frame(4, n=600).with_columns(pl.col("u").fill_null(-1))  # sessions refuse null units
    local_sess, local = _tuned(data)
    remote_sess, remote = _tuned(spark.createDataFrame(data.to_pandas()))
    assert local.bound != pf.Bound(max_groups=1, max_rows_per_group=1)  # not vacuous
    assert remote.bound == local.bound
    assert remote.bounds == local.bounds
    assert pl.from_pandas(remote.table).equals(local.table)
    local_entry, remote_entry = local_sess.ledger[-1], remote_sess.ledger[-1]
    assert (remote_entry.label, remote_entry.description) == (
        local_entry.label,
        local_entry.description,
    )
    assert remote_sess.spent.exact_rho == local_sess.spent.exact_rho == Fraction(5)


def _auto_bounds(data: object) -> tuple[pf.Session, Any]:
    sess = pf.Session(data, "u", pf.zCDP(10), rng=SeededRandomness(12))
    query = (
        sess.query()
        .filter(pl.col("age") >= 18)
        .group_by("g", keys=KEYS)
        .agg(pf.sum("y", per_unit_bounds="auto"), pf.count(per_unit_bounds="auto"))
    )
    return sess, query.release(rho=5.0, label="auto")


def test_automatic_bounds_on_spark_choose_and_release_as_on_polars(spark) -> None:
    data = _frame(5, n=600).with_columns(pl.col("u").fill_null(-1))
    local_sess, local = _auto_bounds(data)
    remote_sess, remote = _auto_bounds(spark.createDataFrame(data.to_pandas()))
    chosen = local_sess.ledger[-1].description["auto_bounds"]["chosen"]
    assert chosen["y_sum"][0] < 0 < chosen["y_sum"][1]  # values of both signs: not vacuous
    assert remote_sess.ledger[-1].description == local_sess.ledger[-1].description
    assert [e.label for e in remote_sess.ledger] == ["auto: bounds", "auto"]
    assert pl.from_pandas(remote).sort("g").equals(local.sort("g"))
