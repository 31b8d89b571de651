"""Bad queries and Session arguments: refused, named without private values, charging nothing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import polars as pl
import pytest
from session_setup import (
    SENTINEL_NUMBER,
    SENTINEL_TEXT,
    make_data,
)

import privframe as pf


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
    # Other object columns are read as text; the unit's IDs are converted exactly, or refused.
    df = pd.DataFrame({"user_id": [1, SENTINEL_TEXT], "amount": [1.0, 2.0]})
    with pytest.raises(pf.InvalidArgumentError, match=r"columns \['user_id'\]") as info:
        pf.Session(df, "user_id", pf.zCDP(1.0))
    assert SENTINEL_TEXT not in str(info.value)


@pytest.mark.parametrize("budget", [1.0, None, "rho=1"])
def test_bad_budget(budget):
    with pytest.raises(pf.InvalidBudgetError, match="budget"):
        pf.Session(make_data(), "user_id", budget)


def test_bad_rng():
    with pytest.raises(pf.InvalidArgumentError, match="rng"):
        pf.Session(make_data(), "user_id", pf.zCDP(1.0), rng=np.random.default_rng(0))
