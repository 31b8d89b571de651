"""One SQL aggregate call (``SUM(x)``, ``COUNT(*)``, ``MEDIAN(x)``, ...) into the builder's.

An aggregate of one bounded column (``SUM``, ``AVG``, ``VARIANCE``, ...) is
found by its SQL name among the aggregate families' ``sql_functions``
(:data:`privframe.plan.aggregates.FAMILIES`), so a new family with SQL names
needs nothing here. ``COUNT``, ``COUNT(DISTINCT <privacy unit>)`` and the
quantiles (``MEDIAN``, ``QUANTILE``, ``APPROX_QUANTILE``, ``PERCENTILE_CONT``,
and ``MIN``/``MAX`` as the 0 and 1 quantiles, as Tumult Analytics defines its
``min`` and ``max``: a value of noisy rank near the end, never the exact
extreme, which is one person's value) are not one bounded column, and are
translated here one by one.

Bounds written in the call (``ANON_SUM(x CLAMPED BETWEEN 0 AND 10)``,
``SUM(x, contribution_bounds_per_group => (0, 10))``, ``SUM(x, 0, 10)``; the
dialect wraps the argument in :class:`~privframe.api.sql.dialect.Clamped`)
override metadata. In a differential privacy clause (whatever the Session's
default row limit), ``SUM``, ``AVG`` and ``COUNT`` with
``contribution_bounds_per_group`` are BigQuery's per-unit clamping
(:func:`per_group_bounds`; each unit's sum, average or count in a group
clamped, through the per-unit stage,
:mod:`privframe.plan.aggregates.per_unit`), decided for the whole query by
:func:`privframe.api.sql.translate.per_unit_clamping`. Otherwise bounds
clamp each row's value, and at most ``max_rows_per_group`` rows of a unit
are kept in a group, so a unit moves a group's sum by up to
``max_rows_per_group`` times the bound, and the noise is scaled to that (the
planner's sensitivity, never assumed). With one row per unit per group
(``max_rows_per_group=1``) the two agree exactly.

Example:
    >>> import sqlglot
    >>> import privframe as pf
    >>> from privframe.api.sql.calls import aggregate
    >>> from privframe.api.sql.scope import Scope
    >>> scope = Scope("", ["x"], {}, {"x": pf.Column(bounds=(0, 1))})
    >>> aggregate(sqlglot.parse_one("STDEV(x)"), "s", scope, None)
    Std(name='s', column='x', lower=0.0, upper=1.0, auto=False, missing='midpoint')
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import polars as pl
from sqlglot import exp

from privframe.api.sql._common import (
    QUANTILE_LIST,
    construct,
    literal_value,
    refuse,
    unsupported,
    written,
)
from privframe.api.sql.dialect import BOUNDED_FUNCTIONS, ORIGINAL_NAME, Clamped
from privframe.api.sql.metadata import Column
from privframe.api.sql.scope import Scope
from privframe.plan import aggregates as agg
from privframe.plan.aggregates import FAMILIES, Aggregate
from privframe.plan.aggregates.base import AUTO, Summed, summed
from privframe.plan.aggregates.per_unit import PerUnitBounded, per_unit_bounded

PER_GROUP = "contribution_bounds_per_group"
"""BigQuery's bounds on each privacy unit's value in a group (SUM, AVG, COUNT)."""


def per_group_bounds(node: exp.Expr) -> Clamped | None:
    """The bounds of ``SUM``/``AVG``/``COUNT(..., contribution_bounds_per_group => (L, U))``.

    None for any other call, or bounds written another way (``SUM(x, 0, 10)``,
    ``CLAMPED BETWEEN``, ``contribution_bounds_per_row``).

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.calls import per_group_bounds
        >>> from privframe.api.sql.dialect import Privframe
        >>> per_group_bounds(sqlglot.parse_one(
        ...     "AVG(x, contribution_bounds_per_group => (0, 5))", read=Privframe)).sql()
        'CLAMPED(x, 0, 5)'
        >>> per_group_bounds(sqlglot.parse_one("SUM(x, 0, 5)", read=Privframe)) is None
        True
    """
    argument = node.this if isinstance(node, exp.Sum | exp.Avg | exp.Count) else None
    if isinstance(argument, Clamped) and argument.meta.get(ORIGINAL_NAME) == PER_GROUP:
        return argument
    return None


def unbounded(node: exp.Expr, scope: Scope) -> bool:
    """Whether ``node`` is a ``SUM``/``AVG``/``COUNT`` with no bounds, for BigQuery to choose.

    It has none in the call and none in its column's metadata (``COUNT`` has
    none there).

    In a differential privacy clause such a call is per-unit clamping with
    bounds chosen at release (``per_unit_bounds="auto"``,
    :mod:`privframe.plan.auto_bounds`), as BigQuery bounds it implicitly.

    Example:
        >>> import sqlglot
        >>> import privframe as pf
        >>> from privframe.api.sql.scope import Scope
        >>> scope = Scope("", ["x", "y"], {}, {"x": pf.Column(bounds=(0, 1))})
        >>> [unbounded(sqlglot.parse_one(f), scope) for f in ("SUM(x)", "SUM(y)", "COUNT(*)")]
        [False, True, True]
    """
    if not isinstance(node, exp.Sum | exp.Avg | exp.Count):
        return False
    argument = node.this
    if isinstance(argument, Clamped | exp.Distinct):
        return False
    if isinstance(node, exp.Count):
        return True
    if not isinstance(argument, exp.Column):
        return False
    facts = scope.metadata(scope.column(argument), argument)
    return facts is None or facts.bounds is None


def _per_unit_call(
    node: exp.Expr, clamped: Clamped | None, alias: str | None, scope: Scope
) -> PerUnitBounded:
    """BigQuery's per-unit clamping of one call: each unit's value in a group, clamped.

    ``SUM(x, ...)`` clamps each unit's sum, ``AVG`` its average (then the
    averages are averaged), ``COUNT(*)`` its rows, ``COUNT(col)`` its non-null
    values of col (:mod:`privframe.plan.aggregates.per_unit`). Without
    ``clamped`` (no bounds given) the bounds are chosen at release.
    """
    what = written(node)
    bounds: tuple[float, float] | str = AUTO if clamped is None else _literal_bounds(clamped, what)
    argument = node.this if clamped is None else clamped.this
    if isinstance(node, exp.Count):
        counted = None
        if not isinstance(argument, exp.Star):
            if not isinstance(argument, exp.Column):
                raise unsupported(node, f"{what} of an expression with {PER_GROUP}")
            counted = scope.column(argument)
        result = per_unit_bounded("count", None, bounds)
        if counted is not None:
            result = dataclasses.replace(result, column=counted)
        name = alias or ("count" if counted is None else f"count_{counted}")
        return result.alias(name)
    if not isinstance(argument, exp.Column):
        raise unsupported(
            node,
            f"{what} of an expression with {PER_GROUP}",
            "the per-unit value is of a column: compute the expression in a subquery's "
            "select list and aggregate its column",
        )
    kind: Literal["sum", "mean"] = "sum" if isinstance(node, exp.Sum) else "mean"
    result = per_unit_bounded(kind, scope.column(argument), bounds)
    return result.alias(alias) if alias is not None else result


def aggregate(
    node: exp.Expr, alias: str | None, scope: Scope, unit: str | None, name: str | None = None
) -> Aggregate | PerUnitBounded:
    """The builder aggregate of the SQL aggregate call ``node``, named ``alias`` if given.

    ``unit`` is the privacy unit (``COUNT(DISTINCT unit)`` counts units).
    ``name`` names an unaliased aggregate of an expression (``SUM(x * 2, 0,
    200)`` is ``f0_``, as BigQuery names it); unlike an alias, it lends no
    metadata: such an aggregate has its bounds in the call or from a CASE.

    Raises:
        SQLError: ``node`` is no supported aggregate, or a bound it needs is missing.
    """
    label = alias or (name if of_expression(node) else None)
    result = _base_aggregate(node, alias, scope, unit, label)
    return result.alias(label) if label is not None else result


def of_expression(node: exp.Expr) -> bool:
    """Whether an aggregate call reads an expression (``SUM(x * 2)``), not a column or ``*``.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.calls import of_expression
        >>> [of_expression(sqlglot.parse_one(t)) for t in ("SUM(x * 2)", "SUM(x)")]
        [True, False]
    """
    if isinstance(node, exp.Count):
        return False  # COUNT(expression) counts its non-NULL rows: it has a name of its own
    target = node.this
    if isinstance(node, exp.WithinGroup):
        order = node.expression
        target = order.expressions[0].this if isinstance(order, exp.Order) else None
    if isinstance(target, Clamped):
        target = target.this
    return isinstance(target, exp.Expr) and not isinstance(
        target, exp.Column | exp.Star | exp.Distinct
    )


def _family(node: exp.Func) -> type[Summed] | None:
    """The aggregate family of one bounded column that has ``node``'s SQL name, if any.

    sqlglot gives each function its canonical name (``VAR_SAMP`` is
    ``VARIANCE``, ``STDEV`` is ``STDDEV``). FAMILIES is read at each call, so
    a family defined after this module was imported is found too.
    """
    name = node.sql_name()  # an unknown function's is ANONYMOUS, no family's
    return next((f for f in FAMILIES if issubclass(f, Summed) and name in f.sql_functions), None)


def _base_aggregate(
    node: exp.Expr, alias: str | None, scope: Scope, unit: str | None, name: str | None
) -> Aggregate | PerUnitBounded:
    if scope.per_unit_clamping and (clamped := per_group_bounds(node)) is not None:
        return _per_unit_call(node, clamped, alias, scope)
    if scope.per_unit_clamping and unbounded(node, scope):
        return _per_unit_call(node, None, alias, scope)
    if isinstance(node, exp.Count):
        return _count(node, alias, scope, unit)
    if isinstance(node, exp.Anonymous) and node.name.upper() == "MEAN":
        node = exp.Avg(this=node.expressions[0]) if len(node.expressions) == 1 else node
    if isinstance(node, exp.Func) and (family := _family(node)) is not None:
        argument = node.this
        what = written(node)
        if isinstance(argument, exp.Distinct):
            raise unsupported(node, f"{what}(DISTINCT ...)")
        column = _bounds(argument, alias, what, scope)
        value = _value_column(argument, name, what, scope)
        facts = scope.metadata(value, argument)
        missing = "midpoint" if facts is None or facts.missing is None else facts.missing
        return summed(family, value, column.bounds, missing)
    return _quantile_call(node, alias, scope, name)


def _quantile_call(node: exp.Expr, alias: str | None, scope: Scope, name: str | None) -> Aggregate:
    """MEDIAN, QUANTILE, PERCENTILE_CONT (both forms); the array quantiles are refused."""
    if isinstance(node, exp.Median):
        return _quantile(node.this, 0.5, alias, name, "MEDIAN", scope, median=True)
    if isinstance(node, exp.Quantile | exp.ApproxQuantile):
        q = literal_value(node.args["quantile"])
        return _quantile(node.this, q, alias, name, written(node), scope)
    if isinstance(node, exp.PercentileCont) and node.expression is not None:
        # PERCENTILE_CONT(x, q): BigQuery's and ZetaSQL's comma form.
        return _quantile(
            node.this, literal_value(node.expression), alias, name, written(node), scope
        )
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont):
        order = node.expression
        if not isinstance(order, exp.Order) or len(order.expressions) != 1:
            raise unsupported(node, "PERCENTILE_CONT without one ORDER BY column")
        target = order.expressions[0].this
        q = literal_value(node.this.this)
        return _quantile(target, q, alias, name, "PERCENTILE_CONT", scope)
    if isinstance(node, exp.Min | exp.Max) and not node.expressions:
        # Tumult Analytics' min and max are its 0 and 1 quantiles; BigQuery has no DP
        # MIN or MAX. The exact extreme is one person's value: no noise hides it.
        q = 0.0 if isinstance(node, exp.Min) else 1.0
        return _quantile(node.this, q, alias, name, written(node), scope)
    if isinstance(node, exp.ApproxQuantiles):
        what = written(node)
        raise unsupported(
            node,
            f"{what} inside an expression",
            f"{what}(x, n) is a select-list item of its own (its list column); for one "
            "quantile write PERCENTILE_CONT(x, q)",
        )
    if isinstance(node, exp.Anonymous) and node.name.upper() in BOUNDED_FUNCTIONS:
        name = node.name.upper()
        raise unsupported(
            node,
            f"{name} with these arguments",
            f"bounds go in the call as {name}(x, lower, upper) or {name}(x, "
            "contribution_bounds_per_group => (lower, upper))",
        )
    raise unsupported(node, construct(node), "see the supported aggregates in privframe.api.sql")


MAX_QUANTILES = 100
"""The most quantiles one APPROX_QUANTILES(x, n) asks for: each takes a share of the budget."""


def quantile_list(node: exp.Expr) -> exp.Expr:
    """``APPROX_QUANTILES(x, n)`` as the array of its n + 1 quantiles; other nodes as they are.

    BigQuery returns the minimum, the n − 1 inner n-quantiles and the maximum
    as one array; here each is a ``PERCENTILE_CONT(x, i/n)``, measured on its
    own, and the array is post-processing of the released values. So its ρ is
    split n + 1 ways, and the array is not sorted: each value is noisy alone.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.calls import quantile_list
        >>> quantile_list(sqlglot.parse_one("APPROX_QUANTILES(x, 2)")).sql()
        'ARRAY(PERCENTILE_CONT(x, 0.0), PERCENTILE_CONT(x, 0.5), PERCENTILE_CONT(x, 1.0))'

    Raises:
        SQLError: n is not a whole number from 1 to :data:`MAX_QUANTILES`.
    """
    if not isinstance(node, exp.ApproxQuantiles):
        return node
    what = written(node)
    if node.expression is None or isinstance(node.this, exp.Distinct):
        raise unsupported(node, f"this {what}", f"write {what}(x, n), n the number of parts")
    n = literal_value(node.expression)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_QUANTILES:
        raise unsupported(
            node,
            f"{what}(x, {node.expression.sql()})",
            f"n is a whole number, 1 to {MAX_QUANTILES}",
        )
    array = exp.Array(
        expressions=[
            exp.PercentileCont(this=node.this.copy(), expression=exp.Literal.number(i / n))
            for i in range(n + 1)
        ]
    )
    array.meta[QUANTILE_LIST] = True
    return array


def _bounds(node: exp.Expr, alias: str | None, what: str, scope: Scope) -> Column:
    """The bounds of an aggregate's argument: in the call, else from the argument itself.

    In the call (``CLAMPED BETWEEN``, ``contribution_bounds_per_group``,
    ``SUM(x, 0, 10)``) they override metadata. Otherwise a column's metadata,
    a CASE whose results are all number literals by its smallest and largest
    result, or metadata keyed by the output alias, but only when that alias
    is no column: ``SUM(CASE ... END) AS age`` must not take the column age's
    bounds, which say nothing of the expression.
    """
    if isinstance(node, Clamped):
        return Column(bounds=_literal_bounds(node, what))
    if isinstance(node, exp.Distinct):
        raise unsupported(node, f"{what}(DISTINCT ...)")
    # Every column named must exist, and the expression be one privframe computes, before
    # bounds are asked for: a typo or UPPER(...) is the cause, not the missing bounds.
    scope.canonical(node)
    scope.rows(node)
    own = scope.column(node) if isinstance(node, exp.Column) else None
    if own is None and (literal := _case_bounds(node)) is not None:
        return Column(bounds=literal)
    shadows = alias is not None and alias != own and scope.taken(alias)
    names = [n for n in (own, None if shadows else alias) if n]
    for name in names:
        column = scope.metadata(name, node)
        if column is not None and column.bounds is not None:
            return column
    raise refuse(node, what, _needs_bounds(what, names, alias if shadows else None))


def _needs_bounds(what: str, names: list[str], shadowed: str | None) -> str:
    example = repr(names[0]) if names else "'alias'"
    message = (
        f"{what} needs public bounds: give them in the call, e.g. {what}(x, "
        "contribution_bounds_per_group => (lower, upper)), or in metadata, e.g. "
        f"metadata={{{example}: pf.Column(bounds=(lower, upper))}}"
    )
    if shadowed is not None:
        return (
            f"{message}; the alias {shadowed!r} is also a column, whose bounds are not this "
            "expression's: give the bounds in the call, or alias it with a name no column has"
        )
    return message + ("" if names else " with the aggregate aliased (AS alias)")


def _literal_bounds(node: Clamped, what: str) -> tuple[float, float]:
    """The (lower, upper) written in a call, which must be numbers with lower <= upper."""
    how = node.meta.get(ORIGINAL_NAME, "bounds in the call")
    found = []
    for end in ("lower", "upper"):
        value = literal_value(node.args[end])
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise unsupported(node.args[end], f"{what} {how}", "bounds are number literals")
        found.append(value)
    lower, upper = found
    if not (math.isfinite(lower) and math.isfinite(upper) and lower <= upper):
        raise refuse(node, f"{what} {how}", f"{what} needs finite bounds with lower <= upper")
    return float(lower), float(upper)


def _case_bounds(node: exp.Expr) -> tuple[float, float] | None:
    """(min, max) of a CASE whose results are all number literals (a missing ELSE is NULL)."""
    if not isinstance(node, exp.Case):
        return None
    results = [branch.args.get("true") for branch in node.args.get("ifs") or []]
    values = []
    for result in [*results, node.args.get("default")]:
        if result is None or isinstance(result, exp.Null):
            continue
        if not (isinstance(result, exp.Literal) and not result.is_string) and not (
            isinstance(result, exp.Neg) and isinstance(result.this, exp.Literal)
        ):
            return None
        values.append(float(literal_value(result)))
    if not values or min(values) == max(values):
        return None  # nothing to bound by, or no spread: bounds must come from elsewhere
    return min(values), max(values)


def _value_column(node: exp.Expr, name: str | None, what: str, scope: Scope) -> str:
    """The column an aggregate reads: its argument's, or one derived under ``name``."""
    if isinstance(node, Clamped):
        node = node.this
    if isinstance(node, exp.Column):
        return scope.column(node)
    return scope.derive(scope.rows(node), name or f"{what.lower()}_value")


def _count(node: exp.Count, alias: str | None, scope: Scope, unit: str | None) -> Aggregate:
    argument = node.this
    if isinstance(argument, Clamped):  # its bound is the row limit: see count_limit
        argument = argument.this
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
        unit_name = unit or "<privacy unit>"
        listed = ", ".join(c.sql() for c in columns)
        # A person changes a group's distinct count by at most their own distinct
        # values there (max_rows_per_group), but no engine has a private distinct-value
        # aggregate yet; and a count of persons per value (per_unit) is another number.
        raise unsupported(
            node,
            f"COUNT(DISTINCT {listed})",
            f"only COUNT(DISTINCT {unit_name}) is supported (the number of people). privframe "
            f"has no private count of distinct values of another column yet. To learn which "
            f"values are present, group by them: SELECT {listed}, COUNT(*) ... GROUP BY "
            f"{listed} (with delta= for private selection, or public keys in metadata), and "
            "count the released rows",
        )
    # COUNT(x) counts the rows where x is not null: a sum of 0/1 indicators,
    # released rounded to a whole number (rounds_to_integer).
    counted = scope.column(argument) if isinstance(argument, exp.Column) else "rows"
    name = alias or f"count_{counted}"
    flag = scope.derive(
        scope.rows(argument).is_not_null().cast(pl.Int64, strict=False), f"{name}_flag"
    )
    return agg.sum(flag, (0, 1)).alias(name)


def rounds_to_integer(node: exp.Expr) -> bool:
    """Whether the release of ``node`` is rounded to an integer: ``COUNT(col)``.

    ``COUNT(col)`` is released as a noisy sum of 0/1 flags, on the sum's fine
    grid; rounding it to the nearest integer is post-processing (free), so it
    comes back whole, like ``COUNT(*)``. The rounding comes last: a total row
    (``total=True``) is the rounded total of the unrounded groups, so it can
    differ from the sum of the rounded groups by up to half a unit per group,
    and ``_std``/``_ci95`` columns are those of the unrounded estimate.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.calls import rounds_to_integer
        >>> rounds_to_integer(sqlglot.parse_one("COUNT(x)")), rounds_to_integer(
        ...     sqlglot.parse_one("COUNT(*)"))
        (True, False)
    """
    if not isinstance(node, exp.Count):
        return False
    argument = node.this.this if isinstance(node.this, Clamped) else node.this
    return not isinstance(argument, exp.Star | exp.Distinct)


def count_limit(node: exp.Count) -> int | None:
    """The row limit a COUNT's bounds in the call set: c of ``(0, c)``, or None without bounds.

    BigQuery's ``COUNT(*, contribution_bounds_per_group => (0, c))`` (and
    ``ANON_COUNT(x CLAMPED BETWEEN 0 AND c)``) clamps each privacy unit's
    count in each group to [0, c]; keeping at most c rows per unit per group
    (``max_rows_per_group = c``) gives the same count. A lower bound above 0
    would add rows a unit does not have, so it is refused.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.calls import count_limit
        >>> from privframe.api.sql.dialect import Privframe
        >>> count_limit(sqlglot.parse_one(
        ...     "COUNT(*, contribution_bounds_per_group => (0, 5))", read=Privframe))
        5
    """
    clamped = node.this
    if not isinstance(clamped, Clamped):
        return None
    how = f"COUNT {clamped.meta.get(ORIGINAL_NAME, 'bounds')}"
    lower, upper = (literal_value(clamped.args[end]) for end in ("lower", "upper"))
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in (lower, upper))
    if not whole or lower != 0 or upper < 1:
        raise refuse(
            clamped,
            how,
            f"a count's bounds are (0, c), c the most rows one privacy unit counts in one group "
            f"(a whole number >= 1); got ({clamped.args['lower'].sql()}, "
            f"{clamped.args['upper'].sql()})",
        )
    return int(upper)


def _quantile(
    target: exp.Expr,
    q: Any,
    alias: str | None,
    unnamed: str | None,
    what: str,
    scope: Scope,
    median: bool = False,
) -> Aggregate:
    column = _bounds(target, alias, what, scope)
    name = _value_column(target, unnamed, what, scope)
    candidates = {"candidates": column.candidates} if column.candidates else {}
    if median:
        return agg.median(name, column.bounds, **candidates)  # type: ignore[arg-type]
    if isinstance(q, bool) or not isinstance(q, int | float):
        raise refuse(target, what, f"{what} needs a numeric quantile, got {q!r}")
    return agg.quantile(name, float(q), column.bounds, **candidates)  # type: ignore[arg-type]
