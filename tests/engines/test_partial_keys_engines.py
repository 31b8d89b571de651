"""Engines with public keys over some group columns ("mixed" grouping), polars and Spark.

The output has a row for every public key in each observed combination of the
other columns (sorted), zeros where a key has no bounded row, and each
combination's distinct units (each unit once, whatever its keys there) for the
selection. Spark runs in local mode (the ``spark`` fixture, conftest.py); each
``aggregate`` call is one Spark job, so the Spark part is a few calls.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import polars as pl
import pytest
from test_spark_engine import (
    KEYS,
    assert_same,
    heavy_unit,
    run_polars,
    run_spark,
    small_data,
    spec,
    to_spark,
)

from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import COUNT, DISTINCT, AggregationSpec

PUBLIC = pl.DataFrame({"g": KEYS})  # "g" and "h" have no rows; "zz" and null are not public


def mixed(**kwargs: Any) -> AggregationSpec:
    return spec(keys=PUBLIC, group_by=("g", "mo"), **kwargs)


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    return small_data()


def test_every_public_key_for_each_observed_combination(data: pl.DataFrame) -> None:
    # k = 3, m = 2: no unit has more (small_data), so bounding does not bind.
    out = run_polars(data, mixed(k=3, m=2))
    public = data.filter(pl.col("g").is_in(KEYS) & pl.col("u").is_not_null())
    months = sorted(set(public["mo"]))
    assert out.select("mo", "g").rows() == list(itertools.product(months, KEYS))
    # Each (key, combination) as the observed grouping over both columns computes it.
    observed = run_polars(data, spec(group_by=("g", "mo"), k=3, m=2))
    joined = out.join(observed, on=["g", "mo"], how="left", suffix="_observed")
    for name in (COUNT, "s", "c", "q", "t"):
        assert joined[name].to_list() == joined[f"{name}_observed"].fill_null(0).to_list()
    # Distinct units per combination, each unit once even with rows under several keys.
    units = public.group_by("mo").agg(pl.col("u").n_unique().alias("units"))
    per_month = out.group_by("mo").agg(pl.col(DISTINCT).unique())
    expected = dict(zip(units["mo"], units["units"], strict=True))
    assert dict(per_month.iter_rows()) == {m: [expected[m]] for m in months}


def test_a_unit_under_several_keys_of_one_combination_counts_once() -> None:
    df = pl.DataFrame(
        {"u": [1, 1, 1, 2, 3], "g": ["a", "b", "zz", "a", "a"], "mo": [1, 1, 1, 1, 2], "x": 1.0}
    )
    s = spec(keys=pl.DataFrame({"g": ["a", "b", "c"]}), group_by=("g", "mo"), k=3, m=1)
    out = run_polars(df, s)
    assert out.select("mo", "g", COUNT, DISTINCT).rows() == [
        (1, "a", 2, 2),
        (1, "b", 1, 2),
        (1, "c", 0, 2),
        (2, "a", 1, 1),
        (2, "b", 0, 1),
        (2, "c", 0, 1),
    ]
    without_unit = run_polars(df, AggregationSpec(s.steps, None, *_rest(s)))
    assert without_unit[DISTINCT].to_list() == [3, 3, 3, 1, 1, 1]  # each row its own unit


def _rest(s: AggregationSpec) -> tuple[Any, ...]:
    return (s.group_by, s.keys, s.max_groups, 1, None, s.values, s.seed)


def test_null_in_a_selected_column_is_no_combination() -> None:
    df = pl.DataFrame({"u": [1, 2], "g": ["a", "a"], "mo": [1, None], "x": 1.0})
    s = spec(keys=pl.DataFrame({"g": ["a"]}), group_by=("g", "mo"), k=1, m=1)
    assert run_polars(df, s).select("mo", COUNT).rows() == [(1, 1)]


def test_partitions_give_the_same_result(data: pl.DataFrame) -> None:
    s = mixed(k=2, m=1, histograms=())
    one = PolarsEngine(data.lazy()).aggregate(s)
    assert_same(PolarsEngine(data.lazy(), partitions=3).aggregate(s), one)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_heavy_unit_is_bounded_and_counted_once(k: int, data: pl.DataFrame) -> None:
    # The heavy unit has rows under six public keys, all in month 1.
    s = mixed(k=k, m=3, seed=7, histograms=())
    without = run_polars(data, s)
    got = run_polars(pl.concat([data, heavy_unit()]), s)
    assert got.select("mo", "g").equals(without.select("mo", "g"))
    d_count = (got[COUNT] - without[COUNT]).to_numpy()
    d_units = (got[DISTINCT] - without[DISTINCT]).to_numpy()
    month_one = (got["mo"] == 1).to_numpy()
    assert np.count_nonzero(d_count) == k
    assert ((d_count >= 0) & (d_count <= 3)).all()
    assert (d_units[month_one] == 1).all()  # one more unit in its one combination
    assert (d_units[~month_one] == 0).all()


@pytest.fixture(scope="module")
def spark_data(spark: Any, data: pl.DataFrame) -> Any:
    return to_spark(spark, pl.concat([data, heavy_unit()]))


SPARK = {
    "one key column, values and histograms": mixed(k=3, m=2),
    "keys over r, g and mo observed, no unit": spec(
        unit=None,
        keys=pl.DataFrame({"r": ["s", "n", "x"]}),
        group_by=("r", "g", "mo"),
        m=1,
        histograms=(),
    ),
}


@pytest.mark.parametrize("name", list(SPARK))
def test_spark_equals_polars(name: str, data: pl.DataFrame, spark_data: Any) -> None:
    # The heavy unit makes m bind, which both engines compute deterministically; k = 3
    # keeps every group of the other units and the heavy unit has only one combination.
    s = SPARK[name]
    expected = run_polars(pl.concat([data, heavy_unit()]), s)
    assert expected[COUNT].sum() > 0
    got = run_spark(spark_data, s)
    if s.unit is not None:  # which 3 of its 6 keys the heavy unit keeps differs by engine
        month_one = pl.col("mo") == 1
        assert_same(got.filter(~month_one), expected.filter(~month_one))
        assert got.filter(month_one)[DISTINCT].equals(expected.filter(month_one)[DISTINCT])
        assert got.select("mo", "g").equals(expected.select("mo", "g"))
    else:
        assert_same(got, expected)
