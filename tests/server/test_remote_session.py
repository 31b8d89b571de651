"""A RemoteSession is the same API as a local Session: same plans, same results, own budget.

The app runs in-process (FastAPI's TestClient) with a seeded noise source on
both sides, so a remote release and a local one of the same query on the
same data must give the same table exactly; tests/server/test_server_process.py
runs the real server process with the OS CSPRNG.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
from fastapi.testclient import TestClient
from polars.testing import assert_frame_equal
from server_setup import DATASET, REGIONS, add_analyst, write_config

import privframe as pf
from privframe.api.client import RemoteSession
from privframe.api.query import Query
from privframe.api.server import admin
from privframe.api.server.app import create_app, public_error
from privframe.api.server.config import load_config
from privframe.api.server.store import Store
from privframe.api.wire import encode_plan
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    ServerError,
)
from privframe.mechanisms.randomness import SeededRandomness
from privframe.plan.ir import Plan

SEED = 11
# Both sides draw from the same seeded stream so that their tables can be compared exactly.
pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


class Served:
    def __init__(self, folder: Path) -> None:
        self.config = load_config(write_config(folder))
        self.app = create_app(self.config, rng=SeededRandomness(SEED))
        self.http = TestClient(self.app)
        self.http.__enter__()
        self.database = self.config.database
        self.tokens: dict[str, str] = {}

    def analyst(self, name: str, rho: float = 1.0) -> RemoteSession:
        self.tokens[name] = add_analyst(self.database, name, rho)
        return self.connect(name)

    def connect(self, name: str, results: str = "polars") -> RemoteSession:
        return RemoteSession(
            "http://testserver", DATASET, self.tokens[name], results=results, client=self.http
        )

    def local(self, rho: float = 1.0) -> pf.Session:
        dataset = self.config.datasets[DATASET]
        return pf.Session(
            pl.read_parquet(dataset.data),
            "user_id",
            pf.zCDP(rho),
            rng=SeededRandomness(SEED),
            metadata={"amount": pf.Column(bounds=(0, 1000)), "region": pf.Column(keys=REGIONS)},
            contributions=pf.Bound(max_groups=3, max_rows_per_group=5),
        )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path)
    yield server
    server.http.__exit__(None, None, None)


def readme_query(sess: pf.Session | RemoteSession) -> Query:
    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=5)
        .group_by("region", keys=REGIONS)
        .agg(
            pf.count(),
            pf.sum("amount", bounds=(0, 1000)),
            pf.mean("amount", bounds=(0, 1000)).alias("avg_amount"),
        )
    )


def test_the_readme_query_released_remotely_equals_the_local_release(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()
    got = readme_query(remote).release(rho=0.1, with_error=True)
    want = readme_query(local).release(rho=0.1, with_error=True)
    assert isinstance(got, pl.DataFrame)
    assert_frame_equal(got, want)
    assert remote.spent == local.spent == pf.zCDP(0.1)


def test_explain_remotely_is_the_local_explanation(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()
    assert str(readme_query(remote).explain(rho=0.1)) == str(readme_query(local).explain(rho=0.1))
    assert remote.spent == pf.zCDP(0)


def test_sql_released_remotely_equals_the_local_release(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()
    text = (
        "SELECT region, COUNT(*) AS n, AVG(amount) AS mean_amount FROM data "
        "WHERE age >= 18 GROUP BY region ORDER BY region LIMIT 3"
    )
    assert_frame_equal(remote.sql(text, rho=0.05), local.sql(text, rho=0.05))
    parsed = remote.sql(text)
    assert str(parsed.explain(rho=0.05)) == str(local.sql(text).explain(rho=0.05))


def test_a_query_with_options_runs_remotely_from_sql_as_it_runs_locally(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=1, delta=1e-6, max_groups_contributed=3) "
        "region, COUNT(*) AS n FROM data GROUP BY region ORDER BY region"
    )
    with pytest.raises(pf.SQLError, match="the budget is given twice"):
        remote.sql(text, rho=0.1)
    assert remote.ledger == ()
    got, want = remote.sql(text, with_error=True), local.sql(text, with_error=True)
    assert isinstance(got, pl.DataFrame)
    assert_frame_equal(got, want)
    assert remote.spent.exact_rho == local.spent.exact_rho
    assert remote.spent.exact_rho == pf.ApproxDP(1, Fraction(1, 10**6)).to_zcdp().exact_rho


def test_the_budget_views_are_the_analysts_own(served: Served) -> None:
    alice, bob = served.analyst("alice"), served.analyst("bob", rho=2.0)
    readme_query(alice).release(rho=0.25, label="first")
    alice.sql("SELECT COUNT(*) AS n FROM data", rho=0.125, label="second")
    assert [e.label for e in alice.ledger] == ["first", "second"]
    assert alice.spent == pf.zCDP(0.375)
    assert alice.remaining == pf.zCDP(0.625)
    assert bob.ledger == ()
    assert bob.remaining == pf.zCDP(2.0)
    report = alice.report()
    assert report.n_entries == 2
    assert report.budget == pf.zCDP(1.0)
    assert alice.guarantee() == pytest.approx(pf.zCDP(0.375).epsilon(report.delta))
    html = alice._repr_html_()
    assert "first" in html
    assert "second" in html


def test_results_come_back_as_pandas_when_asked(served: Served) -> None:
    served.analyst("alice")
    remote = served.connect("alice", results="pandas")
    result = readme_query(remote).release(rho=0.1)
    assert type(result).__name__ == "DataFrame"
    assert not isinstance(result, pl.DataFrame)
    assert list(result["region"]) == REGIONS


def test_a_release_over_the_budget_is_refused_and_charges_nothing(served: Served) -> None:
    alice = served.analyst("alice", rho=0.5)
    query = readme_query(alice)
    with pytest.raises(BudgetExceededError):
        query.release(rho=0.75)
    with pytest.raises(BudgetExceededError):
        alice.release_all([query.request(0.25), query.request(0.5)])
    assert alice.spent == pf.zCDP(0)
    assert alice.ledger == ()


def test_a_refused_plan_gives_the_local_error_and_charges_nothing(served: Served) -> None:
    alice = served.analyst("alice")
    with pytest.raises(pf.InvalidValueError, match="not in the data"):
        alice.query().agg(pf.sum("no_such_column", bounds=(0, 1))).release(rho=0.1)
    with pytest.raises(pf.SQLError) as err:
        alice.sql("SELECT COUNT(*) FROM data WINDOW w AS ()", rho=0.1)
    assert err.value.construct  # the SQL error's fields travel with it
    with pytest.raises(pf.InvalidValueError, match="NUL"):
        readme_query(alice).release(rho=0.1, label="x\x00y")  # PostgreSQL's text cannot hold it
    assert alice.spent == pf.zCDP(0)


def test_a_malformed_plan_is_refused_as_the_library_error_it_is(served: Served) -> None:
    served.analyst("alice")
    answer = served.http.post(
        f"/v1/datasets/{DATASET}/check",
        json={"version": 1, "plan": {"steps": [{"filter": [{"op": "Foo", "args": []}]}]}},
        headers={"Authorization": f"Bearer {served.tokens['alice']}"},
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "InvalidArgumentError"  # a WireError, named by its privframe base
    assert "unknown op 'Foo'" in error["message"]


def test_database_failures_are_not_described_to_clients() -> None:
    refusal = public_error(pf.LedgerError("server database 'postgresql://u@db:5432/x': refused"))
    assert refusal.status == 503
    assert refusal.kind == "LedgerError"
    assert "postgresql" not in refusal.message
    assert "busy or unavailable" in refusal.message


def test_plain_http_to_another_machine_is_refused_before_any_connection() -> None:
    with pytest.raises(InvalidArgumentError, match="plain HTTP to another machine"):
        pf.connect("http://dp.example.org:8765", DATASET, "pf_token")
    with pytest.raises(InvalidArgumentError, match="https://"):
        pf.connect("ftp://dp.example.org", DATASET, "pf_token")


def test_the_dataset_cap_stops_analysts_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config(write_config(tmp_path, cap=0.5))
    with TestClient(create_app(config, rng=SeededRandomness(SEED))) as http:
        sessions = []
        for name in ("alice", "bob"):
            token = add_analyst(config.database, name, 0.4)
            sessions.append(RemoteSession("http://testserver", DATASET, token, client=http))
        readme_query(sessions[0]).release(rho=0.3)
        with pytest.raises(BudgetExceededError):
            readme_query(sessions[1]).release(rho=0.3)  # within bob's 0.4, over the cap
        readme_query(sessions[1]).release(rho=0.2)
        assert [s.spent for s in sessions] == [pf.zCDP(0.3), pf.zCDP(0.2)]
    assert admin.main([str(config.path), "datasets"]) == 0
    assert capsys.readouterr().out == (
        f"{DATASET}: cap rho=0.5, delta=0; all analysts together spent rho=0.5, delta=0\n"
    )
    config.path.write_text(config.path.read_text().replace("rho = 0.5", "rho = 1.0"))
    assert admin.main([str(config.path), "datasets"]) == 0
    assert "(the configuration says rho=1, delta=0: privframe serve applies it at start)" in (
        capsys.readouterr().out
    )


def test_no_token_a_wrong_token_and_an_ungranted_dataset_are_refused(served: Served) -> None:
    served.analyst("alice")
    for token in ("", "pf_not_a_token", served.tokens["alice"] + "x"):
        with pytest.raises((ServerError, InvalidArgumentError)) as err:
            RemoteSession("http://testserver", DATASET, token or " ", client=served.http)
        if isinstance(err.value, ServerError):
            assert err.value.status == 401
    with pytest.raises(ServerError) as err:
        RemoteSession("http://testserver", "other", served.tokens["alice"], client=served.http)
    assert err.value.status == 404


def test_a_revoked_token_stops_working_at_once(served: Served) -> None:
    alice = served.analyst("alice")
    store = Store(served.database)
    store.revoke("alice")
    store.close()
    with pytest.raises(ServerError) as err:
        readme_query(alice).release(rho=0.1)
    assert err.value.status == 401


def test_a_budget_topped_up_by_the_admin_is_usable_at_once(served: Served) -> None:
    alice = served.analyst("alice", rho=0.25)
    readme_query(alice).release(rho=0.25)
    store = Store(served.database)
    store.top_up("alice", DATASET, pf.zCDP(0.5))
    store.close()
    readme_query(alice).release(rho=0.5)
    assert alice.spent == pf.zCDP(0.75)
    assert alice.remaining == pf.zCDP(0)


def test_every_request_and_refusal_is_audited_without_values(served: Served) -> None:
    alice = served.analyst("alice", rho=0.2)
    readme_query(alice).release(rho=0.1)
    with pytest.raises(BudgetExceededError):
        readme_query(alice).release(rho=0.5)
    store = Store(served.database)
    records = store.audit_records()
    store.close()
    releases = [r for r in records if r.action == "release"]
    assert [r.status for r in releases] == [200, 409]
    assert [r.detail for r in releases] == ["rho=1/10", "rho=1/2; BudgetExceededError"]
    assert all(r.analyst == "alice" and r.dataset == DATASET for r in releases)
    frame = pl.read_parquet(served.config.datasets[DATASET].data)
    values = {str(v) for v in frame["amount"].head(200)} | {
        str(v) for v in frame["user_id"].head(200)
    }
    text = " ".join(f"{r.action} {r.detail}" for r in records)
    assert not any(v in text for v in values if len(v) > 3)


@pytest.mark.parametrize(
    "tampering",
    [
        "UPDATE pf_ledgers SET spent_rho = '0', entries = 0",  # a spend forgotten
        "UPDATE pf_entries SET rho = '1/100'",  # an entry made cheaper
        "UPDATE pf_pools SET spent_rho = '0'",  # the cap's total rolled back
    ],
)
def test_a_database_changed_outside_privframe_is_not_served(
    served: Served, tmp_path: Path, tampering: str
) -> None:
    alice = served.analyst("alice")
    readme_query(alice).release(rho=0.25)
    assert admin.main([str(served.config.path), "verify"]) == 0
    connection = sqlite3.connect(served.database)
    with connection:
        connection.execute(tampering)
    connection.close()
    with pytest.raises(pf.LedgerError):
        create_app(served.config)
    assert admin.main([str(served.config.path), "verify"]) == 2


def test_the_published_facts_are_readable(served: Served) -> None:
    alice = served.analyst("alice")
    local = served.local()
    assert alice.columns == local.columns
    assert alice.schema == local.check(Plan())  # the whole public schema
    assert alice.metadata["amount"].bounds == (0, 1000)
    assert alice.spent == pf.zCDP(0)


def test_tune_remotely_chooses_what_local_tune_chooses_and_charges_rho_once(
    served: Served,
) -> None:
    remote, local = served.analyst("alice"), served.local()
    got = readme_query(remote).tune(0.1, plan_rho=0.5, label="limits")
    want = readme_query(local).tune(0.1, plan_rho=0.5, label="limits")
    assert got.query.session is remote
    assert encode_plan(got.query.plan) == encode_plan(want.query.plan)  # exprs compare by id
    assert (got.bound, got.bounds) == (want.bound, want.bounds)
    assert_frame_equal(got.table, want.table)
    assert (got.choice.error, got.choice.given_error) == (
        want.choice.error,
        want.choice.given_error,
    )
    assert got.choice.table == want.choice.table
    assert remote.spent == local.spent == pf.zCDP(0.1)
    assert [(e.label, e.exact_rho) for e in remote.ledger] == [("limits", Fraction(1, 10))]


def test_a_query_tuned_remotely_releases_as_the_locally_tuned_one(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()
    got = readme_query(remote).tune(0.1, plan_rho=0.5).query.release(rho=0.5)
    want = readme_query(local).tune(0.1, plan_rho=0.5).query.release(rho=0.5)
    assert_frame_equal(got, want)
    assert remote.spent == pf.zCDP(0.6)


def test_a_tune_table_comes_back_as_pandas_when_asked(served: Served) -> None:
    served.analyst("alice")
    tuned = readme_query(served.connect("alice", results="pandas")).tune(0.1, plan_rho=0.5)
    assert isinstance(tuned.table, pd.DataFrame)
    assert list(tuned.table.columns) == ["item", "statistic", "value", "note"]


def test_a_tune_over_the_budget_is_refused_and_charges_nothing(served: Served) -> None:
    alice = served.analyst("alice", rho=0.05)
    with pytest.raises(BudgetExceededError):
        readme_query(alice).tune(0.1, plan_rho=0.5)
    assert alice.spent == pf.zCDP(0)
    assert alice.ledger == ()


def test_a_tune_the_server_refuses_gives_the_local_error_and_charges_nothing(
    served: Served,
) -> None:
    remote, local = served.analyst("alice"), served.local()

    def selecting(sess: pf.Session | RemoteSession) -> Query:
        return sess.query().group_by("region").agg(pf.sum("amount", (0, 1000)))

    with pytest.raises(InvalidValueError) as local_error:
        selecting(local).tune(0.1, plan_rho=0.5)
    with pytest.raises(InvalidValueError) as remote_error:
        selecting(remote).tune(0.1, plan_rho=0.5)
    assert str(remote_error.value) == str(local_error.value)
    with pytest.raises(InvalidBudgetError, match="plan_rho"):
        readme_query(remote).tune(0.1, plan_rho=0)
    assert remote.spent == pf.zCDP(0)


def test_a_tune_is_audited_with_its_rho(served: Served) -> None:
    alice = served.analyst("alice", rho=0.2)
    readme_query(alice).tune(0.1, plan_rho=0.5)
    with pytest.raises(BudgetExceededError):
        readme_query(alice).tune(0.5, plan_rho=0.5)
    with Store(served.database) as store:
        tunes = [r for r in store.audit_records() if r.action == "tune"]
    assert [(r.status, r.detail) for r in tunes] == [
        (200, "rho=1/10"),
        (409, "rho=1/2; BudgetExceededError"),
    ]


def test_sql_refuses_facts_the_server_would_not_use(served: Served) -> None:
    alice = served.analyst("alice")
    with pytest.raises(InvalidArgumentError, match="metadata the data owner published"):
        alice.sql("SELECT SUM(age) FROM data", metadata={"age": pf.Column(bounds=(0, 99))})
    with pytest.raises(InvalidArgumentError, match="without rho sql"):
        alice.sql("SELECT COUNT(*) FROM data", label="n")  # a release keyword without rho
    assert alice.spent == pf.zCDP(0)


def test_explaining_a_private_selection_remotely_is_the_local_explanation(served: Served) -> None:
    remote, local = served.analyst("alice"), served.local()

    def selecting(sess: pf.Session | RemoteSession) -> Query:
        return (
            sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("month").agg(pf.count())
        )

    # The δ the selection spends comes back from the server as the local session derives it.
    got, want = (
        selecting(remote).explain(rho=0.1, delta=1e-6),
        selecting(local).explain(rho=0.1, delta=1e-6),
    )
    assert str(got) == str(want)
    assert got.plan.cost == want.plan.cost == pf.zCDP(0.1, 1e-6)
    with pytest.raises(pf.InvalidBudgetError, match="spends delta"):
        selecting(remote).explain(rho=0.1)  # a grant without δ: refused as a local session is
    assert remote.spent == pf.zCDP(0)


def test_automatic_bounds_released_remotely_equal_the_local_release(served: Served) -> None:
    def auto(sess: pf.Session | RemoteSession) -> Query:
        return (
            sess.query()
            .bound(max_groups=3, max_rows_per_group=5)
            .bounds_share(0.25)
            .group_by("region", keys=REGIONS)
            .agg(pf.sum("amount", bounds="auto"), pf.mean("amount", bounds="auto"))
        )

    remote, local = served.analyst("alice"), served.local()
    assert str(auto(remote).explain(rho=0.4)) == str(auto(local).explain(rho=0.4))
    assert_frame_equal(
        auto(remote).release(rho=0.4, label="a"), auto(local).release(rho=0.4, label="a")
    )
    assert [(e.label, e.exact_rho) for e in remote.ledger] == [
        ("a: bounds", Fraction(1, 10)),
        ("a", Fraction(3, 10)),
    ]
