"""The shared bounding algorithm (:mod:`privframe.engines.bounding`) on Spark DataFrames.

The arithmetic is the polars engine's, step for step: per (unit, key) the
rows ``n``, the weight ``w = min(n, m)``, the largest-remainder cap at ``M``
and the scaled sums ``round(s·w/n)`` in the same float operations. Choices
that polars makes with its own keyed hash are made here with Spark's
``xxhash64`` keyed by the release's seed: the same distribution (uniformly
random given a fresh seed), not the same draw.

Every step after the (unit, key) aggregation works within one unit: the
``k`` groups a unit keeps (the lowest ranks of ``xxhash64(seed ^ GROUP_SALT,
unit, *key)`` in a window over the unit, ties by key), the cap at ``M`` (a
window over the unit), and the engine's count of each unit once per
combination of the selected columns. So when a per-unit step follows, the
rows are shuffled once, by the unit (:func:`partials`): the aggregation by
(unit, key) and every window over the unit (or over the unit and more
columns) then find their input already partitioned, and Spark plans no
further exchange before the per-key totals. The rows are shuffled instead of
map-side partial sums, which barely shrink them (a unit's rows are spread over
the input partitions); on a standalone cluster the release is a quarter to a
third faster so, on ``local[2]`` about as fast (``benchmarks/README.md``,
"privframe on Spark").

Two of the polars engine's shortcuts were measured on Spark and not taken
(``benchmarks/README.md``, "privframe on Spark"). Ranking only the units in more than ``k``
groups needs the cells split by their unit's group count, and each way to
split them (a window count and a union of two filters, or a join with the
per-unit counts) evaluates the cells twice, which cost more than the one sort
of the cells in the window, where a unit in at most ``k`` groups keeps all of
them anyway. Packing (unit, key) into one 64-bit integer saved no measurable
time: hashing two long columns is cheap next to the shuffle, and checking
that every unit fits would take a Spark job of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from privframe.engines.bounding import (
    GROUP_SALT,
    KEY,
    RANK,
    ROW_SALT,
    ROWS,
    TIE_SALT,
    WEIGHT,
    centred_bounds,
)
from privframe.engines.spark._columns import clip, col, keyed_hash, long_literal
from privframe.engines.spark.expressions import to_spark
from privframe.engines.spark.rows import spark_table
from privframe.engines.spec import AggregationSpec
from privframe.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["key_index", "known_units", "partials", "sampled_rows"]

_ID = "__id"
_TOTAL = "__total"
_BASE = "__base"
_REM = "__rem"
_DEFICIT = "__deficit"
_ORDER = "__order"


def key_index(frame: DataFrame, schema: pl.Schema, keys: pl.DataFrame) -> DataFrame:
    """Rows whose key is public, with the key's position in ``keys`` as ``KEY``.

    A key column of another type than the keys' is cast as the polars engine
    casts it, non-strictly (translated by ``to_spark``, so the same values
    match); a value the type cannot hold matches no key and nothing raises.
    The keys table is broadcast: it is public and small next to the data.
    """
    from pyspark.sql import functions as f

    columns = list(keys.columns)
    table = spark_table(
        frame.sparkSession, keys.with_row_index(KEY).with_columns(pl.col(KEY).cast(pl.Int64))
    )
    types = {field.name: field.dataType for field in table.schema.fields}
    casts = {}
    for c in columns:
        if schema.get(c) == keys.schema[c]:
            continue
        try:
            casts[c] = to_spark(pl.col(c).cast(keys.schema[c], strict=False), schema)
        except InvalidArgumentError:  # no exact translation (say floats to strings): Spark's
            casts[c] = col(c).try_cast(types[c])
    if casts:
        frame = frame.withColumns(casts)
    return frame.join(f.broadcast(table), on=columns, how="inner")


def known_units(frame: DataFrame, unit: str) -> DataFrame:
    """Drop rows whose unit is null or NaN: they must never be merged into one unit."""
    from pyspark.sql import functions as f
    from pyspark.sql import types as t

    column = col(unit)
    if isinstance(frame.schema[unit].dataType, t.FloatType | t.DoubleType):
        return frame.filter(column.isNotNull() & ~f.isnan(column))
    return frame.filter(column.isNotNull())


def partials(frame: DataFrame, spec: AggregationSpec, by: list[str], names: list[str]) -> DataFrame:
    """Per (unit, key): rows n, bounded weight w, and each value's scaled, clipped sum.

    ``frame`` holds the unit, the key columns ``by`` and the value columns
    ``names`` in grid units; the result has one row per (unit, key) a unit
    keeps, with :data:`ROWS`, :data:`WEIGHT` and the values' scaled sums.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spark.bounding import partials
        >>> from privframe.engines.spec import AggregationSpec
        >>> spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": [0, 1, 2]}),
        ...                        2, 1, None, (), seed=7)
        >>> frame = spark.createDataFrame([(1, 0), (1, 1), (1, 2), (2, 0), (2, 0)],
        ...                               "u long, __key long")  # doctest: +SKIP
        >>> kept = partials(frame, spec, ["__key"], [])  # doctest: +SKIP
        >>> sorted(kept.groupBy("u").count().collect())  # doctest: +SKIP
        [Row(u=1, count=2), Row(u=2, count=1)]
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    unit = spec.unit
    assert unit is not None
    if spec.max_groups is not None or spec.max_rows is not None:
        # One shuffle by the unit serves the aggregation by (unit, key) and each window over
        # the unit after it (module documentation).
        frame = frame.repartition(col(unit))
    partial = frame.groupBy(*(col(c) for c in (unit, *by))).agg(
        f.count(f.lit(1)).alias(ROWS), *(f.sum(col(n)).alias(n) for n in names)
    )
    if spec.max_groups is not None:
        # The k groups ranking lowest by a keyed hash of (unit, key): a uniformly random
        # subset of the unit's groups (ties, which need a 64-bit collision, by key).
        order = Window.partitionBy(col(unit)).orderBy(
            keyed_hash(spec.seed ^ GROUP_SALT, unit, *by), *(col(c) for c in by)
        )
        partial = (
            partial.withColumn(RANK, f.row_number().over(order))
            .filter(col(RANK) <= spec.max_groups)
            .drop(RANK)
        )
    partial = partial.withColumn(WEIGHT, f.least(col(ROWS), long_literal(spec.max_rows_per_group)))
    if spec.max_rows is not None:
        partial = cap_rows(partial, unit, by, spec.max_rows, spec.seed)
    w, n = col(WEIGHT), col(ROWS)
    scaled = {}
    for v in spec.values:
        s = col(v.name)
        # The polars engine's (s·w/n).round() in the same float operations, ties to even.
        shrunk = f.rint(s.cast("double") * w / n).cast("long")
        lo, hi = centred_bounds(v)
        bounded = f.when(w < n, shrunk).otherwise(s)
        scaled[v.name] = clip(bounded, w * long_literal(lo), w * long_literal(hi))
    return partial.withColumns(scaled) if scaled else partial


def cap_rows(partial: DataFrame, unit: str, by: list[str], cap: int, seed: int) -> DataFrame:
    """Scale a unit's weights w_g (total T > M) to integers summing to exactly M.

    Largest remainders, as the polars engine: each group keeps floor(w_g·M/T),
    and the M − Σ floor rows left go one each to the groups with the largest
    remainders w_g·M mod T (ties by a keyed hash of (unit, key)). Every new
    weight stays within [0, w_g] and depends only on the unit's own groups and
    the seed.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    units = Window.partitionBy(col(unit))
    total, w = col(_TOTAL), col(WEIGHT)
    over = total > long_literal(cap)  # then T >= 1: no division by zero, under ANSI mode either
    scaled = f"(`{WEIGHT}` * CAST({cap} AS BIGINT))"
    largest = units.orderBy(
        col(_REM).desc(),
        keyed_hash(seed ^ TIE_SALT, unit, *by).desc(),
        *(col(c) for c in by),
    )
    return (
        partial.withColumn(_TOTAL, f.sum(w).over(units))
        .withColumns(
            {  # exact integer division and remainder (SQL div), as polars' // and %
                _BASE: f.when(over, f.expr(f"{scaled} div `{_TOTAL}`")),
                _REM: f.when(over, f.expr(f"{scaled} % `{_TOTAL}`")),
            }
        )
        .withColumns(
            {
                _DEFICIT: long_literal(cap) - f.sum(col(_BASE)).over(units),
                _ORDER: f.row_number().over(largest),
            }
        )
        .withColumn(
            WEIGHT,
            f.when(over, col(_BASE) + (col(_ORDER) <= col(_DEFICIT)).cast("long")).otherwise(w),
        )
        .drop(_TOTAL, _BASE, _REM, _DEFICIT, _ORDER)
    )


def sampled_rows(
    frame: DataFrame, partial: DataFrame, spec: AggregationSpec, by: list[str]
) -> DataFrame:
    """Each unit's rows in each kept key, cut to a random subset of its weight w.

    The rows ranking lowest by a keyed hash of (unit, key, row number) stay: a
    uniformly random subset given a fresh seed. The row number is taken within
    the (unit, key) cell, ordered by the histogram positions, so the subset
    depends on the unit's own rows and the seed only (rows that tie in every
    position are interchangeable), not on how Spark partitions the data.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    unit = spec.unit
    assert unit is not None
    cell = [unit, *by]
    window = Window.partitionBy(*(col(c) for c in cell))
    numbered = window.orderBy(*(col(h.name) for h in spec.histograms))
    ranked = window.orderBy(keyed_hash(spec.seed ^ ROW_SALT, *cell, _ID), col(_ID))
    return (
        frame.join(partial.select(*(col(c) for c in cell), col(WEIGHT)), on=cell, how="inner")
        .withColumn(_ID, f.row_number().over(numbered))
        .withColumn(RANK, f.row_number().over(ranked))
        .filter(col(RANK) <= col(WEIGHT))
    )
