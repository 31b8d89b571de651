"""Which polars expressions a query may use as row filters, and why.

A filter decides which rows reach the aggregation, so it must decide each row
from that row alone (otherwise one person's rows could change which of
another's survive, and no contribution bound would hold), and it must not be
able to *fail* depending on the data (a failure is an observable outcome that
no noise covers: a query that raises only when some value exceeds t is a free
yes/no question about the data).

privframe therefore admits a conservative allow-list, checked on the
expression's serialized form before any data is read, and then checks types
against the data's schema (:func:`check_types`; no data is read): decimal
values, and casts or arithmetic that can fail on some values, are refused;
the session also runs the steps on zero rows to catch what fails for every
input. The allow-list: columns, scalar or
list literals, arithmetic and comparisons, boolean logic, ``when/then``,
``abs``, null/NaN/finite tests, ``is_between``, ``is_in`` against a literal
list, non-strict casts (``cast(..., strict=False)``), and string
``starts_with`` / ``ends_with`` / ``contains(..., literal=True)`` against a
literal. Anything else, including a strict cast (it raises on a value it
cannot convert), a regular expression (whose evaluation can fail), a Python
function, a window, a sort or an aggregation, is refused with
:class:`~privframe.errors.InvalidArgumentError`. An unknown serialization
(a future polars) is refused too: the list only grows by review.

Integer arithmetic is checked (:func:`checked`, applied by every engine).
polars' integer ``+ - * // abs`` wrap around (``i64::MAX + 1`` is
``i64::MIN``), and raising on overflow instead would be a failure oracle.
So a row in which such an operation's exact result does not fit its result
type (the type polars gives it: ``Int64`` for an ``Int64`` column times a
literal) gets null for the whole expression, never a wrapped value: a
derived column is null in that row and a filter drops it. This is SQL's
``try_*`` arithmetic, with the null reaching the whole expression (also
through ``is_null`` and ``|``); an operation in a ``when/then`` branch the
row does not take does not count.

Example:
    >>> import polars as pl
    >>> from privframe.engines.expressions import is_safe_filter
    >>> is_safe_filter(pl.col("age") >= 18), is_safe_filter(pl.col("x") > pl.col("x").mean())
    (True, False)
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from privframe.accounting._numbers import check_real
from privframe.errors import InvalidArgumentError, InvalidValueError

__all__ = [
    "Bin",
    "bin",
    "check_expression",
    "check_filter",
    "check_types",
    "checked",
    "exact_unit_type",
    "is_safe_filter",
    "plain_types",
    "sub_expressions",
]

# Functions known to map each row to one value from that row alone, without failing.
_SAFE_FUNCTIONS = frozenset(
    {
        '"Abs"',
        '{"Boolean": "IsNull"}',
        '{"Boolean": "IsNotNull"}',
        '{"Boolean": "IsNan"}',
        '{"Boolean": "IsNotNan"}',
        '{"Boolean": "IsFinite"}',
        '{"Boolean": "IsInfinite"}',
        '{"Boolean": "Not"}',
        '{"StringExpr": "StartsWith"}',
        '{"StringExpr": "EndsWith"}',
    }
)


def _is_literal(node: Any) -> bool:
    return isinstance(node, dict) and "Literal" in node


def _is_safe(node: Any) -> bool:
    """Whether a serialized polars expression is on the allow-list (see the module doc)."""
    if not isinstance(node, dict) or len(node) != 1:
        return False
    ((kind, body),) = node.items()
    if kind == "Column":
        return isinstance(body, str)
    if kind == "Literal":
        return isinstance(body, dict) and len(body) == 1 and ("Dyn" in body or "Scalar" in body)
    if kind == "BinaryExpr":
        return _is_safe(body.get("left")) and _is_safe(body.get("right"))
    if kind == "Cast":
        return body.get("options") == "NonStrict" and _is_safe(body.get("expr"))
    if kind == "Alias":
        return isinstance(body, list) and bool(body) and _is_safe(body[0])
    if kind == "Ternary":
        return all(_is_safe(body.get(k)) for k in ("predicate", "truthy", "falsy"))
    if kind == "Function":
        inputs, function = body.get("input"), body.get("function")
        if not isinstance(inputs, list) or not all(_is_safe(i) for i in inputs):
            return False
        if isinstance(function, dict) and isinstance(function.get("Boolean"), dict):
            names = set(function["Boolean"])
            # is_in tests membership in its second input: a literal only, never a column.
            in_literal = names == {"IsIn"} and len(inputs) == 2 and _is_literal(inputs[1])
            return names == {"IsBetween"} or in_literal
        if isinstance(function, dict) and isinstance(function.get("StringExpr"), dict):
            options = function["StringExpr"].get("Contains")
            return (
                set(function["StringExpr"]) == {"Contains"}
                and isinstance(options, dict)
                and options.get("literal") is True
                and len(inputs) == 2
                and _is_literal(inputs[1])
            )
        return json.dumps(function) in _SAFE_FUNCTIONS
    return False


def is_safe_filter(predicate: pl.Expr) -> bool:
    """Whether ``predicate`` is row-wise and cannot fail on any value (the allow-list).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.expressions import is_safe_filter
        >>> is_safe_filter(pl.col("name").cast(pl.Int64) > 0)  # a strict cast can fail
        False
    """
    try:
        return _is_safe(json.loads(predicate.meta.serialize(format="json")))
    except Exception:  # any serialization problem: refuse rather than guess
        return False


_ARITHMETIC = frozenset(
    {"Plus", "Minus", "Multiply", "Divide", "TrueDivide", "FloorDivide", "Modulus"}
)


def _node_expr(node: Any) -> pl.Expr:
    return pl.Expr.deserialize(io.StringIO(json.dumps(node)), format="json")


def _dtype(node: Any, schema: pl.Schema) -> pl.DataType:
    """The type a serialized sub-expression has over ``schema`` (no data is read)."""
    return _type_of(_node_expr(node), pl.LazyFrame(schema=schema))


def _type_of(expr: pl.Expr, frame: pl.LazyFrame) -> pl.DataType:
    """The type ``expr`` has over the columns of ``frame`` (an empty frame: no data is read)."""
    return frame.select(expr.alias("__probe")).collect_schema()["__probe"]


def _children(node: dict[str, Any]) -> list[Any]:
    ((kind, body),) = node.items()
    if kind == "Alias":
        return [body[0]]
    if kind == "Cast":
        return [body["expr"]]
    if kind == "BinaryExpr":
        return [body["left"], body["right"]]
    if kind == "Ternary":
        return [body["predicate"], body["truthy"], body["falsy"]]
    if kind == "Function":
        return list(body["input"])
    return []


def _serialized(expr: pl.Expr) -> Any:
    return json.loads(expr.meta.serialize(format="json"))


def sub_expressions(node: dict[str, Any], expr: pl.Expr) -> list[tuple[Any, pl.Expr]]:
    """Each serialized input of ``node`` (``expr``'s serialized form) with its live expression.

    The JSON form writes every non-finite float as null, so literal values are
    read from the live tree; the two are matched input by input and checked.
    Inputs come in serialized order (a when/then/otherwise as predicate,
    then, otherwise).

    Raises:
        InvalidArgumentError: the two forms do not match (an unknown polars form).

    Example:
        >>> import json
        >>> import polars as pl
        >>> from privframe.engines.expressions import sub_expressions
        >>> expr = pl.col("x") + float("nan")
        >>> node = json.loads(expr.meta.serialize(format="json"))
        >>> [str(e) for _, e in sub_expressions(node, expr)]
        ['col("x")', 'dyn float: NaN']
    """
    nodes = _children(node)
    popped = expr.meta.pop()
    # polars pops inputs last first; a when/then/otherwise as (predicate, otherwise, then).
    order = [popped[0], popped[2], popped[1]] if "Ternary" in node else popped[::-1]
    if len(order) != len(nodes) or any(
        _serialized(e) != n for e, n in zip(order, nodes, strict=True)
    ):
        raise InvalidArgumentError(f"cannot read the structure of the expression {expr}")
    return list(zip(nodes, order, strict=True))


# Types whose values can make an operation fail (decimal overflow, out-of-range
# temporal or 64/128-bit casts, unknown categories, giant strings): never inside a step.
_BANNED_KINDS = (pl.Decimal, pl.Enum, pl.Categorical, pl.List, pl.Array, pl.Struct, pl.Object)
_BANNED_TYPES = (pl.UInt64, pl.Int128, pl.UInt128, pl.Duration, pl.Time, pl.Null)
_COMPARISONS = frozenset({"Eq", "NotEq", "Lt", "LtEq", "Gt", "GtEq", "EqValidity", "NotEqValidity"})


def _banned(dtype: pl.DataType) -> bool:
    return isinstance(dtype, _BANNED_KINDS) or any(dtype == t for t in _BANNED_TYPES)


def _number(dtype: pl.DataType) -> bool:
    return dtype.is_numeric() and not _banned(dtype)


def _plain_number(dtype: pl.DataType) -> bool:
    return _number(dtype) or dtype == pl.Boolean


def _compatible(dtypes: list[pl.DataType]) -> bool:
    """Operands polars can bring to one type without a cast that could fail."""
    return all(_plain_number(d) for d in dtypes) or all(d == dtypes[0] for d in dtypes)


def _bare_null(node: Any) -> bool:
    """A null literal by itself (e.g. a CASE without ELSE), as opposed to an operand."""
    return bool(node == _NULL_LITERAL)


# How this polars serializes ``pl.lit(None)``, read from polars itself.
_NULL_LITERAL = json.loads(pl.lit(None).meta.serialize(format="json"))


def _typed_problem(node: Any, schema: pl.Schema) -> str | None:
    """Why a (structurally allowed) expression could still fail on some value, or None.

    Failures that depend on values come from types: decimal arithmetic overflows,
    casts from temporals to strings panic on extreme dates, 64/128-bit and
    unsigned supertype casts, enum comparisons and string concatenation can all
    raise for some values only. So no sub-expression may have a decimal,
    categorical, enum, nested, duration, time or 64/128-bit unsigned type; casts go
    from plain numbers, booleans and strings to numbers or strings (temporals to
    numbers only); arithmetic is between plain numbers; and comparisons,
    ``is_between`` and ``when/then`` combine plain numbers or identical types.
    Whatever else fails, fails for every input, which the session detects on
    zero rows before any data is read.
    """
    if isinstance(node, list):
        return next((p for p in (_typed_problem(c, schema) for c in node) if p), None)
    if not isinstance(node, dict) or len(node) != 1:
        return None
    ((kind, body),) = node.items()
    if kind in ("Column", "Literal", "Cast", "Ternary"):
        dtype = _dtype(node, schema)
        if _banned(dtype):
            return f"values of type {dtype} are not supported in filters or derived columns"
    if kind == "Cast":
        source = _dtype(body["expr"], schema)
        target = _dtype(node, schema)
        temporal_ok = source.is_temporal() and _number(target)
        plain_ok = (_plain_number(source) or source == pl.String) and (
            _number(target) or target == pl.String
        )
        if not (temporal_ok or plain_ok):
            return (
                f"cast from {source} to {target} is not supported: cast numbers, booleans "
                "and strings to numbers or strings, and dates/times to numbers"
            )
    if kind == "BinaryExpr":
        left, right = _dtype(body["left"], schema), _dtype(body["right"], schema)
        op = body.get("op")
        if op in _ARITHMETIC and not (_plain_number(left) and _plain_number(right)):
            return f"arithmetic between {left} and {right} is not supported: use plain numbers"
        if op in _COMPARISONS and not _compatible([left, right]):
            return f"comparing {left} with {right} is not supported: cast one side first"
    if kind == "Ternary":
        # A branch may be a bare null (SQL's CASE without ELSE): it cannot fail, and
        # it is the only place a null literal is allowed (ABS(NULL) fails on any row).
        typed = [b for b in (body["truthy"], body["falsy"]) if not _bare_null(b)]
        branches = [_dtype(b, schema) for b in typed]
        if not _compatible(branches):
            return (
                f"when/then branches of types {branches[0]} and {branches[1]} are not "
                "supported: make them the same type"
            )
        others = {k: v for k, v in body.items() if k not in ("truthy", "falsy")}
        return _typed_problem([*typed, *others.values()], schema)
    if kind == "Function" and isinstance(body.get("function"), dict):
        names = body["function"].get("Boolean")
        if isinstance(names, dict) and "IsIn" in names:
            # The allow-list made the second input a literal list; check the tested value.
            return _typed_problem(body.get("input", [None])[0], schema)
        if isinstance(names, dict) and "IsBetween" in names:
            types = [_dtype(i, schema) for i in body.get("input", [])]
            if not _compatible(types):
                return f"is_between over types {types} is not supported: use one type"
    return _typed_problem(list(body.values()) if isinstance(body, dict) else body, schema)


def plain_types(frame: pl.LazyFrame, unit: str | None = None) -> pl.LazyFrame:
    """Decimals as floats, categoricals/enums as strings, small integers as Int64 (lazily).

    Those types can make an operation fail on some values (decimal overflow,
    unknown categories) or silently wrap around (``c + c`` in Int8, ``0 − 5``
    in UInt8); their plain twins cannot, and mean the same to a query.
    Applied to the private data and to public join tables.

    The privacy unit column ``unit`` is the exception: it must keep every
    distinct ID distinct (two people merged into one unit would be bounded as
    one, and removing one of them would change a release by more than its
    sensitivity). So it is only ever cast exactly (:func:`exact_unit_type`):
    a scale-0 decimal becomes Int128, any other decimal its text.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.expressions import plain_types
        >>> df = pl.DataFrame({"c": ["a"]}, schema={"c": pl.Categorical})
        >>> plain_types(df.lazy()).collect_schema()["c"]
        String
        >>> ids = pl.DataFrame({"id": [10**19, 10**19 + 1]}, schema={"id": pl.Decimal(38, 0)})
        >>> plain_types(ids.lazy(), unit="id").collect()["id"].n_unique()
        2
    """
    schema = frame.collect_schema()
    casts: dict[str, pl.DataType] = {}
    for name, dtype in schema.items():
        target = exact_unit_type(dtype) if name == unit else _plain_type(dtype)
        if target != dtype:
            casts[name] = target
    if casts:
        frame = frame.with_columns(pl.col(c).cast(t) for c, t in casts.items())
    return frame


# Decimals are stored in 128 bits: one of precision <= 38 and scale 0 is an Int128 exactly.
_INT128_DIGITS = 38


def exact_unit_type(dtype: pl.DataType) -> pl.DataType:
    """The type a privacy unit column of type ``dtype`` is worked on as: an injective cast.

    Integers (widened to Int64 when small, where every value fits), strings,
    binary, booleans, floats, dates and times stay as they are (a float ID is
    its value: no cast merges two). Categoricals and enums become their
    labels, scale-0 decimals Int128 and other decimals their exact text (one
    scale per column, so one text per value). Types no query could group by
    exactly (nested, objects, nulls) are refused.

    Raises:
        InvalidArgumentError: ``dtype`` cannot identify units exactly.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.expressions import exact_unit_type
        >>> exact_unit_type(pl.Decimal(38, 0)), exact_unit_type(pl.Decimal(10, 2))
        (Int128, String)
    """
    if isinstance(dtype, pl.Decimal):
        if dtype.scale == 0 and (dtype.precision or _INT128_DIGITS) <= _INT128_DIGITS:
            return pl.Int128()
        return pl.String()
    if isinstance(dtype, pl.List | pl.Array | pl.Struct | pl.Object) or dtype == pl.Null:
        raise InvalidArgumentError(
            f"a privacy unit column of type {dtype} cannot identify units exactly; give one "
            "ID per row as an integer, string, binary or date column"
        )
    return _plain_type(dtype)


def _plain_type(dtype: pl.DataType) -> pl.DataType:
    """Decimals as Float64, categoricals and enums as String, small integers as Int64."""
    if isinstance(dtype, pl.Decimal):
        return pl.Float64()
    if isinstance(dtype, pl.Categorical | pl.Enum):
        return pl.String()
    if dtype in _SMALL_INTEGERS:
        return pl.Int64()
    return dtype


_SMALL_INTEGERS = (pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt16, pl.UInt32)


def check_types(expr: pl.Expr, schema: pl.Schema) -> None:
    """Refuse an allow-listed expression that could still fail on some value of ``schema``.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.expressions import check_types
        >>> check_types(pl.col("age") * 2 > 40, pl.Schema({"age": pl.Int64}))
    """
    try:
        problem = _typed_problem(json.loads(expr.meta.serialize(format="json")), schema)
    except pl.exceptions.PolarsError:
        return  # a schema error: the session reports it, data-independently
    if problem:
        raise InvalidArgumentError(f"expression {expr} cannot run privately: {problem}")


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
def _range(dtype: pl.DataType) -> tuple[int, int]:
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
            chosen = None
            truthy, falsy = self.flag(tnode, texpr), self.flag(fnode, fexpr)
            if truthy is not None or falsy is not None:
                # Only the branch the row takes counts (a null predicate takes otherwise).
                false = pl.lit(False)
                chosen = pl.when(pexpr).then(truthy if truthy is not None else false)
                chosen = chosen.otherwise(falsy if falsy is not None else false)
            return _either([self.flag(pnode, pexpr), chosen])
        inputs = [self.flag(n, e) for n, e in pairs]
        return _either([*inputs, self._own(node, expr, [e for _, e in pairs])])

    def _own(self, node: Any, expr: pl.Expr, inputs: list[pl.Expr]) -> pl.Expr | None:
        """The flag of the operation at the top of ``node`` itself (its inputs aside)."""
        binary, function = node.get("BinaryExpr"), node.get("Function")
        op = binary.get("op") if isinstance(binary, dict) else None
        is_abs = isinstance(function, dict) and function.get("function") == "Abs"
        if op not in _OVERFLOWING and not is_abs:
            return None
        dtype = _type_of(expr, self._frame)
        if not dtype.is_integer():
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
        return expr if _type_of(expr, self._frame) == dtype else expr.cast(dtype, strict=False)

    def _constant(self, expr: pl.Expr, dtype: pl.DataType) -> Any:
        """A column-free operand's value in ``dtype`` (``...`` if null); None for others."""
        if expr.meta.root_names():
            return None
        value = pl.select(expr.cast(dtype, strict=False)).item()
        return ... if value is None else int(value)


def _constant_flag(
    op: str, a: pl.Expr, b: pl.Expr, left: int | None, right: int | None, dtype: pl.DataType
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
    if not _may_overflow(_serialized(expr)):
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
    flag = _Overflows(pl.Schema(dict(columns))).flag(_serialized(expr), expr)
    if flag is None:
        return None
    result = pl.when(flag).then(None).otherwise(expr)
    name = expr.meta.output_name(raise_if_undetermined=False)
    return result if name is None else result.alias(name)


_ALLOWED = (
    "Use columns, literals, arithmetic, comparisons, & | ~, when/then, abs, "
    "is_null/is_nan/is_finite, is_between, is_in([...literal list...]), "
    "cast(..., strict=False), and str.starts_with/ends_with/contains(..., literal=True) "
    "with a literal argument. Aggregations, windows, sorts, strict casts, regular "
    "expressions and Python functions are refused."
)


def _check(expr: object, what: str, example: str) -> pl.Expr:
    if not isinstance(expr, pl.Expr):
        raise InvalidArgumentError(
            f"{what} takes a polars expression such as {example}, got {type(expr).__name__}"
        )
    if not is_safe_filter(expr):
        raise InvalidArgumentError(
            f"this {what} expression is not one privframe can run privately: it must compute "
            f"each row from that row alone and must not be able to fail on any value. {_ALLOWED}"
        )
    return expr


def check_filter(predicate: object) -> pl.Expr:
    """``predicate`` if privframe can use it as a row filter, else a clear error.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.expressions import check_filter
        >>> check_filter(pl.col("age").is_between(18, 65)) is not None
        True
    """
    return _check(predicate, "filter", "pl.col('age') >= 18")


def check_expression(expr: object) -> pl.Expr:
    """``expr`` if privframe can use it as a derived column, else a clear error.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.expressions import check_expression
        >>> check_expression(pl.col("price") * pl.col("qty")) is not None
        True
    """
    return _check(expr, "with_columns", "pl.col('price') * pl.col('qty')")


@dataclass(frozen=True, eq=False)
class Bin:
    """Public bins of a numeric column: a derived key column and its public keys.

    Attributes:
        column: the binned column.
        edges: strictly increasing public edges e_0 < ... < e_n.
        labels: one label per bin, in order: the public keys.
    """

    column: str
    edges: tuple[float, ...]
    labels: tuple[str, ...]

    @property
    def expr(self) -> pl.Expr:
        """The label of each row's bin: [e_i, e_i+1), the last closed; null outside."""
        x = pl.col(self.column)
        pairs = list(itertools.pairwise(self.edges))
        last = len(pairs) - 1
        chain: Any = pl
        for i, (lo, hi) in enumerate(pairs):
            inside = (x >= lo) & ((x <= hi) if i == last else (x < hi))
            chain = chain.when(inside).then(pl.lit(self.labels[i]))
        return chain.otherwise(pl.lit(None, dtype=pl.String)).alias(self.column)

    @property
    def keys(self) -> list[str]:
        """The bin labels, to pass as ``keys=`` (every bin is reported, empty or not)."""
        return list(self.labels)


def bin(column: str, edges: Sequence[float], labels: Sequence[str] | None = None) -> Bin:
    """Bin a numeric column by public edges, for a histogram over public keys.

    Use it as a derived column and pass its labels as the keys::

        ages = pf.bin("age", [18, 30, 50, 65, 120])
        query.with_columns(age_band=ages).group_by("age_band", keys=ages.keys)

    Values outside [e_0, e_n], nulls and NaN get a null label, so they match
    no key and are dropped before bounding.

    Example:
        >>> import privframe as pf
        >>> pf.bin("age", [0, 18, 65]).keys
        ['[0, 18)', '[18, 65]']
    """
    if not isinstance(column, str) or not column:
        raise InvalidArgumentError(f"bin needs a column name, got {column!r}")
    points = tuple(check_real(f"bin edge of {column!r}", e) for e in edges)
    if len(points) < 2 or any(a >= b for a, b in itertools.pairwise(points)):
        raise InvalidValueError(
            f"bin edges of {column!r} must be at least two strictly increasing numbers"
        )
    if labels is None:
        n = len(points) - 1
        names = tuple(
            f"[{a:g}, {b:g}{']' if i == n - 1 else ')'}"
            for i, (a, b) in enumerate(itertools.pairwise(points))
        )
    else:
        names = tuple(str(label) for label in labels)
        if len(names) != len(points) - 1 or len(set(names)) != len(names):
            raise InvalidValueError(
                f"bin labels of {column!r} must be {len(points) - 1} distinct names"
            )
    return Bin(column, points, names)
