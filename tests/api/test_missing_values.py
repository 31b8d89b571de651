"""Nulls, NaN, infinities and empty input in a release, and null privacy unit IDs."""

from __future__ import annotations

import polars as pl
import pytest
from session_setup import (
    EXACT,
    REGIONS,
    SENTINEL_NUMBER,
    exact_release,
)

import privframe as pf
from privframe.api.cli import readme_query
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


def _one_group(values, unit=None):
    data = {"region": ["north"] * len(values), "x": values}
    if unit is not None:
        data["user_id"] = unit
    return pl.DataFrame(data, strict=False)


def _release_x(df, *aggs, unit=None):
    return (
        exact_release(df, unit=unit)
        .query()
        .bound(max_rows_per_group=100)
        .group_by("region", keys=["north"])
        .agg(*aggs)
        .release(rho=EXACT / 4)
    )


def test_null_and_nan_in_a_sum_count_as_the_midpoint_as_in_a_mean():
    df = _one_group([4.0, None, float("nan")])
    result = _release_x(df, pf.sum("x", bounds=(0, 10)), pf.count(), pf.mean("x", (0, 10)))
    assert result["x_sum"][0] == pytest.approx(4.0 + 5 + 5, abs=0.15)  # σ = 0.02
    assert result["count"][0] == 3
    # The sum and the mean read one centred sum and one count: they agree.
    assert result["x_mean"][0] == pytest.approx(result["x_sum"][0] / 3, abs=0.05)
    shifted = _release_x(df, pf.sum("x", bounds=(1, 10)))
    assert shifted["x_sum"][0] == pytest.approx(4.0 + 5.5 + 5.5, abs=0.15)


def test_filtering_missing_values_gives_sql_semantics():
    df = _one_group([4.0, None, float("nan"), 6.0])
    query = (
        exact_release(df, unit=None)
        .query()
        .filter(pl.col("x").is_not_null() & pl.col("x").is_not_nan())
        .bound(max_rows_per_group=100)
        .group_by("region", keys=["north"])
        .agg(pf.sum("x", bounds=(0, 10)), pf.mean("x", bounds=(0, 10)))
    )
    result = query.release(rho=EXACT / 4)
    assert result["x_sum"][0] == pytest.approx(10.0, abs=0.15)
    assert result["x_mean"][0] == pytest.approx(5.0, abs=0.05)


def test_null_and_nan_in_a_mean_count_as_the_midpoint():
    df = _one_group([10.0, None, float("nan"), 20.0])
    result = _release_x(df, pf.mean("x", bounds=(0, 100)))
    # σ of the centred sum is 0.1, so the mean is within 0.15 (6σ/4).
    assert result["x_mean"][0] == pytest.approx((10 + 50 + 50 + 20) / 4, abs=0.15)


def test_infinities_are_clipped():
    df = _one_group([float("inf"), float("-inf"), 5.0])
    result = _release_x(df, pf.sum("x", bounds=(-2, 10)), pf.mean("x", bounds=(-2, 10)))
    assert result["x_sum"][0] == pytest.approx(13.0, abs=0.15)
    assert result["x_mean"][0] == pytest.approx(13.0 / 3, abs=0.05)


def test_null_keys_are_dropped():
    df = pl.DataFrame({"region": ["north", None, "north", None], "x": [1.0] * 4})
    result = _release_x(df, pf.count())
    assert result["count"].to_list() == [2]


@pytest.mark.parametrize(
    "unit",
    [[1, None, 2], [1.0, float("nan"), 2.0], ["a", None, "b"]],
    ids=["null-int", "nan-float", "null-str"],
)
@pytest.mark.parametrize("kind", ["polars", "pandas"])
def test_null_unit_ids_raise_and_charge_nothing(unit, kind, tmp_path):
    df = pl.DataFrame(
        {"user_id": unit, "region": ["north"] * 3, "x": [1.0, SENTINEL_NUMBER, 3.0]},
        strict=False,
    )
    ledger = tmp_path / "spend.sqlite"
    # Refused when the session opens, on the whole column: no filter a query might
    # add (which could exclude the null row) can steer whether the error happens.
    with pytest.raises(pf.InvalidValueError, match="'user_id'") as info:
        pf.Session(df.to_pandas() if kind == "pandas" else df, "user_id", pf.zCDP(1.0), ledger)
    assert "987654" not in str(info.value)
    assert not ledger.exists()


def test_null_unit_check_reads_lazy_inputs_too(tmp_path):
    path = tmp_path / "data.parquet"
    pl.DataFrame({"user_id": [1, None], "region": ["north", "south"]}).write_parquet(path)
    with pytest.raises(pf.InvalidValueError, match="'user_id'"):
        pf.Session(path, "user_id", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidValueError, match="'user_id'"):
        pf.Session(pl.scan_parquet(path), "user_id", pf.zCDP(1.0))


def test_empty_input_gives_noisy_zeros_for_every_key():
    df = pl.DataFrame(
        schema={"user_id": pl.Int64, "region": pl.String, "age": pl.Int64, "amount": pl.Float64}
    )
    sess = pf.Session(df, "user_id", pf.zCDP(1.0), rng=SeededRandomness(8))
    query = readme_query(sess)
    expl = query.explain(rho=0.5)
    result = query.release(rho=0.5)
    assert result["region"].to_list() == REGIONS
    for row in expl.rows:
        if row["output"] in ("count", "amount_sum"):
            assert (result[row["output"]].abs() < 6 * float(str(row["std"]))).all()
    # Noise, not a constant zero.
    assert result["amount_sum"].n_unique() > 1
    assert result["avg_amount"].is_between(0, 1000).all()
    assert sess.spent.rho == pytest.approx(0.5)
