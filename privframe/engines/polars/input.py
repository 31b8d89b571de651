"""Opening local data for the polars engine: pandas and polars frames, LazyFrames, files.

:func:`open_input` loads the input lazily, gives its columns plain types
(:func:`~privframe.engines.expressions.plain_types`), checks the privacy unit
column once, before any query (its outcome is one fixed fact about the
input), and returns the :class:`~privframe.engines.polars.engine.PolarsEngine`
over it. Errors never quote the data: a reader's message is withheld.

Types come from the data owner, never from the values: a CSV's columns,
and a pandas frame's object and category columns (other than the privacy
unit's), are read as text, and those the owner declared (``types``) are
parsed, row by row, a value that does not parse becoming null. Columns of
any other type keep the type their owner gave them.

Example:
    >>> import polars as pl
    >>> from privframe.engines.polars.input import open_input
    >>> opened = open_input(pl.DataFrame({"u": [1, 2], "x": [0.5, 1.5]}), "u")
    >>> opened.kind, opened.schema.names()
    ('polars', ['u', 'x'])
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
    >>> _ = path.write_text(chr(10).join(["u,x,y", "1,5,a", "2,n/a,b"]))
    >>> dict(open_input(path, "u", types={"x": pl.Int64}).schema)
    {'u': String, 'x': Int64, 'y': String}
    >>> import pandas as pd
    >>> mixed = pd.DataFrame({"u": [1, 2], "x": pd.Series([5, "n/a"], dtype=object)})
    >>> dict(open_input(mixed, "u").schema)
    {'u': Int64, 'x': String}
    >>> dict(open_input(mixed, "u", types={"x": pl.Int64}).schema)
    {'u': Int64, 'x': Int64}
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import pandas as pd
import polars as pl
from pyarrow import ArrowException

from privframe.engines.expressions import plain_types
from privframe.engines.inputs import (
    MISSING_UNITS,
    ColumnType,
    Opened,
    PanicException,
    check_declared_types,
    check_unit_column,
    exact_pandas,
)
from privframe.engines.polars.engine import PolarsEngine
from privframe.errors import InvalidArgumentError, InvalidValueError

__all__ = ["open_input"]

_T = TypeVar("_T")


def open_input(
    data: object,
    privacy_unit: str | None,
    results: str = "pandas",
    types: Mapping[str, ColumnType] | None = None,
) -> Opened:
    """A pandas or polars DataFrame, a LazyFrame or a .parquet/.csv path, opened for queries.

    Releases come back as the input's kind of frame (pandas for pandas,
    polars otherwise); ``results="spark"`` is refused, as the data is not
    on Spark. ``types`` are the column types the data owner declared: columns
    read as text (a CSV's; a pandas frame's object and category columns) are
    parsed as them (:func:`_typed`), and typed columns must have them.

    Raises:
        InvalidArgumentError: ``data`` is of no supported kind, or a pandas
            frame that does not convert.
        InvalidValueError: the file is missing, unreadable or malformed, the
            privacy unit column is missing, some rows have no unit, or a
            declared type is not the data's.
    """
    if results == "spark":
        raise InvalidValueError('results="spark" needs a Spark DataFrame as the data')
    types = dict(types or {})
    csv = isinstance(data, str | os.PathLike) and Path(data).suffix.lower() == ".csv"
    frame, kind, streaming, text = _load(data, privacy_unit)
    check_unit_column(privacy_unit, _read(frame.collect_schema))
    if csv:
        _check_csv(frame, privacy_unit)
    frame = _typed(frame, types, privacy_unit, text)
    plain = plain_types(frame, privacy_unit)
    schema = _read(plain.collect_schema)
    check_declared_types(types, schema)
    if privacy_unit is not None and not csv:
        _check_units(plain, privacy_unit, schema[privacy_unit])
    engine = PolarsEngine(plain, streaming=streaming, partitions=_partitions(data))
    return Opened(engine, schema, kind, exact_pandas if kind == "pandas" else _as_is)


def _as_is(result: pl.DataFrame) -> Any:
    return result


# A partition is bounded in memory: at this size its per-(unit, key) table stays small
# enough that the time per row does not grow with the file (benchmarks/bench_scale.py),
# and a release peaks near 1-2 GiB whatever the file's size.
_ROWS_PER_PARTITION = 12_500_000
_CSV_BYTES_PER_PARTITION = 1 << 29


def _partitions(data: object) -> int:
    """How many unit partitions a file input is aggregated in (in-memory data: one).

    Sized from the file (parquet metadata's row count, a CSV's bytes), so that
    the per-(unit, key) table of one partition fits in memory comfortably.
    The count only changes how the work is split, never the result.
    """
    if not isinstance(data, str | os.PathLike):
        return 1
    path = Path(data)
    if path.suffix.lower() == ".parquet":
        rows = _read(pl.scan_parquet(path).select(pl.len()).collect).item()
        return max(1, -(-rows // _ROWS_PER_PARTITION))
    return max(1, -(-path.stat().st_size // _CSV_BYTES_PER_PARTITION))


def _load(
    data: object, unit: str | None
) -> tuple[pl.LazyFrame, Literal["pandas", "polars"], bool, frozenset[str]]:
    """(frame, kind of DataFrame to return, whether to stream, columns read as text).

    A file's privacy unit column is read as the text it holds wherever the
    file stores it as text (a CSV column, a Hive partition directory's name):
    parsing would merge IDs written differently (``007`` and ``7`` are one
    integer, ``true`` and ``TRUE`` one boolean), and two people read as one
    unit would be bounded as one. A CSV is read as text throughout
    (:func:`_scan_csv`), a pandas frame's untyped columns too
    (:func:`_untyped_as_text`).
    """
    if isinstance(data, pd.DataFrame):
        frame, text = _untyped_as_text(data, unit)
        converted = _from_pandas(frame)
        if converted is None:
            # The converter's message can quote a data value: name the columns instead.
            bad = [str(c) for c in frame.columns if _from_pandas(frame[[c]]) is None]
            raise InvalidArgumentError(
                f"could not convert the pandas DataFrame: columns {bad} hold values of mixed "
                "or unsupported types; give each column one type (e.g. .astype(str))"
            )
        return converted.lazy(), "pandas", False, text
    if isinstance(data, pl.DataFrame):
        return data.lazy(), "polars", False, frozenset()
    if isinstance(data, pl.LazyFrame):
        return data, "polars", True, frozenset()
    if isinstance(data, str | os.PathLike):
        path = Path(data)
        if not path.exists():
            raise InvalidValueError(f"no data file at {str(path)!r}")
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            return _scan_parquet(path, unit), "polars", True, frozenset()
        if suffix == ".csv":
            csv = _scan_csv(path)
            return csv, "polars", True, frozenset(_read(csv.collect_schema).names())
        raise InvalidValueError(f"data files must be .parquet or .csv, got {path.name!r}")
    raise InvalidArgumentError(
        "data must be a pandas or polars DataFrame, a polars LazyFrame, or a .parquet/.csv "
        f"path; got {type(data).__name__}"
    )


def _scan_parquet(path: Path, unit: str | None) -> pl.LazyFrame:
    """A parquet file or Hive-partitioned directory; a unit in the directory names as text."""
    frame = pl.scan_parquet(path)
    if unit is None or not path.is_dir():
        return frame
    partitioned = _read(frame.collect_schema)
    stored = _read(lambda: pl.scan_parquet(path, hive_partitioning=False).collect_schema())
    hive = {c: t for c, t in partitioned.items() if c not in stored}
    if unit not in hive:
        return frame
    return pl.scan_parquet(path, hive_schema={**hive, unit: pl.String()})


def _scan_csv(path: Path) -> pl.LazyFrame:
    """A CSV file, every column read as text, each row on its own.

    Its types look at no value: a type inferred from the values would be
    chosen by one person's value (``n/a`` in an integer column makes it
    text), and types are public: they decide which queries are refused.
    The data owner declares the types (:func:`_typed`). A row's extra or
    missing fields and its bytes change that row alone: fields past the
    header's are dropped (too few are null), bytes that are not UTF-8 become
    U+FFFD. A quote is different: a field's quotes decide where rows end, so a
    quote the file does not close (a field opening one, or a stray ``"`` as in
    a height ``5'11"``) makes the whole file unreadable, and reading it around
    that row would move the fields of the rows after it, other people's
    values. Such a file is a format fault its owner must fix:
    :func:`_check_csv` refuses it when the data opens, before any query,
    which for a server is ``privframe serve`` starting, not an analyst's
    request.
    """
    return pl.scan_csv(path, infer_schema=False, truncate_ragged_lines=True, encoding="utf8-lossy")


_DATE = "%Y-%m-%d"
_DATETIME = "%Y-%m-%d %H:%M:%S%.f"


def _typed(
    frame: pl.LazyFrame, types: Mapping[str, ColumnType], unit: str | None, text: Collection[str]
) -> pl.LazyFrame:
    """``frame`` with its ``text`` columns parsed as declared: a value that does not parse is null.

    ``text`` are the columns read as text because their input gives them no
    type (a CSV's; a pandas frame's object and category columns). Each value
    is parsed alone, by a fixed rule that looks at no other value (integers
    and floats as polars reads them, ``true``/``false`` in any case, dates as
    ``YYYY-MM-DD``, datetimes as ``YYYY-MM-DD HH:MM:SS[.f]`` with ``T`` or a
    space between): a format guessed from the values would let one person's
    value decide how everyone else's is read. Other columns keep their type,
    which :func:`check_declared_types` compares with the declared one.

    A CSV's privacy unit column stays text: parsing would merge IDs written
    differently (``007`` and ``7`` are one integer), and two people read as
    one unit would be bounded as one.

    Raises:
        InvalidValueError: a CSV's unit column is declared another type than text.
    """
    if unit is not None and unit in text and types.get(unit, pl.String) != pl.String:
        raise InvalidValueError(
            f"metadata declares the privacy unit column {unit!r} as {types[unit]}, but a CSV's "
            "unit column is read as the text it holds, so that IDs written differently stay "
            "different people: declare no type for it (or 'string')"
        )
    parsed = []
    for name, declared in types.items():
        if name not in text:
            continue
        dtype = declared() if isinstance(declared, type) else declared
        column = pl.col(name)
        if isinstance(dtype, pl.Date):
            column = column.str.to_date(_DATE, strict=False)
        elif isinstance(dtype, pl.Datetime):
            column = column.str.replace("T", " ", literal=True).str.to_datetime(
                _DATETIME, time_unit=dtype.time_unit, strict=False
            )
        elif isinstance(dtype, pl.Boolean):
            column = column.str.to_lowercase().replace_strict(
                {"true": True, "false": False}, default=None, return_dtype=pl.Boolean
            )
        elif dtype != pl.String:
            column = column.cast(dtype, strict=False)
        parsed.append(column.alias(name))
    return frame.with_columns(parsed) if parsed else frame


def _check_csv(frame: pl.LazyFrame, unit: str | None) -> None:
    """Read every field of a CSV once, before any query: refuse it unreadable or missing units.

    polars parses only the columns a query reads: read in full once, a file
    that cannot be read (a quote never closed, :func:`_scan_csv`) fails here,
    as one fixed fact about the file, not for some queries only. The refusal
    goes to whoever opens the data, who holds the file: the data owner (a
    server opens its datasets as it starts, and stops if one fails), never
    an analyst who can only query it. The same read counts the unit column's
    nulls (read as text, a CSV unit has no NaN).
    """
    nulls = _read(frame.select(pl.all().null_count()).collect)
    if unit is not None and nulls[unit].item():
        raise InvalidValueError(MISSING_UNITS.format(unit=unit))


def _untyped_as_text(frame: pd.DataFrame, unit: str | None) -> tuple[pd.DataFrame, frozenset[str]]:
    """``frame`` with its object and category columns as text, and the names of those columns.

    An object column has no type: converted as is, its type would be inferred
    from the values (``12.5`` among integers makes it Float64, ``n/a`` makes
    it unreadable), and one person's value would decide what is published and
    refused. A category column's labels are typed by their values the same
    way (``astype("category")`` infers them). Both are read as each value's
    ``str()``, a missing value (None, NaN, ``pd.NA``, ``NaT``) as null, for
    :func:`_typed` to parse as declared, whatever any value is. The privacy
    unit column keeps its exact conversion (every distinct ID one unit).
    """
    untyped = [
        i
        for i, (name, dtype) in enumerate(frame.dtypes.items())
        if name != unit
        and (pd.api.types.is_object_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype))
    ]
    if not untyped:
        return frame, frozenset()
    frame = frame.copy(deep=False)
    for i in untyped:  # by position: a frame's column names need not be unique
        column = frame.iloc[:, i]
        text = [None if gone else str(v) for v, gone in zip(column, column.isna(), strict=True)]
        frame.isetitem(i, pd.Series(text, index=frame.index, dtype=pd.StringDtype()))
    return frame, frozenset(str(frame.columns[i]) for i in untyped)


def _from_pandas(frame: pd.DataFrame) -> pl.DataFrame | None:
    """``frame`` as polars, or None if it does not convert.

    None rather than the converter's error: its message (and so any error
    raised while handling it, through ``__context__``) can quote a value.
    """
    try:
        return pl.from_pandas(frame)
    except (
        TypeError,
        ValueError,
        OverflowError,
        pl.exceptions.PolarsError,
        ArrowException,
        PanicException,
    ):
        return None


def _check_units(frame: pl.LazyFrame, unit: str, dtype: pl.DataType) -> None:
    """Refuse null or NaN privacy-unit IDs: rows that identify nobody cannot be bounded.

    The check reads the whole unit column once, before any query, so its
    outcome is one fixed fact about the input that no filter can steer.
    Merging such rows into one unit, or dropping them silently, would be wrong.
    """
    column = pl.col(unit)
    missing = column.is_null() | column.is_nan() if dtype.is_float() else column.is_null()
    if _read(frame.select(missing.any()).collect).item():
        raise InvalidValueError(MISSING_UNITS.format(unit=unit))


def _read(read: Callable[[], _T]) -> _T:
    """``read()``, or an error naming only the kind of failure when the reader fails.

    The reader's message can quote a value from the file: it is withheld, and
    the error is raised outside the ``except`` block, so that the reader's
    error is not its ``__context__`` either. Any exception counts: a LazyFrame
    can run Python functions (``map_elements``) that raise their own.
    """
    failure = ""
    try:
        return read()
    except (Exception, PanicException) as err:
        failure = type(err).__name__
    raise InvalidValueError(_UNREADABLE.format(failure=failure))


_UNREADABLE = (
    "the data could not be read ({failure}; the message is withheld as it may quote private "
    "values): check the file's format and column types"
)
