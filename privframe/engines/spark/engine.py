"""The Spark engine: the polars engine's bounded aggregation, computed on a Spark cluster.

:class:`SparkEngine` runs an :class:`~privframe.engines.spec.AggregationSpec`
on a ``pyspark.sql.DataFrame`` and returns exactly what
:class:`~privframe.engines.polars.PolarsEngine` returns: one row per public key
(in key order, absent keys with zeros), or per observed key (sorted) in
private key selection, with Int64 counts and Int64 sums in grid units. Only
those per-key aggregates are collected to the driver (through Arrow); the
rows never leave the cluster.

The arithmetic is the polars engine's, step for step (``docs/sensitivity.md``
§2): row values are filled, clipped, snapped to the grid with the same
round-half-to-even (Spark ``rint``, as polars' ``Expr.round()``) and clipped
again; per (unit, key) the rows ``n``, the weight ``w = min(n, m)``, the
largest-remainder cap at ``M`` and the scaled sums ``round(s·w/n)`` are
computed with the same float operations. Choices that polars makes with its
own keyed hash (which ``k`` groups a unit keeps, remainder ties, which rows
go into a histogram) are made here with Spark's ``xxhash64`` keyed by the
release's seed: the same distribution (uniformly random given a fresh seed),
not the same draw. So the result equals the polars engine's whenever no
such choice binds, and obeys the same bounds when one does.

pyspark (4.0 or later) is imported only when the engine runs.

Example:
    >>> import polars as pl
    >>> from privframe.engines.spark.engine import SparkEngine
    >>> from privframe.engines.spec import COUNT, AggregationSpec
    >>> spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a", "b", "c"]}),
    ...                        None, 1, None, (), seed=7)
    >>> from pyspark.sql import SparkSession  # doctest: +SKIP
    >>> spark = SparkSession.builder.master("local[1]").getOrCreate()  # doctest: +SKIP
    >>> frame = spark.createDataFrame([(1, "a"), (1, "a"), (1, "b"), (2, "a")],
    ...                               "u long, g string")  # doctest: +SKIP
    >>> SparkEngine(frame).aggregate(spec)[COUNT].to_list()  # doctest: +SKIP
    [2, 1, 0]
"""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa

from privframe.engines.polars import _attach, in_key_order
from privframe.engines.spec import (
    COUNT,
    DISTINCT,
    AggregationSpec,
    RowStep,
    ValueSpec,
    apply_steps,
    checked_step,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["SparkEngine", "col", "quiet_query_errors"]

_N = "__rows"
_W = "__weight"
_GLOBAL = "__all"
_KEY = "__key"
_ID = "__id"
_RANK = "__rank"
_HIST = "__hist"
_POS = "__pos"
_TOTAL = "__total"
_BASE = "__base"
_REM = "__rem"
_DEFICIT = "__deficit"
_ORDER = "__order"
_GROUP_SEED = 0x61C8864680B583EB  # separates the group choice's hash from the others
_ROW_SEED = 0x2545F4914F6CDD1D  # the row choice's (as in the polars engine)
_TIE_SEED = 0x5DEECE66D  # the remainder ties' (as in the polars engine)


def col(name: str) -> Column:
    """The column ``name``, quoted: names with dots or backticks are taken literally.

    Example:
        >>> from privframe.engines.spark.engine import col
        >>> col("a.b")  # doctest: +SKIP
        Column<'`a.b`'>
    """
    from pyspark.sql import functions as f

    return f.col("`" + name.replace("`", "``") + "`")


# pyspark logs the message of every failed job's error through these (with the values it
# quotes) as it converts the error to Python, whether or not the caller handles it.
_QUERY_CONTEXT_LOGS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


def _drop(record: logging.LogRecord) -> bool:
    return False


@contextlib.contextmanager
def quiet_query_errors() -> Iterator[None]:
    """Silence pyspark's log of failed jobs' messages while Spark works on private data.

    pyspark (4.0 and later) logs an error's message as it converts a failed
    job's Java exception, and the message can quote a data value (the input
    of a failed cast). The error itself is then withheld by its handler.

    Example:
        >>> from privframe.engines.spark.engine import quiet_query_errors
        >>> with quiet_query_errors():
        ...     pass
    """
    from pyspark.logger import PySparkLogger

    # Made by pyspark's own factory: a plain logger would reject the fields pyspark logs.
    logs = [PySparkLogger.getLogger(name) for name in _QUERY_CONTEXT_LOGS]
    for log in logs:
        log.addFilter(_drop)
    try:
        yield
    finally:
        for log in logs:
            log.removeFilter(_drop)


def _long(value: int) -> Column:
    from pyspark.sql import functions as f

    return f.lit(value).cast("long")


def _clip(column: Column, lower: Column, upper: Column) -> Column:
    from pyspark.sql import functions as f

    return f.least(f.greatest(column, lower), upper)


def _keyed_hash(seed: int, *columns: str) -> Column:
    """xxhash64 of the seed (first, so it keys the whole chain), then the columns."""
    from pyspark.sql import functions as f

    signed = seed & (2**64 - 1)
    if signed >= 2**63:
        signed -= 2**64
    return f.xxhash64(_long(signed), *(col(c) for c in columns))


def _row_units(v: ValueSpec) -> Column:
    """As the polars engine: fill, clip, (square), scale by 2^j, round half to even, clip, centre.

    ``rint`` is Java's ``Math.rint``: the nearest integer, ties to even, exact
    on doubles, which is polars' default ``Expr.round()`` mode.
    """
    from pyspark.sql import functions as f

    fill = f.lit(float(v.fill))
    x = f.coalesce(f.nanvl(col(v.column).cast("double"), fill), fill)
    x = _clip(x, f.lit(float(v.lower)), f.lit(float(v.upper)))
    if v.square_around is not None:
        d = x - f.lit(float(v.square_around))
        x = d * d  # polars evaluates ** 2 as x·x (the correctly rounded square)
    units = f.rint(x * f.lit(2.0**v.grid_exponent)).cast("long")
    return _clip(units, _long(v.lower_units), _long(v.upper_units)) - _long(v.centre_units)


def _position_udf(grid: tuple[float, ...]) -> Callable[[Column], Column]:
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

        return f.arrow_udf(position_arrow, "long")  # a scalar UDF, by its type hints

    import pandas as pd
    from pyspark.sql.functions import PandasUDFType

    def position_pandas(x: pd.Series) -> pd.Series:
        values = x.to_numpy(dtype=np.float64, na_value=np.nan)
        return pd.Series(pd.arrays.IntegerArray(positions(values), np.isnan(values)))

    return f.pandas_udf(position_pandas, "long", PandasUDFType.SCALAR)


def _polars_schema(frame: DataFrame) -> pl.Schema:
    """The polars types a Spark frame's columns hold (the inverse of ``spark_type``).

    Columns of other types (decimals, nested, binary, ...) are left out: no
    row expression can read them.
    """
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
    schema = {}
    for field in frame.schema.fields:
        for kind, dtype in kinds:
            if isinstance(field.dataType, kind):
                schema[field.name] = dtype
                break
    return pl.Schema(schema)


def _spark_frame(spark: SparkSession, table: pl.DataFrame) -> DataFrame:
    """A small public polars table as a Spark DataFrame (through Arrow).

    Each column gets the Spark type :func:`~privframe.engines.spark.expressions.spark_type`
    gives its polars type (the type row expressions expect): unsigned integers
    the next wider signed type, naive datetimes ``timestamp_ntz``. Types with
    no such twin: categoricals and enums become strings, UInt64 a
    decimal(20, 0), and anything else the type Spark infers from Arrow.
    """
    from privframe.engines.spark.expressions import spark_type
    from privframe.errors import InvalidArgumentError

    casts = {
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
    for name, dtype in converted.schema.items():
        try:
            kind = spark_type(dtype)
        except InvalidArgumentError:
            if not isinstance(dtype, pl.Decimal):
                return spark.createDataFrame(arrow)
            kind = f"decimal({dtype.precision}, {dtype.scale})"
        fields.append("`" + name.replace("`", "``") + "` " + kind)
    return spark.createDataFrame(arrow, schema=", ".join(fields))


def _apply_steps(
    frame: DataFrame, schema: pl.Schema, steps: tuple[RowStep, ...]
) -> tuple[DataFrame, pl.Schema]:
    """The row steps on Spark, in order (lazy), and the polars schema after them.

    Expressions are translated by :func:`~privframe.engines.spark.expressions.to_spark`
    against the polars schema of the frame they run on; each step's output
    schema is polars' own, computed on an empty frame.
    """
    if not steps:
        return frame, schema
    from pyspark.sql import functions as f

    from privframe.engines.spark.expressions import to_spark

    for step in steps:
        step = checked_step(step, schema)  # integer overflow gives null, as on polars
        if step.kind == "filter":
            for expr in step.exprs:
                frame = frame.filter(to_spark(expr, schema))
            continue
        if step.kind == "with_columns":
            # One projection: every expression sees the frame before the step, as in polars.
            frame = frame.withColumns(
                {e.meta.output_name(): to_spark(e, schema) for e in step.exprs}
            )
        else:
            assert step.table is not None
            on = list(step.on)
            table = _spark_frame(frame.sparkSession, step.table)
            # polars suffixes the table's clashing columns with "_right"; Spark would keep both.
            clash = {c: f"{c}_right" for c in table.columns if c not in on and c in schema}
            if clash:
                table = table.withColumnsRenamed(clash)
            frame = frame.join(f.broadcast(table), on=on, how=step.how)
        schema = apply_steps(pl.LazyFrame(schema=schema), (step,)).collect_schema()
    return frame, schema


def _key_index(frame: DataFrame, schema: pl.Schema, keys: pl.DataFrame) -> DataFrame:
    """Rows whose key is public, with the key's position in ``keys`` as ``_KEY``.

    A key column of another type than the keys' is cast as the polars engine
    casts it, non-strictly (translated by ``to_spark``, so the same values
    match); a value the type cannot hold matches no key and nothing raises.
    The keys table is broadcast: it is public and small next to the data.
    """
    from pyspark.sql import functions as f

    from privframe.engines.spark.expressions import to_spark
    from privframe.errors import InvalidArgumentError

    columns = list(keys.columns)
    table = _spark_frame(
        frame.sparkSession, keys.with_row_index(_KEY).with_columns(pl.col(_KEY).cast(pl.Int64))
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


def _known_units(frame: DataFrame, unit: str) -> DataFrame:
    """Drop rows whose unit is null or NaN: they must never be merged into one unit."""
    from pyspark.sql import functions as f
    from pyspark.sql import types as t

    column = col(unit)
    if isinstance(frame.schema[unit].dataType, t.FloatType | t.DoubleType):
        return frame.filter(column.isNotNull() & ~f.isnan(column))
    return frame.filter(column.isNotNull())


def _partials(
    frame: DataFrame, spec: AggregationSpec, by: list[str], names: list[str]
) -> DataFrame:
    """Per (unit, key): rows n, bounded weight w, and each value's scaled, clipped sum."""
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    unit = spec.unit
    assert unit is not None
    partial = frame.groupBy(*(col(c) for c in (unit, *by))).agg(
        f.count(f.lit(1)).alias(_N), *(f.sum(col(n)).alias(n) for n in names)
    )
    if spec.max_groups is not None:
        # The k groups ranking lowest by a keyed hash of (unit, key): a uniformly random
        # subset of the unit's groups (ties, which need a 64-bit collision, by key).
        order = Window.partitionBy(col(unit)).orderBy(
            _keyed_hash(spec.seed ^ _GROUP_SEED, unit, *by), *(col(c) for c in by)
        )
        partial = (
            partial.withColumn(_RANK, f.row_number().over(order))
            .filter(col(_RANK) <= spec.max_groups)
            .drop(_RANK)
        )
    partial = partial.withColumn(_W, f.least(col(_N), _long(spec.max_rows_per_group)))
    if spec.max_rows is not None:
        partial = _cap_rows(partial, unit, by, spec.max_rows, spec.seed)
    w, n = col(_W), col(_N)
    scaled = {}
    for v in spec.values:
        s = col(v.name)
        # The polars engine's (s·w/n).round() in the same float operations, ties to even.
        shrunk = f.rint(s.cast("double") * w / n).cast("long")
        lo, hi = v.lower_units - v.centre_units, v.upper_units - v.centre_units
        bounded = f.when(w < n, shrunk).otherwise(s)
        scaled[v.name] = _clip(bounded, w * _long(lo), w * _long(hi))
    return partial.withColumns(scaled) if scaled else partial


def _cap_rows(partial: DataFrame, unit: str, by: list[str], cap: int, seed: int) -> DataFrame:
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
    total, w = col(_TOTAL), col(_W)
    over = total > _long(cap)  # then T >= 1: no division by zero, under ANSI mode either
    scaled = f"(`{_W}` * CAST({cap} AS BIGINT))"
    largest = units.orderBy(
        col(_REM).desc(),
        _keyed_hash(seed ^ _TIE_SEED, unit, *by).desc(),
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
                _DEFICIT: _long(cap) - f.sum(col(_BASE)).over(units),
                _ORDER: f.row_number().over(largest),
            }
        )
        .withColumn(
            _W,
            f.when(over, col(_BASE) + (col(_ORDER) <= col(_DEFICIT)).cast("long")).otherwise(w),
        )
        .drop(_TOTAL, _BASE, _REM, _DEFICIT, _ORDER)
    )


def _sampled_rows(
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
    ranked = window.orderBy(_keyed_hash(spec.seed ^ _ROW_SEED, *cell, _ID), col(_ID))
    return (
        frame.join(partial.select(*(col(c) for c in cell), col(_W)), on=cell, how="inner")
        .withColumn(_ID, f.row_number().over(numbered))
        .withColumn(_RANK, f.row_number().over(ranked))
        .filter(col(_RANK) <= col(_W))
    )


def _to_polars(frame: DataFrame) -> pl.DataFrame:
    """Collect a small Spark DataFrame through Arrow."""
    out = pl.from_arrow(frame.toArrow())
    assert isinstance(out, pl.DataFrame)
    return out


class SparkEngine:
    """Runs an :class:`~privframe.engines.spec.AggregationSpec` on a Spark DataFrame.

    Everything stays lazy in Spark until one collect of the per-key result
    (and the per-(key, position) histogram counts, in the same Spark job).

    Args:
        frame: the private data, a ``pyspark.sql.DataFrame``.
        schema: the polars types of its columns, as queries were checked
            against (each column must hold the Spark twin of its type,
            :func:`~privframe.engines.spark.expressions.spark_type`); by
            default read from the Spark schema.

    Example:
        >>> from privframe.engines.spark.engine import SparkEngine
        >>> engine = SparkEngine(spark.table("sales.orders"))  # doctest: +SKIP
    """

    def __init__(
        self, frame: DataFrame, *, schema: Mapping[str, pl.DataType] | pl.Schema | None = None
    ) -> None:
        self._frame = frame
        self._schema = pl.Schema(schema) if schema is not None else None

    def aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        """Exact bounded aggregates, one row per public key, in key order.

        Without public keys but with ``group_by`` (private key selection), one
        row per observed non-null key, sorted by key, with ``DISTINCT`` units.
        The same columns and dtypes as :meth:`PolarsEngine.aggregate
        <privframe.engines.polars.PolarsEngine.aggregate>`.

        A failed job's error is raised as Spark gives it (its caller withholds
        the message), but pyspark's log of it is silenced (:func:`quiet_query_errors`).
        """
        with quiet_query_errors():
            return self._aggregate(spec)

    def _aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        from pyspark.sql import functions as f

        schema = self._schema if self._schema is not None else _polars_schema(self._frame)
        frame, schema = _apply_steps(self._frame, schema, spec.steps)
        observed = spec.keys is None and bool(spec.group_by)
        keys = spec.keys if spec.keys is not None else pl.DataFrame({_GLOBAL: [0]})
        if observed:
            by = list(spec.group_by)
            frame = frame.filter(functools.reduce(operator.and_, (col(c).isNotNull() for c in by)))
        else:
            by = [_KEY]
            if spec.keys is None:
                frame = frame.withColumn(_KEY, _long(0))
            else:
                frame = _key_index(frame, schema, keys)
        # Keep only what the aggregation reads, so no other column can collide with the
        # engine's working columns.
        unit = [spec.unit] if spec.unit is not None else []
        frame = frame.select(
            *(col(c) for c in (*unit, *by)),
            *(_row_units(v).alias(v.name) for v in spec.values),
            *(
                _position_udf(h.grid)(col(h.column).cast("double")).alias(h.name)
                for h in spec.histograms
            ),
        )
        names = [v.name for v in spec.values]
        if spec.unit is None:
            per_key = frame.groupBy(*(col(c) for c in by)).agg(
                f.count(f.lit(1)).alias(COUNT),
                f.count(f.lit(1)).alias(DISTINCT),
                *(f.sum(col(n)).alias(n) for n in names),
            )
            rows = frame
        else:
            frame = _known_units(frame, spec.unit)
            partial = _partials(frame, spec, by, names)
            per_key = partial.groupBy(*(col(c) for c in by)).agg(
                f.sum(col(_W)).alias(COUNT),
                f.count(f.lit(1)).alias(DISTINCT),
                *(f.sum(col(n)).alias(n) for n in names),
            )
            rows = _sampled_rows(frame, partial, spec, by) if spec.histograms else frame
        # One collect (one Spark job): the per-key rows and each histogram's (key, position)
        # counts, told apart by _HIST (null for the per-key rows).
        null = f.lit(None).cast("long")
        parts = [
            per_key.select(
                *(col(c) for c in by),
                f.lit(None).cast("int").alias(_HIST),
                null.alias(_POS),
                col(COUNT).cast("long").alias(COUNT),
                col(DISTINCT).cast("long").alias(DISTINCT),
                *(col(n).cast("long").alias(n) for n in names),
            )
        ]
        for i, h in enumerate(spec.histograms):
            counts = (
                rows.filter(col(h.name).isNotNull())
                .groupBy(*(col(c) for c in (*by, h.name)))
                .agg(f.count(f.lit(1)).alias(COUNT))
            )
            parts.append(
                counts.select(
                    *(col(c) for c in by),
                    f.lit(i).alias(_HIST),
                    col(h.name).cast("long").alias(_POS),
                    col(COUNT),
                    null.alias(DISTINCT),
                    *(null.alias(n) for n in names),
                )
            )
        collected = _to_polars(functools.reduce(lambda a, b: a.unionByName(b), parts))
        if not observed:
            index = keys.with_row_index(_KEY).schema[_KEY]
            collected = collected.with_columns(pl.col(_KEY).cast(index))
        collected = collected.with_columns(pl.col(COUNT, DISTINCT, *names).cast(pl.Int64))
        result = collected.filter(pl.col(_HIST).is_null()).select(*by, COUNT, DISTINCT, *names)
        out = in_key_order(result, keys, by, names, observed=observed)
        for i, h in enumerate(spec.histograms):
            found = (
                collected.filter(pl.col(_HIST) == i)
                .select(*by, pl.col(_POS).alias(h.name), pl.col(COUNT).alias("len"))
                .sort(h.name)  # each key's list in position order
            )
            out = _attach(out, by, h, found)
        return out.drop(_KEY, _GLOBAL, strict=False)
