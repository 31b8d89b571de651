"""Checked integer arithmetic: a row whose integer ``+ - * //`` or ``abs`` overflows gets null.

polars' integer operations wrap around (``i64::MAX + 1`` is ``i64::MIN``),
and raising on overflow instead would be a failure oracle.
:func:`checked` rewrites an expression so that in a row where such an
operation's exact result does not fit its result type the whole expression
is null (see :mod:`privframe.engines.expressions`).

Example:
    >>> import polars as pl
    >>> from privframe.engines.checked_arithmetic import checked
    >>> df = pl.DataFrame({"x": [2**62]})
    >>> df.select(checked(pl.col("x") + 1, df.schema))["x"].to_list()
    [4611686018427387905]
"""

from __future__ import annotations

import functools
import io
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from polars.datatypes import IntegerType

from privframe.engines.allow_list import serialized, sub_expressions, type_of

__all__ = ["checked"]

# The integer operations that can overflow (% cannot: its result lies between 0 and
# the divisor, and polars gives MIN % -1 as 0).
_OVERFLOWING = frozenset({"Plus", "Minus", "Multiply", "FloorDivide"})


def _may_overflow(node: Any) -> bool:
    """Whether a serialized expression has an operation that can overflow on integers."""
    if isinstance(node, list):
        return any(_may_overflow(n) for n in node)
    if not isinstance(node, dict):
        return False
    binary, function = node.get("BinaryExpr"), node.get("Function")
    if isinstance(binary, dict) and binary.get("op") in _OVERFLOWING:
        return True
    if isinstance(function, dict) and function.get("function") == "Abs":
        return True
    return any(_may_overflow(v) for v in node.values())


@functools.cache
def _range(dtype: IntegerType) -> tuple[int, int]:
    """The smallest and largest value of an integer type."""
    low, high = pl.select(low=dtype.min(), high=dtype.max()).row(0)
    return int(low), int(high)


def _either(flags: Sequence[pl.Expr | None]) -> pl.Expr | None:
    present = [f for f in flags if f is not None]
    return functools.reduce(operator.or_, present) if present else None


class _Overflows:
    """Per-row overflow flags of the integer operations of expressions over one schema.

    A flag is true where an operation's exact result does not fit its type,
    null or false elsewhere. Flags are built from allow-listed operations
    only (comparisons, ``& |``, ``when/then``, lossless casts and ``//``), so
    every engine computes them exactly as polars does; and each reads the
    unchecked operands, so an expression of n operations nested d deep gets
    flags of size O(n·d), never exponential.
    """

    def __init__(self, schema: pl.Schema) -> None:
        self._frame = pl.LazyFrame(schema=schema)

    def flag(self, node: Any, expr: pl.Expr) -> pl.Expr | None:
        """Where some integer operation of the row overflows; None if none can."""
        if not _may_overflow(node):
            return None
        pairs = sub_expressions(node, expr)
        if "Ternary" in node:
            (pnode, pexpr), (tnode, texpr), (fnode, fexpr) = pairs
            chosen: pl.Expr | None = None
            truthy, falsy = self.flag(tnode, texpr), self.flag(fnode, fexpr)
            if truthy is not None or falsy is not None:
                # Only the branch the row takes counts (a null predicate takes otherwise).
                false = pl.lit(False)
                chosen = (
                    pl.when(pexpr)
                    .then(truthy if truthy is not None else false)
                    .otherwise(falsy if falsy is not None else false)
                )
            return _either([self.flag(pnode, pexpr), chosen])
        inputs = [self.flag(n, e) for n, e in pairs]
        return _either([*inputs, self._own(node, expr, [e for _, e in pairs])])

    def _own(self, node: Any, expr: pl.Expr, inputs: list[pl.Expr]) -> pl.Expr | None:
        """The flag of the operation at the top of ``node`` itself (its inputs aside)."""
        binary, function = node.get("BinaryExpr"), node.get("Function")
        op = binary.get("op", "") if isinstance(binary, dict) else ""
        is_abs = isinstance(function, dict) and function.get("function") == "Abs"
        if op not in _OVERFLOWING and not is_abs:
            return None
        dtype = type_of(expr, self._frame)
        if not isinstance(dtype, IntegerType):
            return None
        low = _range(dtype)[0]
        signed = low < 0
        if is_abs:
            return inputs[0] == pl.lit(low, dtype) if signed else None
        a, b = (self._as(e, dtype) for e in inputs)
        left, right = (self._constant(e, dtype) for e in inputs)
        if left is ... or right is ...:
            return None  # a null constant operand: the result is null anyway
        if left is not None or right is not None:
            return _constant_flag(op, a, b, left, right, dtype)
        zero = pl.lit(0, dtype)
        if op in ("Plus", "Minus") and signed:
            # Two's complement: a sum overflows iff its operands have one sign and the
            # wrapped result the other (a difference: operands of opposite signs).
            same = (a < zero) == (b < zero)
            return (same if op == "Plus" else ~same) & ((expr < zero) != (a < zero))
        if op == "Plus":
            return expr < a
        if op == "Minus":
            return a < b
        if op == "Multiply":
            # The wrapped product r is a·b exactly iff r // a == b (a != 0): were it off by
            # a multiple of 2^bits, the quotient would be off too. The one quotient that
            # wraps itself, MIN // -1, is the case -1·MIN.
            wrapped = (expr // a != b) & (a != zero)
            if not signed:
                return wrapped
            return wrapped | (a == pl.lit(-1, dtype)) & (b == pl.lit(low, dtype))
        return (a == pl.lit(low, dtype)) & (b == pl.lit(-1, dtype)) if signed else None

    def _as(self, expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
        """An operand as polars brings it to the operation's type (a lossless cast)."""
        return expr if type_of(expr, self._frame) == dtype else expr.cast(dtype, strict=False)

    def _constant(self, expr: pl.Expr, dtype: pl.DataType) -> Any:
        """A column-free operand's value in ``dtype`` (``...`` if null); None for others."""
        if expr.meta.root_names():
            return None
        value = pl.select(expr.cast(dtype, strict=False)).item()
        return ... if value is None else int(value)


def _constant_flag(
    op: str, a: pl.Expr, b: pl.Expr, left: int | None, right: int | None, dtype: IntegerType
) -> pl.Expr | None:
    """The overflow flag of ``a op b`` with a constant operand: a range test of the other.

    ``left`` or ``right`` is the constant's value (the other is None); the test
    on the other operand needs no division and no second evaluation of it.
    """
    low, high = _range(dtype)
    x, c = (b, left) if left is not None else (a, right)
    assert c is not None
    if op == "FloorDivide":  # only MIN // -1 overflows
        if low == 0:
            return None
        if right is not None:
            return x == pl.lit(low, dtype) if c == -1 else None
        return x == pl.lit(-1, dtype) if c == low else None
    if op == "Plus":
        fits = (low - c, high - c)
    elif op == "Minus":
        fits = (low + c, high + c) if right is not None else (c - high, c - low)
    elif c == 0:  # Multiply
        return None
    elif c > 0:
        fits = (-(-low // c), high // c)
    else:
        fits = (-(-high // c), low // c)
    lower, upper = max(fits[0], low), min(fits[1], high)
    if low < lower and upper < high:
        return ~x.is_between(pl.lit(lower, dtype), pl.lit(upper, dtype))
    if low < lower:
        return x < pl.lit(lower, dtype)
    return x > pl.lit(upper, dtype) if upper < high else None


def checked(expr: pl.Expr, schema: Mapping[str, pl.DataType] | pl.Schema) -> pl.Expr:
    """``expr`` with checked integer arithmetic: null where an integer operation overflows.

    In a row where an integer ``+ - * //`` or ``abs`` of ``expr`` has an exact
    result outside its type's range (the type polars gives it over
    ``schema``), the whole expression is null instead of a wrapped value; an
    operation inside a ``when/then`` branch the row does not take does not
    count (see the module documentation). Built from allow-listed
    operations only, so every engine computes it exactly as polars does. An
    expression without such operations is returned as is.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.expressions import checked
        >>> df = pl.DataFrame({"x": [1, 2**62]})
        >>> df.select(checked(pl.col("x") * 2, df.schema))["x"].to_list()
        [2, None]
        >>> df.select(pl.col("x") * 2)["x"].to_list()  # polars wraps around
        [2, -9223372036854775808]
    """
    if not _may_overflow(serialized(expr)):
        return expr
    columns = tuple(pl.Schema(schema).items())
    result = _checked(expr.meta.serialize(format="binary"), columns)
    return expr if result is None else result


@functools.lru_cache(maxsize=256)
def _checked(blob: bytes, columns: tuple[tuple[str, pl.DataType], ...]) -> pl.Expr | None:
    """:func:`checked` of a serialized expression, or None if it has nothing to check.

    Cached: the session checks a query's steps on empty frames before the
    engine runs them, and the same query is often released again. The binary
    form keeps non-finite literals exact (the JSON form writes them as null).
    """
    expr = pl.Expr.deserialize(io.BytesIO(blob), format="binary")
    flag = _Overflows(pl.Schema(dict(columns))).flag(serialized(expr), expr)
    if flag is None:
        return None
    result = pl.when(flag).then(None).otherwise(expr)
    name = expr.meta.output_name(raise_if_undetermined=False)
    return result if name is None else result.alias(name)
