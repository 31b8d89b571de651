"""What the Session needs to take a Spark DataFrame: types, unit checks, results.

The aggregation itself runs in :mod:`privframe.engines.spark.engine`; this module
only adapts the input and the output. The Session validates every query
against a polars schema built here from the Spark schema (schemas are
public), so the same checks run whatever the engine.

pyspark is imported lazily: privframe does not need it unless a Spark
DataFrame is given (``pip install 'privframe[spark]'``).

Example:
    >>> from privframe.engines.spark.frames import is_spark_frame
    >>> is_spark_frame([1, 2])
    False
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from privframe.engines.expressions import exact_unit_type
from privframe.engines.spark._columns import col
from privframe.engines.spark.rows import spark_table
from privframe.errors import InvalidArgumentError, InvalidValueError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import SparkSession

__all__ = [
    "catalog_table",
    "has_missing_units",
    "is_spark_frame",
    "plain_frame",
    "quiet_query_errors",
    "run_job",
    "to_spark_result",
]

_T = TypeVar("_T")


def is_spark_frame(data: object) -> bool:
    """Whether ``data`` is a pyspark DataFrame, classic or Connect (without importing pyspark).

    Classic frames are ``pyspark.sql.classic.dataframe.DataFrame`` (``pyspark.sql.dataframe``
    before pyspark 4), Spark Connect ones ``pyspark.sql.connect.dataframe.DataFrame``: the
    type's name and module say which, so the registry asks every input without importing
    pyspark.

    Example:
        >>> from privframe.engines.spark.frames import is_spark_frame
        >>> is_spark_frame("data.parquet")
        False
    """
    kind = type(data)
    return kind.__name__ == "DataFrame" and kind.__module__.startswith("pyspark.sql")


# pyspark logs the message of every failed job's error through these (with the values it
# quotes) as it converts the error to Python, whether or not the caller handles it; a
# Spark Connect client also logs each failed call with the server's message through its
# own logger (when SPARK_CONNECT_LOG_LEVEL turns it on).
_QUERY_CONTEXT_LOGS = (
    "DataFrameQueryContextLogger",
    "SQLQueryContextLogger",
    "pyspark.sql.connect.logging",
)


def _drop(record: logging.LogRecord) -> bool:
    return False


@contextlib.contextmanager
def quiet_query_errors() -> Iterator[None]:
    """Silence pyspark's log of failed jobs' messages while Spark works on private data.

    pyspark (4.0 and later) logs an error's message as it converts a failed
    job's Java exception (or a Spark Connect server's error), and the message
    can quote a data value (the input of a failed cast). The error itself is
    then withheld by its handler.

    Example:
        >>> from privframe.engines.spark.frames import quiet_query_errors
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


def run_job(job: Callable[[], _T], what: str) -> _T:
    """``job()``, a Spark action over private data; if it fails, an error that withholds why.

    Spark's message quotes the value a job failed on (a cast's input, the
    text of ``raise_error``), in the exception, in its Java cause and in
    pyspark's error log. The log is silenced while the job runs
    (:func:`quiet_query_errors`); the error names the
    exception's type and Spark's error condition (a fixed name such as
    ``CAST_INVALID_INPUT``), and is raised outside the ``except`` block, so
    that no exception chain carries the message.

    Raises:
        InvalidValueError: the job failed; ``what`` says which job.

    Example:
        >>> from privframe.engines.spark.frames import run_job
        >>> run_job(lambda: 3, "counting")
        3
    """
    failure = ""
    with quiet_query_errors():
        try:
            return job()
        except Exception as err:  # any failure of a job over the data may quote a value
            failure = _kind(err)
    raise InvalidValueError(
        f"{what} failed on Spark ({failure}; Spark's message is withheld as it may quote "
        "private values): check the columns' types and any casts or raise_error calls in "
        "how the DataFrame was built"
    )


def _kind(err: Exception) -> str:
    """The exception's type and, for Spark's own errors, its condition (never a value)."""
    try:
        condition = err.getCondition()  # type: ignore[attr-defined]
    except Exception:  # not a Spark error, or no JVM to ask
        condition = None
    return type(err).__name__ + (f", {condition}" if isinstance(condition, str) else "")


def catalog_table(spark: SparkSession, table: str) -> SparkDataFrame:
    """The table ``table`` (``"db.table"``) of the Spark session's catalog.

    Raises:
        InvalidArgumentError: ``table`` is not a non-empty string.
        InvalidValueError: the catalog has no such table (or Spark cannot open it).

    Example:
        >>> from privframe.engines.spark.frames import catalog_table
        >>> orders = catalog_table(spark, "sales.orders")  # doctest: +SKIP
    """
    if not isinstance(table, str) or not table.strip():
        raise InvalidArgumentError(
            f"table must be the name of a table in the Spark catalog, got {table!r}"
        )
    failure = ""
    try:
        frame = spark.table(table)
        # Spark Connect looks the table up only when asked about it: ask here.
        frame.schema  # noqa: B018
        return frame
    except Exception as err:  # Spark's message is withheld as every other one is
        failure = _kind(err)
    raise InvalidValueError(
        f"the Spark catalog has no table {table!r} that can be read ({failure}): check its "
        "name, written as 'database.table'"
    )


def _polars_type(spark_type: Any) -> pl.DataType | None:
    """The polars type a Spark column is seen as, or None for a type privframe does not read."""
    from pyspark.sql import types as t

    if isinstance(spark_type, t.LongType | t.IntegerType | t.ShortType | t.ByteType):
        return pl.Int64()
    if isinstance(spark_type, t.DoubleType | t.DecimalType):
        return pl.Float64()
    if isinstance(spark_type, t.FloatType):
        return pl.Float32()
    if isinstance(spark_type, t.StringType):
        return pl.String()
    if isinstance(spark_type, t.BooleanType):
        return pl.Boolean()
    if isinstance(spark_type, t.DateType):
        return pl.Date()
    if isinstance(spark_type, t.TimestampType | t.TimestampNTZType):
        return pl.Datetime("us")
    return None


def plain_frame(frame: SparkDataFrame, unit: str | None = None) -> tuple[SparkDataFrame, pl.Schema]:
    """The Spark frame with plain types, and the polars schema queries are checked against.

    As for polars input (:func:`privframe.engines.expressions.plain_types`): decimals
    become doubles and small integers 64-bit, so no operation can overflow or
    fail on some values only; an array of such values is a list of them (for
    ``flat_map``). Columns of other types (nested arrays, maps, structs,
    binary) are left out: no query can read them.

    The privacy unit column ``unit`` keeps every ID distinct, as
    :func:`privframe.engines.expressions.exact_unit_type` rules: a scale-0 decimal
    stays a decimal in Spark (seen as Int128, which holds it exactly), another
    decimal becomes its text, binary stays binary; a type that cannot identify
    units exactly is refused.

    Raises:
        InvalidArgumentError: the unit column's type cannot identify units exactly.

    Example:
        >>> import privframe as pf  # doctest: +SKIP
        >>> from privframe.engines.spark.frames import plain_frame  # doctest: +SKIP
        >>> plain_frame(spark.range(3))[1]  # doctest: +SKIP
        Schema({'id': Int64})
    """
    names = [field.name for field in frame.schema.fields]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidValueError(
            f"the Spark DataFrame has several columns named {repeated}: give each column "
            "its own name (e.g. with toDF or withColumnRenamed)"
        )
    columns, schema = [], {}
    for field in frame.schema.fields:
        column = col(field.name)
        if field.name == unit:
            column, dtype = _exact_unit(column, field.dataType)
        elif (plain := _plain(column, field.dataType)) is not None:
            column, dtype = plain
        else:
            continue
        columns.append(column.alias(field.name))
        schema[field.name] = dtype
    return frame.select(*columns), pl.Schema(schema)


def _plain(column: Any, spark_type: Any) -> tuple[Any, pl.DataType] | None:
    """A column in its plain type (decimals as doubles, small integers as longs), or None.

    An array of plain values is a list of them (arrays of arrays: None).
    """
    from pyspark.sql import types as t

    if isinstance(spark_type, t.ArrayType):  # a list, for flat_map: of plain elements
        element = _plain(column, spark_type.elementType)
        if element is None or isinstance(spark_type.elementType, t.ArrayType):
            return None
        if isinstance(spark_type.elementType, t.DecimalType):
            column = column.cast("array<double>")
        elif element[1] == pl.Int64 and not isinstance(spark_type.elementType, t.LongType):
            column = column.cast("array<bigint>")
        return column, pl.List(element[1])
    dtype = _polars_type(spark_type)
    if isinstance(spark_type, t.DecimalType):
        column = column.cast("double")
    elif dtype == pl.Int64 and not isinstance(spark_type, t.LongType):
        column = column.cast("long")
    return None if dtype is None else (column, dtype)


def _exact_unit(column: Any, spark_type: Any) -> tuple[Any, pl.DataType]:
    """The unit column cast injectively, and the polars type it is seen as."""
    from pyspark.sql import types as t

    if isinstance(spark_type, t.DecimalType):
        exact = exact_unit_type(pl.Decimal(spark_type.precision, spark_type.scale))
        return (column if exact == pl.Int128 else column.cast("string")), exact
    if isinstance(spark_type, t.BinaryType):
        return column, pl.Binary()
    plain = None if isinstance(spark_type, t.ArrayType) else _plain(column, spark_type)
    if plain is None:
        raise InvalidArgumentError(
            f"a privacy unit column of Spark type {spark_type.simpleString()} cannot identify "
            "units exactly; give one ID per row as an integer, string, binary or date column"
        )
    return plain


def has_missing_units(frame: SparkDataFrame, unit: str, dtype: pl.DataType) -> bool:
    """Whether any row's privacy unit is null (or NaN, for a float unit): one Spark job.

    Raises:
        InvalidValueError: the job failed, say on a unit column whose cast fails
            for some value (Spark's message is withheld: see :func:`run_job`).
    """
    from pyspark.sql import functions as f

    column = col(unit)
    missing = column.isNull() | f.isnan(column) if dtype.is_float() else column.isNull()
    found = run_job(
        lambda: frame.filter(missing).limit(1).count(),
        f"reading the privacy unit column {unit!r}",
    )
    return bool(found)


def to_spark_result(spark: SparkSession, result: pl.DataFrame) -> SparkDataFrame:
    """A released (noisy, public) table as a DataFrame of ``spark``, for results="spark".

    The input's kind of DataFrame: a Spark Connect session gives a Connect
    DataFrame. Each column has the Spark twin of its polars type (with no rows
    too, where Spark Connect could infer none).
    """
    if result.height == 0 and not result.columns:
        raise InvalidValueError("an empty release has no columns to give Spark")
    return spark_table(spark, result)
