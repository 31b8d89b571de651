"""Expressions over the released (noisy) table: select-list expressions, HAVING, ORDER BY.

Post-processing: they read only released columns, so they cost nothing
(Dwork & Roth 2014, Prop. 2.1). An aggregate call in them names the released
column that measures it (:class:`Released` finds it by its SQL); a column
names a released column. On top of the row expressions of
:class:`~privframe.api.sql.rows.Rows` they offer functions that a row filter
may not use (they are not on :mod:`privframe.engines.allow_list`), and SQL's
types where polars' differ:

* ``ROUND(x[, n])`` rounds halfway cases away from zero, as BigQuery does
  (polars' default rounds them to even); ``n`` may be negative (tens,
  hundreds, ...). ``FLOOR``, ``CEIL``/``CEILING`` and ``COALESCE``/``IFNULL``/
  ``NVL`` are SQL's.
* ``CAST(x AS INT)`` rounds to the nearest integer, halfway cases away from
  zero (BigQuery's rule), where polars would truncate.
* ``a / b`` is NULL where ``b`` is 0 (as ``SAFE_DIVIDE`` in BigQuery): a
  noisy count of 0 gives no ratio, never an infinity.
* An integer literal is a 64-bit integer, like the released counts; integer
  ``+``, ``-`` and ``*`` never wrap: a result beyond 64 bits is NULL (BigQuery
  raises an overflow error, but post-processing runs after the budget is spent).

``NOT``, ``AND`` and ``OR`` need true/false operands; polars would read an
integer column as bits, so each operand's type is checked against the
released table's schema (:meth:`Requirement.check`) before anything is charged.
``NOT`` on a column is read as in a row filter
(:class:`~privframe.api.sql.rows.Rows`): ``NOT x`` is ``x = 0``, SQL's ``NOT``
for a true/false column or a 0/1 flag (``HAVING NOT married``).

Example:
    >>> import polars as pl
    >>> import sqlglot
    >>> from privframe.api.sql.released import Released
    >>> released = Released(lambda column: column.name, {"AVG(x)": "m"})
    >>> expr = released(sqlglot.parse_one("ROUND(AVG(x) / 2, 1)"))
    >>> pl.DataFrame({"m": [2.25, 0.5]}).select(expr).to_series().to_list()
    [1.1, 0.3]

(``0.5 / 2 = 0.25`` is halfway: it rounds away from zero, to 0.3.)
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

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
from privframe.api.sql.rows import Rows, sql_type

__all__ = [
    "Affine",
    "Released",
    "Requirement",
    "affine",
    "aggregate_calls",
    "is_aggregate_call",
    "refuse_nested",
    "unwrapped",
]


def is_aggregate_call(node: exp.Expr) -> bool:
    """Whether ``node`` is an aggregate call (an unknown function counts: calls.py names it).

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.released import is_aggregate_call
        >>> [is_aggregate_call(sqlglot.parse_one(s)) for s in ("SUM(x)", "MEAN(x)", "ABS(x)")]
        [True, True, False]
    """
    return isinstance(node, exp.AggFunc | exp.WithinGroup | exp.Anonymous)


def aggregate_calls(node: exp.Expr) -> list[exp.Expr]:
    """The outermost aggregate calls in ``node``, in reading order.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.released import aggregate_calls
        >>> [c.sql() for c in aggregate_calls(sqlglot.parse_one("SUM(a) / COUNT(*) + 1"))]
        ['SUM(a)', 'COUNT(*)']
    """
    found: list[exp.Expr] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if is_aggregate_call(current):
            found.append(current)
        else:
            stack.extend(reversed(list(current.iter_expressions())))
    return found


@dataclass(frozen=True)
class Affine:
    """``a · source + b``: an output that is an exact affine function of one released column."""

    source: str
    a: float
    b: float


def affine(node: exp.Expr, by_sql: Callable[[exp.Expr], str]) -> Affine | None:
    """``node`` as ``a · aggregate + b`` with literal ``a ≠ 0`` and ``b``, else None.

    Only then are its error columns exact: its error is the aggregate's times
    ``a``. ``by_sql`` names the released column of an aggregate call.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.released import affine
        >>> affine(sqlglot.parse_one("(COUNT(*) + 1) * -5"), lambda call: "n")
        Affine(source='n', a=-5.0, b=-5.0)
    """
    form = _linear(node, by_sql)
    if form is None or form[0] is None or form[1] == 0:
        return None
    return Affine(form[0], form[1], form[2])


_Form = tuple[str | None, float, float]


def _linear(node: exp.Expr, by_sql: Callable[[exp.Expr], str]) -> _Form | None:
    """(column or None, a, b): ``node`` is ``a · column + b`` (a constant when column is None)."""
    if is_aggregate_call(node):
        return by_sql(node), 1.0, 0.0
    if isinstance(node, exp.Paren):
        return _linear(node.this, by_sql)
    if _is_literal(node):
        value = literal_value(node)
        return (None, 0.0, float(value)) if isinstance(value, int | float) else None
    if not isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Neg):
        return None
    if isinstance(node, exp.Neg):
        inner = _linear(node.this, by_sql)
        return None if inner is None else (inner[0], -inner[1], -inner[2])
    left, right = _linear(node.this, by_sql), _linear(node.expression, by_sql)
    if left is None or right is None:
        return None
    if isinstance(node, exp.Add | exp.Sub):
        sign = 1.0 if isinstance(node, exp.Add) else -1.0
        if left[0] is not None and right[0] is not None:
            return None  # two noisy columns: their errors do not simply add
        return left[0] or right[0], left[1] + sign * right[1], left[2] + sign * right[2]
    if right[0] is None and (isinstance(node, exp.Mul) or right[2] != 0):
        factor = right[2] if isinstance(node, exp.Mul) else 1 / right[2]
        return left[0], left[1] * factor, left[2] * factor
    if isinstance(node, exp.Mul) and left[0] is None:
        return right[0], right[1] * left[2], right[2] * left[2]
    return None


@dataclass(frozen=True)
class Requirement:
    """An expression the released table's types must let run; ``boolean``: it must be true/false.

    ``operator`` is what needs it (``NOT``, ``AND``, ``OR``, ``HAVING``) or the
    clause it is in (``the select list``, ``ORDER BY``).
    """

    expr: pl.Expr
    node: exp.Expr
    operator: str
    boolean: bool = False

    def check(self, frame: pl.LazyFrame) -> None:
        """Refuse it if it cannot run on ``frame``'s schema (it runs on none of its rows).

        Raises:
            SQLError: naming the expression, the released columns it reads and their
                types (schema only, never a value or a polars message).
        """
        schema = frame.collect_schema()
        failed = False
        try:
            # On zero rows: polars checks some types (comparisons) only when it runs.
            dtype = frame.head(0).select(self.expr).collect().dtypes[0]
        except pl.exceptions.PolarsError:
            failed = True
        if failed:  # raised outside the handler: no polars error rides along
            read = {n: str(schema[n]) for n in self.expr.meta.root_names() if n in schema}
            why = f"the types of the released columns it reads, {read}," if read else "its values"
            raise refuse(
                self.node,
                self.operator,
                f"{self.node.sql()} in {self.operator} cannot be computed: {why} do not fit "
                "its operations",
            )
        if self.boolean and dtype not in (pl.Boolean(), pl.Null()):
            text = self.node.sql()
            raise refuse(
                self.node,
                self.operator,
                f"{self.operator} needs a true/false condition, and {text} is {dtype} in the "
                f"released table: compare it instead, e.g. {text} <> 0 (for NOT {text}: "
                f"{text} = 0)",
            )


class Released(Rows):
    """Translates expressions over the released table into polars, noting what to type-check.

    Args:
        columns: the released column a column reference names (it refuses unknown names).
        by_sql: the released column of each aggregate call, by the call's canonical SQL
            (every call in a translated expression must be there).
        canonical: spells a call's columns as the columns they name, before its
            SQL is looked up (:meth:`~privframe.api.sql.scope.Scope.canonical`).
    """

    def __init__(
        self,
        columns: Callable[[exp.Column], str],
        by_sql: Mapping[str, str],
        canonical: Callable[[exp.Expr], exp.Expr] = lambda node: node,
    ) -> None:
        super().__init__(columns)
        self._by_sql = by_sql
        self._canonical = canonical
        self.requirements: list[Requirement] = []
        """What :meth:`Requirement.check` must accept, inner operands first."""

    def column_of(self, call: exp.Expr) -> str:
        """The released column that measures the aggregate call ``call``."""
        return self._by_sql[self._canonical(call).sql()]

    def require(self, node: exp.Expr, operator: str, boolean: bool = False) -> pl.Expr:
        """The translation of ``node``, noted as a :class:`Requirement` of ``operator``."""
        expr = self(node)
        self.requirements.append(Requirement(expr, unwrapped(node), operator, boolean))
        return expr

    def _translate(self, node: exp.Expr) -> pl.Expr:
        if is_aggregate_call(node):
            return pl.col(self.column_of(node))
        if isinstance(node, exp.And | exp.Or):
            what = node.key.upper()
            left = self.require(node.this, what, boolean=True)
            right = self.require(node.expression, what, boolean=True)
            return left & right if isinstance(node, exp.And) else left | right
        if isinstance(node, exp.Not) and not isinstance(node.this, exp.Is | exp.In):
            if isinstance(unwrapped(node.this), exp.Column):
                # As in a row filter (Rows): NOT on a column is x = 0, so a 0/1 group
                # column (a flag) reads as SQL's NOT, and a true/false one is negated.
                negated = self(node.this) == pl.lit(0)
                self.requirements.append(Requirement(negated, unwrapped(node.this), "NOT"))
                return negated
            return ~self.require(node.this, "NOT", boolean=True)
        if _is_literal(node):
            value = literal_value(node)
            return pl.lit(value, dtype=pl.Int64) if _is_integer(value) else pl.lit(value)
        if isinstance(node, exp.Add | exp.Sub | exp.Mul):
            return self._unwrapped_arithmetic(node)
        if isinstance(node, exp.Div):
            divisor = self(node.expression)
            return pl.when(divisor != 0).then(self(node.this) / divisor)
        if isinstance(node, exp.Round):
            return self._round(node)
        if isinstance(node, exp.Floor | exp.Ceil):
            what = node.sql_name()
            if any(node.args.get(key) is not None for key in ("decimals", "to")):
                raise unsupported(node, f"{what} with a second argument", f"write {what}(x)")
            value = self(node.this)
            return value.floor() if isinstance(node, exp.Floor) else value.ceil()
        if isinstance(node, exp.Array):
            if not node.meta.get(QUANTILE_LIST):
                raise unsupported(node, "an ARRAY", "only APPROX_QUANTILES(x, n) makes one")
            return pl.concat_list([self(value) for value in node.expressions])
        if isinstance(node, exp.Coalesce):
            return pl.coalesce(self(value) for value in (node.this, *node.expressions))
        if isinstance(node, exp.Pow | exp.Sqrt | exp.Pi):
            # Row math (rows.py) is for rows; over released values it has no error
            # estimate (_std) to publish with it, so it is left to the caller.
            raise unsupported(
                node,
                construct(node),
                f"{written(node)} applies to row values (inside an aggregate or in WHERE); "
                "over released values, compute it on the released table",
            )
        return super()._translate(node)

    def _unwrapped_arithmetic(self, node: exp.Add | exp.Sub | exp.Mul) -> pl.Expr:
        """``+``, ``-`` or ``*``, NULL where 64-bit integers would wrap around.

        The same operation in floating point shows a wrap: it lands about 2^64
        away from the integer result, where rounding moves a float result by
        a relative 2^-52 at most. Floats agree with themselves, so their
        results and every result's type are kept.
        """
        left, right = self(node.this), self(node.expression)
        exact = _OPERATORS[type(node)](left, right)
        approx = _OPERATORS[type(node)](left.cast(pl.Float64), right.cast(pl.Float64))
        wrapped = (exact.cast(pl.Float64) - approx).abs() > 1e-9 * approx.abs() + 1.0
        return pl.when(wrapped).then(None).otherwise(exact)

    def _round(self, node: exp.Round) -> pl.Expr:
        value = self(node.this)
        places = node.args.get("decimals")
        if places is None:
            return value.round(0, mode="half_away_from_zero")
        digits = literal_value(places)
        if not _is_integer(digits) or not -300 <= digits <= 300:
            raise unsupported(
                node, f"ROUND to {places.sql()} places", "give a whole number from -300 to 300"
            )
        if digits >= 0:
            return value.round(digits, mode="half_away_from_zero")
        scale = 10.0 ** (-digits)
        return (value / scale).round(0, mode="half_away_from_zero") * scale

    def _cast(self, node: exp.Cast) -> pl.Expr:
        dtype = sql_type(node)
        value = self(node.this)
        if dtype.is_integer():
            # SQL rounds to the nearest integer, where polars' cast would truncate.
            value = value.round(0, mode="half_away_from_zero")
        return value.cast(dtype, strict=False)


_OPERATORS: dict[type[exp.Expr], Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    exp.Add: operator.add,
    exp.Sub: operator.sub,
    exp.Mul: operator.mul,
}


def refuse_nested(call: exp.Expr) -> None:
    """Refuse an aggregate call with another aggregate call inside it.

    Example:
        >>> import sqlglot
        >>> from privframe.api.sql.released import refuse_nested
        >>> try:
        ...     refuse_nested(sqlglot.parse_one("SUM(COUNT(*))"))
        ... except Exception as err:
        ...     print(err.construct)
        the aggregate COUNT(*) inside SUM(COUNT(*))

    Raises:
        SQLError: naming the inner call: it would aggregate private rows twice.
    """
    children = list(call.iter_expressions())
    if isinstance(call, exp.WithinGroup) and isinstance(call.this, exp.AggFunc):
        children = [*call.this.iter_expressions(), call.expression]  # its own function
    inner = [found for child in children for found in aggregate_calls(child)]
    if inner:
        raise unsupported(
            inner[0],
            f"the aggregate {inner[0].sql()} inside {call.sql()}",
            "an aggregate of an aggregate would aggregate private rows twice; aggregate "
            "once and compute on the released columns",
        )


def _is_literal(node: exp.Expr) -> bool:
    """A literal or a negated one (``-2``), whose value :func:`literal_value` reads."""
    return isinstance(node, exp.Literal) or (
        isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)
    )


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def unwrapped(node: exp.Expr) -> exp.Expr:
    """``node`` without its outer parentheses: ``((SUM(x)))`` is ``SUM(x)``."""
    while isinstance(node, exp.Paren):
        node = node.this
    return node
