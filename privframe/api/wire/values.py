"""Types, values, public tables and exact numbers on the wire.

- A **type** is a name from a closed table (``"Int64"``, ``"Float64"``,
  ``"String"``, ``"Boolean"``, ``"Date"``, ``"Null"``, ...) or a small object
  for parametrised types: ``{"Datetime": ["us", "UTC"]}`` (time zone or null),
  ``{"Duration": "ms"}``, ``{"Decimal": [precision, scale]}``,
  ``{"List": <type>}``.
- **Values** are written exactly: integers as JSON integers, finite floats as
  JSON numbers (Python writes the shortest text that reads back as the same
  double) and NaN and infinities as the strings ``"nan"``, ``"inf"``,
  ``"-inf"`` (JSON has no such numbers), dates and datetimes as their integer
  count (days, or units since the epoch), null as null. Only the types whose
  values can be written this way (integers, floats, booleans, strings, dates,
  datetimes, null) can carry values; others are refused with a clear error.
- A **table** (a public join table, a key set) is ``{"columns": [{"name":
  ..., "type": ..., "values": [...]}, ...]}``; a **schema** is a list of
  ``{"name": ..., "type": ...}``.
- An **exact number** (ρ, ε, δ) is the text of a non-negative rational,
  ``"1/10"`` or ``"3"``: read as privframe reads a budget parameter (a float
  0.1 is 1/10, the decimal the user typed; :func:`privframe.numeric.exact`).
- A **budget** is an object of exact numbers whose keys say its kind:
  ``{"rho", "delta"}`` a zCDP, ``{"epsilon"}`` a PureDP and ``{"epsilon",
  "delta"}`` an ApproxDP budget; a **budget kind** is ``"zcdp"``,
  ``"pure_dp"`` or ``"approx_dp"`` (the names a ledger records).

Example:
    >>> import polars as pl
    >>> from privframe.api.wire.values import decode_table, encode_table
    >>> frame = pl.DataFrame({"zip": ["02139"], "rate": [float("nan")]})
    >>> table = encode_table(frame)
    >>> table["columns"][1]
    {'name': 'rate', 'type': 'Float64', 'values': ['nan']}
    >>> decode_table(table, "table").equals(frame)
    True
"""

from __future__ import annotations

import base64
import io
import math
import re
import zoneinfo
from fractions import Fraction
from functools import cache
from typing import Any, TypeAlias

import numpy as np
import polars as pl
from polars.datatypes import DataTypeClass

from privframe.accounting._kinds import Kind, Spendable, kind_of, model_name
from privframe.accounting.budgets import ApproxDP, PureDP, zCDP
from privframe.api.wire.reading import (
    MAX_DEPTH,
    MAX_ITEMS,
    WireError,
    guarded,
    read_bool,
    read_float,
    read_int,
    read_list,
    read_object,
    read_string,
    shown,
)
from privframe.numeric import Number, exact

__all__ = [
    "decode_budget",
    "decode_dtype",
    "decode_kind",
    "decode_number",
    "decode_released",
    "decode_schema",
    "decode_table",
    "decode_value",
    "decode_values",
    "encode_budget",
    "encode_dtype",
    "encode_kind",
    "encode_number",
    "encode_released",
    "encode_schema",
    "encode_table",
    "encode_values",
]

PolarsType: TypeAlias = pl.DataType | DataTypeClass
"""A polars type as polars hands it: an instance, or a class (``List.inner``)."""

_INTEGERS = {
    f"{'U' if unsigned else ''}Int{bits}": (
        (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    )
    for unsigned in (False, True)
    for bits in (8, 16, 32, 64)
}
_FLOATS = ("Float32", "Float64")
_VALUED = (*_INTEGERS, *_FLOATS, "Boolean", "String", "Date", "Null")
_NAMES: dict[str, pl.DataType] = {
    name: getattr(pl, name)()
    for name in (*_VALUED, "Binary", "Time", "Int128", "UInt128", "Categorical")
}
_UNITS = {"ms": "ms", "us": "us", "ns": "ns"}
_PHYSICAL = {"Date": (-(2**31), 2**31 - 1), "Datetime": _INTEGERS["Int64"]}
_MAX_CELLS = 10 * MAX_ITEMS
_MAX_DIGITS = 200
_RATIONAL = re.compile(rf"(\d{{1,{_MAX_DIGITS}}})(?:/(\d{{1,{_MAX_DIGITS}}}))?")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def encode_number(x: Number) -> str:
    """An exact non-negative number (ρ, δ) as rational text; floats read as their decimal.

    Raises:
        InvalidArgumentError: ``x`` is not a real number.
        InvalidBudgetError: ``x`` is negative, NaN or infinite.

    Example:
        >>> from decimal import Decimal
        >>> from fractions import Fraction
        >>> from privframe.api.wire import encode_number
        >>> encode_number(0.1), encode_number(Fraction(1, 3)), encode_number(Decimal("2"))
        ('1/10', '1/3', '2')
    """
    return str(exact("number", x))


def decode_number(text: object, where: str = "number") -> Fraction:
    """The exact rational of :func:`encode_number`'s text (at most 200 digits a part).

    Example:
        >>> from privframe.api.wire import decode_number
        >>> decode_number("1/10")
        Fraction(1, 10)
    """
    match = _RATIONAL.fullmatch(read_string(text, where)) if isinstance(text, str) else None
    if match is None:
        raise WireError(f"{where}: expected an exact rational such as '1/10', got {shown(text)}")
    numerator, denominator = match.group(1), match.group(2) or "1"
    if int(denominator) == 0:
        raise WireError(f"{where}: a rational with denominator 0")
    return Fraction(int(numerator), int(denominator))


def encode_budget(budget: Spendable) -> dict[str, str]:
    """A zCDP, PureDP or ApproxDP budget as exact numbers under its parameters' names.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.wire import encode_budget
        >>> encode_budget(pf.zCDP(0.5)), encode_budget(pf.PureDP(0.1))
        ({'rho': '1/2', 'delta': '0'}, {'epsilon': '1/10'})
        >>> encode_budget(pf.ApproxDP(1, 1e-6))
        {'epsilon': '1', 'delta': '1/1000000'}
    """
    if isinstance(budget, zCDP):
        return {"rho": encode_number(budget.exact_rho), "delta": encode_number(budget.exact_delta)}
    if isinstance(budget, PureDP):
        return {"epsilon": encode_number(budget.exact_epsilon)}
    if isinstance(budget, ApproxDP):
        return {
            "epsilon": encode_number(budget.exact_epsilon),
            "delta": encode_number(budget.exact_delta),
        }
    raise WireError(f"a {type(budget).__name__} budget has no wire form")


def decode_budget(data: object, where: str = "budget") -> Spendable:
    """The budget of :func:`encode_budget`'s object; its keys say its kind.

    Example:
        >>> from privframe.api.wire import decode_budget
        >>> decode_budget({"epsilon": "1/2"}), decode_budget({"rho": "1", "delta": "0"})
        (PureDP(epsilon=0.5), zCDP(rho=1.0, delta=0.0))
    """
    given = read_object(data, where, ("rho", "epsilon", "delta"))
    numbers = {key: decode_number(value, f"{where}.{key}") for key, value in given.items()}
    if set(numbers) == {"rho", "delta"}:
        return guarded(where, lambda: zCDP(numbers["rho"], numbers["delta"]))
    if set(numbers) == {"epsilon"}:
        return guarded(where, lambda: PureDP(numbers["epsilon"]))
    if set(numbers) == {"epsilon", "delta"}:
        return guarded(where, lambda: ApproxDP(numbers["epsilon"], numbers["delta"]))
    raise WireError(
        f"{where}: expected rho and delta, epsilon, or epsilon and delta, got "
        f"{', '.join(sorted(numbers)) or 'none of them'}"
    )


def encode_kind(kind: Kind) -> str:
    """A budget kind's wire name: ``"zcdp"``, ``"pure_dp"`` or ``"approx_dp"``.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.wire import encode_kind
        >>> encode_kind(pf.PureDP)
        'pure_dp'
    """
    return model_name(kind)


def decode_kind(text: object, where: str = "kind") -> Kind:
    """The budget kind a wire name stands for.

    Example:
        >>> from privframe.api.wire import decode_kind
        >>> decode_kind("approx_dp").__name__
        'ApproxDP'
    """
    name = read_string(text, where)
    problem = ""
    try:
        return kind_of(name)
    except ValueError as err:
        problem = str(err)
    raise WireError(f"{where}: {problem}")


def encode_dtype(dtype: PolarsType) -> Any:
    """A polars type as its wire name or object.

    Raises:
        WireError: a type outside the table (enums, structs, arrays, objects).

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire.values import encode_dtype
        >>> encode_dtype(pl.Int32), encode_dtype(pl.Datetime("ms", "UTC"))
        ('Int32', {'Datetime': ['ms', 'UTC']})
    """
    if isinstance(dtype, pl.Datetime):
        return {"Datetime": [dtype.time_unit, dtype.time_zone]}
    if isinstance(dtype, pl.Duration):
        return {"Duration": dtype.time_unit}
    if isinstance(dtype, pl.Decimal):
        return {"Decimal": [dtype.precision, dtype.scale]}
    if isinstance(dtype, pl.List):
        return {"List": encode_dtype(dtype.inner)}
    name = next((n for n, t in _NAMES.items() if dtype == t), None)
    if name is None:
        raise WireError(f"type {dtype} cannot be sent: it has no wire form")
    return name


def decode_dtype(data: object, where: str, depth: int = 0) -> pl.DataType:
    """The polars type of a wire name or object (:func:`encode_dtype`).

    Example:
        >>> from privframe.api.wire.values import decode_dtype
        >>> decode_dtype({"List": "Int64"}, "type")
        List(Int64)
    """
    if isinstance(data, str):
        if data not in _NAMES:
            raise WireError(f"{where}: unknown type {shown(data)}")
        return _NAMES[data]
    kinds = ("Datetime", "Duration", "Decimal", "List")
    given = read_object(data, where, kinds)
    if len(given) != 1:
        raise WireError(f"{where}: a type object has exactly one of {list(kinds)}")
    ((kind, body),) = given.items()
    inner = f"{where}.{kind}"
    if kind == "List":
        if depth >= MAX_DEPTH:
            raise WireError(f"{inner}: types nested more than {MAX_DEPTH} deep")
        return pl.List(decode_dtype(body, inner, depth + 1))
    if kind == "Duration":
        return pl.Duration(_unit(body, inner))
    parts = read_list(body, inner, 2)
    if len(parts) != 2:
        raise WireError(f"{inner}: expected a list of two items")
    if kind == "Decimal":
        precision = None if parts[0] is None else read_int(parts[0], f"{inner}[0]", (1, 38))
        return pl.Decimal(precision, read_int(parts[1], f"{inner}[1]", (0, 38)))
    zone = None if parts[1] is None else read_string(parts[1], f"{inner}[1]")
    if zone is not None and zone not in _zones():
        raise WireError(f"{inner}[1]: unknown time zone {shown(zone)}")
    return pl.Datetime(_unit(parts[0], f"{inner}[0]"), zone)


def _unit(data: object, where: str) -> Any:
    if not isinstance(data, str) or data not in _UNITS:
        raise WireError(f"{where}: expected a time unit 'ms', 'us' or 'ns', got {shown(data)}")
    return _UNITS[data]


@cache
def _zones() -> frozenset[str]:
    """The IANA time zone names this machine knows (a closed set, read once)."""
    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


def _value_kind(dtype: PolarsType, where: str) -> str:
    """The wire name of a type whose values can be sent exactly, else a WireError."""
    if isinstance(dtype, pl.Datetime):
        return "Datetime"
    name = encode_dtype(dtype)
    if name not in _VALUED:
        raise WireError(
            f"{where}: values of type {dtype} cannot be sent exactly: use integers, floats, "
            "booleans, strings, dates or datetimes"
        )
    return str(name)


def encode_values(series: pl.Series) -> list[Any]:
    """A column's values, exactly (see the module doc).

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire.values import encode_values
        >>> encode_values(pl.Series([1.5, float("inf"), None]))
        [1.5, 'inf', None]
    """
    kind = _value_kind(series.dtype, f"column {shown(series.name)}")
    if kind in _PHYSICAL:
        return series.to_physical().to_list()
    values = series.to_list()
    if kind in _FLOATS:
        return [v if v is None or math.isfinite(v) else _float_text(v) for v in values]
    return values


def _float_text(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def decode_values(data: object, dtype: PolarsType, where: str, name: str = "") -> pl.Series:
    """A column of ``dtype`` from its wire values, each checked for its JSON type and range.

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire.values import decode_values
        >>> decode_values(["nan", 2], pl.Float64, "values").to_list()
        [nan, 2.0]
    """
    kind = _value_kind(dtype, where)
    values = [
        None if v is None else _value(v, kind, f"{where}[{i}]")
        for i, v in enumerate(read_list(data, where))
    ]
    if kind in _PHYSICAL:
        physical = pl.Int32 if kind == "Date" else pl.Int64
        return guarded(where, lambda: pl.Series(name, values, physical, strict=True).cast(dtype))
    return guarded(where, lambda: pl.Series(name, values, dtype, strict=True))


def _value(value: object, kind: str, where: str) -> Any:
    if kind in _INTEGERS or kind in _PHYSICAL:
        return read_int(value, where, _INTEGERS.get(kind) or _PHYSICAL[kind])
    if kind in _FLOATS:
        if isinstance(value, str) and value in _NON_FINITE:
            return _NON_FINITE[value]
        number = read_float(value, where)
        if kind == "Float32" and (
            abs(number) > _FLOAT32_MAX or float(np.float32(number)) != number
        ):
            raise WireError(f"{where}: {shown(value)} is not exactly a Float32")
        return number
    if kind == "Boolean":
        return read_bool(value, where)
    if kind == "String":
        return read_string(value, where)
    raise WireError(f"{where}: a Null column holds only null")


def decode_value(data: object, dtype: PolarsType, where: str) -> Any:
    """The Python value of one wire value of ``dtype``, as ``pl.lit(value, dtype)`` takes it.

    Dates and datetimes stay their integer count (``pl.lit`` reads it in the type's unit).

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire.values import decode_value
        >>> decode_value("-inf", pl.Float32, "lit")
        -inf
    """
    if isinstance(dtype, pl.List):
        return None if data is None else decode_values(data, dtype.inner, where).to_list()
    kind = _value_kind(dtype, where)
    return None if data is None else _value(data, kind, where)


def encode_table(frame: pl.DataFrame) -> dict[str, Any]:
    """A public table (join table, keys) as ``{"columns": [{name, type, values}, ...]}``.

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire.values import encode_table
        >>> encode_table(pl.DataFrame({"g": [1, 2]}))
        {'columns': [{'name': 'g', 'type': 'Int64', 'values': [1, 2]}]}
    """
    return {
        "columns": [
            {"name": s.name, "type": encode_dtype(s.dtype), "values": encode_values(s)}
            for s in frame.iter_columns()
        ]
    }


def decode_table(data: object, where: str) -> pl.DataFrame:
    """The frame of :func:`encode_table`'s object: columns of one length, names distinct.

    Example:
        >>> from privframe.api.wire.values import decode_table
        >>> table = {"columns": [{"name": "g", "type": "Int8", "values": [1]}]}
        >>> decode_table(table, "t")["g"].dtype
        Int8
    """
    table = read_object(data, where, ("columns",), ("columns",))
    columns = read_list(table["columns"], f"{where}.columns", 1_000)
    series: list[pl.Series] = []
    cells = 0
    for i, raw in enumerate(columns):
        at = f"{where}.columns[{i}]"
        column = read_object(raw, at, ("name", "type", "values"), ("name", "type", "values"))
        cells += len(read_list(column["values"], f"{at}.values"))
        if cells > _MAX_CELLS:
            raise WireError(f"{at}: a table of more than {_MAX_CELLS} values")
        name = read_string(column["name"], f"{at}.name")
        dtype = decode_dtype(column["type"], f"{at}.type")
        series.append(decode_values(column["values"], dtype, f"{at}.values", name))
    if not series or len({s.len() for s in series}) != 1:
        raise WireError(f"{where}.columns: expected columns of one length, at least one")
    return guarded(where, lambda: pl.DataFrame(series))


def encode_schema(schema: pl.Schema) -> list[dict[str, Any]]:
    """A schema (column names and types) as a list of ``{"name", "type"}``.

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire import decode_schema, encode_schema
        >>> encode_schema(pl.Schema({"x": pl.Float64}))
        [{'name': 'x', 'type': 'Float64'}]
        >>> decode_schema(encode_schema(pl.Schema({"d": pl.Date}))) == pl.Schema({"d": pl.Date})
        True
    """
    return [{"name": name, "type": encode_dtype(dtype)} for name, dtype in schema.items()]


def decode_schema(data: object, where: str = "schema") -> pl.Schema:
    """The schema of :func:`encode_schema`'s list; names must be distinct."""
    fields = []
    for i, raw in enumerate(read_list(data, where, 10_000)):
        field = read_object(raw, f"{where}[{i}]", ("name", "type"), ("name", "type"))
        name = read_string(field["name"], f"{where}[{i}].name")
        fields.append((name, decode_dtype(field["type"], f"{where}[{i}].type")))
    if len({name for name, _ in fields}) != len(fields):
        raise WireError(f"{where}: a column name appears twice")
    return pl.Schema(fields)


def encode_released(frame: pl.DataFrame) -> str:
    """A released (noisy, public) table as the server answers it: base64 Arrow IPC.

    The one table that travels the other way, server to client: Arrow keeps its
    exact types (integer keys, nullable counts) as JSON values could not.

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire import decode_released, encode_released
        >>> decode_released(encode_released(pl.DataFrame({"n": [3]}))).item()
        3
    """
    sink = io.BytesIO()
    frame.write_ipc_stream(sink)
    return base64.b64encode(sink.getvalue()).decode("ascii")


def decode_released(text: str) -> pl.DataFrame:
    """The table of :func:`encode_released` (read by the client, from its own server)."""
    return pl.read_ipc_stream(io.BytesIO(base64.b64decode(text)))
