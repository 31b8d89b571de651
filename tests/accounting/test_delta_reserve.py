"""An (ε, δ) budget converted into ρ plus a δ reserve for private partition selection.

``ApproxDP(ε, δ).to_zcdp(selection_delta=δ_s)`` is ``zCDP(ρ, δ_s)`` with
ρ = from_approx_dp(ε, δ − δ_s): (ρ, δ_s)-approximate zCDP implies
(ε_ρ(δ − δ_s), δ)-DP. No statistical tests here.
"""

from __future__ import annotations

import math
import pickle
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest

import privframe as pf
from privframe import accounting
from privframe.accounting.accountant import DEFAULT_REPORTING_DELTA, Accountant
from privframe.api.query import Query
from privframe.errors import InvalidArgumentError, InvalidBudgetError, LedgerError
from privframe.mechanisms.noise import SeededRandomness

CASES = [
    (1.0, 1e-6, 1e-7),
    (1.0, 1e-5, 1e-6),
    (0.1, 1e-8, 5e-9),
    (5.0, 1e-3, 9.99e-4),
    (1.0, 1e-6, math.nextafter(1e-6, 0.0)),  # almost all of δ reserved
    (2.0, 0.3, 0.1),  # δ₁ = 0.3 − 0.1 = 0.2 exactly (not a float difference)
]


def _slack(delta: float, reserve: float) -> Fraction:
    """δ − δ_s exactly, with both read as written (their shortest decimals)."""
    return Fraction(repr(delta)) - Fraction(repr(reserve))


# -- the conversion -------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "delta", "reserve"), CASES)
def test_reserved_budget_implies_the_users_epsilon_delta(
    eps: float, delta: float, reserve: float
) -> None:
    budget = pf.ApproxDP(eps, delta).to_zcdp(selection_delta=reserve)
    s = _slack(delta, reserve)
    assert budget.exact_delta == Fraction(repr(reserve))  # δ_s kept exactly
    assert s + budget.exact_delta == Fraction(repr(delta))
    assert budget.exact_rho == pf.zCDP.from_approx_dp(eps, s).exact_rho
    # ρ-zCDP gives ε at δ − δ_s, and with δ_s spent outright the statement is at δ.
    assert 0 < pf.zCDP(budget.exact_rho).epsilon(s) <= eps
    assert budget.epsilon(delta) <= eps
    # Rounded down, and tight: a ρ larger by a relative 1e-9 already exceeds ε.
    assert pf.zCDP(budget.exact_rho * (1 + Fraction(1, 10**9))).epsilon(s) > eps
    assert budget.converted_from == pf.ApproxDP(eps, delta)


def test_zero_reserve_is_the_all_to_rho_conversion() -> None:
    old = pf.zCDP.from_approx_dp(1.0, 1e-6)
    for budget in (
        pf.ApproxDP(1.0, 1e-6).to_zcdp(),
        pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=0.0),
        pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=0),
        accounting.to_zcdp(pf.ApproxDP(1.0, 1e-6)),
    ):
        assert budget == old
        assert (budget.rho, budget.delta) == (old.rho, 0.0)


def test_a_larger_reserve_leaves_less_rho() -> None:
    rhos = [pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=r).rho for r in (0.0, 1e-8, 1e-7, 5e-7)]
    assert rhos == sorted(rhos, reverse=True)
    assert len(set(rhos)) == len(rhos)


@pytest.mark.parametrize(
    "reserve",
    [1e-6, 2e-6, 0.5, -1e-9, -0.0 - 1e-300, math.nan, math.inf, -math.inf, 10**400],
    ids=repr,
)
def test_bad_reserve_values_are_refused(reserve: object) -> None:
    with pytest.raises(InvalidBudgetError, match="selection_delta"):
        pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=reserve)  # type: ignore[arg-type]


def test_a_reserve_that_is_not_a_float_is_kept_exactly() -> None:
    budget = pf.ApproxDP(1.0, 0.5).to_zcdp(selection_delta=Fraction(1, 3))
    assert budget.exact_delta == Fraction(1, 3)
    assert budget.epsilon(0.5) <= 1.0


@pytest.mark.parametrize("reserve", ["1e-7", None, True, [1e-7], 1j], ids=repr)
def test_reserve_of_the_wrong_type_is_refused(reserve: object) -> None:
    with pytest.raises(InvalidArgumentError, match="selection_delta"):
        pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=reserve)  # type: ignore[arg-type]


def test_pure_dp_budget_is_refused_with_or_without_a_reserve() -> None:
    for reserve in (0.0, 1e-7):
        with pytest.raises(InvalidBudgetError, match="pure-DP"):
            pf.ApproxDP(1.0, 0.0).to_zcdp(selection_delta=reserve)


def test_numpy_and_int_reserves_are_accepted() -> None:
    np = pytest.importorskip("numpy")
    a = pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=np.float64(1e-7))
    assert a == pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
    assert pf.ApproxDP(1.0, 0.5).to_zcdp(selection_delta=np.int64(0)).delta == 0.0


# -- converted_from: provenance, checked ----------------------------------------------


def test_converted_from_is_provenance_not_a_parameter() -> None:
    converted = pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
    plain = pf.zCDP(converted.exact_rho, delta=1e-7)
    assert converted == plain
    assert hash(converted) == hash(plain)
    assert converted <= plain
    assert plain <= converted
    assert not converted < plain
    assert (converted + pf.zCDP(0.0)).converted_from is None
    assert (converted - pf.zCDP(0.0)).converted_from is None
    assert "converted_from=ApproxDP(epsilon=1.0, delta=1e-06)" in repr(converted)
    rho = converted.exact_rho  # a computed float's binary value: shown rounded, marked ≈
    assert repr(plain) == f"zCDP(rho≈{float(rho):.6g}, delta=1e-07)"
    assert pickle.loads(pickle.dumps(converted)).converted_from == converted.converted_from


def test_converted_from_is_checked() -> None:
    source = pf.ApproxDP(1.0, 1e-6)
    rho = source.to_zcdp(selection_delta=1e-7).exact_rho
    assert pf.zCDP(rho, 1e-7, converted_from=source).converted_from == source
    with pytest.raises(InvalidBudgetError, match="does not imply"):
        pf.zCDP(1.0, 1e-7, converted_from=source)
    with pytest.raises(InvalidBudgetError, match="does not imply"):
        pf.zCDP(rho * (1 + Fraction(1, 10**9)), 1e-7, converted_from=source)
    with pytest.raises(InvalidBudgetError, match="converted_from"):
        pf.zCDP(0.0, 1e-6, converted_from=source)  # δ₀ must be below the source's δ
    with pytest.raises(InvalidArgumentError, match="converted_from"):
        pf.zCDP(0.0, converted_from=pf.GDP(1.0))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pf.zCDP(0.0, 0.0, source)  # type: ignore[misc]  # keyword only


# -- the accountant's reporting δ and report ------------------------------------------


def test_accountant_reports_a_converted_budget_at_the_users_delta() -> None:
    budget = pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
    acct = Accountant(budget)
    assert acct.budget == budget
    assert acct.budget.converted_from == pf.ApproxDP(1.0, 1e-6)
    assert acct.delta == 9e-7  # the slack 1e-6 − 1e-7, not the 1e-6 default
    r = acct.report()
    assert r.budget_delta == 1e-7
    assert _slack(1e-6, 1e-7) + r.budget.exact_delta == Fraction(1, 10**6)
    assert r.budget_epsilon <= 1.0
    # An explicit reporting δ still wins.
    assert Accountant(budget, delta=1e-8).delta == 1e-8


@pytest.mark.parametrize(("eps", "delta", "reserve"), CASES)
def test_spending_the_whole_budget_reports_the_users_epsilon_at_the_users_delta(
    eps: float, delta: float, reserve: float
) -> None:
    acct = Accountant(pf.ApproxDP(eps, delta).to_zcdp(selection_delta=reserve))
    rho = acct.budget.exact_rho
    _ = acct.spend(pf.zCDP(rho / 2), label="gaussian")
    _ = acct.spend(pf.zCDP(0.0, delta=Fraction(repr(reserve)) / 2), label="selection")
    part = acct.report()
    assert part.spent_epsilon <= eps
    assert _slack(delta, reserve) + part.spent.exact_delta < Fraction(repr(delta))
    _ = acct.spend(acct.remaining, label="the rest")
    r = acct.report()
    assert r.spent == acct.budget
    assert r.remaining == pf.zCDP(0)
    # the spent row is stated at exactly the user's δ
    assert _slack(delta, reserve) + r.spent.exact_delta == Fraction(repr(delta))
    assert r.spent_epsilon <= eps
    assert r.spent_epsilon == r.budget_epsilon
    assert f"{delta:.6g}" in str(r)


def test_plain_approx_dp_budget_is_unchanged() -> None:
    acct = Accountant(pf.ApproxDP(1.0, 1e-5).to_zcdp())
    assert acct.budget == pf.zCDP.from_approx_dp(1.0, 1e-5)
    assert acct.budget.delta == 0.0
    assert acct.delta == 1e-5
    assert Accountant(pf.zCDP(1.0, delta=1e-7)).delta == DEFAULT_REPORTING_DELTA


def test_a_ledger_file_remembers_the_reserve(tmp_path: Path) -> None:
    path = tmp_path / "reserve.ledger"
    budget = pf.ApproxDP(1.0, 1e-6).to_zcdp(selection_delta=1e-7)
    with Accountant(budget, path) as acct:
        _ = acct.spend(pf.zCDP(0.001, delta=1e-8), label="q1")
    with Accountant(budget, path) as again:
        assert again.spent == pf.zCDP(0.001, delta=1e-8)
        assert again.delta == 9e-7
    # Reopening with the all-to-rho conversion of the same (ε, δ) would raise ρ: refused.
    with pytest.raises(LedgerError, match="larger"):
        Accountant(pf.ApproxDP(1.0, 1e-6).to_zcdp(), path)


# -- end to end through a Session -----------------------------------------------------


def _data(big: int = 200) -> pl.DataFrame:
    return pl.DataFrame({"uid": list(range(2 * big)), "g": ["a"] * big + ["b"] * big})


def _select(sess: pf.Session) -> Query:
    return sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g").agg(pf.count())


@pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")
def test_session_with_a_reserve_selects_groups_privately() -> None:
    budget = pf.ApproxDP(1.0, 1e-5).to_zcdp(selection_delta=1e-6)
    sess = pf.Session(_data(), "uid", budget=budget, rng=SeededRandomness(7))
    out = _select(sess).release(rho=budget.exact_rho / 2)
    assert out["g"].to_list() == ["a", "b"]  # 200 units each: far above the threshold
    entry = sess.ledger[-1]
    assert 0 < entry.delta <= 1e-6
    assert entry.description["selection"]["delta"] == entry.delta  # type: ignore[index]
    r = sess.report()
    assert r.spent_epsilon <= 1.0
    assert _slack(1e-5, 1e-6) + r.spent.exact_delta <= Fraction(1, 10**5)
    assert r.budget_epsilon <= 1.0
    # The reserve is spent (by default all of it): a second selection is refused.
    assert sess.remaining.delta == 0.0
    with pytest.raises(pf.InvalidBudgetError, match="public keys"):
        _select(sess).release(rho=budget.exact_rho / 4)


def test_session_with_a_plain_approx_dp_budget_refuses_selection() -> None:
    sess = pf.Session(_data(), "uid", budget=pf.ApproxDP(1.0, 1e-5).to_zcdp())
    with pytest.raises(pf.InvalidBudgetError, match="public keys"):
        _select(sess).release(rho=0.01)
    assert sess.ledger == ()
