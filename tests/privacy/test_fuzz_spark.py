"""Bad Spark input is refused without charge or leak (checks: fuzz_setup.py).

Spark DataFrames broken in their unit or value columns, bad units, releases that
fail on Spark, and bad tables; nothing reaches pyspark's own log either. Run on
local[2], the standalone cluster and through Spark Connect (conftest.py).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from fuzz_setup import (
    FILE_ACTIONS,
    MARKER,
    Case,
    Context,
    assert_clean,
    bounded,
    check_case,
    on_own_session,
    private_data,
)

import privframe as pf

SPARK_FRAMES = {
    "unit_cast": True,
    "unit_raise": True,
    "amount_cast": False,
    "amount_raise": False,
    "region_raise": False,
    "duplicate_names": True,
    "map_unit": True,
    "array_unit": True,
    "struct_unit": True,
    "null_unit": True,
    "nan_unit": True,
    "no_unit_column": True,
}
"""Spark DataFrames built by :func:`_spark_frame`: whether a session refuses them with no query."""


def _spark_frame(name: str, base: Any) -> Any:
    """``base`` (the private data on Spark) broken as ``name`` says.

    The note column holds the marker, so a cast or ``raise_error`` over it fails on
    a private value (Spark runs in ANSI mode).
    """
    from pyspark.sql import functions as f

    def failing(column: str) -> Any:
        return f.when(
            f.col("note") == MARKER, f.raise_error(f.concat(f.lit("bad "), f.col("note")))
        ).otherwise(f.col(column))

    marked = f.col("note") == MARKER
    builds: dict[str, Callable[[], Any]] = {
        "unit_cast": lambda: base.withColumn("user_id", f.col("note").cast("long")),
        "unit_raise": lambda: base.withColumn("user_id", failing("user_id")),
        "amount_cast": lambda: base.withColumn("amount", f.col("note").cast("double")),
        "amount_raise": lambda: base.withColumn("amount", failing("amount")),
        "region_raise": lambda: base.withColumn("region", failing("region")),
        "duplicate_names": lambda: base.toDF(*(["user_id"] * len(base.columns))),
        "map_unit": lambda: base.withColumn("user_id", f.create_map("note", "amount")),
        "array_unit": lambda: base.withColumn("user_id", f.array("note")),
        "struct_unit": lambda: base.withColumn("user_id", f.struct("note")),
        "null_unit": lambda: base.withColumn(
            "user_id", f.when(marked, None).otherwise(f.col("user_id"))
        ),
        "nan_unit": lambda: base.withColumn(
            "user_id",
            f.when(marked, f.lit(float("nan"))).otherwise(f.col("user_id").cast("double")),
        ),
        "no_unit_column": lambda: base.drop("user_id"),
    }
    return builds[name]()


SPARK_ACTIONS: dict[str, Callable[[pf.Session], object]] = {
    "count": FILE_ACTIONS["count"],
    "sum": FILE_ACTIONS["sum"],
    "group": FILE_ACTIONS["group"],
}


@pytest.fixture(scope="module")
def spark_base(spark: Any) -> Any:
    return spark.createDataFrame(private_data().to_pandas())


def _spark_cases() -> list[Case]:
    """Run with ``ctx`` as (spark, base, session over base)."""
    cases = []
    for (name, refused), (action_name, action) in itertools.product(
        SPARK_FRAMES.items(), SPARK_ACTIONS.items()
    ):
        # A broken value column fails only the releases that read it.
        reads = {"amount": ("sum",), "region": ("group",)}.get(name.split("_")[0], ())
        cases.append(
            Case(
                f"spark-{name}-{action_name}",
                lambda c, n=name, a=action: on_own_session(
                    pf.Session(_spark_frame(n, c[1]), "user_id", pf.zCDP(1.0)), a
                ),
                refused=refused or action_name in reads,
            )
        )
    units: dict[str, object] = {"list": ["user_id"], "int": 3, "missing": "customer", "empty": ""}
    for name, unit in units.items():
        cases.append(
            Case(f"spark-unit={name}", lambda c, u=unit: pf.Session(c[1], u, pf.zCDP(1.0)))
        )
    released: dict[str, Callable[[Any], object]] = {
        "keys_ints_on_text": lambda c: bounded(c).group_by("region", keys=[1, 2]).agg(pf.count()),
        "keys_text_on_ints": lambda c: bounded(c).group_by("age", keys=["a"]).agg(pf.count()),
        "keys_dates_on_text": lambda c: (
            bounded(c).group_by("region", keys=[dt.date(2024, 1, 1)]).agg(pf.count())
        ),
        "keys_huge_on_ints": lambda c: bounded(c).group_by("age", keys=[2**70]).agg(pf.count()),
        "keys_float_on_ints": lambda c: bounded(c).group_by("age", keys=[0.5]).agg(pf.count()),
        "sum_text": lambda c: bounded(c).agg(pf.sum("region", (0, 1))),
        "sum_date": lambda c: bounded(c).agg(pf.sum("day", (0, 1))),
        "subnormal_bounds": lambda c: bounded(c).agg(pf.mean("amount", (0, 5e-324))),
        "strict_cast_filter": lambda c: (
            bounded(c).filter(pl.col("note").cast(pl.Int64) > 1).agg(pf.count())
        ),
    }
    for name, build in released.items():
        cases.append(
            Case(f"spark-{name}", lambda c, b=build: b(Context(c[2], {}, Path())).release(0.01))
        )
    tables: dict[str, Callable[[Any], object]] = {
        "missing": lambda c: pf.Session.from_spark_table(c[0], "no_db.no_table", "u", pf.zCDP(1)),
        "int_name": lambda c: pf.Session.from_spark_table(c[0], 3, "u", pf.zCDP(1)),
        "empty_name": lambda c: pf.Session.from_spark_table(c[0], "", "u", pf.zCDP(1)),
        "bad_name": lambda c: pf.Session.from_spark_table(c[0], "a b;", "u", pf.zCDP(1)),
        "not_a_session": lambda c: pf.Session.from_spark_table(None, "t", "u", pf.zCDP(1)),
        "results_polars": lambda c: pf.Session(c[1], "user_id", pf.zCDP(1), results="polars"),
    }
    for name, run in tables.items():
        cases.append(Case(f"spark-table-{name}", run))
    return cases


SPARK_CASES = _spark_cases()


@pytest.fixture(scope="module")
def spark_ctx(spark: Any, spark_base: Any) -> tuple[Any, Any, pf.Session]:
    return spark, spark_base, pf.Session(spark_base, "user_id", pf.zCDP(1000.0))


@pytest.mark.parametrize("case", SPARK_CASES, ids=lambda case: case.id)
def test_bad_spark_input_is_refused_without_charge_or_leak(
    spark_ctx: tuple[Any, Any, pf.Session], case: Case
) -> None:
    from pyspark.logger import PySparkLogger

    # pyspark logs failed jobs' messages itself, and a Spark Connect client each failed call
    # with the server's message when SPARK_CONNECT_LOG_LEVEL turns its log on (on here, at
    # its most verbose): nothing may reach these logs either.
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    names = ("DataFrameQueryContextLogger", "SQLQueryContextLogger", "pyspark.sql.connect.logging")
    logs = [PySparkLogger.getLogger(n) for n in names]
    connect_log = logs[-1]
    was = connect_log.disabled, connect_log.level
    connect_log.disabled, connect_log.level = False, logging.DEBUG
    for log in logs:
        log.addHandler(handler)
    try:
        check_case(case, spark_ctx, spark_ctx[2])
    finally:
        for log in logs:
            log.removeHandler(handler)
        connect_log.disabled, connect_log.level = was
    for record in records:
        assert_clean(record.getMessage(), "pyspark's log")
