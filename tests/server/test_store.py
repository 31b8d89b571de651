"""The server's store: tokens, grants and budgets, and the audit log, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)

import privframe as pf
from privframe.accounting.accountant import Accountant
from privframe.api.server.store import AuditRecord, Store
from privframe.errors import BudgetExceededError, InvalidArgumentError, InvalidValueError


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:  # noqa: F811
    opened = Store(database_url)
    yield opened
    opened.close()


def test_a_token_authenticates_until_it_is_rotated_or_revoked(store: Store) -> None:
    first = store.add_analyst("alice")
    assert re.fullmatch(r"pf_[0-9a-f]{16}_[A-Za-z0-9_-]{43}", first)
    assert store.authenticate(first) == "alice"
    second = store.new_token("alice")
    assert store.authenticate(first) is None
    assert store.authenticate(second) == "alice"
    store.revoke("alice")
    assert store.authenticate(second) is None
    third = store.new_token("alice")
    assert store.authenticate(third) == "alice"
    assert store.analysts() == ["alice"]


def test_malformed_unknown_and_forged_tokens_do_not_authenticate(store: Store) -> None:
    token = store.add_analyst("alice")
    prefix, token_id, secret = token.split("_", 2)
    forged_secret = ("A" if secret[0] != "A" else "B") + secret[1:]
    for candidate in (
        "",
        "pf_",
        token + "x",
        token.upper(),
        f"{prefix}_{token_id}_{forged_secret}",
        f"{prefix}_{'0' * 16}_{secret}",  # an unknown id with a well-formed secret
        None,
        42,
        "pf_" + "\x00" * 60,
    ):
        assert store.authenticate(candidate) is None  # type: ignore[arg-type]


def _stored_text(store: Store, database_url: str) -> bytes:  # noqa: F811
    if store.ledgers.database.postgres:
        import psycopg

        with psycopg.connect(database_url) as conn:
            rows = conn.execute("SELECT id, analyst, salt, digest FROM pf_tokens").fetchall()
        return repr(rows).encode()
    return Path(database_url).read_bytes()


def test_the_database_holds_no_token_secret(store: Store, database_url: str) -> None:  # noqa: F811
    tokens = [store.add_analyst("alice"), store.new_token("alice"), store.add_analyst("bob")]
    stored = _stored_text(store, database_url)
    for token in tokens:
        _, token_id, secret = token.split("_", 2)
        assert token_id.encode() in stored  # the public id finds the row...
        assert secret.encode() not in stored  # ...the secret is never kept
        assert token.encode() not in stored


def test_grants_are_per_analyst_and_dataset(store: Store) -> None:
    store.add_analyst("alice")
    store.add_analyst("bob")
    store.grant("alice", "sales", pf.zCDP(1.0))
    store.grant("alice", "visits", pf.zCDP(0.5))
    store.grant("bob", "sales", pf.zCDP(0.25))
    assert store.granted("alice") == ["sales", "visits"]
    assert store.granted("bob") == ["sales"]
    assert store.budget("bob", "visits") is None
    assert store.budget("nobody", "sales") is None
    assert store.budget("../alice", "sales") is None  # a name that cannot exist
    with pytest.raises(InvalidValueError, match="no grant"):
        store.ledger("bob", "visits")
    with pytest.raises(InvalidValueError, match="already"):
        store.grant("alice", "sales", pf.zCDP(2.0))
    with pytest.raises(InvalidValueError, match="no analyst"):
        store.grant("carol", "sales", pf.zCDP(1.0))
    with pytest.raises(InvalidValueError, match="not a valid name"):
        store.grant("alice", "sales/../x", pf.zCDP(1.0))
    with pytest.raises(InvalidArgumentError, match="zCDP"):
        store.grant("bob", "visits", 1.0)  # type: ignore[arg-type]


def test_budgets_change_and_bind_through_the_grant_ledger(store: Store) -> None:
    store.add_analyst("alice")
    store.add_analyst("bob")
    store.grant("alice", "sales", pf.zCDP(0.5))
    store.grant("bob", "sales", pf.zCDP(1.0))
    store.set_cap("sales", pf.zCDP(0.75))
    alice = Accountant(pf.zCDP(0.5), ledger=store.ledger("alice", "sales"))
    alice.spend(pf.zCDP(0.5), label="all of alice's")
    assert store.top_up("alice", "sales", pf.zCDP(0.5)) == pf.zCDP(1.0)
    bob = Accountant(pf.zCDP(1.0), ledger=store.ledger("bob", "sales"))
    with pytest.raises(BudgetExceededError, match="cap"):
        bob.spend(pf.zCDP(0.5), label="over the cap")
    bob.spend(pf.zCDP(0.25), label="up to the cap")
    assert store.pool_spent("sales") == pf.zCDP(0.75)
    assert store.spent("bob", "sales") == pf.zCDP(0.25)
    store.set_budget("bob", "sales", pf.zCDP(0.1))
    assert store.budget("bob", "sales") == pf.zCDP(0.1)


def test_the_audit_log_keeps_records_in_order(store: Store) -> None:
    store.audit(analyst="alice", action="release", dataset="sales", status=200, detail="rho=0.1")
    store.audit(analyst=None, action="datasets", dataset=None, status=401, detail="no token")
    store.audit(analyst="a" * 500, action="x\x00y", dataset="sales", status=400, detail="d" * 5000)
    records = store.audit_records()
    assert [(r.analyst, r.action, r.status) for r in records[:2]] == [
        ("alice", "release", 200),
        (None, "datasets", 401),
    ]
    assert records[0] == AuditRecord(records[0].time, "alice", "release", "sales", 200, "rho=0.1")
    last = records[2]
    assert len(last.analyst or "") == 200
    assert "\x00" not in last.action
    assert len(last.detail) == 2000
    assert [r.action for r in store.audit_records(limit=1)] == [last.action]
    with pytest.raises(InvalidValueError):
        store.audit_records(limit=0)
    with pytest.raises(InvalidArgumentError):
        store.audit(analyst="alice", action="release", dataset="sales", status="200")  # type: ignore[arg-type]
