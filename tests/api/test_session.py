"""Session and Query: the release flow, input and output kinds, group keys."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest
from session_setup import (
    EXACT,
    REGIONS,
    exact_release,
    make_data,
)

import privframe as pf
from privframe.api.cli import readme_query
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


# -- the README flow, input and output kinds --------------------------------------------


def test_readme_example_polars_in_polars_out():
    sess = pf.Session(make_data(), privacy_unit="user_id", budget=pf.zCDP(rho=1.0))
    query = readme_query(sess)
    assert "sigma" in str(query.explain(rho=0.1))
    result = query.release(rho=0.1)
    assert isinstance(result, pl.DataFrame)
    assert result.columns == ["region", "count", "amount_sum", "avg_amount"]
    assert result["region"].to_list() == REGIONS
    assert result["count"].dtype == pl.Int64
    assert sess.spent.rho == pytest.approx(0.1)
    assert sess.remaining.rho == pytest.approx(0.9)
    assert len(sess.ledger) == 1


def test_pandas_in_pandas_out():
    sess = pf.Session(make_data().to_pandas(), "user_id", pf.zCDP(1.0))
    result = readme_query(sess).release(rho=0.1)
    assert isinstance(result, pd.DataFrame)
    assert list(result.columns) == ["region", "count", "amount_sum", "avg_amount"]
    assert list(result["region"]) == REGIONS


def test_lazyframe_in_polars_out():
    sess = pf.Session(make_data().lazy(), "user_id", pf.zCDP(1.0))
    result = readme_query(sess).release(rho=0.1)
    assert isinstance(result, pl.DataFrame)
    assert result["region"].to_list() == REGIONS


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
@pytest.mark.parametrize("as_str", [True, False])
def test_file_paths_in_polars_out(tmp_path, suffix, as_str):
    df = make_data()
    path = tmp_path / f"data.{suffix}"
    df.write_parquet(path) if suffix == "parquet" else df.write_csv(path)
    # A CSV's types are declared (its columns are text otherwise); parquet keeps its own.
    types = {"age": pf.Column(type="int64"), "amount": pf.Column(type="float64")}
    sess = exact_release(str(path) if as_str else path, metadata=types)
    result = readme_query(sess).release(rho=EXACT)
    assert isinstance(result, pl.DataFrame)
    # Same exact aggregates as the in-memory frame (count noise is negligible at this
    # rho; the sums' σ is about 10.6 each).
    reference = readme_query(exact_release(df)).release(rho=EXACT)
    assert result["count"].to_list() == reference["count"].to_list()
    assert result["amount_sum"].to_numpy() == pytest.approx(
        reference["amount_sum"].to_numpy(), abs=100
    )


def test_exact_results_match_plain_polars_when_bounds_do_not_bind():
    df = make_data()
    sess = exact_release(df)
    result = (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=100)
        .group_by("region", keys=REGIONS)
        .agg(pf.count(), pf.sum("amount", bounds=(0, 1000)), pf.mean("amount", bounds=(0, 1000)))
        .release(rho=EXACT, with_error=True)
    )
    by_hand = (
        pl.DataFrame({"region": REGIONS})
        .join(
            df.filter(pl.col("age") >= 18)
            .group_by("region")
            .agg(pl.len().alias("n"), pl.col("amount").sum().alias("s")),
            on="region",
            how="left",
            maintain_order="left",
        )
        .fill_null(0)
    )
    assert result["count"].to_list() == by_hand["n"].to_list()
    # Within 6σ of the exact values (σ ≈ 212 for the sums, 1.5 for the means).
    sum_error = np.abs(result["amount_sum"].to_numpy() - by_hand["s"].to_numpy())
    assert (sum_error <= 6 * result["amount_sum_std"].to_numpy()).all()
    means = by_hand["s"].to_numpy()[:3] / by_hand["n"].to_numpy()[:3]
    mean_error = np.abs(result["amount_mean"].to_numpy()[:3] - means)
    assert (mean_error <= 6 * result["amount_mean_std"].to_numpy()[:3]).all()


def test_with_error_columns():
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    query = readme_query(sess)
    expl = query.explain(rho=0.1)
    result = query.release(rho=0.1, with_error=True)
    assert result.columns == [
        "region",
        *("count", "count_std", "count_ci95"),
        *("amount_sum", "amount_sum_std", "amount_sum_ci95"),
        *("avg_amount", "avg_amount_std", "avg_amount_ci95"),
    ]
    count = expl.plan.measurement("count")
    assert result["count_std"].to_list() == [count.sigma] * 4
    assert result["count_ci95"].to_list() == [count.ci95] * 4
    assert (result["avg_amount_std"] > 0).all()


def test_builder_is_immutable():
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    base = sess.query()
    bounded = base.bound(max_rows_per_group=2)
    grouped = bounded.group_by("region", keys=REGIONS)
    counted = grouped.agg(pf.count())
    extended = counted.agg(pf.sum("amount", bounds=(0, 10)))
    assert base.plan.bound is None
    assert bounded.plan.group_by == ()
    assert grouped.plan.aggregates == ()
    assert len(counted.plan.aggregates) == 1
    assert len(extended.plan.aggregates) == 2
    assert counted.release(rho=0.1).columns == ["region", "count"]
    assert extended.release(rho=0.1).columns == ["region", "count", "amount_sum"]


def test_aggregating_filter_is_refused():
    # "amount above the mean" would let one person's rows decide which of another's
    # survive: the query builder refuses it before anything runs.
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidArgumentError, match="row"):
        readme_query(sess).filter(pl.col("amount") > pl.col("amount").mean())
    assert sess.ledger == ()


# -- keys -------------------------------------------------------------------------------


def test_absent_keys_present_and_key_order_preserved():
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0), rng=SeededRandomness(3))
    keys = ["zzz", "west", "north", "nowhere"]
    result = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("region", keys=keys)
        .agg(pf.count(), pf.sum("amount", bounds=(0, 100)))
        .release(rho=0.5)
    )
    assert result["region"].to_list() == keys
    assert result["count"].null_count() == 0
    assert result["amount_sum"].null_count() == 0


def test_huge_non_public_group_does_not_move_any_output():
    df = make_data()
    rng = np.random.default_rng(5)
    huge = pl.DataFrame(
        {
            "user_id": rng.integers(0, 100, 20_000),
            "region": ["private-region"] * 20_000,
            "age": [40] * 20_000,
            "amount": [999.0] * 20_000,
        }
    )
    results = []
    for data in (df, pl.concat([df, huge])):
        sess = pf.Session(data, "user_id", pf.zCDP(1.0), rng=SeededRandomness(11))
        results.append(readme_query(sess).release(rho=0.5))
    assert results[0].equals(results[1])


def test_multi_column_keys_product_and_dataframes():
    df = make_data().with_columns(month=pl.col("age") % 3)
    keys = pf.keys.product(region=["south", "north"], month=[2, 0, 1])
    for given in (keys, keys.to_polars(), keys.to_polars().to_pandas()):
        sess = exact_release(df)
        result = (
            sess.query()
            .bound(max_groups=9, max_rows_per_group=100)
            .group_by(["region", "month"], keys=given)
            .agg(pf.count())
            .release(rho=EXACT)
        )
        assert result.select("region", "month").rows() == keys.to_polars().rows()
        by_hand = (
            keys.to_polars()
            .join(df.group_by("region", "month").len(), on=["region", "month"], how="left")
            .fill_null(0)
        )
        assert result["count"].to_list() == by_hand["len"].to_list()


def test_keys_dataframe_columns_reordered_to_group_by():
    df = make_data().with_columns(month=pl.col("age") % 3)
    keys = pl.DataFrame({"month": [0, 1], "region": ["north", "north"]})
    result = (
        exact_release(df)
        .query()
        .bound(max_rows_per_group=100)
        .group_by(["region", "month"], keys=keys)
        .agg(pf.count())
        .release(rho=EXACT)
    )
    assert result.columns == ["region", "month", "count"]


def test_global_aggregate_is_one_row():
    df = make_data()
    result = (
        exact_release(df)
        .query()
        .bound(max_rows_per_group=100)
        .agg(pf.count(), pf.sum("amount", bounds=(0, 1000)))
        .release(rho=EXACT)
    )
    assert result.columns == ["count", "amount_sum"]
    assert result.height == 1
    assert result["count"][0] == df.height


def test_numeric_keys_match_float_and_int_columns():
    df = pl.DataFrame({"u": [1, 2, 3], "k": [1.0, 2.0, 2.0], "i": [1, 2, 2]})
    sess = exact_release(df, unit="u")
    for column in ("k", "i"):
        result = (
            sess.query()
            .bound(max_rows_per_group=1)
            .group_by(column, keys=[2, 1, 3])
            .agg(pf.count())
            .release(rho=EXACT / 2)
        )
        assert result["count"].to_list() == [2, 1, 0]
