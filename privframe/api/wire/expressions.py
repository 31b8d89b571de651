"""Row expressions on the wire: privframe's own JSON form of the allow-list, never polars' DSL.

The client writes an allow-listed polars expression
(:mod:`privframe.engines.expressions`) as a tree of small JSON objects; the
server rebuilds it with polars' Python API (``pl.col``, ``pl.lit``,
operators, ``pl.when``, methods), never by deserializing anything polars
wrote. Each node is one of:

=============================================  ==========================================
``{"col": "age"}``                             ``pl.col("age")``
``{"lit": 5, "type": "int"}``                  ``pl.lit(5)`` (polars' untyped literal)
``{"lit": "nan", "type": "float"}``            ``pl.lit(float("nan"))`` (untyped)
``{"lit": 3, "type": "Int32"}``                ``pl.lit(3, dtype=pl.Int32)`` (any wire type,
                                               :mod:`~privframe.api.wire.values`; a list for
                                               ``{"List": ...}``, as ``is_in`` takes it)
``{"op": ">=", "args": [a, b]}``               ``a >= b``; ops ``+ - * / // % == != < <= > >=
                                               & | ^ eq_missing ne_missing``
``{"fn": "is_null", "args": [a]}``             ``a.is_null()``; also ``is_not_null is_nan
                                               is_not_nan is_finite is_infinite not abs``
``{"fn": "starts_with", "args": [a, b]}``      ``a.str.starts_with(b)``; also ``ends_with``
``{"fn": "contains", "args": [a, b],           ``a.str.contains(b, literal=True,
"strict": false}``                             strict=False)``
``{"fn": "is_between", "args": [a, lo, hi],    ``a.is_between(lo, hi, closed="both")``
"closed": "both"}``
``{"fn": "is_in", "args": [a, values],         ``a.is_in(values, nulls_equal=False)``
"nulls_equal": false}``
``{"cast": a, "to": "Float64"}``               ``a.cast(pl.Float64, strict=False)``
``{"when": [[p1, t1], [p2, t2]],               ``pl.when(p1).then(t1).when(p2).then(t2)
"otherwise": e}``                              .otherwise(e)``
``{"alias": a, "name": "adult"}``              ``a.alias("adult")``
=============================================  ==========================================

:func:`encode_expression` refuses what the allow-list refuses;
:func:`decode_expression` refuses anything outside this grammar, and the
query builder then checks the rebuilt expression against the allow-list
exactly as it checks a local one.

Example:
    >>> import polars as pl
    >>> from privframe.api.wire import decode_expression, encode_expression
    >>> encode_expression(pl.col("age") >= 18)
    {'op': '>=', 'args': [{'col': 'age'}, {'lit': 18, 'type': 'int'}]}
    >>> str(decode_expression(encode_expression(pl.col("age") >= 18)))
    '[(col("age")) >= (dyn int: 18)]'
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from typing import Any

import polars as pl

from privframe.api.wire.reading import (
    Budget,
    WireError,
    guarded,
    json_kind,
    read_bool,
    read_float,
    read_int,
    read_list,
    read_object,
    read_string,
    shown,
)
from privframe.api.wire.values import (
    decode_dtype,
    decode_value,
    encode_dtype,
    encode_values,
)
from privframe.engines.allow_list import is_safe_filter, serialized, sub_expressions
from privframe.engines.expressions import Bin

__all__ = ["decode_expression", "encode_expression"]

# The wire name of each polars binary operator, and how the decoder builds it.
_OPS: dict[str, tuple[str, Callable[[pl.Expr, pl.Expr], pl.Expr]]] = {
    "Plus": ("+", operator.add),
    "Minus": ("-", operator.sub),
    "Multiply": ("*", operator.mul),
    "TrueDivide": ("/", operator.truediv),
    "FloorDivide": ("//", operator.floordiv),
    "Modulus": ("%", operator.mod),
    "Eq": ("==", operator.eq),
    "NotEq": ("!=", operator.ne),
    "Lt": ("<", operator.lt),
    "LtEq": ("<=", operator.le),
    "Gt": (">", operator.gt),
    "GtEq": (">=", operator.ge),
    "And": ("&", operator.and_),
    "Or": ("|", operator.or_),
    "Xor": ("^", operator.xor),
    "EqValidity": ("eq_missing", pl.Expr.eq_missing),
    "NotEqValidity": ("ne_missing", pl.Expr.ne_missing),
}
_BUILD_OP = dict(_OPS.values())

# The wire name of each allowed function (its polars serialized name), its arity, and
# its options: (key, polars key, read) triples.
_UNARY: dict[str, Callable[[pl.Expr], pl.Expr]] = {
    "abs": pl.Expr.abs,
    "is_null": pl.Expr.is_null,
    "is_not_null": pl.Expr.is_not_null,
    "is_nan": pl.Expr.is_nan,
    "is_not_nan": pl.Expr.is_not_nan,
    "is_finite": pl.Expr.is_finite,
    "is_infinite": pl.Expr.is_infinite,
    "not": pl.Expr.not_,
}
_POLARS_FUNCTIONS = {
    '"Abs"': "abs",
    '{"Boolean": "IsNull"}': "is_null",
    '{"Boolean": "IsNotNull"}': "is_not_null",
    '{"Boolean": "IsNan"}': "is_nan",
    '{"Boolean": "IsNotNan"}': "is_not_nan",
    '{"Boolean": "IsFinite"}': "is_finite",
    '{"Boolean": "IsInfinite"}': "is_infinite",
    '{"Boolean": "Not"}': "not",
    '{"StringExpr": "StartsWith"}': "starts_with",
    '{"StringExpr": "EndsWith"}': "ends_with",
}
_CLOSED = {"Both": "both", "Left": "left", "Right": "right", "None": "none"}
_ARITY = {
    **dict.fromkeys(_UNARY, 1),
    "starts_with": 2,
    "ends_with": 2,
    "contains": 2,
    "is_in": 2,
    "is_between": 3,
}
_OPTIONS = {"contains": ("strict",), "is_in": ("nulls_equal",), "is_between": ("closed",)}
_FORMS = {
    "col": ("col",),
    "lit": ("lit", "type"),
    "op": ("op", "args"),
    "fn": ("fn", "args", "strict", "nulls_equal", "closed"),
    "cast": ("cast", "to"),
    "alias": ("alias", "name"),
    "when": ("when", "otherwise"),
}
_UNITS = {"Milliseconds": "ms", "Microseconds": "us", "Nanoseconds": "ns"}


def encode_expression(
    expr: pl.Expr | Bin, where: str = "expression", budget: Budget | None = None
) -> dict[str, Any]:
    """An allow-listed polars expression (or :func:`~privframe.bin`) in the wire grammar.

    ``budget`` holds the expression nodes the request may still hold (a fresh
    one if None), so the client refuses what the server would.

    Raises:
        WireError: the expression is not on the allow-list, holds a value
            that cannot be sent exactly, or is larger than a request may be.

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire import encode_expression
        >>> encode_expression(pl.col("x").is_in([1, 2]))["args"][1]
        {'lit': [1, 2], 'type': {'List': 'Int64'}}
    """
    live = expr.expr if isinstance(expr, Bin) else expr
    if not isinstance(live, pl.Expr):
        raise WireError(f"{where}: expected a polars expression, got {type(expr).__name__}")
    if not is_safe_filter(live):
        raise WireError(
            f"{where}: {shown(str(live))} is not an expression privframe can run privately "
            "(privframe.engines.expressions lists what is)"
        )
    return _encode(serialized(live), live, budget if budget is not None else Budget(), 1, where)


def _encode(node: Any, expr: pl.Expr, budget: Budget, depth: int, where: str) -> dict[str, Any]:
    budget.take(where, depth)
    ((kind, body),) = node.items()
    if kind == "Column":
        return {"col": body}
    if kind == "Literal":
        return _encode_literal(body, expr, where)
    if kind == "Ternary":
        return _encode_when(node, expr, budget, depth, where)
    args = [_encode(n, e, budget, depth + 1, where) for n, e in sub_expressions(node, expr)]
    if kind == "BinaryExpr":
        if body["op"] not in _OPS:
            raise WireError(f"{where}: the operator {shown(body['op'])} has no wire form")
        return {"op": _OPS[body["op"]][0], "args": args}
    if kind == "Cast":
        return {"cast": args[0], "to": _polars_dtype(body["dtype"].get("Literal"), where)}
    if kind == "Alias":
        return {"alias": args[0], "name": body[1]}
    return {**_function(body["function"], where), "args": args}


def _encode_when(
    node: Any, expr: pl.Expr, budget: Budget, depth: int, where: str
) -> dict[str, Any]:
    """A when/then chain flat: polars nests each further ``when`` in the ``otherwise``."""
    branches = []
    while "Ternary" in node:
        (p, p_expr), (t, t_expr), (node, expr) = sub_expressions(node, expr)
        inner = [_encode(p, p_expr, budget, depth + 1, where)]
        branches.append([*inner, _encode(t, t_expr, budget, depth + 1, where)])
        if "Ternary" in node:
            budget.take(where, depth)
    return {"when": branches, "otherwise": _encode(node, expr, budget, depth + 1, where)}


def _function(function: Any, where: str) -> dict[str, Any]:
    text = json.dumps(function)
    if text in _POLARS_FUNCTIONS:
        return {"fn": _POLARS_FUNCTIONS[text]}
    options = next(iter(function.values()))
    if "IsBetween" in options:
        return {"fn": "is_between", "closed": _CLOSED[options["IsBetween"]["closed"]]}
    if "IsIn" in options:
        return {"fn": "is_in", "nulls_equal": options["IsIn"]["nulls_equal"]}
    if "Contains" in options:
        return {"fn": "contains", "strict": options["Contains"]["strict"]}
    raise WireError(f"{where}: the function {shown(text)} has no wire form")


def _polars_dtype(dtype: Any, where: str) -> Any:
    """A type as polars serializes it, in the wire's form (checked by decoding it)."""
    if isinstance(dtype, dict) and len(dtype) == 1:
        ((kind, body),) = dtype.items()
        if kind == "List":
            dtype = {"List": _polars_dtype(body, where)}
        elif kind == "Datetime" and isinstance(body, list) and len(body) == 2:
            zone = body[1]["inner"] if isinstance(body[1], dict) else body[1]
            dtype = {"Datetime": [_UNITS.get(body[0]), zone]}
        elif kind == "Duration":
            dtype = {"Duration": _UNITS.get(body)}
    decode_dtype(dtype, where)
    return dtype


def _encode_literal(body: Any, expr: pl.Expr, where: str) -> dict[str, Any]:
    if "Dyn" in body and "Int" in body["Dyn"]:
        return {"lit": read_int(body["Dyn"]["Int"], where), "type": "int"}
    value = pl.select(expr).to_series()
    if "Dyn" in body and "Float" in body["Dyn"]:
        return {"lit": encode_values(value.cast(pl.Float64))[0], "type": "float"}
    if "Dyn" in body:
        raise WireError(f"{where}: the literal {shown(str(expr))} has no wire form")
    if isinstance(value.dtype, pl.List):
        inner = value[0]
        values = None if inner is None else encode_values(inner)
        return {"lit": values, "type": encode_dtype(value.dtype)}
    return {"lit": encode_values(value)[0], "type": encode_dtype(value.dtype)}


def decode_expression(
    data: object, where: str = "expression", budget: Budget | None = None, depth: int = 1
) -> pl.Expr:
    """The polars expression of a wire expression, built with polars' Python API.

    Args:
        data: the wire expression (parsed JSON).
        where: its JSON path, for messages.
        budget: the nodes the whole request may still hold (a fresh one if None).
        depth: its nesting depth in the request's expressions.

    Raises:
        WireError: anything outside the grammar, wrong JSON types, too deep or too large.

    Example:
        >>> from privframe.api.wire import decode_expression
        >>> str(decode_expression({"fn": "abs", "args": [{"col": "x"}]}))
        'col("x").abs()'
    """
    budget = budget if budget is not None else Budget()
    budget.take(where, depth)
    if not isinstance(data, dict):
        raise WireError(f"{where}: expected an expression object, got {json_kind(data)}")
    forms = [k for k in _FORMS if k in data]
    if len(forms) != 1:
        raise WireError(f"{where}: expected one of the keys {list(_FORMS)}")
    form = forms[0]
    node = read_object(data, where, _FORMS[form], _FORMS[form][:2])
    if form == "col":
        name = read_string(node["col"], f"{where}.col")
        return guarded(where, lambda: pl.col(name))
    if form == "lit":
        return _decode_literal(node, where)
    if form == "when":
        return _decode_when(node, where, budget, depth)
    if form == "cast":
        inner = decode_expression(node["cast"], f"{where}.cast", budget, depth + 1)
        dtype = decode_dtype(node["to"], f"{where}.to")
        return guarded(where, lambda: inner.cast(dtype, strict=False))
    if form == "alias":
        inner = decode_expression(node["alias"], f"{where}.alias", budget, depth + 1)
        name = read_string(node["name"], f"{where}.name")
        return guarded(where, lambda: inner.alias(name))
    return _decode_call(node, form, where, budget, depth)


def _decode_args(
    node: Mapping[str, Any], arity: int, where: str, budget: Budget, depth: int
) -> list[pl.Expr]:
    args = read_list(node["args"], f"{where}.args")
    if len(args) != arity:
        raise WireError(f"{where}.args: expected {arity} arguments, got {len(args)}")
    return [
        decode_expression(a, f"{where}.args[{i}]", budget, depth + 1) for i, a in enumerate(args)
    ]


def _decode_call(
    node: Mapping[str, Any], form: str, where: str, budget: Budget, depth: int
) -> pl.Expr:
    name = read_string(node[form], f"{where}.{form}")
    if form == "op":
        if name not in _BUILD_OP or set(node) != {"op", "args"}:
            raise WireError(f"{where}.op: unknown op {shown(name)}")
        left, right = _decode_args(node, 2, where, budget, depth)
        return guarded(where, lambda: _BUILD_OP[name](left, right))
    if name not in _ARITY:
        raise WireError(f"{where}.fn: unknown function {shown(name)}")
    options = _OPTIONS.get(name, ())
    read_object(node, where, ("fn", "args", *options), ("fn", "args", *options))
    args = _decode_args(node, _ARITY[name], where, budget, depth)
    if name in _UNARY:
        return guarded(where, lambda: _UNARY[name](args[0]))
    if name == "is_between":
        closed = node["closed"]
        if closed not in _CLOSED.values():
            raise WireError(f"{where}.closed: expected one of {list(_CLOSED.values())}")
        return guarded(where, lambda: args[0].is_between(args[1], args[2], closed=closed))
    if name == "is_in":
        same = read_bool(node["nulls_equal"], f"{where}.nulls_equal")
        return guarded(where, lambda: args[0].is_in(args[1], nulls_equal=same))
    if name == "contains":
        strict = read_bool(node["strict"], f"{where}.strict")
        return guarded(where, lambda: args[0].str.contains(args[1], literal=True, strict=strict))
    if name == "starts_with":
        return guarded(where, lambda: args[0].str.starts_with(args[1]))
    return guarded(where, lambda: args[0].str.ends_with(args[1]))


def _decode_when(node: Mapping[str, Any], where: str, budget: Budget, depth: int) -> pl.Expr:
    branches = budget.list_of_nodes(node["when"], f"{where}.when")
    if not branches:
        raise WireError(f"{where}.when: expected at least one [condition, value] pair")
    chain: Any = pl
    for i, branch in enumerate(branches):
        at = f"{where}.when[{i}]"
        pair = read_list(branch, at, 2)
        if len(pair) != 2:
            raise WireError(f"{at}: expected a [condition, value] pair")
        if i:
            budget.take(at, depth)
        condition = decode_expression(pair[0], f"{at}[0]", budget, depth + 1)
        value = decode_expression(pair[1], f"{at}[1]", budget, depth + 1)
        chain = guarded(at, lambda: chain.when(condition).then(value))  # noqa: B023
    otherwise = decode_expression(node["otherwise"], f"{where}.otherwise", budget, depth + 1)
    return guarded(where, lambda: chain.otherwise(otherwise))


def _decode_literal(node: Mapping[str, Any], where: str) -> pl.Expr:
    kind, value = node["type"], node["lit"]
    if kind == "int":
        number = read_int(value, f"{where}.lit")
        return guarded(where, lambda: pl.lit(number))
    if kind == "float":
        if value in ("nan", "inf", "-inf"):
            real = float(value)
        else:
            real = read_float(value, f"{where}.lit")
        return guarded(where, lambda: pl.lit(real))
    dtype = decode_dtype(kind, f"{where}.type")
    scalar = decode_value(value, dtype, f"{where}.lit")
    return guarded(where, lambda: pl.lit(scalar, dtype=dtype))
