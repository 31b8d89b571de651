"""Reading untrusted JSON: typed fields, each refusal naming its JSON path, and the limits.

A request comes from the network, so every value is checked for its JSON
type before it is used (``true`` is never an integer, ``1`` never a
boolean), every object for unknown keys, and every string and list for its
size. A refusal is a :class:`WireError` whose message starts with the path of
the value (``request.plan.steps[0].filter[0].args[1]``) and echoes at most a
short prefix of what the client sent.

Example:
    >>> from privframe.api.wire.reading import WireError, read_int
    >>> try:
    ...     read_int(True, "request.plan.bound.max_groups")
    ... except WireError as err:
    ...     print(err)
    request.plan.bound.max_groups: expected an integer, got a boolean
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import polars as pl

from privframe.errors import InvalidArgumentError, PrivframeError

__all__ = [
    "INT_RANGE",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_NODES",
    "MAX_STRING",
    "WIRE_VERSION",
    "Budget",
    "WireError",
    "guarded",
    "json_kind",
    "read_bool",
    "read_float",
    "read_int",
    "read_list",
    "read_mapping",
    "read_object",
    "read_optional",
    "read_string",
    "shown",
]

WIRE_VERSION = 1
"""The version of the wire format; a request of another version is refused."""

MAX_DEPTH = 32
"""The deepest expression nesting a request may hold (a node inside 32 others)."""

MAX_NODES = 5_000
"""The most expression nodes a request may hold, all its expressions together."""

MAX_STRING = 10_000
"""The longest string a request may hold (column names, literals, SQL text)."""

MAX_ITEMS = 100_000
"""The longest list a request may hold (keys, table columns, ``is_in`` values)."""

INT_RANGE = (-(2**63), 2**64 - 1)
"""Integers a request may hold: those of Int64 and UInt64."""

_SHOWN = 40


class WireError(InvalidArgumentError):
    """A request that is not a valid wire encoding; the message names the JSON path.

    Example:
        >>> from privframe.api.wire import WireError
        >>> from privframe.errors import PrivframeError
        >>> issubclass(WireError, PrivframeError)
        True
    """


def shown(value: object) -> str:
    """A client's value as a message echoes it: at most 40 characters of its repr.

    Example:
        >>> from privframe.api.wire.reading import shown
        >>> shown("x" * 100)
        "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."
    """
    text = repr(value) if isinstance(value, str | int | float | bool | None) else json_kind(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "..."


def json_kind(value: object) -> str:
    """How a message names the JSON type of ``value``.

    Example:
        >>> from privframe.api.wire.reading import json_kind
        >>> json_kind(True), json_kind({})
        ('a boolean', 'an object')
    """
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    kinds.update({list: "a list", dict: "an object", type(None): "null"})
    return kinds.get(type(value), f"a {type(value).__name__}")


def read_object(
    value: object, where: str, allowed: Collection[str], required: Collection[str] = ()
) -> Mapping[str, Any]:
    """A JSON object whose keys are among ``allowed`` and include ``required``.

    Example:
        >>> from privframe.api.wire.reading import read_object
        >>> read_object({"col": "x"}, "e", ("col",), ("col",))
        {'col': 'x'}
    """
    if not isinstance(value, dict):
        raise WireError(f"{where}: expected an object, got {json_kind(value)}")
    unknown = [k for k in value if k not in allowed]
    if unknown:
        raise WireError(f"{where}: unknown key {shown(unknown[0])}")
    missing = [k for k in required if k not in value]
    if missing:
        raise WireError(f"{where}: missing key {missing[0]!r}")
    return value


def read_mapping(value: object, where: str, limit: int = MAX_ITEMS) -> Mapping[str, Any]:
    """A JSON object of at most ``limit`` entries, with any keys (names of outputs, columns).

    Example:
        >>> from privframe.api.wire.reading import read_mapping
        >>> read_mapping({"amount_sum": 2.0}, "weights")
        {'amount_sum': 2.0}
    """
    if not isinstance(value, dict):
        raise WireError(f"{where}: expected an object, got {json_kind(value)}")
    if len(value) > limit:
        raise WireError(f"{where}: an object of more than {limit} entries")
    for key in value:
        read_string(key, f"{where} key")
    return value


def read_list(value: object, where: str, limit: int = MAX_ITEMS) -> list[Any]:
    """A JSON list of at most ``limit`` items.

    Example:
        >>> from privframe.api.wire.reading import read_list
        >>> read_list([1, 2], "values")
        [1, 2]
    """
    if not isinstance(value, list):
        raise WireError(f"{where}: expected a list, got {json_kind(value)}")
    if len(value) > limit:
        raise WireError(f"{where}: a list of more than {limit} items")
    return value


def read_string(value: object, where: str, *, empty: bool = True) -> str:
    """A JSON string of at most :data:`MAX_STRING` characters (non-empty unless ``empty``).

    Example:
        >>> from privframe.api.wire.reading import read_string
        >>> read_string("region", "column")
        'region'
    """
    if not isinstance(value, str):
        raise WireError(f"{where}: expected a string, got {json_kind(value)}")
    if len(value) > MAX_STRING:
        raise WireError(f"{where}: a string of more than {MAX_STRING} characters")
    if not value and not empty:
        raise WireError(f"{where}: expected a non-empty string")
    return value


def read_int(value: object, where: str, bounds: tuple[int, int] = INT_RANGE) -> int:
    """A JSON integer (never a boolean) within ``bounds``.

    Example:
        >>> from privframe.api.wire.reading import read_int
        >>> read_int(3, "candidates")
        3
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(f"{where}: expected an integer, got {json_kind(value)}")
    low, high = bounds
    if not low <= value <= high:
        raise WireError(f"{where}: integer out of range [{low}, {high}]")
    return value


def read_float(value: object, where: str) -> float:
    """A finite JSON number (an integer is taken when a float holds it exactly).

    Example:
        >>> from privframe.api.wire.reading import read_float
        >>> read_float(2, "bounds[1]")
        2.0
    """
    if isinstance(value, int) and not isinstance(value, bool):
        read_int(value, where)
        if float(value) != value:
            raise WireError(f"{where}: integer {shown(value)} is not exactly a float")
        return float(value)
    if not isinstance(value, float) or not math.isfinite(value):
        raise WireError(f"{where}: expected a finite number, got {shown(value)}")
    return value


def read_bool(value: object, where: str) -> bool:
    """A JSON boolean (never 0 or 1).

    Example:
        >>> from privframe.api.wire.reading import read_bool
        >>> read_bool(False, "clamp")
        False
    """
    if not isinstance(value, bool):
        raise WireError(f"{where}: expected true or false, got {json_kind(value)}")
    return value


T = TypeVar("T")


def read_optional(
    data: Mapping[str, Any], key: str, where: str, read: Callable[[object, str], T]
) -> T | None:
    """``read`` of ``data[key]``, or None when the key is absent or null.

    Example:
        >>> from privframe.api.wire.reading import read_int, read_optional
        >>> read_optional({"a": None}, "a", "bound", read_int) is None
        True
    """
    value = data.get(key)
    return None if value is None else read(value, f"{where}.{key}")


def guarded(where: str, build: Callable[[], T]) -> T:
    """Run a privframe constructor on decoded values; its refusal becomes a WireError at ``where``.

    The builder's and the constructors' own checks run as for a local query;
    the message gains the path. polars refusing a value it was handed (a
    literal no type holds) is refused the same way, without its traceback.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.wire.reading import WireError, guarded
        >>> try:
        ...     guarded("request.plan.aggregates[0]", lambda: pf.sum("x", (5, 1)))
        ... except WireError as err:
        ...     print(str(err)[:36])
        request.plan.aggregates[0]: sum('x')
    """
    problem: str | None = None
    try:
        return build()
    except PrivframeError as err:
        problem = str(err)
    except (TypeError, ValueError, ArithmeticError, pl.exceptions.PolarsError) as err:
        problem = f"refused by polars ({type(err).__name__})"
    raise WireError(f"{where}: {problem}")


class Budget:
    """What a decoding may still spend: expression nodes left, checked as each is read.

    Example:
        >>> from privframe.api.wire.reading import Budget
        >>> budget = Budget()
        >>> budget.take("e", depth=1)
        >>> budget.nodes
        4999
    """

    def __init__(self, nodes: int = MAX_NODES) -> None:
        self.nodes = nodes

    def list_of_nodes(self, value: object, where: str) -> list[Any]:
        """A JSON list of expressions, refused at once if it holds more than the nodes left."""
        items = read_list(value, where)
        if len(items) > self.nodes:
            raise WireError(f"{where}: more than {MAX_NODES} expression nodes")
        return items

    def take(self, where: str, depth: int) -> None:
        """Spend one node at ``depth``; refuse past :data:`MAX_DEPTH` or :data:`MAX_NODES`."""
        if depth > MAX_DEPTH:
            raise WireError(f"{where}: expressions nested more than {MAX_DEPTH} deep")
        if self.nodes <= 0:
            raise WireError(f"{where}: more than {MAX_NODES} expression nodes")
        self.nodes -= 1
