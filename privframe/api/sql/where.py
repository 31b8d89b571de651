"""WHERE over a JOIN or UNNEST: a condition on one table filters that table's rows first.

A JOIN of two private tables keeps at most each table's ``max_rows`` rows per
person (:mod:`~privframe.api.sql.sources`), and ``UNNEST`` at most
``max_rows`` rows per person after the map. Applied after them, a WHERE on
one table would only see the rows the truncation happened to keep: with
``orders`` limited to one row per person, ``WHERE o.year = 2024`` after a
join would keep a person's 2024 order only when it was the row kept, so
adding a JOIN would change what the WHERE keeps. So the WHERE is split on
its top-level ANDs, and each condition filters as soon as the columns it
reads are there:

* one reading only the rows before a JOIN (its left side) filters them
  before the join, INNER or LEFT: a left row it drops would be dropped with
  all its joined rows after the join, and a row it keeps matches the same
  right rows;
* one reading only an INNER JOIN's right table filters that table's rows
  before its truncation (the right query's steps, in the table's own column
  names: ``v.amount``, ``amount_right`` after the join, is ``amount`` there).
  After a LEFT JOIN it stays after the join: there it also drops the left
  rows without a match (their right columns are NULL), which filtering the
  right table would keep. A filtered subquery, ``LEFT JOIN (SELECT * FROM
  visits WHERE ...) v``, filters the right table first;
* one that does not read an UNNEST's element filters rows before the map;
* anything else (both sides of a join, an element) stays where its columns
  are made.

Over a FROM subquery or WITH table that joins, a condition reading only its
columns moves into it, each column read as the subquery computes it
(``fee`` of ``SELECT v.amount AS fee`` is ``v.amount``, ``doubled`` of
``o.amount * 2 AS doubled`` is ``(o.amount * 2)``), and filters there by the
same rules, through any depth of such subqueries.

Each condition is row-wise and the join or map copies a row's values
unchanged into every row it makes, so without truncation the rows are the
same as filtering last; with it, each table's limit counts only the rows that
pass the conditions on that table. A FROM without a step over units keeps
its WHERE as one filter after the FROM, as before.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> orders = pl.DataFrame({"uid": [1, 1], "year": [2023, 2024]})
    >>> visits = pl.DataFrame({"uid": [1], "dx": ["a"]})
    >>> sess = pf.Session({"orders": orders, "visits": visits}, "uid", pf.zCDP(1.0),
    ...     contributions={"orders": pf.Bound(max_groups=1, max_rows=1),
    ...                    "visits": pf.Bound(max_rows=1)})
    >>> q = sess.sql("SELECT COUNT(*) FROM orders o JOIN visits v ON o.uid = v.uid "
    ...              "WHERE o.year = 2024 AND v.dx = 'a'")
    >>> [step.kind for step in q.query.plan.steps]
    ['filter', 'private_join']
    >>> [step.kind for step in q.query.plan.steps[1].steps]
    ['filter']
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import polars as pl
from sqlglot import exp

from privframe.api.query import Query
from privframe.api.sql.rows import Rows
from privframe.engines.spec import FlatMap, PrivateJoin, Step
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.plan.ir import Plan


class Sources(Protocol):
    """The tables of a FROM as WHERE reads them: :class:`~privframe.api.sql.scope.Scope` is one."""

    joined: list[str]  # the sources JOINs added, in order (keys)
    rows: Rows  # row expressions, in the plan's column names
    from_rows: FromRows | None  # FROM's subquery, if FROM reads one that only computes rows

    def join(self, query: Query, join: exp.Join) -> Query:
        """``query`` with one more JOIN."""
        ...

    def located(self, node: exp.Column) -> tuple[str, str]:
        """The source (key) a column comes from, and its name there."""
        ...

    def from_column(self, node: exp.Column) -> str | None:
        """The column of FROM's rows a column names (None: a joined table's)."""
        ...


@dataclass(frozen=True)
class FromRows:
    """A FROM subquery that only computes rows, as the outer WHERE can filter it inside.

    Attributes:
        scope: the subquery's names.
        query: its FROM and JOINs, unfiltered.
        stages: its JOINs' stages.
        condition: its own WHERE, if any.
        end: how many steps its rows take with their WHERE (the outer plan's first steps).
        columns: each of its columns, as the outer query names it, and the SQL
            computing it in ``scope``.
    """

    scope: Sources
    query: Query
    stages: tuple[Stage, ...]
    condition: exp.Expr | None
    end: int
    columns: Mapping[str, exp.Expr]


@dataclass(frozen=True)
class Stage:
    """One JOIN's part of a plan: its steps ``[start, end)`` and the source it adds (if any).

    Example:
        >>> from privframe.api.sql.where import Stage
        >>> Stage(start=2, end=3, source="visits").end
        3
    """

    start: int
    end: int
    source: str | None


def joined(scope: Sources, query: Query, join: exp.Join) -> tuple[Query, Stage]:
    """``query`` with ``join`` (:meth:`Sources.join`), and the stage of the plan it made."""
    start, known = len(query.plan.steps), len(scope.joined)
    query = scope.join(query, join)
    source = scope.joined[-1] if len(scope.joined) > known else None
    return query, Stage(start, len(query.plan.steps), source)


def conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """The conditions a WHERE ANDs at its top level, parentheses around them dropped.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.where import conjuncts
        >>> [c.sql() for c in conjuncts(sqlglot.parse_one("(a = 1 AND b = 2) AND (c OR d)"))]
        ['a = 1', 'b = 2', '(c OR d)']
    """
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        inner = conjuncts(condition.this)
        return inner if len(inner) > 1 else [condition]
    return [condition]


def filter_where(
    scope: Sources, query: Query, stages: Sequence[Stage], condition: exp.Expr
) -> Query:
    """``query`` (a FROM and its JOINs, ``stages``) filtered by the WHERE ``condition``.

    Each condition of the WHERE's top-level AND filters where the module doc
    says (inside FROM's subquery, :attr:`Sources.from_rows`, if it reads only
    its columns); without a JOIN or UNNEST that truncates, the WHERE is one
    filter after them. A plan the session's check refuses once conditions moved
    keeps them all after (where the refusal is then found and located).
    """
    last = query.filter(scope.rows(condition))
    parts = conjuncts(condition)
    inner = scope.from_rows
    into: dict[int, exp.Expr] = {}
    if inner is not None and _truncates(inner.query.plan.steps):
        for i, part in enumerate(parts):
            moved = _into(scope, inner, part)
            if moved is not None:
                into[i] = moved
    kept = [part for i, part in enumerate(parts) if i not in into]
    steps = _placed(scope, query, stages, kept)
    if steps is None and not into:
        return last
    if steps is None:
        steps = _filter(query, list(query.plan.steps), [scope.rows(p) for p in kept])
    if inner is not None and into:
        # Copies: an AND built of the subquery's own nodes would take them from its WHERE.
        own = [c.copy() for c in conjuncts(inner.condition)] if inner.condition else []
        both = functools.reduce(lambda a, b: exp.And(this=a, expression=b), [*own, *into.values()])
        rows = filter_where(inner.scope, inner.query, inner.stages, both)
        steps = [*rows.plan.steps, *steps[inner.end :]]
    pushed = Query(query.session, dataclasses.replace(query.plan, steps=tuple(steps)))
    return last if refused(pushed) else pushed


def _placed(
    scope: Sources, query: Query, stages: Sequence[Stage], parts: list[exp.Expr]
) -> list[Step] | None:
    """The steps of ``query`` with ``parts`` filtering as soon as they can; None: none moves."""
    steps = query.plan.steps
    if not _truncates(steps[_start(stages, steps) :]):
        return None
    before: dict[int, list[exp.Expr]] = {}
    inside: dict[int, list[exp.Expr]] = {}
    after: list[exp.Expr] = []
    for part in parts:
        read = {scope.located(node)[0] for node in part.find_all(exp.Column)}
        at = max((i for i, s in enumerate(stages) if s.source in read), default=-1)
        if at >= 0 and read == {stages[at].source} and _inner_join(stages[at], steps):
            inside.setdefault(at, []).append(part)
        elif at + 1 < len(stages):
            before.setdefault(at + 1, []).append(part)
        else:
            after.append(part)
    if not before and not inside:
        return None
    own = Rows(lambda node: scope.located(node)[1])
    moved = list(steps[: _start(stages, steps)])
    for i, stage in enumerate(stages):
        moved = _filter(query, moved, [scope.rows(p) for p in before.get(i, [])])
        made = list(steps[stage.start : stage.end])
        if i in inside:
            join = made[0]
            assert isinstance(join, PrivateJoin)
            right = _filter(query, list(join.steps), [own(p) for p in inside[i]])
            made[0] = dataclasses.replace(join, steps=tuple(right))
        moved += made
    return _filter(query, moved, [scope.rows(p) for p in after])


def _into(scope: Sources, inner: FromRows, part: exp.Expr) -> exp.Expr | None:
    """A condition on FROM's columns as its subquery computes them, or None if it reads another.

    A column becomes the subquery's expression for it (``doubled`` of ``SELECT
    amount * 2 AS doubled`` is ``(amount * 2)``), read in the subquery's names.
    """
    columns = list(part.find_all(exp.Column))
    names = [scope.from_column(node) for node in columns]
    if not columns or any(name is None or name not in inner.columns for name in names):
        return None

    def computed(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Column):
            return node
        name = scope.from_column(node)
        assert name is not None
        return exp.Paren(this=inner.columns[name].copy())

    return part.copy().transform(computed)


def refused(query: Query) -> bool:
    """Whether the session's check refuses the plan of ``query`` (reads no data)."""
    try:
        query.session.check(query.plan)
    except (InvalidArgumentError, InvalidValueError):
        return True
    return False


def _start(stages: Sequence[Stage], steps: Sequence[Step]) -> int:
    """Where the JOINs' steps start (after the FROM's own)."""
    return stages[0].start if stages else len(steps)


def _truncates(steps: Sequence[Step]) -> bool:
    """Whether some of ``steps`` keep a number of rows per person (a private join, a flat map)."""
    return any(isinstance(s, PrivateJoin | FlatMap) for s in steps)


def _inner_join(stage: Stage, steps: Sequence[Step]) -> bool:
    """Whether a stage is one INNER join of a private table (its right side can be filtered)."""
    step = steps[stage.start] if stage.end - stage.start == 1 else None
    return isinstance(step, PrivateJoin) and step.how == "inner"


def _filter(query: Query, steps: list[Step], conditions: list[pl.Expr]) -> list[Step]:
    """``steps`` and a filter of the ANDed ``conditions`` (the builder's), if there are any."""
    if not conditions:
        return steps
    kept = functools.reduce(operator.and_, conditions)
    return list(Query(query.session, Plan(steps=tuple(steps))).filter(kept).plan.steps)
