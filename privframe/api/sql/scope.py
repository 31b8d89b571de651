"""FROM and JOIN: the tables a SELECT reads, and the column each of its names denotes.

As in SQL, unquoted names match columns, aliases and tables whatever their
case (two columns differing only in case make one ambiguous), quoted names
match exactly. Only the private table ``data`` and public tables registered on
the Session (``tables=``) can be read, joined on columns of the same name.

Example:
    >>> import polars as pl
    >>> import sqlglot
    >>> import privframe as pf
    >>> from privframe.api.sql.scope import Scope
    >>> sess = pf.Session(pl.DataFrame({"region": ["a"], "x": [1.0]}), None, pf.zCDP(1.0))
    >>> scope = Scope("SELECT Region FROM data AS d", ["region", "x"], {}, {})
    >>> query = scope.read_from(sqlglot.parse_one(scope.text), sess.query())
    >>> scope.column(sqlglot.parse_one("d.REGION"))
    'region'
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from sqlglot import exp

from privframe.api.query import Query
from privframe.api.sql._common import (
    TABLE,
    construct,
    identifier,
    literal_value,
    lookup,
    misspelt_keyword,
    only,
    refuse,
    resolve,
    unsupported,
)
from privframe.api.sql.metadata import Column, entry
from privframe.api.sql.rows import Rows
from privframe.engines.names import same_ignoring_case
from privframe.errors import SQLError

_PRIVATE = "\x00private"
"""The private table's key among the tables: no SQL name spells it, so no public table has it."""


class Scope:
    """The names one SELECT can use: its tables and their aliases, columns and derived columns.

    Args:
        text: the SQL text (to tell an alias written after AS).
        columns: the private table's columns.
        tables: the public tables that can be joined, by name.
        metadata: the bounds, keys and quantile candidates, by column or alias.
    """

    def __init__(
        self,
        text: str,
        columns: Sequence[str],
        tables: Mapping[str, pl.DataFrame],
        metadata: Mapping[str, Column],
        table: str = TABLE,
    ) -> None:
        self.text = text
        self.tables = tables
        self.table = table
        self._data = list(columns)
        self._columns = list(columns)
        self._metadata = metadata
        self._renamed: dict[str, str] = {}  # subquery aliases of data columns -> the columns
        self._ctes: dict[str, exp.Select] = {}  # the WITH clause's row sources, by name
        self.listed: dict[str, tuple[Any, ...]] = {}  # BigQuery's public groups, by column
        self.aliases: dict[str, str] = {}  # table aliases (as written) -> table names
        self.joined: list[str] = []  # the public tables joined so far
        self.derived: dict[str, pl.Expr] = {}
        self.rows = Rows(self.column)
        # Names a derived column must not take: it would replace the data's column.
        self._existing = set(columns).union(*(t.columns for t in tables.values()))

    # -- names

    def columns_of(self, table: str) -> list[str]:
        """The columns of the private table or of a public table."""
        return list(self._columns if table == _PRIVATE else self.tables[table].columns)

    def available(self) -> list[str]:
        """The columns a row expression can name: the data's and those of the joined tables."""
        return [c for table in (_PRIVATE, *self.joined) for c in self.columns_of(table)]

    def column(self, node: exp.Column) -> str:
        """The data (or joined table) column ``node`` names, matched as SQL matches names."""
        if not node.table:
            return resolve(node, self.available(), "in the data or the joined tables")
        qualifier = node.args["table"]
        if not lookup(*identifier(qualifier), self.aliases):
            raise unsupported(node, f"the table {node.table!r}", "it is not in FROM or JOIN")
        table = self.aliases[resolve(qualifier, self.aliases, "in FROM or JOIN", kind="table")]
        where = "in the data" if table == _PRIVATE else f"in the table {table!r}"
        return resolve(node, self.columns_of(table), where)

    def is_private(self, qualifier: exp.Expr) -> bool:
        """Whether a column's qualifier (``d`` in ``d.id``) names the private table or its alias."""
        found = lookup(*identifier(qualifier), self.aliases)
        return len(found) == 1 and self.aliases[found[0]] == _PRIVATE

    def canonical(self, node: exp.Expr) -> exp.Expr:
        """``node`` with every column spelt as the column it names, without table prefix.

        So ``d.Region`` and ``region`` compare equal, as they name the same column.
        """
        return node.transform(
            lambda n: exp.column(self.column(n), quoted=True) if isinstance(n, exp.Column) else n
        )

    def metadata(self, name: str, node: exp.Expr) -> Column | None:
        """The metadata entry of a column or alias (:func:`~privframe.api.sql.metadata.entry`).

        A subquery's new name for a data column (``SELECT age AS a``) has the
        column's entry unless it has its own. ``node`` is what asks for it,
        where a refusal (two keys that differ only in case) is located.
        """
        source = self._renamed.get(name)
        ambiguous = None
        try:
            found = entry(self._metadata, name)
            found = entry(self._metadata, source) if found is None and source else found
        except SQLError as err:
            ambiguous = err
        if ambiguous is not None:  # raised outside the handler: no context rides along
            raise refuse(node, ambiguous.construct, str(ambiguous))
        if name in self.listed:  # the query's own list of groups is its keys
            found = dataclasses.replace(found or Column(), keys=self.listed[name])
        return found

    def taken(self, name: str) -> bool:
        """Whether a column of the data, a public table or a derivation has ``name``, ignoring case.

        Case counts: an engine that matches names ignoring case (Spark) would
        take a new ``U`` for the unit column ``u``.
        """
        return any(same_ignoring_case(name, c) for c in (*self._existing, *self.derived))

    def derive(self, expr: pl.Expr, name: str) -> str:
        """Add a derived column under ``name``, or ``name_2``, ... if that is taken."""
        chosen, n = name, 1
        while self.taken(chosen):
            n += 1
            chosen = f"{name}_{n}"
        self.derived[chosen] = expr
        return chosen

    def _alias(self, table: exp.Table, owner: str) -> None:
        """Register ``table``'s alias, refusing a misspelt keyword (``FROM data WHER``)."""
        alias = table.args.get("alias")
        _refuse_column_aliases(alias)
        if alias is None or not table.alias:
            return
        name, quoted = identifier(alias.this)
        # An alias written after AS is meant as one, whatever it looks like (AS grp).
        keyword = None if quoted or self._after_as(alias.this) else misspelt_keyword(name)
        if keyword is not None:
            raise refuse(
                alias,
                "syntax",
                f"{name!r} reads as an alias of the table {owner!r} but looks like a misspelt "
                f'{keyword}: correct the keyword, or quote the alias ("{name}") to keep it',
            )
        self.aliases[name] = owner

    def _after_as(self, node: exp.Expr) -> bool:
        """Whether the keyword AS stands right before ``node`` in the SQL text."""
        start = (getattr(node, "meta", None) or {}).get("start")
        if start is None:
            return False
        before = self.text[: int(start)].rstrip()
        return re.search(r"(^|[^\w])AS$", before, re.IGNORECASE) is not None

    # -- FROM and JOIN

    def read_from(self, select: exp.Select, query: Query) -> Query:
        """``query`` reading the FROM clause: the private table, a row subquery or a CTE.

        A subquery (``FROM (SELECT ...)``) or common table expression (``WITH t
        AS (SELECT ...)``) over the private table that only filters rows and
        computes row expressions is the same plan as the outer query with its
        WHERE and its columns: its WHERE becomes a filter, its expressions
        derived columns, and the outer query sees only its select list.
        Anything that aggregates, limits or joins inside it is refused: that
        would aggregate twice over private rows.
        """
        with_ = select.args.get("with_")
        if with_ is not None:
            self._common_tables(with_)
        source = select.args.get("from_") or select.args.get("from")
        if source is None:
            raise unsupported(select, "a SELECT without FROM", f"select FROM {self.table}")
        only(source, {"this"}, "FROM")
        node = source.this
        inner = self._row_source(node)
        if inner is not None:
            query = self._inline(inner, query)
        elif not isinstance(node, exp.Table) or not self._names_private(node):
            cte = f" or the common table expressions {sorted(self._ctes)}" if self._ctes else ""
            raise unsupported(
                node, f"FROM {node.sql()}", f"the private table is called {self.table!r}{cte}"
            )
        only(node, {"this", "alias", "db", "catalog"}, "FROM")
        if isinstance(node, exp.Table):
            self.aliases[node.name] = _PRIVATE  # data.col, PUMS.col, older.col
        self._alias(node, _PRIVATE)
        return query

    def _names_private(self, table: exp.Table) -> bool:
        """Whether ``table`` (e.g. ``PUMS.PUMS``) names the private table, as SQL matches names."""
        parts = [p for p in (table.args.get("catalog"), table.args.get("db"), table.this) if p]
        wanted = self.table.split(".")
        return len(parts) == len(wanted) and all(
            lookup(*identifier(part), [name]) for part, name in zip(parts, wanted, strict=True)
        )

    def _common_tables(self, with_: exp.With) -> None:
        """Register the WITH clause's tables; each sees only the ones before it."""
        only(with_, {"expressions"}, "WITH")
        for cte in with_.expressions:
            only(cte, {"this", "alias"}, "WITH")
            _refuse_column_aliases(cte.args.get("alias"))
            if not isinstance(cte.this, exp.Select):
                raise unsupported(cte.this, f"WITH {cte.alias} AS ({construct(cte.this)})")
            if lookup(cte.alias, False, self._ctes):
                raise refuse(cte, "WITH", f"two WITH tables are called {cte.alias!r}")
            self._ctes[cte.alias] = cte.this

    def _row_source(self, node: exp.Expr) -> exp.Select | None:
        """The SELECT a FROM item reads rows from, if it is a subquery or a CTE's name."""
        if isinstance(node, exp.Subquery):
            only(node, {"this", "alias"}, "a subquery in FROM")
            _refuse_column_aliases(node.args.get("alias"))
            if not isinstance(node.this, exp.Select):
                raise unsupported(node.this, f"{construct(node.this)} in FROM")
            return node.this
        if isinstance(node, exp.Table) and not node.args.get("db"):
            found = lookup(*identifier(node), self._ctes)
            return self._ctes[found[0]] if found else None
        return None

    def _inline(self, inner: exp.Select, query: Query) -> Query:
        """``query`` with a row subquery's filter and columns; this scope sees only its columns."""
        for node in inner.find_all(exp.AggFunc, exp.Window, exp.Join):
            what = construct(node) if not isinstance(node, exp.AggFunc) else node.sql()
            raise unsupported(
                node,
                f"{what} inside a subquery or WITH",
                "it would aggregate or combine private rows before the release; a subquery "
                "may only filter rows (WHERE) and compute row expressions. Bound each "
                "person's rows with contributions=pf.Bound(...) instead of pre-aggregating, "
                "and join public tables in the outer query",
            )
        only(inner, {"expressions", "from_", "from", "where"}, "a subquery")
        sub = Scope(self.text, self._data, self.tables, self._metadata, self.table)
        for name, cte in self._ctes.items():  # a WITH table reads only those before it
            if cte is inner:
                break
            sub._ctes[name] = cte
        query = sub.read_from(inner, query)
        where = inner.args.get("where")
        if where is not None:
            query = query.filter(sub.rows(where.this))
        visible: list[str] = []
        derived: dict[str, pl.Expr] = {}
        for item in inner.expressions:
            for name, expr in self._subquery_item(item, sub):
                if lookup(name, False, visible):
                    raise refuse(item, "a subquery", f"two of its columns are called {name!r}")
                visible.append(name)
                if expr is not None:
                    derived[name] = expr
        if derived:
            query = query.with_columns(**derived)
            self._existing |= set(derived)
        self._columns = visible
        return query

    def _subquery_item(self, item: exp.Expr, sub: Scope) -> list[tuple[str, pl.Expr | None]]:
        """The columns one subquery item makes visible, each with its deriving expression.

        The expression is None for a column of the subquery's own FROM, kept
        as it is. A new name for a column (``age AS a``) keeps the column's metadata
        (:meth:`metadata`), through any depth of subqueries.
        """
        star = item if isinstance(item, exp.Star) else item.this
        modifiers = ("except", "except_", "replace", "rename")
        if isinstance(star, exp.Star) and any(star.args.get(k) for k in modifiers):
            raise unsupported(star, "SELECT * EXCEPT/REPLACE", "name the subquery's columns")
        if isinstance(item, exp.Star):
            self._renamed.update(sub._renamed)
            return [(c, None) for c in sub.available()]
        if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            table = sub.aliases[resolve(item.args["table"], sub.aliases, "in FROM")]
            return [(c, None) for c in sub.columns_of(table)]
        name = item.alias_or_name
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column):
            column = sub.column(node)
            source = sub._renamed.get(column, column)
            if column.casefold() == name.casefold():  # the column itself, however spelt
                self._renamed.update({column: source} if source != column else {})
                return [(column, None)]
            if self.taken(name):
                raise self._shadowing(item, name)
            self._renamed[name] = source
        elif not isinstance(item, exp.Alias):
            raise refuse(item, "a subquery", f"name the subquery's column {item.sql()} (AS name)")
        elif self.taken(name):
            raise self._shadowing(item, name)
        return [(name, sub.rows(node))]

    @staticmethod
    def _shadowing(item: exp.Expr, name: str) -> SQLError:
        return refuse(
            item,
            "a subquery",
            f"the subquery's column {name!r} would replace a column of the data with "
            f"{item.sql()}, whose bounds and keys differ: name it something new",
        )

    def join(self, query: Query, join: exp.Join) -> Query:
        """``query`` joined with the public table of ``join``, on columns of the same name.

        BigQuery's public groups, ``RIGHT OUTER JOIN (SELECT DISTINCT g FROM
        UNNEST([...])) USING (g)``, join nothing: the list is the public keys
        of the group column ``g`` (:meth:`listed_groups`).
        """
        if isinstance(join.this, exp.Subquery):
            self.listed_groups(join)
            return query
        name = self._joined_table(join)
        side = (join.side or "").upper()
        kind = (join.kind or "").upper()
        if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
            raise unsupported(join, f"{side} {kind} JOIN".strip().replace("  ", " "))
        if kind == "OUTER" and side != "LEFT":
            raise unsupported(join, "FULL OUTER JOIN")
        self.aliases[name] = name
        self._alias(join.this, name)
        self.joined.append(name)
        using = join.args.get("using")
        if using:
            on = [self._using(column, name) for column in using]
        elif join.args.get("on") is not None:
            on = self._equalities(join.args["on"])
        else:
            raise unsupported(join, "a JOIN without ON or USING")
        return query.join(self.tables[name], on=on, how="left" if side == "LEFT" else "inner")

    def listed_groups(self, join: exp.Join) -> None:
        """Read BigQuery's public groups: a RIGHT JOIN on a literal list of one column's values.

        In BigQuery (``group_selection_strategy=PUBLIC_GROUPS``) it reports
        exactly the listed groups, empty ones included, and drops the others:
        what public keys do. Any other joined subquery is refused.
        """
        select = join.this.this
        groups = self._group_list(select) if isinstance(select, exp.Select) else None
        side = (join.side or "").upper()
        using = [identifier(c)[0].casefold() for c in join.args.get("using") or []]
        if groups is None or side != "RIGHT" or using != [groups[0].casefold()]:
            raise unsupported(
                join.this,
                "a subquery in a JOIN",
                "join a public table registered on the Session (tables=); BigQuery's public "
                "groups are written RIGHT OUTER JOIN (SELECT DISTINCT g FROM UNNEST([...])) "
                "USING (g), or given as keys in metadata, e.g. "
                "metadata={'item': pf.Column(keys=['pen', 'pencil'])}",
            )
        column = resolve(join.args["using"][0], self.columns_of(_PRIVATE), "in the data")
        self.listed[column] = groups[1]

    @staticmethod
    def _group_list(select: exp.Select) -> tuple[str, tuple[Any, ...]] | None:
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

    def _joined_table(self, join: exp.Join) -> str:
        """The registered public table a JOIN names, after refusing what a JOIN cannot have."""
        table = join.this
        if not isinstance(table, exp.Table):
            raise unsupported(table, "a JOIN on something other than a table")
        if not table.args.get("db") and lookup(*identifier(table), self._ctes):
            raise unsupported(
                table,
                f"JOIN {table.name!r}",
                "it names a WITH table, which reads the private table: joining private rows "
                "to private rows has no contribution bound",
            )
        method = join.args.get("method")
        if method:
            raise unsupported(join, f"{str(method).upper()} JOIN", "join with ON or USING")
        only(join, {"this", "on", "using", "side", "kind"}, "a JOIN")
        if not lookup(*identifier(table), self.tables) or table.args.get("db"):
            raise unsupported(
                table,
                f"JOIN {'.'.join(p for p in (table.db, table.name) if p)!r}",
                f"only public tables registered on the Session (tables=) can be joined, "
                "never a second private table (a person's rows in both would have no "
                f"contribution bound); registered: {sorted(self.tables)}",
            )
        only(table, {"this", "alias"}, "a JOIN")
        return resolve(table.this, self.tables, "among the public tables", kind="table")

    def _using(self, column: exp.Expr, table: str) -> str:
        """A USING column: one name, in the data and in the public table alike."""
        mine = resolve(column, self.columns_of(_PRIVATE), "in the data")
        theirs = resolve(column, self.columns_of(table), f"in the table {table!r}")
        if mine != theirs:
            raise refuse(
                column,
                "JOIN",
                f"USING ({column.name}) names {mine!r} in the data but {theirs!r} in the table "
                f"{table!r}: joins match columns of the same name",
            )
        return mine

    def _equalities(self, condition: exp.Expr) -> list[str]:
        """Columns of ``a.c = b.c AND ...``: joins must match columns of the same name."""
        if isinstance(condition, exp.And):
            return self._equalities(condition.this) + self._equalities(condition.expression)
        if isinstance(condition, exp.Paren):
            return self._equalities(condition.this)
        if (
            isinstance(condition, exp.EQ)
            and isinstance(condition.this, exp.Column)
            and isinstance(condition.expression, exp.Column)
        ):
            left, right = self.column(condition.this), self.column(condition.expression)
            if left == right:
                return [left]
        raise unsupported(
            condition,
            f"the join condition {condition.sql()}",
            "join on equal columns of the same name (a.col = b.col, or USING (col))",
        )


def _refuse_column_aliases(alias: exp.Expr | None) -> None:
    """Refuse ``AS t(a, b)``: SQL renames the columns by position, which is easy to misread."""
    if isinstance(alias, exp.TableAlias) and alias.args.get("columns"):
        raise unsupported(
            alias, f"the column list of {alias.sql()}", "name the columns in the SELECT (AS name)"
        )
