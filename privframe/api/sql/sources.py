"""Private row sources of FROM: a JOIN of two private tables, and ``CROSS JOIN UNNEST``.

Both are the builder's steps over units, with limits the Session states per
private table (``contributions={"orders": pf.Bound(max_rows=5), ...}``):

* ``FROM orders o JOIN visits v ON o.uid = v.uid`` (``INNER``, ``LEFT``,
  ``USING (uid)``, more equal columns with ``AND``) is
  ``sess.query("orders").join_private(sess.query("visits"), on=["uid"],
  left_rows=l, right_rows=r)``: each side keeps at most its table's
  ``max_rows`` rows per person (``l`` and ``r``; a left side that is already a
  join or a flat map keeps what its steps enforce), so a person has at most
  ``l·r`` joined rows, the limit the planner derives. The condition must
  equate the two sides' privacy unit columns: a row joined across two people
  would belong to both (the builder's reason). A column of the right table
  that the left side has too is ``<name>_right`` in the plan (the builder's
  ``suffix``); SQL names it ``v.name``, and an unqualified name that both
  sides have is refused as ambiguous.
* ``JOIN (SELECT * FROM visits WHERE dx <> 'cut') v`` (or some of its
  columns, ``SELECT uid, dx``) is ``join_private(sess.query("visits")
  .filter(...))``: the right table's rows are filtered before they are
  truncated. The subquery may do nothing else. The query's own WHERE filters
  each table before its truncation too (:mod:`~privframe.api.sql.where`).
* ``CROSS JOIN UNNEST(o.items) AS t(item)`` (or ``, UNNEST(o.items) AS item``)
  is ``flat_map("items", max_rows=M, name="item")``, ``M`` the ``max_rows`` of
  the table the list column comes from: without it, one person's lists could
  make any number of rows, so it is refused.

A join or flat map whose limits are missing is refused before anything is
charged, with the ``contributions=`` to give.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> orders = pl.DataFrame({"uid": [1, 2], "amount": [3.0, 4.0]})
    >>> visits = pl.DataFrame({"uid": [1, 1], "dx": ["a", "b"]})
    >>> sess = pf.Session({"orders": orders, "visits": visits}, "uid", pf.zCDP(1.0),
    ...     contributions={"orders": pf.Bound(max_groups=1, max_rows=2),
    ...                    "visits": pf.Bound(max_rows=3)},
    ...     metadata={"dx": pf.Column(keys=["a", "b"])})
    >>> q = sess.sql("SELECT dx, COUNT(*) AS n FROM orders o JOIN visits v ON o.uid = v.uid "
    ...              "GROUP BY dx")
    >>> q.explain(rho=0.5).bound.split("; ")[0]
    'join_private(visits): at most 2 left × 3 right rows per unit: M ≤ 6'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import polars as pl
from sqlglot import exp

from privframe.api.query import Query
from privframe.api.sql._common import (
    builder_refusal,
    identifier,
    lookup,
    only,
    refuse,
    resolve,
    unsupported,
)
from privframe.engines.spec import PrivateJoin
from privframe.errors import SQLError
from privframe.plan.ir import Bound, Plan
from privframe.plan.stages import stage_limits

SUFFIX = "_right"
"""What a right-side column the left side has too is called after, as the builder's default."""


@dataclass(frozen=True)
class Private:
    """The Session's private tables as SQL reads them: names, columns, unit and limits.

    Attributes:
        tables: each private table's columns, by name (the first is the default).
        unit: the privacy unit column (None: each row is a unit).
        contributions: each table's default limits (the Session's ``contributions``).
        override: the query's own limits (``sql(..., contributions=...)``), which
            replace those of the table FROM reads.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.sql.sources import Private
        >>> private = Private({"a": ["u"], "b": ["u"]}, "u", {"b": pf.Bound(max_rows=2)})
        >>> private.limits("b", source="a"), private.limits("a", source="a")
        (Bound(max_groups=None, max_rows_per_group=None, max_rows=2), None)
    """

    tables: Mapping[str, Sequence[str]]
    unit: str | None = None
    contributions: Mapping[str, Bound] = dataclasses.field(default_factory=dict)
    override: Bound | None = None

    def limits(self, table: str, source: str) -> Bound | None:
        """The limits of ``table`` in a query that reads FROM ``source``."""
        if self.override is not None and table == source:
            return self.override
        return self.contributions.get(table)

    def query(self, query: Query, table: str) -> Query:
        """A fresh query of the private ``table`` of ``query``'s session (as ``sess.query``)."""
        first = next(iter(self.tables), None)
        return Query(query.session, Plan(table=None if table == first else table))


class Names(Protocol):
    """The names a row source is read with: :class:`~privframe.api.sql.scope.Scope` is one."""

    private: Private
    source: str  # the private table FROM reads

    def column(self, node: exp.Column) -> str:
        """The column of the plan ``node`` names."""
        ...

    def available(self) -> list[str]:
        """The columns a row expression can name, as SQL names them."""
        ...

    def taken(self, name: str) -> bool:
        """Whether a column already has ``name``, ignoring case."""
        ...

    def owner(self, node: exp.Column) -> str:
        """The private table a column comes from."""
        ...

    def add_source(
        self,
        named: exp.Expr | None,
        table: str | None,
        columns: Sequence[str],
        renamed: Mapping[str, str],
        *,
        owner: str,
        null_keys: Sequence[str] = (),
    ) -> None:
        """Register a joined private table or an UNNEST's element."""
        ...


def join_private(
    scope: Names,
    query: Query,
    join: exp.Join,
    table: str,
    *,
    right: Query | None = None,
    columns: Sequence[str] | None = None,
) -> Query:
    """``query`` joined with the private ``table`` of ``join``, each side truncated.

    ``right`` is the query of the table's rows when a subquery filters them
    (``JOIN (SELECT uid, dx FROM visits WHERE ...) v``), and ``columns`` the
    columns it names; by default, the whole table.

    Raises:
        SQLError: a join kind other than INNER or LEFT, a condition that is not
            equal columns of the same name with the privacy unit among them, or
            a side without a row limit; nothing is charged.
    """
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if kind == "CROSS":
        raise unsupported(
            join, f"CROSS JOIN of the private table {table!r}", _on_the_unit(scope, table)
        )
    if (
        side not in ("", "LEFT")
        or kind not in ("", "INNER", "OUTER")
        or (kind == "OUTER" and side != "LEFT")
    ):
        written = f"{side} {kind} JOIN".strip().replace("  ", " ")
        raise unsupported(join, written, "join private tables with [INNER] JOIN or LEFT JOIN")
    how: Literal["inner", "left"] = "left" if side == "LEFT" else "inner"
    target = join.this
    only(target, {"this", "alias"}, "a JOIN")
    everything = list(scope.private.tables[table])
    columns = everything if columns is None else list(columns)
    subquery = isinstance(target, exp.Subquery)
    names = [*([] if subquery else [table]), *([target.alias] if target.alias else [])]
    using, on = join.args.get("using"), join.args.get("on")
    if using:
        pairs = [(_using(scope, column, columns, table), column) for column in using]
    elif on is not None:
        pairs = _equalities(scope, on, names, columns, table)
    else:
        raise unsupported(
            join, f"a JOIN of {table!r} without ON or USING", _on_the_unit(scope, table)
        )
    condition = on if on is not None else join
    other = scope.private.query(query, table) if right is None else right
    unit = scope.private.unit
    if all(mine != unit or theirs != unit for (mine, theirs), _ in pairs):
        # The builder's refusal, with the keys as written: the unit is not equal on both sides.
        named = list(dict.fromkeys(mine if mine != unit else theirs for (mine, theirs), _ in pairs))
        builder_refusal(
            lambda: query.join_private(other, named, left_rows=1, right_rows=1, how=how),
            "the JOIN cannot be built",
            condition,
            "JOIN",
        )
    for (mine, theirs), node in pairs:
        if mine != theirs:
            raise refuse(
                node,
                "JOIN",
                f"the join condition {node.sql()} compares {mine!r} with {theirs!r}: private "
                "tables are joined on columns of the same name",
            )
    keys = list(dict.fromkeys(mine for (mine, _), _ in pairs))
    left_rows = stage_limits(query.plan.steps, ()).max_rows or _max_rows(scope, scope.source)
    right_rows = _max_rows(scope, table)
    if left_rows is None or right_rows is None:
        missing = [t for t, rows in ((scope.source, left_rows), (table, right_rows)) if not rows]
        what = (
            f"JOIN (SELECT ... FROM {table}) {target.alias}" if subquery else f"JOIN {target.sql()}"
        )
        raise _no_row_limit(scope, join, what, list(dict.fromkeys(missing)))
    joined = builder_refusal(
        lambda: query.join_private(
            other, keys, left_rows=left_rows, right_rows=right_rows, how=how, suffix=SUFFIX
        ),
        "the JOIN cannot be built",
        condition,
        "JOIN",
    )
    left = builder_refusal(
        lambda: query.session.check(query.plan), "the JOIN cannot be built", join, "JOIN"
    )
    # The plan keeps every column of the table, those a subquery leaves out too.
    renamed = {c: f"{c}{SUFFIX}" for c in everything if c not in keys and c in left}
    taken = [(old, new) for old, new in renamed.items() if new in left]
    if taken:
        (old, new), *_ = taken
        raise refuse(target, "JOIN", _suffix_taken(scope, query, table, old, new))
    named = target.args.get("alias") if subquery else target
    shown = {c: new for c, new in renamed.items() if c in columns}
    scope.add_source(
        named, table, columns, shown, owner=table, null_keys=keys if how == "left" else ()
    )
    return joined


def _suffix_taken(scope: Names, query: Query, table: str, old: str, new: str) -> str:
    """Why a right column's joined name is taken, and what the user can rename to free it.

    A name a subquery gave can change there. A data column, or one an earlier
    JOIN named, stays in the plan whatever a subquery selects (a joined table
    keeps all its columns), so it is renamed in a DataFrame the Session reads:
    one of a table the query reads once, so that its new name meets no copy of
    itself. A table joined to itself three times has no such table: the
    builder's ``join_private`` takes another ``suffix``.
    """
    lead = (
        f"the column {old!r} of {table!r} would be called {new!r} after the join, and the left "
        f"side has a column {new!r} already"
    )
    joins = [s for s in query.plan.steps if isinstance(s, PrivateJoin)]
    earlier = [
        s.table for s in joins if new in (f"{c}{s.suffix}" for c in scope.private.tables[s.table])
    ]
    data = [t for t, columns in scope.private.tables.items() if new in columns]
    if not earlier and not data:
        return f"{lead}, named by a subquery: name it something else there"
    read = [scope.source, *(s.table for s in joins), table]
    # Renamed in the joined table, or in the table whose column an earlier JOIN suffixed (that
    # JOIN's or the left one's): a table read twice would meet its renamed copy again.
    first = [scope.source] if old in scope.private.tables[scope.source] else []
    once = [t for t in (table, *earlier, *first) if read.count(t) == 1]
    if not once:
        unit = scope.private.unit
        return (
            f"{lead}, made by an earlier JOIN of the same table. Join them with the builder, "
            f"which takes another suffix: q.join_private(sess.query({table!r}), on={unit!r}, "
            f"left_rows=..., right_rows=..., suffix='_2')"
        )
    renamed = once[0]
    column = old if renamed in (table, scope.source) else new.removesuffix(SUFFIX)
    return (
        f"{lead}" + (f" (the JOIN of {earlier[0]!r} named it)" if earlier else "") + ": a joined "
        f"table keeps all its columns, whatever a subquery selects. Give {column!r} another name "
        f"in the DataFrame the Session reads as {renamed!r}, e.g. "
        f"{renamed}.rename({{{column!r}: '{renamed}_{column}'}}), or leave it out there if the "
        "query does not read it"
    )


def _on_the_unit(scope: Names, table: str) -> str:
    unit = scope.private.unit or "<privacy unit>"
    return (
        f"join it on the privacy unit, e.g. JOIN {table} t ON <left>.{unit} = t.{unit}, or "
        f"JOIN {table} USING ({unit})"
    )


def _using(scope: Names, column: exp.Expr, columns: list[str], table: str) -> tuple[str, str]:
    """A USING column: its name on the left side and in the right table."""
    mine = scope.column(exp.Column(this=column.copy()))
    return mine, resolve(column, columns, f"in the table {table!r}")


def _equalities(
    scope: Names, condition: exp.Expr, names: list[str], columns: list[str], table: str
) -> list[tuple[tuple[str, str], exp.Expr]]:
    """The (left, right) columns of ``l.c = r.c AND ...``, each with its equality."""
    if isinstance(condition, exp.And):
        first = _equalities(scope, condition.this, names, columns, table)
        return first + _equalities(scope, condition.expression, names, columns, table)
    if isinstance(condition, exp.Paren):
        return _equalities(scope, condition.this, names, columns, table)
    if not (
        isinstance(condition, exp.EQ)
        and isinstance(condition.this, exp.Column)
        and isinstance(condition.expression, exp.Column)
    ):
        unit = scope.private.unit
        raise unsupported(
            condition,
            f"the join condition {condition.sql()}",
            "join private tables on equal columns of the same name, the privacy unit among "
            f"them (l.{unit} = r.{unit} AND l.c = r.c, or USING ({unit}))",
        )
    a, b = condition.this, condition.expression
    sides = (_side(scope, a, names, columns), _side(scope, b, names, columns))
    if sides[0] == sides[1]:
        raise refuse(
            condition,
            "JOIN",
            f"the join condition {condition.sql()} compares two columns of the "
            f"{'right table' if sides[0] else 'left side'}: compare a column of each side",
        )
    left, right = (b, a) if sides[0] else (a, b)
    theirs = resolve(right, columns, f"in the table {table!r}")
    return [((scope.column(left), theirs), condition)]


def _side(scope: Names, column: exp.Column, names: list[str], columns: list[str]) -> bool:
    """Whether a column of a join condition is the right table's (True) or the left side's."""
    if column.table:
        return bool(lookup(*identifier(column.args["table"]), names))
    name, quoted = identifier(column)
    mine, theirs = lookup(name, quoted, scope.available()), lookup(name, quoted, columns)
    if mine and theirs:
        raise refuse(
            column,
            "JOIN",
            f"the column {name!r} of the join condition is on both sides: qualify it, "
            f"e.g. {names[-1]}.{name}",
        )
    return bool(theirs)


def _max_rows(scope: Names, table: str) -> int | None:
    limits = scope.private.limits(table, scope.source)
    return None if limits is None else limits.max_rows


def _no_row_limit(scope: Names, node: exp.Expr, what: str, tables: Sequence[str]) -> SQLError:
    """The refusal of a join or flat map whose tables give no ``max_rows``, with what to give."""
    private = scope.private

    def with_rows(table: str) -> str:
        given = private.limits(table, scope.source) or Bound()
        return _bound(dataclasses.replace(given, max_rows=given.max_rows or 5))

    if len(private.tables) > 1:
        named = [t for t in private.tables if t in private.contributions or t in tables]
        example = "contributions={" + ", ".join(f"{t!r}: {with_rows(t)}" for t in named) + "}"
    else:
        example = f"contributions={with_rows(tables[0])}"
    names = " and ".join(repr(t) for t in tables)
    made = "join" if what.startswith("JOIN") else "flat map"
    return refuse(
        node,
        what,
        f"{what} needs the max_rows of {names}: the most rows one person has there, which "
        f"bounds the rows the {made} makes per person (without it the {made} is unbounded: "
        f"one person could add any number of rows). Give it on the Session, e.g. {example}. "
        "Nothing was charged",
    )


def _bound(bound: Bound) -> str:
    """A Bound as it is written, only the limits it has: ``pf.Bound(max_rows=5)``."""
    fields = {f.name: getattr(bound, f.name) for f in dataclasses.fields(bound)}
    return "pf.Bound(" + ", ".join(f"{k}={v}" for k, v in fields.items() if v is not None) + ")"


def unnest(scope: Names, query: Query, join: exp.Join) -> Query:
    """``query`` with a row per element of a list column: ``CROSS JOIN UNNEST(col) AS t(item)``.

    Raises:
        SQLError: not a CROSS (or comma) join of one column's UNNEST with a
            name for its element, or its table gives no ``max_rows``.
    """
    node = join.this
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if side or kind not in ("", "CROSS") or join.args.get("on") or join.args.get("using"):
        written = f"{side} {kind} JOIN UNNEST".strip().replace("  ", " ")
        raise unsupported(
            join,
            written,
            "write CROSS JOIN UNNEST(list_column) AS t(item): a row per element, and none for "
            "an empty or NULL list",
        )
    only(node, {"expressions", "alias"}, "UNNEST")
    (listed, *more) = node.expressions
    if more or not isinstance(listed, exp.Column):
        raise unsupported(
            node,
            f"UNNEST({', '.join(e.sql() for e in node.expressions)})",
            "UNNEST one list column: UNNEST(items)",
        )
    column = scope.column(listed)
    alias = node.args.get("alias")
    named = list(alias.args.get("columns") or []) if isinstance(alias, exp.TableAlias) else []
    if alias is None or not alias.name or len(named) > 1:
        raise unsupported(
            node,
            f"{node.sql()} without one name for its element" if len(named) < 2 else node.sql(),
            f"name the element: CROSS JOIN UNNEST({listed.sql()}) AS t(item), then use t.item",
        )
    element = exp.Column(this=(named[0] if named else alias.this).copy())
    name = identifier(element)[0]
    if scope.taken(name):
        raise refuse(
            element,
            "UNNEST",
            f"the element of {node.sql()} would be called {name!r}, which a column already "
            "is: name it something new",
        )
    schema = builder_refusal(
        lambda: query.session.check(query.plan), "the UNNEST cannot be built", node, "UNNEST"
    )
    if column in schema and not isinstance(schema[column], pl.List):
        raise refuse(
            listed,
            "UNNEST",
            f"UNNEST({listed.sql()}) needs a list column, and {listed.sql()} has type "
            f"{schema[column]}: "
            "UNNEST makes a row per element of a list (a polars List column, such as an "
            "order's items)",
        )
    owner = scope.owner(listed)
    limits = scope.private.limits(owner, scope.source)
    max_rows = None if limits is None else limits.max_rows
    if max_rows is None:
        raise _no_row_limit(scope, node, f"UNNEST({listed.sql()})", [owner])
    mapped = builder_refusal(
        lambda: query.flat_map(column, max_rows=max_rows, name=name),
        "the UNNEST cannot be built",
        node,
        "UNNEST",
    )
    scope.add_source(alias if named else None, None, [name], {}, owner=owner)
    return mapped
