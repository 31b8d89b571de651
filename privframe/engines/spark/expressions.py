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
from dataclasses import dataclass
from decimal import Decimal
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
from privframe.errors import InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["spark_type", "to_spark"]


@dataclass(frozen=True)
class _Int:
    """A polars integer type on Spark: its range and the Spark type holding it."""

    spark: str
    low: int
    high: int

    @property
    def native(self) -> bool:
        """Whether the Spark type has exactly this range (signed types)."""
        return self.low < 0


_INTS: dict[pl.DataType, _Int] = {
    pl.Int8(): _Int("tinyint", -(2**7), 2**7 - 1),
    pl.Int16(): _Int("smallint", -(2**15), 2**15 - 1),
    pl.Int32(): _Int("int", -(2**31), 2**31 - 1),
    pl.Int64(): _Int("bigint", -(2**63), 2**63 - 1),
    # Spark has no unsigned types: the next wider signed type holds each.
    pl.UInt8(): _Int("smallint", 0, 2**8 - 1),
    pl.UInt16(): _Int("int", 0, 2**16 - 1),
    pl.UInt32(): _Int("bigint", 0, 2**32 - 1),
}
_FLOATS: dict[pl.DataType, str] = {pl.Float32(): "float", pl.Float64(): "double"}
_OTHERS: dict[pl.DataType, str] = {
    pl.Boolean(): "boolean",
    pl.String(): "string",
    pl.Date(): "date",
    pl.Null(): "void",
}

# polars' grammar for non-strict string casts (ASCII digits, no spaces), as Java regular
# expressions that cannot backtrack (possessive quantifiers: linear time on any string).
# At most 19 significant digits: anything longer is out of range for every integer type.
_SIGNED = r"\A[+-]?(?=[0-9])0*+([1-9][0-9]{0,18})?\z"
_UNSIGNED = r"\A\+?(?=[0-9])0*+([1-9][0-9]{0,18})?\z"
_REAL = r"\A[+-]?([0-9]++(\.[0-9]*+)?|\.[0-9]++)([eE][+-]?[0-9]++)?\z"
_NAN = r"(?i)\A[+-]?nan\z"
_INF = r"(?i)\A\+?inf(inity)?\z"
_MINUS_INF = r"(?i)\A-inf(inity)?\z"

_EPOCH = "1970-01-01 00:00:00"
_MICROS_PER = {"ms": 1000, "ns": 1000}  # ms: micros // 1000; ns: micros * 1000


def spark_type(dtype: pl.DataType | type[pl.DataType]) -> str:
    """The Spark SQL type (DDL name) that holds values of a polars type.

    Unsigned integers go in the next wider signed type; a naive datetime is a
    ``timestamp_ntz`` (wall time), one with a time zone a ``timestamp`` (an
    instant), at microsecond precision.

    Raises:
        InvalidArgumentError: a type Spark cannot hold exactly (``Float16``,
            unsigned 64-bit, decimals, nested types, ...).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spark.expressions import spark_type
        >>> [spark_type(t) for t in (pl.Int64, pl.UInt8, pl.Float32, pl.String)]
        ['bigint', 'smallint', 'float', 'string']
    """
    dtype = dtype() if isinstance(dtype, type) else dtype
    if dtype in _INTS:
        return _INTS[dtype].spark
    if dtype in _FLOATS:
        return _FLOATS[dtype]
    if dtype in _OTHERS:
        return _OTHERS[dtype]
    if isinstance(dtype, pl.Datetime):
        return "timestamp" if dtype.time_zone else "timestamp_ntz"
    raise InvalidArgumentError(f"values of type {dtype} cannot be held exactly in Spark")


def _kind(dtype: pl.DataType) -> str:
    """The Spark type a value is computed in: datetimes as UTC wall times (timestamp_ntz)."""
    return "timestamp_ntz" if isinstance(dtype, pl.Datetime) else spark_type(dtype)


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
        column = _sf().timestamp_micros(_sf().unix_micros(column))  # an instant
    name = expr.meta.output_name(raise_if_undetermined=False)
    return column.alias(name) if name is not None else column


@functools.lru_cache(maxsize=16)
def _empty(schema: tuple[tuple[str, pl.DataType], ...]) -> pl.LazyFrame:
    """An empty frame of the schema, to type expressions on (the same for every step)."""
    return pl.LazyFrame(schema=dict(schema))


@functools.cache
def _sf() -> Any:
    """pyspark.sql.functions, imported on first use (pyspark is an optional dependency)."""
    from pyspark.sql import functions

    return functions


def _evaluate(expr: pl.Expr) -> pl.Series:
    """A column-free expression's one value, computed by polars (so exactly as polars does)."""
    try:
        return pl.select(expr.alias("__value")).to_series()
    except pl.exceptions.PolarsError as err:
        raise InvalidArgumentError(f"polars cannot evaluate {expr}: {err}") from None


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
    sf = _sf()

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


def _is_int(dtype: pl.DataType) -> bool:
    return dtype in _INTS


def _is_float(dtype: pl.DataType) -> bool:
    return dtype in _FLOATS


def _is_number(dtype: pl.DataType) -> bool:
    return _is_int(dtype) or _is_float(dtype)


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
        series = _evaluate(expr if dtype is None else expr.cast(dtype, strict=False))
        return _literal(series.item(), series.dtype)

    def operand(self, node: Any, expr: pl.Expr, target: pl.DataType) -> Column:
        """A sub-expression as polars brings it to the operation type ``target``."""
        if not _has_column(node):
            return self.constant(expr, target)
        return _widen(self.translate(node, expr), self.dtype(expr), target)

    def supertype(self, exprs: list[pl.Expr]) -> pl.DataType:
        """The type polars compares ``exprs`` in."""
        types = [self.dtype(e) for e in exprs]
        present = [t for t in types if t != pl.Null()] or types
        if all(t == present[0] for t in present):
            return present[0]
        if all(_is_number(t) or t == pl.Boolean() for t in present):
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
            return _read(body, self.dtype(expr))
        if kind == "Alias":
            return self.translate(*pairs[0])
        if kind == "Cast":
            ((cnode, cexpr),) = pairs
            source, target = self.dtype(cexpr), self.dtype(expr)
            value = self.translate(cnode, cexpr)
            if _leaf(cnode) or _plain_cast(source, target):
                return _cast(value, source, target)
            return _let([(value, False)], lambda v: _cast(v, source, target))
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
        return _sf().when(predicate, chosen).otherwise(self.operand(*falsy, target))

    def _binary(self, op: str, expr: pl.Expr, pairs: list[tuple[Any, pl.Expr]]) -> Column:
        (lnode, lexpr), (rnode, rexpr) = pairs
        if op in COMPARISONS:
            target = self.supertype([lexpr, rexpr])
            left, right = self.operand(lnode, lexpr, target), self.operand(rnode, rexpr, target)
            return _compare(op, left, right)
        target = self.dtype(expr)
        if op in ("And", "Or", "Xor"):
            left, right = self.operand(lnode, lexpr, target), self.operand(rnode, rexpr, target)
            return _logic(op, left, right, target)
        if op not in ARITHMETIC or op == "Divide" or not _is_number(target):
            raise InvalidArgumentError(
                f"the operation {op} with a result of type {target} has no Spark translation"
            )
        if _is_int(target):
            left, right = self.operand(lnode, lexpr, target), self.operand(rnode, rexpr, target)
            return _let(
                [(left, _leaf(lnode)), (right, _leaf(rnode))],
                lambda a, b: _int_arithmetic(op, a, b, _INTS[target]),
            )
        return self._float_arithmetic(op, target, pairs)

    def _float_arithmetic(
        self, op: str, target: pl.DataType, pairs: list[tuple[Any, pl.Expr]]
    ) -> Column:
        """IEEE arithmetic as polars' float kernels do it, including their scalar shortcuts."""
        (lnode, lexpr), (rnode, rexpr) = pairs
        kind = _FLOATS[target]
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
                inverse = np.divide(np.asarray(1.0, dtype=rvalue.dtype), rvalue)
            if op == "TrueDivide":
                if inverse == 1:
                    return left
                if inverse == -1:
                    return -left
                return left * _float_literal(inverse, kind)

        def divided(x: Column, y: Column) -> Column:
            quotient = _divide(x, y, kind) if rvalue is None else x * _float_literal(inverse, kind)
            if op == "TrueDivide":
                return quotient
            floor = _floor(quotient, kind)
            return floor if op == "FloorDivide" else x - y * floor  # or Modulus

        return _let([(left, _leaf(lnode)), (right, _leaf(rnode))], divided)

    def _float_value(self, expr: pl.Expr, target: pl.DataType) -> np.floating[Any] | None:
        """A constant operand's value in the operation's float type (None if null)."""
        value = _evaluate(expr.cast(target, strict=False)).item()
        if value is None:
            return None
        return np.float32(value) if target == pl.Float32() else np.float64(value)

    def _function(self, function: Any, expr: pl.Expr, pairs: list[tuple[Any, pl.Expr]]) -> Column:
        sf = _sf()
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
            if _is_int(dtype):
                return _wrap_bits(sf.bitwise_not(value), _INTS[dtype])
        elif name == '"Abs"':
            if _is_int(dtype):
                return _let([(value, leaf)], lambda v: _int_abs(v, _INTS[dtype]))
            if _is_float(dtype):
                return sf.abs(value)
        elif _is_float(dtype) or _is_int(dtype):
            return _let([(value, leaf)], lambda v: _float_test(name, v, _is_float(dtype)))
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
        sf = _sf()
        (vnode, vexpr), (_, lexpr) = pairs
        items = _evaluate(lexpr).item()
        if not isinstance(items, pl.Series):
            raise InvalidArgumentError("is_in needs a literal list")
        vtype, itype = self.dtype(vexpr), items.dtype
        if itype == pl.Null() or itype == vtype:
            target = vtype
        elif _is_number(vtype) and _is_number(itype):
            probe = pl.LazyFrame(schema={"a": vtype, "b": itype})
            target = probe.select(pl.col("a") + pl.col("b")).collect_schema()["a"]
        else:
            raise InvalidArgumentError(f"is_in of {vtype} values in a list of {itype}")
        value = self.operand(vnode, vexpr, target)
        present = items.drop_nulls().cast(target).unique(maintain_order=True).to_list()
        if _is_float(target):
            # Spark's IN may hash floats: make -0.0 and 0.0 one value (NaN is handled).
            value = value + _float_literal(0.0, _FLOATS[target])
            present = [v + 0.0 for v in present]
        if isinstance(target, pl.Datetime):
            present = [_literal(v, target) for v in present]
        # Plain values (one JVM call each, for long key lists): Spark widens the tested
        # value to the literals' type if needed, losslessly (f32 to double, int to bigint).
        when_null = sf.lit(items.null_count() > 0) if nulls_equal else sf.lit(None)
        return _let(
            [(value, _leaf(vnode))],
            lambda v: sf.when(v.isNull(), when_null.cast("boolean")).otherwise(
                v.isin(*present) if present else sf.lit(False)
            ),
        )


# ---------------------------------------------------------------- Spark building blocks


def _literal(value: Any, dtype: pl.DataType) -> Column:
    """A Spark literal of the twin of ``dtype`` (exact: no parsing, no time zone)."""
    sf = _sf()
    if dtype == pl.Null():
        return sf.lit(None)
    kind = _kind(dtype)
    if value is None:
        return sf.lit(None).cast(kind)
    if dtype == pl.Date():
        days = pl.Series([value], dtype=pl.Date).cast(pl.Int32).item()
        return sf.date_from_unix_date(sf.lit(days))
    if isinstance(dtype, pl.Datetime):
        raw = pl.Series([value], dtype=dtype).cast(pl.Int64).item()
        micros, rest = _to_micros(raw, dtype.time_unit)
        if rest:
            raise InvalidArgumentError(f"the datetime {value} is finer than Spark's microseconds")
        return _wall(sf.lit(micros))
    if _is_float(dtype):
        return _float_literal(float(value), kind)
    if kind in ("string", "boolean"):
        return sf.lit(value)
    return sf.lit(value).cast(kind)


def _read(name: str, dtype: pl.DataType) -> Column:
    """A column of the Spark frame, as the Spark twin of its polars type."""
    sf = _sf()
    column = sf.col("`" + name.replace("`", "``") + "`")
    if isinstance(dtype, pl.Datetime):
        # timestamp or timestamp_ntz alike: the same epoch microseconds, as a UTC wall time.
        return _wall(sf.unix_micros(column))
    return column.cast(spark_type(dtype))


def _wall(micros: Column) -> Column:
    """The timestamp_ntz ``micros`` after 1970-01-01 00:00 (no time zone is involved)."""
    sf = _sf()
    return sf.timestamp_add("MICROSECOND", micros, sf.lit(_EPOCH).cast("timestamp_ntz"))


def _to_micros(raw: int, unit: str) -> tuple[int, int]:
    if unit == "ms":
        return raw * 1000, 0
    if unit == "ns":
        return divmod(raw, 1000)
    return raw, 0


def _float_literal(value: float | np.floating[Any], kind: str) -> Column:
    literal = _sf().lit(float(value))  # a double
    return literal if kind == "double" else literal.cast(kind)


def _widen(column: Column, source: pl.DataType, target: pl.DataType) -> Column:
    """``column`` as polars brings it to ``target`` for an operation (a lossless cast)."""
    if source == target:
        return column
    kind = _kind(target)
    if source == pl.Null():
        return column.cast(kind)
    if _is_float(target) and (_is_number(source) or source == pl.Boolean()):
        return column.cast(kind)  # int -> float rounds to nearest, as in polars
    if _is_int(target) and source == pl.Boolean():
        return column.cast(kind)
    if _is_int(target) and _is_int(source):
        wide, narrow = _INTS[target], _INTS[source]
        if wide.low <= narrow.low and narrow.high <= wide.high:
            return column.cast(kind)
    raise InvalidArgumentError(f"no Spark translation brings {source} values to {target}")


def _compare(op: str, left: Column, right: Column) -> Column:
    if op == "Eq":
        return left == right
    if op == "NotEq":
        return left != right
    if op == "Lt":
        return left < right
    if op == "LtEq":
        return left <= right
    if op == "Gt":
        return left > right
    if op == "GtEq":
        return left >= right
    if op == "EqValidity":
        return left.eqNullSafe(right)
    return ~left.eqNullSafe(right)  # NotEqValidity


def _logic(op: str, left: Column, right: Column, dtype: pl.DataType) -> Column:
    """``& | ^``: Kleene logic on booleans, bitwise on integers."""
    if dtype == pl.Boolean():
        if op == "And":
            return left & right
        if op == "Or":
            return left | right
        return left != right  # Xor: null if either is null
    if _is_int(dtype):
        if op == "And":
            return left.bitwiseAND(right)
        if op == "Or":
            return left.bitwiseOR(right)
        return left.bitwiseXOR(right)
    raise InvalidArgumentError(f"the operation {op} on {dtype} has no Spark translation")


def _divide(left: Column, right: Column, kind: str) -> Column:
    """IEEE ``left / right`` in ``kind``: ±inf or NaN for a zero divisor, never null."""
    sf = _sf()
    # pow(±0, -1) is ±inf with the zero's sign; x · ±inf is then what x / ±0 is.
    by_zero = left * sf.pow(right, sf.lit(-1.0))
    quotient = sf.when(right == 0, by_zero).otherwise(left / sf.when(right != 0, right))
    return quotient.cast(kind)


def _floor(value: Column, kind: str) -> Column:
    """floor() on floats, keeping -0.0, ±inf, NaN and huge values as they are."""
    sf = _sf()
    keep = (value == 0) | ~(sf.abs(value) < sf.lit(2.0**52))
    # floor() returns a bigint: only values it holds exactly ever reach it.
    return sf.when(keep, value).otherwise(sf.floor(sf.when(~keep, value)).cast(kind))


def _decimal(value: int) -> Column:
    return _sf().lit(Decimal(value))


def _int_arithmetic(op: str, left: Column, right: Column, info: _Int) -> Column:
    """Integer arithmetic as polars does it: wrapping; ``// 0`` and ``% 0`` are null."""
    sf = _sf()
    if op == "TrueDivide":  # pragma: no cover - polars types true division as a float
        raise InvalidArgumentError("integer true division has no integer result")
    if op in ("Plus", "Minus", "Multiply"):
        tried = {"Plus": sf.try_add, "Minus": sf.try_subtract, "Multiply": sf.try_multiply}
        fast = tried[op](left, right)  # null on overflow
        if not info.native:
            fast = sf.when(fast.between(info.low, info.high), fast)
        exact_left, exact_right = left.cast("decimal(20,0)"), right.cast("decimal(20,0)")
        exact = {
            "Plus": exact_left + exact_right,
            "Minus": exact_left - exact_right,
            "Multiply": exact_left * exact_right,  # |x·y| < 2^126 fits decimal(38,0)
        }[op]
        return sf.coalesce(fast, _wrap(exact, info))
    # Divisors that could raise (0, and -1 for MIN // -1) never reach Spark's operators.
    divisor = sf.when(right != 0, right)
    remainder = left % divisor  # truncated; MIN % -1 is 0
    # A remainder of the other sign than the divisor moves by one divisor (floor
    # semantics); written so that no operand can overflow, whatever Spark evaluates.
    adjust = (remainder != 0) & ((remainder < 0) != (divisor < 0))
    if op == "Modulus":
        return (remainder + sf.when(adjust, divisor).otherwise(0)).cast(info.spark)
    if op != "FloorDivide":
        raise InvalidArgumentError(f"the operation {op} has no Spark translation")
    truncated = sf.call_function("div", left, sf.when(~right.isin(0, -1), right))
    floor_div = (truncated - sf.when(adjust, 1).otherwise(0)).cast(info.spark)
    return sf.when(right == -1, _int_negate(left, info)).otherwise(floor_div)


def _wrap(exact: Column, info: _Int) -> Column:
    """An exact decimal integer wrapped into the range of ``info`` (two's complement)."""
    sf = _sf()
    span = info.high - info.low + 1
    return (sf.pmod(exact - _decimal(info.low), _decimal(span)) + _decimal(info.low)).cast(
        info.spark
    )


def _int_negate(value: Column, info: _Int) -> Column:
    """-x, wrapping (-MIN is MIN); for unsigned types only 0 can be negated in range."""
    sf = _sf()
    if not info.native:
        return _wrap(-value.cast("decimal(20,0)"), info)
    safe = sf.when(value != info.low, value)
    return sf.when(value == info.low, value).otherwise(-safe)


def _int_abs(value: Column, info: _Int) -> Column:
    sf = _sf()
    if not info.native:
        return value
    safe = sf.when(value != info.low, value)
    return sf.when(value == info.low, value).otherwise(sf.abs(safe))


def _wrap_bits(value: Column, info: _Int) -> Column:
    """Bitwise results of an unsigned type, masked to its width (signed ones already fit)."""
    if info.native:
        return value
    return value.bitwiseAND(_sf().lit(info.high).cast(info.spark))


def _float_test(name: str, value: Column, is_float: bool) -> Column:
    """is_nan / is_not_nan / is_finite / is_infinite; null for null (Spark's isnan says false)."""
    sf = _sf()
    if not is_float:  # integers: never NaN, always finite
        answer = name in ('{"Boolean": "IsNotNan"}', '{"Boolean": "IsFinite"}')
        return sf.when(value.isNotNull(), sf.lit(answer))
    inf = sf.lit(float("inf"))
    if name == '{"Boolean": "IsNan"}':
        return sf.when(value.isNotNull(), sf.isnan(value))
    if name == '{"Boolean": "IsNotNan"}':
        return sf.when(value.isNotNull(), ~sf.isnan(value))
    if name == '{"Boolean": "IsFinite"}':
        return (value > -inf) & (value < inf)  # NaN sorts above inf in Spark
    if name == '{"Boolean": "IsInfinite"}':
        return (value == inf) | (value == -inf)
    raise InvalidArgumentError(f"the function {name} has no Spark translation")


# ---------------------------------------------------------------- non-strict casts


def _plain_cast(source: pl.DataType, target: pl.DataType) -> bool:
    """Whether the cast is one Spark cast (reading its input once)."""
    if source == target or source in (pl.Null(), pl.Boolean()):
        return True
    if _is_int(source):
        return target == pl.String() or _is_float(target)
    if _is_float(source):
        return _is_float(target)
    return source == pl.Date() and target == pl.String()


def _cast(column: Column, source: pl.DataType, target: pl.DataType) -> Column:
    """``cast(target, strict=False)``: polars' result, null where polars gives null."""
    sf = _sf()
    if source == target:
        return column
    kind = _kind(target)
    if source == pl.Null():
        return sf.lit(None).cast(kind)
    if source == pl.Boolean() and (_is_number(target) or target == pl.String()):
        return column.cast(kind)  # 1/0 and "true"/"false", as in polars
    if _is_int(source):
        if target == pl.String() or _is_float(target):
            return column.cast(kind)
        if _is_int(target):
            return _int_range(column, target)
    if _is_float(source):
        if _is_float(target):
            return column.cast(kind)  # rounds; overflow to ±inf (no error in Spark)
        if _is_int(target):
            info = _INTS[target]
            # trunc(x) in [low, high]  <=>  low - 1 < x < high + 1 (NaN is excluded).
            below = float(info.low - 1)
            lower = column > below if int(below) == info.low - 1 else column >= float(info.low)
            fits = lower & (column < float(info.high + 1)) & ~sf.isnan(column)
            return sf.when(fits, column).cast(kind)
    if source == pl.String():
        if _is_int(target):
            pattern = _SIGNED if _INTS[target].native else _UNSIGNED
            digits = sf.when(column.rlike(pattern), column).cast("decimal(20,0)")
            return _int_range(digits, target)
        if _is_float(target):
            return (
                sf.when(column.rlike(_NAN), _float_literal(float("nan"), kind))
                .when(column.rlike(_INF), _float_literal(float("inf"), kind))
                .when(column.rlike(_MINUS_INF), _float_literal(float("-inf"), kind))
                .otherwise(sf.when(column.rlike(_REAL), column).cast(kind))
            )
    if source == pl.Date():
        if target == pl.String():
            return column.cast(kind)  # yyyy-MM-dd in both
        if _is_number(target):
            return _cast(sf.unix_date(column), pl.Int32(), target)
    if isinstance(source, pl.Datetime) and _is_number(target):
        micros = sf.unix_micros(column)
        scale = _MICROS_PER.get(source.time_unit, 1)
        if source.time_unit == "ms":
            raw = sf.call_function("div", micros - sf.pmod(micros, sf.lit(scale)), sf.lit(scale))
        elif source.time_unit == "ns":
            raw = sf.try_multiply(micros, sf.lit(scale).cast("bigint"))
        else:
            raw = micros
        return _cast(raw, pl.Int64(), target)
    raise InvalidArgumentError(
        f"the cast from {source} to {target} has no exact Spark translation"
        + (" (Spark formats numbers and times differently)" if target == pl.String() else "")
    )


def _int_range(column: Column, target: pl.DataType) -> Column:
    """An integer (or whole decimal) as ``target``, null outside its range."""
    info = _INTS[target]
    return _sf().when(column.between(info.low, info.high), column).cast(info.spark)
