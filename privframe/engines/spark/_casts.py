"""polars' non-strict casts as Spark Columns: polars' result, null where polars gives null."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from privframe.engines.spark._columns import float_literal, pyspark_functions
from privframe.engines.spark.types import INTS, computed_type, is_float, is_int, is_number
from privframe.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["cast", "plain_cast"]

# polars' grammar for non-strict string casts (ASCII digits, no spaces), as Java regular
# expressions that cannot backtrack (possessive quantifiers: linear time on any string).
# At most 19 significant digits: anything longer is out of range for every integer type.
_SIGNED = r"\A[+-]?(?=[0-9])0*+([1-9][0-9]{0,18})?\z"
_UNSIGNED = r"\A\+?(?=[0-9])0*+([1-9][0-9]{0,18})?\z"
_REAL = r"\A[+-]?([0-9]++(\.[0-9]*+)?|\.[0-9]++)([eE][+-]?[0-9]++)?\z"
_NAN = r"(?i)\A[+-]?nan\z"
_INF = r"(?i)\A\+?inf(inity)?\z"
_MINUS_INF = r"(?i)\A-inf(inity)?\z"

_MICROS_PER = {"ms": 1000, "ns": 1000}  # ms: micros // 1000; ns: micros * 1000


def plain_cast(source: pl.DataType, target: pl.DataType) -> bool:
    """Whether the cast is one Spark cast (reading its input once)."""
    if source == target or source in (pl.Null(), pl.Boolean()):
        return True
    if is_int(source):
        return target == pl.String() or is_float(target)
    if is_float(source):
        return is_float(target)
    return source == pl.Date() and target == pl.String()


def cast(column: Column, source: pl.DataType, target: pl.DataType) -> Column:
    """``cast(target, strict=False)``: polars' result, null where polars gives null."""
    sf = pyspark_functions()
    if source == target:
        return column
    kind = computed_type(target)
    if source == pl.Null():
        return sf.lit(None).cast(kind)
    if source == pl.Boolean() and (is_number(target) or target == pl.String()):
        return column.cast(kind)  # 1/0 and "true"/"false", as in polars
    if is_int(source):
        if target == pl.String() or is_float(target):
            return column.cast(kind)
        if is_int(target):
            return _int_range(column, target)
    if is_float(source):
        if is_float(target):
            return column.cast(kind)  # rounds; overflow to ±inf (no error in Spark)
        if is_int(target):
            info = INTS[target]
            # trunc(x) in [low, high]  <=>  low - 1 < x < high + 1 (NaN is excluded).
            below = float(info.low - 1)
            lower = column > below if int(below) == info.low - 1 else column >= float(info.low)
            fits = lower & (column < float(info.high + 1)) & ~sf.isnan(column)
            return sf.when(fits, column).cast(kind)
    if source == pl.String():
        if is_int(target):
            pattern = _SIGNED if INTS[target].native else _UNSIGNED
            digits = sf.when(column.rlike(pattern), column).cast("decimal(20,0)")
            return _int_range(digits, target)
        if is_float(target):
            return (
                sf.when(column.rlike(_NAN), float_literal(float("nan"), kind))
                .when(column.rlike(_INF), float_literal(float("inf"), kind))
                .when(column.rlike(_MINUS_INF), float_literal(float("-inf"), kind))
                .otherwise(sf.when(column.rlike(_REAL), column).cast(kind))
            )
    if source == pl.Date():
        if target == pl.String():
            return column.cast(kind)  # yyyy-MM-dd in both
        if is_number(target):
            return cast(sf.unix_date(column), pl.Int32(), target)
    if isinstance(source, pl.Datetime) and is_number(target):
        micros = sf.unix_micros(column)
        scale = _MICROS_PER.get(source.time_unit, 1)
        if source.time_unit == "ms":
            raw = sf.call_function("div", micros - sf.pmod(micros, sf.lit(scale)), sf.lit(scale))
        elif source.time_unit == "ns":
            raw = sf.try_multiply(micros, sf.lit(scale).cast("bigint"))
        else:
            raw = micros
        return cast(raw, pl.Int64(), target)
    raise InvalidArgumentError(
        f"the cast from {source} to {target} has no exact Spark translation"
        + (" (Spark formats numbers and times differently)" if target == pl.String() else "")
    )


def _int_range(column: Column, target: pl.DataType) -> Column:
    """An integer (or whole decimal) as ``target``, null outside its range."""
    info = INTS[target]
    return pyspark_functions().when(column.between(info.low, info.high), column).cast(info.spark)
