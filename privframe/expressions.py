"""Which polars expressions a query may use as row filters, and why.

A filter decides which rows reach the aggregation, so it must decide each row
from that row alone (otherwise one person's rows could change which of
another's survive, and no contribution bound would hold), and it must not be
able to *fail* depending on the data (a failure is an observable outcome that
no noise covers: a query that raises only when some value exceeds t is a free
yes/no question about the data).

privframe therefore admits a conservative allow-list, checked on the
expression's serialized form before any data is read: columns, scalar or
list literals, arithmetic and comparisons, boolean logic, ``when/then``,
``abs``, null/NaN/finite tests, ``is_between``, ``is_in`` against a literal
list, non-strict casts (``cast(..., strict=False)``), and string
``starts_with`` / ``ends_with`` / ``contains(..., literal=True)`` against a
literal. Anything else, including a strict cast (it raises on a value it
cannot convert), a regular expression (whose evaluation can fail), a Python
function, a window, a sort or an aggregation, is refused with
:class:`~privframe.errors.InvalidArgumentError`. An unknown serialization
(a future polars) is refused too: the list only grows by review.

Example:
    >>> import polars as pl
    >>> from privframe.expressions import is_safe_filter
    >>> is_safe_filter(pl.col("age") >= 18), is_safe_filter(pl.col("x") > pl.col("x").mean())
    (True, False)
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from privframe.errors import InvalidArgumentError

__all__ = ["check_filter", "is_safe_filter"]

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
        >>> from privframe.expressions import is_safe_filter
        >>> is_safe_filter(pl.col("name").cast(pl.Int64) > 0)  # a strict cast can fail
        False
    """
    try:
        return _is_safe(json.loads(predicate.meta.serialize(format="json")))
    except Exception:  # any serialization problem: refuse rather than guess
        return False


def check_filter(predicate: object) -> pl.Expr:
    """``predicate`` if privframe can use it as a row filter, else a clear error.

    Example:
        >>> import polars as pl
        >>> from privframe.expressions import check_filter
        >>> check_filter(pl.col("age").is_between(18, 65)) is not None
        True
    """
    if not isinstance(predicate, pl.Expr):
        raise InvalidArgumentError(
            f"filter takes a polars expression such as pl.col('age') >= 18, "
            f"got {type(predicate).__name__}"
        )
    if not is_safe_filter(predicate):
        raise InvalidArgumentError(
            "this filter is not one privframe can run privately: filters must decide each "
            "row from that row alone and must not be able to fail on any value. Use "
            "columns, literals, arithmetic, comparisons, & | ~, when/then, abs, "
            "is_null/is_nan/is_finite, is_between, is_in([...literal list...]), "
            "cast(..., strict=False), and str.starts_with/ends_with/contains(..., "
            "literal=True) with a literal argument. Aggregations, windows, sorts, strict "
            "casts, regular expressions and Python functions are refused."
        )
    return predicate
