"""Session and Query: the release flow, input and output kinds, budget, errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import polars as pl
import pytest

import privframe as pf
from privframe.api.cli import readme_query
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

REGIONS = ["north", "south", "east", "west"]
SENTINEL_TEXT = "SENTINEL-7d3f"
SENTINEL_NUMBER = 987654.321
# A budget so large that the noise is negligible (σ ≈ 1e-3): results are the exact aggregates.
EXACT = 1e6


def make_data(n: int = 300, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "user_id": rng.integers(0, 100, n),
            "region": rng.choice(["north", "south", "east"], n),
            "age": rng.integers(10, 80, n),
            "amount": rng.uniform(0, 1000, n).round(2),
        }
    )


def exact_release(df, unit="user_id", seed=0):
    return pf.Session(df, unit, pf.zCDP(EXACT), rng=SeededRandomness(seed))


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
    sess = exact_release(str(path) if as_str else path)
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


# -- budget and ledger ------------------------------------------------------------------


def test_release_twice_charges_twice():
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    query = readme_query(sess)
    query.release(rho=0.25, label="first")
    query.release(rho=0.25, label="second")
    assert sess.spent.rho == pytest.approx(0.5)
    assert [e.label for e in sess.ledger] == ["first", "second"]
    assert [e.rho for e in sess.ledger] == [0.25, 0.25]


def test_budget_refusal_leaves_ledger_unchanged_and_releases_nothing(monkeypatch):
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    query = readme_query(sess)
    query.release(rho=0.75)
    before = (sess.spent, sess.remaining, sess.ledger)

    def must_not_run(spec):
        raise AssertionError("the engine ran for a refused release")

    monkeypatch.setattr(sess._engine, "aggregate", must_not_run)
    with pytest.raises(pf.BudgetExceededError):
        query.release(rho=0.5)
    assert (sess.spent, sess.remaining, sess.ledger) == before


def test_remaining_budget_can_be_spent_exactly():
    sess = pf.Session(make_data(), "user_id", pf.zCDP(1.0))
    query = readme_query(sess)
    query.release(rho=0.1)
    query.release(rho=sess.remaining.rho)
    with pytest.raises(pf.BudgetExceededError):
        query.release(rho=1e-9)


def test_persisted_ledger(tmp_path):
    path = tmp_path / "spend.sqlite"
    first = pf.Session(make_data(), "user_id", pf.zCDP(1.0), ledger=path)
    readme_query(first).release(rho=0.4, label="q1")
    first.accountant.close()
    again = pf.Session(make_data(), "user_id", pf.zCDP(1.0), ledger=str(path))
    assert again.spent.rho == pytest.approx(0.4)
    assert [e.label for e in again.ledger] == ["q1"]
    with pytest.raises(pf.BudgetExceededError):
        readme_query(again).release(rho=0.7)
    again.accountant.close()
    with pytest.raises(pf.LedgerError):
        pf.Session(make_data(), "user_id", pf.zCDP(5.0), ledger=path)


def test_ledger_description_is_public():
    df = make_data().with_columns(
        region=pl.when(pl.col("age") == 30).then(pl.lit(SENTINEL_TEXT)).otherwise("region")
    )
    sess = pf.Session(df, "user_id", pf.zCDP(1.0))
    readme_query(sess).release(rho=0.1)
    entry = sess.ledger[0]
    text = repr(entry)
    assert SENTINEL_TEXT not in text
    assert str(df.height) not in str(entry.description)


# -- reproducibility --------------------------------------------------------------------


def test_seeded_sessions_are_reproducible_and_flagged():
    df = pl.concat([make_data(), make_data(seed=1)])
    results = []
    for seed in (42, 42, 43):
        sess = pf.Session(df, "user_id", pf.zCDP(1.0), rng=SeededRandomness(seed))
        with pytest.warns(pf.SeededRandomnessWarning):
            results.append(readme_query(sess).release(rho=0.5))
        assert sess.ledger[0].seeded is True
    assert results[0].equals(results[1])
    assert not results[0].equals(results[2])
    unseeded = pf.Session(df, "user_id", pf.zCDP(1.0))
    readme_query(unseeded).release(rho=0.5)
    assert unseeded.ledger[0].seeded is False


# -- nulls, NaN, infinities, empty input ---------------------------------------------------


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


def test_null_and_nan_in_a_sum_count_as_zero_clipped():
    df = _one_group([4.0, None, float("nan")])
    result = _release_x(df, pf.sum("x", bounds=(0, 10)), pf.count())
    assert result["x_sum"][0] == pytest.approx(4.0, abs=0.15)  # σ = 0.02
    assert result["count"][0] == 3
    # 0 is outside [1, 10]: a missing value is clipped to 1.
    clipped = _release_x(df, pf.sum("x", bounds=(1, 10)))
    assert clipped["x_sum"][0] == pytest.approx(6.0, abs=0.15)


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
    for name, measurement in (("count", "count"), ("amount_sum", expl.measurements[1].key)):
        sigma = expl.plan.measurement(measurement).sigma
        assert (result[name].abs() < 6 * sigma).all()
    # Noise, not a constant zero.
    assert result["amount_sum"].n_unique() > 1
    assert result["avg_amount"].is_between(0, 1000).all()
    assert sess.spent.rho == pytest.approx(0.5)


# -- bad input --------------------------------------------------------------------------


@pytest.fixture
def sentinel_session() -> pf.Session:
    df = pl.DataFrame(
        {
            "user_id": [1, 2, 3],
            "region": ["north", SENTINEL_TEXT, "south"],
            "amount": [1.0, SENTINEL_NUMBER, 3.0],
            "name": ["ann", SENTINEL_TEXT, "bob"],
        }
    )
    return pf.Session(df, "user_id", pf.zCDP(1.0))


def _bounded(sess):
    return sess.query().bound(max_groups=2, max_rows_per_group=1)


BAD_QUERIES = {
    "unknown agg column": (
        lambda s: _bounded(s).agg(pf.sum("nope", bounds=(0, 1))).release(rho=0.1),
        pf.InvalidValueError,
        "'nope'",
    ),
    "unknown mean column": (
        lambda s: _bounded(s).agg(pf.mean("nope", bounds=(0, 1))).explain(rho=0.1),
        pf.InvalidValueError,
        "'nope'",
    ),
    "unknown group_by column": (
        lambda s: _bounded(s).group_by("nope", keys=["a"]).agg(pf.count()).release(rho=0.1),
        pf.InvalidValueError,
        "'nope'",
    ),
    "unknown filter column": (
        lambda s: _bounded(s).filter(pl.col("nope") > 1).agg(pf.count()).release(rho=0.1),
        pf.InvalidValueError,
        "nope",
    ),
    "non-boolean filter": (
        lambda s: _bounded(s).filter(pl.col("amount") + 1).agg(pf.count()).release(rho=0.1),
        pf.InvalidValueError,
        "filter",
    ),
    "filter not an expression": (
        lambda s: _bounded(s).filter("amount > 1"),
        pf.InvalidArgumentError,
        "filter",
    ),
    "non-numeric sum column": (
        lambda s: _bounded(s).agg(pf.sum("name", bounds=(0, 1))).release(rho=0.1),
        pf.InvalidArgumentError,
        "'name'",
    ),
    "non-numeric mean column": (
        lambda s: _bounded(s).agg(pf.mean("name", bounds=(0, 1))).release(rho=0.1),
        pf.InvalidArgumentError,
        "'name'",
    ),
    "inverted bounds": (
        lambda s: pf.sum("amount", bounds=(10, 0)),
        pf.InvalidValueError,
        "'amount'",
    ),
    "equal bounds": (
        lambda s: pf.mean("amount", bounds=(3, 3)),
        pf.InvalidValueError,
        "'amount'",
    ),
    "infinite bound": (
        lambda s: pf.sum("amount", bounds=(0, math.inf)),
        pf.InvalidValueError,
        "'amount'",
    ),
    "NaN bound": (
        lambda s: pf.mean("amount", bounds=(math.nan, 1)),
        pf.InvalidValueError,
        "'amount'",
    ),
    "bounds not a pair": (
        lambda s: pf.sum("amount", bounds=5),
        pf.InvalidArgumentError,
        "'amount'",
    ),
    "string bound": (
        lambda s: pf.sum("amount", bounds=("0", 1)),
        pf.InvalidArgumentError,
        "'amount'",
    ),
    "zero rho": (
        lambda s: _bounded(s).agg(pf.count()).release(rho=0.0),
        pf.InvalidBudgetError,
        "rho",
    ),
    "negative rho": (
        lambda s: _bounded(s).agg(pf.count()).release(rho=-0.1),
        pf.InvalidBudgetError,
        "rho",
    ),
    "infinite rho": (
        lambda s: _bounded(s).agg(pf.count()).release(rho=math.inf),
        pf.InvalidBudgetError,
        "rho",
    ),
    "NaN rho": (
        lambda s: _bounded(s).agg(pf.count()).explain(rho=math.nan),
        pf.InvalidBudgetError,
        "rho",
    ),
    "string rho": (
        lambda s: _bounded(s).agg(pf.count()).release(rho="0.1"),
        pf.InvalidArgumentError,
        "rho",
    ),
    "int keys for a string column": (
        lambda s: _bounded(s).group_by("region", keys=[1, 2]).agg(pf.count()).release(rho=0.1),
        pf.InvalidArgumentError,
        "'region'",
    ),
    "string keys for a numeric column": (
        lambda s: _bounded(s).group_by("amount", keys=["a"]).agg(pf.count()).release(rho=0.1),
        pf.InvalidArgumentError,
        "'amount'",
    ),
    "duplicate aliases": (
        lambda s: _bounded(s).agg(pf.count(), pf.sum("amount", bounds=(0, 1)).alias("count")),
        pf.InvalidValueError,
        "count",
    ),
    "duplicate default names": (
        lambda s: _bounded(s).agg(pf.count()).agg(pf.count()),
        pf.InvalidValueError,
        "count",
    ),
    "alias equal to a key column": (
        lambda s: (
            _bounded(s)
            .group_by("region", keys=["north"])
            .agg(pf.count().alias("region"))
            .release(rho=0.1)
        ),
        pf.InvalidValueError,
        "'region'",
    ),
    "error column clash": (
        lambda s: (
            _bounded(s)
            .agg(pf.count().alias("n"), pf.sum("amount", bounds=(0, 1)).alias("n_std"))
            .release(rho=0.1, with_error=True)
        ),
        pf.InvalidValueError,
        "n_std",
    ),
    "group_by without keys and no delta in the budget": (
        lambda s: _bounded(s).group_by("region").agg(pf.count()).release(rho=0.1),
        pf.InvalidBudgetError,
        "keys",
    ),
    "empty keys": (
        lambda s: _bounded(s).group_by("region", keys=[]),
        pf.InvalidValueError,
        "region",
    ),
    "duplicate keys": (
        lambda s: _bounded(s).group_by("region", keys=["north", "north"]),
        pf.InvalidValueError,
        "region",
    ),
    "keys for other columns": (
        lambda s: _bounded(s).group_by("region", keys=pf.keys.product(month=[1])),
        pf.InvalidValueError,
        "month",
    ),
    "group_by the unit": (
        lambda s: _bounded(s).group_by("user_id", keys=[1, 2]).agg(pf.count()).release(rho=0.1),
        pf.InvalidValueError,
        "'user_id'",
    ),
    "missing bound with a unit": (
        lambda s: s.query().agg(pf.count()).release(rho=0.1),
        pf.InvalidValueError,
        "bound",
    ),
    "bound with max_groups only": (
        lambda s: s.query().bound(max_groups=2).agg(pf.count()).explain(rho=0.1),
        pf.InvalidValueError,
        "bound",
    ),
    "non-positive bound": (
        lambda s: s.query().bound(max_rows_per_group=0),
        pf.InvalidValueError,
        "max_rows_per_group",
    ),
    "non-integer bound": (
        lambda s: s.query().bound(max_groups=2.5, max_rows_per_group=1),
        pf.InvalidArgumentError,
        "max_groups",
    ),
    "boolean bound": (
        lambda s: s.query().bound(max_rows=True),
        pf.InvalidArgumentError,
        "max_rows",
    ),
    "no aggregates": (
        lambda s: _bounded(s).release(rho=0.1),
        pf.InvalidValueError,
        "agg",
    ),
    "not an aggregate": (
        lambda s: _bounded(s).agg("count"),
        pf.InvalidArgumentError,
        "agg",
    ),
    "unknown weight": (
        lambda s: _bounded(s).agg(pf.count()).release(rho=0.1, weights={"nope": 1}),
        pf.InvalidValueError,
        "nope",
    ),
    "filter that could fail on a private value (strict cast)": (
        lambda s: (
            _bounded(s).filter(pl.col("name").cast(pl.Int64) > 0).agg(pf.count()).release(rho=0.1)
        ),
        pf.InvalidArgumentError,
        "strict",
    ),
}


@pytest.mark.parametrize("case", list(BAD_QUERIES), ids=list(BAD_QUERIES))
def test_bad_input(sentinel_session, case):
    action, error, fragment = BAD_QUERIES[case]
    with pytest.raises(error) as info:
        action(sentinel_session)
    assert isinstance(info.value, pf.PrivframeError)
    assert isinstance(info.value, ValueError | TypeError)
    message = str(info.value)
    assert fragment in message
    assert SENTINEL_TEXT not in message
    assert "987654" not in message
    # Nothing was charged.
    assert sentinel_session.spent.rho == 0
    assert sentinel_session.ledger == ()


def test_missing_privacy_unit_column():
    df = make_data()
    with pytest.raises(pf.InvalidValueError, match="'person'"):
        pf.Session(df, "person", pf.zCDP(1.0))


@pytest.mark.parametrize(
    ("data", "error", "fragment"),
    [
        ([1, 2, 3], pf.InvalidArgumentError, "list"),
        ("missing.parquet", pf.InvalidValueError, "missing.parquet"),
    ],
)
def test_bad_data_source(data, error, fragment):
    with pytest.raises(error, match=fragment):
        pf.Session(data, None, pf.zCDP(1.0))


def test_bad_file_suffix(tmp_path):
    path = tmp_path / "data.json"
    path.write_text("{}")
    with pytest.raises(pf.InvalidValueError, match=r"data\.json"):
        pf.Session(path, None, pf.zCDP(1.0))


def test_unconvertible_pandas_column_is_named_without_its_values():
    df = pd.DataFrame({"user_id": [1, 2], "mixed": [1, SENTINEL_TEXT]})
    with pytest.raises(pf.InvalidArgumentError, match="'mixed'") as info:
        pf.Session(df, "user_id", pf.zCDP(1.0))
    assert SENTINEL_TEXT not in str(info.value)


@pytest.mark.parametrize("budget", [1.0, None, "rho=1"])
def test_bad_budget(budget):
    with pytest.raises(pf.InvalidBudgetError, match="budget"):
        pf.Session(make_data(), "user_id", budget)


def test_bad_rng():
    with pytest.raises(pf.InvalidArgumentError, match="rng"):
        pf.Session(make_data(), "user_id", pf.zCDP(1.0), rng=np.random.default_rng(0))


def test_approx_dp_and_gdp_budgets():
    for budget in (pf.ApproxDP(epsilon=2.0, delta=1e-6), pf.GDP(mu=1.0)):
        sess = pf.Session(make_data(), "user_id", budget)
        readme_query(sess).release(rho=0.05)
        assert sess.spent.rho == pytest.approx(0.05)
