"""Rows on Spark: the steps before aggregation, each row's grid units and position, small tables.

The Spark side of :func:`~privframe.engines.spec.apply_steps` and of the
polars engine's row values, with the same results row by row
(``docs/sensitivity.md`` §2): row steps here, steps over units (private
joins, flat maps, per-unit values) in :mod:`privframe.engines.spark.units`,
dispatched from :func:`apply_spark_steps`. pyspark is imported when these run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa

from privframe.engines.names import refuse_case_twins
from privframe.engines.spark._columns import clip, col, long_literal
from privframe.engines.spark.expressions import spark_type, to_spark
from privframe.engines.spark.units import flat_mapped, joined, per_unit, unit_columns
from privframe.engines.spec import (
    FLAT_MAP_SALT,
    JOIN_SALT,
    FlatMap,
    HistogramSpec,
    PerUnit,
    PrivateJoin,
    RowStep,
    Step,
    UnitColumns,
    ValueSpec,
    apply_steps,
    checked_step,
    truncation_key,
)
from privframe.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "apply_spark_steps",
    "polars_schema",
    "position_udf",
    "row_position",
    "row_units",
    "spark_table",
]


def row_units(v: ValueSpec) -> Column:
    """As the polars engine: fill, clip, (square), scale by 2^j, round half to even, clip, centre.

    A missing value without a fill adds 0; with ``present`` a row adds 1 if its value is there.

    ``rint`` is Java's ``Math.rint``: the nearest integer, ties to even, exact
    on doubles, which is polars' default ``Expr.round()`` mode.
    """
    from pyspark.sql import functions as f

    value = f.nanvl(col(v.column).cast("double"), f.lit(None).cast("double"))
    if v.present:
        return value.isNotNull().cast("long")
    x = value if v.fill is None else f.coalesce(value, f.lit(float(v.fill)))
    x = clip(x, f.lit(float(v.lower)), f.lit(float(v.upper)))
    if v.square_around is not None:
        d = x - f.lit(float(v.square_around))
        x = d * d  # polars evaluates ** 2 as x·x (the correctly rounded square)
    units = f.rint(x * f.lit(2.0**v.grid_exponent)).cast("long")
    bounded = clip(units, long_literal(v.lower_units), long_literal(v.upper_units))
    centred = bounded - long_literal(v.centre_units)
    if v.fill is not None:
        return centred
    # greatest/least skip nulls, so a missing value is set to 0 here, not by its null.
    return f.when(value.isNull(), long_literal(0)).otherwise(centred)


def row_position(h: HistogramSpec) -> Column:
    """Each row's histogram position (see :func:`position_udf`), null for null or NaN."""
    return position_udf(h.grid)(col(h.column).cast("double"))


def position_udf(grid: tuple[float, ...]) -> Callable[[Column], Column]:
    """A vectorized UDF: each row's position #{c < v} + #{c <= v} − 1, null for null/NaN.

    Values are clipped to [c_0, c_{N−1}] first; the comparisons are exact float
    comparisons (numpy ``searchsorted`` on Arrow batches), as polars'
    ``search_sorted`` in the polars engine. The functions are closures over
    numpy and the grid only, so executors need numpy and pyarrow, not privframe.
    """
    from pyspark.sql import functions as f

    candidates = np.asarray(grid, dtype=np.float64)

    def positions(values: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        v = np.clip(values, candidates[0], candidates[-1])
        below = np.searchsorted(candidates, v, side="left")
        return (below + np.searchsorted(candidates, v, side="right") - 1).astype(np.int64)

    if hasattr(f, "arrow_udf"):  # pyspark >= 4.1: Arrow arrays in and out, no pandas

        def position_arrow(x: pa.Array) -> pa.Array:
            values = x.fill_null(np.nan).to_numpy(zero_copy_only=False)
            return pa.array(positions(values), type=pa.int64(), mask=np.isnan(values))

        # A scalar UDF, by its type hints: a form pyspark's stubs do not declare.
        return f.arrow_udf(position_arrow, "long")  # type: ignore[call-overload]

    import pandas as pd
    from pyspark.sql.functions import PandasUDFType

    def position_pandas(x: pd.Series) -> pd.Series:
        values = x.to_numpy(dtype=np.float64, na_value=np.nan)
        return pd.Series(pd.arrays.IntegerArray(positions(values), np.isnan(values)))

    return f.pandas_udf(position_pandas, "long", PandasUDFType.SCALAR)


def polars_schema(frame: DataFrame) -> pl.Schema:
    """The polars types a Spark frame's columns hold (the inverse of ``spark_type``).

    An array of such values is a list (for ``flat_map``). Columns of other
    types (decimals, maps, structs, binary, ...) are left out: no row
    expression can read them.
    """
    schema = {}
    for field in frame.schema.fields:
        dtype = _polars_kind(field.dataType)
        if dtype is None:
            continue
        schema[field.name] = dtype
    return pl.Schema(schema)


def _polars_kind(kind: Any, nested: bool = True) -> pl.DataType | None:
    """The polars type of a Spark type (an array of plain values: a list), or None."""
    from pyspark.sql import types as t

    kinds: list[tuple[type[Any], pl.DataType]] = [
        (t.ByteType, pl.Int8()),
        (t.ShortType, pl.Int16()),
        (t.IntegerType, pl.Int32()),
        (t.LongType, pl.Int64()),
        (t.FloatType, pl.Float32()),
        (t.DoubleType, pl.Float64()),
        (t.StringType, pl.String()),
        (t.BooleanType, pl.Boolean()),
        (t.DateType, pl.Date()),
        (t.TimestampNTZType, pl.Datetime("us")),
        (t.TimestampType, pl.Datetime("us", "UTC")),  # an instant
        (t.NullType, pl.Null()),
    ]
    if nested and isinstance(kind, t.ArrayType):
        inner = _polars_kind(kind.elementType, nested=False)
        return None if inner is None else pl.List(inner)
    return next((dtype for spark, dtype in kinds if isinstance(kind, spark)), None)


def spark_table(spark: SparkSession, table: pl.DataFrame) -> DataFrame:
    """A small public polars table as a Spark DataFrame (through Arrow).

    Each column gets the Spark type :func:`~privframe.engines.spark.expressions.spark_type`
    gives its polars type (the type row expressions expect): unsigned integers
    the next wider signed type, naive datetimes ``timestamp_ntz``. Types with
    no such twin: categoricals and enums become strings, UInt64 a
    decimal(20, 0), and anything else the type Spark reads its Arrow type as.
    """
    from pyspark.sql.pandas.types import from_arrow_type

    casts: dict[type[pl.DataType], pl.DataType | type[pl.DataType]] = {
        pl.UInt8: pl.Int16,
        pl.UInt16: pl.Int32,
        pl.UInt32: pl.Int64,
        pl.UInt64: pl.Decimal(20, 0),
        pl.Categorical: pl.String,
        pl.Enum: pl.String,
    }
    converted = table.with_columns(
        pl.col(name).cast(casts[dtype.base_type()])
        for name, dtype in table.schema.items()
        if dtype.base_type() in casts
    )
    arrow = converted.to_arrow(compat_level=pl.CompatLevel.oldest())
    fields = []
    for field, (name, dtype) in zip(arrow.schema, converted.schema.items(), strict=True):
        try:
            kind = spark_type(dtype)
        except InvalidArgumentError:  # no twin (decimals, lists, ...): Spark's type for Arrow's
            kind = from_arrow_type(field.type).simpleString()
        fields.append("`" + name.replace("`", "``") + "` " + kind)
    # Always a schema: Spark Connect infers none from a table without rows.
    return spark.createDataFrame(arrow, schema=", ".join(fields))


def apply_spark_steps(
    frame: DataFrame,
    schema: pl.Schema,
    steps: tuple[Step, ...],
    *,
    unit: str | None = None,
    tables: Mapping[str, tuple[DataFrame, pl.Schema]] | None = None,
    seed: int = 0,
) -> tuple[DataFrame, pl.Schema]:
    """The steps on Spark, in order (lazy), and the polars schema after them.

    Row steps' expressions are translated by
    :func:`~privframe.engines.spark.expressions.to_spark` against the polars
    schema of the frame they run on. Steps over units need the privacy
    ``unit`` and truncate with the release's ``seed``; a private join reads
    the private ``tables`` (each a Spark frame and its polars schema) by name
    (:mod:`privframe.engines.spark.units`). Each step's output schema is
    polars' own, computed on empty frames of the same schemas; a step over
    units leaves its columns in polars' order.
    """
    tables = tables or {}
    empty = {name: pl.LazyFrame(schema=s) for name, (_, s) in tables.items()}
    for step in steps:
        if isinstance(step, RowStep):
            step = checked_step(step, schema)  # integer overflow gives null, as on polars
            frame = _row_step(frame, schema, step)
            schema = apply_steps(pl.LazyFrame(schema=schema), (step,)).collect_schema()
            continue
        assert unit is not None, "a step over units needs the privacy unit"
        after = apply_steps(
            pl.LazyFrame(schema=schema), (step,), unit=unit, tables=empty, seed=seed
        ).collect_schema()
        frame = _unit_step(frame, schema, step, unit, tables, seed)
        frame, schema = frame.select(*(col(c) for c in after)), after
    return frame, schema


def _row_step(frame: DataFrame, schema: pl.Schema, step: RowStep) -> DataFrame:
    """A filter, derived columns or a join with a public table, on Spark."""
    from pyspark.sql import functions as f

    if step.kind == "filter":
        for expr in step.exprs:
            frame = frame.filter(to_spark(expr, schema))
        return frame
    if step.kind == "with_columns":
        named = {e.meta.output_name(): to_spark(e, schema) for e in step.exprs}
        # Spark matches names ignoring case: a new "U" would replace "u" (the plan
        # check refuses it first; an engine must not run it either way).
        refuse_case_twins(list(named), list(schema), "with_columns column")
        # One projection: every expression sees the frame before the step, as in polars.
        return frame.withColumns(named)
    assert step.table is not None
    on = list(step.on)
    added = [c for c in step.table.columns if c not in on]
    refuse_case_twins(added, list(schema), "the public table's column")
    table = spark_table(frame.sparkSession, step.table)
    # polars suffixes the table's clashing columns with "_right"; Spark would keep
    # both. A clash in case only was refused above: polars would keep both names.
    clash = {c: f"{c}_right" for c in added if c in schema}
    if clash:
        table = table.withColumnsRenamed(clash)
    return frame.join(f.broadcast(table), on=on, how=step.how)


def _unit_step(
    frame: DataFrame,
    schema: pl.Schema,
    step: Step,
    unit: str,
    tables: Mapping[str, tuple[DataFrame, pl.Schema]],
    seed: int,
) -> DataFrame:
    """A step over units on Spark: a private join, a flat map or per-unit values."""
    if isinstance(step, PrivateJoin):
        table, table_schema = tables[step.table]
        right, right_schema = apply_spark_steps(
            table, table_schema, step.steps, unit=unit, tables=tables, seed=seed
        )
        key = truncation_key(step.truncation, seed, JOIN_SALT)
        return joined(frame, schema, right, right_schema, step, unit, key)
    if isinstance(step, FlatMap):
        key = truncation_key(step.truncation, seed, FLAT_MAP_SALT)
        return flat_mapped(frame, schema, step, unit, key)
    if isinstance(step, UnitColumns):
        return unit_columns(frame, schema, step, unit)
    assert isinstance(step, PerUnit)
    return per_unit(frame, schema, step, unit)
