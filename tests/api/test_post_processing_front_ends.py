"""Clamping, intervals and totals through SQL and report specs, as through the builder."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import privframe as pf
from privframe.api.cli import main
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

REGIONS = ["north", "south", "east", "west"]


def _session() -> pf.Session:
    return pf.Session(
        pf.datasets.synthetic_transactions(n_rows=2_000, seed=3),
        "user_id",
        pf.zCDP(10.0),
        metadata={"amount": pf.Column(bounds=(0, 1000)), "region": pf.Column(keys=REGIONS)},
        contributions=pf.Bound(max_groups=3, max_rows_per_group=5),
        rng=SeededRandomness(4),
    )


def test_sql_takes_the_release_options_and_orders_the_total_row_like_any_other() -> None:
    sess = _session()
    text = "SELECT region, COUNT(*) AS n, SUM(amount) AS total FROM data GROUP BY region ORDER BY n"
    result = sess.sql(text, rho=0.5, total=True, intervals=True)
    assert isinstance(result, pl.DataFrame)
    assert result["region"].null_count() == 1
    assert result["n"].to_list() == sorted(result["n"].to_list())
    totals = result.filter(pl.col("region").is_null())
    groups = result.filter(pl.col("region").is_not_null())
    assert totals["n"].item() == groups["n"].sum()
    assert {"n_ci95_low", "n_ci95_high", "total_ci95_low", "total_ci95_high"} <= set(result.columns)
    assert (result["n_ci95_low"] >= 0).all()
    unclamped = sess.sql(text, rho=0.5, clamp=False)
    assert sess.spent.rho == pytest.approx(1.0)
    assert unclamped.height == len(REGIONS)


def test_sql_refuses_a_total_without_group_by_before_any_charge() -> None:
    sess = _session()
    with pytest.raises(pf.InvalidValueError, match="total=True"):
        sess.sql("SELECT COUNT(*) AS n FROM data", rho=0.5, total=True)
    assert sess.spent.rho == 0


SPEC = """
[report]
title = "Totals"

[data]
path = "data.parquet"
privacy_unit = "user_id"

[budget]
rho = 1.0
ledger = "ledger.sqlite"

[metadata]
amount = { bounds = [0, 1000] }
region = { keys = ["north", "south", "east", "west"] }

[contributions]
max_groups = 3
max_rows_per_group = 5

[[queries]]
name = "by_region"
group_by = ["region"]
aggregates = [{ kind = "count" }, { kind = "sum", column = "amount" }]
rho = 0.5
total = true
clamp = false
"""


def test_a_report_query_writes_its_total_row(tmp_path: Path) -> None:
    pf.datasets.synthetic_transactions(n_rows=2_000, seed=3).write_parquet(
        tmp_path / "data.parquet"
    )
    (tmp_path / "spec.toml").write_text(SPEC)
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "spec.toml"), "--out", str(out)]) == 0
    table = pl.read_csv(out / "by_region.csv")
    assert table.height == len(REGIONS) + 1
    total = table.filter(pl.col("region").is_null())
    groups = table.filter(pl.col("region").is_not_null())
    assert total["count"].item() == groups["count"].sum()


def test_a_pandas_total_row_keeps_integer_keys_and_counts_exact() -> None:
    # A null key in an integer column must not turn it into float64, which would merge
    # 2^53 and 2^53 + 1.
    keys = [2**53, 2**53 + 1]
    frame = pl.DataFrame({"u": [1, 2, 3], "k": [2**53, 2**53 + 1, 2**53 + 1]}).to_pandas()
    sess = pf.Session(frame, "u", pf.zCDP(1.0), rng=SeededRandomness(1))
    query = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("k", keys=keys)
    result = query.agg(pf.count(), pf.count_distinct()).release(0.5, total=True)
    assert result["k"].tolist()[:2] == keys
    assert result["k"].isna().tolist() == [False, False, True]
    assert str(result["k"].dtype) == "Int64"
    assert str(result["count_distinct"].dtype) == "Int64"
