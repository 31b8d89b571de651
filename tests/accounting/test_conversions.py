"""privframe.accounting conversions and calibration against the reference values.

Tolerances come from ``meta.suggested_tolerances`` of the reference JSON:
closed forms rel 1e-12, solved quantities rel 1e-9.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import pytest

import privframe as pf
from privframe import numeric
from privframe.accounting import budgets, calibration, conversions
from privframe.errors import CalibrationError, InvalidBudgetError

CLOSED = 1e-12  # meta.suggested_tolerances: closed forms
SOLVED = 1e-9  # meta.suggested_tolerances: solved quantities

RHOS = (1e-6, 1e-3, 0.01, 0.1, 0.5, 1.0, 3.0, 10.0, 100.0)
DELTAS = (1e-14, 1e-10, 1e-6, 1e-3, 0.1, 0.5)
EPSILONS = (0.01, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)


def close(actual: float, expected: float, rel: float) -> bool:
    return math.isclose(actual, expected, rel_tol=rel, abs_tol=0.0)


def increasing_once_positive(values: list[float]) -> bool:
    """Non-decreasing, and strictly increasing wherever the earlier value is > 0.

    ε is exactly 0 while δ exceeds the total-variation distance, so a run of
    leading zeros is expected for large δ.
    """
    pairs = itertools.pairwise(values)
    return all(a < b or a == b == 0 for a, b in pairs) and values[-1] > 0


def _tolerance_text(ref: dict[str, Any], key: str) -> str:
    return next(v for k, v in ref["meta"]["suggested_tolerances"].items() if k.startswith(key))


def test_reference_tolerances_are_the_ones_used(reference_values: dict[str, Any]) -> None:
    assert _tolerance_text(reference_values, "closed_forms").split() == ["rel", "1e-12"]
    assert _tolerance_text(reference_values, "solved").split() == ["rel", "1e-9"]
    assert (CLOSED, SOLVED) == (1e-12, 1e-9)


# ---------------------------------------------------------------------------
# Classical Gaussian (Dwork & Roth 2014, Thm. A.1)
# ---------------------------------------------------------------------------


def test_classical_sigma_matches_reference_below_one(reference_values: dict[str, Any]) -> None:
    rows = [r for r in reference_values["classical_gaussian"]["values"] if r["eps"] < 1]
    assert rows
    for row in rows:
        sigma = calibration.classical_gaussian_sigma(row["Delta"], row["eps"], row["delta"])
        assert close(sigma, row["sigma"], CLOSED), row
        assert sigma >= row["sigma"]  # rounded up


def test_classical_sigma_refuses_epsilon_at_least_one(reference_values: dict[str, Any]) -> None:
    rows = [r for r in reference_values["classical_gaussian"]["values"] if r["eps"] >= 1]
    assert rows
    for row in rows:
        with pytest.raises(CalibrationError, match="analytic_gaussian_sigma"):
            calibration.classical_gaussian_sigma(row["Delta"], row["eps"], row["delta"])
    with pytest.raises(CalibrationError, match=r"epsilon < 1"):
        calibration.classical_gaussian_sigma(1.0, 1.0, 1e-5)


def test_classical_sigma_delta_on_exact_curve(reference_values: dict[str, Any]) -> None:
    for row in reference_values["classical_gaussian"]["values"]:
        delta = pf.GDP(row["Delta"] / row["sigma"]).delta(row["eps"])
        assert close(delta, row["exact_delta_at_this_sigma"], SOLVED), row
        assert (delta <= row["delta"]) == row["classical_sigma_actually_achieves_eps_delta"]


def _classical_formula(eps: float, delta: float) -> float:
    return math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_classical_formula_failure_region(reference_values: dict[str, Any]) -> None:
    failures = reference_values["classical_gaussian"]["classical_formula_failure_for_large_eps"]
    assert failures
    for row in failures:
        delta, eps = row["delta"], row["example_eps"]
        sigma = _classical_formula(eps, delta)
        assert close(sigma, row["example_classical_sigma"], CLOSED)
        actual = pf.GDP(1 / sigma).delta(eps)
        assert close(actual, row["example_actual_delta_at_eps_10"], SOLVED)
        assert actual > delta
        # The threshold: the formula holds just below it and fails just above it.
        edge = row["eps_above_which_classical_sigma_fails"]
        below, above = edge * (1 - 1e-6), edge * (1 + 1e-6)
        assert pf.GDP(1 / _classical_formula(below, delta)).delta(below) <= delta
        assert pf.GDP(1 / _classical_formula(above, delta)).delta(above) > delta


# ---------------------------------------------------------------------------
# Analytic Gaussian (Balle & Wang 2018, Thm. 8)
# ---------------------------------------------------------------------------


def test_analytic_sigma_matches_reference(reference_values: dict[str, Any]) -> None:
    for row in reference_values["analytic_gaussian"]["values"]:
        sens, eps, delta = row["Delta"], row["eps"], row["delta"]
        sigma = calibration.analytic_gaussian_sigma(sens, eps, delta)
        assert close(sigma, row["sigma"], SOLVED), row
        # Conservative: the exact curve at σ meets δ; tight: slightly less σ does not.
        assert pf.GDP(sens / sigma).delta(eps) <= delta
        assert pf.GDP(sens / (sigma * (1 - 1e-7))).delta(eps) > delta
        assert sigma < row["classical_sigma"]


def test_analytic_sigma_scales_with_sensitivity() -> None:
    base = calibration.analytic_gaussian_sigma(1.0, 1.0, 1e-6)
    for sens in (1e-3, 0.5, 3.0, 1e4):
        assert close(calibration.analytic_gaussian_sigma(sens, 1.0, 1e-6), sens * base, SOLVED)


def test_analytic_sigma_monotone() -> None:
    by_eps = [calibration.analytic_gaussian_sigma(1.0, e, 1e-6) for e in (0.0, *EPSILONS)]
    assert all(a > b for a, b in itertools.pairwise(by_eps))
    by_delta = [calibration.analytic_gaussian_sigma(1.0, 1.0, d) for d in DELTAS]
    assert all(a > b for a, b in itertools.pairwise(by_delta))


def test_analytic_sigma_at_epsilon_zero_is_total_variation() -> None:
    # At ε = 0 the curve is 2Φ(μ/2) − 1 = δ, i.e. μ = 2Φ⁻¹((1+δ)/2).
    from scipy.special import ndtri

    for delta in (1e-3, 0.1, 0.5):
        sigma = calibration.analytic_gaussian_sigma(1.0, 0.0, delta)
        assert close(sigma, 1 / (2 * float(ndtri((1 + delta) / 2))), SOLVED)


# ---------------------------------------------------------------------------
# zCDP -> (ε, δ)
# ---------------------------------------------------------------------------


def test_cks_stationarity_claim(reference_values: dict[str, Any]) -> None:
    # The optimal α solves ρ(α−1)² + ln(αδ) = 0 (derivative of the CKS ε in α).
    for row in reference_values["zcdp_to_dp"]["values"]:
        alpha, rho, delta = row["eps_cks_optimal_alpha"], row["rho"], row["delta"]
        residual = rho * (alpha - 1) ** 2 + math.log(alpha * delta)
        assert abs(residual) <= 1e-9 * math.log(1 / delta)


def test_zcdp_epsilon_matches_reference(reference_values: dict[str, Any]) -> None:
    rows = reference_values["zcdp_to_dp"]["values"]
    assert len(rows) >= 20
    for row in rows:
        rho, delta = row["rho"], row["delta"]
        budget = pf.zCDP(rho)
        simple = conversions.zcdp_epsilon_simple(rho, delta)
        cks = budget.epsilon(delta)
        gaussian = budget.to_gdp().epsilon(delta)
        assert close(simple, row["eps_simple"], CLOSED), row
        assert close(cks, row["eps_cks"], SOLVED), row
        assert close(budget.to_gdp().mu, row["mu_gdp"], CLOSED), row
        assert close(gaussian, row["eps_gaussian_exact"], SOLVED), row
        assert gaussian <= cks <= simple
        # Rounded up: never below the high-precision values.
        assert cks >= row["eps_cks"]
        assert simple >= row["eps_simple"]
        assert gaussian >= row["eps_gaussian_exact"]


def test_zcdp_delta_matches_reference(reference_values: dict[str, Any]) -> None:
    for row in reference_values["zcdp_to_dp"]["values"]:
        delta = pf.zCDP(row["rho"]).delta_at(row["eps_cks"])
        assert close(delta, row["eps_cks_roundtrip_delta_via_delta_form"], SOLVED), row


def test_cks_never_looser_than_simple_and_gaussian_never_looser_than_cks() -> None:
    for rho in RHOS:
        for delta in DELTAS:
            budget = pf.zCDP(rho)
            cks = budget.epsilon(delta)
            assert cks <= conversions.zcdp_epsilon_simple(rho, delta)
            assert budget.to_gdp().epsilon(delta) <= cks * (1 + 1e-12)


def test_zcdp_epsilon_monotone() -> None:
    for delta in DELTAS:
        eps = [pf.zCDP(rho).epsilon(delta) for rho in RHOS]
        assert increasing_once_positive(eps)
    for rho in RHOS:
        eps = [pf.zCDP(rho).epsilon(delta) for delta in DELTAS]
        assert all(a >= b for a, b in itertools.pairwise(eps))
        assert eps[0] > eps[-1]


def test_zcdp_delta_monotone_and_inverse_of_epsilon() -> None:
    for rho in RHOS:
        budget = pf.zCDP(rho)
        deltas = [budget.delta_at(e) for e in (0.0, *EPSILONS)]
        assert all(a >= b for a, b in itertools.pairwise(deltas))
        for delta in (1e-10, 1e-6, 1e-3):
            eps = budget.epsilon(delta)
            if eps > 0:
                assert close(budget.delta_at(eps), delta, SOLVED)


def test_zcdp_zero_rho() -> None:
    assert pf.zCDP(0.0).epsilon(1e-6) == 0.0
    assert pf.zCDP(0.0).delta_at(0.0) == 0.0
    # δ₀ = 1e-7 exactly; stated as a float it rounds up.
    assert pf.zCDP(0.0, delta=1e-7).delta_at(0.3) == numeric.round_up(Fraction(1, 10**7))
    assert pf.zCDP(0.0).to_gdp() == pf.GDP(0.0)
    assert pf.GDP(0.0).epsilon(1e-9) == 0.0
    assert pf.GDP(0.0).delta(0.0) == 0.0


def test_approximate_zcdp_conversion_spends_its_own_delta_first() -> None:
    delta0 = 1e-7
    budget = pf.zCDP(0.3, delta=delta0)
    for total in (2e-7, 1e-6, 1e-3):
        residual = float(Fraction(total) - Fraction(delta0))
        eps = budget.epsilon(total)
        assert close(eps, pf.zCDP(0.3).epsilon(residual), 1e-12)
        assert eps >= pf.zCDP(0.3).epsilon(residual)
        assert eps > pf.zCDP(0.3).epsilon(total)
    for eps in (0.5, 2.0):
        assert close(budget.delta_at(eps), pf.zCDP(0.3).delta_at(eps) + delta0, 1e-12)
    for total in (delta0, delta0 / 2):
        with pytest.raises(InvalidBudgetError, match="delta"):
            budget.epsilon(total)


def test_composition_examples(reference_values: dict[str, Any]) -> None:
    examples = reference_values["composition"]["examples"]
    assert examples
    for example in examples:
        sens = example["sensitivity"]
        total, mu_total = pf.zCDP(0.0), pf.GDP(0.0)
        for sigma, count in example["sigmas_with_multiplicity"]:
            for _ in range(count):
                total = total + pf.zCDP(calibration.gaussian_rho(sens, sigma))
                mu_total = mu_total + pf.GDP(sens / sigma)
        exact = Fraction(example["rho_total_exact_fraction"])
        assert Fraction(total.rho) >= exact  # spends round up
        assert close(total.rho, example["rho_total"], CLOSED)
        assert close(mu_total.mu, math.sqrt(2 * example["rho_total"]), CLOSED)
        assert close(
            calibration.gaussian_sigma(sens, total.rho),
            example["equivalent_single_gaussian_sigma"],
            CLOSED,
        )
        for conv in example["conversions"]:
            delta = conv["delta"]
            assert close(
                conversions.zcdp_epsilon_simple(total.rho, delta), conv["eps_simple"], CLOSED
            )
            assert close(total.epsilon(delta), conv["eps_cks"], SOLVED)
            assert close(total.to_gdp().epsilon(delta), conv["eps_gaussian_exact"], SOLVED)
            assert close(mu_total.epsilon(delta), conv["eps_gaussian_exact"], SOLVED)


# ---------------------------------------------------------------------------
# (ε, δ) -> zCDP
# ---------------------------------------------------------------------------


def test_from_approx_dp_matches_reference(reference_values: dict[str, Any]) -> None:
    rows = reference_values["zcdp_inverse_rho_for_eps_delta"]["values"]
    assert rows
    for row in rows:
        eps, delta = row["eps"], row["delta"]
        budget = pf.zCDP.from_approx_dp(eps, delta)
        assert close(budget.rho, row["rho_max_cks"], SOLVED), row
        assert budget.delta == 0.0
        assert budget.epsilon(delta) <= eps  # conservative round trip
        assert row["rho_max_simple_conversion"] < budget.rho
        assert budget.rho < row["rho_of_analytic_gaussian_same_eps_delta"]


def test_from_approx_dp_round_trip_and_monotone() -> None:
    for delta in DELTAS:
        rhos = []
        for eps in (0.0, *EPSILONS):
            budget = pf.zCDP.from_approx_dp(eps, delta)
            back = budget.epsilon(delta)
            assert back <= eps
            if eps > 0:
                assert close(back, eps, SOLVED)
                # Maximal: a slightly larger ρ overshoots ε.
                assert pf.zCDP(budget.rho * (1 + 1e-8)).epsilon(delta) > eps
            rhos.append(budget.rho)
        assert all(a < b for a, b in itertools.pairwise(rhos))
    by_delta = [pf.zCDP.from_approx_dp(1.0, d).rho for d in DELTAS]
    assert all(a < b for a, b in itertools.pairwise(by_delta))


def test_to_zcdp() -> None:
    budget = pf.zCDP(0.25, delta=1e-9)
    assert budgets.to_zcdp(budget) is budget
    assert budgets.to_zcdp(pf.ApproxDP(1.0, 1e-6)) == pf.zCDP.from_approx_dp(1.0, 1e-6)
    assert budgets.to_zcdp(pf.GDP(1.0)) == pf.zCDP(0.5)
    with pytest.raises(InvalidBudgetError, match="pure-DP"):
        budgets.to_zcdp(pf.ApproxDP(1.0, 0.0))
    with pytest.raises(InvalidBudgetError, match="budget must be"):
        budgets.to_zcdp(0.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# GDP
# ---------------------------------------------------------------------------


def test_gdp_epsilon_and_delta_are_inverse() -> None:
    for mu in (0.01, 0.3, 1.0, 2.5, 10.0):
        gdp = pf.GDP(mu)
        for delta in DELTAS:
            eps = gdp.epsilon(delta)
            assert gdp.delta(eps) <= delta
            if eps > 0:
                assert close(gdp.delta(eps), delta, SOLVED)
                assert gdp.delta(eps * (1 - 1e-7)) > delta


def test_gdp_monotone() -> None:
    mus = (0.01, 0.3, 1.0, 2.5, 10.0)
    for delta in DELTAS:
        eps = [pf.GDP(mu).epsilon(delta) for mu in mus]
        assert increasing_once_positive(eps)
    deltas = [pf.GDP(1.0).delta(e) for e in (0.0, *EPSILONS)]
    assert all(a > b for a, b in itertools.pairwise(deltas))


def test_gdp_delta_at_zero_is_total_variation() -> None:
    for mu in (0.1, 1.0, 3.0):
        expected = math.erf(mu / (2 * math.sqrt(2)))  # 2Φ(μ/2) − 1
        assert close(pf.GDP(mu).delta(0.0), expected, 1e-12)


def test_gdp_to_zcdp_is_exact_and_zcdp_to_gdp_rounds_up() -> None:
    for mu in (0.1, 0.3, 1.7, 2.9):  # μ²/2 not a float, but exact: μ is read as written
        exact = numeric.exact("mu", mu) ** 2 / 2
        assert pf.GDP(mu).to_zcdp().exact_rho == exact == budgets.to_zcdp(pf.GDP(mu)).exact_rho
    assert pf.GDP(0.3).to_zcdp() == pf.zCDP(0.045)
    for rho in (0.1, 0.3, 0.7, 1e-5):
        mu = pf.zCDP(rho).to_gdp().mu
        assert Fraction(mu) ** 2 >= 2 * numeric.exact("rho", rho)
        assert Fraction(math.nextafter(mu, 0.0)) ** 2 < 2 * numeric.exact("rho", rho)


# ---------------------------------------------------------------------------
# Calibration by ρ and budget arithmetic: exact, conservative rounding
# ---------------------------------------------------------------------------

SENSITIVITIES = (1e-3, 0.1, 1.0, math.sqrt(2), 3.0, 7.5, 1e3)
TARGET_RHOS = (1e-4, 0.01, 0.1, 1 / 3, 0.5, 2.0, 17.0)


def test_gaussian_sigma_is_smallest_float_within_rho() -> None:
    for sens in SENSITIVITIES:
        for rho in TARGET_RHOS:
            sigma = calibration.gaussian_sigma(sens, rho)
            share = numeric.exact("rho", rho)  # ρ is a budget, read as written
            spent = Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2)
            assert spent <= share
            smaller = math.nextafter(sigma, 0.0)
            assert Fraction(sens) ** 2 / (2 * Fraction(smaller) ** 2) > share
            assert close(sigma, sens / math.sqrt(2 * rho), 1e-15)
            assert calibration.gaussian_rho(sens, sigma) <= numeric.round_up(share)


def test_gaussian_rho_rounds_up() -> None:
    for sens in SENSITIVITIES:
        for sigma in (0.3, 1.0, 2.2, 10.0, 123.456):
            rho = calibration.gaussian_rho(sens, sigma)
            exact = Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2)
            # The float up, or the one after it when that one's decimal reads below.
            below = math.nextafter(math.nextafter(rho, 0.0), 0.0)
            assert numeric.exact("rho", rho) >= exact > Fraction(below)


def test_gaussian_sigma_monotone() -> None:
    sigmas = [calibration.gaussian_sigma(1.0, rho) for rho in TARGET_RHOS]
    assert all(a > b for a, b in itertools.pairwise(sigmas))


def test_budget_arithmetic_is_exact_on_the_numbers_as_written() -> None:
    pairs = [(0.1, 0.2), (1 / 3, 1 / 7), (0.7, 1e-17), (1e-3, 0.3), (Fraction(1, 3), 0.25)]
    for a, b in pairs:
        x, y = numeric.exact("a", a), numeric.exact("b", b)
        total = pf.zCDP(a, delta=b / 10) + pf.zCDP(b, delta=a / 10)
        assert total.exact_rho == x + y
        assert total.exact_delta == numeric.exact("d", b / 10) + numeric.exact("d", a / 10)
        assert (pf.ApproxDP(a, 1e-9) + pf.ApproxDP(b, 1e-9)).exact_epsilon == x + y
        if x >= y:
            assert (pf.zCDP(a) - pf.zCDP(b)).exact_rho == x - y
            assert (pf.ApproxDP(a) - pf.ApproxDP(b)).exact_epsilon == x - y
        mu = (pf.GDP(a) + pf.GDP(b)).mu  # a square root: rounded up
        assert Fraction(mu) ** 2 >= x**2 + y**2
    assert pf.zCDP(0.1) + pf.zCDP(0.2) == pf.zCDP(0.3)  # not 0.30000000000000004
    with pytest.raises(InvalidBudgetError, match="cannot subtract"):
        pf.zCDP(0.1) - pf.zCDP(0.2)
