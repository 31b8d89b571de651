"""Public group keys: the groups a release reports, fixed before the data is looked at.

A key set is public: it comes from the analyst (a list, a DataFrame of key
rows, a product of per-column lists), never from the private data. Every key
in it gets a row in the output, with a noisy zero when no data has that key;
rows whose key is not in it are dropped before contribution bounding.

Example:
    >>> import privframe as pf
    >>> keys = pf.keys.product(region=["north", "south"], month=[1, 2])
    >>> keys.columns, len(keys)
    (('region', 'month'), 4)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import polars as pl
from pyarrow import ArrowException

from privframe.errors import InvalidArgumentError, InvalidValueError

__all__ = ["KeySet", "exact_keys", "from_dataframe", "from_list", "product"]


class KeySet:
    """An ordered set of distinct public key rows over one or more columns (no null, no NaN).

    Build one with :func:`from_list`, :func:`from_dataframe` or
    :func:`product`; ``group_by(..., keys=...)`` also accepts a list or a
    DataFrame directly.

    Example:
        >>> import privframe as pf
        >>> pf.keys.from_list("region", ["north", "south"]).to_polars().height
        2
    """

    __slots__ = ("_frame",)

    def __init__(self, frame: pl.DataFrame) -> None:
        if frame.width == 0:
            raise InvalidValueError("a key set needs at least one column")
        if frame.height == 0:
            raise InvalidValueError(
                f"public keys over {frame.columns} are empty; list at least one key to report"
            )
        for name in frame.columns:
            if frame[name].null_count():
                raise InvalidValueError(
                    f"public keys of column {name!r} contain null; nulls cannot be public keys "
                    "(rows with a null key are dropped). Fill them with a value first."
                )
            if frame.schema[name].is_float() and frame[name].is_nan().any():
                # NaN means "missing" to pandas users, and a pandas input's NaN becomes a null,
                # whose rows are dropped: a NaN key would spend budget on a group of pure noise.
                raise InvalidValueError(
                    f"public keys of column {name!r} contain NaN; NaN cannot be a public key, "
                    "as null cannot (both stand for a missing value). Remove it from the keys, "
                    "or give such rows a value with with_columns(...) and list that value."
                )
        if frame.is_duplicated().any():
            raise InvalidValueError(f"public keys over {frame.columns} contain duplicate rows")
        self._frame = frame

    @property
    def columns(self) -> tuple[str, ...]:
        """The key columns, in order."""
        return tuple(self._frame.columns)

    def __len__(self) -> int:
        return self._frame.height

    def to_polars(self) -> pl.DataFrame:
        """The key rows as a polars DataFrame, in the order releases report them."""
        return self._frame

    def __repr__(self) -> str:
        return f"KeySet(columns={self.columns!r}, size={len(self)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeySet) and self._frame.equals(other._frame)

    def __hash__(self) -> int:
        return hash((self.columns, len(self)))


def from_list(column: str, values: Iterable[Any]) -> KeySet:
    """Public keys of one column.

    Example:
        >>> import privframe as pf
        >>> pf.keys.from_list("region", ["north", "south"]).columns
        ('region',)
    """
    if not isinstance(column, str):
        raise InvalidArgumentError(f"key column must be a string, got {column!r}")
    if isinstance(values, str | bytes | set | frozenset | Mapping):
        raise InvalidArgumentError(
            f"keys for {column!r} must be an ordered list of values (the output follows "
            f"its order), got {type(values).__name__}"
        )
    listed = list(values)
    try:
        frame = pl.DataFrame({column: listed}, strict=True)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        frame = None
    if frame is None:
        kinds = sorted({type(v).__name__ for v in listed})
        raise InvalidArgumentError(
            f"keys for {column!r} must be values of one type (all strings, all integers, all "
            f"floats, all dates, ...); got {', '.join(kinds)}"
        )
    return KeySet(frame)


def from_dataframe(frame: pl.DataFrame | pd.DataFrame) -> KeySet:
    """Public keys given as the rows of a (pandas or polars) DataFrame.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> len(pf.keys.from_dataframe(pl.DataFrame({"a": [1, 2], "b": ["x", "y"]})))
        2
    """
    if isinstance(frame, pd.DataFrame):
        frame = _from_pandas(frame)
    if not isinstance(frame, pl.DataFrame):
        raise InvalidArgumentError(
            f"keys must be a list or a pandas/polars DataFrame, got {type(frame).__name__}"
        )
    return KeySet(frame)


def _from_pandas(frame: pd.DataFrame) -> pl.DataFrame:
    """Public keys from pandas; a column of mixed types is refused as from_list refuses it."""
    try:
        return pl.from_pandas(frame)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError, ArrowException):
        pass
    mixed = [str(c) for c in frame.columns if len({type(v) for v in frame[c]}) > 1]
    raise InvalidArgumentError(
        f"keys must give each column values of one type; columns {mixed or list(frame.columns)} "
        "do not (convert them, e.g. with .astype(str))"
    )


def product(**columns: Sequence[Any]) -> KeySet:
    """Every combination of per-column public values (the cross product).

    Example:
        >>> import privframe as pf
        >>> pf.keys.product(region=["n", "s"], month=[1, 2, 3]).to_polars().height
        6
    """
    if not columns:
        raise InvalidValueError("product() needs at least one column of keys")
    for name, values in columns.items():
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise InvalidArgumentError(f"keys for {name!r} must be a list of values")
    # Each column's keys as from_list takes them (one type, none coerced), then every
    # combination in order: the first column varies slowest.
    frames = [from_list(name, values).to_polars() for name, values in columns.items()]
    return KeySet(functools.reduce(lambda a, b: a.join(b, how="cross"), frames))


def as_keyset(keys: object, columns: Sequence[str]) -> KeySet:
    """Coerce what ``group_by(..., keys=...)`` accepts into a KeySet over some of ``columns``.

    The keys may name every group column or only some of them: the group
    columns they leave out are chosen privately (partition selection, which
    spends δ), and each chosen combination gets every public key. The result's
    columns follow ``columns``' order.

    Example:
        >>> import privframe as pf
        >>> from privframe.plan.keys import as_keyset
        >>> as_keyset(pf.keys.product(region=["n", "s"]), ["month", "region"]).columns
        ('region',)
    """
    if isinstance(keys, KeySet):
        keyset = keys
    elif isinstance(keys, pl.DataFrame | pd.DataFrame):
        keyset = from_dataframe(keys)
    elif len(columns) == 1 and isinstance(keys, Iterable) and not isinstance(keys, str | bytes):
        keyset = from_list(columns[0], keys)
    else:
        raise InvalidArgumentError(
            "keys must be a KeySet, a DataFrame of key rows, or (for one column) a list; "
            f"got {type(keys).__name__}"
        )
    extra = [c for c in keyset.columns if c not in columns]
    if extra:
        raise InvalidValueError(
            f"keys cover columns {list(keyset.columns)} but group_by names {list(columns)}: "
            f"{extra} are not group columns"
        )
    return KeySet(keyset.to_polars().select([c for c in columns if c in keyset.columns]))


def _family(dtype: pl.DataType) -> str:
    if dtype.is_numeric():
        return "numeric"
    if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum | pl.Categorical):
        return "string"
    if dtype.is_temporal():
        return "temporal"
    return str(dtype)


def exact_keys(keys: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """The public keys cast to their columns' types, refused unless every key survives exactly.

    Matching casts the keys, never the data, so no two values of the column
    can merge. A key the column's type cannot hold, or holds only as another
    value (``2**53 + 1`` as a Float64 is ``2**53``), is refused: two keys that
    became one would put one row in two groups, a release whose sensitivity is
    not what was planned. The round trip (key → column type → key type) being
    the identity makes the cast injective; uniqueness is checked again after it.

    Raises:
        InvalidArgumentError: a key's type cannot match its column, or a key
            does not survive the cast exactly.

    Example:
        >>> import polars as pl
        >>> from privframe.plan.keys import exact_keys
        >>> exact_keys(pl.DataFrame({"g": [1, 2]}), pl.Schema({"g": pl.Float64}))["g"].to_list()
        [1.0, 2.0]
        >>> from privframe.errors import InvalidArgumentError
        >>> try:
        ...     exact_keys(pl.DataFrame({"g": [2**53, 2**53 + 1]}), pl.Schema({"g": pl.Float64}))
        ... except InvalidArgumentError as err:
        ...     print(str(err)[:70])
        group_by column 'g' has type Float64, and the public key 9007199254740
    """
    converted = []
    for column in keys.columns:
        source, target = keys.schema[column], schema[column]
        if _family(source) != _family(target):
            raise InvalidArgumentError(
                f"group_by column {column!r}: keys of type {source} cannot match a column of "
                f"type {target}: give keys of the column's type (or declare the column's type "
                "with pf.Column(type=...) where the data is a CSV)"
            )
        values = keys[column]
        if source == target:
            converted.append(values)  # no cast: the KeySet's distinct keys stay distinct
            continue
        cast = values.cast(target, strict=False)
        lost = cast.is_null() | cast.cast(source, strict=False).ne_missing(values)
        if lost.any():
            index = lost.arg_true()[0]
            key, became = values[index], cast[index]
            what = (
                "does not fit that type, so it could never match a row"
                if became is None
                else f"is not exactly a value of that type: it would be read as {became!r}, "
                "which other keys and values can share, putting one row in two groups"
            )
            raise InvalidArgumentError(
                f"group_by column {column!r} has type {target}, and the public key {key!r} "
                f"{what}. Give keys that are exact values of the column's type"
            )
        converted.append(cast)
    exact = pl.DataFrame(converted)
    if exact.schema != keys.schema and exact.is_duplicated().any():
        raise InvalidArgumentError(
            f"public keys over {keys.columns} repeat after taking their columns' types"
        )
    return exact
