"""Which engine runs an input: each engine says which inputs it takes and opens them.

The Session hands its data to :func:`open_input` and gets back an
:class:`~privframe.engines.inputs.Opened` (engine, schema, how to return
releases) from the first engine whose ``accepts`` takes the input; the
polars engine takes everything else (pandas and polars frames, LazyFrames,
parquet and CSV paths) and refuses, by type, what it cannot read. Adding an
engine is one :func:`register` call with its test and its opener.

Example:
    >>> import polars as pl
    >>> from privframe.engines.registry import engine_for, open_input
    >>> engine_for(pl.DataFrame({"u": [1]})).name
    'polars'
    >>> open_input(pl.DataFrame({"u": [1, 2]}), "u").kind
    'polars'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from privframe.engines.inputs import ColumnType, Opened
from privframe.engines.polars import input as polars_input
from privframe.engines.spark import input as spark_input
from privframe.engines.spark.frames import is_spark_frame

__all__ = ["EngineEntry", "engine_for", "open_input", "register", "unregister"]


@dataclass(frozen=True)
class EngineEntry:
    """An engine as the registry knows it.

    Attributes:
        name: a short name (``"polars"``, ``"spark"``).
        accepts: whether the engine takes an input (without importing optional
            dependencies: it is asked about every input).
        open: ``open(data, privacy_unit, results, types)``, the engine's opener;
            ``types`` are the column types the data owner declared (a mapping
            of column names to polars types): data whose types the engine
            would infer is read as them, typed data must have them
            (:func:`~privframe.engines.inputs.check_declared_types`).
    """

    name: str
    accepts: Callable[[object], bool]
    open: Callable[[object, str | None, str, Mapping[str, ColumnType]], Opened]


def _anything(data: object) -> bool:
    return True


_DEFAULT = EngineEntry("polars", _anything, polars_input.open_input)
_ENGINES: list[EngineEntry] = [EngineEntry("spark", is_spark_frame, spark_input.open_input)]


def register(entry: EngineEntry) -> None:
    """Add an engine, asked before the ones registered earlier (the polars engine last).

    Example:
        >>> from privframe.engines.registry import EngineEntry, engine_for, register
        >>> class Rows(list): pass
        >>> register(EngineEntry("rows", lambda d: isinstance(d, Rows), lambda d, u, r: None))
        >>> engine_for(Rows()).name
        'rows'
        >>> unregister("rows")
    """
    _ENGINES.insert(0, entry)


def unregister(name: str) -> None:
    """Remove the engines registered under ``name`` (the polars engine always stays).

    Example:
        >>> from privframe.engines.registry import unregister
        >>> unregister("no such engine")
    """
    _ENGINES[:] = [entry for entry in _ENGINES if entry.name != name]


def engine_for(data: object) -> EngineEntry:
    """The engine that takes ``data``: the first registered one that accepts it, else polars."""
    return next((entry for entry in _ENGINES if entry.accepts(data)), _DEFAULT)


def open_input(
    data: object,
    privacy_unit: str | None,
    *,
    results: str = "pandas",
    types: Mapping[str, ColumnType] | None = None,
) -> Opened:
    """``data`` opened by its engine (see the module doc), with the owner's declared ``types``.

    Raises:
        InvalidArgumentError: no engine takes ``data``, or its privacy unit
            column cannot identify units exactly.
        InvalidValueError: the engine refuses the data (unreadable, a
            missing privacy unit column, rows without a unit, a declared
            type the data does not have, ...).
    """
    return engine_for(data).open(data, privacy_unit, results, types or {})
