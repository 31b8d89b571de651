"""The select list: group columns, and aggregates (translated by :mod:`~privframe.api.sql.calls`).

Example:
    >>> import sqlglot
    >>> import privframe as pf
    >>> from privframe.api.sql.scope import Scope
    >>> from privframe.api.sql.select_list import select_items
    >>> text = "SELECT STDEV(x) AS s, COUNT(*) FROM data"
    >>> scope = Scope(text, ["x"], {}, {"x": pf.Column(bounds=(0, 1))})
    >>> [item.aggregate for item in select_items(sqlglot.parse_one(text), {}, scope, None)]
    [Std(name='s', column='x', lower=0.0, upper=1.0), Count(name=None)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from privframe.api.sql import calls
from privframe.api.sql._common import refuse, unsupported
from privframe.api.sql.scope import Scope
from privframe.plan.aggregates import Aggregate


@dataclass(frozen=True)
class Item:
    """One select-list item: a group column or an aggregate, with its output name."""

    name: str
    node: exp.Expr  # the item without its alias
    aggregate: Aggregate | None
    group: str | None = None  # for a group column: the name the release gives it


def select_items(
    select: exp.Select, groups: Mapping[str, exp.Expr], scope: Scope, unit: str | None
) -> list[Item]:
    """The select list's items, each a group column or an aggregate; ``unit`` is the privacy unit.

    Raises:
        SQLError: an item is neither, or two items would have one output name.
    """
    items = []
    for item in select.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        node = item.this if isinstance(item, exp.Alias) else item
        group = _group_name(node, groups, scope)
        if group is not None:
            items.append(Item(alias or group, node, None, group))
            continue
        aggregate_call = isinstance(node, exp.AggFunc | exp.WithinGroup)
        if not aggregate_call and node.find(exp.AggFunc) is not None:
            raise unsupported(
                node,
                "arithmetic on aggregates",
                "select the aggregates separately and combine the released columns",
            )
        if not isinstance(node, exp.AggFunc | exp.WithinGroup | exp.Anonymous):
            raise unsupported(
                node,
                f"the column {node.sql()} outside GROUP BY and outside an aggregate",
                "group by it or aggregate it",
            )
        aggregate = calls.aggregate(node, alias, scope, unit)
        items.append(Item(aggregate.output_name, node, aggregate))
    names = [item.name for item in items]
    for item in items:
        if names.count(item.name) > 1:
            raise refuse(
                item.node,
                "duplicate output",
                f"two select-list items would both be called {item.name!r}; alias one",
            )
    return items


def _group_name(node: exp.Expr, groups: Mapping[str, exp.Expr], scope: Scope) -> str | None:
    if not groups:
        return None
    plain = scope.canonical(node)
    return next((name for name, expr in groups.items() if plain == expr), None)
