"""Opening a Spark DataFrame for the Spark engine: plain types, unit checks, results.

Queries are checked against a polars schema built from the Spark schema
(schemas are public), so the same checks run whatever the engine; the data
stays on the cluster.

Example:
    >>> from privframe.engines.spark.input import open_input
    >>> opened = open_input(spark.table("sales.orders"), "customer_id")  # doctest: +SKIP
    >>> opened.kind  # doctest: +SKIP
    'pandas'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from privframe.engines.inputs import (
    MISSING_UNITS,
    ColumnType,
    Opened,
    check_declared_types,
    check_unit_column,
    exact_pandas,
)
from privframe.engines.names import case_twin
from privframe.engines.spark.engine import SparkEngine
from privframe.engines.spark.frames import (
    has_missing_units,
    plain_frame,
    run_job,
    to_spark_result,
)
from privframe.errors import InvalidValueError

__all__ = ["open_input"]


def open_input(
    data: Any,
    privacy_unit: str | None,
    results: str = "pandas",
    types: Mapping[str, ColumnType] | None = None,
) -> Opened:
    """A Spark DataFrame (classic or Spark Connect) opened for queries, run by the Spark engine.

    Releases come back as pandas DataFrames, or with ``results="spark"`` as
    DataFrames of the input's Spark session (Connect ones for a Connect input).
    A Spark DataFrame is typed: it must have the column ``types`` the data
    owner declared.

    Raises:
        InvalidArgumentError: the unit column's type cannot identify units exactly.
        InvalidValueError: the privacy unit column is missing, some rows have
            no unit, reading the schema or the unit column failed, two
            columns' names differ only in case, or a declared type is not
            the data's.
    """
    # Spark Connect analyses a DataFrame only when asked: a frame built on a missing table
    # or column fails here, and Spark's message is withheld as every other one is.
    columns = run_job(lambda: list(data.schema.names), "reading the Spark DataFrame's schema")
    for i, name in enumerate(columns):
        twin = case_twin(name, columns[:i])
        if twin is not None:
            # Spark matches names ignoring case: neither could be read (or be the unit).
            raise InvalidValueError(
                f"the Spark DataFrame's columns {twin!r} and {name!r} differ only in case, "
                "which Spark cannot tell apart; rename one, e.g. "
                f"data.withColumnRenamed({name!r}, ...)"
            )
    frame, schema = plain_frame(data, privacy_unit)
    check_unit_column(privacy_unit, schema)
    check_declared_types(types or {}, schema)
    if privacy_unit is not None and has_missing_units(frame, privacy_unit, schema[privacy_unit]):
        raise InvalidValueError(MISSING_UNITS.format(unit=privacy_unit))
    engine = SparkEngine(frame, schema=schema)
    if results != "spark":
        return Opened(engine, schema, "pandas", exact_pandas)
    spark = frame.sparkSession

    def present(result: pl.DataFrame) -> Any:
        return to_spark_result(spark, result)

    return Opened(engine, schema, "spark", present)
