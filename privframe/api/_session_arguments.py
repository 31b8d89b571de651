"""The Session's arguments, checked: privacy unit, SQL metadata, limits, table names.

Public names in a private module: :mod:`privframe.api.session` uses them.

Example:
    >>> from privframe.api._session_arguments import check_name
    >>> check_name("PUMS.PUMS")
    'PUMS.PUMS'
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from privframe.api.schema import public_table
from privframe.api.sql import Column
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


def check_tables(tables: object, private: str) -> dict[str, pl.DataFrame]:
    """The public tables, by a name the private table (``private``) does not take."""
    if tables is None:
        return {}
    if not isinstance(tables, Mapping) or not all(isinstance(k, str) for k in tables):
        raise InvalidArgumentError("tables must map names to public DataFrames")
    # The whole name, or its last part: a qualifier (PUMS.age) names one table.
    taken = {private.casefold(), private.split(".")[-1].casefold()}
    if any(name.casefold() in taken for name in tables):
        raise InvalidValueError(
            f"{private!r} names the private table; give the public table another name"
        )
    checked = {}
    for name, frame in tables.items():
        try:
            checked[name] = public_table(frame)
        except InvalidArgumentError as err:
            raise InvalidArgumentError(f"tables[{name!r}]: {err}") from None
    return checked
