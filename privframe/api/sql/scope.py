"""FROM and JOIN: the tables a SELECT reads, and the column each of its names denotes.

As in SQL, unquoted names match columns, aliases and tables whatever their
case (two columns differing only in case make one ambiguous), quoted names
match exactly. The Session's private tables (``data``, its ``name``, or the
keys of its tables) and the public tables registered on it (``tables=``) can
be read, joined on columns of the same name; a join of two private tables and
``UNNEST`` are steps over units (:mod:`~privframe.api.sql.sources`), and a
subquery grouped by the privacy unit the per-person stage
(:mod:`~privframe.api.sql.per_unit`). A column of a joined private table that
the left side has too is named with the table (``v.amount``): the plan calls
it ``amount_right``.

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
    builder_refusal,
    construct,
    identifier,
    lookup,
    misspelt_keyword,
    only,
    refuse,
    resolve,
    unsupported,
)
from privframe.api.sql.listed import listed_groups
from privframe.api.sql.metadata import Column, entry
from privframe.api.sql.per_unit import aggregates, per_unit, shadowing
from privframe.api.sql.rows import Rows
from privframe.api.sql.sources import Private, join_private, unnest
from privframe.api.sql.where import FromRows, filter_where, joined
from privframe.engines.names import same_ignoring_case
from privframe.errors import SQLError

_PRIVATE = "\x00private"
"""The private table's key among the tables: no SQL name spells it, so no public table has it."""

_RESOLVED = "privframe_resolved"
"""The mark (in ``meta``) of a column node made resolved: its (table key, column)."""


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
        private: Private | None = None,
    ) -> None:
        self.text = text
        self.tables = tables
        self.table = table
        self.private = private or Private({table: list(columns)})
        self.source = table  # the private table FROM reads (through any subqueries)
        self._columns = list(columns)
        self._metadata = metadata
        self._renamed: dict[str, str] = {}  # subquery aliases of data columns -> the columns
        self._ctes: dict[str, exp.Select] = {}  # the WITH clause's row sources, by name
        self.listed: dict[str, tuple[Any, ...]] = {}  # BigQuery's public groups, by column
        self.aliases: dict[str, str] = {}  # table aliases (as written) -> table names
        self.joined: list[str] = []  # the tables joined so far (keys of aliases' values)
        self._sources: dict[str, list[str]] = {}  # private joins' and UNNESTs' columns, by key
        self._frames: dict[str, dict[str, str]] = {}  # their columns' names in the plan, if new
        self._owners: dict[str, str] = {}  # the private table each of them reads
        self._null_keys: dict[str, list[str]] = {}  # a LEFT JOIN's right keys, NULL in SQL
        self._private_keys: set[str] = set()  # the joined private tables' keys
        self.derived: dict[str, pl.Expr] = {}
        # BigQuery's per-unit clamping (calls.per_group_bounds): set by translate for the query.
        self.per_unit_clamping = False
        self.rows = Rows(self.column)
        self.from_rows: FromRows | None = None  # a FROM subquery's rows, before its WHERE
        # Names a derived column must not take: it would replace the data's column.
        self._existing = set(columns).union(*(t.columns for t in tables.values()))

    # -- names

    def columns_of(self, table: str) -> list[str]:
        """The columns (SQL names) of the private table, a joined source or a public table."""
        if table == _PRIVATE:
            return list(self._columns)
        if table in self._sources:
            return list(self._sources[table])
        return list(self.tables[table].columns)

    def private_columns(self) -> list[str]:
        """The columns of the rows FROM reads (the private table, or its subquery's)."""
        return self.columns_of(_PRIVATE)

    def public_tables(self) -> Mapping[str, pl.DataFrame]:
        """The public tables a name can read: those no WITH table of the same name hides."""
        return {
            name: table
            for name, table in self.tables.items()
            if not lookup(name, False, self._ctes)
        }

    def available(self) -> list[str]:
        """The columns a row expression can name: the data's and those of the joined tables."""
        return [c for table in (_PRIVATE, *self.joined) for c in self.columns_of(table)]

    def in_plan(self) -> list[str]:
        """The columns of the rows read so far, as the plan names them (a suffix on a clash)."""
        return list(
            dict.fromkeys(
                self._frames.get(table, {}).get(c, c)
                for table in (_PRIVATE, *self.joined)
                for c in self.columns_of(table)
            )
        )

    def column(self, node: exp.Column) -> str:
        """The column of the plan ``node`` names, matched as SQL matches names.

        A column of a joined private table that the left side has too is
        ``<name>_right`` in the plan (:mod:`~privframe.api.sql.sources`); named
        without its table, it is ambiguous.
        """
        table, name = self.located(node)
        return self._frames.get(table, {}).get(name, name)

    def owner(self, node: exp.Column) -> str:
        """The private table whose rows a column comes from (its limits bound an UNNEST)."""
        table, _ = self.located(node)
        return self._owners.get(table, self.source)

    def from_column(self, node: exp.Column) -> str | None:
        """The column of FROM's rows that ``node`` names, or None if it names a joined table's."""
        table, name = self.located(node)
        return name if table == _PRIVATE else None

    def column_node(self, name: str, table: str | None = None) -> exp.Column:
        """A column node that names the plan's column ``name`` here (of ``table`` if given).

        It is resolved already: ``SELECT *`` makes names such as
        ``amount_right`` that no SQL spelling reaches in this scope.
        """
        for key in (table,) if table is not None else (_PRIVATE, *self.joined):
            for column in self.columns_of(key):
                if self._frames.get(key, {}).get(column, column) == name:
                    node = exp.column(column, quoted=True)
                    node.meta[_RESOLVED] = (key, column)
                    return node
        raise KeyError(name)

    def located(self, node: exp.Column) -> tuple[str, str]:
        """The table (key) and column (as SQL names it in that table) that ``node`` names.

        A joined private table's column keeps its own name here
        (``v.amount`` is ``amount``), whatever the plan calls it after the join.
        """
        resolved = (getattr(node, "meta", None) or {}).get(_RESOLVED)
        if resolved is not None:
            return resolved
        if not node.table:
            name = resolve(node, self.available(), "in the data or the joined tables")
            having = [t for t in (_PRIVATE, *self.joined) if name in self.columns_of(t)]
            if len({self._frames.get(t, {}).get(name, name) for t in having}) > 1:
                shown = " or ".join(f"{self._written(t)}.{name}" for t in having)
                raise refuse(
                    node,
                    f"the column {name!r}",
                    f"the column {name!r} is in more than one joined table: qualify it, {shown}",
                )
            return having[0], name
        qualifier = node.args["table"]
        if not lookup(*identifier(qualifier), self.aliases):
            raise unsupported(node, f"the table {node.table!r}", "it is not in FROM or JOIN")
        table = self.aliases[resolve(qualifier, self.aliases, "in FROM or JOIN", kind="table")]
        where = "in the data" if table == _PRIVATE else f"in the table {self._written(table)!r}"
        name = resolve(node, self.columns_of(table), where)
        if name in self._null_keys.get(table, ()):
            raise refuse(
                node,
                f"the column {node.sql()}",
                f"{node.sql()} is a key of a LEFT JOIN: SQL makes it NULL where no row of "
                f"{node.table!r} matches, and the join keeps the left side's value there; name "
                "the left side's column instead",
            )
        return table, name

    def _written(self, table: str) -> str:
        """A table (key) as the query names it: its alias, else its name."""
        names = [alias for alias, key in self.aliases.items() if key == table]
        return names[-1] if names else table if table != _PRIVATE else self.source

    def is_private(self, qualifier: exp.Expr) -> bool:
        """Whether a column's qualifier (``d`` in ``d.id``) names a private table or its alias."""
        found = lookup(*identifier(qualifier), self.aliases)
        if len(found) != 1:
            return False
        table = self.aliases[found[0]]
        return table == _PRIVATE or table in self._private_keys

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
        """Register a joined private table (``table``) or an UNNEST's element, read from ``owner``.

        ``named`` is the table node (its name and alias) or UNNEST's alias
        (``t`` of ``AS t(item)``); ``renamed`` maps its columns to their new
        names in the plan; ``null_keys`` are a LEFT JOIN's keys on the right.
        """
        key = f"\x00source{len(self.joined)}"
        if table is not None:
            self._private_keys.add(key)
        self._sources[key] = list(columns)
        self._frames[key] = dict(renamed)
        self._owners[key] = owner
        self._null_keys[key] = list(null_keys)
        if isinstance(named, exp.Table):
            if not lookup(*identifier(named), self.aliases):
                self.aliases[named.name] = key
            self._alias(named, key)
        elif named is not None:
            self.aliases[identifier(named.this)[0]] = key
        self.joined.append(key)
        for column, new in renamed.items():
            self._renamed[new] = self._renamed.get(column, column)
        self._existing |= {renamed.get(c, c) for c in columns}

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
        table = self.private_named(node) if inner is None else None
        if inner is not None:
            query = self._inline(inner, query)
        elif table is None:
            names = list(self.private.tables)
            called = (
                f"the private tables are called {names}"
                if len(names) > 1
                else f"the private table is called {self.table!r}"
            )
            cte = f" or the common table expressions {sorted(self._ctes)}" if self._ctes else ""
            raise unsupported(node, f"FROM {node.sql()}", f"{called}{cte}")
        else:
            self.source = table
            self._columns = list(self.private.tables[table])
            self._existing |= set(self._columns)
            query = self.private.query(query, table)
        only(node, {"this", "alias", "db", "catalog"}, "FROM")
        if isinstance(node, exp.Table):
            self.aliases[node.name] = _PRIVATE  # data.col, PUMS.col, older.col
        self._alias(node, _PRIVATE)
        return query

    def private_named(self, table: exp.Expr) -> str | None:
        """The private table ``table`` (e.g. ``PUMS.PUMS``) names, as SQL matches names, if any.

        A WITH table of the same name comes first, as in SQL.
        """
        if not isinstance(table, exp.Table):
            return None
        parts = [p for p in (table.args.get("catalog"), table.args.get("db"), table.this) if p]
        if len(parts) == 1 and lookup(*identifier(table), self._ctes):
            return None
        for name in self.private.tables:
            wanted = name.split(".")
            if len(parts) == len(wanted) and all(
                lookup(*identifier(part), [n]) for part, n in zip(parts, wanted, strict=True)
            ):
                return name
        return None

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
        """``query`` with a subquery's rows: its joins, filter and columns, or its per-person stage.

        This scope then sees only the subquery's columns. A subquery that
        aggregates is the per-person stage (:mod:`~privframe.api.sql.per_unit`),
        and must group by the privacy unit.
        """
        for node in inner.find_all(exp.Window):
            raise unsupported(
                node,
                f"{construct(node)} inside a subquery or WITH",
                "a row's value would depend on other rows (other people's) before the "
                "release; a subquery may filter rows (WHERE), compute row expressions, join, "
                "and aggregate each person's rows (GROUP BY the privacy unit)",
            )
        staged = aggregates(inner)
        allowed = {"expressions", "from_", "from", "where", "joins"}
        only(inner, allowed | ({"group", "having"} if staged else set()), "a subquery")
        private = self.private
        sub = Scope(self.text, self._columns, self.tables, self._metadata, self.table, private)
        for name, cte in self._ctes.items():  # a WITH table reads only those before it
            if cte is inner:
                break
            sub._ctes[name] = cte
        query = sub.read_from(inner, query)
        stages = []
        for join in inner.args.get("joins") or []:
            if isinstance(join.this, exp.Subquery) and sub.private_rows(join.this) is None:
                raise unsupported(
                    join.this, "a subquery in a JOIN inside a subquery", "join tables by name"
                )
            query, stage = joined(sub, query, join)
            stages.append(stage)
        where = inner.args.get("where")
        unfiltered = query
        if where is not None:
            query = filter_where(sub, query, stages, where.this)
        self.source = sub.source
        self._existing |= sub._existing
        if staged:
            query, columns = per_unit(inner, sub, query, sub.taken)
            for name, column in columns:
                if column is not None and column != name:
                    self._renamed[name] = sub._renamed.get(column, column)
                elif column is not None and column in sub._renamed:
                    self._renamed[column] = sub._renamed[column]
            self._columns = [name for name, _ in columns]
            self._existing |= set(self._columns)
            return query
        visible: list[str] = []
        derived: dict[str, pl.Expr] = {}
        computed: dict[str, exp.Expr] = {}
        for item in inner.expressions:
            for name, expr, computing in self._subquery_item(item, sub):
                if lookup(name, False, visible):
                    raise refuse(item, "a subquery", f"two of its columns are called {name!r}")
                visible.append(name)
                computed[name] = computing
                if expr is not None:
                    derived[name] = expr
        condition = where.this if where is not None else None
        self.from_rows = FromRows(
            sub, unfiltered, tuple(stages), condition, len(query.plan.steps), computed
        )
        if derived:
            query = query.with_columns(**derived)
            self._existing |= set(derived)
        self._columns = visible
        return query

    def _subquery_item(
        self, item: exp.Expr, sub: Scope
    ) -> list[tuple[str, pl.Expr | None, exp.Expr]]:
        """The columns one subquery item makes visible, each with its deriving expression.

        The expression is None for a column of the subquery's own FROM, kept
        as it is. A new name for a column (``age AS a``) keeps the column's metadata
        (:meth:`metadata`), through any depth of subqueries. Each column comes
        with the SQL the subquery computes it by, read in ``sub``.
        """
        star = item if isinstance(item, exp.Star) else item.this
        modifiers = ("except", "except_", "replace", "rename")
        if isinstance(star, exp.Star) and any(star.args.get(k) for k in modifiers):
            raise unsupported(star, "SELECT * EXCEPT/REPLACE", "name the subquery's columns")
        if isinstance(item, exp.Star):
            self._renamed.update(sub._renamed)
            return [(c, None, sub.column_node(c)) for c in sub.in_plan()]
        if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            table = sub.aliases[resolve(item.args["table"], sub.aliases, "in FROM")]
            self._renamed.update(sub._renamed)
            names = [sub._frames.get(table, {}).get(c, c) for c in sub.columns_of(table)]
            return [(c, None, sub.column_node(c, table)) for c in names]
        name = item.alias_or_name
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column):
            column = sub.column(node)
            source = sub._renamed.get(column, column)
            if column.casefold() == name.casefold():  # the column itself, however spelt
                self._renamed.update({column: source} if source != column else {})
                return [(column, None, node)]
            # A joined table's column under its own name (v.amount, amount_right in the plan)
            # may take the name back: its metadata is that name's.
            if self.taken(name) and source != name:
                raise shadowing(item, name)
            self._renamed[name] = source
        elif not isinstance(item, exp.Alias):
            raise refuse(item, "a subquery", f"name the subquery's column {item.sql()} (AS name)")
        elif self.taken(name):
            raise shadowing(item, name)
        return [(name, sub.rows(node), node)]

    def join(self, query: Query, join: exp.Join) -> Query:
        """``query`` joined with the public table of ``join``, on columns of the same name.

        A JOIN of another private table (or of a subquery that filters one),
        or ``CROSS JOIN UNNEST(list_column)``, is a step over units
        (:mod:`~privframe.api.sql.sources`).

        BigQuery's public groups, ``RIGHT OUTER JOIN (SELECT DISTINCT g FROM
        UNNEST([...]) | <public table>) USING (g)``, join nothing: the list (or
        the public table's distinct values) is the public keys of the group
        column ``g`` (:func:`~privframe.api.sql.listed.listed_groups`).
        """
        if isinstance(join.this, exp.Unnest):
            return unnest(self, query, join)
        if isinstance(join.this, exp.Subquery):
            table = self.private_rows(join.this)
            if table is None:
                listed_groups(join, self)
                return query
            self._join_method(join)
            right, columns = self._joined_rows(join.this, query, table)
            return join_private(self, query, join, table, right=right, columns=columns)
        name, private = self._joined_table(join)
        if private:
            return join_private(self, query, join, name)
        left = self.in_plan()
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
            on = [self._using(column, name, left) for column in using]
        elif join.args.get("on") is not None:
            on = self._equalities(join.args["on"])
        else:
            raise unsupported(join, "a JOIN without ON or USING")
        return query.join(self.tables[name], on=on, how="left" if side == "LEFT" else "inner")

    def _joined_table(self, join: exp.Join) -> tuple[str, bool]:
        """The table a JOIN names, and whether it is private, after refusing what it cannot have."""
        table = join.this
        if not isinstance(table, exp.Table):
            raise unsupported(table, "a JOIN on something other than a table")
        if not table.args.get("db") and lookup(*identifier(table), self._ctes):
            raise unsupported(
                table,
                f"JOIN {table.name!r}",
                "it names a WITH table: join the private or public table it reads by name "
                "(JOIN visits v ON ...), and filter or compute in this query, or in a WITH "
                "table that FROM reads",
            )
        self._join_method(join)
        private = self.private_named(table)
        if private is not None:
            only(table, {"this", "alias", "db", "catalog"}, "a JOIN")
            return private, True
        if not lookup(*identifier(table), self.tables) or table.args.get("db"):
            several = len(self.private.tables) > 1
            raise unsupported(
                table,
                f"JOIN {'.'.join(p for p in (table.db, table.name) if p)!r}",
                "only the Session's private tables "
                f"({list(self.private.tables) if several else repr(self.table)}) and the public "
                f"tables registered on it (tables=) can be joined; registered: "
                f"{sorted(self.tables)}",
            )
        only(table, {"this", "alias"}, "a JOIN")
        return resolve(table.this, self.tables, "among the public tables", kind="table"), False

    def _join_method(self, join: exp.Join) -> None:
        """Refuse a JOIN's method (NATURAL, ...) or a clause other than ON and USING."""
        method = join.args.get("method")
        if method:
            raise unsupported(join, f"{str(method).upper()} JOIN", "join with ON or USING")
        only(join, {"this", "on", "using", "side", "kind"}, "a JOIN")

    def private_rows(self, node: exp.Subquery) -> str | None:
        """The private table a subquery in a JOIN reads, if it reads one (not a CTE's name)."""
        inner = node.this
        source = inner.args.get("from_") if isinstance(inner, exp.Select) else None
        return None if source is None else self.private_named(source.this)

    def _joined_rows(self, node: exp.Subquery, query: Query, table: str) -> tuple[Query, list[str]]:
        """The query of a private table's rows a JOIN reads through a subquery, and its columns.

        ``JOIN (SELECT * FROM visits WHERE dx = 'flu') v`` is the builder's
        ``join_private(sess.query("visits").filter(...))``: the subquery may
        only filter the table's rows and name some of its columns, which keep
        their names; the table's rows are then truncated as a joined table's.
        """
        inner = node.this
        unit = self.private.unit or "<privacy unit>"
        hint = (
            f"a subquery joined to private rows reads the rows of {table!r} as they are: "
            f"SELECT * or its columns FROM {table} [WHERE ...]; compute, join or aggregate in "
            "the outer query"
        )
        only(node, {"this", "alias"}, "a subquery in a JOIN")
        only(inner, {"expressions", "from_", "where"}, "a subquery in a JOIN", hint)
        _refuse_column_aliases(node.args.get("alias"))
        if not node.alias:
            raise refuse(
                node,
                "a subquery in a JOIN",
                f"name the subquery, to name its columns: JOIN (SELECT ... FROM {table} ...) t "
                f"ON <left>.{unit} = t.{unit}",
            )
        columns = list(self.private.tables[table])
        sub = Scope(self.text, columns, {}, self._metadata, self.table, self.private)
        right = sub.read_from(inner, query)
        visible: list[str] = []
        modifiers = ("except", "except_", "replace", "rename")
        for item in inner.expressions:
            value = item.this if isinstance(item, exp.Alias) else item
            star = value if isinstance(value, exp.Star) else value.this
            if isinstance(star, exp.Star) and not any(star.args.get(k) for k in modifiers):
                if isinstance(value, exp.Column):  # v.*
                    resolve(value.args["table"], sub.aliases, "in FROM", kind="table")
                named = columns
            elif isinstance(value, exp.Column) and not isinstance(star, exp.Star):
                named = [sub.column(value)]
                if item.alias_or_name.casefold() != named[0].casefold():  # dx AS d
                    raise unsupported(item, f"{item.sql()} in a subquery in a JOIN", hint)
            else:
                raise unsupported(item, f"{item.sql()} in a subquery in a JOIN", hint)
            for name in named:
                if lookup(name, False, visible):
                    raise refuse(item, "a subquery", f"two of its columns are called {name!r}")
                visible.append(name)
        where = inner.args.get("where")
        if where is not None:
            right = right.filter(sub.rows(where.this))
            lead = "WHERE cannot run on this data"
            builder_refusal(lambda: query.session.check(right.plan), lead, where.this, "WHERE")
        return right, visible

    def _using(self, column: exp.Expr, table: str, left: list[str]) -> str:
        """A USING column: one name, on the left side and in the public table alike."""
        mine = resolve(column, left, "in the data")
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
