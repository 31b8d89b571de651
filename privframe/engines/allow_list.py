"""The allow-list of row expressions, read on polars' serialized form of an expression.

A filter or derived column must compute each row from that row alone and
must not be able to fail on any value (:mod:`privframe.engines.expressions`
gives the argument and the list). :func:`is_allowed` walks the serialized
tree; :func:`sub_expressions` pairs each serialized input with its live
expression, for the walks that need values or types (checked arithmetic,
the Spark translation).

Example:
    >>> import polars as pl
    >>> from privframe.engines.allow_list import is_allowed, serialized
    >>> is_allowed(serialized(pl.col("age") >= 18))
    True
"""

from __future__ import annotations

import io
import json
from typing import Any

import polars as pl

from privframe.errors import InvalidArgumentError

__all__ = [
    "ARITHMETIC",
    "COMPARISONS",
    "SAFE_FUNCTIONS",
    "check_expression",
    "check_filter",
    "is_allowed",
    "is_safe_filter",
    "node_expr",
    "serialized",
    "sub_expressions",
    "type_of",
]

# Functions known to map each row to one value from that row alone, without failing.
SAFE_FUNCTIONS = frozenset(
    {
        '"Abs"',
        '{"Boolean": "IsNull"}',
        '{"Boolean": "IsNotNull"}',
        '{"Boolean": "IsNan"}',
        '{"Boolean": "IsNotNan"}',
        '{"Boolean": "IsFinite"}',
        '{"Boolean": "IsInfinite"}',
        '{"Boolean": "Not"}',
        '{"Pow": "Sqrt"}',  # IEEE square root: NaN below 0, never an error
        '{"StringExpr": "StartsWith"}',
        '{"StringExpr": "EndsWith"}',
    }
)


def _is_literal(node: Any) -> bool:
    return isinstance(node, dict) and "Literal" in node


def is_allowed(node: Any) -> bool:
    """Whether a serialized polars expression is on the allow-list (see the module doc).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.allow_list import is_allowed, serialized
        >>> is_allowed(serialized(pl.col("x").cast(pl.Int64)))  # a strict cast can fail
        False
    """
    if not isinstance(node, dict) or len(node) != 1:
        return False
    ((kind, body),) = node.items()
    if kind == "Column":
        return isinstance(body, str)
    if kind == "Literal":
        return isinstance(body, dict) and len(body) == 1 and ("Dyn" in body or "Scalar" in body)
    if kind == "BinaryExpr":
        return is_allowed(body.get("left")) and is_allowed(body.get("right"))
    if kind == "Cast":
        return body.get("options") == "NonStrict" and is_allowed(body.get("expr"))
    if kind == "Alias":
        return isinstance(body, list) and bool(body) and is_allowed(body[0])
    if kind == "Ternary":
        return all(is_allowed(body.get(k)) for k in ("predicate", "truthy", "falsy"))
    if kind == "Function":
        inputs, function = body.get("input"), body.get("function")
        if not isinstance(inputs, list) or not all(is_allowed(i) for i in inputs):
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
        return json.dumps(function) in SAFE_FUNCTIONS
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
        return is_allowed(json.loads(predicate.meta.serialize(format="json")))
    except Exception:  # any serialization problem: refuse rather than guess
        return False


ARITHMETIC = frozenset(
    {"Plus", "Minus", "Multiply", "Divide", "TrueDivide", "FloorDivide", "Modulus"}
)


COMPARISONS = frozenset({"Eq", "NotEq", "Lt", "LtEq", "Gt", "GtEq", "EqValidity", "NotEqValidity"})


def node_expr(node: Any) -> pl.Expr:
    """The live expression of a serialized node (JSON form: non-finite literals become null).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.allow_list import node_expr, serialized
        >>> str(node_expr(serialized(pl.col("x") + 1)))
        '[(col("x")) + (dyn int: 1)]'
    """
    return pl.Expr.deserialize(io.StringIO(json.dumps(node)), format="json")


def type_of(expr: pl.Expr, frame: pl.LazyFrame) -> pl.DataType:
    """The type ``expr`` has over the columns of ``frame`` (an empty frame: no data is read).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.allow_list import type_of
        >>> type_of(pl.col("x") / 2, pl.LazyFrame(schema={"x": pl.Int64}))
        Float64
    """
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


def serialized(expr: pl.Expr) -> Any:
    """The JSON serialization polars gives ``expr``, parsed: the tree the allow-list reads.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.allow_list import serialized
        >>> serialized(pl.col("x"))
        {'Column': 'x'}
    """
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
        serialized(e) != n for e, n in zip(order, nodes, strict=True)
    ):
        raise InvalidArgumentError(f"cannot read the structure of the expression {expr}")
    return list(zip(nodes, order, strict=True))


_ALLOWED = (
    "Use columns, literals, arithmetic, comparisons, & | ~, when/then, abs, sqrt, "
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
