"""One SQL aggregate call (``SUM(x)``, ``COUNT(*)``, ``MEDIAN(x)``, ...) into the builder's.

An aggregate of one bounded column (``SUM``, ``AVG``, ``VARIANCE``, ...) is
found by its SQL name among the aggregate families' ``sql_functions``
(:data:`privframe.plan.aggregates.FAMILIES`), so a new family with SQL names
needs nothing here. ``COUNT``, ``COUNT(DISTINCT <privacy unit>)`` and the
quantiles (``MEDIAN``, ``QUANTILE``, ``APPROX_QUANTILE``, ``PERCENTILE_CONT``)
are not one bounded column, and are translated here one by one.

Example:
    >>> import sqlglot
    >>> import privframe as pf
    >>> from privframe.api.sql.calls import aggregate
    >>> from privframe.api.sql.scope import Scope
    >>> scope = Scope("", ["x"], {}, {"x": pf.Column(bounds=(0, 1))})
    >>> aggregate(sqlglot.parse_one("STDEV(x)"), "s", scope, None)
    Std(name='s', column='x', lower=0.0, upper=1.0)
"""

from __future__ import annotations

from typing import Any

import polars as pl
from sqlglot import exp

from privframe.api.sql._common import construct, literal_value, refuse, unsupported
from privframe.api.sql.metadata import Column
from privframe.api.sql.scope import Scope
from privframe.errors import SQLError
from privframe.plan import aggregates as agg
from privframe.plan.aggregates import FAMILIES, Aggregate, Bounded
from privframe.plan.aggregates.base import bounded


def aggregate(node: exp.Expr, alias: str | None, scope: Scope, unit: str | None) -> Aggregate:
    """The builder aggregate of the SQL aggregate call ``node``, named ``alias`` if given.

    ``unit`` is the privacy unit (``COUNT(DISTINCT unit)`` counts units).

    Raises:
        SQLError: ``node`` is no supported aggregate, or a bound it needs is missing.
    """
    result = _base_aggregate(node, alias, scope, unit)
    return result.alias(alias) if alias is not None else result


def _family(node: exp.Func) -> type[Bounded] | None:
    """The aggregate family of one bounded column that has ``node``'s SQL name, if any.

    sqlglot gives each function its canonical name (``VAR_SAMP`` is
    ``VARIANCE``, ``STDEV`` is ``STDDEV``). FAMILIES is read at each call, so
    a family defined after this module was imported is found too.
    """
    name = node.sql_name()  # an unknown function's is ANONYMOUS, no family's
    return next((f for f in FAMILIES if issubclass(f, Bounded) and name in f.sql_functions), None)


def _base_aggregate(node: exp.Expr, alias: str | None, scope: Scope, unit: str | None) -> Aggregate:
    if isinstance(node, exp.Count):
        return _count(node, alias, scope, unit)
    if isinstance(node, exp.Anonymous) and node.name.upper() == "MEAN":
        node = exp.Avg(this=node.expressions[0]) if len(node.expressions) == 1 else node
    if isinstance(node, exp.Func) and (family := _family(node)) is not None:
        argument = node.this
        if isinstance(argument, exp.Distinct):
            raise unsupported(node, f"{node.sql_name()}(DISTINCT ...)")
        what = node.sql_name()
        column = _bounds(argument, alias, what, scope)
        return bounded(family, _value_column(argument, alias, what, scope), column.bounds)
    if isinstance(node, exp.Median):
        return _quantile(node.this, 0.5, alias, "MEDIAN", scope, median=True)
    if isinstance(node, exp.Quantile | exp.ApproxQuantile):
        q = literal_value(node.args["quantile"])
        return _quantile(node.this, q, alias, node.sql_name(), scope)
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont):
        order = node.expression
        if not isinstance(order, exp.Order) or len(order.expressions) != 1:
            raise unsupported(node, "PERCENTILE_CONT without one ORDER BY column")
        target = order.expressions[0].this
        q = literal_value(node.this.this)
        return _quantile(target, q, alias, "PERCENTILE_CONT", scope)
    raise unsupported(node, construct(node), "see the supported aggregates in privframe.api.sql")


def _bounds(node: exp.Expr, alias: str | None, what: str, scope: Scope) -> Column:
    if isinstance(node, exp.Distinct):
        raise unsupported(node, f"{what}(DISTINCT ...)")
    # Every column named must exist before bounds are asked for: a typo is the cause.
    scope.canonical(node)
    own = scope.column(node) if isinstance(node, exp.Column) else None
    names = [n for n in (own, alias) if n]
    for name in names:
        column = scope.metadata(name)
        if column is not None and column.bounds is not None:
            return column
    example = repr(names[0]) if names else "'alias'"
    raise refuse(
        node,
        what,
        f"{what} needs public bounds: give them in metadata, e.g. "
        f"metadata={{{example}: pf.Column(bounds=(lower, upper))}}"
        + ("" if names else " with the aggregate aliased (AS alias)"),
    )


def _value_column(node: exp.Expr, alias: str | None, what: str, scope: Scope) -> str:
    if isinstance(node, exp.Column):
        return scope.column(node)
    if alias is None:
        raise refuse(node, what, f"{what} of an expression needs an alias (AS name) for its bounds")
    return scope.derive(scope.rows(node), alias)


def _count(node: exp.Count, alias: str | None, scope: Scope, unit: str | None) -> Aggregate:
    argument = node.this
    if isinstance(argument, exp.Star):
        return agg.count()
    if isinstance(argument, exp.Distinct):
        columns = argument.expressions
        if (
            len(columns) == 1
            and isinstance(columns[0], exp.Column)
            and unit is not None
            and scope.column(columns[0]) == unit
        ):
            return agg.count_distinct()
        raise unsupported(
            node,
            f"COUNT(DISTINCT {', '.join(c.sql() for c in columns)})",
            f"only COUNT(DISTINCT {unit or '<privacy unit>'}) is supported",
        )
    # COUNT(x) counts the rows where x is not null: a sum of 0/1 indicators.
    counted = scope.column(argument) if isinstance(argument, exp.Column) else "rows"
    name = alias or f"count_{counted}"
    flag = scope.derive(
        scope.rows(argument).is_not_null().cast(pl.Int64, strict=False), f"{name}_flag"
    )
    return agg.sum(flag, (0, 1)).alias(name)


def _quantile(
    target: exp.Expr,
    q: Any,
    alias: str | None,
    what: str,
    scope: Scope,
    median: bool = False,
) -> Aggregate:
    column = _bounds(target, alias, what, scope)
    name = _value_column(target, alias, what, scope)
    candidates = {"candidates": column.candidates} if column.candidates else {}
    if median:
        return agg.median(name, column.bounds, **candidates)  # type: ignore[arg-type]
    if isinstance(q, bool) or not isinstance(q, int | float):
        raise SQLError(f"{what} needs a numeric quantile, got {q!r}", construct=what)
    return agg.quantile(name, float(q), column.bounds, **candidates)  # type: ignore[arg-type]
