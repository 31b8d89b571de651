"""The public facts about columns that the data cannot say: types, bounds, keys, candidates.

Bounds, keys and quantile grids come from the Session's ``metadata``
(``{"amount": pf.Column(bounds=(0, 1000))}``), keyed by column name, or by the
output alias for an aggregate of an expression; per-query ``metadata=``
entries override the session's. A column's ``type`` is the data owner's word
for how a CSV's text is read (:func:`declared_types`): types are public, so
they never come from the values.

Example:
    >>> import privframe as pf
    >>> from privframe.api.sql.metadata import entry
    >>> entry({"Amount": pf.Column(bounds=(0, 10))}, "amount").bounds
    (0, 10)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from privframe.api.sql._common import lookup
from privframe.engines.inputs import ColumnType
from privframe.errors import InvalidArgumentError, SQLError
from privframe.plan.aggregates.base import check_missing

TYPE_NAMES: dict[str, type[pl.DataType]] = {
    "int64": pl.Int64,
    "float64": pl.Float64,
    "string": pl.String,
    "bool": pl.Boolean,
    "date": pl.Date,
    "datetime": pl.Datetime,
}
"""The types a column may be declared as, by the names a spec or config gives them."""


@dataclass(frozen=True)
class Column:
    """Public facts about one column (or one aggregate's output) that SQL cannot say.

    Attributes:
        bounds: (lower, upper) clipping bounds for sums, means, variances and
            quantiles of this column.
        keys: the public keys when grouping by this column.
        candidates: the number of quantile candidates (default 1001).
        type: the column's type, declared by the data owner: a polars type
            or one of ``"int64"``, ``"float64"``, ``"string"``, ``"bool"``,
            ``"date"``, ``"datetime"`` (a datetime without time zone). A CSV's
            column is read as this type, each value that does not parse
            becoming null; an undeclared CSV column is String. Typed data
            (parquet, pandas, polars, Spark) must have this type. Read when
            the data opens, from the Session's metadata (a query's own
            ``metadata=`` cannot retype the data).
        missing: what a null or NaN value does in sums, means and variances of
            this column: ``"midpoint"`` (the default), ``"drop"`` or a number
            (:func:`privframe.mean`). Read where an aggregate is written
            without its own rule: SQL (in a session or through the server's
            dataset metadata) and report specs. A builder aggregate keeps its
            own ``missing=`` (default ``"midpoint"``, as in ``pf.mean("x",
            bounds=..., missing="drop")``), whatever the metadata says.

    Example:
        >>> import privframe as pf
        >>> pf.Column(bounds=(0, 1000)).bounds
        (0, 1000)
        >>> pf.Column(type="int64").type
        Int64
    """

    bounds: tuple[float, float] | None = None
    keys: tuple[Any, ...] | None = None
    candidates: int | None = None
    type: ColumnType | str | None = None
    missing: str | float | None = None

    def __post_init__(self) -> None:
        if self.type is not None:
            object.__setattr__(self, "type", column_type(self.type))
        if self.bounds is not None:
            if not isinstance(self.bounds, tuple | list) or len(self.bounds) != 2:
                raise InvalidArgumentError(
                    f"Column bounds must be a (lower, upper) pair, got {self.bounds!r}"
                )
            object.__setattr__(self, "bounds", tuple(self.bounds))
        if self.keys is not None:
            if isinstance(self.keys, str) or not isinstance(self.keys, Sequence):
                raise InvalidArgumentError(f"Column keys must be a list, got {self.keys!r}")
            object.__setattr__(self, "keys", tuple(self.keys))
        if self.missing is not None:
            object.__setattr__(self, "missing", check_missing("Column", self.missing))


def entry(metadata: Mapping[str, Column], name: str) -> Column | None:
    """The metadata entry of a column or alias: its exact key, else one equal but for case.

    Metadata keys are Python strings, but SQL users expect SQL's name rules.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.sql.metadata import entry
        >>> entry({"x": pf.Column(keys=["a"])}, "y") is None
        True
    """
    if name in metadata:
        return metadata[name]
    found = lookup(name, False, metadata)
    if len(found) > 1:
        raise SQLError(
            f"metadata has keys {found} that differ only in case, and the query names "
            f"{name!r}: give one key for it, spelt as the column or alias",
            construct="metadata",
        )
    return metadata[found[0]] if found else None


def column_type(given: object) -> ColumnType:
    """A declared column type as a polars type; a name from :data:`TYPE_NAMES` or a polars type.

    Only the types a CSV's text can be read as exactly are accepted: other
    types (``Int32``, ``Decimal``, ``List``, a datetime with a time zone) are
    refused by name, so that a declaration means one thing for every input.

    Raises:
        InvalidArgumentError: ``given`` is not one of those types.

    Example:
        >>> import polars as pl
        >>> from privframe.api.sql.metadata import column_type
        >>> column_type("Float64"), column_type(pl.Datetime("ms"))
        (Float64, Datetime(time_unit='ms', time_zone=None))
    """
    if isinstance(given, str):
        found = TYPE_NAMES.get(given.lower())
        if found is not None:
            return found
    elif isinstance(given, pl.DataType | type) and any(
        given == kind and (not isinstance(given, pl.Datetime) or given.time_zone is None)
        for kind in TYPE_NAMES.values()
    ):
        return given
    raise InvalidArgumentError(
        f"Column type {given!r} is not one a column may be declared as; give one of "
        f"{', '.join(map(repr, TYPE_NAMES))} (or the polars type, e.g. pl.Int64)"
    )


def declared_types(metadata: Mapping[str, Column]) -> dict[str, ColumnType]:
    """The declared types of the columns that have one, by column name, for the data's opener.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.sql.metadata import declared_types
        >>> declared_types({"amount": pf.Column(type="int64"), "region": pf.Column(keys=["n"])})
        {'amount': Int64}
    """
    return {
        name: column_type(column.type)
        for name, column in metadata.items()
        if column.type is not None
    }
