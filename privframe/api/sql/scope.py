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

import re
from collections.abc import Mapping, Sequence

import polars as pl
from sqlglot import exp

from privframe.api.query import Query
from privframe.api.sql._common import (
    TABLE,
    identifier,
    lookup,
    misspelt_keyword,
    only,
    refuse,
    resolve,
    unsupported,
)
from privframe.api.sql.metadata import Column, entry
from privframe.api.sql.rows import Rows


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
    ) -> None:
        self.text = text
        self.tables = tables
        self._columns = list(columns)
        self._metadata = metadata
        self.aliases: dict[str, str] = {}  # table aliases (as written) -> table names
        self.joined: list[str] = []  # the public tables joined so far
        self.derived: dict[str, pl.Expr] = {}
        self.rows = Rows(self.column)
        # Names a derived column must not take: it would replace the data's column.
        self._existing = set(columns).union(*(t.columns for t in tables.values()))

    # -- names

    def columns_of(self, table: str) -> list[str]:
        """The columns of the private table or of a public table."""
        return list(self._columns if table == TABLE else self.tables[table].columns)

    def available(self) -> list[str]:
        """The columns a row expression can name: the data's and those of the joined tables."""
        return [c for table in (TABLE, *self.joined) for c in self.columns_of(table)]

    def column(self, node: exp.Column) -> str:
        """The data (or joined table) column ``node`` names, matched as SQL matches names."""
        if not node.table:
            return resolve(node, self.available(), "in the data or the joined tables")
        qualifier = node.args["table"]
        if not lookup(*identifier(qualifier), self.aliases):
            raise unsupported(node, f"the table {node.table!r}", "it is not in FROM or JOIN")
        table = self.aliases[resolve(qualifier, self.aliases, "in FROM or JOIN", kind="table")]
        where = "in the data" if table == TABLE else f"in the table {table!r}"
        return resolve(node, self.columns_of(table), where)

    def canonical(self, node: exp.Expr) -> exp.Expr:
        """``node`` with every column spelt as the column it names, without table prefix.

        So ``d.Region`` and ``region`` compare equal, as they name the same column.
        """
        return node.transform(
            lambda n: exp.column(self.column(n), quoted=True) if isinstance(n, exp.Column) else n
        )

    def metadata(self, name: str) -> Column | None:
        """The metadata entry of a column or alias (:func:`~privframe.api.sql.metadata.entry`)."""
        return entry(self._metadata, name)

    def derive(self, expr: pl.Expr, name: str) -> str:
        """Add a derived column under ``name``, or ``name_2``, ... if that is taken."""
        chosen, n = name, 1
        while chosen in self._existing or chosen in self.derived:
            n += 1
            chosen = f"{name}_{n}"
        self.derived[chosen] = expr
        return chosen

    def _alias(self, table: exp.Table, owner: str) -> None:
        """Register ``table``'s alias, refusing a misspelt keyword (``FROM data WHER``)."""
        alias = table.args.get("alias")
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
        """``query`` reading the FROM clause: the private table, optionally aliased."""
        source = select.args.get("from_") or select.args.get("from")
        if source is None:
            raise unsupported(select, "a SELECT without FROM", f"select FROM {TABLE}")
        only(source, {"this"}, "FROM")
        table = source.this
        if not isinstance(table, exp.Table) or not lookup(*identifier(table), [TABLE]) or table.db:
            raise unsupported(
                table, f"FROM {table.sql()}", f"the private table is called {TABLE!r}"
            )
        only(table, {"this", "alias"}, "FROM")
        self.aliases[TABLE] = TABLE
        self._alias(table, TABLE)
        return query

    def join(self, query: Query, join: exp.Join) -> Query:
        """``query`` joined with the public table of ``join``, on columns of the same name."""
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

    def _joined_table(self, join: exp.Join) -> str:
        """The registered public table a JOIN names, after refusing what a JOIN cannot have."""
        table = join.this
        if not isinstance(table, exp.Table):
            raise unsupported(table, "a JOIN on something other than a table")
        method = join.args.get("method")
        if method:
            raise unsupported(join, f"{str(method).upper()} JOIN", "join with ON or USING")
        only(join, {"this", "on", "using", "side", "kind"}, "a JOIN")
        only(table, {"this", "alias"}, "a JOIN")
        if not lookup(*identifier(table), self.tables):
            raise unsupported(
                table,
                f"JOIN {table.name!r}",
                f"only public tables registered on the Session (tables=) can be joined; "
                f"registered: {sorted(self.tables)}",
            )
        return resolve(table.this, self.tables, "among the public tables", kind="table")

    def _using(self, column: exp.Expr, table: str) -> str:
        """A USING column: one name, in the data and in the public table alike."""
        mine = resolve(column, self.columns_of(TABLE), "in the data")
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
