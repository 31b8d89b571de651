"""PLD accounting: exact values, dp_accounting's PLD, and the certified bracket."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, optimize, stats

import privframe as pf
from privframe.accounting.budgets import GDP, zCDP
from privframe.accounting.events import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    ThresholdEvent,
    ZCDPEvent,
)
from privframe.accounting.pld import PLDAccountant, mu_estimate
from privframe.accounting.rdp import RDPAccountant
from privframe.errors import InvalidArgumentError, InvalidBudgetError, InvalidValueError
from privframe.mechanisms import dpsgd

REFERENCE = Path(__file__).parent.parent / "data" / "dp_accounting_pld_reference.json"


def reference() -> dict:
    return json.loads(REFERENCE.read_text())


def sampled(q: float, sigma: float) -> PoissonSampledEvent:
    return PoissonSampledEvent(q, GaussianEvent(sigma))


# ---------------------------------------------------------------------------
# Exact privacy profiles of the subsampled Gaussian, written independently
# ---------------------------------------------------------------------------


def _loss(y: float, q: float, sigma: float) -> float:
    """ln(1 − q + q·exp((2y − 1)/(2σ²))): the remove direction's loss at output y."""
    x = (2 * y - 1) / (2 * sigma**2)
    return x + math.log(q + (1 - q) * math.exp(-x)) if x > 0 else math.log1p(q * math.expm1(x))


def _delta_remove(eps: float, q: float, sigma: float) -> float:
    """H_{e^ε}(P‖Q) for P = (1−q)N(0,σ²) + qN(1,σ²), Q = N(0,σ²), any real ε."""
    gap = math.expm1(eps) + q
    if gap <= 0:
        return -math.expm1(eps)
    y = sigma**2 * (math.log(gap) - math.log(q)) + 0.5
    sf = stats.norm.sf
    return max(
        0.0, (1 - q) * sf(y / sigma) + q * sf((y - 1) / sigma) - math.exp(eps) * sf(y / sigma)
    )


def _delta_add(eps: float, q: float, sigma: float) -> float:
    """H_{e^ε}(Q‖P) for the same pair, any real ε."""
    gap = math.expm1(-eps) + q
    if gap <= 0:
        return 0.0
    y = sigma**2 * (math.log(gap) - math.log(q)) + 0.5
    cdf = stats.norm.cdf
    mixture = (1 - q) * cdf(y / sigma) + q * cdf((y - 1) / sigma)
    return max(0.0, cdf(y / sigma) - math.exp(eps) * mixture)


def _exact_delta(eps: float, q: float, sigma: float, steps: int) -> float:
    """δ(ε) of 1 or 2 steps; two steps by δ₂(ε) = E_{L₁}[δ₁(ε − L₁)] (numerical quadrature)."""
    if steps == 1:
        return max(_delta_remove(eps, q, sigma), _delta_add(eps, q, sigma))
    assert steps == 2

    def remove(y: float) -> float:
        density = (1 - q) * stats.norm.pdf(y / sigma) + q * stats.norm.pdf((y - 1) / sigma)
        return density / sigma * _delta_remove(eps - _loss(y, q, sigma), q, sigma)

    def add(y: float) -> float:
        return stats.norm.pdf(y / sigma) / sigma * _delta_add(eps + _loss(y, q, sigma), q, sigma)

    lo, hi = -12 * sigma, 1 + 12 * sigma
    options = {"epsabs": 1e-14, "epsrel": 1e-10, "limit": 400}
    return max(
        integrate.quad(remove, lo, hi, **options)[0], integrate.quad(add, lo, hi, **options)[0]
    )


def _exact_epsilon(delta: float, q: float, sigma: float, steps: int) -> float:
    return optimize.brentq(
        lambda e: _exact_delta(e, q, sigma, steps) - delta, 0.0, 50.0, xtol=1e-12
    )


# ---------------------------------------------------------------------------
# Exact cases
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sigmas", [(1.0,), (0.5, 2.0, 3.0), (10.0,) * 7])
def test_gaussian_compositions_are_exact(sigmas: tuple[float, ...]) -> None:
    acct = PLDAccountant()
    for sigma in sigmas:
        acct.compose(GaussianEvent(sigma))
    mu = math.sqrt(sum(s**-2 for s in sigmas))
    # Two certified values for the same μ may differ in the last digits (each is a
    # root raised until certified), so the exact curve is checked through δ.
    below, above = GDP(mu * (1 - 1e-14)), GDP(mu * (1 + 1e-14))
    for delta in (1e-3, 1e-6, 1e-10):
        assert acct.epsilon(delta) == pytest.approx(GDP(mu).epsilon(delta), rel=1e-12)
        lower, upper = acct.epsilon_bounds(delta)
        assert upper == acct.epsilon(delta)
        # Never below the exact value: at the upper ε the exact curve is within δ...
        assert below.delta(upper) <= delta * (1 + 1e-9)
        # ...and the lower ε is not above it.
        assert above.delta(lower) >= delta * (1 - 1e-9)
        assert upper - lower < 1e-6 * upper
    for eps in (0.0, 0.5, 3.0):
        assert acct.delta(eps) == pytest.approx(GDP(mu).delta(eps), rel=1e-12)
    assert acct.mu_estimate(1e-6) == pytest.approx(mu, rel=1e-15)
    assert acct.fallback is None


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.1), (0.1, 0.8), (0.3, 2.0)])
@pytest.mark.parametrize("steps", [1, 2])
def test_subsampled_bracket_contains_the_exact_epsilon(q: float, sigma: float, steps: int) -> None:
    acct = PLDAccountant().compose(sampled(q, sigma), steps)
    for delta in (1e-3, 1e-5):
        exact = _exact_epsilon(delta, q, sigma, steps)
        lower, upper = acct.epsilon_bounds(delta)
        assert lower <= exact <= upper
        # Connect-the-dots is tight: far inside the rounding-down bracket.
        assert upper - exact < 1e-3 * max(1.0, exact)
    for eps in (0.05, 0.5, 1.0):
        assert acct.delta(eps) >= _exact_delta(eps, q, sigma, steps)


def test_subsampled_discretized_gaussian_dominates_the_exact_curve() -> None:
    # A negligible subsampled event forces the Gaussian through the discretised path.
    acct = PLDAccountant().compose(GaussianEvent(1.5)).compose(sampled(1e-12, 5.0))
    exact = GDP(1 / 1.5)
    for delta in (1e-2, 1e-5, 1e-9):
        lower, upper = acct.epsilon_bounds(delta)
        assert lower <= exact.epsilon(delta) <= upper
    # Tight where the floating-point error bound (~1e-10 in δ here) is small next to δ.
    for delta in (1e-2, 1e-5):
        assert acct.epsilon(delta) - exact.epsilon(delta) < 1e-4
    for eps in (0.0, 0.3, 2.0, 5.0):
        assert acct.delta(eps) >= exact.delta(eps)


# ---------------------------------------------------------------------------
# dp_accounting's PLD accountant (tests/data/dp_accounting_pld_reference.json)
# ---------------------------------------------------------------------------


def test_reference_grid_matches_the_default() -> None:
    ref = reference()
    assert ref["value_discretization_interval"] == PLDAccountant().value_discretization_interval
    assert ref["neighboring_relation"] == "ADD_OR_REMOVE_ONE"


def test_gaussian_compositions_match_dp_accounting() -> None:
    ref = reference()
    for case in ref["gaussian_compositions"]:
        acct = PLDAccountant().compose(GaussianEvent(case["noise_multiplier"]), case["count"])
        eps = acct.epsilon(ref["delta"])
        # Exact here; dp_accounting discretises one Gaussian, a few 1e-8 above exact.
        assert eps == pytest.approx(case["epsilon_pessimistic"], rel=1e-7)
        assert eps >= case["epsilon_optimistic"]


def _check_against_reference(acct: PLDAccountant, case: dict, delta: float) -> None:
    lower, upper = acct.epsilon_bounds(delta)
    theirs_low, theirs_high = case["epsilon_optimistic"], case["epsilon_pessimistic"]
    # Never below the exact value, which is at least dp_accounting's optimistic bound...
    assert upper >= theirs_low
    # ...and within the stated error of dp_accounting's pessimistic value.
    assert abs(upper - theirs_high) <= upper - lower
    assert lower <= theirs_high


def test_dpsgd_matches_dp_accounting_within_the_stated_error() -> None:
    ref = reference()
    for case in ref["poisson_gaussian"]:
        q, sigma, steps = case["sampling_probability"], case["noise_multiplier"], case["steps"]
        acct = PLDAccountant().compose(sampled(q, sigma), steps)
        _check_against_reference(acct, case, ref["delta"])
        # Both use connect-the-dots on the same grid: the upper bounds agree closely.
        assert acct.epsilon(ref["delta"]) == pytest.approx(case["epsilon_pessimistic"], rel=1e-3)


def test_composed_event_matches_dp_accounting() -> None:
    ref = reference()
    case = ref["composed"][0]
    parts = []
    for spec in case["events"]:
        base = (
            sampled(spec["sampling_probability"], spec["noise_multiplier"])
            if "sampling_probability" in spec
            else GaussianEvent(spec["noise_multiplier"])
        )
        parts.append(SelfComposedEvent(base, spec["count"]))
    acct = PLDAccountant().compose(ComposedEvent(parts))
    _check_against_reference(acct, case, ref["delta"])


def test_delta_at_epsilon_matches_dp_accounting() -> None:
    for case in reference()["delta_at_epsilon"]:
        q, sigma, steps = case["sampling_probability"], case["noise_multiplier"], case["steps"]
        acct = PLDAccountant().compose(sampled(q, sigma), steps)
        delta = acct.delta(case["epsilon"])
        assert delta >= case["delta_optimistic"]
        # Equal up to the floating-point error bound privframe adds to δ.
        stated = max(pld.error for pld in acct._plds(pessimistic=True))
        assert stated < 1e-10
        assert delta == pytest.approx(case["delta_pessimistic"], rel=1e-3, abs=2 * stated)


def test_merged_windows_keep_the_bracket_narrow() -> None:
    # Rounding every loss down would trail by ~steps·h/2 (0.5 here); merging each
    # window before rounding costs ~h/64 a step when losses spread over many points.
    lower, upper = PLDAccountant().compose(sampled(0.01, 1.1), 10_000).epsilon_bounds(1e-5)
    assert upper - lower < 0.03
    lower, upper = PLDAccountant().compose(sampled(0.1, 0.8), 100).epsilon_bounds(1e-5)
    assert upper - lower < 1e-3


def test_fine_grid_narrows_the_bracket() -> None:
    ref = reference()
    for case in ref["fine_grid"]:
        q, sigma, steps = case["sampling_probability"], case["noise_multiplier"], case["steps"]
        if steps > 1000:
            continue
        coarse = PLDAccountant().compose(sampled(q, sigma), steps).epsilon_bounds(ref["delta"])
        fine = PLDAccountant(ref["fine_grid_value_discretization_interval"])
        fine.compose(sampled(q, sigma), steps)
        fine_bounds = fine.epsilon_bounds(ref["delta"])
        assert fine_bounds[1] - fine_bounds[0] < (coarse[1] - coarse[0]) / 5
        # Both brackets hold the exact value, so they overlap.
        assert fine_bounds[0] <= coarse[1]
        assert coarse[0] <= fine_bounds[1]
        assert fine_bounds[0] <= case["epsilon_pessimistic"]
        assert fine_bounds[1] >= case["epsilon_optimistic"]


# ---------------------------------------------------------------------------
# Against RDP, monotonicity, thresholds, fallbacks
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("q", "sigma", "steps"), [(0.01, 1.1, 1000), (0.001, 0.8, 1000)])
def test_pld_is_tighter_than_rdp_for_dpsgd(q: float, sigma: float, steps: int) -> None:
    pld = PLDAccountant().compose(sampled(q, sigma), steps).epsilon(1e-5)
    rdp = RDPAccountant().compose(sampled(q, sigma), steps).epsilon(1e-5)
    assert pld < rdp


def test_epsilon_grows_with_steps_and_sampling_and_shrinks_with_noise() -> None:
    def eps(q: float, sigma: float, steps: int) -> float:
        return PLDAccountant().compose(sampled(q, sigma), steps).epsilon(1e-5)

    assert eps(0.01, 1.1, 10) < eps(0.01, 1.1, 100) < eps(0.01, 1.1, 1000)
    assert eps(0.001, 1.1, 100) < eps(0.01, 1.1, 100) < eps(0.1, 1.1, 100)
    assert eps(0.01, 2.0, 100) < eps(0.01, 1.1, 100) < eps(0.01, 0.8, 100)


def test_threshold_delta_is_spent_outright() -> None:
    acct = PLDAccountant().compose(GaussianEvent(2.0)).compose(ThresholdEvent(0.0, 1e-7))
    assert acct.fallback is None
    assert acct.epsilon(1e-5) >= GDP(0.5).epsilon(1e-5 - 1e-7)
    assert acct.epsilon(1e-5) == pytest.approx(GDP(0.5).epsilon(1e-5 - 1e-7), rel=1e-9)
    assert acct.delta(1.0) >= GDP(0.5).delta(1.0) + 1e-7
    with pytest.raises(InvalidValueError, match="exceed the delta spent outright"):
        acct.epsilon(1e-7)


def test_zcdp_only_events_fall_back_to_zcdp() -> None:
    acct = PLDAccountant().compose(GaussianEvent(1.0, discrete=True)).compose(ZCDPEvent(0.25))
    acct.compose(ThresholdEvent(0.1, 1e-8))
    assert acct.fallback == "zcdp"
    assert acct.epsilon(1e-5) == pytest.approx(zCDP(0.85, 1e-8).epsilon(1e-5), rel=1e-12)
    assert acct.epsilon(1e-5) >= zCDP(0.85 * (1 - 1e-15), 1e-8).epsilon(1e-5)
    assert acct.delta(3.0) == pytest.approx(zCDP(0.85, 1e-8).delta_at(3.0), rel=1e-9)
    with pytest.raises(InvalidValueError, match="no PLD bracket"):
        acct.epsilon_bounds(1e-5)


def test_gaussians_with_zcdp_events_fall_back_to_the_total_rho() -> None:
    acct = PLDAccountant().compose(GaussianEvent(2.0), 3).compose(ZCDPEvent(0.1))
    assert acct.fallback == "zcdp"
    expected = zCDP(3 / 8 + 0.1).epsilon(1e-6)
    assert acct.epsilon(1e-6) == pytest.approx(expected, rel=1e-12)
    assert acct.epsilon(1e-6) <= RDPAccountant().compose(GaussianEvent(2.0), 3).compose(
        ZCDPEvent(0.1)
    ).epsilon(1e-6)


def test_mixed_events_fall_back_to_rdp() -> None:
    events = [sampled(0.01, 1.1), ZCDPEvent(0.01)]
    acct = PLDAccountant()
    rdp = RDPAccountant()
    for event in events:
        acct.compose(event, 100)
        rdp.compose(event, 100)
    assert acct.fallback == "rdp"
    assert acct.epsilon(1e-5) == rdp.epsilon(1e-5)
    assert acct.delta(1.0) == rdp.delta(1.0)


def test_subsampled_discrete_gaussians_fall_back_to_rdp() -> None:
    # Proven for discrete noise: Zhu & Wang's general subsampled-RDP bound only.
    event = PoissonSampledEvent(0.01, GaussianEvent(1.1, discrete=True))
    acct = PLDAccountant().compose(event, 1000)
    assert acct.fallback == "rdp"
    assert acct.epsilon(1e-5) == RDPAccountant().compose(event, 1000).epsilon(1e-5)
    # Looser than the continuous PLD, far tighter than no amplification.
    assert acct.epsilon(1e-5) > PLDAccountant().compose(sampled(0.01, 1.1), 1000).epsilon(1e-5)
    no_sampling = zCDP(1000 / (2 * 1.1**2)).epsilon(1e-5)
    assert acct.epsilon(1e-5) < no_sampling / 10


def test_trivial_events_cost_nothing() -> None:
    acct = PLDAccountant().compose(sampled(0.0, 1.0), 10).compose(GaussianEvent(1.0), 0)
    assert acct.epsilon(1e-9) == 0.0
    assert acct.delta(0.0) == 0.0
    assert len(acct.events) == 2


def test_full_sampling_is_the_plain_gaussian() -> None:
    full = PLDAccountant().compose(sampled(1.0, 2.0), 4).epsilon(1e-6)
    plain = PLDAccountant().compose(GaussianEvent(2.0), 4).epsilon(1e-6)
    assert full == pytest.approx(plain, rel=1e-12)
    assert full >= plain


def test_floating_point_error_bound_is_small_and_added() -> None:
    acct = PLDAccountant().compose(sampled(0.01, 1.1), 1000)
    for pessimistic in (True, False):
        for pld in acct._plds(pessimistic=pessimistic):
            # Kolmogorov-distance bound: O(steps·u), not O(grid points·steps·u).
            assert 0 < pld.error < 2e-11
            assert 0 < pld.shift < 1e-9
            assert abs(pld.pmf.sum() + pld.infinity - 1) < 1e-9
            assert np.all(pld.pmf >= 0)
            losses = pld.losses()
            for eps in (0.5, 1.5, 3.0):
                above = losses > eps
                raw = pld.infinity + float((pld.pmf[above] * -np.expm1(eps - losses[above])).sum())
                if pessimistic:
                    assert pld.delta(eps) >= raw + pld.error
                else:
                    assert pld.delta(eps) <= max(0.0, raw - pld.error)


def test_small_delta_stays_finite_and_below_rdp() -> None:
    # The stated float error must stay far below δ: at δ = 1e-9 over 10,000 steps the
    # PLD still beats RDP (dp_accounting's PLD gives 7.38 here, RDP 7.77).
    pld = dpsgd.dpsgd_epsilon(1.1, 0.01, 10_000, 1e-9, method="pld")
    rdp = dpsgd.dpsgd_epsilon(1.1, 0.01, 10_000, 1e-9)
    assert pld < rdp
    assert pld == pytest.approx(7.38, rel=0.02)
    lower, upper = PLDAccountant().compose(sampled(0.01, 1.1), 1000).epsilon_bounds(1e-10)
    assert math.isfinite(lower)
    assert lower < upper


@pytest.mark.parametrize(("q", "sigma"), [(0.9, 1.0), (0.99, 0.5), (0.5, 0.3), (1e-6, 1.0)])
def test_extreme_single_steps_bracket_the_exact_value(q: float, sigma: float) -> None:
    acct = PLDAccountant().compose(sampled(q, sigma))
    for delta in (1e-12, 1e-5, 0.5):
        exact = (
            _exact_epsilon(delta, q, sigma, 1) if _exact_delta(0.0, q, sigma, 1) > delta else 0.0
        )
        lower, upper = acct.epsilon_bounds(delta)
        assert lower <= exact <= upper


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.1), (0.3, 0.8)])
def test_each_direction_is_on_its_side_of_the_exact_curve(q: float, sigma: float) -> None:
    acct = PLDAccountant().compose(sampled(q, sigma))
    (pess_remove, pess_add), (opt_remove, opt_add) = acct._plds(True), acct._plds(False)
    for eps in (-0.5, -0.01, 0.0, 0.00005, 0.3, 1.23456, 4.0):
        for exact, pess, opt in (
            (_delta_remove(eps, q, sigma), pess_remove, opt_remove),
            (_delta_add(eps, q, sigma), pess_add, opt_add),
        ):
            assert opt.delta(eps) <= exact + 1e-15
            assert pess.delta(eps) >= exact - 1e-15


def test_degenerate_sampling_probability_costs_almost_nothing() -> None:
    lower, upper = PLDAccountant().compose(sampled(1e-300, 1.0), 100).epsilon_bounds(1e-5)
    assert lower == 0.0
    assert upper < 1e-3


# ---------------------------------------------------------------------------
# mu-GDP summary, DP-SGD helpers, validation
# ---------------------------------------------------------------------------


def test_mu_estimate_passes_through_the_point() -> None:
    acct = PLDAccountant().compose(sampled(0.01, 1.1), 1000)
    mu = acct.mu_estimate(1e-5)
    assert GDP(mu).epsilon(1e-5) == pytest.approx(acct.epsilon(1e-5), rel=1e-9)
    # The GDP central limit theorem (Dong, Roth & Su 2022, Thm. 3.4): μ ≈ q·sqrt(T(e^{1/σ²} − 1)).
    clt = 0.01 * math.sqrt(1000 * math.expm1(1 / 1.1**2))
    assert mu == pytest.approx(clt, rel=0.2)
    # RDP's looser ε gives a larger μ; for one Gaussian the exact μ is 1/z.
    assert RDPAccountant().compose(GaussianEvent(2.0)).mu_estimate(1e-5) > 0.5
    assert PLDAccountant().compose(GaussianEvent(2.0)).mu_estimate(1e-5) == 0.5
    assert mu_estimate(0.0, 1e-5) == 0.0
    assert mu_estimate(math.inf, 1e-5) == math.inf


def test_dpsgd_pld_helpers() -> None:
    eps = dpsgd.dpsgd_epsilon(1.1, 0.01, 1000, 1e-5, method="pld")
    assert eps == PLDAccountant().compose(sampled(0.01, 1.1), 1000).epsilon(1e-5)
    z = dpsgd.dpsgd_noise_multiplier(2.0, 1e-5, 0.01, 1000, method="pld", rtol=1e-3)
    assert dpsgd.dpsgd_epsilon(z, 0.01, 1000, 1e-5, method="pld") <= 2.0
    assert dpsgd.dpsgd_epsilon(0.99 * z, 0.01, 1000, 1e-5, method="pld") > 2.0
    # PLD needs less noise than RDP for the same target.
    assert z < dpsgd.dpsgd_noise_multiplier(2.0, 1e-5, 0.01, 1000, rtol=1e-3)
    with pytest.raises(InvalidValueError, match="method"):
        dpsgd.dpsgd_epsilon(1.1, 0.01, 10, 1e-5, method="moments")


def test_dpsgd_with_discrete_noise_uses_the_general_bound() -> None:
    discrete = PoissonSampledEvent(0.01, GaussianEvent(1.1, discrete=True))
    expected = RDPAccountant().compose(discrete, 1000).epsilon(1e-5)
    for method in ("rdp", "pld"):
        assert dpsgd.dpsgd_epsilon(1.1, 0.01, 1000, 1e-5, method=method, discrete=True) == expected
    z = dpsgd.dpsgd_noise_multiplier(2.0, 1e-5, 0.01, 1000, discrete=True, rtol=1e-3)
    assert dpsgd.dpsgd_epsilon(z, 0.01, 1000, 1e-5, discrete=True) <= 2.0
    assert dpsgd.dpsgd_epsilon(0.99 * z, 0.01, 1000, 1e-5, discrete=True) > 2.0
    assert z > dpsgd.dpsgd_noise_multiplier(2.0, 1e-5, 0.01, 1000, rtol=1e-3)


def test_reexports() -> None:
    assert pf.accounting.PLDAccountant is PLDAccountant
    assert pf.accounting.RDPAccountant is RDPAccountant
    with pytest.raises(AttributeError):
        _ = pf.accounting.NoSuchAccountant


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: PLDAccountant(0.0), InvalidBudgetError, "value_discretization_interval"),
        (lambda: PLDAccountant(float("nan")), InvalidBudgetError, "value_discretization"),
        (lambda: PLDAccountant(tail_mass=1e-3), InvalidValueError, "tail_mass"),
        (lambda: PLDAccountant(tail_mass=0.0), InvalidValueError, "tail_mass"),
        (lambda: PLDAccountant(2.0), InvalidValueError, "value_discretization_interval"),
        (
            lambda: PLDAccountant().compose(sampled(0.01, 1.0), 10**30),
            InvalidValueError,
            "at most 2\\^40",
        ),
        (lambda: PLDAccountant().compose("gaussian"), InvalidArgumentError, "event"),
        (lambda: PLDAccountant().compose(GaussianEvent(1.0), -1), InvalidValueError, "count"),
        (lambda: PLDAccountant().compose(GaussianEvent(1.0), 1.5), InvalidArgumentError, "count"),
        (
            lambda: PLDAccountant().compose(PoissonSampledEvent(0.1, ZCDPEvent(0.1))),
            InvalidValueError,
            "Gaussian",
        ),
        (lambda: PLDAccountant().epsilon(0.0), InvalidBudgetError, "delta"),
        (lambda: PLDAccountant().delta(-1.0), InvalidBudgetError, "epsilon"),
        (
            lambda: PLDAccountant(1e-9).compose(sampled(0.5, 0.5)).epsilon(1e-5),
            InvalidValueError,
            "coarser",
        ),
    ],
)
def test_bad_input_names_the_problem(build, error, match) -> None:
    with pytest.raises(error, match=match):
        build()


def test_a_refused_event_composes_nothing() -> None:
    acct = PLDAccountant().compose(sampled(0.01, 1.1), 10)
    before = acct.epsilon(1e-5)
    with pytest.raises(InvalidValueError):
        acct.compose(PoissonSampledEvent(0.1, ZCDPEvent(0.1)))
    assert acct.epsilon(1e-5) == before
    assert len(acct.events) == 1


def test_lower_bound_with_a_threshold_delta_stays_below_the_exact_value() -> None:
    # Exact: δ₀ + (1 − δ₀)·δ_PLD(ε) = δ, so δ_PLD crosses at (δ − δ₀)/(1 − δ₀).
    q, sigma, d0, delta = 0.1, 1.0, 0.01, 0.02
    acct = PLDAccountant().compose(sampled(q, sigma)).compose(ThresholdEvent(0.0, d0))
    exact = _exact_epsilon((delta - d0) / (1 - d0), q, sigma, 1)
    lower, upper = acct.epsilon_bounds(delta)
    assert lower <= exact <= upper
    gaussian = PLDAccountant().compose(GaussianEvent(1.0)).compose(ThresholdEvent(0.0, 1e-3))
    lower, upper = gaussian.epsilon_bounds(1e-2)
    assert lower <= GDP(1.0).epsilon((1e-2 - 1e-3) / (1 - 1e-3)) <= upper


def test_gaussian_lower_bound_near_zero_epsilon() -> None:
    # δ just below δ(0): ε is ~4e-6, where GDP's certification slack is absolute.
    acct = PLDAccountant().compose(GaussianEvent(0.5))
    delta = 0.6826888094475937
    lower, _ = acct.epsilon_bounds(delta)
    assert GDP(2.0 * (1 + 1e-14)).delta(lower) >= delta
