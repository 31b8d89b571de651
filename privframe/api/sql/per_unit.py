"""A subquery grouped by the privacy unit: the per-person stage of a two-stage aggregation.

``FROM (SELECT uid, region, SUM(amount) AS total FROM orders GROUP BY uid,
region)`` is the builder's ``per_unit("region", total=pf.unit.sum("amount"))``:
one row per person and region with the person's exact total, which the outer
query then aggregates privately (``AVG(total)`` by region, its bounds from
metadata or the call, as for any column). Each per-person value reads one
person's rows only, so removing a person changes only that person's rows; a
person has one row per combination of the GROUP BY columns, so grouping the
outer query by all of them makes ``m = 1`` (and ``GROUP BY uid`` alone,
``M = 1``), which the planner derives.

The inner ``GROUP BY`` must include the privacy unit: grouped otherwise, the
subquery would aggregate several people's rows with no noise. Its select list
has GROUP BY columns (a new name, ``region AS r``, is the column copied
before the stage) and named aggregates of columns: ``SUM``, ``COUNT(*)``,
``COUNT(col)``, ``AVG``/``MEAN``, ``MIN``, ``MAX`` and ``COUNT(DISTINCT col)``
(:mod:`privframe.engines.unit_values` states their exact rules: NaN counts
as NULL, an integer total beyond 64 bits is NULL). Its WHERE filters the rows
before the stage.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> df = pl.DataFrame({"u": [1, 1, 2], "r": ["n", "n", "s"], "x": [1.0, 2.0, 3.0]})
    >>> sess = pf.Session(df, "u", pf.zCDP(1.0), contributions=pf.Bound(max_groups=1),
    ...     metadata={"r": pf.Column(keys=["n", "s"]), "total": pf.Column(bounds=(0, 10))})
    >>> q = sess.sql("SELECT r, AVG(total) FROM (SELECT u, r, SUM(x) AS total FROM data "
    ...              "GROUP BY u, r) GROUP BY r")
    >>> step = q.query.plan.steps[0]
    >>> step.by, step.values
    (('r',), (('total', UnitValue(kind='sum', column='x', by=None)),))
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
from sqlglot import exp

from privframe.api.query import Query
from privframe.api.sql._common import (
    builder_refusal,
    lookup,
    only,
    position_number,
    refuse,
    unsupported,
    written,
)
from privframe.api.sql.dialect import Clamped
from privframe.api.sql.released import is_aggregate_call
from privframe.api.sql.sources import Names
from privframe.engines import unit_values
from privframe.engines.unit_values import UnitValue
from privframe.errors import SQLError

FUNCTIONS = "SUM, COUNT(*), COUNT(col), AVG, MIN, MAX and COUNT(DISTINCT col)"
"""The aggregates a per-person stage takes, for the messages that refuse another."""

_VALUES: dict[type[exp.Expr], Callable[[str], UnitValue]] = {
    exp.Sum: unit_values.sum,
    exp.Avg: unit_values.mean,
    exp.Min: unit_values.min,
    exp.Max: unit_values.max,
}


def aggregates(select: exp.Select) -> bool:
    """Whether a subquery aggregates: it has a GROUP BY, HAVING or an aggregate in its select list.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.per_unit import aggregates
        >>> aggregates(sqlglot.parse_one("SELECT u, SUM(x) AS t FROM data GROUP BY u"))
        True
    """
    if select.args.get("group") is not None or select.args.get("having") is not None:
        return True
    return any(node.find(exp.AggFunc) is not None for node in select.expressions)


def per_unit(
    inner: exp.Select, sub: Names, query: Query, taken: Callable[[str], bool]
) -> tuple[Query, list[tuple[str, str | None]]]:
    """``query`` (the subquery's rows, filtered) with the per-person stage of ``inner``.

    Returns the query and the subquery's columns in select-list order, each
    with the column it copies (its metadata), or None for a per-person value.
    ``taken(name)`` says whether a new name would replace a column.

    Raises:
        SQLError: the GROUP BY leaves out the privacy unit, an item is neither
            a GROUP BY column nor a named aggregate of a column, or an aggregate
            is not one the stage takes; nothing is charged.
    """
    unit = sub.private.unit
    having = inner.args.get("having")
    if having is not None:
        raise unsupported(
            having,
            "HAVING in a per-person subquery",
            "filter the per-person values in the outer query's WHERE (WHERE total > 10)",
        )
    group = inner.args.get("group")
    grouped = _grouped(inner, sub) if group is not None else []
    if unit is None or unit not in grouped:
        raise _without_unit(inner, unit)
    by: dict[str, None] = {}
    copies: dict[str, pl.Expr] = {}
    values: dict[str, UnitValue] = {}
    columns: list[tuple[str, str | None]] = []
    for item in inner.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column):
            column = sub.column(node)
            if column not in grouped:
                raise unsupported(
                    node,
                    f"the column {node.sql()} outside GROUP BY and outside an aggregate",
                    "group the per-person subquery by it, or aggregate it",
                )
            name = alias or column
            if column == unit and name != unit:
                raise refuse(item, "a subquery", f"the privacy unit keeps its name: write {unit}")
            if name != column:
                if taken(name):
                    raise shadowing(item, name)
                copies[name] = pl.col(column)
            if name != unit:
                by[name] = None
            columns.append((name, column))
        elif is_aggregate_call(node):
            if alias is None:
                raise refuse(
                    node,
                    "a subquery",
                    f"name the per-person value {node.sql()} (AS name): the outer query "
                    "reads it by that name",
                )
            if taken(alias):
                raise shadowing(item, alias)
            values[alias] = _value(node, sub)
            columns.append((alias, None))
        else:
            inside = node.find(exp.AggFunc)
            raise unsupported(
                node,
                f"{node.sql()} in a per-person subquery",
                f"compute it over {inside.sql()} in the outer query"
                if inside is not None
                else "its select list has GROUP BY columns and named aggregates of columns; "
                "compute expressions in the outer query, or in a subquery it reads",
            )
        if lookup(columns[-1][0], False, [n for n, _ in columns[:-1]]):
            raise refuse(item, "a subquery", f"two of its columns are called {columns[-1][0]!r}")
    for column in grouped:
        if column != unit and column not in by and all(c != column for _, c in columns):
            by[column] = None  # grouped by, not selected: still one row per person and value
    if copies:
        query = query.with_columns(**copies)
    staged = builder_refusal(
        lambda: query.per_unit(*by, **values),
        "the per-person subquery cannot be built",
        group if group is not None else inner,
        "GROUP BY",
    )
    return staged, columns


def _grouped(inner: exp.Select, sub: Names) -> list[str]:
    """The columns the GROUP BY names, in its order."""
    group = inner.args["group"]
    only(group, {"expressions"}, "GROUP BY")
    found: list[str] = []
    for item in group.expressions:
        node = item
        if isinstance(node, exp.Literal) and not node.is_string:
            index = position_number(node, "GROUP BY")
            if not 1 <= index <= len(inner.expressions):
                raise unsupported(node, f"GROUP BY {index}", "no such select-list position")
            node = inner.expressions[index - 1]
            node = node.this if isinstance(node, exp.Alias) else node
        if not isinstance(node, exp.Column):
            raise unsupported(
                item,
                f"GROUP BY {item.sql()} in a per-person subquery",
                "group it by columns; compute a derived column in a subquery it reads first",
            )
        found.append(sub.column(node))
    return found


def _without_unit(inner: exp.Select, unit: str | None) -> SQLError:
    """The refusal of a subquery that aggregates other than per person."""
    calls = [n for item in inner.expressions for n in item.find_all(exp.AggFunc)]
    node = calls[0] if calls else inner.args.get("group") or inner
    if unit is None:
        hint = (
            "a subquery aggregates per person only, and this session has no privacy unit "
            "(each row is a person)"
        )
    else:
        hint = (
            "it would aggregate or combine private rows of several people before the "
            f"release. A subquery may aggregate each person's rows: group it by the privacy "
            f"unit {unit!r} as well (GROUP BY {unit}, ...), the per-person stage; or only "
            "filter rows (WHERE) and compute row expressions"
        )
    what = node.sql() if calls else "GROUP BY"
    return unsupported(node, f"{what} inside a subquery or WITH", hint)


def _value(node: exp.Expr, sub: Names) -> UnitValue:
    """The per-person value of an aggregate call of the inner select list."""
    make: Callable[[str], UnitValue] | None
    if isinstance(node, exp.Anonymous):
        argument = node.expressions[0] if len(node.expressions) == 1 else None
        make = unit_values.mean if node.name.upper() == "MEAN" and argument else None
    elif node.args.get("expressions"):  # MIN(a, b), ...: more than one argument
        argument, make = None, None
    elif isinstance(node, exp.Count):
        argument = node.this
        if isinstance(argument, exp.Star):
            return unit_values.count()
        distinct = isinstance(argument, exp.Distinct)
        if distinct:
            inner = argument.expressions
            argument = inner[0] if len(inner) == 1 else None
        make = unit_values.n_unique if distinct else unit_values.count
    else:
        argument, make = node.this, _VALUES.get(type(node))
    if make is None:
        raise unsupported(
            node, f"{written(node)} in a per-person subquery", f"it takes {FUNCTIONS}"
        )
    if isinstance(argument, Clamped):
        raise unsupported(
            argument,
            f"bounds in {written(node)} of a per-person subquery",
            "the per-person values are exact; bound them in the outer query's aggregate "
            "(AVG(total, 0, 100)) or in metadata",
        )
    if not isinstance(argument, exp.Column):
        shown = argument.sql() if argument is not None else ""
        raise unsupported(
            node,
            f"{written(node)}({shown}) in a per-person subquery",
            "a per-person value reads one column: compute the expression in a subquery it "
            "reads first (FROM (SELECT uid, x * 2 AS doubled FROM ...))",
        )
    return make(sub.column(argument))


def shadowing(item: exp.Expr, name: str) -> SQLError:
    """The refusal of a subquery column that would replace a data column under another meaning."""
    return refuse(
        item,
        "a subquery",
        f"the subquery's column {name!r} would replace a column of the data with "
        f"{item.sql()}, whose bounds and keys differ: name it something new",
    )
