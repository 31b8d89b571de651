"""What an engine's opener gives the Session, and the checks every opener shares.

Each engine opens the inputs it takes (:mod:`privframe.engines.registry`
chooses the engine) and returns an :class:`Opened`: the engine, the polars
schema queries are checked against (schemas are public), and how a released
table is handed back.

Example:
    >>> import polars as pl
    >>> from privframe.engines.inputs import check_unit_column
    >>> check_unit_column("u", pl.Schema({"u": pl.Int64}))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import pandas as pd
import polars as pl

from privframe.engines.spec import Engine
from privframe.errors import InvalidArgumentError, InvalidValueError, columns_note

__all__ = [
    "MISSING_UNITS",
    "ColumnType",
    "Opened",
    "PanicException",
    "check_declared_types",
    "check_unit_column",
    "exact_pandas",
]

ColumnType: TypeAlias = pl.DataType | type[pl.DataType]
"""A polars type, as an instance (``pl.Int64()``) or a class (``pl.Datetime``)."""

PanicException: type[BaseException] = getattr(
    pl.exceptions, "PanicException", pl.exceptions.PolarsError
)
"""polars' Rust panics surface as this BaseException subclass: catch it with Exception."""

MISSING_UNITS = (
    "the privacy unit column {unit!r} contains nulls or NaN: rows without a unit cannot be "
    "bounded. Drop them or give each its own unit before the session."
)
"""The refusal of data with rows without a privacy unit (``.format(unit=...)``)."""


@dataclass(frozen=True, eq=False)
class Opened:
    """An input opened by its engine, checked and ready for queries.

    Attributes:
        engine: runs the bounded aggregations on the data.
        schema: the polars types of the columns queries may read.
        kind: the kind of DataFrame releases are returned as.
        present: turns a released (noisy, public) polars table into ``kind``.
    """

    engine: Engine
    schema: pl.Schema
    kind: Literal["pandas", "polars", "spark"]
    present: Callable[[pl.DataFrame], Any]


def check_unit_column(unit: str | None, schema: pl.Schema) -> None:
    """Refuse a privacy unit column that is not in the data (its column names are public).

    Raises:
        InvalidValueError: ``unit`` is not a column of ``schema``.
    """
    if unit is not None and unit not in schema:
        raise InvalidValueError(
            f"privacy unit column {unit!r} is not in the data; {columns_note(list(schema))}"
        )


def check_declared_types(types: Mapping[str, ColumnType], schema: pl.Schema) -> None:
    """Refuse declared types that typed data does not have: the owner's word must be true.

    A declared type is a public fact given by the data owner; the data's own
    types are public too, so a mismatch is refused by name, never bridged by
    a cast that could fail or change values for some rows only.

    Raises:
        InvalidValueError: a declared column is not in the data, or has
            another type there.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.inputs import check_declared_types
        >>> check_declared_types({"x": pl.Datetime}, pl.Schema({"x": pl.Datetime("ns")}))
        >>> check_declared_types({"x": pl.Int64}, pl.Schema({"x": pl.Float64}))
        Traceback (most recent call last):
        ...
        privframe.errors.InvalidValueError: metadata declares column 'x' as Int64, ...
    """
    for name, declared in types.items():
        if name not in schema:
            raise InvalidValueError(
                f"metadata declares a type for {name!r}, which is not a column of the data; "
                f"{columns_note(list(schema))}"
            )
        if declared != schema[name]:
            raise InvalidValueError(
                f"metadata declares column {name!r} as {declared}, but the data's column has "
                f"type {schema[name]}: declare the type it has, or cast the column before "
                "opening the session"
            )


def exact_pandas(result: pl.DataFrame) -> pd.DataFrame:
    """A released table as pandas, integer columns with nulls as nullable integers.

    polars turns an integer column holding a null (a total row's keys) into
    float64, which merges integer keys above 2^53: nullable integers keep
    every key and count exact.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.inputs import exact_pandas
        >>> exact_pandas(pl.DataFrame({"k": [2**53 + 1, None]}))["k"].tolist()
        [9007199254740993, <NA>]
    """
    frame = result.to_pandas()
    for name, dtype in result.schema.items():
        if dtype.is_integer() and result[name].null_count():
            frame[name] = pd.array(result[name].to_list(), dtype=str(dtype))
    return frame


def mixed_engines(table: str, engine: object, first: str) -> InvalidArgumentError:
    """The refusal of a private table on another engine than the session's first table's.

    Example:
        >>> from privframe.engines.inputs import mixed_engines
        >>> "same kind of data" in str(mixed_engines("drugs", object(), "polars"))
        True
    """
    return InvalidArgumentError(
        f"private table {table!r} runs on another engine ({type(engine).__name__}) than the "
        f"first table ({first}): give every private table of a session as the same kind of "
        "data (pandas, polars or files; or all Spark DataFrames)"
    )
