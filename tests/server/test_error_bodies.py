"""Every refusal of the real server is ``{"error": {"type", "message"}}`` and repeats no input.

Unknown routes (a path traversal among them), wrong methods, invalid query
parameters and bodies, a bad token and a dataset not granted go to a
``privframe serve`` process, each carrying a planted value in its path, query,
header or body; the answer must be JSON of the documented shape, with its
status, and must not contain the planted value. A failure outside a route's
work (a 500) is checked in process, where a route can be made to fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from server_setup import DATASET, ServerProcess, add_analyst, write_config

from privframe.api.server.app import create_app
from privframe.api.server.config import load_config
from privframe.api.wire import WIRE_VERSION

PLANTED = "planted7361"

# (method, path after the server's address, body or None, whether the token is sent, status)
REFUSED: list[tuple[str, str, Any, bool, int]] = [
    ("GET", f"/v1/datasets/{DATASET}/rows", None, True, 404),
    ("GET", f"/v1/datasets/{DATASET}/{PLANTED}", None, True, 404),
    ("GET", f"/v1/datasets/..%2F{PLANTED}", None, True, 404),
    ("GET", f"/v1/datasets/..%2F..%2F{PLANTED}/budget", None, True, 404),
    ("GET", f"/v1/{PLANTED}", None, False, 404),
    ("GET", f"/{PLANTED}", None, False, 404),
    ("GET", f"/v1/datasets/{PLANTED}", None, True, 404),  # a route, but no such grant
    ("DELETE", f"/v1/datasets/{DATASET}", None, True, 405),
    ("PUT", f"/v1/datasets/{DATASET}/release", {"planted": PLANTED}, True, 405),
    ("GET", f"/v1/datasets/{DATASET}/release?q={PLANTED}", None, True, 405),
    ("POST", "/v1/health", None, False, 405),
    ("GET", f"/v1/datasets/{DATASET}/budget?entries={PLANTED}", None, True, 400),
    (
        "POST",
        f"/v1/datasets/{DATASET}/release",
        {"version": WIRE_VERSION, "requests": [{}], PLANTED: 1},
        True,
        400,
    ),
    ("POST", f"/v1/datasets/{DATASET}/release", {"version": PLANTED, "requests": []}, True, 400),
    ("POST", f"/v1/datasets/{DATASET}/release", [PLANTED], True, 400),
    ("POST", f"/v1/datasets/{DATASET}/release", f"{{{PLANTED}", True, 400),
    (
        "POST",
        f"/v1/datasets/{DATASET}/check",
        {"version": WIRE_VERSION, "plan": PLANTED},
        True,
        400,
    ),
    ("POST", f"/v1/datasets/{DATASET}/release", {"requests": [PLANTED]}, False, 401),
]


def _assert_documented(answer: httpx.Response, status: int) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] in {"ServerError", "InvalidArgumentError"}
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    assert PLANTED not in answer.text


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Any:
    config = write_config(tmp_path_factory.mktemp("refusals"))
    token = add_analyst(load_config(config).database, "alice", 1.0)
    with ServerProcess(config) as server:
        yield server, token


@pytest.mark.parametrize(
    ("method", "path", "body", "with_token", "status"),
    REFUSED,
    ids=[f"{method} {path.split('?')[0]} {status}" for method, path, _, _, status in REFUSED],
)
def test_each_refusal_has_the_documented_shape_and_repeats_no_input(
    running: tuple[ServerProcess, str],
    method: str,
    path: str,
    body: Any,
    with_token: bool,
    status: int,
) -> None:
    server, token = running
    headers = {"Content-Type": "application/json", "X-Planted": PLANTED}
    headers["Authorization"] = f"Bearer {token if with_token else PLANTED}"
    content = body if isinstance(body, str) else None if body is None else json.dumps(body)
    # The path goes as written: httpx would otherwise normalize the traversal away.
    url = httpx.URL(server.url).copy_with(raw_path=path.encode())
    answer = httpx.request(method, url, content=content, headers=headers, timeout=60)
    _assert_documented(answer, status)


def test_a_405_keeps_the_allowed_methods(running: tuple[ServerProcess, str]) -> None:
    server, _ = running
    answer = httpx.delete(f"{server.url}/v1/health", timeout=60)
    _assert_documented(answer, 405)
    assert answer.headers["allow"] == "GET"


def test_a_failure_outside_a_routes_work_is_a_500_of_the_documented_shape(
    tmp_path: Path,
) -> None:
    app = create_app(load_config(write_config(tmp_path)))

    @app.get("/v1/failing")
    async def failing() -> None:
        raise RuntimeError(f"a bug whose message holds {PLANTED}")

    with TestClient(app, raise_server_exceptions=False) as http:
        answer = http.get("/v1/failing")
    assert answer.status_code == 500
    assert answer.json() == {"error": {"type": "ServerError", "message": "the server failed"}}
    assert PLANTED not in answer.text
