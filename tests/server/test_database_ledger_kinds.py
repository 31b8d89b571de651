"""The server's ledgers keep pure-DP and (ε, δ) budgets as exactly as zCDP ones, each of one kind.

Every test runs on both databases the server supports: a new SQLite file,
and a new schema on a real PostgreSQL server started by the tests
(``postgres_service``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from fractions import Fraction

import pytest
from postgres_service import database_url, postgres_url  # noqa: F401  (fixtures)

import privframe as pf
from privframe.accounting.accountant import Accountant, Spend
from privframe.accounting.events import LaplaceEvent
from privframe.accounting.ledger import LEDGERS_SCHEMA_VERSION, Database, DatabaseLedgers
from privframe.errors import BudgetExceededError, InvalidBudgetError, InvalidValueError, LedgerError


@pytest.fixture
def ledgers(database_url: str) -> Iterator[DatabaseLedgers]:  # noqa: F811
    opened = DatabaseLedgers(database_url)
    yield opened
    opened.close()


def _laplace(epsilon: float) -> dict[str, object]:
    """A release's description as the pipeline records it: one Laplace of that ε."""
    return {"events": [LaplaceEvent(1 / epsilon).to_dict()]}


def test_ten_pure_dp_spends_of_a_tenth_fill_a_budget_of_one_exactly(
    ledgers: DatabaseLedgers,
) -> None:
    ledgers.create("alice/sales", "sales", pf.PureDP(1.0))
    ledger = ledgers.open("alice/sales")
    assert ledger.kind is pf.PureDP
    acct = Accountant(pf.PureDP(1.0), ledger=ledger)
    for i in range(10):
        acct.spend(pf.PureDP(0.1), label=f"q{i}")
    assert acct.spent == pf.PureDP(1)
    assert acct.remaining == pf.PureDP(0)
    with pytest.raises(BudgetExceededError):
        acct.spend(pf.PureDP(Fraction(1, 10**12)), label="one more")
    assert ledgers.spent("alice/sales") == pf.PureDP(1)
    assert ledgers.pool_spent("sales") == pf.PureDP(1)
    reopened = ledgers.open("alice/sales")
    reopened.verify()
    assert [e.cost for e in reopened.entries] == [pf.PureDP(0.1)] * 10
    assert ledgers.budget("alice/sales") == pf.PureDP(1.0)


def test_a_ledger_keeps_its_kind_on_reopen_and_top_up(ledgers: DatabaseLedgers) -> None:
    ledgers.create("alice/sales", "sales", pf.ApproxDP(1.0, 1e-6))
    with pytest.raises(LedgerError, match="records ApproxDP costs"):
        Accountant(pf.zCDP(1.0), ledger=ledgers.open("alice/sales"))
    for other in (pf.zCDP(0.5), pf.PureDP(0.5)):
        with pytest.raises(InvalidBudgetError, match="keeps an ApproxDP budget") as refused:
            ledgers.top_up("alice/sales", other)
        assert "epsilon and delta" in str(refused.value)
        with pytest.raises(InvalidBudgetError, match="keeps an ApproxDP budget"):
            ledgers.set_budget("alice/sales", other)
    assert ledgers.top_up("alice/sales", pf.ApproxDP(0.5, 0)) == pf.ApproxDP(1.5, 1e-6)
    ledgers.set_budget("alice/sales", pf.ApproxDP(2.0, 1e-5))
    assert ledgers.budget("alice/sales") == pf.ApproxDP(2.0, 1e-5)
    assert ledgers.open("alice/sales").kind is pf.ApproxDP


def test_an_approx_dp_ledger_is_charged_the_tight_composition_in_the_database(
    ledgers: DatabaseLedgers,
) -> None:
    # Fifty Laplace releases of (0.1, 1e-7) compose to less than their sum, 5: a budget of
    # ε = 4.3 holds them all, and the database, which checks the same composition, agrees.
    ledgers.create("alice/sales", "sales", pf.ApproxDP(4.3, 1e-5))
    acct = Accountant(pf.ApproxDP(4.3, 1e-5), ledger=ledgers.open("alice/sales"))
    for i in range(50):
        acct.spend(pf.ApproxDP(0.1, 1e-7), label=f"q{i}", description=_laplace(0.1))
    assert acct.basic_spent == pf.ApproxDP(5, Fraction(5, 10**6))
    assert acct.spent.exact_epsilon < Fraction(43, 10)
    assert ledgers.spent("alice/sales") == acct.basic_spent  # the ledger's sum is basic
    # A fresh ledger object folds the entries it finds, as a fresh accountant does.
    again = Accountant(pf.ApproxDP(4.3, 1e-5), ledger=ledgers.open("alice/sales"))
    assert again.spent == acct.spent
    again.spend(pf.ApproxDP(0.01, 1e-7), label="one more", description=_laplace(0.01))


def test_a_lowered_approx_dp_budget_in_the_database_refuses_a_stale_accountant(
    ledgers: DatabaseLedgers,
) -> None:
    ledgers.create("alice/sales", "sales", pf.ApproxDP(4.3, 1e-5))
    stale = Accountant(pf.ApproxDP(4.3, 1e-5), ledger=ledgers.open("alice/sales"))
    for i in range(30):
        stale.spend(pf.ApproxDP(0.1, 1e-7), label=f"q{i}", description=_laplace(0.1))
    charged = stale.spent
    ledgers.set_budget("alice/sales", pf.ApproxDP(charged.exact_epsilon, 1e-5))
    with pytest.raises(BudgetExceededError, match="server database") as refused:
        stale.spend(pf.ApproxDP(0.1, 1e-7), label="after", description=_laplace(0.1))
    assert "epsilon" in str(refused.value)
    assert stale.spent == charged
    assert len(stale.entries) == 30


def test_a_pure_dp_cap_bounds_its_ledgers_together_and_refuses_other_kinds(
    ledgers: DatabaseLedgers,
) -> None:
    for analyst in ("alice", "bob"):
        ledgers.create(f"{analyst}/sales", "sales", pf.PureDP(1.0))
    ledgers.set_cap("sales", pf.PureDP(1.5))
    assert ledgers.cap("sales") == pf.PureDP(1.5)
    alice = Accountant(pf.PureDP(1.0), ledger=ledgers.open("alice/sales"))
    bob = Accountant(pf.PureDP(1.0), ledger=ledgers.open("bob/sales"))
    alice.spend(pf.PureDP(1.0), label="a")
    with pytest.raises(BudgetExceededError, match=r"cap its administrator set \(epsilon=1.5\)"):
        bob.spend(pf.PureDP(0.75), label="b")
    assert len(bob.entries) == 0
    bob.spend(pf.PureDP(0.5), label="b fits exactly")
    assert ledgers.pool_spent("sales") == pf.PureDP(1.5)
    with pytest.raises(InvalidValueError, match="a cap bounds ledgers of its own kind"):
        ledgers.create("carol/sales", "sales", pf.zCDP(1.0))
    with pytest.raises(InvalidValueError, match="cannot be set"):
        ledgers.set_cap("sales", pf.zCDP(1.0))
    assert ledgers.ledgers() == {"alice/sales": "sales", "bob/sales": "sales"}
    assert ledgers.cap("sales") == pf.PureDP(1.5)


def test_an_approx_dp_cap_adds_up_its_ledgers_basic_charges(ledgers: DatabaseLedgers) -> None:
    for analyst in ("alice", "bob"):
        ledgers.create(f"{analyst}/sales", "sales", pf.ApproxDP(4.3, 1e-5))
    ledgers.set_cap("sales", pf.ApproxDP(5.0, 1e-5))
    alice = Accountant(pf.ApproxDP(4.3, 1e-5), ledger=ledgers.open("alice/sales"))
    for i in range(45):
        alice.spend(pf.ApproxDP(0.1, 1e-7), label=f"q{i}", description=_laplace(0.1))
    bob = Accountant(pf.ApproxDP(4.3, 1e-5), ledger=ledgers.open("bob/sales"))
    # Alice's releases add up to 4.5 against the cap (not her tighter charge): 0.5 remains.
    with pytest.raises(BudgetExceededError, match="every release's epsilon and delta add up"):
        bob.spend(pf.ApproxDP(0.6, 0), label="over the cap")
    bob.spend(pf.ApproxDP(0.5, 0), label="up to the cap")
    assert ledgers.pool_spent("sales") == pf.ApproxDP(5, Fraction(45, 10**7))


def test_an_approx_dp_cap_bounds_zcdp_ledgers_by_the_rho_it_allows(
    ledgers: DatabaseLedgers,
) -> None:
    cap = pf.ApproxDP(1.0, 1e-6)
    allowed = cap.to_zcdp().exact_rho
    ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
    ledgers.set_cap("sales", cap)
    alice = Accountant(pf.zCDP(1.0), ledger=ledgers.open("alice/sales"))
    with pytest.raises(BudgetExceededError, match="the zCDP budget its cap"):
        alice.spend(pf.zCDP(allowed + Fraction(1, 10**9)), label="over")
    alice.spend(pf.zCDP(allowed), label="all the cap allows")
    with pytest.raises(InvalidValueError, match="its ledgers are zCDP"):
        ledgers.create("bob/sales", "sales", pf.ApproxDP(1.0, 1e-6))


def test_an_uncapped_pool_holds_ledgers_of_several_kinds(ledgers: DatabaseLedgers) -> None:
    budgets = {"a/s": pf.zCDP(1.0), "b/s": pf.PureDP(1.0), "c/s": pf.ApproxDP(1.0, 1e-6)}
    for ledger_id, budget in budgets.items():
        ledgers.create(ledger_id, "s", budget)
        acct = Accountant(budget, ledger=ledgers.open(ledger_id))
        acct.spend_all([Spend(type(budget)(0.25), "q")])  # type: ignore[call-arg]
    with pytest.raises(InvalidValueError, match="several kinds"):
        ledgers.pool_spent("s")
    assert ledgers.pool_spent("s", pf.PureDP) == pf.PureDP(0.25)
    assert ledgers.pool_spent("s", pf.ApproxDP) == pf.ApproxDP(0.25, 0)
    assert ledgers.pool_spent("s", pf.zCDP) == pf.zCDP(0.25)
    ledgers.verify_pool("s")
    with pytest.raises(InvalidValueError, match="several kinds"):
        ledgers.set_cap("s", pf.ApproxDP(2.0, 1e-6))
    assert ledgers.cap("s") is None


def test_a_kind_edited_outside_privframe_is_refused(ledgers: DatabaseLedgers) -> None:
    ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
    ledgers.open("alice/sales").append(0.5, label="q")
    with ledgers.database.transaction("tampering", write=True) as tx:
        tx.run("UPDATE pf_ledgers SET kind = 'pure_dp' WHERE id = 'alice/sales'")
    with pytest.raises(LedgerError, match="genesis hash does not match"):
        ledgers.open("alice/sales")
    with ledgers.database.transaction("tampering", write=True) as tx:
        tx.run("UPDATE pf_ledgers SET kind = 'eps' WHERE id = 'alice/sales'")
    with pytest.raises(LedgerError, match="a stored kind is malformed"):
        ledgers.open("alice/sales")


def test_a_database_of_schema_one_is_migrated_and_its_ledgers_are_zcdp(
    database_url: str,  # noqa: F811
) -> None:
    with DatabaseLedgers(database_url) as ledgers:
        ledgers.create("alice/sales", "sales", pf.zCDP(1.0))
        ledgers.set_cap("sales", pf.zCDP(2.0))
        Accountant(pf.zCDP(1.0), ledger=ledgers.open("alice/sales")).spend(pf.zCDP(0.25))
    # The tables as the previous privframe wrote them: no kinds, version 1.
    database = Database(database_url)
    with database.transaction("going back to version 1", write=True) as tx:
        tx.run("ALTER TABLE pf_ledgers DROP COLUMN kind")
        tx.run("ALTER TABLE pf_pools DROP COLUMN cap_kind")
        tx.run("UPDATE pf_schema SET version = 1 WHERE component = 'ledgers'")
    database.close()
    with DatabaseLedgers(database_url) as ledgers:
        with ledgers.database.transaction("reading the version", write=False) as tx:
            assert tx.one("SELECT version FROM pf_schema WHERE component = 'ledgers'") == (
                LEDGERS_SCHEMA_VERSION,
            )
        ledger = ledgers.open("alice/sales")
        ledger.verify()
        ledgers.verify_pool("sales")
        assert ledger.kind is pf.zCDP
        assert ledgers.cap("sales") == pf.zCDP(2.0)
        assert ledgers.spent("alice/sales") == pf.zCDP(0.25)
        Accountant(pf.zCDP(1.0), ledger=ledger).spend(pf.zCDP(0.75), label="after the upgrade")
        ledgers.create("bob/visits", "visits", pf.PureDP(1.0))
        assert ledgers.budget("bob/visits") == pf.PureDP(1.0)


@pytest.mark.parametrize(
    ("budget", "step"),
    [
        (pf.PureDP(1), pf.PureDP(Fraction(1, 100))),
        (pf.ApproxDP(2, 1e-5), pf.ApproxDP(Fraction(1, 10), Fraction(1, 10**7))),
    ],
    ids=["PureDP", "ApproxDP"],
)
def test_eight_spenders_on_one_ledger_fill_its_budget_and_never_pass_it(
    ledgers: DatabaseLedgers, budget: pf.PureDP | pf.ApproxDP, step: pf.PureDP | pf.ApproxDP
) -> None:
    # Each thread has its own accountant and ledger object, as separate server processes do;
    # together they ask for far more than the budget.
    ledgers.create("alice/sales", "sales", budget)
    description = _laplace(float(step.exact_epsilon))
    accountants = [Accountant(budget, ledger=ledgers.open("alice/sales")) for _ in range(8)]
    recorded, barrier = [0] * 8, threading.Barrier(8)

    def spender(i: int) -> None:
        barrier.wait()
        for j in range(40):
            try:
                accountants[i].spend(step, label=f"t{i}-{j}", description=description)
                recorded[i] += 1
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=spender, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ledger = ledgers.open("alice/sales")
    ledger.verify()
    assert len(ledger) == sum(recorded)
    fresh = Accountant(budget, ledger=ledger)  # folds every entry again
    assert fresh.spent <= budget
    with pytest.raises(BudgetExceededError):
        fresh.check(step, description=description)  # filled: one more step does not fit
    if isinstance(budget, pf.PureDP):
        assert fresh.spent == budget  # exactly, 100 steps of 1/100
