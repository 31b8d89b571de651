"""BigQuery's public groups: ``RIGHT OUTER JOIN (SELECT DISTINCT g FROM UNNEST([...])) USING (g)``.

In BigQuery (``group_selection_strategy=PUBLIC_GROUPS``) such a join reports
exactly the listed groups, empty ones included, and drops the others: what
public keys do. So it joins nothing: the list is the public keys of the group
column ``g``. A joined subquery that filters a private table is a private
join (:mod:`~privframe.api.sql.sources`); any other is refused.

Example:
    >>> import sqlglot
    >>> from privframe.api.sql.listed import group_list
    >>> group_list(sqlglot.parse_one("SELECT DISTINCT g FROM UNNEST(['a', 'b', 'a'])"))
    ('g', ('a', 'b'))
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlglot import exp

from privframe.api.sql._common import identifier, literal_value, resolve, unsupported


class Listing(Protocol):
    """Where the listed groups go: :class:`~privframe.api.sql.scope.Scope` is one."""

    listed: dict[str, tuple[Any, ...]]  # the public keys of group columns, by column

    def private_columns(self) -> list[str]:
        """The columns of the rows FROM reads."""
        ...


def listed_groups(join: exp.Join, scope: Listing) -> None:
    """Read a RIGHT JOIN on a literal list of one column's values into ``scope.listed``.

    Raises:
        SQLError: the joined subquery is not such a list.
    """
    select = join.this.this
    groups = group_list(select) if isinstance(select, exp.Select) else None
    side = (join.side or "").upper()
    using = [identifier(c)[0].casefold() for c in join.args.get("using") or []]
    if groups is None or side != "RIGHT" or using != [groups[0].casefold()]:
        raise unsupported(
            join.this,
            "a subquery in a JOIN",
            "join a public table registered on the Session (tables=) by name, or a private "
            "table, by name or as a subquery that filters it (JOIN (SELECT * FROM t WHERE "
            "...) x); BigQuery's public groups are written RIGHT OUTER JOIN (SELECT DISTINCT g "
            "FROM UNNEST([...])) USING (g), or given as keys in metadata, e.g. "
            "metadata={'item': pf.Column(keys=['pen', 'pencil'])}",
        )
    column = resolve(join.args["using"][0], scope.private_columns(), "in the data")
    scope.listed[column] = groups[1]


def group_list(select: exp.Select) -> tuple[str, tuple[Any, ...]] | None:
    """(column, values) of ``SELECT [DISTINCT] g FROM UNNEST([v, ...]) [AS g]``, else None."""
    source = select.args.get("from_")
    unnest = source.this if source is not None else None
    if (
        set(k for k, v in select.args.items() if v) - {"expressions", "from_", "distinct"}
        or len(select.expressions) != 1
        or not isinstance(select.expressions[0], exp.Column)
        or not isinstance(unnest, exp.Unnest)
        or len(unnest.expressions) != 1
        or not isinstance(unnest.expressions[0], exp.Array)
    ):
        return None
    values = tuple(literal_value(v) for v in unnest.expressions[0].expressions)
    return select.expressions[0].name, tuple(dict.fromkeys(values))
