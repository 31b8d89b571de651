"""The accountant of a PureDP or an ApproxDP budget: exact ε, the tight (ε, δ) charge, refusals."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

import privframe as pf
from privframe.accounting.accountant import Accountant, Spend
from privframe.accounting.events import GaussianEvent, LaplaceEvent, PureDPEvent, ThresholdEvent
from privframe.accounting.ledger import Ledger, LedgerEntry
from privframe.accounting.replay import guarantee
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    LedgerError,
)


def _laplace(epsilon: float) -> dict[str, object]:
    """A release's description: one Laplace mechanism of this ε."""
    return {"events": [LaplaceEvent(1 / epsilon).to_dict()]}


# --------------------------------------------------------------------------- kinds


@pytest.mark.parametrize(
    ("budget", "kind"),
    [
        (pf.zCDP(1.0), pf.zCDP),
        (pf.GDP(1.0), pf.zCDP),
        (pf.ApproxDP(1.0, 1e-6).to_zcdp(), pf.zCDP),
        (pf.PureDP(1.0), pf.PureDP),
        (pf.ApproxDP(1.0, 1e-6), pf.ApproxDP),
    ],
    ids=["zCDP", "GDP", "converted", "PureDP", "ApproxDP"],
)
def test_the_budget_decides_the_kind(make, budget: pf.Budget, kind: type) -> None:
    acct = make(budget)
    assert acct.kind is kind
    assert type(acct.budget) is kind
    assert type(acct.spent) is type(acct.remaining) is type(acct.basic_spent) is kind
    assert acct.report().kind is kind


@pytest.mark.parametrize(
    ("budget", "cost", "says"),
    [
        (pf.PureDP(1.0), pf.zCDP(0.1), "this accountant's budget is PureDP: pass epsilon"),
        (pf.PureDP(1.0), pf.ApproxDP(0.1, 1e-7), "budget is PureDP: pass epsilon"),
        (pf.ApproxDP(1.0, 1e-6), pf.zCDP(0.1), "budget is ApproxDP: pass epsilon and delta"),
        (pf.ApproxDP(1.0, 1e-6), pf.PureDP(0.1), "budget is ApproxDP: pass epsilon and delta"),
        (pf.zCDP(1.0), pf.PureDP(0.1), "budget is zCDP: pass rho"),
    ],
)
def test_a_cost_of_another_kind_is_refused_saying_what_to_pass(
    make, budget: pf.Budget, cost: pf.Budget, says: str
) -> None:
    acct = make(budget)
    for call in (acct.spend, acct.check):
        with pytest.raises(InvalidBudgetError) as err:
            call(cost)
        assert says in str(err.value)
    with pytest.raises(InvalidBudgetError, match=says.split(": ")[0]):
        acct.spend_all([Spend(cost, "a")])
    assert acct.entries == ()


@pytest.mark.parametrize("budget", [pf.PureDP(1.0), pf.ApproxDP(1.0, 1e-6)])
def test_a_reporting_delta_belongs_to_zcdp_budgets(budget: pf.Budget) -> None:
    with pytest.raises(InvalidArgumentError, match="states its own guarantee"):
        Accountant(budget, delta=1e-6)
    assert Accountant(pf.PureDP(1.0)).delta == 0.0
    assert Accountant(pf.ApproxDP(1.0, 1e-6)).delta == 1e-6


def test_a_ledger_instance_of_another_kind_is_refused() -> None:
    with pytest.raises(LedgerError, match="records zCDP costs and this budget is a PureDP"):
        Accountant(pf.PureDP(1.0), Ledger())
    with pytest.raises(LedgerError, match="records PureDP costs and this budget is an ApproxDP"):
        Accountant(pf.ApproxDP(1.0, 1e-6), Ledger(kind=pf.PureDP))
    shared = Ledger(kind=pf.PureDP)
    Accountant(pf.PureDP(1.0), shared).spend(pf.PureDP(0.5))
    assert Accountant(pf.PureDP(0.75), shared).remaining == pf.PureDP(0.25)


# --------------------------------------------------------------------------- PureDP


def test_ten_pure_spends_of_a_tenth_fill_the_budget_exactly(make) -> None:
    acct = make(pf.PureDP(1.0))
    for i in range(10):
        acct.spend(pf.PureDP(0.1), label=f"q{i}")
    assert acct.spent == pf.PureDP(1)
    assert acct.remaining == pf.PureDP(0)
    assert acct.spent.exact_epsilon == 1
    with pytest.raises(BudgetExceededError) as err:
        acct.spend(pf.PureDP(1e-12), label="one more")
    message = str(err.value)
    assert "epsilon=1e-12" in message
    assert "epsilon=1 is spent" in message
    assert "rho" not in message
    assert len(acct.entries) == 10
    assert [e.cost for e in acct.entries] == [pf.PureDP(0.1)] * 10


def test_pure_thirds_and_remaining_always_fit(make) -> None:
    acct = make(pf.PureDP(Fraction(1)))
    for _ in range(3):
        acct.spend(pf.PureDP(Fraction(1, 3)))
    assert acct.remaining == pf.PureDP(0)
    other = Accountant(pf.PureDP(0.7))
    other.spend(pf.PureDP(0.123))
    other.spend(other.remaining)
    assert other.spent == pf.PureDP(0.7)


def test_pure_affordable_forgives_float_rounding_only() -> None:
    acct = Accountant(pf.PureDP(0.2))
    acct.spend(pf.PureDP(0.2 / 3))
    acct.spend(pf.PureDP(0.2 / 3))
    assert acct.affordable(0.2 / 3) == acct.remaining.exact_epsilon
    assert acct.affordable(0.1) == Fraction(1, 10)


def test_pure_spend_all_is_all_or_nothing(make) -> None:
    acct = make(pf.PureDP(1.0))
    acct.spend_all([Spend(pf.PureDP(0.5), "a"), Spend(pf.PureDP(0.25), "b")])
    with pytest.raises(BudgetExceededError, match=r"'c' epsilon=0\.2, 'd' epsilon=0\.2"):
        acct.spend_all([Spend(pf.PureDP(0.2), "c"), Spend(pf.PureDP(0.2), "d")])
    assert [e.label for e in acct.entries] == ["a", "b"]
    assert acct.remaining == pf.PureDP(0.25)


def test_pure_report_is_in_epsilon() -> None:
    acct = Accountant(pf.PureDP(1.0))
    acct.spend(pf.PureDP(0.375), label="q1")
    r = acct.report()
    assert (r.budget_epsilon, r.spent_epsilon, r.remaining_epsilon) == (1.0, 0.375, 0.625)
    assert r.spent + r.remaining == r.budget
    assert r.basic is None
    assert r.budget_mu is None
    assert r.epsilon_rows() == [
        ("budget", 1.0, 0.0),
        ("spent", 0.375, 0.0),
        ("remaining", 0.625, 0.0),
    ]
    text = str(r)
    assert "pure epsilon-DP" in text
    assert "0.625" in text
    assert "rho" not in text
    with pytest.raises(InvalidArgumentError, match="has no rho"):
        r.spent_rho  # noqa: B018
    with pytest.raises(InvalidArgumentError, match="epsilon_rows"):
        r.rows()


def test_pure_entries_carry_their_kind() -> None:
    acct = Accountant(pf.PureDP(1.0))
    entry = acct.spend(pf.PureDP(0.25), label="q", description={"events": []})
    assert entry.kind is pf.PureDP
    assert entry.cost == pf.PureDP(0.25)
    assert entry.epsilon == 0.25
    with pytest.raises(InvalidArgumentError, match=r"read entry\.epsilon"):
        entry.rho  # noqa: B018
    data = entry.to_dict()
    assert data["kind"] == "pure_dp"
    assert data["rho"] == "1/4"
    assert LedgerEntry.from_dict(data) == entry
    zcdp = Accountant(pf.zCDP(1.0)).spend(pf.zCDP(0.25))
    assert "kind" not in zcdp.to_dict()
    assert zcdp != LedgerEntry.from_dict({**zcdp.to_dict(), "kind": "pure_dp"})
    with pytest.raises(InvalidArgumentError, match=r"read entry\.rho"):
        zcdp.epsilon  # noqa: B018
    with pytest.raises(InvalidBudgetError, match="no delta"):
        LedgerEntry(0, "t", "q", 0.5, 1e-7, "", False, kind=pf.PureDP)


def test_pure_guarantee_is_the_sum() -> None:
    acct = Accountant(pf.PureDP(2.0))
    for _ in range(4):
        acct.spend(pf.PureDP(0.25))
    statement = guarantee(acct.entries, 1e-6)
    assert statement.epsilon == 1.0
    assert "basic composition" in statement.basis
    assert guarantee(acct.entries, 1e-6, total=acct.spent).epsilon == 1.0
    replayed = guarantee(acct.entries, 1e-6, "rdp")
    assert replayed.epsilon <= 1.0
    assert "fixed sequence" in replayed.basis


# --------------------------------------------------------------------------- ApproxDP


def test_fifty_laplace_releases_are_charged_well_below_their_sum(make) -> None:
    acct = make(pf.ApproxDP(5.0, 1e-5))
    for i in range(50):
        acct.spend(pf.ApproxDP(0.1, 1e-7), label=f"q{i}", description=_laplace(0.1))
    assert acct.basic_spent == pf.ApproxDP(5, Fraction(5, 10**6))
    spent = acct.spent
    assert spent.exact_delta == Fraction(5, 10**6)
    assert spent.epsilon < 4.3  # basic composition: 5.0
    assert acct.remaining == pf.ApproxDP(5, 1e-5) - spent
    # The room that leaves is real: more releases fit than basic composition allows.
    extra = 0
    while True:
        try:
            acct.spend(pf.ApproxDP(0.1, 1e-7), description=_laplace(0.1))
        except BudgetExceededError:
            break
        extra += 1
    assert extra >= 5
    assert acct.spent.exact_epsilon <= 5


def test_without_events_or_delta_an_approx_budget_composes_by_addition(make) -> None:
    acct = make(pf.ApproxDP(1.0, 1e-6))
    for _ in range(10):
        acct.spend(pf.ApproxDP(0.1, 1e-7))  # no events: a generic (ε, δ)-DP release
    assert acct.spent == acct.basic_spent == pf.ApproxDP(1, 1e-6)
    assert acct.remaining == pf.ApproxDP(0, 0)
    with pytest.raises(BudgetExceededError):
        acct.spend(pf.ApproxDP(0.0, 1e-12))


def test_spending_what_remains_always_fits_and_the_charge_never_exceeds_basic() -> None:
    rng = random.Random(30)
    for _ in range(20):
        acct = Accountant(pf.ApproxDP(3.0, 1e-5))
        for _ in range(rng.randrange(1, 40)):
            eps = Fraction(rng.choice([1, 2, 5, 10, 25]), 100)
            delta = Fraction(rng.choice([0, 1, 10]), 10**8)
            kind = rng.choice(["laplace", "none", "pure", "gauss"])
            events = {
                "laplace": _laplace(float(eps)),
                "none": {},
                "pure": {"events": [PureDPEvent(float(eps)).to_dict()]},
                "gauss": {"events": [GaussianEvent(8.0, discrete=True).to_dict()]},
            }[kind]
            try:
                acct.spend(pf.ApproxDP(eps, delta), description=events)
            except BudgetExceededError:
                break
            assert acct.spent.exact_epsilon <= acct.basic_spent.exact_epsilon
            assert acct.spent.exact_delta == acct.basic_spent.exact_delta
        left = acct.remaining
        acct.spend(left, label="the rest")
        assert acct.spent.exact_epsilon <= 3
        assert acct.spent.exact_delta <= Fraction(1, 10**5)


def test_the_charge_depends_on_the_entries_only(tmp_path) -> None:
    # Another accountant (another process, a smaller budget) folds the same total.
    path = tmp_path / "approx.ledger"
    with Accountant(pf.ApproxDP(5.0, 1e-5), path) as acct:
        for _ in range(30):
            acct.spend(pf.ApproxDP(0.1, 1e-7), description=_laplace(0.1))
        spent = acct.spent
    with Accountant(pf.ApproxDP(4.0, 1e-5), path) as smaller:
        assert smaller.spent == spent
        assert smaller.remaining == pf.ApproxDP(4, 1e-5) - spent


def test_approx_refusal_names_epsilon_and_delta(make) -> None:
    acct = make(pf.ApproxDP(1.0, 1e-6))
    acct.spend(pf.ApproxDP(0.75, 1e-7), label="q1")
    with pytest.raises(BudgetExceededError) as err:
        acct.spend(pf.ApproxDP(0.5, 1e-7), label="q2")
    message = str(err.value)
    assert "spend 'q2' refused, nothing was recorded: it requests epsilon=0.5" in message
    assert "delta: requests 1e-07, spent 1e-07" in message
    assert "rho" not in message
    with pytest.raises(BudgetExceededError, match=r"delta: requests 1e-06"):
        acct.spend(pf.ApproxDP(0.1, 1e-6))
    assert len(acct.entries) == 1


def test_approx_check_and_spend_all_compose_like_spend(make) -> None:
    acct = make(pf.ApproxDP(3.75, 1e-5))
    spends = [Spend(pf.ApproxDP(0.1, 1e-7), f"q{i}", _laplace(0.1)) for i in range(40)]
    with pytest.raises(BudgetExceededError):
        acct.check(pf.ApproxDP(4.0, 0.0))
    acct.check(pf.ApproxDP(3.75, 0.0))
    acct.spend_all(spends)  # basic composition would charge 4 > 3.75
    assert acct.spent.exact_epsilon < Fraction(375, 100) < acct.basic_spent.exact_epsilon == 4
    with pytest.raises(BudgetExceededError, match="together they request epsilon=4"):
        acct.spend_all(spends)
    assert acct.spend_all([]) == []
    assert len(acct.entries) == 40


def test_malformed_events_are_refused_before_anything_is_recorded(make) -> None:
    acct = make(pf.ApproxDP(1.0, 1e-6))
    for bad in ({"events": "laplace"}, {"events": [{"type": "laplace", "version": 9}]}):
        with pytest.raises(InvalidValueError, match="events"):
            acct.spend(pf.ApproxDP(0.1), description=bad)
        with pytest.raises(InvalidValueError, match="events"):
            acct.check(pf.ApproxDP(0.1), description=bad)
    assert acct.entries == ()


def test_a_zero_approx_spend_is_recorded_even_when_the_budget_is_spent(make) -> None:
    acct = make(pf.ApproxDP(1.0, 1e-6))
    acct.spend(pf.ApproxDP(1.0, 1e-6))
    acct.spend(pf.ApproxDP(0, 0), label="free")
    assert [e.label for e in acct.entries] == ["", "free"]


def test_approx_affordable_forgives_float_rounding_in_epsilon() -> None:
    acct = Accountant(pf.ApproxDP(0.2, 1e-6))
    acct.spend(pf.ApproxDP(0.2 / 3, 1e-7))
    acct.spend(pf.ApproxDP(0.2 / 3, 1e-7))
    assert acct.affordable(0.2 / 3) == acct.remaining.exact_epsilon
    acct.spend(pf.ApproxDP(acct.affordable(0.2 / 3), 1e-7))
    assert acct.remaining.exact_epsilon == 0


def test_approx_report_shows_basic_composition() -> None:
    acct = Accountant(pf.ApproxDP(5.0, 1e-5))
    for _ in range(50):
        acct.spend(pf.ApproxDP(0.1, 1e-7), description=_laplace(0.1))
    r = acct.report()
    assert r.basic == acct.basic_spent
    assert r.basic_epsilon == 5.0
    assert r.spent == acct.spent
    assert r.spent + r.remaining == r.budget
    assert r.spent_epsilon < 4.3
    assert r.budget_delta == 1e-5
    assert r.spent_delta == 5e-6
    names = [row[0] for row in r.epsilon_rows()]
    assert names == ["budget", "spent", "remaining", "basic"]
    text = str(r)
    assert "basic" in text
    assert "tight composition" in text
    assert "50 ledger entries" in text


def test_approx_guarantee_is_the_charge() -> None:
    acct = Accountant(pf.ApproxDP(5.0, 1e-5))
    for _ in range(20):
        acct.spend(pf.ApproxDP(0.1, 1e-7), description=_laplace(0.1))
    charged = guarantee(acct.entries, 1e-5)
    assert charged.epsilon == pf.accounting.round_up(acct.spent.exact_epsilon)
    assert "privacy filter" in charged.basis
    assert guarantee(acct.entries, 1e-5, total=acct.spent).epsilon == charged.epsilon
    with pytest.raises(InvalidValueError, match="below the delta the entries were charged"):
        guarantee(acct.entries, 1e-7)
    assert guarantee(acct.entries, 1e-5, "pld").epsilon < 2.0


def test_threshold_events_spend_their_delta_outright() -> None:
    acct = Accountant(pf.ApproxDP(5.0, 1e-5))
    selection = {"events": [GaussianEvent(4.0).to_dict(), ThresholdEvent(0.0, 1e-7).to_dict()]}
    for _ in range(5):
        acct.spend(pf.ApproxDP(0.5, 1e-7), description=selection)
    # The events spend all of δ outright: there is no slack, so nothing beats the sum.
    assert acct.spent == acct.basic_spent
    # Events that spend more δ outright than charged are not believed.
    acct.spend(pf.ApproxDP(0.5, 1e-8), description=selection)
    assert acct.spent == acct.basic_spent
