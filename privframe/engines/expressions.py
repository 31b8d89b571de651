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
``abs``, ``sqrt`` (of a number: IEEE's correctly rounded root, NaN
below 0, never an error), null/NaN/finite tests, ``is_between``, ``is_in`` against a literal
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

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from privframe.engines.allow_list import (
    ARITHMETIC,
    COMPARISONS,
    check_expression,
    check_filter,
    is_safe_filter,
    node_expr,
    sub_expressions,
    type_of,
)
from privframe.engines.checked_arithmetic import checked
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.numeric import check_real

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


def _dtype(node: Any, schema: pl.Schema) -> pl.DataType:
    """The type a serialized sub-expression has over ``schema`` (no data is read)."""
    return type_of(node_expr(node), pl.LazyFrame(schema=schema))


# Types whose values can make an operation fail (decimal overflow, out-of-range
# temporal or 64/128-bit casts, unknown categories, giant strings): never inside a step.
_BANNED_KINDS = (pl.Decimal, pl.Enum, pl.Categorical, pl.List, pl.Array, pl.Struct, pl.Object)
_BANNED_TYPES = (pl.UInt64, pl.Int128, pl.UInt128, pl.Duration, pl.Time, pl.Null)


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
        if op in ARITHMETIC and not (_plain_number(left) and _plain_number(right)):
            return f"arithmetic between {left} and {right} is not supported: use plain numbers"
        if op in COMPARISONS and not _compatible([left, right]):
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
        if body["function"] == {"Pow": "Sqrt"}:
            (operand,) = body.get("input", [None])
            dtype = _dtype(operand, schema)
            if not _number(dtype):
                return f"sqrt of {dtype} is not supported: take the square root of a number"
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
    """Decimals as Float64, categoricals and enums as String, small integers as Int64.

    A list's (or array's, made a list) elements too: ``flat_map`` turns them into
    a column, which must be as plain as any other.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.expressions import plain_types
        >>> df = pl.DataFrame({"l": [[1]]}, schema={"l": pl.List(pl.Int8)})
        >>> plain_types(df.lazy()).collect_schema()["l"]
        List(Int64)
    """
    if isinstance(dtype, pl.List | pl.Array):
        inner = dtype.inner
        return pl.List(_plain_type(inner() if isinstance(inner, type) else inner))
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
