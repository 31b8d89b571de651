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

from collections.abc import Mapping

import polars as pl
from sqlglot import exp

from privframe.api.query import Query
from privframe.api.sql._common import builder_refusal, refuse
from privframe.api.sql.groups import group_by, public_keys
from privframe.api.sql.metadata import Column
from privframe.api.sql.post import Post, post_processing
from privframe.api.sql.scope import Scope
from privframe.api.sql.select_list import select_items
from privframe.api.sql.sql_query import SQLQuery
from privframe.api.sql.statement import refuse_unsupported, select
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
) -> SQLQuery:
    """Parse one SELECT into an :class:`SQLQuery` over ``query`` (a fresh session query).

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
        scope = Scope(text, columns, tables, metadata)
        built, post = builder_refusal(
            lambda: _translate(statement, query, scope, unit, contributions),
            "the query cannot be built",
        )
    except RecursionError:
        nested = True
    if nested:
        raise SQLError("the SQL is nested too deeply to translate", construct="nesting")
    return SQLQuery(text, built, post)


def _translate(
    statement: exp.Select, query: Query, scope: Scope, unit: str | None, bound: Bound | None
) -> tuple[Query, Post]:
    """The builder query of ``statement`` over ``query``, and its post-processing."""
    refuse_unsupported(statement)
    query = scope.read_from(statement, query)
    for join in statement.args.get("joins") or []:
        query = scope.join(query, join)
    where = statement.args.get("where")
    if where is not None:
        query = query.filter(scope.rows(where.this))
    groups = group_by(statement, scope)
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
    query = query.agg(*(item.aggregate for item in items if item.aggregate is not None))
    return query, post_processing(statement, items, list(groups), scope.canonical, selection)
