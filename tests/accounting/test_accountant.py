"""The accountant: atomic spends, exact limits, seeded spends, reports."""

from __future__ import annotations

import warnings
from fractions import Fraction

import pytest

import privframe as pf
from privframe import accounting, numeric
from privframe.accounting.accountant import DEFAULT_REPORTING_DELTA, Accountant, BudgetReport
from privframe.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidBudgetError,
    InvalidValueError,
    SeededRandomnessWarning,
)

# --------------------------------------------------------------------------- basics


def test_budget_conversion_and_reporting_delta() -> None:
    assert Accountant(pf.zCDP(1.0)).budget == pf.zCDP(1.0)
    assert Accountant(pf.zCDP(1.0)).delta == DEFAULT_REPORTING_DELTA == 1e-6
    gdp = Accountant(pf.GDP(1.0))
    assert gdp.budget == accounting.to_zcdp(pf.GDP(1.0))
    assert gdp.delta == 1e-6
    approx = Accountant(pf.ApproxDP(1.0, 1e-5).to_zcdp())
    assert approx.budget == accounting.to_zcdp(pf.ApproxDP(1.0, 1e-5))
    assert approx.delta == 1e-5
    assert Accountant(pf.ApproxDP(1.0, 1e-5).to_zcdp(), delta=1e-8).delta == 1e-8


@pytest.mark.parametrize("budget", [1.0, "1.0", None, {"rho": 1.0}])
def test_budget_must_be_a_budget(budget: object) -> None:
    with pytest.raises(InvalidBudgetError):
        Accountant(budget)  # type: ignore[arg-type]


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-6, float("nan")])
def test_reporting_delta_validated(delta: float) -> None:
    with pytest.raises(InvalidBudgetError, match="delta"):
        Accountant(pf.zCDP(1.0), delta=delta)


@pytest.mark.parametrize("delta", [True, "1e-6"])
def test_reporting_delta_type_validated(delta: object) -> None:
    with pytest.raises(InvalidArgumentError, match="delta"):
        Accountant(pf.zCDP(1.0), delta=delta)  # type: ignore[arg-type]


def test_reporting_delta_uses_the_shared_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    # One reading rule for a number the user gives: accounting's, not a copy of it.
    seen: list[object] = []
    real = numeric.exact

    def spy(name: str, value: object, **kw: bool) -> Fraction:
        seen.append(value)
        return real(name, value, **kw)

    monkeypatch.setattr(numeric, "exact", spy)
    assert Accountant(pf.zCDP(1.0), delta=1e-5).delta == 1e-5
    assert seen[-1] == 1e-5  # the reporting delta, read by the same rule as budgets


@pytest.mark.parametrize("ledger", [42, b"spend.ledger", ["spend.ledger"]])
def test_ledger_argument_validated(ledger: object) -> None:
    with pytest.raises(InvalidArgumentError, match="ledger"):
        Accountant(pf.zCDP(1.0), ledger)  # type: ignore[arg-type]


def test_spend_records(make) -> None:
    acct = make(pf.zCDP(1.0, 1e-6))
    e = acct.spend(pf.zCDP(0.25), label="q1", description={"query": "count by x"})
    assert (e.index, e.label, e.rho, e.delta, e.seeded) == (0, "q1", 0.25, 0.0, False)
    assert e.description == {"query": "count by x"}
    acct.spend(pf.zCDP(0.5, 1e-9), label="q2")
    assert acct.entries[0] == e
    assert [x.label for x in acct.entries] == ["q1", "q2"]
    assert acct.spent == pf.zCDP(0.75, 1e-9)
    assert acct.remaining == pf.zCDP(0.25, Fraction(999, 10**9))  # 1e-6 − 1e-9, exactly


@pytest.mark.parametrize("cost", [pf.ApproxDP(0.1, 0.0), pf.GDP(0.1), 0.1, None])
def test_cost_must_be_zcdp(make, cost: object) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.raises(InvalidBudgetError, match="zCDP"):
        acct.spend(cost)
    with pytest.raises(InvalidBudgetError, match="zCDP"):
        acct.check(cost)
    assert acct.entries == ()


def test_bad_label_or_description_records_nothing(make) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.raises(InvalidArgumentError, match="label"):
        acct.spend(pf.zCDP(0.1), label=3)
    with pytest.raises(InvalidArgumentError, match="description"):
        acct.spend(pf.zCDP(0.1), description={1: "a"})
    with pytest.raises(InvalidArgumentError, match="description"):
        acct.spend(pf.zCDP(0.1), description=3)
    with pytest.raises(InvalidValueError, match="description"):
        acct.spend(pf.zCDP(0.1), description={"x": float("nan")})
    with pytest.raises(InvalidArgumentError, match="seeded"):
        acct.spend(pf.zCDP(0.1), seeded="yes")
    assert acct.entries == ()


# --------------------------------------------------------------------------- limits


def test_overspend_refused_and_nothing_recorded(make) -> None:
    acct = make(pf.zCDP(1.0))
    acct.spend(pf.zCDP(0.75), label="q1")
    with pytest.raises(BudgetExceededError) as err:
        acct.spend(pf.zCDP(0.5), label="q2", description={"secret": "never shown"})
    msg = str(err.value)
    assert "q2" in msg
    assert "requests rho=0.5" in msg
    assert "rho=0.75 is spent" in msg
    assert "rho=0.25 remains" in msg
    assert "never shown" not in msg
    assert len(acct.entries) == 1
    assert acct.spent.rho == 0.75


def test_check_never_spends(make) -> None:
    acct = make(pf.zCDP(1.0))
    acct.check(pf.zCDP(1.0))
    with pytest.raises(BudgetExceededError):
        acct.check(pf.zCDP(1.0000000000000002))
    assert acct.entries == ()
    assert acct.spent == pf.zCDP(0.0)


def test_delta_is_a_budget_dimension(make) -> None:
    acct = make(pf.zCDP(1.0, 1e-6))
    acct.spend(pf.zCDP(0.1, 1e-6))
    with pytest.raises(BudgetExceededError, match="delta"):
        acct.spend(pf.zCDP(0.1, 1e-12))
    acct.spend(pf.zCDP(0.1))
    assert len(acct.entries) == 2
    assert acct.remaining.delta == 0.0


@pytest.mark.parametrize(
    ("budget", "spend", "count"),
    [(0.3, 0.1, 3), (1.0, 0.1, 10), (1.0, 0.2, 5), (1.0, 0.01, 100), (0.7, 0.07, 10)],
)
def test_an_even_split_uses_the_budget_exactly(
    make, budget: float, spend: float, count: int
) -> None:
    # 0.1 is read as 1/10, not as the double 0.1000000000000000055...: an even split of
    # a budget fits exactly, leaves exactly 0, and one more spend of anything is refused.
    acct = make(pf.zCDP(budget))
    for i in range(count):
        acct.spend(pf.zCDP(spend), label=f"part {i}")
    assert acct.remaining == pf.zCDP(0)
    assert acct.spent == pf.zCDP(budget)
    assert sum(e.exact_rho for e in acct.entries) == Fraction(str(budget))
    with pytest.raises(BudgetExceededError, match="rho=0 remains"):
        acct.spend(pf.zCDP(Fraction(1, 10**300)), label="one more")
    assert len(acct.entries) == count


def test_thirds_of_a_fraction_budget_fit_exactly(make) -> None:
    acct = make(pf.zCDP(Fraction(1, 3)))
    for _ in range(3):
        acct.spend(pf.zCDP(Fraction(1, 9)))
    assert acct.remaining == pf.zCDP(0)
    with pytest.raises(BudgetExceededError):
        acct.spend(pf.zCDP(5e-324))


def test_spending_remaining_always_fits(make) -> None:
    acct = make(pf.zCDP(1.0))
    acct.spend(pf.zCDP(Fraction(1, 3)))
    acct.spend(acct.remaining)
    assert acct.spent == pf.zCDP(1.0)
    assert acct.remaining == pf.zCDP(0)


def test_exact_rational_boundary_dyadic(make) -> None:
    acct = make(pf.zCDP(1.0))
    for _ in range(8):
        acct.spend(pf.zCDP(0.125))
    assert acct.spent == pf.zCDP(1.0)
    assert acct.remaining == pf.zCDP(0.0)
    with pytest.raises(BudgetExceededError):
        acct.spend(pf.zCDP(5e-324))  # the smallest positive float does not fit


def test_point_one_plus_point_two(make) -> None:
    acct = make(pf.zCDP(0.3))
    acct.spend(pf.zCDP(0.1))
    acct.spend(pf.zCDP(0.2))  # 1/10 + 2/10 = 3/10 exactly, though 0.1 + 0.2 != 0.3 in floats
    assert sum(e.exact_rho for e in acct.entries) == Fraction(3, 10)
    assert acct.remaining == pf.zCDP(0)


def test_zero_spend_always_recorded(make) -> None:
    acct = make(pf.zCDP(0.5))
    acct.spend(pf.zCDP(0.5))
    e = acct.spend(pf.zCDP(0.0), label="public metadata")
    assert e.rho == 0.0
    assert len(acct.entries) == 2
    acct.check(pf.zCDP(0.0))


def test_spent_and_remaining_are_exact_and_show_rounded() -> None:
    acct = Accountant(pf.zCDP(1.0))
    acct.spend(pf.zCDP(0.1))
    acct.spend(pf.zCDP(0.2))
    assert acct.spent.exact_rho == Fraction(3, 10)
    assert acct.remaining.exact_rho == Fraction(7, 10)
    assert (repr(acct.spent), repr(acct.remaining)) == (
        "zCDP(rho=0.3, delta=0.0)",
        "zCDP(rho=0.7, delta=0.0)",
    )


def test_a_float_that_is_binary_is_kept_binary_when_given_as_a_fraction(make) -> None:
    # Computed values are passed as Fraction(x): their binary value, which is charged.
    acct = make(pf.zCDP(0.3))
    acct.spend(pf.zCDP(Fraction(0.1)))  # 0.1000000000000000055...
    acct.spend(pf.zCDP(0.1))
    with pytest.raises(BudgetExceededError, match=r"exceeds what remains by rho=1/\d+"):
        acct.spend(pf.zCDP(0.1))


# --------------------------------------------------------------------------- seeded


def test_seeded_spend_warns_and_flags(make) -> None:
    acct = make(pf.zCDP(1.0))
    with pytest.warns(SeededRandomnessWarning, match="demo"):
        e = acct.spend(pf.zCDP(0.1), label="demo", seeded=True)
    assert e.seeded is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert acct.spend(pf.zCDP(0.1)).seeded is False
    assert acct.report().n_seeded == 1
    assert "seeded" in str(acct.report())


def test_refused_seeded_spend_does_not_warn() -> None:
    acct = Accountant(pf.zCDP(0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(BudgetExceededError):
            acct.spend(pf.zCDP(1.0), seeded=True)


# --------------------------------------------------------------------------- report


def test_report_matches_conversions(make) -> None:
    acct = make(pf.zCDP(1.0), delta=1e-5)
    acct.spend(pf.zCDP(0.25), label="a")
    acct.spend(pf.zCDP(0.125), label="b")
    r = acct.report()
    assert isinstance(r, BudgetReport)
    spent, left = pf.zCDP(0.375), pf.zCDP(0.625)
    assert (r.budget_rho, r.spent_rho, r.remaining_rho) == (1.0, 0.375, 0.625)
    assert r.delta == 1e-5
    assert r.budget_epsilon == pf.zCDP(1.0).epsilon(1e-5)
    assert r.spent_epsilon == spent.epsilon(1e-5)
    assert r.remaining_epsilon == left.epsilon(1e-5)
    assert r.spent_mu == spent.to_gdp().mu
    assert r.remaining_mu == left.to_gdp().mu
    assert r.budget_mu == pytest.approx(2**0.5)
    assert r.n_entries == 2
    assert 0 < r.spent_epsilon < r.budget_epsilon
    # the exact Gaussian curve is reported beside, and is tighter than the general bound
    assert r.spent_epsilon_gaussian == spent.to_gdp().epsilon(1e-5)
    assert r.spent_epsilon_gaussian < r.spent_epsilon
    text = str(r)
    needles = ("rho", "epsilon", "delta=1e-05", "mu", "0.375", "0.625", "2 ledger entries", "GDP")
    for needle in needles:
        assert needle in text
    with pytest.raises(AttributeError):
        r.spent_rho = 0.0  # type: ignore[misc]


def test_report_of_approx_dp_budget_is_within_it() -> None:
    acct = Accountant(pf.ApproxDP(1.0, 1e-6).to_zcdp())
    r = acct.report()
    assert r.delta == 1e-6
    assert r.budget_epsilon <= 1.0 + 1e-9


def test_report_with_delta_spent_outright() -> None:
    acct = Accountant(pf.zCDP(1.0, 1e-6), delta=1e-5)
    acct.spend(pf.zCDP(0.25, 1e-7), label="partition selection")
    r = acct.report()
    assert (r.budget_delta, r.spent_delta, r.remaining_delta) == (1e-6, 1e-7, 9e-7)
    assert r.spent + r.remaining == r.budget  # exactly, in rho and in delta
    # each row is (epsilon, delta + its own delta)-DP
    assert r.spent_epsilon == pf.zCDP(0.25, 1e-7).epsilon(Fraction(101, 10**7))
    assert r.budget_epsilon == pf.zCDP(1.0, 1e-6).epsilon(Fraction(11, 10**6))
    assert r.spent_epsilon_gaussian is None  # the Gaussian curve says nothing about δ spent
    text = str(r)
    assert "delta spent outright" in text
    assert "the conversion's slack 1e-05 + the row's delta spent outright" in text


def test_an_approx_dp_budget_without_delta_has_no_zcdp_allowance() -> None:
    # Gaussian (zCDP) releases cannot meet delta = 0; the budget is spent as (epsilon, 0).
    with pytest.raises(InvalidBudgetError, match="pure-DP"):
        Accountant(pf.ApproxDP(1.0, 0.0).to_zcdp())
    assert Accountant(pf.ApproxDP(1.0, 0.0)).kind is pf.ApproxDP
