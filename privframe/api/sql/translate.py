"""One SELECT to the builder's query (FROM, JOIN, WHERE, GROUP BY, select list) and post-processing.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.api.sql.translate import parse
    >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
    >>> parsed = parse("SELECT COUNT(*) AS n FROM data WHERE x > 1", sess.query(),
    ...     unit=None, metadata={}, contributions=None, tables={})
    >>> [a.output_name for a in parsed.query.plan.aggregates]
    ['n']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import polars as pl
from sqlglot import exp

from privframe.accounting.budgets import zCDP
from privframe.api.query import Query
from privframe.api.sql._common import TABLE, builder_refusal, construct, refuse, written
from privframe.api.sql.calls import (
    PER_GROUP,
    count_limit,
    per_group_bounds,
    rounds_to_integer,
    unbounded,
)
from privframe.api.sql.dialect import ORIGINAL_NAME, Clamped
from privframe.api.sql.groups import group_by, group_keys, public_keys
from privframe.api.sql.metadata import Column
from privframe.api.sql.options import PrivacyOptions, read_options
from privframe.api.sql.post import Post, post_processing
from privframe.api.sql.released import aggregate_calls
from privframe.api.sql.scope import Scope
from privframe.api.sql.select_list import select_items
from privframe.api.sql.sources import Private
from privframe.api.sql.sql_query import SQLQuery
from privframe.api.sql.statement import (
    nesting_error,
    privacy_clause,
    refuse_unsupported,
    select,
)
from privframe.api.sql.where import Stage, filter_where, joined, refused
from privframe.engines.spec import PrivateJoin
from privframe.errors import InvalidArgumentError, SQLError
from privframe.plan.ir import Bound


def parse(
    text: str,
    query: Query,
    *,
    unit: str | None,
    metadata: Mapping[str, Column],
    contributions: Bound | None,
    tables: Mapping[str, pl.DataFrame],
    table: str = TABLE,
    table_contributions: Mapping[str, Bound] | None = None,
) -> SQLQuery:
    """Parse one SELECT into an :class:`SQLQuery` over ``query`` (a fresh session query).

    ``table`` is the private table's name in FROM (``PUMS.PUMS``, say); the
    session's other private tables are ``query.session.private_tables``.
    ``table_contributions`` are each private table's default limits (the
    Session's ``contributions``); ``contributions``, if given, replace those of
    the table FROM reads. Without ``table_contributions``, ``contributions``
    are the limits of ``table``.

    Raises:
        SQLError: the text does not parse, is not a single SELECT, or uses an
            unsupported construct (named, with its position).
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError(f"sql takes a non-empty SQL string, got {text!r}")
    columns = query.session.columns
    names = [*columns, *tables, *(c for t in tables.values() for c in t.columns)]
    nested = False
    try:
        statement = select(text, names)
        clause = privacy_clause(statement)
        zcdp = issubclass(query.session.budget_kind, zCDP)
        options = None if clause is None else read_options(clause, unit, needs_delta=zcdp)
        defaults = dict(table_contributions or {})
        private = Private(query.session.private_tables, unit, defaults, contributions)
        scope = Scope(text, columns, tables, metadata, table, private)
        built, post, integers = builder_refusal(
            lambda: _translate(statement, query, scope, unit, options),
            "the query cannot be built",
        )
    except RecursionError:
        nested = True
    if nested:
        raise nesting_error(text)
    if clause is not None:
        _check_unit_table(clause, scope)
    if options is not None and options.public_groups and post.selection is not None:
        message, where = post.selection
        raise SQLError(
            f"{options.construct} has group_selection_strategy=PUBLIC_GROUPS, but {message}",
            construct="GROUP BY",
            position=where,
        )
    return SQLQuery(text, built, post, options=options, integers=integers)


def limits_of(
    statement: exp.Select,
    options: PrivacyOptions | None,
    contributions: Bound | None,
    unit: str | None,
) -> Bound | None:
    """The contribution bound of a query: the Session's, with what the SQL itself says.

    The differential privacy clause's ``max_groups_contributed`` (or
    ``kappa``) is ``max_groups``; without it, the Session's ``max_groups``,
    else 1 (a DP clause never runs without a group limit). A COUNT's bounds
    in the call, ``(0, c)``, are ``max_rows_per_group = c``; two different c
    are refused. What the query says overrides the Session's defaults, as
    per-query metadata does. A Session without a privacy unit protects rows,
    each in one group: there is nothing to limit.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.dialect import Privframe
        >>> from privframe.api.sql.translate import limits_of
        >>> select = sqlglot.parse_one(
        ...     "SELECT COUNT(*, contribution_bounds_per_group => (0, 3)) FROM t", read=Privframe)
        >>> limits_of(select, None, None, "u")
        Bound(max_groups=None, max_rows_per_group=3, max_rows=None)
    """
    rows = None
    for node in statement.find_all(exp.Count):
        limit = count_limit(node)
        if limit is not None and rows is not None and limit != rows:
            raise refuse(
                node,
                "COUNT bounds",
                f"two COUNTs give different row limits ({rows} and {limit}): a query has one "
                "max_rows_per_group; give every COUNT the same bounds",
            )
        rows = limit if limit is not None else rows
    if unit is None or (options is None and rows is None):
        return contributions
    given = contributions or Bound()
    groups = given.max_groups
    if options is not None:
        groups = options.max_groups or groups or 1
        if rows is None and given.max_rows_per_group is None and given.max_rows is None:
            raise _no_row_limit(options)
    return Bound(groups, rows or given.max_rows_per_group, given.max_rows)


def per_unit_clamping(
    statement: exp.Select,
    options: PrivacyOptions | None,
    asked: Bound | None,
    unit: str | None,
    *,
    auto: Callable[[exp.Expr], bool] = lambda call: False,
    default: Bound | None = None,
) -> bool:
    """Whether the query clamps each unit's value in a group, as BigQuery does.

    So it is in a differential privacy clause whose SUM or AVG has
    ``contribution_bounds_per_group``, or no bounds at all (``auto`` says
    which calls have none: BigQuery then chooses them, and so does the
    release, :mod:`privframe.plan.auto_bounds`): then every aggregate must be
    a SUM, AVG or COUNT with ``contribution_bounds_per_group`` or no bounds (they all read one
    per-unit stage, which has one row per unit and group). The Session's
    default row limits (``contributions=``) do not apply to such a query:
    after the per-unit stage a unit has one row in a group (m = 1), so a
    default ``max_rows_per_group`` would trim nothing, and the query is bounded
    by ``max_groups`` alone, as BigQuery's is. A query whose only per-group
    bounds are a COUNT's keeps them as its row limit, which counts the same
    (:func:`~privframe.api.sql.calls.count_limit`) (docs/sql.md, "Per-unit
    clamping").

    A query of COUNTs alone without bounds clamps per unit too when the
    Session's ``default`` limits give no row limit (with one, the COUNTs count
    a unit's rows up to it, as they do outside the clause).

    ``asked`` is the query's own limits (``sql(..., contributions=...)``): a
    row limit there (``max_rows_per_group``, ``max_rows``) asks to drop a
    unit's rows before its value is taken, which contradicts per-unit bounds,
    and is refused.

    In any differential privacy clause, ``contribution_bounds_per_group`` on
    another function (``VAR_POP``, ``PERCENTILE_CONT``, ...) is refused:
    BigQuery defines it for SUM, AVG and COUNT only, and ZetaSQL's others take
    ``contribution_bounds_per_row``.

    Raises:
        SQLError: such a query has an aggregate that is not one of them, or
            its own contributions give a row limit.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.dialect import Privframe
        >>> from privframe.api.sql.options import read_options
        >>> from privframe.api.sql.statement import privacy_clause
        >>> from privframe.api.sql.translate import per_unit_clamping
        >>> select = sqlglot.parse_one(
        ...     "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6) "
        ...     "SUM(x, contribution_bounds_per_group => (0, 5)) FROM t", read=Privframe)
        >>> options = read_options(privacy_clause(select), "u", needs_delta=True)
        >>> per_unit_clamping(select, options, None, "u")
        True
    """
    if options is None or unit is None:
        return False
    having, order = statement.args.get("having"), statement.args.get("order")
    parts = [*statement.expressions, *([having.this] if having is not None else [])]
    parts += order.expressions if order is not None else []
    calls = [call for part in parts for call in aggregate_calls(part)]
    for call in calls:
        bounds = next(
            (c for c in call.find_all(Clamped) if c.meta.get(ORIGINAL_NAME) == PER_GROUP), None
        )
        if bounds is not None and per_group_bounds(call) is None:
            what = construct(call)
            raise refuse(
                call,
                what,
                "BigQuery defines contribution_bounds_per_group for SUM, AVG and COUNT only "
                f"(each unit's value in a group clamped); ZetaSQL's {what} takes "
                "contribution_bounds_per_row (each row clamped), and no per-unit value has its "
                f"meaning: write {what}(x, contribution_bounds_per_row => (lower, upper)) with a "
                "row limit, contributions=pf.Bound(max_rows_per_group=...)",
            )
    per_unit: list[exp.Expr] = [
        c
        for c in calls
        if isinstance(c, exp.Sum | exp.Avg) and (per_group_bounds(c) is not None or auto(c))
    ]
    if not per_unit and calls and all(auto(c) for c in calls) and _row_limit(default) is None:
        # Only COUNTs without bounds, and no row limit to read them as: BigQuery bounds each
        # unit's count implicitly, and so does the release.
        per_unit = calls
    if not per_unit:
        return False
    first = per_unit[0]
    name = _call_text(first)
    how = (
        "at bounds chosen at release"
        if per_group_bounds(first) is None
        else "at its contribution_bounds_per_group"
    )
    limit = _row_limit(asked)
    if limit is not None:
        raise refuse(
            first,
            construct(first),
            f"{name} clamps each privacy unit's value in a group {how} (BigQuery's per-unit "
            f"clamping), and this query's contributions give {limit}, "
            "which would drop some of a unit's rows before its value is taken: the two "
            f"contradict each other. Remove {limit.split('=')[0]} from the query's "
            "contributions (max_groups is all per-unit clamping needs), or clamp each row "
            f"with {name}(x, contribution_bounds_per_row => (lower, upper))",
        )
    for call in calls:
        if per_group_bounds(call) is None and not auto(call):
            what = construct(call)
            raise refuse(
                call,
                what,
                f"in this query {name} clamps each privacy unit's value in a group {how} "
                f"(BigQuery's per-unit clamping, one per-unit stage), and {_call_text(call)} "
                "would clamp rows: one query takes one kind. Give it "
                "contribution_bounds_per_group too (SUM, AVG and COUNT take them), or give a "
                "row limit, contributions=pf.Bound(max_rows_per_group=...), to clamp rows",
            )
    return True


def _call_text(call: exp.Expr) -> str:
    """``SUM(x)``, ``COUNT(*)``: a call as messages show it (bounds in it left out)."""
    argument = call.this.this if isinstance(call.this, Clamped) else call.this
    shown = argument.sql() if isinstance(argument, exp.Column | exp.Star) else "..."
    return f"{written(call)}({shown})"


def _row_limit(bound: Bound | None) -> str | None:
    """``max_rows_per_group=m`` or ``max_rows=M`` if ``bound`` limits rows, else None."""
    if bound is None:
        return None
    if bound.max_rows_per_group is not None:
        return f"max_rows_per_group={bound.max_rows_per_group}"
    return None if bound.max_rows is None else f"max_rows={bound.max_rows}"


def _no_row_limit(options: PrivacyOptions) -> SQLError:
    """BigQuery needs no row limit (it clamps each unit's per-group aggregate); privframe does."""
    return SQLError(
        f"{options.construct}: privframe needs the most rows one privacy unit adds to a group. "
        "BigQuery clamps each unit's aggregate per group; privframe clamps each row and keeps "
        "at most max_rows_per_group rows of a unit in a group. Give it in the query, e.g. "
        "COUNT(*, contribution_bounds_per_group => (0, 5)), or on the Session or the call: "
        "contributions=pf.Bound(max_rows_per_group=5); or clamp each unit's value in a "
        "group as BigQuery does, with contribution_bounds_per_group on every SUM, AVG and "
        "COUNT",
        construct=options.construct,
        position=options.position,
    )


def _translate(
    statement: exp.Select,
    query: Query,
    scope: Scope,
    unit: str | None,
    options: PrivacyOptions | None,
) -> tuple[Query, Post, tuple[str, ...]]:
    """The builder query of ``statement``, its post-processing and the outputs to round."""
    refuse_unsupported(statement)
    query = scope.read_from(statement, query)
    _fits(query, statement.args.get("from_") or statement, "FROM")
    stages: list[Stage] = []
    for join in statement.args.get("joins") or []:
        query, stage = joined(scope, query, join)
        stages.append(stage)
        _fits(query, join, "UNNEST" if isinstance(join.this, exp.Unnest) else "JOIN")
    given = scope.private.limits(scope.source, scope.source)
    asked = scope.private.override
    # Automatic bounds spend rho: in a session of another budget an unbounded call is refused
    # as needing bounds, which says what to write.
    zcdp = issubclass(query.session.budget_kind, zCDP)
    scope.per_unit_clamping = per_unit_clamping(
        statement,
        options,
        asked,
        unit,
        auto=lambda call: zcdp and unbounded(call, scope),
        default=given,
    )
    if scope.per_unit_clamping:
        # Each unit's value in a group is clamped: no row limit (the planner derives m = 1
        # after the per-unit stage, where a default max_rows_per_group trims nothing), and
        # the Session's default row limits go: BigQuery bounds such a query by groups alone.
        bound: Bound | None = Bound(
            (options.max_groups if options else None) or (given.max_groups if given else None) or 1
        )
    else:
        bound = limits_of(statement, options, given, unit)
    if bound is not None and any(isinstance(s, PrivateJoin) for s in query.plan.steps):
        # Each table's max_rows bounded its side of the join: the joined rows' limit is
        # the l·r the planner derives from the join.
        bound = dataclasses.replace(bound, max_rows=None)
        bound = None if bound == Bound() else bound
    where = statement.args.get("where")
    if where is not None:
        # Refused as one filter after FROM, so that the refusal is located at its culprit; each
        # condition then filters as soon as its table's rows are there (where.py).
        unfiltered, query = query, query.filter(scope.rows(where.this))
        if refused(query):
            culprit = _culprit(where.this, unfiltered, scope)
            _fits(unfiltered.filter(scope.rows(culprit)), culprit, "WHERE")
            _fits(query, where.this, "WHERE")
        query = filter_where(scope, unfiltered, stages, where.this)
    filtered = query

    def group_fits(name: str, node: exp.Expr) -> None:
        # With the column's public keys, so that keys of another type are refused here.
        grouped = filtered.with_columns(**scope.derived) if scope.derived else filtered
        keyed = grouped.group_by([name], keys=group_keys(name, node, scope))
        _fits(keyed, node, "GROUP BY", f"GROUP BY {node.sql()}")

    groups = group_by(statement, scope, group_fits)
    ungrouped = [column for column in scope.listed if column not in groups]
    if ungrouped:
        raise refuse(
            statement.args["joins"][0],
            "public groups",
            f"a RIGHT JOIN on a list of groups lists the groups of a GROUP BY column, and "
            f"{ungrouped[0]!r} is not one: add GROUP BY {ungrouped[0]}",
        )
    items = select_items(statement, groups, scope, unit)
    if not any(item.aggregate is not None for item in items):
        raise refuse(
            statement,
            "SELECT without an aggregate",
            "a private query releases aggregates: add one, e.g. COUNT(*), to the select list",
        )
    if scope.derived:
        query = query.with_columns(**scope.derived)
    if bound is not None:
        query = query.bound(bound.max_groups, bound.max_rows_per_group, bound.max_rows)
    selection = None
    if groups:
        keys, selection = public_keys(statement, groups, scope)
        query = query.group_by(list(groups), keys=keys)
    for item in items:
        if item.aggregate is not None:
            _fits(query.agg(item.aggregate), item.node, construct(item.node))
    query = query.agg(*(item.aggregate for item in items if item.aggregate is not None))
    _fits(query, statement, "query")
    integers = tuple(
        item.aggregate.output_name
        for item in items
        if item.aggregate is not None
        and (
            rounds_to_integer(item.node)
            or (scope.per_unit_clamping and isinstance(item.node, exp.Count))
        )
    )
    post = post_processing(statement, items, list(groups), scope.canonical, selection)
    return query, post, integers


def _fits(query: Query, node: exp.Expr, what: str, written: str = "") -> None:
    """Refuse, at ``node``, a query so far that does not fit the data's public schema.

    The session's check (:meth:`~privframe.api.session.Session.check`) of the
    plan built from the clauses so far, so that its refusal (a type mismatch,
    grouping by the privacy unit) is located at the clause that caused it;
    ``written`` is the clause as the message shows it (``what`` by default).
    """
    lead = f"{written or what} cannot run on this data"
    builder_refusal(lambda: query.session.check(query.plan), lead, node, what)


def _culprit(condition: exp.Expr, query: Query, scope: Scope) -> exp.Expr:
    """The smallest part of a WHERE condition that is refused alone (``age = 'a'`` of ``... AND``).

    ``query`` is without the condition; each operand of AND, OR and NOT is a
    condition of its own, so it is checked as the filter.
    """
    inner = condition.this if isinstance(condition, exp.Paren | exp.Not) else None
    parts = [condition.this, condition.expression] if isinstance(condition, exp.Connector) else []
    for part in [inner] if inner is not None else parts:
        if refused(query.filter(scope.rows(part))):
            return _culprit(part, query, scope)
    return condition


def _check_unit_table(clause: exp.Expr, scope: Scope) -> None:
    """``privacy_unit_column=t.id`` must qualify the column by the private table (or its alias).

    Its name is checked against the Session's unit when the options are read;
    the qualifier only once FROM and JOIN have said what each table name means.
    """
    for option in clause.expressions:
        column = option.expression if isinstance(option, exp.EQ) else None
        if option.this.name.casefold() != "privacy_unit_column" or not isinstance(
            column, exp.Column
        ):
            continue
        if column.table and not scope.is_private(column.args["table"]):
            raise refuse(
                column,
                "privacy_unit_column",
                f"privacy_unit_column={column.sql()} names a column of {column.table!r}, which "
                "is not the private table: the privacy unit is a column of the private table",
            )
