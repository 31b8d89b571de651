"""Row expressions (WHERE, GROUP BY, aggregate arguments) translated into polars.

Every row expression of a SELECT becomes a polars expression, which then
passes the builder's own checks (:mod:`privframe.engines.expressions`): nothing
of the SQL text reaches an engine.

Example:
    >>> import polars as pl
    >>> import sqlglot
    >>> from privframe.api.sql.rows import Rows
    >>> rows = Rows(lambda column: column.name)
    >>> kept = rows(sqlglot.parse_one("x BETWEEN 1 AND 2"))
    >>> pl.DataFrame({"x": [0.5, 1.5, 3.0]}).filter(kept)["x"].to_list()
    [1.5]
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import polars as pl
from sqlglot import exp

from privframe.api.sql._common import construct, literal_value, refuse, unsupported, written

_BINARY: dict[type[exp.Expr], Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
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


ROW_FUNCTIONS = (
    "the functions allowed there are ABS, SQRT, POWER(x, n), PI(), CAST and TRY_CAST, with "
    "arithmetic, comparisons, "
    "AND, OR, NOT, IN, BETWEEN, IS [NOT] NULL, LIKE and CASE"
)
"""What a row expression may use, for the messages that refuse something else."""

# Math whose last digit depends on the library computing it: refused in row expressions.
_ROUNDED_DIFFERENTLY = (exp.Ln, exp.Log, exp.Exp, exp.Cbrt)

_MAX_POWER = 8
"""The largest whole exponent POWER takes (x·x·…·x: one rounding per factor)."""

# Functions that round or replace values: not on the row-filter allow-list
# (privframe.engines.allow_list), so only released values may use them (released.py).
_RELEASED_ONLY = (exp.Round, exp.Floor, exp.Ceil, exp.Coalesce)


class Rows:
    """Translates row expressions (WHERE, GROUP BY, aggregate arguments) into polars.

    Args:
        columns: the column a column reference names (it refuses unknown names).
    """

    def __init__(self, columns: Callable[[exp.Column], str]) -> None:
        self._columns = columns

    def __call__(self, node: exp.Expr) -> pl.Expr:
        """The polars expression of ``node``, or an SQLError naming what is unsupported."""
        result = self._translate(node)
        # sqlglot marks NOT LIKE / NOT BETWEEN / NOT IN on the node itself.
        return ~result if node.args.get("negate") else result

    def _translate(self, node: exp.Expr) -> pl.Expr:
        kind = type(node)
        if kind in _BINARY:
            return _BINARY[kind](self(node.this), self(node.expression))
        if isinstance(node, exp.Column):
            return pl.col(self._columns(node))
        if isinstance(node, exp.Literal | exp.Boolean | exp.Null):
            return pl.lit(literal_value(node))
        if isinstance(node, exp.Paren):
            return self(node.this)
        if isinstance(node, exp.Neg):
            # 0 − x rather than polars' negation, which the row-expression allow-list lacks.
            if isinstance(node.this, exp.Literal):
                return pl.lit(literal_value(node))
            return pl.lit(0) - self(node.this)
        if isinstance(node, exp.Not):
            return self._negation(node)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise unsupported(node, "IS with a value other than NULL", "write = or <> instead")
            return self(node.this).is_null()
        if isinstance(node, exp.In):
            return self._membership(node)
        if isinstance(node, exp.Between):
            low, high = literal_value(node.args["low"]), literal_value(node.args["high"])
            return self(node.this).is_between(pl.lit(low), pl.lit(high))
        if isinstance(node, exp.Like):
            return self._like(node)
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.Cast):  # and TryCast: a failed cast gives NULL
            return self._cast(node)
        if isinstance(node, exp.Abs):
            return self(node.this).abs()
        if isinstance(node, exp.Pi):
            return pl.lit(math.pi)
        if isinstance(node, exp.Sqrt):
            return _root(self(node.this))
        if isinstance(node, exp.Pow):
            return self._power(node)
        if isinstance(node, _ROUNDED_DIFFERENTLY):
            raise unsupported(
                node,
                construct(node),
                f"{written(node)} is not allowed in a row expression: polars and Spark "
                "compute it with different libraries that can differ in the last digit, so "
                "the same filter or sum could keep different rows on the two engines (and "
                "BigQuery fails on values out of its domain). SQRT, POWER(x, n) with a whole "
                "n from -8 to 8, ABS and PI() are supported; or compute the column before "
                "the Session",
            )
        hint = "see the supported constructs in privframe.api.sql"
        if isinstance(node, _RELEASED_ONLY):
            hint = (
                f"{written(node)} applies only to released values (over aggregates in the "
                f"select list, HAVING or ORDER BY); {hint}"
            )
        elif isinstance(node, exp.Func):
            hint = (
                f"{written(node)} is not allowed in a row expression (WHERE, GROUP BY, an "
                f"aggregate's argument): {ROW_FUNCTIONS}"
            )
        raise unsupported(node, construct(node), hint)

    def _negation(self, node: exp.Not) -> pl.Expr:
        inner = node.this
        if isinstance(inner, exp.Is):
            return self(inner.this).is_not_null()
        if isinstance(inner, exp.In):
            return ~self._membership(inner)
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Column):
            # NOT on a column is NOT CAST(x AS BOOL), BigQuery's reading of a number as a
            # truth value: true where x = 0, false elsewhere, NULL for NULL. On a 0/1
            # integer column (a flag) that is SQL's NOT; polars' ~ would flip its bits.
            return self(inner) == pl.lit(0)
        return ~self(inner)

    def _membership(self, node: exp.In) -> pl.Expr:
        if node.args.get("query") is not None:
            raise unsupported(node, "IN with a subquery", "list literal values instead")
        values = [literal_value(v) for v in node.expressions]
        if None in values:
            # SQL's x NOT IN (..., NULL) is never true; polars would keep rows. Refuse both.
            raise refuse(node, "IN", "NULL in an IN list is not supported: test IS NULL instead")
        kinds = {type(v) for v in values}
        tested = self(node.this)
        if float in kinds and kinds <= {int, float}:
            # Compare as floats: polars will not test integers against a float list.
            values = [None if v is None else float(v) for v in values]
            tested = tested.cast(pl.Float64, strict=False)
        elif len(kinds) > 1:  # mixed types
            raise refuse(
                node, "IN", f"IN lists values of different types ({node.sql()}); use one type"
            )
        return tested.is_in(values)

    def _like(self, node: exp.Like) -> pl.Expr:
        pattern = literal_value(node.expression)
        if not isinstance(pattern, str):
            raise unsupported(node, "LIKE with a non-string pattern")
        body = pattern.strip("%")
        if "%" in body or "_" in body:
            raise unsupported(
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
            raise unsupported(node, "CASE without WHEN")
        # Without ELSE, polars' own default (null of the branches' type) is SQL's.
        return chain if default is None else chain.otherwise(self(default))

    def _power(self, node: exp.Pow) -> pl.Expr:
        """POWER(x, n): x·x·…·x in floats for a literal whole n from -8 to 8; n = 0.5: SQRT."""
        exponent = node.expression
        value = literal_value(exponent) if _is_literal(exponent) else None
        if value == 0.5:  # the square root
            return _root(self(node.this))
        if (
            not isinstance(value, int | float)
            or isinstance(value, bool)
            or value != int(value)
            or abs(value) > _MAX_POWER
        ):
            raise refuse(
                node,
                "POWER",
                f"{node.sql()} is not supported: POWER takes a literal whole exponent from "
                f"-{_MAX_POWER} to {_MAX_POWER} (x·x·…·x) or 0.5 (SQRT). Another exponent "
                "needs pow(), which polars and Spark compute with different libraries that "
                "can differ in the last digit (and BigQuery fails on a negative base with "
                "a fractional exponent); compute such a column before the Session",
            )
        # BigQuery's POWER is FLOAT64: a number times 1.0 (a string is refused), as Float64.
        number = (self(node.this) * pl.lit(1.0)).cast(pl.Float64, strict=False)
        n = abs(int(value))
        if n == 0:
            return pl.when(number.is_not_null()).then(pl.lit(1.0))  # NULL stays NULL
        product = number
        for _ in range(n - 1):
            product = product * number
        if value > 0:
            return product
        # 0 to a negative power has no value (BigQuery fails): NULL here.
        return pl.when(number == 0).then(None).otherwise(pl.lit(1.0) / product)

    def _cast(self, node: exp.Cast) -> pl.Expr:
        return self(node.this).cast(sql_type(node), strict=False)


def _is_literal(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) or (
        isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)
    )


def _root(value: pl.Expr) -> pl.Expr:
    """SQRT: IEEE's square root, NULL below 0 (where BigQuery fails; NaN stays NaN)."""
    return pl.when(value < 0).then(None).otherwise(value.sqrt())


def sql_type(node: exp.Cast) -> pl.DataType:
    """The polars type a CAST converts to, or an SQLError naming the SQL type.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.rows import sql_type
        >>> sql_type(sqlglot.parse_one("CAST(x AS BIGINT)"))
        Int64
    """
    name = node.to.this.name if isinstance(node.to.this, exp.DataType.Type) else str(node.to)
    dtype = _TYPES.get(name.upper())
    if dtype is None:
        raise unsupported(node, f"CAST to {node.to.sql()}", f"cast to one of {sorted(_TYPES)}")
    return dtype
