"""pf.count_distinct(): distinct privacy units per group.

The noise's statistical test is in tests/statistical/test_count_distinct_statistical.py.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from release_setup import DISTINCT_KEYS, distinct_data, distinct_query

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import DISTINCT, AggregationSpec


def test_sensitivity_is_sqrt_k_whatever_m() -> None:
    sess = pf.Session(distinct_data(), "u", pf.zCDP(1.0))
    for k, m in [(1, 1), (3, 50), (4, 7)]:
        (measurement,) = distinct_query(sess, k, m).explain(rho=0.5).measurements
        assert measurement.l2_sensitivity == pytest.approx(math.sqrt(k))
    rows = pf.Session(distinct_data(), None, pf.zCDP(1.0))
    (measurement,) = (
        rows.query()
        .group_by("g", keys=DISTINCT_KEYS)
        .agg(pf.count_distinct())
        .explain(rho=0.5)
        .measurements
    )
    assert measurement.l2_sensitivity == 1


def test_exact_distinct_counts_match_polars_when_bounds_do_not_bind() -> None:
    df = distinct_data()
    spec = AggregationSpec(
        (), "u", ("g",), pl.DataFrame({"g": DISTINCT_KEYS}), None, 10**6, None, (), 1
    )
    exact = PolarsEngine(df.lazy()).aggregate(spec)
    truth = df.group_by("g").agg(pl.col("u").n_unique()).sort("g")
    assert exact[DISTINCT].to_list() == truth["u"].to_list()


def test_a_heavy_unit_adds_at_most_one_to_at_most_k_groups() -> None:
    df = distinct_data()
    heavy = pl.DataFrame({"u": [10**6] * 5_000, "g": DISTINCT_KEYS * 1_250, "x": [0.5] * 5_000})
    spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": DISTINCT_KEYS}), 2, 3, None, (), 9)
    without = PolarsEngine(df.lazy()).aggregate(spec)[DISTINCT].to_numpy()
    with_heavy = PolarsEngine(pl.concat([df, heavy]).lazy()).aggregate(spec)[DISTINCT].to_numpy()
    diff = with_heavy - without
    assert set(diff.tolist()) <= {0, 1}
    assert diff.sum() == 2
