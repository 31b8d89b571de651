"""Tests for privframe.accounting against the independently computed reference values.

Tolerances come from ``meta.suggested_tolerances`` of the reference JSON:
closed forms rel 1e-12, solved quantities rel 1e-9.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import privframe as pf
from privframe.accounting import _numbers, budgets, calibration, conversions
from privframe.errors import CalibrationError, InvalidArgumentError, InvalidBudgetError

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
    assert pf.zCDP(0.0, delta=1e-7).delta_at(0.3) == _numbers.round_up(Fraction(1, 10**7))
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
        exact = _numbers.exact("mu", mu) ** 2 / 2
        assert pf.GDP(mu).to_zcdp().exact_rho == exact == budgets.to_zcdp(pf.GDP(mu)).exact_rho
    assert pf.GDP(0.3).to_zcdp() == pf.zCDP(0.045)
    for rho in (0.1, 0.3, 0.7, 1e-5):
        mu = pf.zCDP(rho).to_gdp().mu
        assert Fraction(mu) ** 2 >= 2 * _numbers.exact("rho", rho)
        assert Fraction(math.nextafter(mu, 0.0)) ** 2 < 2 * _numbers.exact("rho", rho)


# ---------------------------------------------------------------------------
# Calibration by ρ and budget arithmetic: exact, conservative rounding
# ---------------------------------------------------------------------------

SENSITIVITIES = (1e-3, 0.1, 1.0, math.sqrt(2), 3.0, 7.5, 1e3)
TARGET_RHOS = (1e-4, 0.01, 0.1, 1 / 3, 0.5, 2.0, 17.0)


def test_gaussian_sigma_is_smallest_float_within_rho() -> None:
    for sens in SENSITIVITIES:
        for rho in TARGET_RHOS:
            sigma = calibration.gaussian_sigma(sens, rho)
            share = _numbers.exact("rho", rho)  # ρ is a budget, read as written
            spent = Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2)
            assert spent <= share
            smaller = math.nextafter(sigma, 0.0)
            assert Fraction(sens) ** 2 / (2 * Fraction(smaller) ** 2) > share
            assert close(sigma, sens / math.sqrt(2 * rho), 1e-15)
            assert calibration.gaussian_rho(sens, sigma) <= _numbers.round_up(share)


def test_gaussian_rho_rounds_up() -> None:
    for sens in SENSITIVITIES:
        for sigma in (0.3, 1.0, 2.2, 10.0, 123.456):
            rho = calibration.gaussian_rho(sens, sigma)
            exact = Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2)
            # The float up, or the one after it when that one's decimal reads below.
            below = math.nextafter(math.nextafter(rho, 0.0), 0.0)
            assert _numbers.exact("rho", rho) >= exact > Fraction(below)


def test_gaussian_sigma_monotone() -> None:
    sigmas = [calibration.gaussian_sigma(1.0, rho) for rho in TARGET_RHOS]
    assert all(a > b for a, b in itertools.pairwise(sigmas))


def test_budget_arithmetic_is_exact_on_the_numbers_as_written() -> None:
    pairs = [(0.1, 0.2), (1 / 3, 1 / 7), (0.7, 1e-17), (1e-3, 0.3), (Fraction(1, 3), 0.25)]
    for a, b in pairs:
        x, y = _numbers.exact("a", a), _numbers.exact("b", b)
        total = pf.zCDP(a, delta=b / 10) + pf.zCDP(b, delta=a / 10)
        assert total.exact_rho == x + y
        assert total.exact_delta == _numbers.exact("d", b / 10) + _numbers.exact("d", a / 10)
        assert (pf.ApproxDP(a, 1e-9) + pf.ApproxDP(b, 1e-9)).exact_epsilon == x + y
        if x >= y:
            assert (pf.zCDP(a) - pf.zCDP(b)).exact_rho == x - y
            assert (pf.ApproxDP(a) - pf.ApproxDP(b)).exact_epsilon == x - y
        mu = (pf.GDP(a) + pf.GDP(b)).mu  # a square root: rounded up
        assert Fraction(mu) ** 2 >= x**2 + y**2
    assert pf.zCDP(0.1) + pf.zCDP(0.2) == pf.zCDP(0.3)  # not 0.30000000000000004
    with pytest.raises(InvalidBudgetError, match="cannot subtract"):
        pf.zCDP(0.1) - pf.zCDP(0.2)


# ---------------------------------------------------------------------------
# Input validation: our errors, naming the parameter, never a scipy traceback
# ---------------------------------------------------------------------------

NOT_FINITE = (math.nan, math.inf, -math.inf)


@pytest.mark.parametrize("bad", [*NOT_FINITE, -1.0, 0.0, 1.0, 1.5])
def test_conversion_delta_validated(bad: object) -> None:
    calls = [
        lambda: pf.zCDP(0.5).epsilon(bad),  # type: ignore[arg-type]
        lambda: pf.GDP(1.0).epsilon(bad),  # type: ignore[arg-type]
        lambda: pf.zCDP.from_approx_dp(1.0, bad),  # type: ignore[arg-type]
        lambda: calibration.analytic_gaussian_sigma(1.0, 1.0, bad),  # type: ignore[arg-type]
        lambda: calibration.classical_gaussian_sigma(1.0, 0.5, bad),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidBudgetError, match="delta"):
            call()


@pytest.mark.parametrize("bad", [*NOT_FINITE, -1.0, -1e-300, 10**400])
def test_epsilon_validated(bad: object) -> None:
    calls = [
        lambda: pf.zCDP(0.5).delta_at(bad),  # type: ignore[arg-type]
        lambda: pf.GDP(1.0).delta(bad),  # type: ignore[arg-type]
        lambda: pf.zCDP.from_approx_dp(bad, 1e-6),  # type: ignore[arg-type]
        lambda: calibration.analytic_gaussian_sigma(1.0, bad, 1e-6),  # type: ignore[arg-type]
        lambda: calibration.classical_gaussian_sigma(1.0, bad, 1e-6),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidBudgetError, match="epsilon"):
            call()


def test_classical_epsilon_zero_is_invalid() -> None:
    with pytest.raises(InvalidBudgetError, match="epsilon must be > 0"):
        calibration.classical_gaussian_sigma(1.0, 0.0, 1e-6)


@pytest.mark.parametrize("bad", [*NOT_FINITE, -1.0, 0.0, -(10**400)])
def test_sensitivity_and_scale_validated(bad: object) -> None:
    checks = [
        ("l2_sensitivity", lambda: calibration.gaussian_sigma(bad, 0.5)),  # type: ignore[arg-type]
        ("rho", lambda: calibration.gaussian_sigma(1.0, bad)),  # type: ignore[arg-type]
        ("l2_sensitivity", lambda: calibration.gaussian_rho(bad, 1.0)),  # type: ignore[arg-type]
        ("sigma", lambda: calibration.gaussian_rho(1.0, bad)),  # type: ignore[arg-type]
        ("l2_sensitivity", lambda: calibration.analytic_gaussian_sigma(bad, 1.0, 1e-6)),  # type: ignore[arg-type]
        ("l2_sensitivity", lambda: calibration.classical_gaussian_sigma(bad, 0.5, 1e-6)),  # type: ignore[arg-type]
    ]
    for name, call in checks:
        with pytest.raises(InvalidBudgetError, match=name):
            call()


def test_calibration_out_of_float_range_is_a_calibration_error() -> None:
    with pytest.raises(CalibrationError, match="float range"):
        calibration.gaussian_sigma(1e300, 1e-300)
    with pytest.raises(CalibrationError, match="float range"):
        calibration.gaussian_rho(1e300, 1e-300)
    with pytest.raises(InvalidBudgetError, match="mu"):
        pf.GDP(1e300).to_zcdp()


@pytest.mark.parametrize("rho", [5e-324, 1e-300, 1e-20, 1e8, 1e100, 1e300])
@pytest.mark.parametrize("delta", [1e-300, 1e-10, 0.999999])
def test_extreme_inputs_give_valid_bounds_not_tracebacks(rho: float, delta: float) -> None:
    budget = pf.zCDP(rho)
    eps = budget.epsilon(delta)
    # 5e-324 is read as 5·10⁻³²⁴, a little more than the float: ρ rounds up, δ down.
    rho_up = _numbers.round_up(_numbers.exact("rho", rho))
    assert (
        0.0
        <= eps
        <= conversions.zcdp_epsilon_simple(rho_up, _numbers.round_down(_numbers.exact("d", delta)))
    )
    assert 0.0 <= budget.delta_at(eps) <= 1.0
    assert budget.to_gdp().epsilon(delta) >= 0.0
    inverse = pf.zCDP.from_approx_dp(min(eps, 1e6), delta)
    assert inverse.epsilon(delta) <= min(eps, 1e6)


# One validator for every number: numpy scalars in, wrong types out as
# InvalidArgumentError, bad values as InvalidBudgetError, always naming the parameter.

ENTRY_POINTS = [
    ("rho", lambda v: pf.zCDP(v)),
    ("delta", lambda v: pf.zCDP(0.5, delta=v)),
    ("epsilon", lambda v: pf.ApproxDP(v, 1e-6)),
    ("delta", lambda v: pf.ApproxDP(1.0, v)),
    ("mu", lambda v: pf.GDP(v)),
    ("delta", lambda v: pf.zCDP(0.5).epsilon(v)),
    ("epsilon", lambda v: pf.zCDP(0.5).delta_at(v)),
    ("delta", lambda v: pf.GDP(1.0).epsilon(v)),
    ("epsilon", lambda v: pf.GDP(1.0).delta(v)),
    ("epsilon", lambda v: pf.zCDP.from_approx_dp(v, 1e-6)),
    ("delta", lambda v: pf.zCDP.from_approx_dp(1.0, v)),
    ("l2_sensitivity", lambda v: calibration.gaussian_sigma(v, 0.5)),
    ("rho", lambda v: calibration.gaussian_sigma(1.0, v)),
    ("sigma", lambda v: calibration.gaussian_rho(1.0, v)),
    ("epsilon", lambda v: calibration.analytic_gaussian_sigma(1.0, v, 1e-6)),
    ("delta", lambda v: calibration.classical_gaussian_sigma(1.0, 0.5, v)),
]


@pytest.mark.parametrize("bad", ["0.1", None, True, np.bool_(False), complex(1, 0), [0.5]])
def test_wrong_types_are_argument_errors(bad: object) -> None:
    for name, call in ENTRY_POINTS:
        with pytest.raises(InvalidArgumentError, match=f"{name} must be a real number"):
            call(bad)
    with pytest.raises(TypeError):  # InvalidArgumentError is a TypeError ...
        pf.zCDP(bad)  # type: ignore[arg-type]
    with pytest.raises(pf.PrivframeError):  # ... and a PrivframeError
        pf.zCDP(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cast", [np.float64, np.float32, np.float16, np.longdouble, Fraction], ids=repr
)
def test_numpy_scalars_and_fractions_are_accepted(cast: Any) -> None:
    half, tiny = cast(0.5), cast(1e-3)  # 1e-3 in float32/16 is another float
    # A budget is read as written: a numpy float as its shortest decimal at its own
    # precision (float32(1e-3) is 0.001), a Fraction as itself.
    written = Fraction(str(tiny)) if cast not in (np.float64, Fraction) else Fraction(tiny)
    if cast is np.float64:
        written = Fraction("0.001")
    assert pf.zCDP(half, delta=tiny) == pf.zCDP(0.5, delta=written)
    assert type(pf.zCDP(half).rho) is float
    assert pf.ApproxDP(half, tiny) == pf.ApproxDP(0.5, written)
    assert pf.GDP(half) == pf.GDP(0.5)
    assert pf.zCDP(0.5).epsilon(tiny) == pf.zCDP(0.5).epsilon(written)
    assert pf.GDP(1.0).delta(half) == pf.GDP(1.0).delta(0.5)
    assert calibration.gaussian_sigma(half, half) == calibration.gaussian_sigma(0.5, 0.5)
    assert calibration.analytic_gaussian_sigma(
        half, half, tiny
    ) == calibration.analytic_gaussian_sigma(0.5, 0.5, float(tiny))


@pytest.mark.parametrize("cast", [int, np.int64, np.int32, np.uint8], ids=repr)
def test_integers_are_accepted(cast: Any) -> None:
    assert pf.zCDP(cast(2)) == pf.zCDP(2.0)
    assert calibration.gaussian_sigma(
        l2_sensitivity=cast(1), rho=cast(2)
    ) == calibration.gaussian_sigma(1.0, 2.0)
    assert calibration.gaussian_rho(cast(2), cast(4)) == 0.125
    assert pf.zCDP(cast(0)).rho == 0.0


def test_private_validators_for_other_modules() -> None:
    assert _numbers.check_positive("sigma", np.float32(2.5)) == 2.5
    assert type(_numbers.check_positive("sigma", np.int64(3))) is float
    assert _numbers.check_conversion_delta(np.float64(1e-6)) == 1e-6
    assert _numbers.check_real("shift", -2) == -2.0
    with pytest.raises(InvalidBudgetError, match="sigma must be > 0"):
        _numbers.check_positive("sigma", np.float64(0.0))
    with pytest.raises(InvalidArgumentError, match="sigma"):
        _numbers.check_positive("sigma", "1")
    with pytest.raises(InvalidBudgetError, match="delta must be in"):
        _numbers.check_conversion_delta(np.float32(0.0))


def test_negative_zero_is_zero() -> None:
    assert math.copysign(1.0, pf.zCDP(-0.0).rho) == 1.0
    assert repr(pf.GDP(-0.0)) == "GDP(mu=0.0)"


@pytest.mark.parametrize(
    "inexact", [Fraction(1, 3), 2**53 + 1, -(2**60) - 1, np.int64(2**53 + 1), np.uint64(2**64 - 1)]
)
def test_values_that_no_float_represents_are_refused_not_rounded(inexact: object) -> None:
    with pytest.raises(InvalidBudgetError, match="not exactly a float"):
        _numbers.check_real("rho", inexact)
    with pytest.raises(InvalidBudgetError, match="l2_sensitivity"):
        calibration.gaussian_sigma(inexact, 0.5)  # type: ignore[arg-type]


def test_numbers_beyond_the_float_range_are_budget_errors() -> None:
    for huge in (10**400, Fraction(10**400), -(10**400)):
        with pytest.raises(InvalidBudgetError, match="rho is beyond the float range"):
            pf.zCDP(huge)  # type: ignore[arg-type]
        with pytest.raises(InvalidBudgetError, match="sigma is beyond the float range"):
            calibration.gaussian_rho(1.0, huge)  # type: ignore[arg-type]


def test_sums_beyond_the_float_range_are_budget_errors() -> None:
    with pytest.raises(InvalidBudgetError, match=r"rho is beyond the float range"):
        pf.zCDP(1e308) + pf.zCDP(1e308)
    with pytest.raises(InvalidBudgetError, match=r"epsilon is beyond the float range"):
        pf.ApproxDP(1e308, 1e-6) + pf.ApproxDP(1e308, 1e-6)
    with pytest.raises(InvalidBudgetError, match="mu"):
        pf.GDP(1.5e308) + pf.GDP(1.5e308)
    top = pf.zCDP(math.nextafter(math.inf, 0.0))
    assert (top + pf.zCDP(0.0)) == top  # the largest float itself is fine


# ---------------------------------------------------------------------------
# Budget arithmetic and order, the same for the three types
# ---------------------------------------------------------------------------


def test_gdp_subtraction_inverts_composition_rounding_down() -> None:
    assert pf.GDP(5.0) - pf.GDP(4.0) == pf.GDP(3.0)
    assert pf.GDP(1.0) - pf.GDP(1.0) == pf.GDP(0.0)
    assert pf.GDP(2.0) - pf.GDP(0.0) == pf.GDP(2.0)
    for a, b in [(1.0, 0.3), (2.9, 1.7), (0.3, 0.1), (1e300, 1e299), (1e-300, 3e-301)]:
        left = (pf.GDP(a) - pf.GDP(b)).mu
        exact = _numbers.exact("a", a) ** 2 - _numbers.exact("b", b) ** 2
        assert Fraction(left) ** 2 <= exact  # an allowance: rounded down ...
        assert Fraction(math.nextafter(left, math.inf)) ** 2 > exact  # ... by less than an ulp
        assert (pf.GDP(b) + pf.GDP(left)).mu <= math.nextafter(a, math.inf)
    with pytest.raises(InvalidBudgetError, match="cannot subtract a larger mu"):
        pf.GDP(0.3) - pf.GDP(0.4)
    with pytest.raises(TypeError):
        pf.GDP(1.0) - pf.zCDP(0.1)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("small", "large", "incomparable"),
    [
        (pf.zCDP(0.1, 1e-9), pf.zCDP(0.2, 1e-9), pf.zCDP(0.05, 1e-8)),
        (pf.ApproxDP(0.5, 1e-9), pf.ApproxDP(1.0, 1e-8), pf.ApproxDP(2.0, 0.0)),
        (pf.GDP(0.5), pf.GDP(1.0), None),
    ],
    ids=["zCDP", "ApproxDP", "GDP"],
)
def test_budgets_are_partially_ordered(small: Any, large: Any, incomparable: Any) -> None:
    assert [small <= large, small < large, large >= small, large > small] == [True] * 4
    assert [large <= small, large < small, small >= large, small > large] == [False] * 4
    assert [small <= small, small >= small] == [True, True]
    assert [small < small, small > small] == [False, False]
    if incomparable is not None:  # bigger in one field, smaller in another
        for a, b in [(small, incomparable), (incomparable, small)]:
            assert [a <= b, a < b, a >= b, a > b] == [False] * 4
    other = pf.GDP(0.1) if not isinstance(small, pf.GDP) else pf.zCDP(0.1)
    for op in ("__lt__", "__le__", "__gt__", "__ge__"):
        assert getattr(small, op)(other) is NotImplemented
    with pytest.raises(TypeError):
        small < other  # noqa: B015
    with pytest.raises(TypeError):
        small <= 1.0  # noqa: B015


def test_subtracting_then_adding_back_never_exceeds_the_budget() -> None:
    for a, b in [(1 / 3, 1 / 7), (0.7, 1e-17), (0.3, 0.1)]:
        assert pf.zCDP(a) - pf.zCDP(b) + pf.zCDP(b) <= pf.zCDP(math.nextafter(a, math.inf))
        left = pf.ApproxDP(a, 1e-6) - pf.ApproxDP(b, 1e-7)
        assert left + pf.ApproxDP(b, 1e-7) <= pf.ApproxDP(math.nextafter(a, math.inf), 1.1e-6)
