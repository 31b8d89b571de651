"""Hostile wire requests: each is refused with a privframe error naming where, and nothing else.

Malformed and adversarial requests (wrong JSON types at any path, unknown
keys, ops, types and kinds, another version, deep nesting, too many nodes,
huge strings, lists, integers and rationals) are refused by
``decode_request`` with a :class:`WireError` whose message starts with the
JSON path; a fuzz of 2,000 random mutations of valid encodings (fixed seed)
only ever decodes or raises a :class:`PrivframeError`.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import polars as pl
import pytest

import privframe as pf
from privframe.api.wire import (
    MAX_DEPTH,
    MAX_ITEMS,
    MAX_NODES,
    MAX_STRING,
    WireError,
    decode_request,
    encode_request,
)
from privframe.errors import PrivframeError

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")


def session() -> pf.Session:
    frame = pl.DataFrame(
        {"u": [1, 2, 3], "region": ["n", "s", "n"], "age": [20, 30, 40], "x": [1.0, 2.0, 3.0]}
    )
    return pf.Session(
        frame,
        "u",
        pf.zCDP(rho=1.0, delta=1e-6),
        metadata={"x": pf.Column(bounds=(0, 10))},
        contributions=pf.Bound(max_groups=1, max_rows_per_group=1),
    )


def valid_requests(sess: pf.Session) -> list[dict[str, Any]]:
    """JSON encodings of valid requests covering every part of the grammar."""
    zones = pl.DataFrame({"region": ["n", "s"], "zone": [1, 2], "w": [0.5, float("nan")]})
    query = (
        sess.query()
        .filter((pl.col("age") >= 18) & pl.col("region").is_in(["n", "s"]))
        .with_columns(
            band=pf.bin("age", [0, 30, 100]),
            y=pl.when(pl.col("x").is_nan()).then(0.0).otherwise(pl.col("x").abs()),
            z=pl.col("region").str.contains("n", literal=True).cast(pl.Int8, strict=False),
        )
        .join(zones, on="region", how="inner")
        .bound(max_groups=2, max_rows_per_group=1)
    )
    requests = [
        query.group_by(["region", "band"], keys=pf.keys.product(region=["n", "s"]))
        .agg(pf.count(), pf.quantile("age", 0.5, (0, 100), candidates=11))
        .request(0.1, delta=1e-7, weights=pf.balance(rows=10, age_p50=30.0), total=True),
        query.group_by("region", keys=["n"], other="rest")
        .agg(pf.sum("x", (0, 10)).alias("s"), pf.mean("y", (0, 10)))
        .request(0.25, weights={"s": 2.0}, with_error=True, label="lab"),
        sess.sql("SELECT region, COUNT(*) AS n FROM data GROUP BY region").request(0.5, delta=1e-7),
    ]
    return [json.loads(json.dumps(encode_request(r), allow_nan=False)) for r in requests]


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"col": "age"}
    for _ in range(depth - 1):
        node = {"fn": "not", "args": [node]}
    return node


def with_filter(base: dict[str, Any], expr: Any) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data["plan"]["steps"] = [{"filter": [expr]}]
    return data


def refuse(data: Any, pattern: str) -> str:
    with pytest.raises(WireError, match=pattern) as caught:
        decode_request(data, session())
    return str(caught.value)


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    return valid_requests(session())[1]


def test_malformed_envelopes_are_refused_naming_the_key(base: dict[str, Any]) -> None:
    refuse([base], r"^request: expected an object, got a list")
    refuse({**base, "version": 2}, r"^request\.version: this server reads version 1, not 2")
    refuse({**base, "version": True}, r"^request\.version: expected an integer, got a boolean")
    refuse({**base, "sql": "SELECT 1"}, r"^request: give exactly one of 'plan' and 'sql'")
    refuse({k: v for k, v in base.items() if k != "rho"}, r"^request: missing key 'rho'")
    refuse({**base, "pickle": "gASV"}, r"^request: unknown key 'pickle'")
    refuse({**base, "rho": 0.25}, r"^request\.rho: expected an exact rational")
    refuse({**base, "rho": "1" * 201}, r"^request\.rho: expected an exact rational")
    refuse({**base, "clamp": 1}, r"^request\.clamp: expected true or false, got an integer")
    refuse({**base, "weights": {"weights": {"s": "2"}}}, r"^request\.weights\.weights\['s'\]")
    refuse({**base, "weights": {"balance": {"rows": 1, "expected": {"rows": 2}}}}, "output name")


def test_wrong_types_inside_the_plan_are_refused_naming_the_path(base: dict[str, Any]) -> None:
    bad_bound = copy.deepcopy(base)
    bad_bound["plan"]["bound"]["max_groups"] = True
    refuse(bad_bound, r"^request\.plan\.bound\.max_groups: expected an integer, got a boolean")
    bad_keys = copy.deepcopy(base)
    bad_keys["plan"]["keys"]["columns"][0]["values"] = [1]
    refuse(bad_keys, r"^request\.plan\.keys\.columns\[0\]\.values\[0\]: expected a string")
    bad_type = copy.deepcopy(base)
    bad_type["plan"]["keys"]["columns"][0]["type"] = "Object"
    refuse(bad_type, r"^request\.plan\.keys\.columns\[0\]\.type: unknown type 'Object'")
    bad_kind = copy.deepcopy(base)
    bad_kind["plan"]["aggregates"][0]["kind"] = "eval"
    refuse(bad_kind, r"^request\.plan\.aggregates\[0\]\.kind: unknown aggregate kind 'eval'")
    bad_bounds = copy.deepcopy(base)
    bad_bounds["plan"]["aggregates"][0]["bounds"] = [0, float("nan")]
    refuse(bad_bounds, r"^request\.plan\.aggregates\[0\]\.bounds\[1\]: expected a finite number")


def test_unknown_expression_forms_are_refused_naming_the_path(base: dict[str, Any]) -> None:
    gt = {"op": ">", "args": [{"col": "age"}, {"op": "Foo", "args": []}]}
    message = refuse(with_filter(base, gt), r"unknown op 'Foo'")
    assert message == "request.plan.steps[0].filter[0].args[1].op: unknown op 'Foo'"
    refuse(with_filter(base, {"fn": "map_elements", "args": []}), r"\.fn: unknown function")
    refuse(with_filter(base, {"col": "a", "lit": 1}), r"filter\[0\]: expected one of the keys")
    refuse(with_filter(base, {"dsl": "gASV"}), r"filter\[0\]: expected one of the keys")
    lit = {"lit": 1, "type": "Int128"}
    refuse(with_filter(base, lit), r"filter\[0\]\.lit: values of type Int128 cannot be sent")
    refuse(with_filter(base, {"lit": 1, "type": "Boolean"}), r"\.lit: expected true or false")
    refuse(with_filter(base, {"lit": 300, "type": "UInt8"}), r"\.lit: integer out of range")
    refuse(with_filter(base, {"lit": 2**64, "type": "int"}), r"\.lit: integer out of range")
    refuse(with_filter(base, {"lit": 0.1, "type": "Float32"}), r"not exactly a Float32")
    between = {"fn": "is_between", "args": [{"col": "age"}] * 3, "closed": "all"}
    refuse(with_filter(base, between), r"filter\[0\]\.closed: expected one of")
    refuse(
        with_filter(base, {"fn": "abs", "args": [{"col": "age"}] * 2}),
        "expected 1 arguments, got 2",
    )
    # Well-formed but off the allow-list: the builder refuses it, as it would locally.
    refuse(
        with_filter(base, {"fn": "contains", "args": [{"col": "r"}] * 2, "strict": False}),
        r"^request\.plan\.steps\[0\]\.filter\[0\]: .*privately",
    )


def test_size_limits_are_refused_before_anything_is_built(base: dict[str, Any]) -> None:
    assert decode_request(with_filter(base, nested(MAX_DEPTH)), session()).query.plan.steps
    refuse(with_filter(base, nested(MAX_DEPTH + 1)), f"nested more than {MAX_DEPTH} deep")
    refuse(with_filter(base, nested(100_000)), f"nested more than {MAX_DEPTH} deep")
    wide = copy.deepcopy(base)
    wide["plan"]["steps"] = [{"with_columns": [{"col": "age"}] * (MAX_NODES + 1)}]
    refuse(wide, f"more than {MAX_NODES} expression nodes")
    chain = {"when": [[{"col": "a"}, {"col": "b"}]] * MAX_NODES, "otherwise": {"col": "c"}}
    refuse(with_filter(base, chain), f"more than {MAX_NODES} expression nodes")
    refuse(with_filter(base, {"col": "c" * (MAX_STRING + 1)}), f"more than {MAX_STRING} char")
    values = {"lit": list(range(MAX_ITEMS + 1)), "type": {"List": "Int64"}}
    refuse(
        with_filter(base, {"fn": "is_in", "args": [{"col": "age"}, values], "nulls_equal": False}),
        f"more than {MAX_ITEMS} items",
    )
    deep_type = {"List": "Int64"}
    for _ in range(MAX_DEPTH + 1):
        deep_type = {"List": deep_type}
    refuse(with_filter(base, {"lit": None, "type": deep_type}), "types nested more than")
    refuse({**base, "label": "x" * (MAX_STRING + 1)}, r"^request\.label: a string of more than")


def test_messages_echo_at_most_a_short_prefix_of_what_the_client_sent(
    base: dict[str, Any],
) -> None:
    message = refuse(with_filter(base, {"op": "SECRET" * 1000, "args": []}), "unknown op")
    assert len(message) < 120


MUTANTS = [
    None,
    True,
    False,
    0,
    -1,
    2**64,
    -(2**70),
    1.5,
    -0.0,
    1e308,
    "",
    "nan",
    "x" * 50,
    "1/0",
    [],
    {},
    [None],
    {"col": "age"},
    {"op": "+", "args": []},
    {"lit": "x", "type": "Int64"},
]


def mutate(data: Any, rng: random.Random) -> Any:
    """One random change somewhere in ``data``: drop, replace, nest, grow or retype a value."""
    paths: list[tuple[Any, Any]] = []
    stack = [data]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node))
        for key in keys:
            paths.append((node, key))
            if isinstance(node[key], dict | list):
                stack.append(node[key])
    if not paths:
        return rng.choice(MUTANTS)
    parent, key = rng.choice(paths)
    action = rng.randrange(7)
    if action == 0 and isinstance(parent, dict):
        del parent[key]
    elif action == 1:
        parent[key] = [parent[key]] * rng.choice([2, 3])
    elif action == 2:
        parent[key] = nested(rng.choice([5, MAX_DEPTH + 3, 500]))
    elif action == 3 and isinstance(parent[key], str):
        parent[key] = "".join(rng.choice("aZ_ {}[]()0./\\'\"é") for _ in range(rng.randrange(60)))
    elif action == 4 and isinstance(parent, dict):
        parent[rng.choice(["op", "fn", "lit", "type", "col", "kind", "extra"])] = parent[key]
    elif action == 5 and isinstance(parent[key], int):
        parent[key] = rng.choice([2**63, -(2**63) - 1, 10**400, 0, True])
    else:
        parent[key] = copy.deepcopy(rng.choice(MUTANTS))
    return data


def test_fuzzed_requests_only_decode_or_raise_privframe_errors() -> None:
    sess = session()
    valid = valid_requests(sess)
    for data in valid:
        decode_request(copy.deepcopy(data), sess)  # the seeds are valid
    rng = random.Random(19)
    outcomes = {"decoded": 0, "refused": 0}
    for _ in range(2_000):
        data = copy.deepcopy(rng.choice(valid))
        for _ in range(rng.choice([1, 1, 2, 3])):
            data = mutate(data, rng)
        try:
            decode_request(data, sess)
        except PrivframeError:
            outcomes["refused"] += 1
        else:
            outcomes["decoded"] += 1
    assert outcomes["refused"] > 1_000
    assert outcomes["decoded"] > 10
    assert sess.spent.rho == 0
