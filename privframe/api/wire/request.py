"""A release request on the wire: a plan or SQL text, its budget, and the release's options.

::

    {"version": 1,
     "plan": <plan>,                 # or "sql": "SELECT ...", never both
     "rho": "1/10",                  # exact rational text (wire.values); or "epsilon"
     "delta": "1/1000000",           # or null
     "with_error": false, "label": "", "clamp": true, "intervals": false, "total": false,
     "weights": null}     # or {"weights": {"amount_sum": 2.0}}, or
                          # {"balance": {"rows": 500, "expected": {"amount_sum": 2e4}}}

The budget is exactly one of ``rho`` (a zCDP grant's release) and
``epsilon`` (a pure-DP or (ε, δ) grant's, whose δ is the ``delta``
option). The options are the fields of
:class:`~privframe.plan.release_options.ReleaseOptions`, each under its
own name: booleans and strings as they are, ``delta`` and ``weights`` as
above. A client leaves out the options at their defaults (a missing key
reads as its default), so a request that uses no option newer than a
server is read by that server: a zCDP request is what it was before
``epsilon`` could be sent, and the wire's version stays 1.

The server rebuilds a plan through its session's query builder
(:func:`~privframe.api.wire.plan.decode_plan_query`) and parses SQL text
with its session's ``parse_sql``, then makes the request as a local query
makes it (``.request_with(rho, options, epsilon=epsilon)``): every check
runs again on the server, the session's refusal of the other budget
parameter included. A SQL query whose ``OPTIONS(epsilon, delta)`` set its
budget is parsed again there, and refused unless what it spends (ρ and δ in
a zCDP session, ε and δ in the others) is what the client sent.

Example:
    >>> import json
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.api.wire import decode_request, encode_request
    >>> sess = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.zCDP(1.0))
    >>> request = sess.query().agg(pf.count()).request(0.1, label="n")
    >>> data = json.loads(json.dumps(encode_request(request)))
    >>> {key: value for key, value in data.items() if key != "plan"}  # options: only those given
    {'version': 1, 'rho': '1/10', 'label': 'n'}
    >>> decoded = decode_request(data, sess)
    >>> decoded.rho, decoded.options.label, sess.release_all([decoded])[0].columns
    (Fraction(1, 10), 'n', ['count'])
    >>> pure = pf.Session(pl.DataFrame({"x": [1.0, 2.0]}), None, pf.PureDP(1.0))
    >>> data = encode_request(pure.query().agg(pf.count()).request(epsilon=0.5))
    >>> data["epsilon"], decode_request(data, pure).epsilon
    ('1/2', Fraction(1, 2))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

from privframe.api.query import Query, Request
from privframe.api.wire.plan import decode_plan_query, encode_plan
from privframe.api.wire.reading import (
    WIRE_VERSION,
    WireError,
    guarded,
    read_bool,
    read_float,
    read_int,
    read_mapping,
    read_object,
    read_string,
    shown,
)
from privframe.api.wire.values import decode_number, encode_number
from privframe.errors import InvalidArgumentError
from privframe.numeric import exact
from privframe.plan.release_options import ReleaseOptions
from privframe.plan.split import Balance, balance

if TYPE_CHECKING:
    from collections.abc import Mapping

    from privframe.api.sql import SQLQuery
    from privframe.numeric import Number
    from privframe.plan.ir import Plan

__all__ = [
    "TuneRequest",
    "WireSession",
    "decode_request",
    "decode_tune",
    "encode_request",
    "encode_tune",
]

_WHERE = "request"


class WireSession(Protocol):
    """What decoding a request needs of the server's session: :class:`~privframe.Session` is one."""

    def query(self) -> Query:
        """Start a query."""
        ...

    def parse_sql(self, text: str) -> SQLQuery:
        """Parse SQL text into a query (never releasing it)."""
        ...


def encode_request(request: Request) -> dict[str, Any]:
    """A release request as its JSON-ready wire object (the client's side).

    Raises:
        WireError: a part with no wire form (an expression off the allow-list, a
            table of a type that cannot be sent exactly, a builder request with
            a ``finish`` step).
        InvalidBudgetError: ρ or δ is negative or not finite.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.wire import encode_request
        >>> sess = pf.Session(pl.DataFrame({"x": [1.0]}), None, pf.zCDP(1.0))
        >>> encode_request(sess.sql("SELECT COUNT(*) AS n FROM data").request(0.5))["sql"]
        'SELECT COUNT(*) AS n FROM data'
    """
    data: dict[str, Any] = {"version": WIRE_VERSION}
    if request.sql is not None:
        data["sql"] = request.sql
    elif request.finish is not None:
        raise WireError(f"{_WHERE}: a request that post-processes its table is sent as SQL text")
    else:
        data["plan"] = encode_plan(request.query.plan, f"{_WHERE}.plan")
    if (request.rho is None) == (request.epsilon is None):
        raise WireError(f"{_WHERE}: a request on the wire spends exactly one of rho and epsilon")
    if request.rho is not None:
        data["rho"] = encode_number(request.rho)
    else:
        data["epsilon"] = encode_number(request.epsilon)  # type: ignore[arg-type]  # not None
    options = request.options
    for name in options.given():
        data[name] = _codec(name)[0](getattr(options, name))
    return data


def decode_request(data: object, session: WireSession) -> Request:
    """The request a wire object asks, made on the server's ``session`` (the server's side).

    Raises:
        WireError: a malformed request (the message names its JSON path), or
            one the builder refuses.
        PrivframeError: SQL text the session's parser refuses (:class:`SQLError`).
    """
    top = read_object(data, _WHERE, _KEYS, ("version",))
    version = read_int(top["version"], f"{_WHERE}.version")
    if version != WIRE_VERSION:
        raise WireError(
            f"{_WHERE}.version: this server reads version {WIRE_VERSION}, not {version}"
        )
    if ("plan" in top) == ("sql" in top):
        raise WireError(f"{_WHERE}: give exactly one of 'plan' and 'sql'")
    if "rho" in top and "epsilon" in top:
        raise WireError(f"{_WHERE}: give exactly one of 'rho' and 'epsilon', not both")
    if "rho" not in top and "epsilon" not in top:
        raise WireError(
            f"{_WHERE}: missing key 'rho' (or 'epsilon', the budget of a pure-DP or "
            "(epsilon, delta) grant's release)"
        )
    rho = decode_number(top["rho"], f"{_WHERE}.rho") if "rho" in top else None
    epsilon = decode_number(top["epsilon"], f"{_WHERE}.epsilon") if "epsilon" in top else None
    # δ stays exact: the release pipeline reads it as a Number (selection_delta).
    given = {
        name: _codec(name)[1](top[name], f"{_WHERE}.{name}") for name in _OPTIONS if name in top
    }
    options = guarded(_WHERE, lambda: ReleaseOptions(**given))
    if "sql" in top:
        text = read_string(top["sql"], f"{_WHERE}.sql", empty=False)
        return _sql_request(session.parse_sql(text), rho, epsilon, options)
    query = decode_plan_query(top["plan"], session.query(), f"{_WHERE}.plan")
    return guarded(_WHERE, lambda: query.request_with(rho, options, epsilon=epsilon))


def _sql_request(
    parsed: SQLQuery, rho: Fraction | None, epsilon: Fraction | None, options: ReleaseOptions
) -> Request:
    """The SQL query's request; with OPTIONS, only if they spend the budget that was sent.

    That is the ρ and δ they convert to in a zCDP session, their ε and δ in the others.
    """
    if not parsed.carries_budget:
        return parsed.request_with(rho, options, epsilon=epsilon)
    request = parsed.request_with(None, dataclasses.replace(options, delta=None))
    name = "rho" if request.rho is not None else "epsilon"
    amount = request.rho if request.rho is not None else request.epsilon
    sent = (rho if name == "rho" else epsilon, options.delta)
    spent = (
        exact(name, amount),
        None if request.options.delta is None else exact("delta", request.options.delta),
    )
    other, other_sent = ("epsilon", epsilon) if name == "rho" else ("rho", rho)
    if sent != spent or other_sent is not None:
        shown_sent = f"{name}={sent[0]}" if sent[0] is not None else f"{other}={other_sent}"
        raise WireError(
            f"{_WHERE}.{name}: the query's OPTIONS spend {name}={spent[0]} and "
            f"delta={spent[1]}, not the {shown_sent} and delta={sent[1]} that were sent"
        )
    return request


Encode = Callable[[Any], Any]
Decode = Callable[[object, str], Any]


def _codec(name: str) -> tuple[Encode, Decode]:
    """How an option is written and read: by its name, else by its default's type."""
    if name in _CODECS:
        return _CODECS[name]
    default = _DEFAULTS[name]
    if isinstance(default, bool):
        return (lambda value: value), read_bool
    if isinstance(default, str):
        return (lambda value: value), read_string
    # A new option of another type needs its entry in _CODECS (test_release_options).
    raise WireError(f"{_WHERE}.{name}: this option has no wire form")


def _encode_delta(delta: Any) -> str | None:
    return None if delta is None else encode_number(delta)


def _decode_delta(data: object, where: str) -> Fraction | None:
    return None if data is None else decode_number(data, where)


def _encode_weights(
    weights: Mapping[str, float] | Balance | None, where: str = f"{_WHERE}.weights"
) -> dict[str, Any] | None:
    if weights is None:
        return None
    if isinstance(weights, Balance):
        expected = {k: read_float(v, f"{where}.expected") for k, v in weights.expected.items()}
        return {"balance": {"rows": read_float(weights.rows, where), "expected": expected}}
    if not hasattr(weights, "items"):
        raise WireError(f"{where}: expected a mapping of output names to weights or pf.balance")
    named = read_mapping(dict(weights), where)
    return {"weights": {k: read_float(v, f"{where}[{shown(k)}]") for k, v in named.items()}}


def _decode_weights(data: object, where: str) -> Mapping[str, float] | Balance | None:
    if data is None:
        return None
    given = read_object(data, where, ("weights", "balance"))
    if len(given) != 1:
        raise WireError(f"{where}: expected exactly one of 'weights' and 'balance'")
    if "weights" in given:
        named = read_mapping(given["weights"], f"{where}.weights")
        return {k: read_float(v, f"{where}.weights[{shown(k)}]") for k, v in named.items()}
    at = f"{where}.balance"
    body = read_object(given["balance"], at, ("rows", "expected"), ("rows",))
    rows = read_float(body["rows"], f"{at}.rows")
    named = read_mapping(body.get("expected", {}), f"{at}.expected")
    if "rows" in named:
        raise WireError(f"{at}.expected: 'rows' is not an output name")
    expected = {k: read_float(v, f"{at}.expected[{shown(k)}]") for k, v in named.items()}
    return guarded(at, lambda: balance(rows, **expected))


@dataclasses.dataclass(frozen=True)
class TuneRequest:
    """What a ``tune`` body asks, decoded on the server's session: ``query.tune``'s arguments."""

    query: Query
    rho: Fraction
    plan_rho: Fraction
    weights: Mapping[str, float] | Balance | None
    label: str


def encode_tune(
    plan: Plan,
    rho: Number,
    plan_rho: Number,
    weights: Mapping[str, float] | Balance | None = None,
    label: str = "tune",
) -> dict[str, Any]:
    """A ``query.tune`` call as its wire object (the client's side); spends nothing.

    ``{"plan": <plan>, "rho": "1/10", "plan_rho": "9/10", "weights": null, "label": "tune"}``:
    the plan and budgets as a release request writes them (ρ and ``plan_rho``
    exact rationals, ``weights`` as the request's option).

    Raises:
        WireError: a part of the plan with no wire form.
        InvalidBudgetError: ``rho`` or ``plan_rho`` is not a positive finite number.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.api.wire import decode_tune, encode_tune
        >>> sess = pf.Session(pl.DataFrame({"u": [1], "x": [1.0]}), "u", pf.zCDP(1.0))
        >>> q = sess.query().agg(pf.sum("x", (0, 100)))
        >>> data = encode_tune(q.plan, 0.1, 0.9)
        >>> data["rho"], data["plan_rho"], data["label"]
        ('1/10', '9/10', 'tune')
        >>> asked = decode_tune(data, sess)
        >>> asked.rho, asked.query.plan.aggregates == q.plan.aggregates
        (Fraction(1, 10), True)
    """
    if not isinstance(label, str):
        raise InvalidArgumentError(f"label must be a str, got {type(label).__name__}")
    return {
        "plan": encode_plan(plan, f"{_TUNE}.plan"),
        "rho": str(exact("rho", rho, positive=True)),
        "plan_rho": str(exact("plan_rho", plan_rho, positive=True)),
        "weights": _encode_weights(weights, f"{_TUNE}.weights"),
        "label": label,
    }


def decode_tune(data: object, session: WireSession) -> TuneRequest:
    """The ``query.tune`` call a wire object asks, on the server's ``session`` (its side).

    The plan is rebuilt through the session's query builder, as a release's is.

    Raises:
        WireError: a malformed object (the message names its JSON path), or a
            plan the builder refuses.
    """
    top = read_object(
        data, _TUNE, ("plan", "rho", "plan_rho", "weights", "label"), ("plan", "rho", "plan_rho")
    )
    rho = decode_number(top["rho"], f"{_TUNE}.rho")
    plan_rho = decode_number(top["plan_rho"], f"{_TUNE}.plan_rho")
    weights = _decode_weights(top.get("weights"), f"{_TUNE}.weights")
    label = read_string(top.get("label", "tune"), f"{_TUNE}.label")
    query = decode_plan_query(top["plan"], session.query(), f"{_TUNE}.plan")
    return TuneRequest(query, rho, plan_rho, weights, label)


_TUNE = "tune"
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ReleaseOptions)}
_OPTIONS = tuple(_DEFAULTS)
_KEYS = ("version", "plan", "sql", "rho", "epsilon", *_OPTIONS)
_CODECS: Mapping[str, tuple[Encode, Decode]] = {
    "delta": (_encode_delta, _decode_delta),
    "weights": (_encode_weights, _decode_weights),
}
