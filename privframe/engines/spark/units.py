"""Steps over units on Spark: truncation, private joins, flat maps and per-unit values.

The Spark side of the steps over units of
:func:`~privframe.engines.spec.apply_steps` and of the per-unit values of
:mod:`privframe.engines.unit_values`, with the same rules:

* **Truncation** keeps, per unit, the ``limit`` rows ranking lowest by a
  keyed hash of all the row's columns, with the key polars uses
  (:func:`~privframe.engines.spec.truncation_key`; a join's right side
  ``key ^ 1``). Spark's ``xxhash64`` stands in for polars' struct hash, as for
  the bounding choices (:mod:`privframe.engines.spark.bounding`): each
  column is hashed with a flag saying whether it is null (Spark's hash skips
  nulls, so ``(1, null)`` and ``(null, 1)`` would always tie), and rows that
  still tie are ordered by their values. A uniformly random subset of each
  unit's distinct rows given a fresh seed, as on polars: the same
  distribution, not the same rows.
* **flat_map** is Spark's ``explode``, which drops null and empty arrays as
  polars drops them before its ``explode``; the element goes in ``name``.
* **Per-unit values** read NaN as null; an integer (or boolean) sum is added
  in decimal(38,0) with ``try_sum`` (Spark's ANSI mode would raise on a
  bigint overflow) and is null outside Int64; sums of no values are 0, as
  in polars; ``first``/``last`` are the minimum/maximum of the struct
  ``(by, value)`` over the rows whose ``by`` is not null (Spark orders a
  struct field by field, nulls first: ties on ``by`` go to the smallest
  value, nulls first); ``rank`` is Spark's ``rank`` within the unit's rows
  whose ``by`` is not null, null elsewhere. Numeric results have the Spark
  twin of the type polars gives them.

Float sums and means add the sorted values left to right, as polars does, so
every value is equal to polars' bit for bit.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.engines.spark.units import per_unit
    >>> from privframe.engines.spec import PerUnit
    >>> step = PerUnit(("g",), (("total", pf.unit.sum("x")),))
    >>> schema = pl.Schema({"u": pl.Int64, "g": pl.String, "x": pl.Int64})
    >>> frame = spark.createDataFrame([(1, "a", 3), (1, "a", 4)], "u long, g string, x long")
    ... # doctest: +SKIP
    >>> per_unit(frame, schema, step, "u").collect()  # doctest: +SKIP
    [Row(u=1, g='a', total=7)]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl

from privframe.engines.names import refuse_case_twins
from privframe.engines.spark._columns import col, keyed_hash, read_column
from privframe.engines.spark.types import spark_type
from privframe.engines.spec import FlatMap, PerUnit, PrivateJoin, UnitColumns
from privframe.engines.unit_values import UnitValue
from privframe.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, WindowSpec

__all__ = [
    "flat_mapped",
    "joined",
    "per_unit",
    "truncated",
    "unit_columns",
    "unit_value",
]


def truncated(frame: DataFrame, schema: pl.Schema, unit: str, limit: int, key: int) -> DataFrame:
    """Each unit's rows cut to ``limit``: those whose values hash (keyed by ``key``) lowest.

    The hash reads every column of ``schema`` (the frame's) and the row's
    number among the rows identical to it, as polars' truncation does: which
    rows stay never depends on their order in the data or on how Spark
    partitions it, and every subset is equally likely, duplicates included.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    names = list(schema)
    copy = _fresh("__truncation_copy", names)
    frame = frame.withColumn(
        copy, f.row_number().over(Window.partitionBy(*(col(n) for n in names)).orderBy(f.lit(1)))
    )
    hashed = keyed_hash(key, *(c for n in names for c in (col(n), col(n).isNull())), col(copy))
    order = Window.partitionBy(col(unit)).orderBy(hashed, *(col(n) for n in names), col(copy))
    rank = _fresh("__truncation_rank", [*names, copy])
    kept = frame.withColumn(rank, f.row_number().over(order)).filter(col(rank) <= limit)
    return kept.drop(rank, copy)


def joined(
    left: DataFrame,
    left_schema: pl.Schema,
    right: DataFrame,
    right_schema: pl.Schema,
    step: PrivateJoin,
    unit: str,
    key: int,
) -> DataFrame:
    """``left`` and ``right``, each truncated per unit (right with ``key ^ 1``), joined on ``on``.

    The right side's non-key columns that the left has too get ``step.suffix``,
    as polars' ``suffix``. Datetime keys are compared as wall times (as polars
    sees them), whichever Spark timestamp type holds them.

    Raises:
        InvalidValueError: a column of the right side differs from one of the
            left only in case (Spark could not tell them apart).
    """
    on = list(step.on)
    added = [c for c in right_schema if c not in on]
    clash = {c: c + step.suffix for c in added if c in left_schema}
    refuse_case_twins(
        [clash.get(c, c) for c in added], list(left_schema), "the private join's column"
    )
    left = truncated(left, left_schema, unit, step.left_rows, key)
    right = truncated(right, right_schema, unit, step.right_rows, key ^ 1)
    times = [c for c in on if isinstance(left_schema[c], pl.Datetime)]
    if times:
        left = left.withColumns({c: read_column(c, left_schema[c]) for c in times})
        right = right.withColumns({c: read_column(c, right_schema[c]) for c in times})
    if clash:
        right = right.withColumnsRenamed(clash)
    return left.join(right, on=on, how=step.how)


def flat_mapped(
    frame: DataFrame, schema: pl.Schema, step: FlatMap, unit: str, key: int
) -> DataFrame:
    """One row per element of the array ``step.column`` (in ``step.name``), truncated per unit.

    Spark's ``explode`` gives no row for a null or empty array.
    """
    from pyspark.sql import functions as f

    if step.name != step.column:
        refuse_case_twins([step.name], [c for c in schema if c != step.name], "flat_map column")
    exploded = frame.withColumn(step.name, f.explode(col(step.column)))
    listed = schema[step.column]
    assert isinstance(listed, pl.List)
    after = pl.Schema({**schema, step.name: listed.inner})
    return truncated(exploded, after, unit, step.max_rows, key)


def unit_columns(frame: DataFrame, schema: pl.Schema, step: UnitColumns, unit: str) -> DataFrame:
    """The frame with each row's per-unit values (windows over ``unit``), in one projection."""
    names = [n for n, _ in step.values]
    refuse_case_twins(names, [c for c in schema if c not in names], "per-unit column")
    return frame.withColumns({n: unit_value(v, schema, unit) for n, v in step.values})


def per_unit(frame: DataFrame, schema: pl.Schema, step: PerUnit, unit: str) -> DataFrame:
    """One row per unit and combination of ``step.by``, with the per-unit values."""
    names = [n for n, _ in step.values]
    refuse_case_twins(names, [unit, *step.by], "per_unit column")
    grouped = [col(c) for c in (unit, *step.by)]
    if not step.values:
        return frame.select(*grouped).distinct()
    values = (unit_value(v, schema, None).alias(n) for n, v in step.values)
    return frame.groupBy(*grouped).agg(*values)


def unit_value(value: UnitValue, schema: pl.Schema, unit: str | None) -> Column:
    """The value as a Spark column: a window over ``unit``, or an aggregation (``unit`` None).

    The result has the Spark twin of the type polars gives the value, where
    it has one (:func:`~privframe.engines.spark.types.spark_type`).

    Raises:
        InvalidValueError: ``rank`` as an aggregation (it is a value per row).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    if value.kind == "rank":
        value.polars(schema, unit)  # refuses a rank outside a window, as polars does
        assert value.by is not None
        assert unit is not None
        by = _value(value.by, schema)
        known = Window.partitionBy(col(unit), by.isNull()).orderBy(by)
        result = f.when(by.isNotNull(), f.rank().over(known))
    elif unit is None:
        result = _aggregation(value, schema, None)
    else:
        result = _aggregation(value, schema, Window.partitionBy(col(unit)))
    return _typed(result, _output_type(value, schema, unit))


def _aggregation(value: UnitValue, schema: pl.Schema, window: WindowSpec | None) -> Column:
    """The value from Spark aggregate functions, each over ``window`` (None: in a group_by)."""
    from pyspark.sql import functions as f

    def over(aggregate: Column) -> Column:
        return aggregate if window is None else aggregate.over(window)

    if value.kind == "count":
        return over(f.count(f.lit(1) if value.column is None else _value(value.column, schema)))
    assert value.column is not None
    x = _value(value.column, schema)
    if value.kind == "sum":
        return _checked_sum(x, schema[value.column], over)
    if value.kind == "mean":
        # As polars: the order-free sum (exact, or floats sorted) over the count of values.
        total = _ordered_sum(x, schema[value.column], over).cast("double")
        return f.when(over(f.count(x)) > 0, total / over(f.count(x)))
    if value.kind == "min":
        return over(f.min(x))
    if value.kind == "max":
        return over(f.max(x))
    if value.kind == "n_unique":  # a window takes no DISTINCT: the size of the set
        return f.count_distinct(x) if window is None else f.size(over(f.collect_set(x)))
    assert value.by is not None
    order = _value(value.by, schema)
    # Structs compare field by field, nulls first: ties on `by` go to the smaller value.
    pair = f.when(order.isNotNull(), f.struct(order.alias("by"), x.alias("value")))
    chosen = over(f.min(pair) if value.kind == "first" else f.max(pair))
    return chosen.getField("value")


def _checked_sum(x: Column, dtype: pl.DataType, over: Callable[[Column], Column]) -> Column:
    """The sum; an integer one is added in decimal(38,0) and is null where it leaves Int64."""
    from pyspark.sql import functions as f

    if dtype.is_float():
        return _ordered_sum(x, dtype, over)
    wide = _ordered_sum(x, dtype, over)
    return f.when(over(f.count(x)) == 0, f.lit(0).cast("long")).otherwise(wide.try_cast("long"))


def _ordered_sum(x: Column, dtype: pl.DataType, over: Callable[[Column], Column]) -> Column:
    """A sum that depends on the values only, as polars' (unit_values._exact_sum).

    Floats are added in ascending order, left to right, from 0.0: the same
    operations as polars' cumulative sum of the sorted values, so the same
    bits, whatever order Spark's partitions deliver the rows in (a plain
    ``sum`` would follow that order, which other people's rows can change).
    Integers are added exactly in decimal(38,0) (``try_``: null, never an
    error under ANSI mode).
    """
    from pyspark.sql import functions as f

    if dtype.is_float():
        values = f.array_sort(over(f.collect_list(x.cast("double"))))
        return f.aggregate(values, f.lit(0.0), lambda total, y: total + y)
    if dtype == pl.Boolean():
        x = x.cast("long")
    return over(f.try_sum(x.cast("decimal(38,0)")))


def _output_type(value: UnitValue, schema: pl.Schema, unit: str | None) -> pl.DataType:
    """The type polars gives the value over ``schema``."""
    frame = pl.LazyFrame(schema=schema)
    expr = value.polars(schema, unit).alias("__value")
    if unit is None:
        return frame.group_by(pl.lit(0)).agg(expr).collect_schema()["__value"]
    return frame.select(expr).collect_schema()["__value"]


def _typed(result: Column, dtype: pl.DataType) -> Column:
    """A numeric or boolean result as the Spark twin of its polars type (others as they are)."""
    if not (dtype.is_numeric() or dtype == pl.Boolean()):
        return result
    try:
        return result.cast(spark_type(dtype))
    except InvalidArgumentError:  # no twin (an Int128 unit's min, say): Spark's own type
        return result


def _value(column: str, schema: pl.Schema) -> Column:
    """The column, with NaN as null if it is a float column (as unit_values' reads)."""
    from pyspark.sql import functions as f

    c = col(column)
    return f.when(~f.isnan(c), c) if schema[column].is_float() else c


def _fresh(name: str, taken: list[str]) -> str:
    """``name``, lengthened until no column has it (ignoring case, as Spark matches names)."""
    lowered = {c.lower() for c in taken}
    while name.lower() in lowered:
        name += "_"
    return name
