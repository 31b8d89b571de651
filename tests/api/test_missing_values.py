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


MISSING = [10.0, None, float("nan"), 20.0]


@pytest.mark.parametrize(
    ("missing", "mean", "total", "variance"),
    [
        # The midpoint 50 for each missing value: mean 130/4, variance about it.
        ("midpoint", 32.5, 130.0, 318.75),
        # Left out: the mean, sum and variance of 10 and 20 only.
        ("drop", 15.0, 30.0, 25.0),
        # Counted as 0: (10 + 0 + 0 + 20)/4; the variance of 10, 0, 0, 20.
        (0, 7.5, 30.0, 68.75),
        # A replacement beyond the bounds is clipped like any value: 100.
        (500, 57.5, 230.0, 1818.75),
    ],
)
def test_each_missing_rule_gives_its_exact_release(missing, mean, total, variance):
    query = (
        exact_release(_one_group(MISSING), unit=None)
        .query()
        .bound(max_rows_per_group=100)
        .agg(
            pf.count(),
            pf.mean("x", (0, 100), missing=missing),
            pf.sum("x", (0, 100), missing=missing),
            pf.var("x", (0, 100), missing=missing),
        )
    )
    result = query.release(rho=EXACT, with_error=True)
    assert result["count"][0] == 4  # count() counts rows, whatever their values
    for name, expected in (("x_mean", mean), ("x_sum", total), ("x_var", variance)):
        # Within 5 of its own std (about 0.8 for the variance at this ρ): far from the
        # other rules' values, which differ by 7 or more.
        assert abs(result[name][0] - expected) <= 5 * result[f"{name}_std"][0], name


def test_the_default_missing_rule_is_the_midpoint_as_documented():
    df = _one_group(MISSING)
    default = _release_x(df, pf.mean("x", (0, 100)), pf.std("x", (0, 100)))
    midpoint = _release_x(
        df, pf.mean("x", (0, 100), missing="midpoint"), pf.std("x", (0, 100), missing="midpoint")
    )
    assert default.equals(midpoint)
    assert pf.sum("x", (0, 1)).missing == "midpoint"


def test_drop_reads_the_count_of_values_and_sql_metadata_chooses_it():
    df = _one_group(MISSING)
    sess = pf.Session(
        df,
        None,
        pf.zCDP(EXACT),
        metadata={"x": pf.Column(bounds=(0, 100), missing="drop")},
        rng=SeededRandomness(0),
    )
    query = sess.sql("SELECT AVG(x) AS m, SUM(x) AS s FROM data")
    text = str(query.explain(rho=EXACT / 4))
    assert "m = 50 + centred_sum(x, [0, 100], missing drop) / count(x)" in text
    assert "m: a row whose 'x' is null or NaN is left out (missing='drop')" in text
    result = query.release(rho=EXACT / 4)
    assert result["m"][0] == pytest.approx(15.0, abs=0.15)
    assert result["s"][0] == pytest.approx(30.0, abs=0.5)


def test_explain_says_what_a_missing_value_does_for_each_value_aggregate():
    df = _one_group(MISSING)
    query = (
        exact_release(df, unit=None)
        .query()
        .bound(max_rows_per_group=100)
        .agg(
            pf.count(),
            pf.mean("x", (0, 100)),
            pf.sum("x", (0, 100), missing=0),
            pf.median("x", (0, 100)),
        )
    )
    rules = dict(query.explain(rho=1.0).missing_rules)
    assert list(rules) == ["x_mean", "x_sum", "x_median"]  # count() reads no column
    assert "counts as the bounds' midpoint 50" in rules["x_mean"]
    assert "counts as 0" in rules["x_sum"]
    assert "left out" in rules["x_median"]
    assert "missing values" in query.explain(rho=1.0)._repr_html_()
    assert "counts as the bounds&#x27; midpoint 50" in query._repr_html_()


@pytest.mark.parametrize(
    ("missing", "error"),
    [
        ("refuse", pf.InvalidArgumentError),
        (None, pf.InvalidArgumentError),
        (True, pf.InvalidArgumentError),
        (float("nan"), pf.InvalidValueError),
        (float("inf"), pf.InvalidValueError),
    ],
)
def test_only_rules_that_look_at_no_value_are_accepted(missing, error):
    with pytest.raises(error, match="missing") as info:
        pf.mean("x", (0, 1), missing=missing)
    # A refusal on a missing value would depend on one person's data: the hint says so.
    assert "disclose" in str(info.value)


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
