"""The SQL front end: one SELECT, parsed with sqlglot into the builder's immutable plan.

``sess.sql("SELECT region, COUNT(*) AS n, AVG(amount) FROM data WHERE age >= 18
GROUP BY region")`` becomes exactly the query the builder would make
(``sess.query().filter(...).bound(...).group_by(...).agg(...)``), so there is
one planner and one engine. Nothing of the SQL text reaches an engine: every
row expression is translated into a polars expression, which then passes the
builder's own checks (:mod:`privframe.engines.expressions`).

What comes from where:

* **Bounds, keys, quantile grids**: the Session's ``metadata`` (``{"amount":
  pf.Column(bounds=(0, 1000)), "region": pf.Column(keys=[...])}``), keyed by
  column name, or by the output alias for an aggregate of an expression;
  per-query ``metadata=`` entries override the session's.
* **Contribution limits**: the Session's ``contributions=pf.Bound(...)``,
  overridable per query.
* **Keys**: a GROUP BY whose columns all have ``keys`` uses their product as
  public keys; one whose columns have none chooses its groups privately, which
  spends δ, so its release needs ``delta=`` (the δ to spend) and is refused
  without it; a mix is refused.
* **Names**: as in SQL, unquoted names match columns, aliases and tables
  whatever their case (two columns differing only in case make one
  ambiguous), quoted names match exactly; metadata is found by its exact key,
  else by the one key that differs only in case.

Supported: aggregates in the select list (``COUNT(*)``, ``COUNT(col)``,
``COUNT(DISTINCT <privacy unit>)``, ``SUM``, ``AVG``/``MEAN``, ``VARIANCE``/
``VAR_SAMP``/``VAR_POP``, ``STDDEV``/``STDDEV_SAMP``/``STDDEV_POP``,
``MEDIAN``, ``QUANTILE(x, q)``/``APPROX_QUANTILE(x, q)``,
``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY x)``) with aliases; arithmetic,
comparisons, ``AND``/``OR``/``NOT``, ``IN`` (literal lists), ``BETWEEN``,
``IS [NOT] NULL``, ``LIKE`` with a leading or trailing ``%``, ``CASE``,
``CAST``/``TRY_CAST`` (a failed cast gives NULL) and ``ABS`` in row
expressions; ``WHERE``; ``GROUP BY`` columns, expressions or positions;
``[LEFT] JOIN`` public tables registered on the Session (``tables=``) on
columns of the same name; and ``HAVING``, ``ORDER BY``, ``LIMIT``/``OFFSET``,
applied to the noisy result (post-processing: they cost nothing and see only
released values). Anything else raises :class:`~privframe.errors.SQLError`
naming the construct and its position.

Sample vs population variance: both map to the same estimate (the bounded
rows' plug-in variance with the noise bias removed); at the group sizes a
private release needs the difference is far below the noise.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> df = pl.DataFrame({"u": [1, 2, 3], "r": ["a", "b", "a"], "x": [1.0, 5.0, 3.0]})
    >>> sess = pf.Session(df, "u", pf.zCDP(1.0), metadata={
    ...     "x": pf.Column(bounds=(0, 10)), "r": pf.Column(keys=["a", "b"])},
    ...     contributions=pf.Bound(max_groups=1, max_rows_per_group=1))
    >>> q = sess.sql("SELECT r, COUNT(*) AS n, AVG(x) FROM data GROUP BY r ORDER BY n DESC")
    >>> [a.output_name for a in q.query.plan.aggregates]
    ['n', 'x_mean']
"""

from __future__ import annotations

import dataclasses
import difflib
import html
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl
import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from privframe._arguments import RHO_HINTS, hinted
from privframe.api.html import query_html
from privframe.api.query import Query, Request
from privframe.errors import NAMES_WITHHELD, InvalidArgumentError, SQLError, names_look_like_data
from privframe.plan import aggregates as agg
from privframe.plan.aggregates import Aggregate
from privframe.plan.ir import Bound
from privframe.plan.keys import KeySet, product

if TYPE_CHECKING:
    import pandas as pd

    from privframe.plan.explanation import Explanation
    from privframe.plan.split import Balance

__all__ = ["Column", "SQLQuery", "parse"]

TABLE = "data"
"""The name of the private table in FROM."""


@dataclass(frozen=True)
class Column:
    """Public facts about one column (or one aggregate's output) that SQL cannot say.

    Attributes:
        bounds: (lower, upper) clipping bounds for sums, means, variances and
            quantiles of this column.
        keys: the public keys when grouping by this column.
        candidates: the number of quantile candidates (default 1001).

    Example:
        >>> import privframe as pf
        >>> pf.Column(bounds=(0, 1000)).bounds
        (0, 1000)
    """

    bounds: tuple[float, float] | None = None
    keys: tuple[Any, ...] | None = None
    candidates: int | None = None

    def __post_init__(self) -> None:
        if self.bounds is not None:
            if not isinstance(self.bounds, tuple | list) or len(self.bounds) != 2:
                raise InvalidArgumentError(
                    f"Column bounds must be a (lower, upper) pair, got {self.bounds!r}"
                )
            object.__setattr__(self, "bounds", tuple(self.bounds))
        if self.keys is not None:
            if isinstance(self.keys, str) or not isinstance(self.keys, Sequence):
                raise InvalidArgumentError(f"Column keys must be a list, got {self.keys!r}")
            object.__setattr__(self, "keys", tuple(self.keys))


# ------------------------------------------------------------------ errors and positions


def _position(node: exp.Expression) -> tuple[int, int] | None:
    """(line, column) where a node starts: the earliest token sqlglot located in it."""
    found = []
    for sub in node.walk():
        meta = getattr(sub, "meta", None) or {}
        if "line" in meta and "col" in meta:
            # sqlglot's col is just past the token's end; report where it starts.
            width = int(meta.get("end", 0)) - int(meta.get("start", 0)) + 1
            found.append((int(meta["line"]), max(1, int(meta["col"]) - width + 1)))
    return min(found, default=None)


def _error(node: exp.Expression, construct: str, hint: str = "") -> SQLError:
    where = _position(node)
    at = f" at line {where[0]}, column {where[1]}" if where else ""
    text = f"{construct} is not supported{at}"
    return SQLError(f"{text}: {hint}" if hint else text, construct=construct, position=where)


def _refuse(node: exp.Expression, construct: str, message: str) -> SQLError:
    """An SQLError with a full message (not "X is not supported"), position appended."""
    where = _position(node)
    at = f" (at line {where[0]}, column {where[1]})" if where else ""
    return SQLError(f"{message}{at}", construct=construct, position=where)


# ------------------------------------------------------------------ names

# The clause and operator words a typo most often hits.
_KEYWORDS = (
    *("SELECT", "FROM", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "LIMIT", "OFFSET"),
    *("JOIN", "INNER", "LEFT", "OUTER", "ON", "USING", "AS", "DISTINCT", "ASC", "DESC"),
    *("AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "LIKE", "CAST"),
    *("CASE", "WHEN", "THEN", "ELSE", "END"),
)


def _misspelt_keyword(word: str) -> str | None:
    """The SQL keyword ``word`` is most likely a typo of (``SELEC`` -> ``SELECT``), if any."""
    if len(word) < 2 or word.upper() in _KEYWORDS:
        return None
    near = difflib.get_close_matches(word.upper(), _KEYWORDS, n=1, cutoff=0.75)
    return near[0] if near else None


def _identifier(node: exp.Expression) -> tuple[str, bool]:
    """The name a column, table or identifier node spells, and whether it was quoted."""
    inner = node.this if isinstance(node, exp.Column | exp.Table) else node
    return node.name, isinstance(inner, exp.Identifier) and bool(inner.quoted)


def _lookup(name: str, quoted: bool, names: Iterable[str]) -> list[str]:
    """The ``names`` an identifier denotes: quoted, exactly; unquoted, ignoring case."""
    if quoted:
        return [n for n in dict.fromkeys(names) if n == name]
    folded = name.casefold()
    return [n for n in dict.fromkeys(names) if n.casefold() == folded]


def _resolve(
    node: exp.Expression, names: Iterable[str], where: str, hint: str = "", kind: str = "column"
) -> str:
    """The one name of ``names`` that ``node`` (a column or identifier) denotes, or an SQLError.

    SQL folds unquoted identifiers, so ``Region`` and ``REGION`` find the column
    ``region``; a quoted one (``"Region"``) must match exactly. Two names that
    differ only in case make an unquoted identifier ambiguous. Names are public
    schema, never data, so the error may list and suggest them, unless they
    look like a row of data (:func:`~privframe.errors.names_look_like_data`).
    """
    name, quoted = _identifier(node)
    names = list(dict.fromkeys(names))
    found = _lookup(name, quoted, names)
    if len(found) == 1:
        return found[0]
    construct = f"the {kind} {name!r}"
    node = node.this if isinstance(node, exp.Column) else node  # the name, not its qualifier
    if found:
        raise _refuse(
            node,
            construct,
            f"{construct} is ambiguous: it matches {found} {where}, which differ only in "
            f'case; write the one you mean in double quotes, e.g. "{found[0]}"',
        )
    message = f"{construct} does not exist {where}"
    folded = {n.casefold(): n for n in names}
    near = difflib.get_close_matches(name.casefold(), list(folded), n=1, cutoff=0.6)
    if names_look_like_data(names):  # a CSV without a header row: names are private values
        message += f"; {NAMES_WITHHELD}"
    elif quoted and name.casefold() in folded:
        message += f'; did you mean "{folded[name.casefold()]}"? (quoted, a name keeps its case)'
    elif quoted:  # most often a string written in double quotes
        message += (
            f"; in SQL, double quotes name a column: for the text {name}, write it in single "
            f"quotes ('{name}')"
        )
    elif near:
        message += f"; did you mean {folded[near[0]]!r}?"
    elif not hint:  # a hint says what can be used instead
        shown = sorted(names)
        message += f"; they are {shown[:20]}" + (" ..." if len(shown) > 20 else "")
    if hint:
        message += f"; {hint}"
    raise _refuse(node, construct, message)


def _only(node: exp.Expression, allowed: set[str], what: str) -> None:
    """Refuse any clause or modifier of ``node`` privframe does not translate.

    An allow-list, so that a construct sqlglot parses but privframe does not
    know (TABLESAMPLE, WITH ROLLUP, FETCH, ...) is refused, never ignored.
    """
    for key, value in node.args.items():
        if key in allowed or value is None or value is False or value == []:
            continue
        first = value[0] if isinstance(value, list) else value
        located = first if isinstance(first, exp.Expression) else node
        name = first.key.upper() if isinstance(first, exp.Expression) else key.upper()
        raise _error(located, f"{name.replace('_', ' ')} in {what}")


def _construct(node: exp.Expression) -> str:
    """A readable name for a node's SQL construct."""
    if isinstance(node, exp.Window):
        return "a window function (OVER ...)"
    if isinstance(node, exp.Subquery):
        return "a subquery"
    if isinstance(node, exp.Anonymous):
        return f"the function {str(node.name).upper()}"
    if isinstance(node, exp.Func):
        return f"the function {node.sql_name()}"
    return node.key.upper().replace("_", " ")


# ------------------------------------------------------------------ row expressions

_BINARY: dict[type[exp.Expression], Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    exp.Add: operator.add,
    exp.Sub: operator.sub,
    exp.Mul: operator.mul,
    exp.Div: operator.truediv,
    exp.Mod: operator.mod,
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
    exp.And: operator.and_,
    exp.Or: operator.or_,
}

_TYPES: dict[str, pl.DataType] = {
    "DOUBLE": pl.Float64(),
    "FLOAT": pl.Float64(),
    "DECIMAL": pl.Float64(),
    "REAL": pl.Float32(),
    "INT": pl.Int64(),
    "BIGINT": pl.Int64(),
    "SMALLINT": pl.Int64(),
    "TINYINT": pl.Int64(),
    "VARCHAR": pl.String(),
    "TEXT": pl.String(),
    "CHAR": pl.String(),
}


def _literal_value(node: exp.Expression) -> Any:
    """The Python value of a literal (number, string, boolean, NULL), or an SQLError."""
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        value = _literal_value(node.this)
        if isinstance(value, str):
            raise _error(node, f"the negative string {node.sql()}")
        return -value
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return int(text) if text.lstrip("-").isdigit() else float(text)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Column) and _identifier(node)[1]:
        name = node.name
        raise _error(
            node,
            f'the column "{name}"',
            f"only literal values are allowed here; in SQL, double quotes name a column: "
            f"write the text in single quotes ('{name}')",
        )
    raise _error(node, _construct(node), "only literal values are allowed here")


class _Rows:
    """Translates row expressions (WHERE, GROUP BY, aggregate arguments) into polars."""

    def __init__(self, columns: Callable[[exp.Column], str]) -> None:
        self._columns = columns

    def __call__(self, node: exp.Expression) -> pl.Expr:
        result = self._translate(node)
        # sqlglot marks NOT LIKE / NOT BETWEEN / NOT IN on the node itself.
        return ~result if node.args.get("negate") else result

    def _translate(self, node: exp.Expression) -> pl.Expr:
        kind = type(node)
        if kind in _BINARY:
            return _BINARY[kind](self(node.this), self(node.expression))
        if isinstance(node, exp.Column):
            return pl.col(self._columns(node))
        if isinstance(node, exp.Literal | exp.Boolean | exp.Null):
            return pl.lit(_literal_value(node))
        if isinstance(node, exp.Paren):
            return self(node.this)
        if isinstance(node, exp.Neg):
            # 0 − x rather than polars' negation, which the row-expression allow-list lacks.
            if isinstance(node.this, exp.Literal):
                return pl.lit(_literal_value(node))
            return pl.lit(0) - self(node.this)
        if isinstance(node, exp.Not):
            return self._negation(node)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _error(node, "IS with a value other than NULL", "write = or <> instead")
            return self(node.this).is_null()
        if isinstance(node, exp.In):
            return self._membership(node)
        if isinstance(node, exp.Between):
            low, high = _literal_value(node.args["low"]), _literal_value(node.args["high"])
            return self(node.this).is_between(pl.lit(low), pl.lit(high))
        if isinstance(node, exp.Like):
            return self._like(node)
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.Cast):  # and TryCast: a failed cast gives NULL
            return self._cast(node)
        if isinstance(node, exp.Abs):
            return self(node.this).abs()
        raise _error(node, _construct(node), "see the supported constructs in privframe.api.sql")

    def _negation(self, node: exp.Not) -> pl.Expr:
        inner = node.this
        if isinstance(inner, exp.Is):
            return self(inner.this).is_not_null()
        if isinstance(inner, exp.In):
            return ~self._membership(inner)
        return ~self(inner)

    def _membership(self, node: exp.In) -> pl.Expr:
        if node.args.get("query") is not None:
            raise _error(node, "IN with a subquery", "list literal values instead")
        values = [_literal_value(v) for v in node.expressions]
        if None in values:
            # SQL's x NOT IN (..., NULL) is never true; polars would keep rows. Refuse both.
            raise _refuse(node, "IN", "NULL in an IN list is not supported: test IS NULL instead")
        kinds = {type(v) for v in values}
        tested = self(node.this)
        if float in kinds and kinds <= {int, float}:
            # Compare as floats: polars will not test integers against a float list.
            values = [None if v is None else float(v) for v in values]
            tested = tested.cast(pl.Float64, strict=False)
        elif len(kinds) > 1:  # mixed types
            raise _refuse(
                node, "IN", f"IN lists values of different types ({node.sql()}); use one type"
            )
        return tested.is_in(values)

    def _like(self, node: exp.Like) -> pl.Expr:
        pattern = _literal_value(node.expression)
        if not isinstance(pattern, str):
            raise _error(node, "LIKE with a non-string pattern")
        body = pattern.strip("%")
        if "%" in body or "_" in body:
            raise _error(
                node,
                f"LIKE pattern {pattern!r}",
                "only 'text%', '%text', '%text%' or plain text are supported",
            )
        value = self(node.this)
        if pattern.startswith("%") and pattern.endswith("%") and len(pattern) > 1:
            return value.str.contains(body, literal=True)
        if pattern.endswith("%"):
            return value.str.starts_with(body)
        if pattern.startswith("%"):
            return value.str.ends_with(body)
        return value == body

    def _case(self, node: exp.Case) -> pl.Expr:
        subject = node.this
        chain: Any = pl
        for branch in node.args.get("ifs") or []:
            condition = branch.this
            test = self(subject) == self(condition) if subject is not None else self(condition)
            chain = chain.when(test).then(self(branch.args["true"]))
        default = node.args.get("default")
        if chain is pl:
            raise _error(node, "CASE without WHEN")
        # Without ELSE, polars' own default (null of the branches' type) is SQL's.
        return chain if default is None else chain.otherwise(self(default))

    def _cast(self, node: exp.Cast) -> pl.Expr:
        name = node.to.this.name if isinstance(node.to.this, exp.DataType.Type) else str(node.to)
        dtype = _TYPES.get(name.upper())
        if dtype is None:
            raise _error(node, f"CAST to {node.to.sql()}", f"cast to one of {sorted(_TYPES)}")
        return self(node.this).cast(dtype, strict=False)


# ------------------------------------------------------------------ the statement


@dataclass(frozen=True)
class _Item:
    """One select-list item: a group column or an aggregate, with its output name."""

    name: str
    node: exp.Expression  # the item without its alias
    aggregate: Aggregate | None
    group: str | None = None  # for a group column: the name the release gives it


_SELECT_CLAUSES = {
    "expressions",
    "from",
    "from_",
    "joins",
    "where",
    "group",
    "having",
    "order",
    "limit",
    "offset",
    "kind",
}


class _Translator:
    """One SELECT statement to a Query plus its post-processing."""

    def __init__(
        self,
        select: exp.Select,
        query: Query,
        unit: str | None,
        metadata: Mapping[str, Column],
        contributions: Bound | None,
        tables: Mapping[str, pl.DataFrame],
        text: str,
    ) -> None:
        self.select = select
        self.text = text
        self.query = query
        self.unit = unit
        self.metadata = metadata
        self.contributions = contributions
        self.tables = tables
        self.aliases: dict[str, str] = {}  # table aliases (as written) -> table names
        self.joined: list[str] = []  # the public tables joined so far
        self.selection: SQLError | None = None  # set when GROUP BY has no public keys
        self.derived: dict[str, pl.Expr] = {}
        self.rows = _Rows(self._column)
        # Names a derived column must not take: it would replace the data's column.
        self.existing = set(query.session.columns).union(*(t.columns for t in tables.values()))

    # -- names

    def _columns_of(self, table: str) -> list[str]:
        return list(self.query.session.columns if table == TABLE else self.tables[table].columns)

    def _available(self) -> list[str]:
        """The columns a row expression can name: the data's and those of the joined tables."""
        return [c for table in (TABLE, *self.joined) for c in self._columns_of(table)]

    def _column(self, node: exp.Column) -> str:
        """The data (or joined table) column ``node`` names, matched as SQL matches names."""
        if not node.table:
            return _resolve(node, self._available(), "in the data or the joined tables")
        qualifier = node.args["table"]
        if not _lookup(*_identifier(qualifier), self.aliases):
            raise _error(node, f"the table {node.table!r}", "it is not in FROM or JOIN")
        table = self.aliases[_resolve(qualifier, self.aliases, "in FROM or JOIN", kind="table")]
        where = "in the data" if table == TABLE else f"in the table {table!r}"
        return _resolve(node, self._columns_of(table), where)

    def _canonical(self, node: exp.Expression) -> exp.Expression:
        """``node`` with every column spelt as the column it names, without table prefix.

        So ``d.Region`` and ``region`` compare equal, as they name the same column.
        """
        return node.transform(
            lambda n: exp.column(self._column(n), quoted=True) if isinstance(n, exp.Column) else n
        )

    def _metadata(self, name: str) -> Column | None:
        """The metadata entry of a column or alias: its exact key, else one equal but for case.

        Metadata keys are Python strings, but SQL users expect SQL's name rules.
        """
        if name in self.metadata:
            return self.metadata[name]
        found = _lookup(name, False, self.metadata)
        if len(found) > 1:
            raise SQLError(
                f"metadata has keys {found} that differ only in case, and the query names "
                f"{name!r}: give one key for it, spelt as the column or alias",
                construct="metadata",
            )
        return self.metadata[found[0]] if found else None

    def _alias(self, table: exp.Table, owner: str) -> None:
        """Register ``table``'s alias, refusing a misspelt keyword (``FROM data WHER``)."""
        alias = table.args.get("alias")
        if alias is None or not table.alias:
            return
        name, quoted = _identifier(alias.this)
        # An alias written after AS is meant as one, whatever it looks like (AS grp).
        keyword = None if quoted or self._after_as(alias.this) else _misspelt_keyword(name)
        if keyword is not None:
            raise _refuse(
                alias,
                "syntax",
                f"{name!r} reads as an alias of the table {owner!r} but looks like a misspelt "
                f'{keyword}: correct the keyword, or quote the alias ("{name}") to keep it',
            )
        self.aliases[name] = owner

    def _after_as(self, node: exp.Expression) -> bool:
        """Whether the keyword AS stands right before ``node`` in the SQL text."""
        start = (getattr(node, "meta", None) or {}).get("start")
        if start is None:
            return False
        before = self.text[: int(start)].rstrip()
        return re.search(r"(^|[^\w])AS$", before, re.IGNORECASE) is not None

    def _derive(self, expr: pl.Expr, name: str) -> str:
        """Add a derived column under ``name``, or ``name_2``, ... if that is taken."""
        chosen, n = name, 1
        while chosen in self.existing or chosen in self.derived:
            n += 1
            chosen = f"{name}_{n}"
        self.derived[chosen] = expr
        return chosen

    # -- clauses

    def translate(self) -> tuple[Query, dict[str, Any]]:
        self._refuse_unsupported()
        self._from()
        query = self.query
        for join in self.select.args.get("joins") or []:
            query = self._join(query, join)
        where = self.select.args.get("where")
        if where is not None:
            query = query.filter(self.rows(where.this))
        groups = self._group_by()
        items = self._items(groups)
        if self.derived:
            query = query.with_columns(**self.derived)
        bound = self.contributions
        if bound is not None:
            query = query.bound(bound.max_groups, bound.max_rows_per_group, bound.max_rows)
        if groups:
            query = query.group_by(list(groups), keys=self._keys(groups))
        query = query.agg(*(item.aggregate for item in items if item.aggregate is not None))
        return query, self._post(items, groups)

    def _refuse_unsupported(self) -> None:
        named = {"with_": "WITH (common table expressions)", "distinct": "SELECT DISTINCT"}
        for key, what in named.items():
            node = self.select.args.get(key)
            if node:
                raise _error(node if isinstance(node, exp.Expression) else self.select, what)
        _only(self.select, _SELECT_CLAUSES, "a SELECT")
        for node in self.select.find_all(exp.Subquery, exp.Window, exp.Star, exp.Filter):
            if isinstance(node, exp.Star) and isinstance(node.parent, exp.Count):
                continue
            if isinstance(node, exp.Star):
                raise _error(node, "SELECT *", "name the group columns and aggregates")
            if isinstance(node, exp.Filter):
                raise _error(node, "an aggregate's FILTER clause", "filter the rows with WHERE")
            raise _error(node, _construct(node))

    def _from(self) -> None:
        source = self.select.args.get("from_") or self.select.args.get("from")
        if source is None:
            raise _error(self.select, "a SELECT without FROM", f"select FROM {TABLE}")
        _only(source, {"this"}, "FROM")
        table = source.this
        if (
            not isinstance(table, exp.Table)
            or not _lookup(*_identifier(table), [TABLE])
            or table.db
        ):
            raise _error(table, f"FROM {table.sql()}", f"the private table is called {TABLE!r}")
        _only(table, {"this", "alias"}, "FROM")
        self.aliases[TABLE] = TABLE
        self._alias(table, TABLE)

    def _join(self, query: Query, join: exp.Join) -> Query:
        table = join.this
        if not isinstance(table, exp.Table):
            raise _error(table, "a JOIN on something other than a table")
        method = join.args.get("method")
        if method:
            raise _error(join, f"{str(method).upper()} JOIN", "join with ON or USING")
        _only(join, {"this", "on", "using", "side", "kind"}, "a JOIN")
        _only(table, {"this", "alias"}, "a JOIN")
        if not _lookup(*_identifier(table), self.tables):
            raise _error(
                table,
                f"JOIN {table.name!r}",
                f"only public tables registered on the Session (tables=) can be joined; "
                f"registered: {sorted(self.tables)}",
            )
        name = _resolve(table.this, self.tables, "among the public tables", kind="table")
        side = (join.side or "").upper()
        kind = (join.kind or "").upper()
        if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
            raise _error(join, f"{side} {kind} JOIN".strip().replace("  ", " "))
        if kind == "OUTER" and side != "LEFT":
            raise _error(join, "FULL OUTER JOIN")
        self.aliases[name] = name
        self._alias(table, name)
        self.joined.append(name)
        using = join.args.get("using")
        if using:
            on = [self._using(column, name) for column in using]
        elif join.args.get("on") is not None:
            on = self._equalities(join.args["on"])
        else:
            raise _error(join, "a JOIN without ON or USING")
        return query.join(self.tables[name], on=on, how="left" if side == "LEFT" else "inner")

    def _using(self, column: exp.Expression, table: str) -> str:
        """A USING column: one name, in the data and in the public table alike."""
        mine = _resolve(column, self._columns_of(TABLE), "in the data")
        theirs = _resolve(column, self._columns_of(table), f"in the table {table!r}")
        if mine != theirs:
            raise _refuse(
                column,
                "JOIN",
                f"USING ({column.name}) names {mine!r} in the data but {theirs!r} in the table "
                f"{table!r}: joins match columns of the same name",
            )
        return mine

    def _equalities(self, condition: exp.Expression) -> list[str]:
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
            left, right = self._column(condition.this), self._column(condition.expression)
            if left == right:
                return [left]
        raise _error(
            condition,
            f"the join condition {condition.sql()}",
            "join on equal columns of the same name (a.col = b.col, or USING (col))",
        )

    def _group_by(self) -> dict[str, exp.Expression]:
        """Group output names and their row expressions, in GROUP BY order."""
        group = self.select.args.get("group")
        if group is None:
            return {}
        _only(group, {"expressions"}, "GROUP BY")
        items = self.select.expressions
        # GROUP BY a name means a select-list alias only when no column has that name
        # (a data column wins, as in SQL), and never an aggregate's alias.
        aliased = {i.alias: i.this for i in items if isinstance(i, exp.Alias)}
        groups: dict[str, exp.Expression] = {}
        for node in group.expressions:
            if isinstance(node, exp.Literal) and not node.is_string:
                index = _position_number(node, "GROUP BY")
                if not 1 <= index <= len(items):
                    raise _error(node, f"GROUP BY {index}", "no such select-list position")
                node = items[index - 1]
                node = node.this if isinstance(node, exp.Alias) else node
            if (
                isinstance(node, exp.Column)
                and not node.table
                and not _lookup(*_identifier(node), self._available())
            ):
                where = "in the data, the joined tables or the select list's aliases"
                alias = _resolve(node, [*self._available(), *aliased], where)
                if aliased[alias].find(exp.AggFunc) is not None:
                    raise _error(node, "GROUP BY an aggregate", f"{alias!r} names an aggregate")
                node = aliased[alias]
            if isinstance(node, exp.Column):
                groups[self._column(node)] = self._canonical(node)
                continue
            if node.find(exp.AggFunc) is not None:
                raise _error(node, "GROUP BY an aggregate")
            canonical = self._canonical(node)
            name = next(
                (
                    a
                    for a, e in aliased.items()
                    if e.find(exp.AggFunc) is None and self._canonical(e) == canonical
                ),
                f"group_{len(groups) + 1}",
            )
            groups[self._derive(self.rows(node), name)] = canonical
        return groups

    def _items(self, groups: Mapping[str, exp.Expression]) -> list[_Item]:
        items = []
        for item in self.select.expressions:
            alias = item.alias if isinstance(item, exp.Alias) else None
            node = item.this if isinstance(item, exp.Alias) else item
            group = self._group_name(node, groups)
            if group is not None:
                items.append(_Item(alias or group, node, None, group))
                continue
            aggregate_call = isinstance(node, exp.AggFunc | exp.WithinGroup)
            if not aggregate_call and node.find(exp.AggFunc) is not None:
                raise _error(
                    node,
                    "arithmetic on aggregates",
                    "select the aggregates separately and combine the released columns",
                )
            if not isinstance(node, exp.AggFunc | exp.WithinGroup | exp.Anonymous):
                raise _error(
                    node,
                    f"the column {node.sql()} outside GROUP BY and outside an aggregate",
                    "group by it or aggregate it",
                )
            aggregate = self._aggregate(node, alias)
            items.append(_Item(aggregate.output_name, node, aggregate))
        names = [item.name for item in items]
        for item in items:
            if names.count(item.name) > 1:
                raise _refuse(
                    item.node,
                    "duplicate output",
                    f"two select-list items would both be called {item.name!r}; alias one",
                )
        return items

    def _group_name(self, node: exp.Expression, groups: Mapping[str, exp.Expression]) -> str | None:
        if not groups:
            return None
        plain = self._canonical(node)
        return next((name for name, expr in groups.items() if plain == expr), None)

    # -- aggregates

    def _bounds(self, node: exp.Expression, alias: str | None, what: str) -> Column:
        if isinstance(node, exp.Distinct):
            raise _error(node, f"{what}(DISTINCT ...)")
        # Every column named must exist before bounds are asked for: a typo is the cause.
        self._canonical(node)
        own = self._column(node) if isinstance(node, exp.Column) else None
        names = [n for n in (own, alias) if n]
        for name in names:
            column = self._metadata(name)
            if column is not None and column.bounds is not None:
                return column
        example = repr(names[0]) if names else "'alias'"
        raise _refuse(
            node,
            what,
            f"{what} needs public bounds: give them in metadata, e.g. "
            f"metadata={{{example}: pf.Column(bounds=(lower, upper))}}"
            + ("" if names else " with the aggregate aliased (AS alias)"),
        )

    def _value_column(self, node: exp.Expression, alias: str | None, what: str) -> str:
        if isinstance(node, exp.Column):
            return self._column(node)
        if alias is None:
            raise _refuse(
                node, what, f"{what} of an expression needs an alias (AS name) for its bounds"
            )
        return self._derive(self.rows(node), alias)

    def _aggregate(self, node: exp.Expression, alias: str | None) -> Aggregate:
        result = self._base_aggregate(node, alias)
        return result.alias(alias) if alias is not None else result

    def _base_aggregate(self, node: exp.Expression, alias: str | None) -> Aggregate:
        if isinstance(node, exp.Count):
            return self._count(node, alias)
        simple: dict[type[exp.Expression], Callable[..., Aggregate]] = {
            exp.Sum: agg.sum,
            exp.Avg: agg.mean,
            exp.Variance: agg.var,
            exp.VariancePop: agg.var,
            exp.Stddev: agg.std,
            exp.StddevSamp: agg.std,
            exp.StddevPop: agg.std,
        }
        if isinstance(node, exp.Anonymous) and node.name.upper() == "MEAN":
            node = exp.Avg(this=node.expressions[0]) if len(node.expressions) == 1 else node
        maker = simple.get(type(node))
        if maker is not None:
            argument = node.this
            if isinstance(argument, exp.Distinct):
                raise _error(node, f"{node.sql_name()}(DISTINCT ...)")
            what = node.sql_name()
            column = self._bounds(argument, alias, what)
            return maker(self._value_column(argument, alias, what), column.bounds)
        if isinstance(node, exp.Median):
            return self._quantile(node.this, 0.5, alias, "MEDIAN", median=True)
        if isinstance(node, exp.Quantile | exp.ApproxQuantile):
            q = _literal_value(node.args["quantile"])
            return self._quantile(node.this, q, alias, node.sql_name())
        if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont):
            order = node.expression
            if not isinstance(order, exp.Order) or len(order.expressions) != 1:
                raise _error(node, "PERCENTILE_CONT without one ORDER BY column")
            target = order.expressions[0].this
            return self._quantile(target, _literal_value(node.this.this), alias, "PERCENTILE_CONT")
        raise _error(node, _construct(node), "see the supported aggregates in privframe.api.sql")

    def _count(self, node: exp.Count, alias: str | None) -> Aggregate:
        argument = node.this
        if isinstance(argument, exp.Star):
            return agg.count()
        if isinstance(argument, exp.Distinct):
            columns = argument.expressions
            if (
                len(columns) == 1
                and isinstance(columns[0], exp.Column)
                and self.unit is not None
                and self._column(columns[0]) == self.unit
            ):
                return agg.count_distinct()
            raise _error(
                node,
                f"COUNT(DISTINCT {', '.join(c.sql() for c in columns)})",
                f"only COUNT(DISTINCT {self.unit or '<privacy unit>'}) is supported",
            )
        # COUNT(x) counts the rows where x is not null: a sum of 0/1 indicators.
        counted = self._column(argument) if isinstance(argument, exp.Column) else "rows"
        name = alias or f"count_{counted}"
        flag = self._derive(
            self.rows(argument).is_not_null().cast(pl.Int64, strict=False), f"{name}_flag"
        )
        return agg.sum(flag, (0, 1)).alias(name)

    def _quantile(
        self, target: exp.Expression, q: Any, alias: str | None, what: str, median: bool = False
    ) -> Aggregate:
        column = self._bounds(target, alias, what)
        name = self._value_column(target, alias, what)
        candidates = {"candidates": column.candidates} if column.candidates else {}
        if median:
            return agg.median(name, column.bounds, **candidates)  # type: ignore[arg-type]
        if isinstance(q, bool) or not isinstance(q, int | float):
            raise SQLError(f"{what} needs a numeric quantile, got {q!r}", construct=what)
        return agg.quantile(name, float(q), column.bounds, **candidates)  # type: ignore[arg-type]

    # -- keys and post-processing

    def _keys(self, groups: Mapping[str, exp.Expression]) -> KeySet | None:
        given = {name: self._metadata(name) for name in groups}
        with_keys = [n for n, c in given.items() if c is not None and c.keys is not None]
        clause = self.select.args.get("group")
        if not with_keys:
            named = ", ".join(
                repr(n) if isinstance(e, exp.Column) else f"{n!r} ({e.sql()})"
                for n, e in groups.items()
            )
            self.selection = _refuse(
                clause,
                "GROUP BY",
                f"GROUP BY has no public keys for {named}, so its groups would be "
                "chosen privately from the data, which spends delta as well as rho. Give "
                f"the keys in metadata, e.g. metadata={{{next(iter(groups))!r}: "
                "pf.Column(keys=[...])}, which spends no delta; or opt into private "
                "selection with delta= on the call, e.g. sess.sql(text, rho=..., delta=...) "
                "or .release(rho, delta=...), which spends that delta (a share of the "
                "budget's). Nothing was charged",
            )
            return None
        if len(with_keys) != len(groups):
            missing = sorted(set(groups) - set(with_keys))
            raise _refuse(
                clause,
                "GROUP BY",
                f"GROUP BY mixes columns with public keys and without ({missing}): give keys "
                "for every group column in metadata, or for none (groups chosen privately, "
                "with delta=)",
            )
        return product(**{n: list(given[n].keys) for n in with_keys})  # type: ignore[union-attr]

    def _post(self, items: list[_Item], groups: Mapping[str, exp.Expression]) -> dict[str, Any]:
        copies = [(i.group, i.name) for i in items if i.group is not None and i.group != i.name]
        outputs = _Outputs(items, list(groups), self._canonical)
        having = self.select.args.get("having")
        order = self.select.args.get("order")
        if order is not None:
            _only(order, {"expressions"}, "ORDER BY")
            for ordered in order.expressions:
                _only(ordered, {"this", "desc", "nulls_first"}, "ORDER BY")
        limit = self.select.args.get("limit")
        offset = self.select.args.get("offset")
        for clause in (limit, offset):
            if clause is not None:
                _only(clause, {"expression"}, clause.key.upper())
        return {
            "copies": copies,
            "columns": [item.name for item in items],
            "having": None if having is None else outputs(having.this),
            "order": [] if order is None else [outputs.ordering(o) for o in order.expressions],
            "limit": None if limit is None else _count_of(limit.expression, "LIMIT"),
            "offset": None if offset is None else _count_of(offset.expression, "OFFSET"),
            "notes": tuple(
                f"{clause} is applied to the noisy result (post-processing: no extra cost)"
                for clause, node in (("HAVING", having), ("ORDER BY", order), ("LIMIT", limit))
                if node is not None
            ),
            # Private selection needs delta= on the call: the refusal, kept for release.
            "selection": None
            if self.selection is None
            else (str(self.selection), self.selection.position, ", ".join(groups)),
        }


def _position_number(node: exp.Literal, clause: str) -> int:
    """A select-list position (GROUP BY 2, ORDER BY 1): a positive integer literal."""
    value = _literal_value(node)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _error(node, f"{clause} {node.sql()}", "positions are whole numbers, from 1")
    return value


def _count_of(node: exp.Expression, clause: str) -> int:
    value = _literal_value(node)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _error(node, f"{clause} {node.sql()}", "use a non-negative integer literal")
    return min(value, 2**63 - 1)  # no table has more rows; polars takes at most this


class _Outputs(_Rows):
    """HAVING and ORDER BY: expressions over the released columns (aggregates by their SQL)."""

    def __init__(
        self,
        items: list[_Item],
        groups: Sequence[str],
        canonical: Callable[[exp.Expression], exp.Expression],
    ) -> None:
        super().__init__(self._released)
        self._names = sorted({item.name for item in items} | set(groups))
        self._canonical = canonical
        self._by_sql = {canonical(i.node).sql(): i.name for i in items if i.aggregate}
        self._items = items

    def _released(self, node: exp.Column) -> str:
        return _resolve(
            node,
            self._names,
            "in the released table",
            f"HAVING and ORDER BY see only the released columns {self._names}",
        )

    def __call__(self, node: exp.Expression) -> pl.Expr:
        if isinstance(node, exp.AggFunc | exp.WithinGroup):
            name = self._by_sql.get(self._canonical(node).sql())
            if name is None:
                raise _error(
                    node,
                    f"the aggregate {node.sql()} in HAVING or ORDER BY",
                    "it must also be in the select list (post-processing sees released values)",
                )
            return pl.col(name)
        return super().__call__(node)

    def ordering(self, node: exp.Ordered) -> tuple[pl.Expr, bool, bool]:
        """(key, descending, nulls last) of one ORDER BY item."""
        target = node.this
        desc, nulls_last = bool(node.args.get("desc")), not node.args.get("nulls_first")
        if isinstance(target, exp.Literal) and not target.is_string:
            index = _position_number(target, "ORDER BY")
            if not 1 <= index <= len(self._items):
                raise _error(target, f"ORDER BY {index}", "no such select-list position")
            return pl.col(self._items[index - 1].name), desc, nulls_last
        return self(target), desc, nulls_last


# ------------------------------------------------------------------ the public object


class SQLQuery:
    """A parsed SQL query: the builder :class:`~privframe.api.query.Query` plus post-processing.

    ``explain`` and ``release`` work as for builder queries; HAVING, ORDER BY
    and LIMIT/OFFSET are applied to the released (noisy) table.
    """

    def __init__(self, text: str, query: Query, post: dict[str, Any]) -> None:
        self._text = text
        self._query = query
        self._post = post

    @property
    def text(self) -> str:
        """The SQL text."""
        return self._text

    @property
    def query(self) -> Query:
        """The equivalent builder query."""
        return self._query

    @hinted(**RHO_HINTS)
    def explain(
        self,
        rho: float,
        weights: Mapping[str, float] | Balance | None = None,
        delta: float | None = None,
    ) -> Explanation:
        """What the release would do, from public parameters only; spends nothing.

        A GROUP BY without public keys is explained even without ``delta``
        (with the δ the session has left, as the builder's ``explain`` does),
        with a note that its release needs ``delta=``.
        """
        self.check(with_error=True)
        explanation = self._query.explain(rho, weights=weights, delta=delta)
        notes = (*explanation.notes, *self._post["notes"])
        selection = self._post["selection"]
        if selection is not None and delta is None:
            notes += (
                f"GROUP BY {selection[2]} has no public keys: its groups are chosen privately, "
                "which spends delta, so the release needs delta=... (this explanation "
                "assumes all the delta left)",
            )
        return dataclasses.replace(explanation, notes=notes)

    @hinted(**RHO_HINTS)
    def release(
        self,
        rho: float,
        with_error: bool = False,
        weights: Mapping[str, float] | Balance | None = None,
        label: str = "",
        delta: float | None = None,
    ) -> pl.DataFrame | pd.DataFrame:
        """Spend ``rho``, release, then apply HAVING, ORDER BY and LIMIT to the noisy table.

        The post-processing is first run on an empty table of the release's
        types, so a HAVING or ORDER BY that cannot run fails before anything
        is charged.

        Raises:
            SQLError: the query cannot run, or its GROUP BY has no public keys
                and no ``delta`` was given: choosing groups privately spends δ,
                which SQL spends only when asked.
        """
        request = self.request(
            rho, with_error=with_error, weights=weights, label=label, delta=delta
        )
        return self._query.session.release_all([request])[0]

    @hinted(**RHO_HINTS)
    def request(
        self,
        rho: float,
        *,
        with_error: bool = False,
        weights: Mapping[str, float] | Balance | None = None,
        label: str = "",
        delta: float | None = None,
    ) -> Request:
        """This query's release as a :class:`~privframe.api.query.Request`, checked; spends nothing.

        :meth:`Session.release_all <privframe.api.session.Session.release_all>`
        releases a list of requests all or nothing. The arguments, and what
        is refused, are those of :meth:`release`.

        Example:
            >>> import polars as pl
            >>> import privframe as pf
            >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
            >>> request = sess.sql("SELECT COUNT(*) AS n FROM data").request(0.5)
            >>> request.label
            'SELECT COUNT(*) AS n FROM data'
        """
        self.check(with_error)
        selection = self._post["selection"]
        if selection is not None and delta is None:
            message, position, _ = selection
            raise SQLError(message, construct="GROUP BY", position=position)
        return Request(
            self._query,
            rho,
            with_error,
            weights,
            label or self._text,
            delta,
            finish=lambda frame: self._finish(frame, with_error),
        )

    def check(self, with_error: bool = False) -> None:
        """Refuse, before anything is charged, a query or HAVING/ORDER BY that cannot run.

        Runs the builder query's checks (:meth:`~privframe.api.query.Query.check`),
        then the post-processing on an empty table with the release's column
        types (with the error columns when ``with_error``).

        Raises:
            SQLError: the post-processing does not fit the released columns.
        """
        plan = self._query.plan
        schema = self._query.session._check(plan, with_error)  # Query.check, with its schema
        columns: dict[str, pl.DataType] = {c: schema[c] for c in plan.group_by}
        for aggregate in plan.aggregates:
            counts = isinstance(aggregate, agg.Count | agg.CountDistinct)
            columns[aggregate.output_name] = pl.Int64() if counts else pl.Float64()
            if with_error:
                for suffix in ("_std", "_ci95", "_rank_ci95"):
                    columns[aggregate.output_name + suffix] = pl.Float64()
        failure = None
        try:
            self._finish(pl.DataFrame(schema=columns), with_error)
        except pl.exceptions.PolarsError as err:
            failure = f"{type(err).__name__}: {err}"  # of an empty table: no data in it
        if failure is not None:
            # Raised outside the handler, so no polars error rides along as its context.
            raise SQLError(
                f"HAVING or ORDER BY cannot run on the released columns: {failure}; nothing "
                "was charged",
                construct="post-processing",
            )

    def _finish(self, frame: pl.DataFrame, with_error: bool) -> pl.DataFrame:
        post = self._post
        frame = frame.with_columns(pl.col(group).alias(name) for group, name in post["copies"])
        if post["having"] is not None:
            frame = frame.filter(post["having"])
        if post["order"]:
            exprs, descending, nulls_last = zip(*post["order"], strict=True)
            frame = frame.sort(
                list(exprs),
                descending=list(descending),
                nulls_last=list(nulls_last),
                maintain_order=True,
            )
        if post["offset"] is not None or post["limit"] is not None:
            frame = frame.slice(post["offset"] or 0, post["limit"])
        columns = post["columns"]
        suffixes = ("_std", "_ci95", "_rank_ci95") if with_error else ()
        extra = [f"{c}{s}" for c in columns for s in suffixes if f"{c}{s}" in frame.columns]
        return frame.select(*columns, *extra)

    def __repr__(self) -> str:
        return f"SQLQuery({self._text!r})"

    def _repr_html_(self) -> str:
        """Notebook view: the SQL text and the equivalent plan."""
        return f"<pre>{html.escape(self._text)}</pre>" + query_html(self._query)


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
    names = [*query.session.columns, *tables, *(c for t in tables.values() for c in t.columns)]
    nested = False
    try:
        statement = _select(text, names)
        translator = _Translator(statement, query, unit, metadata, contributions, tables, text)
        built, post = translator.translate()
    except RecursionError:
        nested = True
    if nested:
        raise SQLError("the SQL is nested too deeply to translate", construct="nesting")
    return SQLQuery(text, built, post)


def _located(text: str, offset: int) -> tuple[int, int]:
    """(line, column), 1-based, of the character at ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def _syntax_error(text: str, err: sqlglot.errors.SqlglotError, names: Sequence[str]) -> SQLError:
    """A parse error, located at the token to blame.

    sqlglot reports the token where parsing stopped, which is often after the
    real mistake: ``SELEC COUNT(*)`` stops at ``(`` (``SELEC`` read as a column
    and ``COUNT`` as its alias), ``FORM data`` at ``data``. So a word just
    before the stop that is not a known name but is close to a keyword is
    blamed first; otherwise the error points at the start of the stopping token.
    """
    detail = (getattr(err, "errors", None) or [{}])[0]
    line, col = detail.get("line"), detail.get("col")
    if not line:  # tokenizer errors carry no position
        return SQLError(f"the SQL does not parse: {err}", construct="syntax")
    tokens = sqlglot.tokenize(text)
    # sqlglot's (line, col) is the last character of the token it stopped at.
    stop = next(
        (i for i, t in enumerate(tokens) if (t.line, t.col) >= (line, col)), len(tokens) - 1
    )
    known = {n.casefold() for n in names}
    for token in reversed(tokens[max(0, stop - 2) : stop + 1]):
        keyword = None
        if token.token_type == TokenType.VAR and token.text.casefold() not in known:
            keyword = _misspelt_keyword(token.text)
        if keyword is not None:
            where = _located(text, token.start)
            return SQLError(
                f"the SQL does not parse: {token.text!r} at line {where[0]}, column "
                f"{where[1]} is not a SQL keyword; did you mean {keyword}?",
                construct="syntax",
                position=where,
            )
    where = _located(text, tokens[stop].start) if tokens else (line, col)
    found = f" {tokens[stop].text!r}" if tokens else ""
    return SQLError(
        f"the SQL does not parse: {detail.get('description', 'invalid SQL')}{found} at line "
        f"{where[0]}, column {where[1]}",
        construct="syntax",
        position=where,
    )


def _select(text: str, names: Sequence[str]) -> exp.Select:
    """The one SELECT statement of ``text``, or an SQLError; ``names`` are the known columns."""
    failure = None
    try:
        statements = sqlglot.parse(text)
    except sqlglot.errors.SqlglotError as err:  # parse and tokenizer errors alike
        failure = _syntax_error(text, err, names)
    if failure is not None:
        raise failure  # outside the handler: the sqlglot error is not kept as context
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        raise SQLError(
            f"give exactly one SELECT statement, got {len(statements)}", construct="statements"
        )
    (statement,) = statements
    if not isinstance(statement, exp.Select):
        raise _error(statement, _construct(statement), "only SELECT queries can be released")
    return statement
