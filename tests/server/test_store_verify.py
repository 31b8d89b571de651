"""Store.verify never mistakes a server's ongoing charges for tampering (both databases)."""

from __future__ import annotations

import threading

import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.api.server.store import Store


@pytest.mark.slow
def test_verifying_while_analysts_spend_finds_nothing_wrong(
    database_url: str,  # noqa: F811
) -> None:
    store = Store(database_url)
    for name in ("alice", "bob"):
        store.add_analyst(name)
        store.grant(name, "sales", pf.zCDP(1.0))
    done = threading.Event()

    def spend(name: str) -> None:
        with Accountant(pf.zCDP(1.0), ledger=store.ledger(name, "sales")) as accountant:
            while not done.is_set() and accountant.remaining.exact_rho > 0:
                accountant.spend(pf.zCDP(0.005), label=name)

    threads = [threading.Thread(target=spend, args=(n,)) for n in ("alice", "bob")]
    for thread in threads:
        thread.start()
    try:
        verified = [store.verify() for _ in range(30)]
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert verified == [2] * 30
    assert store.pool_spent("sales") == store.spent("alice", "sales") + store.spent("bob", "sales")
    store.close()
