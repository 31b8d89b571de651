"""Every Spark leg gives the same Session: on local[2], a standalone cluster and Spark Connect.

The ``spark`` fixture (conftest.py) runs each test here on each leg
(spark_setup.LEGS): a classic session on ``local[2]``, a classic session whose
executors run on the standalone cluster's two workers, and a Spark Connect
client of the server on that cluster (all started by the tests,
spark_services.py). The equivalence of the exact aggregates with the polars
engine's runs on every leg in test_spark_engine.py and test_partial_keys_engines.py;
here: each leg is what it claims, releases come back as the input's kind of
DataFrame, the driver collects nothing but per-key aggregates, and refusals
read as the polars engine's.
"""

from __future__ import annotations

import functools
import json
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest

import privframe as pf

KEYS = ["a", "b", "c", "d"]
# Every DataFrame action pyspark has that returns rows (or numbers) to the driver.
ACTIONS = (
    "collect",
    "count",
    "first",
    "foreach",
    "foreachPartition",
    "head",
    "show",
    "tail",
    "take",
    "toArrow",
    "toJSON",
    "toLocalIterator",
    "toPandas",
)


def _leg(request: pytest.FixtureRequest) -> str:
    leg: str = request.node.callspec.params["spark"]
    return leg


def _data(n: int = 600) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    return pl.DataFrame(
        {
            "u": rng.integers(0, n // 3, n),
            "g": rng.choice(["a", "b", "c", "zz"], n),
            "x": rng.uniform(-5, 60, n).round(3),
        }
    )


def _release(sess: pf.Session) -> Any:
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("g", keys=KEYS)
        .agg(pf.count(), pf.sum("x", (0, 50)))
        .release(rho=0.5)
    )


def _executors_import_privframe(spark: Any) -> bool:
    """Whether a Python UDF can import privframe where Spark runs it."""
    from pyspark.sql import functions as f

    # Nested, so pickled by value (no test module to import); no type hints, which Spark
    # Connect would read as a pandas UDF's.
    def imports(_):  # type: ignore[no-untyped-def]
        try:
            import privframe  # noqa: F401
        except ImportError:
            return False
        return True

    imported: bool = spark.range(1).select(f.udf(imports, "boolean")("id")).first()[0]
    return imported


def test_each_leg_runs_where_it_says(spark: Any, request: pytest.FixtureRequest) -> None:
    leg = _leg(request)
    frame = spark.range(3)
    remote = type(frame).__module__.startswith("pyspark.sql.connect")
    assert remote is (leg == "connect")
    if leg == "local":
        assert spark.sparkContext.master == "local[2]"
    if leg == "standalone":
        cluster = request.getfixturevalue("spark_cluster")
        assert spark.sparkContext.master == cluster.master
        with urllib.request.urlopen(f"{cluster.status}/json/", timeout=10) as page:
            state = json.load(page)
        assert state["aliveworkers"] == 2
        # This test driver's application and the Connect server's, each with its executors.
        apps = {app["name"]: app for app in state["activeapps"]}
        assert set(apps) == {"privframe-tests", "privframe-tests-connect"}
        assert apps["privframe-tests"]["cores"] == 2
    assert frame.count() == 3
    # The cluster's executors cannot import privframe (spark_services.py), so every engine
    # test on the cluster legs shows that executors need numpy and pyarrow only.
    assert _executors_import_privframe(spark) is (leg == "local")


def test_results_are_dataframes_of_the_inputs_kind(spark: Any) -> None:
    frame = spark.createDataFrame(_data().to_pandas())
    sess = pf.Session(frame, "u", pf.zCDP(1.0, delta=1e-6), results="spark")
    out = _release(sess)
    assert type(out) is type(frame)
    assert out.columns == ["g", "count", "x_sum"]
    assert sorted(row["g"] for row in out.collect()) == KEYS
    # A release with no rows (no key is kept: 3 units are far below the threshold) still
    # has its columns and types, which Spark Connect cannot infer from no rows.
    few = spark.createDataFrame(_data(9).to_pandas())
    small = pf.Session(few, "u", pf.zCDP(1.0, delta=1e-6), results="spark")
    query = small.query().bound(max_groups=1, max_rows_per_group=1).group_by("g")
    empty = query.agg(pf.count()).release(rho=0.1)
    assert type(empty) is type(frame)
    assert empty.count() == 0
    assert empty.columns == ["g", "count"]


def _spy(cls: type, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Record each action called on a DataFrame of ``cls`` (not those it calls itself)."""
    calls: list[tuple[str, Any]] = []
    depth = [0]

    def spied(name: str, action: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(action)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                out = action(self, *args, **kwargs)
            finally:
                depth[0] -= 1
            if depth[0] == 0:
                calls.append((name, out))
            return out

        return run

    for name in ACTIONS:
        if hasattr(cls, name):
            monkeypatch.setattr(cls, name, spied(name, getattr(cls, name)))
    return calls


def test_the_driver_collects_only_per_key_aggregates(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = spark.createDataFrame(_data().to_pandas())
    calls = _spy(type(frame), monkeypatch)
    sess = pf.Session(frame, "u", pf.zCDP(1.0))
    _release(sess)
    # One job checks that no row lacks a unit (a count of at most one row), one collects
    # the exact per-key aggregates: a row per public key with rows (by its index in the
    # keys), no column of the data.
    assert [name for name, _ in calls] == ["count", "toArrow"]
    assert calls[0][1] == 0
    collected = calls[1][1]
    assert 0 < collected.num_rows <= len(KEYS)
    assert not {"u", "g", "x"} & set(collected.column_names)


def _refusal(action: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises(pf.PrivframeError) as info:
        action()
    assert info.value.__context__ is None
    return type(info.value), str(info.value)


REFUSALS: dict[str, Callable[[Any], object]] = {
    "unknown unit column": lambda data: pf.Session(data, "user", pf.zCDP(1.0)),
    "unknown aggregated column": lambda data: (
        pf.Session(data, "u", pf.zCDP(1.0)).query().agg(pf.sum("amount", (0, 1))).release(0.1)
    ),
    "unknown filter column": lambda data: (
        pf.Session(data, "u", pf.zCDP(1.0))
        .query()
        .filter(pl.col("age") > 1)
        .agg(pf.count())
        .release(0.1)
    ),
    "over budget": lambda data: (
        pf.Session(data, "u", pf.zCDP(0.1)).query().agg(pf.count()).release(0.5)
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_read_as_the_polars_engines(spark: Any, case: str) -> None:
    data = _data(30)
    expected = _refusal(lambda: REFUSALS[case](data))
    assert _refusal(lambda: REFUSALS[case](spark.createDataFrame(data.to_pandas()))) == expected


def test_null_units_are_refused_as_the_polars_engine_refuses_them(spark: Any) -> None:
    data = _data(30).with_columns(u=pl.when(pl.col("x") > 50).then(None).otherwise(pl.col("u")))
    expected = _refusal(lambda: pf.Session(data, "u", pf.zCDP(1.0)))
    frame = spark.createDataFrame(data.to_pandas())
    assert _refusal(lambda: pf.Session(frame, "u", pf.zCDP(1.0))) == expected
