"""The Session's arguments, checked: privacy unit, SQL metadata, limits, table names.

Public names in a private module: :mod:`privframe.api.session` uses them.

Example:
    >>> from privframe.api._session_arguments import check_name
    >>> check_name("PUMS.PUMS")
    'PUMS.PUMS'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, cast

import polars as pl

from privframe.api.schema import public_table
from privframe.api.sql import TABLE, Column
from privframe.engines.spec import Engine
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.plan.ir import Bound


def check_privacy_unit(unit: object) -> None:
    """Refuse a privacy unit that is not one column's name (or None)."""
    if unit is not None and not isinstance(unit, str):
        several = isinstance(unit, list | tuple)
        raise InvalidArgumentError(
            "privacy_unit must be the name of one column (a string), or None when each row is "
            f"a different person; got {type(unit).__name__}"
            + (
                ". For a unit identified by several columns, make them one ID column first "
                "(their values joined with a separator, such as '|')"
                if several
                else ""
            )
        )


def check_metadata(metadata: object) -> dict[str, Column]:
    """The SQL metadata as a dict of ``pf.Column``, or InvalidArgumentError."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(
        isinstance(k, str) and isinstance(v, Column) for k, v in metadata.items()
    ):
        raise InvalidArgumentError(
            "metadata must map column names to pf.Column(...), e.g. "
            '{"amount": pf.Column(bounds=(0, 1000))}'
        )
    return dict(metadata)


def check_contributions(contributions: object) -> Bound | None:
    """The default contribution limits: a ``pf.Bound`` or None."""
    if contributions is not None and not isinstance(contributions, Bound):
        raise InvalidArgumentError(
            "contributions must be a pf.Bound(max_groups=..., max_rows_per_group=...), "
            f"got {type(contributions).__name__}"
        )
    return contributions


def check_name(name: object) -> str:
    """The private table's name in SQL: dotted parts, none empty or quoted."""
    if isinstance(name, str) and all(
        part.strip() and not set(part) & set('"`[]') for part in name.split(".")
    ):
        return name
    raise InvalidArgumentError(
        f"name is the private table's name in SQL, e.g. 'data' or 'PUMS.PUMS'; got {name!r}"
    )


def check_tables(tables: object, *private: str) -> dict[str, pl.DataFrame]:
    """The public tables, by a name no private table (``private``) takes."""
    if tables is None:
        return {}
    if not isinstance(tables, Mapping) or not all(isinstance(k, str) for k in tables):
        raise InvalidArgumentError("tables must map names to public DataFrames")
    # The whole name, or its last part: a qualifier (PUMS.age) names one table.
    taken = {n: p for p in private for n in (p.casefold(), p.split(".")[-1].casefold())}
    clash = next((name for name in tables if name.casefold() in taken), None)
    if clash is not None:
        raise InvalidValueError(
            f"{taken[clash.casefold()]!r} names the private table, and the public table "
            f"{clash!r} would take its name; give the public table another name"
        )
    checked = {}
    for name, frame in tables.items():
        try:
            checked[name] = public_table(frame)
        except InvalidArgumentError as err:
            raise InvalidArgumentError(f"tables[{name!r}]: {err}") from None
    return checked


def check_private_tables(data: object, name: str) -> dict[str, object]:
    """The private tables by name: ``data`` under ``name``, or a mapping of several.

    Raises:
        InvalidArgumentError: an empty mapping, a name that is not a table
            name, or ``name`` given with a mapping (its keys name the tables).
    """
    if not isinstance(data, Mapping):
        return {check_name(name): data}
    if name != TABLE:
        raise InvalidArgumentError(
            "name= names a session's one private table; several tables are named by the "
            "keys of data"
        )
    if not data:
        raise InvalidArgumentError("data maps no private table: give at least one")
    if not all(isinstance(key, str) for key in data):
        raise InvalidArgumentError("data maps table names (str) to private tables")
    folded = [key.casefold() for key in data]
    if len(set(folded)) != len(folded):
        raise InvalidValueError("two private tables have the same name (ignoring case)")
    return {check_name(key): source for key, source in data.items()}


def check_table_contributions(contributions: object, names: list[str]) -> dict[str, Bound]:
    """Per private table, its default contribution limits (one Bound: the first table's)."""
    if contributions is None or isinstance(contributions, Bound):
        bound = check_contributions(contributions)
        return {} if bound is None else {names[0]: bound}
    if not isinstance(contributions, Mapping):
        raise InvalidArgumentError(
            "contributions takes a pf.Bound, or a mapping of private table names to them"
        )
    unknown = sorted(str(k) for k in contributions if k not in names)
    if unknown:
        raise InvalidArgumentError(
            f"contributions takes a pf.Bound, or a mapping of private table names to them; it "
            f"names {unknown}, which are not private tables of the session ({names})"
        )
    checked = {}
    for table, bound in contributions.items():
        limits = check_contributions(bound)
        if limits is not None:
            checked[table] = limits
    return checked


def check_unit_types(unit: str | None, schemas: Mapping[str, pl.Schema]) -> None:
    """Refuse private tables whose unit columns differ in type: a person must match exactly.

    Raises:
        InvalidValueError: several tables without a privacy unit, or units of different types.
    """
    if unit is None:
        raise InvalidValueError(
            "several private tables need a privacy unit column: without one each row is a "
            "person, and no row of one table could be known to be the same person as a row "
            "of another"
        )
    types = {table: schema[unit] for table, schema in schemas.items()}
    if len(set(types.values())) > 1:
        listed = ", ".join(f"{table}: {dtype}" for table, dtype in types.items())
        raise InvalidValueError(
            f"the privacy unit column {unit!r} has different types in the private tables "
            f"({listed}); give it one type in every table (a lossy cast could merge people)"
        )


def identity_schema(schemas: Mapping[str, pl.Schema]) -> dict[str, object]:
    """The columns a ledger records: one table's as they are, several as ``table.column``."""
    if len(schemas) == 1:
        return dict(next(iter(schemas.values())))
    return {f"{table}.{c}": t for table, schema in schemas.items() for c, t in schema.items()}


class Joinable(Protocol):
    """An engine that can read a session's other private tables."""

    def with_tables(self, tables: Mapping[str, object]) -> Engine:
        """This engine, reading ``tables`` (engines of the same kind) by name."""
        ...


def joinable(engine: object) -> Joinable:
    """``engine`` if it reads several private tables, else a clear refusal."""
    if not hasattr(engine, "with_tables"):
        raise InvalidArgumentError(
            f"this data's engine ({type(engine).__name__}) reads one private table per session"
        )
    return cast(Joinable, engine)
