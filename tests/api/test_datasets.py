"""The bundled synthetic dataset: deterministic per seed, the documented schema and ranges."""

from __future__ import annotations

import time

import polars as pl
import pytest

import privframe as pf
from privframe.api.datasets import REGIONS, synthetic_transactions

SCHEMA = {
    "user_id": pl.Int64,
    "region": pl.String,
    "month": pl.Int64,
    "amount": pl.Float64,
    "age": pl.Int64,
}


@pytest.fixture(scope="module")
def df() -> pl.DataFrame:
    return synthetic_transactions(n_rows=50_000, seed=0)


def test_same_seed_same_data() -> None:
    assert synthetic_transactions(5_000, seed=7).equals(synthetic_transactions(5_000, seed=7))


def test_different_seeds_differ() -> None:
    a, b = synthetic_transactions(5_000, seed=1), synthetic_transactions(5_000, seed=2)
    assert not a.equals(b)
    assert (a["amount"] != b["amount"]).mean() > 0.9  # type: ignore[operator]


def test_default_arguments() -> None:
    default = synthetic_transactions()
    assert default.height == 100_000
    assert default.equals(synthetic_transactions(100_000, seed=0))


def test_schema(df: pl.DataFrame) -> None:
    assert dict(df.schema) == SCHEMA
    assert df.null_count().sum_horizontal().item() == 0


def test_ranges(df: pl.DataFrame) -> None:
    assert set(df["region"].unique()) == set(REGIONS)
    assert set(df["month"].unique()) == set(range(1, 13))
    assert df["amount"].min() > 0  # type: ignore[operator]
    assert df["amount"].is_finite().all()
    assert df["age"].min() >= 16  # type: ignore[operator]
    assert df["age"].max() <= 90  # type: ignore[operator]
    assert df["user_id"].min() >= 1  # type: ignore[operator]
    assert df["user_id"].max() <= 5_000  # type: ignore[operator]


def test_shape_of_the_data(df: pl.DataFrame) -> None:
    shares = df["region"].value_counts(normalize=True).sort("proportion", descending=True)
    assert shares["region"].to_list() == ["north", "south", "east", "west"]  # skewed
    amounts = df["amount"]
    assert amounts.max() > 10 * amounts.median()  # type: ignore[operator]  # a long right tail
    assert (amounts > 1000).sum() < 0.01 * df.height  # but only a few large ones
    rows_per_user = df.group_by("user_id").len()["len"]
    assert rows_per_user.max() > 5 * rows_per_user.median()  # type: ignore[operator]  # heavy users
    ages_per_user = df.group_by("user_id").agg(pl.col("age").n_unique())["age"]
    assert ages_per_user.max() == 1  # age is a property of the user
    assert 0 < (df["age"] < 18).mean() < 0.2  # type: ignore[operator]  # some minors to filter


def test_n_users() -> None:
    df = synthetic_transactions(2_000, n_users=3, seed=0)
    assert set(df["user_id"].unique()) <= {1, 2, 3}
    assert synthetic_transactions(0).height == 0
    assert dict(synthetic_transactions(0).schema) == SCHEMA


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"n_rows": -1}, pf.InvalidValueError),
        ({"n_rows": 1.5}, pf.InvalidArgumentError),
        ({"n_rows": True}, pf.InvalidArgumentError),
        ({"n_users": 0}, pf.InvalidValueError),
        ({"seed": "x"}, pf.InvalidArgumentError),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        synthetic_transactions(**kwargs)  # type: ignore[arg-type]


def test_a_million_rows_is_fast() -> None:
    start = time.perf_counter()
    df = synthetic_transactions(1_000_000)
    elapsed = time.perf_counter() - start
    assert df.height == 1_000_000
    assert elapsed < 3.0  # about 0.4 s on the project's 2-core machine; slack for CI


def test_usable_by_a_session() -> None:
    df = synthetic_transactions(2_000, seed=5)
    sess = pf.Session(df.to_pandas(), privacy_unit="user_id", budget=pf.zCDP(1.0))
    out = (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=2)
        .group_by("region", keys=list(REGIONS))
        .agg(pf.count())
        .release(rho=0.5)
    )
    assert list(out["region"]) == list(REGIONS)
