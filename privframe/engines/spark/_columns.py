"""Spark Columns that compute what polars computes: literals, reads, arithmetic, tests.

The building blocks of :func:`~privframe.engines.spark.expressions.to_spark`;
each emulates one polars semantics explicitly (module documentation there).
pyspark is imported on first use (:func:`pyspark_functions`).
"""

from __future__ import annotations

import functools
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from privframe.engines.spark.types import (
    INTS,
    IntType,
    computed_type,
    is_float,
    is_int,
    is_number,
    spark_type,
)
from privframe.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "clip",
    "col",
    "compare",
    "divide",
    "evaluate",
    "float_floor",
    "float_literal",
    "float_test",
    "int_abs",
    "int_arithmetic",
    "keyed_hash",
    "literal",
    "logic",
    "long_literal",
    "pyspark_functions",
    "read_column",
    "wall_time",
    "widen",
    "wrap_bits",
]

_EPOCH = "1970-01-01 00:00:00"


@functools.cache
def pyspark_functions() -> Any:
    """pyspark.sql.functions, imported on first use (pyspark is an optional dependency)."""
    from pyspark.sql import functions

    return functions


def evaluate(expr: pl.Expr) -> pl.Series:
    """A column-free expression's one value, computed by polars (so exactly as polars does)."""
    try:
        return pl.select(expr.alias("__value")).to_series()
    except pl.exceptions.PolarsError as err:
        raise InvalidArgumentError(f"polars cannot evaluate {expr}: {err}") from None


def literal(value: Any, dtype: pl.DataType) -> Column:
    """A Spark literal of the twin of ``dtype`` (exact: no parsing, no time zone)."""
    sf = pyspark_functions()
    if dtype == pl.Null():
        return sf.lit(None)
    kind = computed_type(dtype)
    if value is None:
        return sf.lit(None).cast(kind)
    if dtype == pl.Date():
        days = pl.Series([value], dtype=pl.Date).cast(pl.Int32).item()
        return sf.date_from_unix_date(sf.lit(days))
    if isinstance(dtype, pl.Datetime):
        raw = pl.Series([value], dtype=dtype).cast(pl.Int64).item()
        micros, rest = _to_micros(raw, dtype.time_unit)
        if rest:
            raise InvalidArgumentError(f"the datetime {value} is finer than Spark's microseconds")
        return wall_time(sf.lit(micros))
    if is_float(dtype):
        return float_literal(float(value), kind)
    if kind in ("string", "boolean"):
        return sf.lit(value)
    return sf.lit(value).cast(kind)


def read_column(name: str, dtype: pl.DataType) -> Column:
    """A column of the Spark frame, as the Spark twin of its polars type."""
    sf = pyspark_functions()
    column = sf.col("`" + name.replace("`", "``") + "`")
    if isinstance(dtype, pl.Datetime):
        # timestamp or timestamp_ntz alike: the same epoch microseconds, as a UTC wall time.
        return wall_time(sf.unix_micros(column))
    return column.cast(spark_type(dtype))


def wall_time(micros: Column) -> Column:
    """The timestamp_ntz ``micros`` after 1970-01-01 00:00 (no time zone is involved)."""
    sf = pyspark_functions()
    return sf.timestamp_add("MICROSECOND", micros, sf.lit(_EPOCH).cast("timestamp_ntz"))


def _to_micros(raw: int, unit: str) -> tuple[int, int]:
    if unit == "ms":
        return raw * 1000, 0
    if unit == "ns":
        return divmod(raw, 1000)
    return raw, 0


def float_literal(value: float | np.floating[Any], kind: str) -> Column:
    literal = pyspark_functions().lit(float(value))  # a double
    return literal if kind == "double" else literal.cast(kind)


def widen(column: Column, source: pl.DataType, target: pl.DataType) -> Column:
    """``column`` as polars brings it to ``target`` for an operation (a lossless cast)."""
    if source == target:
        return column
    kind = computed_type(target)
    if source == pl.Null():
        return column.cast(kind)
    if is_float(target) and (is_number(source) or source == pl.Boolean()):
        return column.cast(kind)  # int -> float rounds to nearest, as in polars
    if is_int(target) and source == pl.Boolean():
        return column.cast(kind)
    if is_int(target) and is_int(source):
        wide, narrow = INTS[target], INTS[source]
        if wide.low <= narrow.low and narrow.high <= wide.high:
            return column.cast(kind)
    raise InvalidArgumentError(f"no Spark translation brings {source} values to {target}")


def compare(op: str, left: Column, right: Column) -> Column:
    if op == "Eq":
        return left == right
    if op == "NotEq":
        return left != right
    if op == "Lt":
        return left < right
    if op == "LtEq":
        return left <= right
    if op == "Gt":
        return left > right
    if op == "GtEq":
        return left >= right
    if op == "EqValidity":
        return left.eqNullSafe(right)
    return ~left.eqNullSafe(right)  # NotEqValidity


def logic(op: str, left: Column, right: Column, dtype: pl.DataType) -> Column:
    """``& | ^``: Kleene logic on booleans, bitwise on integers."""
    if dtype == pl.Boolean():
        if op == "And":
            return left & right
        if op == "Or":
            return left | right
        return left != right  # Xor: null if either is null
    if is_int(dtype):
        if op == "And":
            return left.bitwiseAND(right)
        if op == "Or":
            return left.bitwiseOR(right)
        return left.bitwiseXOR(right)
    raise InvalidArgumentError(f"the operation {op} on {dtype} has no Spark translation")


def divide(left: Column, right: Column, kind: str) -> Column:
    """IEEE ``left / right`` in ``kind``: ±inf or NaN for a zero divisor, never null."""
    sf = pyspark_functions()
    # pow(±0, -1) is ±inf with the zero's sign; x · ±inf is then what x / ±0 is.
    by_zero = left * sf.pow(right, sf.lit(-1.0))
    quotient = sf.when(right == 0, by_zero).otherwise(left / sf.when(right != 0, right))
    return quotient.cast(kind)


def float_floor(value: Column, kind: str) -> Column:
    """floor() on floats, keeping -0.0, ±inf, NaN and huge values as they are."""
    sf = pyspark_functions()
    keep = (value == 0) | ~(sf.abs(value) < sf.lit(2.0**52))
    # floor() returns a bigint: only values it holds exactly ever reach it.
    return sf.when(keep, value).otherwise(sf.floor(sf.when(~keep, value)).cast(kind))


def _decimal(value: int) -> Column:
    return pyspark_functions().lit(Decimal(value))


def int_arithmetic(op: str, left: Column, right: Column, info: IntType) -> Column:
    """Integer arithmetic as polars does it: wrapping; ``// 0`` and ``% 0`` are null."""
    sf = pyspark_functions()
    if op == "TrueDivide":  # pragma: no cover - polars types true division as a float
        raise InvalidArgumentError("integer true division has no integer result")
    if op in ("Plus", "Minus", "Multiply"):
        tried = {"Plus": sf.try_add, "Minus": sf.try_subtract, "Multiply": sf.try_multiply}
        fast = tried[op](left, right)  # null on overflow
        if not info.native:
            fast = sf.when(fast.between(info.low, info.high), fast)
        exact_left, exact_right = left.cast("decimal(20,0)"), right.cast("decimal(20,0)")
        exact = {
            "Plus": exact_left + exact_right,
            "Minus": exact_left - exact_right,
            "Multiply": exact_left * exact_right,  # |x·y| < 2^126 fits decimal(38,0)
        }[op]
        return sf.coalesce(fast, _wrap(exact, info))
    # Divisors that could raise (0, and -1 for MIN // -1) never reach Spark's operators.
    divisor = sf.when(right != 0, right)
    remainder = left % divisor  # truncated; MIN % -1 is 0
    # A remainder of the other sign than the divisor moves by one divisor (floor
    # semantics); written so that no operand can overflow, whatever Spark evaluates.
    adjust = (remainder != 0) & ((remainder < 0) != (divisor < 0))
    if op == "Modulus":
        return (remainder + sf.when(adjust, divisor).otherwise(0)).cast(info.spark)
    if op != "FloorDivide":
        raise InvalidArgumentError(f"the operation {op} has no Spark translation")
    truncated = sf.call_function("div", left, sf.when(~right.isin(0, -1), right))
    floor_div = (truncated - sf.when(adjust, 1).otherwise(0)).cast(info.spark)
    return sf.when(right == -1, _int_negate(left, info)).otherwise(floor_div)


def _wrap(exact: Column, info: IntType) -> Column:
    """An exact decimal integer wrapped into the range of ``info`` (two's complement)."""
    sf = pyspark_functions()
    span = info.high - info.low + 1
    return (sf.pmod(exact - _decimal(info.low), _decimal(span)) + _decimal(info.low)).cast(
        info.spark
    )


def _int_negate(value: Column, info: IntType) -> Column:
    """-x, wrapping (-MIN is MIN); for unsigned types only 0 can be negated in range."""
    sf = pyspark_functions()
    if not info.native:
        return _wrap(-value.cast("decimal(20,0)"), info)
    safe = sf.when(value != info.low, value)
    return sf.when(value == info.low, value).otherwise(-safe)


def int_abs(value: Column, info: IntType) -> Column:
    sf = pyspark_functions()
    if not info.native:
        return value
    safe = sf.when(value != info.low, value)
    return sf.when(value == info.low, value).otherwise(sf.abs(safe))


def wrap_bits(value: Column, info: IntType) -> Column:
    """Bitwise results of an unsigned type, masked to its width (signed ones already fit)."""
    if info.native:
        return value
    return value.bitwiseAND(pyspark_functions().lit(info.high).cast(info.spark))


def float_test(name: str, value: Column, is_float: bool) -> Column:
    """is_nan / is_not_nan / is_finite / is_infinite; null for null (Spark's isnan says false)."""
    sf = pyspark_functions()
    if not is_float:  # integers: never NaN, always finite
        answer = name in ('{"Boolean": "IsNotNan"}', '{"Boolean": "IsFinite"}')
        return sf.when(value.isNotNull(), sf.lit(answer))
    inf = sf.lit(float("inf"))
    if name == '{"Boolean": "IsNan"}':
        return sf.when(value.isNotNull(), sf.isnan(value))
    if name == '{"Boolean": "IsNotNan"}':
        return sf.when(value.isNotNull(), ~sf.isnan(value))
    if name == '{"Boolean": "IsFinite"}':
        return (value > -inf) & (value < inf)  # NaN sorts above inf in Spark
    if name == '{"Boolean": "IsInfinite"}':
        return (value == inf) | (value == -inf)
    raise InvalidArgumentError(f"the function {name} has no Spark translation")


def col(name: str) -> Column:
    """The column ``name``, quoted: names with dots or backticks are taken literally.

    Example:
        >>> from privframe.engines.spark._columns import col
        >>> col("a.b")  # doctest: +SKIP
        Column<'`a.b`'>
    """
    from pyspark.sql import functions as f

    return f.col("`" + name.replace("`", "``") + "`")


def long_literal(value: int) -> Column:
    from pyspark.sql import functions as f

    return f.lit(value).cast("long")


def clip(column: Column, lower: Column, upper: Column) -> Column:
    from pyspark.sql import functions as f

    return f.least(f.greatest(column, lower), upper)


def keyed_hash(seed: int, *columns: str | Column) -> Column:
    """xxhash64 of the seed (first, so it keys the whole chain), then the columns (or names).

    The seed is taken modulo 2^64 as a signed 64-bit literal.

    Example:
        >>> from privframe.engines.spark._columns import keyed_hash
        >>> keyed_hash(2**64 - 1, "u", "g")  # doctest: +SKIP
        Column<'xxhash64(-1, u, g)'>
    """
    from pyspark.sql import functions as f

    signed = seed & (2**64 - 1)
    if signed >= 2**63:
        signed -= 2**64
    return f.xxhash64(long_literal(signed), *(col(c) if isinstance(c, str) else c for c in columns))
