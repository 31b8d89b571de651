"""Pure-DP and (ε, δ) grants through the real server process (``privframe serve``), end to end.

On both databases: SQLite, and a real PostgreSQL server the tests start
(``postgres_service``). The server draws noise from the OS CSPRNG, so these
tests check budgets, kinds and refusals, not values.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)
from server_setup import DATASET, REGIONS, ServerProcess, write_config

import privframe as pf
from privframe.accounting._kinds import Spendable
from privframe.api.client import RemoteSession
from privframe.api.query import Query
from privframe.api.server import admin
from privframe.api.server.config import load_config
from privframe.api.server.store import Store
from privframe.errors import BudgetExceededError, InvalidArgumentError


def _grant(database: str, name: str, budget: Spendable) -> str:
    with Store(database) as store:
        token = store.add_analyst(name)
        store.grant(name, DATASET, budget)
    return token


def _quickstart(sess: RemoteSession) -> Query:
    return (
        sess.query()
        .filter(pl.col("age") >= 18)
        .bound(max_groups=3, max_rows_per_group=5)
        .group_by("region", keys=REGIONS)
        .agg(pf.count(), pf.mean("amount", bounds=(0, 1000)).alias("avg_amount"))
    )


def test_pure_dp_and_approx_dp_grants_release_refuse_and_keep_their_kind_across_restarts(
    tmp_path: Path,
    database_url: str,  # noqa: F811  (a fixture: SQLite, then PostgreSQL)
) -> None:
    config = write_config(tmp_path, database=database_url)
    database = load_config(config).database
    tokens = {
        "pure": _grant(database, "pure", pf.PureDP(1.0)),
        "approx": _grant(database, "approx", pf.ApproxDP(1.0, 1e-6)),
        "zcdp": _grant(database, "zcdp", pf.zCDP(1.0)),
    }
    with ServerProcess(config) as server:
        pure, approx, zcdp = (
            pf.connect(server.url, DATASET, tokens[name], results="polars")
            for name in ("pure", "approx", "zcdp")
        )
        assert (pure.budget_kind, approx.budget_kind, zcdp.budget_kind) == (
            pf.PureDP,
            pf.ApproxDP,
            pf.zCDP,
        )
        assert _quickstart(pure).release(epsilon=0.5, label="p").height == len(REGIONS)
        released = _quickstart(approx).release(epsilon=0.5, delta=1e-7, label="a")
        assert released["region"].to_list() == REGIONS
        assert _quickstart(zcdp).release(rho=0.5, label="z").height == len(REGIONS)
        assert pure.spent == pf.PureDP(0.5)
        assert approx.basic_spent == pf.ApproxDP(0.5, 1e-7)
        assert approx.spent.exact_epsilon <= Fraction(1, 2)
        assert zcdp.spent == pf.zCDP(0.5)
        # Over the budget: refused, nothing charged; the other parameter: refused by name.
        for sess in (pure, approx):
            with pytest.raises(BudgetExceededError):
                _quickstart(sess).release(epsilon=0.75)
            with pytest.raises(InvalidArgumentError, match="not rho"):
                _quickstart(sess).release(rho=0.1)
        assert [e.label for e in pure.ledger] == ["p"]
        assert [e.label for e in approx.ledger] == ["a"]
        # A top-up of the grant's kind applies to the next release of a running server.
        assert admin.main([str(config), "top-up", "pure", DATASET, "--epsilon", "0.25"]) == 0
        _quickstart(pure).release(epsilon=0.75, label="after the top-up")
        assert pure.remaining == pf.PureDP(0)
        for sess in (pure, approx, zcdp):
            sess.close()
    with ServerProcess(config) as server:
        pure = pf.connect(server.url, DATASET, tokens["pure"], results="polars")
        approx = pf.connect(server.url, DATASET, tokens["approx"], results="polars")
        assert pure.budget_kind is pf.PureDP
        assert approx.budget_kind is pf.ApproxDP
        assert [e.cost for e in pure.ledger] == [pf.PureDP(0.5), pf.PureDP(0.75)]
        assert [e.cost for e in approx.ledger] == [pf.ApproxDP(0.5, 1e-7)]
        assert "epsilon spent" in pure._repr_html_()
        pure.close()
        approx.close()
    assert admin.main([str(config), "verify"]) == 0


def test_an_approx_dp_cap_bounds_the_analysts_of_a_served_dataset(
    tmp_path: Path,
    database_url: str,  # noqa: F811
) -> None:
    config = write_config(tmp_path, database=database_url)
    config.write_text(config.read_text() + "cap = { epsilon = 1.0, delta = 1e-6 }\n")
    database = load_config(config).database
    tokens = [_grant(database, name, pf.ApproxDP(0.75, 1e-6)) for name in ("alice", "bob")]
    with ServerProcess(config) as server:
        alice, bob = (pf.connect(server.url, DATASET, t, results="polars") for t in tokens)
        _quickstart(alice).release(epsilon=0.5, delta=5e-7)
        with pytest.raises(BudgetExceededError, match="cap"):
            _quickstart(bob).release(epsilon=0.75)  # within bob's budget, over the cap
        _quickstart(bob).release(epsilon=0.5, delta=5e-7)
        with pytest.raises(BudgetExceededError, match="cap"):
            _quickstart(bob).release(epsilon=0.01)
        assert bob.basic_spent == pf.ApproxDP(0.5, 5e-7)
        alice.close()
        bob.close()
    with Store(database) as store:
        assert store.pool_spent(DATASET) == pf.ApproxDP(1, 1e-6)
        assert store.ledgers.cap(DATASET) == pf.ApproxDP(1, 1e-6)
