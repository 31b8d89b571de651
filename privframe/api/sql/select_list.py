"""The select list: group columns, aggregates (:mod:`~privframe.api.sql.calls`) and expressions.

An expression over aggregates and group columns (``SUM(a) / COUNT(*)``,
``ROUND(AVG(x), 1)``, ``age * 1000``, ``3``) is post-processing: each
aggregate call in it is measured once, as a *hidden* item (released to the
post-processing, never returned), unless an aggregate with the same SQL is
already measured, which it then shares. An aggregate in HAVING or ORDER BY
that the select list lacks is measured the same way: it takes a share of the
budget, and ``explain`` lists it, as SmartNoise does. An aggregate call inside
another is refused (it would aggregate private rows twice).

Names: an item's alias; a group column's name; an aggregate's default name
(``x_mean``, ``count``); an expression without an alias, or an aggregate of
one (``SUM(x * 2, 0, 200)``), is called ``f0_``, ``f1_``, ... in order, as
BigQuery names them. A hidden aggregate has its
default name, with ``_2``, ``_3``, ... when that is taken.

Example:
    >>> import sqlglot
    >>> import privframe as pf
    >>> from privframe.api.sql.scope import Scope
    >>> from privframe.api.sql.select_list import select_items
    >>> text = "SELECT STDEV(x) AS s, SUM(x) / COUNT(*) FROM data"
    >>> scope = Scope(text, ["x"], {}, {"x": pf.Column(bounds=(0, 1))})
    >>> [(i.name, i.hidden) for i in select_items(sqlglot.parse_one(text), {}, scope, None)]
    [('s', False), ('f0_', False), ('x_sum', True), ('count', True)]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sqlglot import exp

from privframe.api.sql import calls
from privframe.api.sql._common import refuse, unsupported
from privframe.api.sql.released import (
    aggregate_calls,
    is_aggregate_call,
    refuse_nested,
    unwrapped,
)
from privframe.api.sql.scope import Scope
from privframe.plan.aggregates import Aggregate
from privframe.plan.aggregates.per_unit import PerUnitBounded


@dataclass(frozen=True)
class Item:
    """One released column: a group column, an aggregate, or an expression over them.

    An expression item has neither ``aggregate`` nor ``group``; a ``hidden``
    item is an aggregate measured for an expression, HAVING or ORDER BY only.
    """

    name: str
    node: exp.Expr  # the item without its alias and outer parentheses
    aggregate: Aggregate | PerUnitBounded | None
    group: str | None = None  # for a group column: the name the release gives it
    hidden: bool = False


def select_items(
    select: exp.Select, groups: Mapping[str, exp.Expr], scope: Scope, unit: str | None
) -> list[Item]:
    """The select list's items, then the hidden aggregates; ``unit`` is the privacy unit.

    Raises:
        SQLError: an item reads a column outside GROUP BY and outside an
            aggregate, nests aggregates, or two items would have one output name.
    """
    items: list[Item] = []
    unnamed = 0
    for item in select.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        node = calls.quantile_list(unwrapped(item.this if isinstance(item, exp.Alias) else item))
        group = _group_name(node, groups, scope)
        if group is not None:
            items.append(Item(alias or group, node, None, group))
        elif is_aggregate_call(node):
            refuse_nested(node)
            aggregate = calls.aggregate(node, alias, scope, unit, f"f{unnamed}_")
            items.append(Item(aggregate.output_name, node, aggregate))
            unnamed += alias is None and calls.of_expression(node)
        else:
            _refuse_ungrouped(node, groups, scope)
            items.append(Item(alias or f"f{unnamed}_", node, None))
            unnamed += alias is None
    seen: set[str] = set()
    for item, written in zip(items, select.expressions, strict=True):
        if item.name in seen:  # located at the second of the two: the one to rename
            raise refuse(
                named_at(written),
                "duplicate output",
                f"two select-list items would both be called {item.name!r}; give this one "
                "another alias",
            )
        seen.add(item.name)
    return [*items, *_hidden(select, items, groups, scope, unit)]


def _hidden(
    select: exp.Select,
    items: list[Item],
    groups: Mapping[str, exp.Expr],
    scope: Scope,
    unit: str | None,
) -> list[Item]:
    """The aggregates that expressions, HAVING and ORDER BY read and the select list lacks."""
    measured = {scope.canonical(i.node).sql() for i in items if i.aggregate is not None}
    taken = {i.name for i in items} | set(groups)
    wanted = [c for i in items if _is_expression(i) for c in aggregate_calls(i.node)]
    having, order = select.args.get("having"), select.args.get("order")
    if having is not None:
        wanted += aggregate_calls(having.this)
    for ordered in order.expressions if order is not None else []:
        wanted += aggregate_calls(ordered)
    hidden = []
    for call in wanted:
        sql = scope.canonical(call).sql()
        if sql in measured:
            continue
        refuse_nested(call)
        aggregate = calls.aggregate(call, None, scope, unit)
        name, n = aggregate.output_name, 1
        while name in taken:
            n += 1
            name = f"{aggregate.output_name}_{n}"
        measured.add(sql)
        taken.add(name)
        hidden.append(Item(name, call, aggregate.alias(name), hidden=True))
    return hidden


def _is_expression(item: Item) -> bool:
    return item.aggregate is None and item.group is None


def _refuse_ungrouped(node: exp.Expr, groups: Mapping[str, exp.Expr], scope: Scope) -> None:
    """Refuse a column of an expression item that is outside GROUP BY and every aggregate."""
    for column in _outside_calls(node):
        if isinstance(column, exp.Column) and _group_name(column, groups, scope) is None:
            raise unsupported(
                column,
                f"the column {column.sql()} outside GROUP BY and outside an aggregate",
                "group by it or aggregate it",
            )


def _outside_calls(node: exp.Expr) -> Iterator[exp.Expr]:
    """The nodes of ``node`` that are not inside an aggregate call."""
    stack = [node]
    while stack:
        current = stack.pop()
        if not is_aggregate_call(current):
            yield current
            stack.extend(current.iter_expressions())


def _group_name(node: exp.Expr, groups: Mapping[str, exp.Expr], scope: Scope) -> str | None:
    if not groups:
        return None
    plain = scope.canonical(node)
    return next((name for name, expr in groups.items() if plain == expr), None)


def named_at(item: exp.Expr) -> exp.Expr:
    """Where a select-list item's output name is written: its alias, else the item.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.select_list import named_at
        >>> named_at(sqlglot.parse_one("SELECT COUNT(*) AS n").expressions[0]).sql()
        'n'
    """
    alias = item.args.get("alias") if isinstance(item, exp.Alias) else None
    return alias if alias is not None else item
