"""500 hostile requests against the real server: only 4xx answers, no charge, no data value.

The requests are built from valid ones (the README query's release and plan)
by a fixed-seed generator: each mutation makes a request invalid (an unknown
key, op or type, a value of the wrong JSON type, a number out of range, deep
nesting, an oversized or truncated body, a wrong version, a bad token, a
wrong method or route). The analyst's budget is too small for any release,
so that even a mutation the server could accept would be refused (409) and
charge nothing. The data holds a planted value that no answer may contain.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)
from server_setup import (
    DATASET,
    REGIONS,
    ServerProcess,
    add_analyst,
    json_paths,
    json_set,
    write_config,
    write_data,
)

import privframe as pf
from privframe.api.client import RemoteSession
from privframe.api.server.config import load_config
from privframe.api.server.store import Store
from privframe.api.wire import WIRE_VERSION, encode_plan, encode_request

SEED = 20261203
N_REQUESTS = 500
PLANTED = 918273.645  # an amount in one row of the data: no answer may show it


def _plant(folder: Path) -> None:
    path = write_data(folder)
    frame = pl.read_parquet(path)
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 17)
        .then(PLANTED)
        .otherwise(pl.col("amount"))
        .alias("amount")
    )
    frame.write_parquet(path)


def _bodies(url: str, token: str) -> dict[str, Any]:
    sess = RemoteSession(url, DATASET, token, results="polars")
    query = (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=5)
        .group_by("region", keys=REGIONS)
        .agg(pf.count(), pf.mean("amount", bounds=(0, 1000)).alias("avg_amount"))
    )
    request = encode_request(query.request(0.1, label="fuzz"))
    sess.close()
    return {
        "release": {"version": WIRE_VERSION, "requests": [request]},
        "check": {"version": WIRE_VERSION, "plan": encode_plan(query.plan), "with_error": False},
    }


_OTHER_TYPE: dict[type, list[Any]] = {
    str: [12, None, [], {}, True, 1.5],
    int: ["12", None, [], {}, True, 10**400],
    float: ["0.1", None, [], {}, False],
    bool: [1, 0, "true", None, []],
    list: ["a", 3, {}, None],
    dict: ["a", 3, [], None],
    type(None): [{"x": 1}, [1], "none"],
}


def _mutations(rng: random.Random, bodies: dict[str, Any]) -> Callable[[], tuple[str, Any]]:
    """A generator of one hostile (route kind, body) pair per call."""

    def wrong_type() -> tuple[str, Any]:
        kind = "release"  # a mutation that stays valid is refused for its cost (409)
        body = copy.deepcopy(bodies[kind])
        path = rng.choice(json_paths(body)[1:])
        target = body
        for part in path:
            target = target[part]
        return kind, json_set(body, path, rng.choice(_OTHER_TYPE[type(target)]))

    def unknown_key() -> tuple[str, Any]:
        kind = "release"  # a mutation that stays valid is refused for its cost (409)
        body = copy.deepcopy(bodies[kind])
        dicts = [p for p in json_paths(body) if isinstance(_get(body, p), dict)]
        _get(body, rng.choice(dicts))[f"zz_{rng.randrange(10**6)}"] = rng.choice([1, "op", {}])
        return kind, body

    def dropped_key() -> tuple[str, Any]:
        kind = "release"  # a mutation that stays valid is refused for its cost (409)
        body = copy.deepcopy(bodies[kind])
        dicts = [p for p in json_paths(body) if isinstance(_get(body, p), dict) and _get(body, p)]
        parent = _get(body, rng.choice(dicts))
        parent.pop(rng.choice(sorted(parent)))
        return kind, body

    def unknown_string() -> tuple[str, Any]:
        kind = "release"  # a mutation that stays valid is refused for its cost (409)
        body = copy.deepcopy(bodies[kind])
        strings = [
            p for p in json_paths(body) if isinstance(_get(body, p), str) and p[-1] != "label"
        ]
        return kind, json_set(
            body, rng.choice(strings), rng.choice(["Foo", "__class__", "", "x" * 9000])
        )

    def deep() -> tuple[str, Any]:
        depth = rng.choice([40, 200, 5000, 100_000])
        return rng.choice(["release", "check"]), "[" * depth + "]" * depth

    def deep_expression() -> tuple[str, Any]:
        body = copy.deepcopy(bodies["check"])
        node: Any = {"col": "age"}
        for _ in range(rng.choice([40, 200])):
            node = {"fn": "abs", "args": [node]}
        body["plan"]["steps"] = [{"kind": "filter", "exprs": [node]}]
        return "check", body

    def huge_number() -> tuple[str, Any]:
        body = copy.deepcopy(bodies["release"])
        body["requests"][0]["rho"] = rng.choice(["1" * 5000 + "/3", "-1/2", "0", "1/0", "nan"])
        return "release", body

    def wrong_version() -> tuple[str, Any]:
        body = copy.deepcopy(bodies[rng.choice(["release", "check"])])
        body["version"] = rng.choice([0, 2, 999, -1])
        return ("release" if "requests" in body else "check"), body

    def garbage() -> tuple[str, Any]:
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        return rng.choice(["release", "check", "explain"]), raw

    def truncated() -> tuple[str, Any]:
        text = json.dumps(bodies["release"])
        return "release", text[: rng.randrange(1, len(text) - 1)]

    def control_text() -> tuple[str, Any]:
        body = copy.deepcopy(bodies["release"])
        body["requests"][0]["label"] = rng.choice(["x\x00y", "\x00", "a\udc80b"])
        return "release", body

    def oversized() -> tuple[str, Any]:
        body = copy.deepcopy(bodies["release"])
        body["requests"][0]["label"] = "x" * 2_000_000
        return "release", body

    def many_requests() -> tuple[str, Any]:
        body = copy.deepcopy(bodies["release"])
        body["requests"] = body["requests"] * 1000
        return "release", body

    kinds = [
        wrong_type,
        unknown_key,
        dropped_key,
        unknown_string,
        deep,
        deep_expression,
        huge_number,
        wrong_version,
        garbage,
        truncated,
        control_text,
        oversized,
        many_requests,
    ]
    return lambda: rng.choice(kinds)()


def _get(body: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        body = body[part]
    return body


def _shown(text: str) -> str:
    """An answer's text with any released tables (base64 Arrow) decoded into it."""
    try:
        answer = json.loads(text)
    except ValueError:
        return text
    tables = answer.get("tables", []) if isinstance(answer, dict) else []
    decoded = [pl.read_ipc_stream(io.BytesIO(base64.b64decode(t))) for t in tables]
    return text + "".join(str(frame.to_dicts()) for frame in decoded)


@pytest.mark.slow
def test_five_hundred_hostile_requests_get_4xx_and_charge_nothing(
    tmp_path: Path,
    database_url: str,  # noqa: F811  (a fixture: SQLite, then PostgreSQL)
) -> None:
    _plant(tmp_path)
    config = write_config(tmp_path, max_body_bytes=1 << 20, database=database_url)
    database = load_config(config).database
    token = add_analyst(database, "mallory", 1e-9)
    rng = random.Random(SEED)
    answers: list[tuple[int, str]] = []
    with ServerProcess(config) as server:
        bodies = _bodies(server.url, token)
        hostile = _mutations(rng, bodies)
        base = f"{server.url}/v1/datasets/{DATASET}"
        with httpx.Client(timeout=120) as http:
            for i in range(N_REQUESTS):
                headers = {"Authorization": f"Bearer {token}"}
                if i % 25 == 0:  # the routes themselves: a bad token, method or dataset
                    route = rng.choice(
                        [
                            ("POST", f"{base}/release", {"Authorization": "Bearer pf_x_y"}),
                            ("GET", f"{base}/release", headers),
                            ("POST", f"{server.url}/v1/datasets/..%2F..%2Fetc/release", headers),
                            ("DELETE", f"{base}", headers),
                            ("POST", f"{base}/release", {}),
                        ]
                    )
                    method, url, headers = route
                    answer = http.request(method, url, headers=headers, json=bodies["release"])
                else:
                    kind, body = hostile()
                    content = (
                        body
                        if isinstance(body, bytes)
                        else body.encode()
                        if isinstance(body, str)
                        else json.dumps(body).encode()
                    )
                    answer = http.post(
                        f"{base}/{kind}",
                        content=content,
                        headers={**headers, "Content-Type": "application/json"},
                    )
                answers.append((answer.status_code, _shown(answer.text)))
        assert httpx.get(f"{server.url}/v1/health").status_code == 200
    statuses = sorted({status for status, _ in answers})
    assert all(400 <= status < 500 for status in statuses), statuses
    assert not any(str(PLANTED) in text or "918273" in text for _, text in answers)
    store = Store(database)
    assert store.pool_spent(DATASET) == pf.zCDP(0)
    assert len(store.ledger("mallory", DATASET).entries) == 0
    audited = [r for r in store.audit_records(limit=10_000) if r.action != "describe"]
    store.close()
    assert len(audited) >= N_REQUESTS - 5 * (N_REQUESTS // 25)  # unknown routes skip the log
    assert all(400 <= r.status < 500 for r in audited)
