"""The Spark twins of polars types: which Spark type holds a polars type's values exactly.

Example:
    >>> import polars as pl
    >>> from privframe.engines.spark.types import spark_type
    >>> spark_type(pl.UInt32)
    'bigint'
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from privframe.errors import InvalidArgumentError

__all__ = [
    "FLOATS",
    "INTS",
    "IntType",
    "computed_type",
    "is_float",
    "is_int",
    "is_number",
    "spark_type",
]


@dataclass(frozen=True)
class IntType:
    """A polars integer type on Spark: its range and the Spark type holding it."""

    spark: str
    low: int
    high: int

    @property
    def native(self) -> bool:
        """Whether the Spark type has exactly this range (signed types)."""
        return self.low < 0


INTS: dict[pl.DataType, IntType] = {
    pl.Int8(): IntType("tinyint", -(2**7), 2**7 - 1),
    pl.Int16(): IntType("smallint", -(2**15), 2**15 - 1),
    pl.Int32(): IntType("int", -(2**31), 2**31 - 1),
    pl.Int64(): IntType("bigint", -(2**63), 2**63 - 1),
    # Spark has no unsigned types: the next wider signed type holds each.
    pl.UInt8(): IntType("smallint", 0, 2**8 - 1),
    pl.UInt16(): IntType("int", 0, 2**16 - 1),
    pl.UInt32(): IntType("bigint", 0, 2**32 - 1),
}
FLOATS: dict[pl.DataType, str] = {pl.Float32(): "float", pl.Float64(): "double"}
_OTHERS: dict[pl.DataType, str] = {
    pl.Boolean(): "boolean",
    pl.String(): "string",
    pl.Date(): "date",
    pl.Null(): "void",
}


def spark_type(dtype: pl.DataType | type[pl.DataType]) -> str:
    """The Spark SQL type (DDL name) that holds values of a polars type.

    Unsigned integers go in the next wider signed type; a naive datetime is a
    ``timestamp_ntz`` (wall time), one with a time zone a ``timestamp`` (an
    instant), at microsecond precision.

    Raises:
        InvalidArgumentError: a type Spark cannot hold exactly (``Float16``,
            unsigned 64-bit, decimals, nested types, ...).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spark.expressions import spark_type
        >>> [spark_type(t) for t in (pl.Int64, pl.UInt8, pl.Float32, pl.String)]
        ['bigint', 'smallint', 'float', 'string']
    """
    dtype = dtype() if isinstance(dtype, type) else dtype
    if dtype in INTS:
        return INTS[dtype].spark
    if dtype in FLOATS:
        return FLOATS[dtype]
    if dtype in _OTHERS:
        return _OTHERS[dtype]
    if isinstance(dtype, pl.Datetime):
        return "timestamp" if dtype.time_zone else "timestamp_ntz"
    raise InvalidArgumentError(f"values of type {dtype} cannot be held exactly in Spark")


def computed_type(dtype: pl.DataType) -> str:
    """The Spark type a value is computed in: datetimes as UTC wall times (timestamp_ntz)."""
    return "timestamp_ntz" if isinstance(dtype, pl.Datetime) else spark_type(dtype)


def is_int(dtype: pl.DataType) -> bool:
    """Whether ``dtype`` is an integer type Spark holds exactly (Int8 to Int64, UInt8 to UInt32).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spark.types import is_int
        >>> is_int(pl.Float32())
        False
    """
    return dtype in INTS


def is_float(dtype: pl.DataType) -> bool:
    """Whether ``dtype`` is Float32 or Float64.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spark.types import is_float
        >>> is_float(pl.Float32())
        True
    """
    return dtype in FLOATS


def is_number(dtype: pl.DataType) -> bool:
    """Whether ``dtype`` is an integer or float type Spark holds exactly.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spark.types import is_number
        >>> is_number(pl.Float32())
        True
    """
    return is_int(dtype) or is_float(dtype)
