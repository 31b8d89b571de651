"""Marginals and synthetic tables through the server: the local calls, charged to the grant.

The app runs in-process (FastAPI's TestClient) with a seeded noise source on
both sides, as in tests/server/test_remote_session.py, so a remote call and a
local one on the same data give the same tables exactly. The server's
dataset publishes ``region``'s keys; ``age`` is binned by the analyst.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest
from fastapi.testclient import TestClient
from polars.testing import assert_frame_equal
from server_setup import DATASET, REGIONS, json_paths, json_set, write_config

import privframe as pf
from privframe.api.client import RemoteSession
from privframe.api.server.app import create_app
from privframe.api.server.config import load_config
from privframe.api.server.store import Store
from privframe.api.wire import WIRE_VERSION, decode_released, encode_marginals
from privframe.errors import BudgetExceededError, InvalidArgumentError, InvalidValueError
from privframe.mechanisms.randomness import SeededRandomness

SEED = 5
# Both sides draw from the same seeded stream so that their tables can be compared exactly.
pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

AGES = pf.bin("age", [0, 30, 60, 120])
SETS = [("region", "age"), "age"]
MAX_ROWS = 5
GRANT = pf.zCDP(1.0)


class Served:
    def __init__(self, folder: Path) -> None:
        self.config = load_config(write_config(folder))
        self.http = TestClient(create_app(self.config, rng=SeededRandomness(SEED)))
        self.http.__enter__()
        self.tokens: dict[str, str] = {}

    def token(self, name: str, budget: pf.zCDP | pf.PureDP | None) -> str:
        """A new analyst, granted ``budget`` on the dataset (None: no grant)."""
        with Store(self.config.database) as store:
            self.tokens[name] = store.add_analyst(name)
            if budget is not None:
                store.grant(name, DATASET, budget)
        return self.tokens[name]

    def analyst(self, name: str, budget: pf.zCDP | pf.PureDP = GRANT) -> RemoteSession:
        token = self.token(name, budget)
        return RemoteSession(
            "http://testserver", DATASET, token, results="polars", client=self.http
        )

    def local(self, budget: pf.zCDP | pf.PureDP = GRANT) -> pf.Session:
        return pf.Session(
            pl.read_parquet(self.config.datasets[DATASET].data),
            "user_id",
            budget,
            rng=SeededRandomness(SEED),
            metadata={"amount": pf.Column(bounds=(0, 1000)), "region": pf.Column(keys=REGIONS)},
            contributions=pf.Bound(max_groups=3, max_rows_per_group=5),
        )

    def post(self, route: str, body: Any, name: str = "alice") -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[name]}"}
        return self.http.post(f"/v1/datasets/{DATASET}/{route}", json=body, headers=headers)

    def audited(self, action: str) -> list[tuple[int, str]]:
        with Store(self.config.database) as store:
            return [(r.status, r.detail) for r in store.audit_records() if r.action == action]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path)
    yield server
    server.http.__exit__(None, None, None)


def test_remote_marginals_are_the_local_ones_and_charge_rho_once(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()
    got = remote.marginals(SETS, rho=0.5, domains={"age": AGES}, max_rows=MAX_ROWS, label="m")
    want = local.marginals(SETS, rho=0.5, domains={"age": AGES}, max_rows=MAX_ROWS, label="m")
    assert list(got) == list(want) == [("region", "age"), ("age",)]
    for columns in want:
        assert_frame_equal(got[columns], want[columns])
    # region's domain is the dataset's published keys, age's the analyst's bins
    assert got[("region", "age")].height == len(REGIONS) * len(AGES.keys)
    assert [(e.label, e.exact_rho) for e in remote.ledger] == [("m", Fraction(1, 2))]
    assert remote.spent == local.spent == pf.zCDP(0.5)
    assert served.audited("marginals") == [(200, "rho=1/2")]


def test_marginals_come_back_as_pandas_when_asked(served: Served) -> None:
    token = served.token("alice", GRANT)
    remote = RemoteSession("http://testserver", DATASET, token, client=served.http)
    tables = remote.marginals(["region"], rho=0.1, max_rows=MAX_ROWS)
    assert isinstance(tables[("region",)], pd.DataFrame)
    assert tables[("region",)]["region"].tolist() == REGIONS


def test_a_pure_dp_grant_spends_epsilon_on_marginals(served: Served) -> None:
    remote, local = served.analyst("bob", pf.PureDP(1.0)), served.local(pf.PureDP(1.0))
    got = remote.marginals(["region"], epsilon=0.25, max_rows=MAX_ROWS)
    want = local.marginals(["region"], epsilon=0.25, max_rows=MAX_ROWS)
    assert_frame_equal(got[("region",)], want[("region",)])
    assert [e.exact_rho for e in remote.ledger] == [Fraction(1, 4)]  # ε, in a pure-DP ledger
    assert served.audited("marginals") == [(200, "epsilon=1/4")]


def test_a_pure_dp_grant_spends_epsilon_on_a_synthetic_table(served: Served) -> None:
    remote = served.analyst("bob", pf.PureDP(1.0))
    table = remote.synthesize(
        epsilon=0.5,
        method="mst",
        columns=["region", "age"],
        domains={"age": AGES},
        max_rows=MAX_ROWS,
        rows=40,
    )
    assert table.height == 40
    assert [e.exact_rho for e in remote.ledger] == [Fraction(1, 2)]  # ε, in a pure-DP ledger
    assert served.audited("synthesize") == [(200, "epsilon=1/2")]


def test_explaining_spends_nothing_and_is_the_local_explanation(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()
    asked = {"domains": {"age": AGES}, "max_rows": MAX_ROWS}
    got = remote.explain_marginals(SETS, rho=0.5, **asked)
    want = local.explain_marginals(SETS, rho=0.5, **asked)
    assert (got.cost, got.lines) == (want.cost, want.lines)
    assert str(got) == str(want)
    got = remote.explain_synthesis(rho=0.5, method="mst", columns=["region", "age"], **asked)
    want = local.explain_synthesis(rho=0.5, method="mst", columns=["region", "age"], **asked)
    assert (got.cost, got.lines) == (want.cost, want.lines)
    assert remote.spent == pf.zCDP(0)
    assert remote.ledger == ()
    assert served.audited("marginals") == served.audited("synthesize") == [(200, "explain")]


def test_a_call_over_the_grant_is_refused_and_charges_nothing(served: Served) -> None:
    remote = served.analyst("alice", pf.zCDP(0.25))
    with pytest.raises(BudgetExceededError):
        remote.marginals(SETS, rho=0.5, domains={"age": AGES}, max_rows=MAX_ROWS)
    with pytest.raises(BudgetExceededError):
        remote.synthesize(rho=0.5, columns=["region"], max_rows=MAX_ROWS)
    assert remote.spent == pf.zCDP(0)
    assert remote.ledger == ()
    refused = (409, "rho=1/2; BudgetExceededError")
    assert served.audited("marginals") == served.audited("synthesize") == [refused]


def test_the_servers_refusal_of_a_call_is_the_local_one(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()
    # age has no published keys, and none are given
    with pytest.raises(InvalidValueError) as remote_error:
        remote.marginals(["age"], rho=0.1, max_rows=MAX_ROWS)
    with pytest.raises(InvalidValueError) as local_error:
        local.marginals(["age"], rho=0.1, max_rows=MAX_ROWS)
    assert str(remote_error.value) == str(local_error.value)
    assert "'age'" in str(remote_error.value)
    assert remote.spent == pf.zCDP(0)


@pytest.mark.parametrize(
    ("domains", "field"),
    [
        ({"age": {"bins": [60, 30]}}, "marginals.domains.age"),
        ({"age": {"bins": [0, 60], "labels": ["a", "b"]}}, "marginals.domains.age"),
        ({"age": {"edges": [0, 60]}}, "marginals.domains.age"),
        ({"age": [True, False]}, "marginals.domains.age"),
        ({"age": [2**70]}, "marginals.domains.age[0]"),
        (["age"], "marginals.domains"),
    ],
)
def test_malformed_domains_are_refused_naming_the_field(
    served: Served, domains: Any, field: str
) -> None:
    served.token("alice", GRANT)
    call = {"columns": [["age"]], "rho": "1/10", "domains": domains, "max_rows": MAX_ROWS}
    answer = served.post("marginals", {"version": WIRE_VERSION, "marginals": call})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "InvalidArgumentError"
    assert error["message"].startswith(f"{field}:") or error["message"].startswith(f"{field} ")
    with Store(served.config.database) as store:
        assert store.audit_records()[-1].detail == "WireError"  # refused before it asked


def test_a_domain_with_no_wire_form_is_refused_before_sending(served: Served) -> None:
    remote = served.analyst("alice")
    with pytest.raises(InvalidArgumentError, match=r"^marginals\.domains\.age"):
        remote.marginals(["age"], rho=0.1, domains={"age": [object()]}, max_rows=MAX_ROWS)
    with pytest.raises(InvalidArgumentError, match=r"^marginals\.domains\.age: the bin is of"):
        remote.marginals(["age"], rho=0.1, domains={"age": pf.bin("amount", [0, 1])})
    assert served.audited("marginals") == []


def test_a_body_the_route_does_not_take_is_refused(served: Served) -> None:
    served.token("alice", GRANT)
    call = encode_marginals(["region"], 0.1, max_rows=MAX_ROWS, label="x")
    answer = served.post("marginals", {"version": WIRE_VERSION, "marginals": call, "explain": True})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "marginals: unknown key 'label'"
    answer = served.post("synthesize", {"version": WIRE_VERSION, "marginals": call})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "the request body's synthesize: Field required"


def test_an_analyst_without_a_grant_is_refused_and_nothing_is_charged(served: Served) -> None:
    alice = served.analyst("alice")
    served.token("mallory", None)
    call = encode_marginals(["region"], 0.1, max_rows=MAX_ROWS, label="x")
    for route in ("marginals", "synthesize"):
        body = {"version": WIRE_VERSION, route: call}
        answer = served.post(route, body, name="mallory")
        assert answer.status_code == 404
        assert answer.json()["error"]["type"] == "ServerError"
    assert alice.ledger == ()
    assert served.audited("marginals")[0][0] == served.audited("synthesize")[0][0] == 404


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_a_remote_synthetic_table_is_the_local_one_and_charges_rho_once(
    served: Served, method: str
) -> None:
    remote, local = served.analyst("alice"), served.local()
    asked: dict[str, Any] = {
        "method": method,
        "columns": ["region", "age"],
        "rows": 300,
        "domains": {"age": AGES},
        "max_rows": MAX_ROWS,
        "label": "synthetic",
    }
    got, want = remote.synthesize(rho=0.5, **asked), local.synthesize(rho=0.5, **asked)
    assert got.columns == ["region", "age"]
    assert got.height == 300
    assert set(got["region"]) <= set(REGIONS)
    assert set(got["age"]) <= set(AGES.keys)
    assert_frame_equal(got, want)
    assert [(e.label, e.exact_rho) for e in remote.ledger] == [("synthetic", Fraction(1, 2))]
    assert served.audited("synthesize") == [(200, "rho=1/2")]


def test_the_answer_holds_the_tables_and_the_cost_charged(served: Served) -> None:
    served.token("alice", GRANT)
    call = encode_marginals([["region"]], 0.1, max_rows=MAX_ROWS, label="raw")
    answer = served.post("marginals", {"version": WIRE_VERSION, "marginals": call})
    assert answer.status_code == 200
    body = answer.json()
    assert body["cost"] == {"rho": "1/10", "delta": "0"}
    assert [t["columns"] for t in body["tables"]] == [["region"]]
    assert decode_released(body["tables"][0]["table"])["region"].to_list() == REGIONS


def test_a_value_of_another_json_type_anywhere_is_refused_and_charges_nothing(
    served: Served,
) -> None:
    alice = served.analyst("alice", pf.zCDP(0.01))  # a call the server would accept is a 409
    calls = {
        "marginals": encode_marginals(
            [("region", "age")], 0.5, domains={"age": AGES}, max_rows=MAX_ROWS, label="m"
        ),
        "synthesize": {
            "rho": "1/2",
            "method": "mst",
            "columns": ["region", "age"],
            "rows": 10,
            "domains": {"age": {"bins": [0, 30, 120]}},
            "max_rows": MAX_ROWS,
            "label": "s",
        },
    }
    statuses = set()
    for route, call in calls.items():
        for path in json_paths(call):
            for value in (None, True, 2**70, "", {}):
                body = {"version": WIRE_VERSION, route: json_set(copy.deepcopy(call), path, value)}
                answer = served.post(route, body)
                statuses.add(answer.status_code)
                assert answer.status_code in (400, 409), (route, path, value, answer.json())
    assert statuses == {400, 409}
    assert alice.ledger == ()
