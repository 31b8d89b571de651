"""The dashboard's routes in process: each dataset's section, and the planner that spends nothing.

``GET /v1/datasets/NAME/dashboard`` answers the dataset's section (its budget
in the grant's unit, its releases escaped, the planner's form);
``POST /v1/datasets/NAME/plan`` answers the budget planner's HTML for an SQL
text, in the grant's unit, and refuses a bad text with the server's usual
JSON error. Neither changes the ledger or the dataset's pool.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from server_setup import DATASET, REGIONS, write_config

import privframe as pf
from privframe.api.client import RemoteSession
from privframe.api.server.app import create_app
from privframe.api.server.config import load_config
from privframe.api.server.store import Store

HOSTILE = "<img src=x onerror=alert(1)>"
SQL = "SELECT region, COUNT(*) AS n, AVG(amount) AS avg_amount FROM data GROUP BY region"


class Dashboard:
    """A server in process, its analysts' tokens, and their dashboards' routes."""

    def __init__(self, folder: Path) -> None:
        self.config = load_config(write_config(folder))
        self.http = TestClient(create_app(self.config))
        self.http.__enter__()

    def analyst(self, name: str, budget: pf.Budget) -> tuple[str, RemoteSession]:
        with Store(self.config.database) as store:
            token = store.add_analyst(name)
            store.grant(name, DATASET, budget)
        remote = RemoteSession(
            "http://testserver", DATASET, token, results="polars", client=self.http
        )
        return token, remote

    def section(self, token: str) -> httpx.Response:
        return self.http.get(f"/v1/datasets/{DATASET}/dashboard", headers=_auth(token))

    def plan(self, token: str, body: Any, dataset: str = DATASET) -> httpx.Response:
        return self.http.post(f"/v1/datasets/{dataset}/plan", json=body, headers=_auth(token))

    def spent(self, token: str) -> Any:
        """The analyst's report and ledger, and the pool all analysts spend from."""
        budget = self.http.get(f"/v1/datasets/{DATASET}/budget", headers=_auth(token)).json()
        with Store(self.config.database) as store:
            return budget, store.pool_spent(DATASET)

    def close(self) -> None:
        self.http.__exit__(None, None, None)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    served = Dashboard(tmp_path)
    yield served
    served.close()


def _release(remote: RemoteSession, label: str) -> None:
    query = remote.query().bound(max_groups=3, max_rows_per_group=5)
    by_region = query.group_by("region", keys=REGIONS).agg(pf.count())
    if remote.budget_kind is pf.zCDP:
        by_region.release(rho=0.25, label=label)
    else:
        by_region.release(epsilon=0.25, label=label)


def test_the_section_names_the_dataset_and_escapes_what_the_analyst_wrote(
    dashboard: Dashboard,
) -> None:
    token, remote = dashboard.analyst("alice", pf.zCDP(1.0))
    _release(remote, HOSTILE)
    _release(remote, "")
    answer = dashboard.section(token)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    page = answer.text
    assert page.startswith(f'<section class="pf-dataset" data-name="{DATASET}"><h2>{DATASET}</h2>')
    assert "privframe session" not in page
    assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert ">(no label)</td>" in page
    assert '<strong class="pf-big">0.5</strong> ρ remaining of 1' in page
    assert "count ± " in page  # what each release bought, with its 95% ±
    assert page.count('class="pf-line"') == 1
    # The planner offers a tenth of what remains, in the grant's unit.
    assert (
        '<input name="rho" type="number" min="0" step="any" required="required" value="0.05"/>'
        in (page)
    )


@pytest.mark.parametrize(
    ("budget", "parameter"),
    [(pf.zCDP(1.0), "rho"), (pf.PureDP(1.0), "epsilon"), (pf.ApproxDP(1.0, 1e-6), "epsilon")],
    ids=["zcdp", "pure", "approx"],
)
def test_the_planner_answers_in_the_grants_unit_and_spends_nothing(
    dashboard: Dashboard, budget: pf.Budget, parameter: str
) -> None:
    token, remote = dashboard.analyst("alice", budget)
    _release(remote, "before")
    before = dashboard.spent(token)
    answer = dashboard.plan(token, {"sql": SQL, parameter: 0.1})
    assert answer.status_code == 200, answer.text
    page = answer.json()["html"]
    assert page.startswith('<div class="privframe pf-plan">')
    assert f"{parameter} = 0.1 in all" in page
    assert "nothing is spent" in page
    for output in ("n", "avg_amount"):
        assert re.search(rf"<td>{output}</td><td>[^<]*±", page)
    assert 'class="pf-line"' in page  # the widths against the total budget
    assert dashboard.spent(token) == before


def test_the_planner_escapes_a_hostile_output_name(dashboard: Dashboard) -> None:
    token, _ = dashboard.analyst("alice", pf.zCDP(1.0))
    sql = f'SELECT COUNT(*) AS "{HOSTILE}" FROM data'
    page = dashboard.plan(token, {"sql": sql, "rho": 0.1}).json()["html"]
    assert "<img" not in page
    assert "<td>&lt;img src=x onerror=alert(1)&gt;</td>" in page


def test_a_bad_sql_text_is_the_usual_json_error_and_charges_nothing(
    dashboard: Dashboard,
) -> None:
    token, remote = dashboard.analyst("alice", pf.zCDP(1.0))
    _release(remote, "before")
    before = dashboard.spent(token)
    answer = dashboard.plan(token, {"sql": "SELECT COUNT(*) AS n FROM data WHERE", "rho": 0.1})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "SQLError"
    assert {"message", "construct", "position"} <= set(error)
    assert dashboard.spent(token) == before


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        ({"sql": SQL, "epsilon": 0.1}, 400, "InvalidArgumentError"),  # a zCDP grant spends rho
        ({"sql": SQL, "rho": 0}, 400, "InvalidBudgetError"),
        ({"sql": SQL, "rho": "0.1"}, 400, "InvalidArgumentError"),
        ({"rho": 0.1}, 400, "InvalidArgumentError"),
        ({"sql": SQL, "rho": 0.1, "version": 1}, 400, "InvalidArgumentError"),
        ([SQL], 400, "InvalidArgumentError"),
    ],
    ids=["other-unit", "zero", "text-budget", "no-sql", "extra-field", "not-an-object"],
)
def test_the_planner_refuses_a_bad_body_and_charges_nothing(
    dashboard: Dashboard, body: Any, status: int, kind: str
) -> None:
    token, _ = dashboard.analyst("alice", pf.zCDP(1.0))
    before = dashboard.spent(token)
    answer = dashboard.plan(token, body)
    assert answer.status_code == status
    assert answer.json()["error"]["type"] == kind
    assert dashboard.spent(token) == before


def test_the_dashboards_routes_need_a_token_and_a_grant(dashboard: Dashboard) -> None:
    token, _ = dashboard.analyst("alice", pf.zCDP(1.0))
    assert dashboard.section("pf_wrong").status_code == 401
    assert dashboard.plan("pf_wrong", {"sql": SQL, "rho": 0.1}).status_code == 401
    assert dashboard.plan(token, {"sql": SQL, "rho": 0.1}, "elsewhere").status_code == 404


def test_the_page_fits_a_phone_and_loads_nothing_from_outside(dashboard: Dashboard) -> None:
    page = dashboard.http.get("/dashboard")
    script = dashboard.http.get("/dashboard.js").text
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page.text
    assert "://" not in page.text
    assert "://" not in script
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self';" in policy
