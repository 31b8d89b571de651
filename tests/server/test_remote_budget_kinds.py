"""A pure-DP or (ε, δ) grant on a server is the same API as a local Session with that budget.

As in test_remote_session.py, the app runs in-process with a seeded noise
source on both sides, so a remote release and a local one of the same query
on the same data and budget must give the same table exactly; the real
server process is tests/server/test_server_budget_kinds.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest
from fastapi.testclient import TestClient
from polars.testing import assert_frame_equal
from server_setup import DATASET, REGIONS, write_config

import privframe as pf
from privframe.accounting._kinds import Spendable
from privframe.api.client import RemoteSession
from privframe.api.query import Query
from privframe.api.server import admin
from privframe.api.server.app import create_app
from privframe.api.server.config import load_config
from privframe.api.server.store import Store
from privframe.api.wire import WIRE_VERSION, encode_tune
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
)
from privframe.mechanisms.randomness import SeededRandomness

SEED = 13
# Both sides draw from the same seeded stream so that their tables can be compared exactly.
pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")


def grant(database: str, name: str, budget: Spendable) -> str:
    """A new analyst granted ``budget`` on the dataset; its token."""
    with Store(database) as store:
        token = store.add_analyst(name)
        store.grant(name, DATASET, budget)
    return token


class Served:
    def __init__(self, folder: Path, cap: str | None = None) -> None:
        path = write_config(folder)
        if cap is not None:  # the dataset's table is the file's last
            path.write_text(path.read_text() + f"cap = {cap}\n")
        self.config = load_config(path)
        self.app = create_app(self.config, rng=SeededRandomness(SEED))
        self.http = TestClient(self.app)
        self.http.__enter__()
        self.database = self.config.database
        self.tokens: dict[str, str] = {}

    def analyst(self, name: str, budget: Spendable) -> RemoteSession:
        self.tokens[name] = grant(self.database, name, budget)
        return RemoteSession(
            "http://testserver", DATASET, self.tokens[name], results="polars", client=self.http
        )

    def local(self, budget: Spendable) -> pf.Session:
        dataset = self.config.datasets[DATASET]
        return pf.Session(
            pl.read_parquet(dataset.data),
            "user_id",
            budget,
            rng=SeededRandomness(SEED),
            metadata={"amount": pf.Column(bounds=(0, 1000)), "region": pf.Column(keys=REGIONS)},
            contributions=pf.Bound(max_groups=3, max_rows_per_group=5),
        )

    def close(self) -> None:
        self.http.__exit__(None, None, None)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path)
    yield server
    server.close()


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


BUDGETS = [pf.PureDP(1.0), pf.ApproxDP(1.0, 1e-6)]


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: type(b).__name__)
def test_a_release_remotely_equals_the_local_release_and_spends_epsilon(
    served: Served, budget: Spendable
) -> None:
    remote, local = served.analyst("alice", budget), served.local(budget)
    assert remote.budget_kind is type(budget)
    delta = {"delta": 1e-7} if isinstance(budget, pf.ApproxDP) else {}
    got = readme_query(remote).release(epsilon=0.25, with_error=True, **delta)
    want = readme_query(local).release(epsilon=0.25, with_error=True, **delta)
    assert_frame_equal(got, want)
    assert remote.spent == local.spent
    assert remote.remaining == local.remaining
    assert remote.basic_spent == local.basic_spent
    assert [e.cost for e in remote.ledger] == [e.cost for e in local.ledger]
    assert remote.report().epsilon_rows() == local.report().epsilon_rows()
    assert remote.guarantee(1e-6) == pytest.approx(local.guarantee(1e-6))
    assert remote.guarantee() == pytest.approx(remote.spent.epsilon)  # at the δ it was charged


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: type(b).__name__)
def test_explain_remotely_is_the_local_explanation(served: Served, budget: Spendable) -> None:
    remote, local = served.analyst("alice", budget), served.local(budget)
    delta = {"delta": 1e-7} if isinstance(budget, pf.ApproxDP) else {}
    got = readme_query(remote).explain(epsilon=0.25, **delta)
    assert str(got) == str(readme_query(local).explain(epsilon=0.25, **delta))
    assert got.plan.cost == type(budget)(0.25, **delta)  # type: ignore[call-arg]
    assert remote.spent == local.spent  # nothing


def test_sql_remotely_equals_sql_locally_with_epsilon_and_with_options(served: Served) -> None:
    budget = pf.PureDP(2.0)
    remote, local = served.analyst("alice", budget), served.local(budget)
    text = "SELECT region, COUNT(*) AS n FROM data WHERE age >= 18 GROUP BY region ORDER BY n"
    assert_frame_equal(remote.sql(text, epsilon=0.5), local.sql(text, epsilon=0.5))
    with_options = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=0.5, max_groups_contributed=3) "
        "region, COUNT(*) AS n FROM data GROUP BY region ORDER BY region"
    )
    assert_frame_equal(remote.sql(with_options), local.sql(with_options))
    assert remote.spent == local.spent == pf.PureDP(1)
    with pytest.raises(pf.SQLError, match="pure DP"):
        remote.sql(with_options.replace("epsilon=0.5", "epsilon=0.5, delta=1e-6"))
    assert remote.spent == pf.PureDP(1)


def test_an_approx_dp_grant_chooses_groups_privately_as_a_local_session(served: Served) -> None:
    budget = pf.ApproxDP(2.0, 1e-5)
    remote, local = served.analyst("alice", budget), served.local(budget)

    def selecting(sess: pf.Session | RemoteSession) -> Query:
        return (
            sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("month").agg(pf.count())
        )

    assert str(selecting(remote).explain(epsilon=0.5, delta=1e-6)) == str(
        selecting(local).explain(epsilon=0.5, delta=1e-6)
    )
    got = selecting(remote).release(epsilon=0.5, delta=1e-6)
    assert_frame_equal(got, selecting(local).release(epsilon=0.5, delta=1e-6))
    assert remote.spent == local.spent


def _count(sess: pf.Session | RemoteSession) -> Query:
    return sess.query().bound(max_groups=1, max_rows_per_group=1).agg(pf.count())


def test_an_approx_dp_grant_is_charged_the_tight_composition(served: Served) -> None:
    # Fifty releases of (0.1, 1e-7) add up to epsilon = 5, more than the budget's 4.3; their
    # tight composition fits it, remotely as locally.
    budget = pf.ApproxDP(4.3, 1e-5)
    remote, local = served.analyst("alice", budget), served.local(budget)
    for i in range(50):
        for sess in (remote, local):
            _count(sess).release(epsilon=0.1, delta=1e-7, label=f"q{i}")
    assert remote.basic_spent == pf.ApproxDP(5, Fraction(5, 10**6))
    assert remote.spent == local.spent
    assert remote.spent.exact_epsilon <= Fraction(43, 10)
    # What fits and what does not is what the local session says, for a check and a release.
    left = remote.remaining
    assert left == local.remaining
    fits, too_much = pf.ApproxDP(left.exact_epsilon, 0), pf.ApproxDP(left.exact_epsilon + 1, 0)
    local.check_cost(fits)
    remote.check_cost(fits)
    for sess in (remote, local):
        with pytest.raises(BudgetExceededError):
            sess.check_cost(too_much)
    with pytest.raises(BudgetExceededError):
        _count(remote).release(epsilon=too_much.exact_epsilon)
    assert len(remote.ledger) == 50


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: type(b).__name__)
def test_a_release_over_the_budget_is_refused_and_charges_nothing(
    served: Served, budget: Spendable
) -> None:
    alice = served.analyst("alice", budget)
    query = readme_query(alice)
    with pytest.raises(BudgetExceededError, match="epsilon"):
        query.release(epsilon=1.5)
    with pytest.raises(BudgetExceededError):
        alice.release_all([query.request(epsilon=0.5), query.request(epsilon=0.75)])
    with pytest.raises(BudgetExceededError):
        alice.check_cost(type(budget)(1.5, *([0] if isinstance(budget, pf.ApproxDP) else [])))
    assert alice.spent == type(budget)(0, *([0] if isinstance(budget, pf.ApproxDP) else []))
    assert alice.ledger == ()
    batch = alice.batch([query.request(epsilon=0.5), query.request(epsilon=0.25)])
    assert batch.cost == type(budget)(0.75, *([0] if isinstance(budget, pf.ApproxDP) else []))


def test_the_other_budget_parameter_is_refused_with_what_to_pass(served: Served) -> None:
    pure, zcdp = served.analyst("alice", pf.PureDP(1.0)), served.analyst("bob", pf.zCDP(1.0))
    with pytest.raises(InvalidArgumentError, match=r"spends epsilon=\.\.\., not rho"):
        readme_query(pure).release(rho=0.1)
    with pytest.raises(InvalidArgumentError, match=r"pass epsilon=\.\.\."):
        readme_query(pure).explain()
    with pytest.raises(InvalidArgumentError, match="spends rho, not epsilon"):
        readme_query(zcdp).release(epsilon=0.1)
    with pytest.raises(pf.InvalidValueError, match="spends no delta"):
        readme_query(pure).explain(epsilon=0.1, delta=1e-6)
    with pytest.raises(pf.InvalidBudgetError, match="private"):
        pure.query().bound(max_groups=1, max_rows_per_group=1).group_by("month").agg(
            pf.count()
        ).release(epsilon=0.1)
    assert pure.ledger == () and zcdp.ledger == ()  # noqa: PT018


def test_a_grant_keeps_its_kind_and_a_top_up_of_its_kind_is_usable_at_once(
    served: Served,
) -> None:
    alice = served.analyst("alice", pf.PureDP(0.25))
    readme_query(alice).release(epsilon=0.25)
    with Store(served.database) as store:
        with pytest.raises(InvalidBudgetError, match="keeps a PureDP budget"):
            store.top_up("alice", DATASET, pf.zCDP(0.5))
        assert store.top_up("alice", DATASET, pf.PureDP(0.5)) == pf.PureDP(0.75)
    readme_query(alice).release(epsilon=0.5)
    assert alice.spent == pf.PureDP(0.75)
    assert alice.remaining == pf.PureDP(0)
    again = RemoteSession(
        "http://testserver", DATASET, served.tokens["alice"], results="polars", client=served.http
    )
    assert again.budget_kind is pf.PureDP
    assert [e.cost for e in again.ledger] == [pf.PureDP(0.25), pf.PureDP(0.5)]


def test_the_views_show_the_grant_in_epsilon(served: Served) -> None:
    alice = served.analyst("alice", pf.ApproxDP(1.0, 1e-6))
    readme_query(alice).release(epsilon=0.25, delta=1e-7, label="first")
    page = served.http.get(
        f"/v1/datasets/{DATASET}/view",
        headers={"Authorization": f"Bearer {served.tokens['alice']}"},
    ).text
    assert "epsilon spent 0.25 of 1" in page
    assert "basic composition" in page
    assert "<td>first</td>" in page
    assert "epsilon spent 0.25 of 1" in alice._repr_html_()


def test_a_pure_dp_cap_bounds_the_analysts_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = Served(tmp_path, cap="{ epsilon = 1.0 }")
    try:
        alice = served.analyst("alice", pf.PureDP(0.75))
        bob = served.analyst("bob", pf.PureDP(0.75))
        readme_query(alice).release(epsilon=0.5)
        with pytest.raises(BudgetExceededError, match="cap"):
            readme_query(bob).release(epsilon=0.75)  # within bob's 0.75, over the cap
        assert bob.ledger == ()
        readme_query(bob).release(epsilon=0.5)
        with Store(served.database) as store:
            store.add_analyst("carol")
            with pytest.raises(pf.InvalidValueError, match="cap"):
                store.grant("carol", DATASET, pf.zCDP(1.0))
    finally:
        served.close()
    assert admin.main([str(served.config.path), "datasets"]) == 0
    assert capsys.readouterr().out == (
        f"{DATASET}: cap epsilon=1; all analysts together spent epsilon=1\n"
    )


def test_releases_are_audited_with_the_epsilon_they_asked(served: Served) -> None:
    alice = served.analyst("alice", pf.ApproxDP(1.0, 1e-6))
    readme_query(alice).release(epsilon=0.25, delta=1e-7)
    with pytest.raises(BudgetExceededError):
        readme_query(alice).release(epsilon=1)
    with Store(served.database) as store:
        releases = [r for r in store.audit_records() if r.action == "release"]
    assert [r.detail for r in releases] == [
        "epsilon=1/4, delta=1/10000000",
        "epsilon=1; BudgetExceededError",
    ]


@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: type(b).__name__)
def test_tune_in_an_epsilon_grant_is_refused_by_client_and_server_and_charges_nothing(
    served: Served, budget: Spendable
) -> None:
    remote, local = served.analyst("alice", budget), served.local(budget)
    with pytest.raises(InvalidValueError, match="spends rho"):
        readme_query(local).tune(0.1, plan_rho=0.5)
    with pytest.raises(InvalidValueError, match=r"your grant on .* budget"):
        readme_query(remote).tune(0.1, plan_rho=0.5)
    # A client that asks anyway is refused by the server's own Session, as a local one refuses.
    body = {"version": WIRE_VERSION, "tune": encode_tune(readme_query(remote).plan, 0.1, 0.5)}
    headers = {"Authorization": f"Bearer {served.tokens['alice']}"}
    answer = served.http.post(f"/v1/datasets/{DATASET}/tune", json=body, headers=headers)
    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "InvalidValueError"
    assert "spends rho" in answer.json()["error"]["message"]
    assert remote.ledger == ()
