"""Per-person values: what one privacy unit's rows add up to, as ``pf.unit.sum("amount")``.

A per-unit value is computed over the rows of one privacy unit only: its
total, its row count, its first or last value in a stated order, the rank of
each row among its own rows. Two steps read them
(:class:`~privframe.engines.spec.UnitColumns` and
:class:`~privframe.engines.spec.PerUnit`): ``query.with_columns(total=
pf.unit.sum("amount"))`` gives each row its unit's total, and
``query.per_unit("region", total=pf.unit.sum("amount"))`` makes one row per
unit and region, the first stage of a two-stage aggregation. Because each
value depends on one unit's rows alone, removing a person changes only that
person's rows, which the contribution bound then limits as for any row.

Every value is exact or null, on every engine:

* NaN counts as missing (null) everywhere, so that engines that order NaN
  differently agree.
* An integer sum that does not fit a signed 64-bit integer is null, never a
  wrapped value (the rule of :mod:`privframe.engines.checked_arithmetic`).
* A float sum adds the unit's values in one order fixed by the values
  themselves (ascending, left to right), never in the order the rows arrive:
  float addition is not associative, and the order of a unit's rows after a
  join depends on everyone's rows (polars orders a hash join's output by the
  whole data), so a total added in arrival order would move when another
  person is removed. A mean is that sum (an integer one exact, in 128 bits)
  divided by the count of values.
* ``first``/``last`` take the value at the smallest/largest ``by`` among the
  rows whose ``by`` is not null; rows tied on ``by`` are ordered by the value
  (nulls first), so the choice never depends on the rows' order in the data.
* ``rank`` is the "min" rank: 1 + how many of the unit's rows have a strictly
  smaller ``by`` (ties share a rank); null where ``by`` is null.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> df = pl.DataFrame({"u": [1, 1, 2], "x": [3, 4, 5], "t": [2, 1, 1]})
    >>> total = pf.unit.sum("x").polars(df.schema, "u").alias("total")
    >>> df.with_columns(total)["total"].to_list()
    [7, 7, 5]
    >>> first = pf.unit.first("x", by="t").polars(df.schema, None)
    >>> df.group_by("u").agg(first).sort("u")["x"].to_list()
    [4, 5]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from privframe.errors import InvalidArgumentError, InvalidValueError

__all__ = [
    "UnitValue",
    "count",
    "first",
    "last",
    "max",
    "mean",
    "min",
    "n_unique",
    "rank",
    "sum",
]

Kind = Literal["sum", "count", "mean", "min", "max", "first", "last", "n_unique", "rank"]

_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class UnitValue:
    """One value computed over each privacy unit's rows (build it with ``pf.unit.*``).

    Attributes:
        kind: which value (``sum``, ``count``, ``mean``, ``min``, ``max``,
            ``first``, ``last``, ``n_unique``, ``rank``).
        column: the column it reads (None: ``count()`` of rows, ``rank``).
        by: the order of ``first``, ``last`` and ``rank``.
    """

    kind: Kind
    column: str | None = None
    by: str | None = None

    @property
    def reads(self) -> tuple[str, ...]:
        """The columns the value reads.

        Example:
            >>> import privframe as pf
            >>> pf.unit.first("dx", by="date").reads
            ('dx', 'date')
        """
        return tuple(c for c in (self.column, self.by) if c is not None)

    @property
    def windowed_only(self) -> bool:
        """Whether the value is per row (``rank``), so it cannot stand for a unit's rows."""
        return self.kind == "rank"

    def describe(self) -> str:
        """The value as it is written: ``pf.unit.first('dx', by='date')``.

        Example:
            >>> import privframe as pf
            >>> pf.unit.sum("amount").describe()
            "pf.unit.sum('amount')"
        """
        args = [repr(self.column)] if self.column is not None else []
        if self.by is not None:
            args.append(f"by={self.by!r}")
        return f"pf.unit.{self.kind}({', '.join(args)})"

    def check(self, schema: pl.Schema) -> None:
        """Refuse a value whose columns are missing or of a type it cannot read.

        Raises:
            InvalidValueError: a column is not in ``schema``.
            InvalidArgumentError: ``sum``/``mean`` of a non-numeric column, or
                an order (``by``) or value of a nested type.
        """
        for column in self.reads:
            if column not in schema:
                raise InvalidValueError(
                    f"{self.describe()} reads column {column!r}, which is not in the data"
                )
            if schema[column].is_nested():
                raise InvalidArgumentError(
                    f"{self.describe()} cannot read {column!r} of type {schema[column]}"
                )
        if self.kind in ("sum", "mean") and self.column is not None:
            dtype = schema[self.column]
            if not (dtype.is_numeric() or dtype == pl.Boolean):
                raise InvalidArgumentError(
                    f"{self.describe()} needs a numeric column; {self.column!r} has type {dtype}"
                )

    def polars(self, schema: pl.Schema, unit: str | None) -> pl.Expr:
        """The value as a polars expression: per unit over ``unit`` (a window), or in a group_by.

        With ``unit`` the expression gives each row its unit's value (``over``);
        with None it is an aggregation, for ``group_by(unit, ...).agg``.
        """
        expr = self._aggregation(schema)
        if unit is None:
            if self.windowed_only:
                raise InvalidValueError(
                    f"{self.describe()} is a value per row: use it in with_columns, not per_unit"
                )
            return expr
        return expr.over(unit)

    def _aggregation(self, schema: pl.Schema) -> pl.Expr:
        if self.kind == "count":
            if self.column is None:
                return pl.len().cast(pl.Int64)
            return _value(self.column, schema).count().cast(pl.Int64)
        if self.kind == "rank":
            assert self.by is not None
            return _value(self.by, schema).rank("min").cast(pl.Int64)
        assert self.column is not None
        x = _value(self.column, schema)
        if self.kind == "sum":
            return _checked_sum(x, schema[self.column])
        if self.kind == "mean":
            total = _exact_sum(x, schema[self.column]).cast(pl.Float64)
            return pl.when(x.count() > 0).then(total / x.count())
        if self.kind == "min":
            return x.min()
        if self.kind == "max":
            return x.max()
        if self.kind == "n_unique":
            return x.drop_nulls().n_unique().cast(pl.Int64)
        assert self.by is not None
        order = _value(self.by, schema)
        known = order.is_not_null()
        ordered = x.filter(known).sort_by([order.filter(known), x.filter(known)], nulls_last=False)
        return ordered.first() if self.kind == "first" else ordered.last()


def _value(column: str, schema: pl.Schema) -> pl.Expr:
    """The column, with NaN as null if it is a float column."""
    col = pl.col(column)
    return col.fill_nan(None) if schema[column].is_float() else col


def _checked_sum(x: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """The sum; an integer one is added in Int128 and is null where it leaves Int64."""
    wide = _exact_sum(x, dtype)
    if dtype.is_float():
        return wide
    lo, hi = _INT64
    # Not strict: polars may cast every row before the `when` picks (an error would leak).
    return pl.when(wide.is_between(lo, hi)).then(wide.cast(pl.Int64, strict=False))


def _exact_sum(x: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A sum that depends on the values only, not on their order: exact, or floats sorted.

    Integers are added in Int128, exactly.
    Floats are added in ascending order, left to right (a cumulative sum:
    polars may reorder a plain sum's terms, and drops a sort before one).
    """
    if dtype.is_float():
        # In Float64 whatever the column's width, as Spark adds (engines/spark/units.py).
        return x.cast(pl.Float64).drop_nulls().sort().cum_sum().last().fill_null(0.0)
    # Decimals never reach here: inputs read them as Float64 (expressions.plain_types).
    return x.cast(pl.Int128).sum()


def _one_column(name: str, column: object) -> str:
    if not isinstance(column, str) or not column:
        raise InvalidArgumentError(f"pf.unit.{name} takes a column name, got {column!r}")
    return column


def sum(column: str) -> UnitValue:
    """Each unit's total of ``column`` (integers stay exact: a total past Int64 is null).

    Example:
        >>> import privframe as pf
        >>> pf.unit.sum("amount")
        UnitValue(kind='sum', column='amount', by=None)
    """
    return UnitValue("sum", _one_column("sum", column))


def count(column: str | None = None) -> UnitValue:
    """Each unit's number of rows, or of non-null values of ``column``.

    Example:
        >>> import privframe as pf
        >>> pf.unit.count().kind
        'count'
    """
    return UnitValue("count", None if column is None else _one_column("count", column))


def mean(column: str) -> UnitValue:
    """Each unit's mean of the non-null values of ``column`` (a float).

    Example:
        >>> import privframe as pf
        >>> pf.unit.mean("amount").column
        'amount'
    """
    return UnitValue("mean", _one_column("mean", column))


def min(column: str) -> UnitValue:
    """Each unit's smallest non-null value of ``column``.

    Example:
        >>> import privframe as pf
        >>> pf.unit.min("date").kind
        'min'
    """
    return UnitValue("min", _one_column("min", column))


def max(column: str) -> UnitValue:
    """Each unit's largest non-null value of ``column``.

    Example:
        >>> import privframe as pf
        >>> pf.unit.max("date").kind
        'max'
    """
    return UnitValue("max", _one_column("max", column))


def n_unique(column: str) -> UnitValue:
    """How many distinct non-null values of ``column`` each unit has.

    Example:
        >>> import privframe as pf
        >>> pf.unit.n_unique("drug").kind
        'n_unique'
    """
    return UnitValue("n_unique", _one_column("n_unique", column))


def first(column: str, by: str) -> UnitValue:
    """Each unit's value of ``column`` at its smallest ``by`` (ties: a null, else the smallest).

    Example:
        >>> import privframe as pf
        >>> pf.unit.first("dx", by="date").by
        'date'
    """
    return UnitValue("first", _one_column("first", column), _one_column("first", by))


def last(column: str, by: str) -> UnitValue:
    """Each unit's value of ``column`` at its largest ``by`` (ties: the largest value).

    Example:
        >>> import privframe as pf
        >>> pf.unit.last("dx", by="date").kind
        'last'
    """
    return UnitValue("last", _one_column("last", column), _one_column("last", by))


def rank(by: str) -> UnitValue:
    """Each row's rank among its unit's rows by ``by``: 1 + rows strictly before it.

    Example:
        >>> import privframe as pf
        >>> pf.unit.rank("date").describe()
        "pf.unit.rank(by='date')"
    """
    return UnitValue("rank", None, _one_column("rank", by))
