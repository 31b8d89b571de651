"""BigQuery's public groups: ``RIGHT OUTER JOIN (SELECT DISTINCT g FROM ...) USING (g)``.

In BigQuery (``group_selection_strategy=PUBLIC_GROUPS``) such a join reports
exactly the listed groups, empty ones included, and drops the others: what
public keys do. So it joins nothing: the list is the public keys of the group
column ``g``. The list is a literal one (``FROM UNNEST(['a', 'b'])``) or the
distinct values of a column of a public table registered on the Session
(``FROM groups``, ``Session(tables={'groups': ...})``): public data, so the
keys cost no δ, and a listed group no row has is released as noise around 0.
A joined subquery that filters a private table is a private join
(:mod:`~privframe.api.sql.sources`); any other is refused.

Example:
    >>> import polars as pl
    >>> import sqlglot
    >>> from privframe.api.sql.listed import group_list
    >>> group_list(sqlglot.parse_one("SELECT DISTINCT g FROM UNNEST(['a', 'b', 'a'])"))
    ('g', ('a', 'b'))
    >>> groups = pl.DataFrame({"g": ["b", "a", "b"]})
    >>> group_list(sqlglot.parse_one("SELECT DISTINCT g FROM groups"), {"groups": groups})
    ('g', ('b', 'a'))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import polars as pl
from sqlglot import exp

from privframe.api.sql._common import (
    identifier,
    literal_value,
    lookup,
    refuse,
    resolve,
    unsupported,
)


class Listing(Protocol):
    """Where the listed groups go: :class:`~privframe.api.sql.scope.Scope` is one."""

    listed: dict[str, tuple[Any, ...]]  # the public keys of group columns, by column

    def private_columns(self) -> list[str]:
        """The columns of the rows FROM reads."""
        ...

    def public_tables(self) -> Mapping[str, pl.DataFrame]:
        """The public tables a query can read by name (not hidden by a WITH table)."""
        ...


def listed_groups(join: exp.Join, scope: Listing) -> None:
    """Read a RIGHT JOIN on a list of one column's values into ``scope.listed``.

    Raises:
        SQLError: the joined subquery is not such a list, or its public table's
            column has a NULL or (without DISTINCT) a value twice.
    """
    select = join.this.this
    groups = group_list(select, scope.public_tables()) if isinstance(select, exp.Select) else None
    side = (join.side or "").upper()
    using = [identifier(c)[0].casefold() for c in join.args.get("using") or []]
    if groups is None or side != "RIGHT" or using != [groups[0].casefold()]:
        raise unsupported(
            join.this,
            "a subquery in a JOIN",
            "join a public table registered on the Session (tables=) by name, or a private "
            "table, by name or as a subquery that filters it (JOIN (SELECT * FROM t WHERE "
            "...) x); BigQuery's public groups are written RIGHT OUTER JOIN (SELECT DISTINCT g "
            "FROM UNNEST([...])) USING (g) or RIGHT OUTER JOIN (SELECT DISTINCT g FROM "
            "<public table>) USING (g), or given as keys in metadata, e.g. "
            "metadata={'item': pf.Column(keys=['pen', 'pencil'])}",
        )
    column = resolve(join.args["using"][0], scope.private_columns(), "in the data")
    scope.listed[column] = groups[1]


def group_list(
    select: exp.Select, tables: Mapping[str, pl.DataFrame] | None = None
) -> tuple[str, tuple[Any, ...]] | None:
    """(column, values) of ``SELECT [DISTINCT] g FROM UNNEST([v, ...]) | <public table>``.

    None if ``select`` is neither. A public table's values are its column's
    distinct values, in the order they first appear.

    Raises:
        SQLError: the public table has no such column, its column has a NULL
            (BigQuery would report a group no row joins: filter the table), or
            a value twice without DISTINCT (BigQuery would report the group twice).
    """
    source = select.args.get("from_")
    read = source.this if source is not None else None
    if (
        set(k for k, v in select.args.items() if v) - {"expressions", "from_", "distinct"}
        or len(select.expressions) != 1
        or not isinstance(select.expressions[0], exp.Column)
    ):
        return None
    if isinstance(read, exp.Table) and tables:
        return _table_list(select, read, tables)
    if (
        not isinstance(read, exp.Unnest)
        or len(read.expressions) != 1
        or not isinstance(read.expressions[0], exp.Array)
    ):
        return None
    values = tuple(literal_value(v) for v in read.expressions[0].expressions)
    return select.expressions[0].name, tuple(dict.fromkeys(values))


def _table_list(
    select: exp.Select, read: exp.Table, tables: Mapping[str, pl.DataFrame]
) -> tuple[str, tuple[Any, ...]] | None:
    """(column, distinct values) of ``SELECT [DISTINCT] g FROM <public table>``, else None."""
    if set(k for k, v in read.args.items() if v) - {"this", "alias"}:
        return None
    found = lookup(*identifier(read), tables)
    if len(found) != 1:
        return None
    table = tables[found[0]]
    node = select.expressions[0]
    name = resolve(node, table.columns, f"in the public table {found[0]!r}")
    values = table.get_column(name)
    if values.null_count():
        raise refuse(
            select,
            "public groups",
            f"the public table {found[0]!r} has a NULL in {name!r}: BigQuery would report a "
            f"NULL group that no row joins. Filter the table before registering it "
            f"(e.g. tables={{{found[0]!r}: df.drop_nulls({name!r})}})",
        )
    distinct = tuple(dict.fromkeys(values.to_list()))
    if len(distinct) < len(values) and not select.args.get("distinct"):
        raise refuse(
            select,
            "public groups",
            f"the public table {found[0]!r} has a value of {name!r} twice, so joining it "
            f"would report that group twice: write SELECT DISTINCT {node.sql()} FROM "
            f"{read.sql()}",
        )
    return node.name, distinct
