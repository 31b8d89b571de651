"""Marginals and synthesis calls on the wire: ``Session.marginals`` and ``Session.synthesize``.

A call is a JSON object of the Session method's keyword arguments, each under
its own name; a client leaves out those at their defaults::

    {"columns": [["sex", "age"], ["region"]],   # marginals: the column sets
     "rho": "1/2",                              # or "epsilon" (a pure-DP grant)
     "domains": {"sex": ["F", "M"], "age": {"bins": [0, 18, 120], "labels": ["minor", "adult"]}},
     "max_rows": 5, "label": "marginals"}

    {"rho": "1/2", "method": "aim",             # synthesize (or "epsilon")
     "columns": ["sex", "age"], "workload": [["sex", "age"]], "rows": 1000,
     "domains": {...}, "max_rows": 5, "label": "synthesize"}

Budgets are exact rational text (:mod:`~privframe.api.wire.values`). A
column's domain is a list of its values (strings or numbers, one kind) or the
public edges of :func:`privframe.bin` and their labels: the domains object of
a report spec (:func:`privframe.api.spec_values.spec_domains`), read here with
the wire's limits first. The explanation of a call
(``Session.explain_marginals``, ``explain_synthesis``) has no ``label`` nor
``rows``, and a call to explain that sends them is refused.

The server makes the call on its own Session, so every check a local call
makes runs again there.

Example:
    >>> import json
    >>> import privframe as pf
    >>> from privframe.api.wire.synthesis import decode_call, encode_marginals
    >>> data = encode_marginals(["sex", ("sex", "age")], 0.5,
    ...                         domains={"age": pf.bin("age", [0, 18, 120])})
    >>> data["columns"], data["domains"]["age"]["bins"]
    ([['sex'], ['sex', 'age']], [0.0, 18.0, 120.0])
    >>> call = decode_call("marginals", json.loads(json.dumps(data)), explain=False)
    >>> call.arguments["columns"], call.arguments["rho"], call.spending, call.asked
    ([('sex',), ('sex', 'age')], Fraction(1, 2), {}, 'rho=1/2')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from privframe.api.spec_values import SpecError, spec_domains
from privframe.api.wire.reading import (
    WireError,
    json_kind,
    read_int,
    read_list,
    read_mapping,
    read_object,
    read_string,
)
from privframe.api.wire.values import decode_number, encode_number
from privframe.engines.expressions import Bin
from privframe.numeric import Number, exact

__all__ = [
    "Call",
    "CallKind",
    "decode_call",
    "decode_domains",
    "encode_marginals",
    "encode_synthesis",
]

CallKind = Literal["marginals", "synthesize"]
"""The two calls: ``Session.marginals`` and ``Session.synthesize``."""

_KEYS: Mapping[str, tuple[str, ...]] = {
    "marginals": ("columns", "rho", "epsilon", "domains", "max_rows", "label"),
    "synthesize": (
        "rho",
        "epsilon",
        "method",
        "columns",
        "workload",
        "rows",
        "domains",
        "max_rows",
        "label",
    ),
}
_SPENDING = ("rows", "label")
"""The arguments a call takes and its explanation does not."""
_COUNTS = (0, 2**63 - 1)
"""``rows`` and ``max_rows``: the Session refuses those out of its own range in its words."""


@dataclass(frozen=True)
class Call:
    """A marginals or synthesis call decoded on the server: its Session method's arguments.

    Attributes:
        kind: ``"marginals"`` or ``"synthesize"``.
        arguments: the keyword arguments of the Session method's ``explain_``
            variant (``explain_marginals``, ``explain_synthesis``).
        spending: the others of the method itself (``rows``, ``label``); none
            when the call is to be explained.
        asked: the budget asked, for the audit log (``"rho=1/2"``).
    """

    kind: CallKind
    arguments: Mapping[str, Any]
    spending: Mapping[str, Any]
    asked: str


def encode_marginals(
    columns: Sequence[str | Sequence[str]],
    rho: Number | None = None,
    *,
    epsilon: Number | None = None,
    domains: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """``Session.marginals``'s arguments as their wire object (the client's side).

    A column set given as one name is sent as a list of it; ``label`` is left
    out for an explanation.

    Raises:
        WireError: a column set that is not names, or a domain with no wire form.
        InvalidBudgetError: ``rho`` or ``epsilon`` is not a positive finite number.
    """
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise WireError(
            "marginals.columns: expected a list of column sets, e.g. [('sex', 'age'), ('region',)]"
        )
    sets = [
        [s] if isinstance(s, str) else _names(s, f"marginals.columns[{i}]")
        for i, s in enumerate(columns)
    ]
    data: dict[str, Any] = {"columns": sets, **_budget(rho, epsilon)}
    return _given(data, "marginals", domains=domains, max_rows=max_rows, label=label)


def encode_synthesis(
    rho: Number | None = None,
    *,
    epsilon: Number | None = None,
    method: str = "aim",
    columns: Sequence[str] | None = None,
    workload: Sequence[Sequence[str]] | None = None,
    rows: int | None = None,
    domains: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """``Session.synthesize``'s arguments as their wire object (the client's side).

    ``rows`` and ``label`` are left out for an explanation.

    Raises:
        WireError: columns or a workload that are not names, or a domain with no wire form.
        InvalidBudgetError: ``rho`` or ``epsilon`` is not a positive finite number.

    Example:
        >>> from privframe.api.wire.synthesis import encode_synthesis
        >>> encode_synthesis(0.25, method="mst", rows=100)
        {'rho': '1/4', 'method': 'mst', 'rows': 100}
    """
    data: dict[str, Any] = {**_budget(rho, epsilon), "method": method}
    if columns is not None:
        data["columns"] = _names(columns, "synthesize.columns")
    if workload is not None:
        if isinstance(workload, str) or not isinstance(workload, Sequence):
            raise WireError("synthesize.workload: expected a list of column sets")
        data["workload"] = [_names(s, f"synthesize.workload[{i}]") for i, s in enumerate(workload)]
    return _given(data, "synthesize", domains=domains, max_rows=max_rows, rows=rows, label=label)


def decode_call(kind: CallKind, data: object, explain: bool) -> Call:
    """The call a wire object asks (the server's side); to explain, it takes no rows nor label.

    Raises:
        WireError: a malformed object; the message names its JSON path.

    Example:
        >>> from privframe.api.wire.synthesis import decode_call
        >>> try:
        ...     decode_call("synthesize", {"rho": "1", "label": "x"}, explain=True)
        ... except Exception as err:
        ...     print(err)
        synthesize: unknown key 'label'
    """
    keys = tuple(k for k in _KEYS[kind] if not (explain and k in _SPENDING))
    top = read_object(data, kind, keys, ("columns",) if kind == "marginals" else ())
    budgets = [name for name in ("rho", "epsilon") if name in top]
    if len(budgets) != 1:
        raise WireError(f"{kind}: give exactly one of 'rho' and 'epsilon'")
    name = budgets[0]
    amount = decode_number(top[name], f"{kind}.{name}")
    arguments: dict[str, Any] = {name: amount}
    columns = top.get("columns")
    if kind == "marginals":
        sets = read_list(columns, f"{kind}.columns")
        arguments["columns"] = [
            tuple(_read_names(s, f"{kind}.columns[{i}]")) for i, s in enumerate(sets)
        ]
    elif columns is not None:
        arguments["columns"] = _read_names(columns, f"{kind}.columns")
    if top.get("workload") is not None:
        sets = read_list(top["workload"], f"{kind}.workload")
        arguments["workload"] = [
            _read_names(s, f"{kind}.workload[{i}]") for i, s in enumerate(sets)
        ]
    if "method" in top:
        arguments["method"] = read_string(top["method"], f"{kind}.method")
    if top.get("domains") is not None:
        arguments["domains"] = decode_domains(top["domains"], f"{kind}.domains")
    if top.get("max_rows") is not None:
        arguments["max_rows"] = read_int(top["max_rows"], f"{kind}.max_rows", _COUNTS)
    spending: dict[str, Any] = {}
    if top.get("rows") is not None:
        spending["rows"] = read_int(top["rows"], f"{kind}.rows", _COUNTS)
    if "label" in top:
        spending["label"] = read_string(top["label"], f"{kind}.label")
    return Call(kind, arguments, spending, f"{name}={encode_number(amount)}")


def decode_domains(data: object, where: str) -> dict[str, list[Any] | Bin]:
    """A domains object: per column a list of values or ``{"bins": [...], "labels": [...]}``.

    Read within the wire's limits (list lengths, string sizes, integers of
    Int64/UInt64), then as a report spec reads domains.

    Raises:
        WireError: a malformed domain; the message names its JSON path.

    Example:
        >>> from privframe.api.wire.synthesis import decode_domains
        >>> decode_domains({"age": {"bins": [0, 18, 99]}}, "domains")["age"].keys
        ['[0, 18)', '[18, 99]']
        >>> try:
        ...     decode_domains({"age": {"bins": [18, 0]}}, "domains")
        ... except Exception as err:
        ...     print(err)
        domains.age: bin edges of 'age' must be at least two strictly increasing numbers
    """
    for column, domain in read_mapping(data, where).items():
        at = f"{where}.{column}"
        if isinstance(domain, dict):
            for part in ("bins", "labels"):
                if domain.get(part) is not None:
                    _read_values(domain[part], f"{at}.{part}")
        else:
            _read_values(domain, at)
    try:
        return spec_domains(data, where)
    except SpecError as err:
        problem = str(err)
    raise WireError(problem)


def _read_values(data: object, where: str) -> None:
    """Refuse a list past the wire's limits: too long, or an item too large to be read."""
    for i, value in enumerate(read_list(data, where)):
        if isinstance(value, str):
            read_string(value, f"{where}[{i}]")
        elif isinstance(value, int) and not isinstance(value, bool):
            read_int(value, f"{where}[{i}]")


def _read_names(data: object, where: str) -> list[str]:
    return [read_string(n, f"{where}[{i}]") for i, n in enumerate(read_list(data, where))]


def _names(names: object, where: str) -> list[str]:
    """Column names as the client sends them; anything else is refused here, not by JSON."""
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise WireError(f"{where}: expected a list of column names, got {json_kind(names)}")
    if not all(isinstance(n, str) for n in names):
        raise WireError(f"{where}: expected a list of column names")
    return list(names)


def _budget(rho: Number | None, epsilon: Number | None) -> dict[str, str]:
    """The one budget parameter given, as exact text (the caller refused the other)."""
    name, amount = ("rho", rho) if rho is not None else ("epsilon", epsilon)
    return {name: str(exact(name, amount, positive=True))}


def _given(data: dict[str, Any], kind: CallKind, **optional: Any) -> dict[str, Any]:
    """``data`` with the optional arguments that are given; domains in their wire form."""
    for name, value in optional.items():
        if value is None:
            continue
        data[name] = _encode_domains(value, f"{kind}.domains") if name == "domains" else value
    # Read as the server reads it, so that a call it would refuse as malformed is not sent.
    decode_call(kind, data, explain=False)
    return data


def _encode_domains(domains: object, where: str) -> dict[str, Any]:
    if not isinstance(domains, Mapping):
        raise WireError(
            f"{where}: expected a mapping of column names to value lists or pf.bin(...), "
            f"got {type(domains).__name__}"
        )
    encoded: dict[str, Any] = {}
    for column, domain in domains.items():
        if isinstance(domain, Bin):
            if domain.column != column:
                raise WireError(
                    f"{where}.{column}: the bin is of column {domain.column!r}; bin "
                    f"{column!r} itself"
                )
            encoded[column] = {"bins": list(domain.edges), "labels": list(domain.labels)}
        elif isinstance(domain, Sequence | np.ndarray) and not isinstance(domain, str):
            # numpy scalars (a domain from np.arange) as the Python numbers JSON writes.
            encoded[column] = [v.item() if isinstance(v, np.generic) else v for v in domain]
        else:
            raise WireError(f"{where}.{column}: expected a list of values or pf.bin(...)")
    return encoded
