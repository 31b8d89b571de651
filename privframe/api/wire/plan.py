"""A query's plan on the wire, rebuilt on the server through the public query builder.

The plan is an object with these keys (each optional; absent means empty)::

    {"steps": [{"filter": [<expr>, ...]},
               {"with_columns": [<expr>, ...]},
               {"join": {"table": <table>, "on": ["zip"], "how": "left"}}],
     "bound": {"max_groups": 3, "max_rows_per_group": 5, "max_rows": null},
     "group_by": ["region"], "keys": <table>, "other": "rest",
     "bounds_share": "1/10",
     "aggregates": [{"kind": "count"},
                    {"kind": "sum", "column": "amount", "bounds": [0, 1000], "alias": "total"},
                    {"kind": "mean", "column": "age", "bounds": "auto"},
                    {"kind": "quantile", "column": "age", "bounds": [0, 100], "q": 0.5,
                     "candidates": 101}]}

``bounds: "auto"`` and ``bounds_share`` (an exact fraction as a string) are
``bounds="auto"`` and ``Query.bounds_share``.

Expressions are those of :mod:`~privframe.api.wire.expressions`, tables
those of :mod:`~privframe.api.wire.values`. An aggregate is its family's
``spec_name`` (:data:`~privframe.plan.aggregates.FAMILIES`) with its public
fields, as a report spec writes it (:data:`privframe.api.spec_values.AGGREGATE_KINDS`).

:func:`decode_plan_query` replays the plan on a query of the server's own
session: ``filter`` (once per expression), ``with_columns``, ``join``,
``bound``, ``group_by`` and ``agg``, and the aggregates are built by
``pf.count``, ``pf.sum``, ... So every check a local query gets (the
allow-list, argument types and ranges, unique join keys, key sets) runs
again on the server, on values the server built itself.

Example:
    >>> import polars as pl
    >>> import privframe as pf
    >>> from privframe.api.wire import decode_plan_query, encode_plan
    >>> sess = pf.Session(pl.DataFrame({"r": ["a"], "x": [1.0]}), None, pf.zCDP(1.0))
    >>> q = sess.query().group_by("r", keys=["a", "b"]).agg(pf.sum("x", (0, 5)))
    >>> encode_plan(q.plan)["aggregates"]
    [{'kind': 'sum', 'column': 'x', 'bounds': [0.0, 5.0]}]
    >>> decoded = decode_plan_query(encode_plan(q.plan), sess.query())
    >>> str(decoded.explain(0.5)) == str(q.explain(0.5))
    True
"""

from __future__ import annotations

from typing import Any

from privframe.api.query import Query
from privframe.api.spec_values import AGGREGATE_KINDS
from privframe.api.wire.expressions import decode_expression, encode_expression
from privframe.api.wire.reading import (
    Budget,
    WireError,
    guarded,
    read_float,
    read_int,
    read_list,
    read_object,
    read_optional,
    read_string,
    shown,
)
from privframe.api.wire.values import decode_number, decode_table, encode_number, encode_table
from privframe.engines.spec import RowStep, Step
from privframe.plan.aggregates import Aggregate, Bounded, Quantile
from privframe.plan.aggregates.base import AUTO, Summed
from privframe.plan.ir import Plan
from privframe.plan.keys import KeySet

__all__ = ["decode_aggregate", "decode_plan_query", "encode_aggregate", "encode_plan"]

_PLAN_KEYS = ("steps", "bound", "group_by", "keys", "other", "aggregates", "bounds_share")
_BOUND_KEYS = ("max_groups", "max_rows_per_group", "max_rows")
_STEP_KINDS = ("filter", "with_columns", "join")
_AGGREGATE_KEYS = ("kind", "column", "bounds", "q", "candidates", "missing", "alias")
_MAX_COLUMNS = 1_000


def encode_aggregate(agg: Aggregate, where: str = "aggregate") -> dict[str, Any]:
    """An aggregate as its kind and public fields; refused if they do not rebuild it exactly.

    Example:
        >>> import privframe as pf
        >>> from privframe.api.wire import encode_aggregate
        >>> encode_aggregate(pf.median("age", (0, 100), candidates=11))["alias"]
        'age_median'
        >>> encode_aggregate(pf.sum("x", (0, 10)))
        {'kind': 'sum', 'column': 'x', 'bounds': [0.0, 10.0]}
    """
    data: dict[str, Any] = {"kind": agg.spec_name}
    if isinstance(agg, Bounded):
        data.update(column=agg.column, bounds=AUTO if agg.auto else [agg.lower, agg.upper])
    if isinstance(agg, Quantile):
        data.update(q=agg.q, candidates=agg.candidates)
    if isinstance(agg, Summed) and agg.missing != "midpoint":
        data["missing"] = agg.missing
    if agg.name is not None:
        data["alias"] = agg.name
    if decode_aggregate(data, where) != agg:
        # A family with a field the wire does not carry would be released differently.
        raise WireError(f"{where}: the aggregate {agg.describe()!r} has no exact wire form")
    return data


def decode_aggregate(data: object, where: str = "aggregate") -> Aggregate:
    """An aggregate built by its public constructor (``pf.sum(...)``) from its wire object.

    Example:
        >>> from privframe.api.wire import decode_aggregate
        >>> decode_aggregate({"kind": "mean", "column": "x", "bounds": [0, 1]}).output_name
        'x_mean'
    """
    raw = read_object(data, where, _AGGREGATE_KEYS, ("kind",))
    kind = read_string(raw["kind"], f"{where}.kind")
    if kind not in AGGREGATE_KINDS:
        raise WireError(f"{where}.kind: unknown aggregate kind {shown(kind)}")
    build, allowed = AGGREGATE_KINDS[kind]
    required = [k for k in ("column", "bounds", "q") if k in allowed]
    table = read_object(raw, where, allowed, required)
    args: list[Any] = []
    if "column" in table:
        args = [read_string(table["column"], f"{where}.column"), _bounds(table["bounds"], where)]
    if "q" in table:
        args.insert(1, read_float(table["q"], f"{where}.q"))
    options: dict[str, Any] = {}
    if "candidates" in table:
        options["candidates"] = read_int(table["candidates"], f"{where}.candidates")
    if "missing" in table:
        missing = table["missing"]
        read = read_string if isinstance(missing, str) else read_float
        options["missing"] = read(missing, f"{where}.missing")
    built = guarded(where, lambda: build(*args, **options))
    assert isinstance(built, Aggregate)  # a single q: one aggregate
    alias = read_optional(table, "alias", where, read_string)
    return built if alias is None else guarded(where, lambda: built.alias(alias))


def _bounds(data: object, where: str) -> tuple[float, float] | str:
    """An aggregate's wire bounds: ``[lower, upper]``, or ``"auto"`` (chosen at release)."""
    if data == AUTO:
        return AUTO
    bounds = read_list(data, f"{where}.bounds", 2)
    if len(bounds) != 2:
        raise WireError(f'{where}.bounds: expected [lower, upper] or "auto"')
    lower, upper = (read_float(b, f"{where}.bounds[{i}]") for i, b in enumerate(bounds))
    return lower, upper


def encode_plan(plan: Plan, where: str = "plan") -> dict[str, Any]:
    """A plan as its wire object (see the module doc).

    Raises:
        WireError: an expression or value that has no wire form.

    Example:
        >>> import polars as pl
        >>> from privframe.api.wire import encode_plan
        >>> from privframe.plan.ir import Plan
        >>> encode_plan(Plan())
        {'steps': [], 'bound': None, 'group_by': [], 'keys': None, 'other': None, 'aggregates': []}
    """
    budget = Budget()
    bound = plan.bound
    share = {} if plan.bounds_share is None else {"bounds_share": encode_number(plan.bounds_share)}
    return {
        "steps": [_encode_step(s, f"{where}.steps[{i}]", budget) for i, s in enumerate(plan.steps)],
        "bound": None if bound is None else {k: getattr(bound, k) for k in _BOUND_KEYS},
        "group_by": list(plan.group_by),
        "keys": None if plan.keys is None else encode_table(plan.keys.to_polars()),
        "other": plan.other,
        "aggregates": [
            encode_aggregate(a, f"{where}.aggregates[{i}]") for i, a in enumerate(plan.aggregates)
        ],
        **share,
    }


def _encode_step(step: Step, where: str, budget: Budget) -> dict[str, Any]:
    if not isinstance(step, RowStep):
        raise WireError(
            f"{where}: {step.kind} has no wire form yet (a served dataset is one table); run "
            "joins of private tables, flat_map and per-person values on a local Session"
        )
    if step.kind == "join":
        assert step.table is not None  # a join step holds its table
        return {"join": {"table": encode_table(step.table), "on": list(step.on), "how": step.how}}
    exprs = [
        encode_expression(e, f"{where}.{step.kind}[{i}]", budget) for i, e in enumerate(step.exprs)
    ]
    return {step.kind: exprs}


def decode_plan_query(
    data: object, query: Query, where: str = "plan", budget: Budget | None = None
) -> Query:
    """``query`` extended by the wire plan, through the public builder (see the module doc).

    Args:
        data: the wire plan (parsed JSON).
        query: a query of the session the plan runs on (``session.query()``).
        where: the plan's JSON path, for messages.
        budget: the expression nodes the request may still hold (a fresh one if None).

    Raises:
        WireError: a malformed plan, or one the builder refuses (its message, at the path).
    """
    budget = budget if budget is not None else Budget()
    plan = read_object(data, where, _PLAN_KEYS)
    for i, step in enumerate(read_list(plan.get("steps", []), f"{where}.steps", _MAX_COLUMNS)):
        query = _decode_step(step, query, f"{where}.steps[{i}]", budget)
    if plan.get("bound") is not None:
        at = f"{where}.bound"
        limits = read_object(plan["bound"], at, _BOUND_KEYS)
        given = {k: read_optional(limits, k, at, read_int) for k in _BOUND_KEYS}
        query = guarded(at, lambda: query.bound(**given))
    columns = _names(plan.get("group_by", []), f"{where}.group_by")
    keys = None if plan.get("keys") is None else _keyset(plan["keys"], f"{where}.keys")
    other = read_optional(plan, "other", where, read_string)
    if columns or keys is not None or other is not None:
        query = guarded(f"{where}.group_by", lambda: query.group_by(columns, keys, other))
    if plan.get("bounds_share") is not None:
        at = f"{where}.bounds_share"
        share = decode_number(plan["bounds_share"], at)
        query = guarded(at, lambda: query.bounds_share(share))
    aggregates = read_list(plan.get("aggregates", []), f"{where}.aggregates", _MAX_COLUMNS)
    built = [decode_aggregate(a, f"{where}.aggregates[{i}]") for i, a in enumerate(aggregates)]
    return guarded(f"{where}.aggregates", lambda: query.agg(*built)) if built else query


def _decode_step(step: object, query: Query, where: str, budget: Budget) -> Query:
    given = read_object(step, where, _STEP_KINDS)
    if len(given) != 1:
        raise WireError(f"{where}: a step has exactly one of {list(_STEP_KINDS)}")
    ((kind, body),) = given.items()
    at = f"{where}.{kind}"
    if kind == "join":
        join = read_object(body, at, ("table", "on", "how"), ("table", "on", "how"))
        table = decode_table(join["table"], f"{at}.table")
        on = _names(join["on"], f"{at}.on")
        how = read_string(join["how"], f"{at}.how")
        return guarded(at, lambda: query.join(table, on, how))  # type: ignore[arg-type]
    exprs = [
        decode_expression(e, f"{at}[{i}]", budget)
        for i, e in enumerate(budget.list_of_nodes(body, at))
    ]
    if kind == "with_columns":
        return guarded(at, lambda: query.with_columns(*exprs))
    for i, expr in enumerate(exprs):
        query = guarded(f"{at}[{i}]", lambda: query.filter(expr))  # noqa: B023
    return query


def _names(data: object, where: str) -> list[str]:
    return [
        read_string(c, f"{where}[{i}]") for i, c in enumerate(read_list(data, where, _MAX_COLUMNS))
    ]


def _keyset(data: object, where: str) -> KeySet:
    frame = decode_table(data, where)
    return guarded(where, lambda: KeySet(frame))
