"""Allow-listed polars row expressions as Spark Columns with the same row-wise results.

:func:`to_spark` walks the expression's serialized form (the one
:mod:`privframe.engines.expressions` checks) next to the live expression tree, and
builds a :class:`pyspark.sql.Column` that gives, row by row, exactly what polars
gives: the same values, nulls, NaNs, infinities and signs of zero, and the same
type (the Spark twin of the polars type, :func:`spark_type`). What polars and
Spark do differently is emulated explicitly, never left to the Spark session's
settings; in particular nothing in a translated expression can raise, with
``spark.sql.ansi.enabled`` on (Spark 4's default) or off:

* ``/`` is IEEE division: ``x / 0`` is ±inf or NaN (Spark gives null or
  raises). Dividing by a constant ``c`` multiplies by ``1 / c``, as polars'
  kernel does for a column and a scalar (not bit-identical to ``x / c``).
* ``//`` and ``%`` floor (the remainder takes the divisor's sign); on floats
  they are ``floor(x / y)`` and ``x − y·floor(x / y)`` (or with ``x·(1/c)``
  for a constant ``c``); on integers ``x // 0`` and ``x % 0`` are null.
* Integer ``+ − * // abs`` wrap around in the result type's width, as polars
  does (``i64::MAX + 1`` is ``i64::MIN``); Spark raises in ANSI mode. (The
  engines translate the form :func:`~privframe.engines.expressions.checked` gives,
  which is null wherever such an operation overflows.)
* Operands are cast to polars' supertype first (a ``Float32`` column compared
  with ``2.1`` compares in ``Float32``; booleans in arithmetic become numbers).
* Non-strict casts give null, never an error: float → integer truncates and is
  null out of range or for NaN/inf; strings parse with polars' grammar
  (``"+12"``, ``"1e3"``, ``"inf"``, ``"-nan"``; no spaces, no ``"12.0"`` as an
  integer).
* ``is_in`` never yields null for a present value (Spark's ``IN`` does when the
  list holds a null); NaN is in a list holding NaN, and ``-0.0`` equals ``0.0``.
* ``is_nan`` of null is null (Spark's ``isnan`` says false).
* ``sqrt`` is IEEE's correctly rounded root in both (NaN below 0, ``-0.0``
  kept); a ``Float32``'s root is the double root rounded to ``Float32``.

Not translated (:class:`~privframe.errors.InvalidArgumentError`, even where the
polars allow-list admits them): casts from floats or datetimes to strings
(Spark formats numbers and timestamps differently), ``Float16``, and types the
session refuses anyway (decimals, unsigned 64-bit, nested, ...).

Types: the polars schema passed to :func:`to_spark` decides the semantics,
and each column is read as :func:`spark_type` of its polars type (a no-op cast
when the Spark frame already has that type). A datetime column may be a Spark
``timestamp`` or ``timestamp_ntz``: either way its value is its epoch
microseconds (the UTC wall time of a ``timestamp_ntz``), as polars'
physical value; results are ``timestamp_ntz`` for naive datetimes and
``timestamp`` for zoned ones, and the Spark session's time zone never changes
a result. Polars itself is not fully consistent on one point: on a frame of
exactly one row, ``x / c`` is computed as ``x / c`` rather than ``x · (1/c)``;
the translation follows the many-row behaviour.

Size: an emulation reads its operands several times; a composite operand is
computed once per row (bound to a lambda variable of a one-element
``transform``), so the Spark expression grows linearly with nesting, not
exponentially.

Example:
    >>> import polars as pl
    >>> from privframe.engines.spark.expressions import spark_type, to_spark
    >>> spark_type(pl.Int64), spark_type(pl.Datetime("us"))
    ('bigint', 'timestamp_ntz')
    >>> schema = {"amount": pl.Int64, "region": pl.String}
    >>> column = to_spark((pl.col("amount") / 100).alias("dollars"), schema)  # doctest: +SKIP
    >>> spark_frame.select(column)  # doctest: +SKIP
    DataFrame[dollars: double]
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from privframe.engines.allow_list import (
    ARITHMETIC,
    COMPARISONS,
    SAFE_FUNCTIONS,
    is_allowed,
    sub_expressions,
)
from privframe.engines.spark._casts import cast, plain_cast
from privframe.engines.spark._columns import (
    compare,
    divide,
    evaluate,
    float_floor,
    float_literal,
    float_test,
    int_abs,
    int_arithmetic,
    literal,
    logic,
    pyspark_functions,
    read_column,
    widen,
    wrap_bits,
)
from privframe.engines.spark.types import FLOATS, INTS, is_float, is_int, is_number, spark_type
from privframe.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["spark_type", "to_spark"]


def to_spark(
    expr: pl.Expr, schema: Mapping[str, pl.DataType | type[pl.DataType]] | pl.Schema
) -> Column:
    """The Spark Column computing, row by row, what the polars expression computes.

    ``expr`` must pass privframe's allow-list
    (:func:`~privframe.engines.expressions.check_expression` or
    :func:`~privframe.engines.expressions.check_filter`, optionally with an
    ``.alias(name)``). ``schema`` gives the polars types of the columns the
    expression reads: results depend on them (integer or float division,
    the width integers wrap in, the type a literal takes). The Spark frame's
    columns must have the :func:`spark_type` of those types. The Column is
    named as polars names the expression's output.

    Raises:
        InvalidArgumentError: the expression is not on the allow-list, or uses
            a construct that Spark cannot compute exactly as polars does (see
            the module documentation).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spark.expressions import to_spark
        >>> to_spark(pl.col("x").mean(), {"x": pl.Float64})
        Traceback (most recent call last):
        ...
        privframe.errors.InvalidArgumentError: ...
    """
    if not isinstance(expr, pl.Expr):
        raise InvalidArgumentError(f"to_spark takes a polars expression, got {type(expr).__name__}")
    try:
        node = json.loads(expr.meta.serialize(format="json"))
    except Exception:  # refuse what cannot be read rather than guess
        node = None
    if not is_allowed(node):
        raise InvalidArgumentError(
            f"the expression {expr} is not one privframe can run privately (see "
            "privframe.engines.expressions), so it has no Spark translation"
        )
    try:
        columns = tuple(pl.Schema(schema).items())
    except Exception as err:
        raise InvalidArgumentError(f"to_spark needs a polars schema, got {schema!r}") from err
    frame = _empty(columns)
    translator = _Translator(frame)
    column = translator.translate(node, expr)
    result = translator.dtype(expr)
    if isinstance(result, pl.Datetime) and result.time_zone:
        column = pyspark_functions().timestamp_micros(
            pyspark_functions().unix_micros(column)
        )  # an instant
    name = expr.meta.output_name(raise_if_undetermined=False)
    return column.alias(name) if name is not None else column


@functools.lru_cache(maxsize=16)
def _empty(schema: tuple[tuple[str, pl.DataType], ...]) -> pl.LazyFrame:
    """An empty frame of the schema, to type expressions on (the same for every step)."""
    return pl.LazyFrame(schema=dict(schema))


def _has_column(node: Any) -> bool:
    """Whether a serialized expression reads a column (if not, it is one constant value)."""
    if isinstance(node, dict):
        return "Column" in node or any(_has_column(v) for v in node.values())
    if isinstance(node, list):
        return any(_has_column(v) for v in node)
    return False


def _leaf(node: Any) -> bool:
    """Whether a node translates to a small Column (a column or a constant), cheap to repeat."""
    while isinstance(node, dict) and "Alias" in node:
        node = node["Alias"][0]
    return isinstance(node, dict) and ("Column" in node or not _has_column(node))


def _let(values: Sequence[tuple[Column, bool]], body: Callable[..., Column]) -> Column:
    """``body(*columns)``, computing each composite column once per row.

    The emulations read their operands several times; repeating a composite
    operand's tree would make the Spark expression grow exponentially with
    the nesting depth. Spark Columns have no let-binding, so each composite
    (not ``leaf``) value is bound to a lambda variable of a one-element
    ``transform``: ``transform(array(x), v -> body(v))[0]``.
    """
    sf = pyspark_functions()

    def bind(i: int, bound: list[Column]) -> Column:
        if i == len(values):
            return body(*bound)
        column, leaf = values[i]
        if leaf:
            return bind(i + 1, [*bound, column])
        return sf.transform(sf.array(column), lambda v: bind(i + 1, [*bound, v]))[0]

    return bind(0, [])


def _function_name(function: Any) -> str:
    """A readable name for a serialized polars function."""
    if isinstance(function, dict) and len(function) == 1:
        ((namespace, inner),) = function.items()
        return f"{namespace}.{inner if isinstance(inner, str) else next(iter(inner))}"
    return str(function)


class _Translator:
    """Translates one expression over the columns of ``frame`` (an empty LazyFrame)."""

    def __init__(self, frame: pl.LazyFrame) -> None:
        self._frame = frame

    # -- types and constants

    def dtype(self, expr: pl.Expr) -> pl.DataType:
        """The polars type of ``expr`` over the schema (no data is read)."""
        try:
            return self._frame.select(expr.alias("__type")).collect_schema()["__type"]
        except pl.exceptions.PolarsError as err:
            raise InvalidArgumentError(f"polars cannot type the expression {expr}: {err}") from None

    def constant(self, expr: pl.Expr, dtype: pl.DataType | None = None) -> Column:
        """A column-free expression, evaluated by polars itself, as a Spark literal."""
        series = evaluate(expr if dtype is None else expr.cast(dtype, strict=False))
        return literal(series.item(), series.dtype)

    def operand(self, node: Any, expr: pl.Expr, target: pl.DataType) -> Column:
        """A sub-expression as polars brings it to the operation type ``target``."""
        if not _has_column(node):
            return self.constant(expr, target)
        return widen(self.translate(node, expr), self.dtype(expr), target)

    def supertype(self, exprs: list[pl.Expr]) -> pl.DataType:
        """The type polars compares ``exprs`` in."""
        types = [self.dtype(e) for e in exprs]
        present = [t for t in types if t != pl.Null()] or types
        if all(t == present[0] for t in present):
            return present[0]
        if all(is_number(t) or t == pl.Boolean() for t in present):
            total = exprs[0]
            for e in exprs[1:]:
                total = total + e
            return self.dtype(total)
        raise InvalidArgumentError(f"cannot compare values of types {types}")

    # -- the walk

    def translate(self, node: Any, expr: pl.Expr) -> Column:
        """The Spark Column for one serialized node and its live expression."""
        if not _has_column(node):
            return self.constant(expr)
        ((kind, body),) = node.items()
        pairs = sub_expressions(node, expr)
        if kind == "Column":
            return read_column(body, self.dtype(expr))
        if kind == "Alias":
            return self.translate(*pairs[0])
        if kind == "Cast":
            ((cnode, cexpr),) = pairs
            source, target = self.dtype(cexpr), self.dtype(expr)
            value = self.translate(cnode, cexpr)
            if _leaf(cnode) or plain_cast(source, target):
                return cast(value, source, target)
            return _let([(value, False)], lambda v: cast(v, source, target))
        if kind == "Ternary":
            return self._ternary(expr, pairs)
        if kind == "BinaryExpr":
            return self._binary(body["op"], expr, pairs)
        if kind == "Function":
            return self._function(body["function"], expr, pairs)
        raise InvalidArgumentError(f"the expression kind {kind} has no Spark translation")

    def _ternary(self, expr: pl.Expr, pairs: list[tuple[Any, pl.Expr]]) -> Column:
        (pnode, pexpr), truthy, falsy = pairs
        target = self.dtype(expr)
        predicate = self.translate(pnode, pexpr)
        if self.dtype(pexpr) != pl.Boolean():
            predicate = predicate.cast("boolean")  # a bare null predicate
        chosen = self.operand(*truthy, target)
        return pyspark_functions().when(predicate, chosen).otherwise(self.operand(*falsy, target))

    def _binary(self, op: str, expr: pl.Expr, pairs: list[tuple[Any, pl.Expr]]) -> Column:
        (lnode, lexpr), (rnode, rexpr) = pairs
        if op in COMPARISONS:
            target = self.supertype([lexpr, rexpr])
            left, right = self.operand(lnode, lexpr, target), self.operand(rnode, rexpr, target)
            return compare(op, left, right)
        target = self.dtype(expr)
        if op in ("And", "Or", "Xor"):
            left, right = self.operand(lnode, lexpr, target), self.operand(rnode, rexpr, target)
            return logic(op, left, right, target)
        if op not in ARITHMETIC or op == "Divide" or not is_number(target):
            raise InvalidArgumentError(
                f"the operation {op} with a result of type {target} has no Spark translation"
            )
        if is_int(target):
            left, right = self.operand(lnode, lexpr, target), self.operand(rnode, rexpr, target)
            return _let(
                [(left, _leaf(lnode)), (right, _leaf(rnode))],
                lambda a, b: int_arithmetic(op, a, b, INTS[target]),
            )
        return self._float_arithmetic(op, target, pairs)

    def _float_arithmetic(
        self, op: str, target: pl.DataType, pairs: list[tuple[Any, pl.Expr]]
    ) -> Column:
        """IEEE arithmetic as polars' float kernels do it, including their scalar shortcuts."""
        (lnode, lexpr), (rnode, rexpr) = pairs
        kind = FLOATS[target]
        left, right = self.operand(lnode, lexpr, target), self.operand(rnode, rexpr, target)
        # A constant side (a length-1 array) takes polars' scalar kernels.
        lvalue = None if _has_column(lnode) else self._float_value(lexpr, target)
        rvalue = None if _has_column(rnode) else self._float_value(rexpr, target)
        if op == "Plus":
            if rvalue is not None and rvalue == 0:
                return left  # x + 0.0 keeps x (even -0.0)
            if lvalue is not None and lvalue == 0:
                return right
            return left + right
        if op == "Minus":
            if rvalue is not None and rvalue == 0:
                return left
            if lvalue is not None and lvalue == 0:
                return -right  # 0 - x is -x (so 0 - 0.0 is -0.0)
            return left - right
        if op == "Multiply":
            return left * right
        if rvalue is not None:
            with np.errstate(divide="ignore"):  # 1 / ±0 is ±inf, as in polars
                inverse = rvalue.dtype.type(1.0) / rvalue
            if op == "TrueDivide":
                if inverse == 1:
                    return left
                if inverse == -1:
                    return -left
                return left * float_literal(inverse, kind)

        def divided(x: Column, y: Column) -> Column:
            quotient = divide(x, y, kind) if rvalue is None else x * float_literal(inverse, kind)
            if op == "TrueDivide":
                return quotient
            floor = float_floor(quotient, kind)
            return floor if op == "FloorDivide" else x - y * floor  # or Modulus

        return _let([(left, _leaf(lnode)), (right, _leaf(rnode))], divided)

    def _float_value(self, expr: pl.Expr, target: pl.DataType) -> np.floating[Any] | None:
        """A constant operand's value in the operation's float type (None if null)."""
        value = evaluate(expr.cast(target, strict=False)).item()
        if value is None:
            return None
        return np.float32(value) if target == pl.Float32() else np.float64(value)

    def _function(self, function: Any, expr: pl.Expr, pairs: list[tuple[Any, pl.Expr]]) -> Column:
        sf = pyspark_functions()
        name = json.dumps(function)
        if isinstance(function, dict) and isinstance(function.get("Boolean"), dict):
            options = function["Boolean"]
            if "IsIn" in options:
                return self._is_in(pairs, bool(options["IsIn"].get("nulls_equal")))
            if "IsBetween" in options:
                return self._is_between(pairs, options["IsBetween"].get("closed"))
        if isinstance(function, dict) and isinstance(function.get("StringExpr"), dict):
            options = function["StringExpr"].get("Contains")
            if isinstance(options, dict) and options.get("literal") is True:
                value, pattern = self._strings(pairs)
                return value.contains(pattern)
        if name not in SAFE_FUNCTIONS:
            raise InvalidArgumentError(
                f"the function {_function_name(function)} has no Spark translation"
            )
        if name in ('{"StringExpr": "StartsWith"}', '{"StringExpr": "EndsWith"}'):
            value, pattern = self._strings(pairs)
            return value.startswith(pattern) if "Starts" in name else value.endswith(pattern)
        ((node, child),) = pairs
        dtype = self.dtype(child)
        value = self.translate(node, child)
        leaf = _leaf(node)
        if name == '{"Boolean": "IsNull"}':
            return value.isNull()
        if name == '{"Boolean": "IsNotNull"}':
            return value.isNotNull()
        if name == '{"Boolean": "Not"}':
            if dtype == pl.Boolean():
                return ~value
            if is_int(dtype):
                return wrap_bits(sf.bitwise_not(value), INTS[dtype])
        elif name == '"Abs"':
            if is_int(dtype):
                return _let([(value, leaf)], lambda v: int_abs(v, INTS[dtype]))
            if is_float(dtype):
                return sf.abs(value)
        elif name == '{"Pow": "Sqrt"}':
            # IEEE's square root is correctly rounded in both engines (NaN below 0, -0.0
            # kept); a Float32's root rounded from the double root is Float32's root.
            if is_float(dtype) or is_int(dtype):
                root = sf.sqrt(value)
                return root.cast("float") if dtype == pl.Float32() else root
        elif is_float(dtype) or is_int(dtype):
            return _let([(value, leaf)], lambda v: float_test(name, v, is_float(dtype)))
        raise InvalidArgumentError(
            f"the function {_function_name(function)} on {dtype} has no Spark translation"
        )

    def _strings(self, pairs: list[tuple[Any, pl.Expr]]) -> tuple[Column, Column]:
        (vnode, vexpr), (pnode, pexpr) = pairs
        for e in (vexpr, pexpr):
            if self.dtype(e) not in (pl.String(), pl.Null()):
                raise InvalidArgumentError(f"string functions need strings, got {self.dtype(e)}")
        return self.operand(vnode, vexpr, pl.String()), self.operand(pnode, pexpr, pl.String())

    def _is_between(self, pairs: list[tuple[Any, pl.Expr]], closed: Any) -> Column:
        if closed not in ("Both", "Left", "Right", "None"):
            raise InvalidArgumentError(f"is_between(closed={closed!r}) has no Spark translation")
        target = self.supertype([e for _, e in pairs])
        value, low, high = (self.operand(n, e, target) for n, e in pairs)

        def between(v: Column) -> Column:
            above = v >= low if closed in ("Both", "Left") else v > low
            below = v <= high if closed in ("Both", "Right") else v < high
            return above & below

        return _let([(value, _leaf(pairs[0][0]))], between)

    def _is_in(self, pairs: list[tuple[Any, pl.Expr]], nulls_equal: bool) -> Column:
        sf = pyspark_functions()
        (vnode, vexpr), (_, lexpr) = pairs
        items = evaluate(lexpr).item()
        if not isinstance(items, pl.Series):
            raise InvalidArgumentError("is_in needs a literal list")
        vtype, itype = self.dtype(vexpr), items.dtype
        if itype == pl.Null() or itype == vtype:
            target = vtype
        elif is_number(vtype) and is_number(itype):
            probe = pl.LazyFrame(schema={"a": vtype, "b": itype})
            target = probe.select(pl.col("a") + pl.col("b")).collect_schema()["a"]
        else:
            raise InvalidArgumentError(f"is_in of {vtype} values in a list of {itype}")
        value = self.operand(vnode, vexpr, target)
        present = items.drop_nulls().cast(target).unique(maintain_order=True).to_list()
        if is_float(target):
            # Spark's IN may hash floats: make -0.0 and 0.0 one value (NaN is handled).
            value = value + float_literal(0.0, FLOATS[target])
            present = [v + 0.0 for v in present]
        if isinstance(target, pl.Datetime):
            present = [literal(v, target) for v in present]
        # Plain values (one JVM call each, for long key lists): Spark widens the tested
        # value to the literals' type if needed, losslessly (f32 to double, int to bigint).
        when_null = sf.lit(items.null_count() > 0) if nulls_equal else sf.lit(None)
        return _let(
            [(value, _leaf(vnode))],
            lambda v: sf.when(v.isNull(), when_null.cast("boolean")).otherwise(
                v.isin(*present) if present else sf.lit(False)
            ),
        )
