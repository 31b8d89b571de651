"""The joint (ε, δ) analysis of one release with private key selection.

The brute-force tests are independent of privframe's formula: they enumerate
the whole output space of the classic Gaussian sparse histogram (per group,
either ⊥ or the noisy count if it is >= τ) with discrete Gaussian pmfs computed
here, and take the exact hockey-stick divergence in both directions.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.mechanisms.selection import (
    _existing_part_delta,
    discrete_tail,
    discrete_threshold,
    joint_selection_delta,
    joint_selection_epsilon,
    standard_selection_epsilon,
)

EPSILONS = (0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0)
COUNTS = range(1, 31)  # true counts of the groups that exist without the unit
FLOAT_NOISE = 1e-12  # summation error of the brute force, relative to 1


# ---------------------------------------------------------------------------
# Brute force: the Gaussian sparse histogram, enumerated exactly
# ---------------------------------------------------------------------------


def _pmf(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of N_Z(0, σ²), truncated at 40σ (the rest is < e^-800)."""
    span = math.ceil(40 * sigma) + 2
    z = np.arange(-span, span + 1)
    w = np.exp(-(z.astype(np.float64) ** 2) / (2 * sigma * sigma))
    return z, w / w.sum()


def _top(sigma: float) -> int:
    return max(COUNTS) + 1 + math.ceil(40 * sigma) + 3


def _group(count: int | None, sigma: float, tau: int) -> np.ndarray:
    """One group's output law on [⊥, τ, τ+1, ..., top]; ``None``: the group is absent."""
    out = np.zeros(_top(sigma) - tau + 2)
    if count is None:
        out[0] = 1.0
        return out
    z, w = _pmf(sigma)
    noisy = count + z
    kept = noisy >= tau
    out[0] = w[~kept].sum()
    np.add.at(out, noisy[kept] - tau + 1, w[kept])
    return out


def _product(laws: list[np.ndarray]) -> np.ndarray:
    joint = laws[0]
    for law in laws[1:]:
        joint = np.multiply.outer(joint, law).ravel()
    return joint


def _hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """sup_S P(S) − e^ε Q(S); ε may be negative."""
    return float(np.maximum(p - math.exp(epsilon) * q, 0.0).sum())


def _neighbours(sigma: float, tau: int, counts: tuple[int, ...], new: int):
    """Output laws without and with a unit in the existing ``counts`` and ``new`` fresh groups."""
    without = _product([_group(c, sigma, tau) for c in counts] + [_group(None, sigma, tau)] * new)
    with_unit = _product(
        [_group(c + 1, sigma, tau) for c in counts] + [_group(1, sigma, tau)] * new
    )
    return without, with_unit


def _exact(sigma: float, tau: int, k: int) -> dict[tuple[int, tuple[int, ...]], np.ndarray]:
    """Exact δ(ε) over EPSILONS (max of both directions) for every (j new, existing counts)."""
    table = {}
    for new in range(k + 1):
        for counts in itertools.product(COUNTS, repeat=k - new):
            without, with_unit = _neighbours(sigma, tau, counts, new)
            table[new, counts] = np.array(
                [
                    max(_hockey_stick(with_unit, without, e), _hockey_stick(without, with_unit, e))
                    for e in EPSILONS
                ]
            )
    return table


def _standard(epsilon: float, rho: float, k: int, p: float) -> float:
    return pf.zCDP(rho, delta=-math.expm1(k * math.log1p(-p))).delta_at(epsilon)


CASES = [(1.0, 3, 1), (2.0, 5, 1), (3.0, 6, 1), (1.0, 3, 2), (1.5, 4, 2), (2.0, 6, 2)]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"sigma={c[0]},tau={c[1]},k={c[2]}")
def brute(request: pytest.FixtureRequest) -> tuple[float, int, int, dict]:
    sigma, tau, k = request.param
    return sigma, tau, k, _exact(sigma, tau, k)


def test_joint_delta_is_never_below_the_exact_value(brute: tuple) -> None:
    sigma, tau, k, table = brute
    p = discrete_tail(sigma, tau - 1)
    rho = k / (2 * sigma * sigma)  # the histogram's zCDP cost: sensitivity sqrt(k)
    exact = np.max(np.stack(list(table.values())), axis=0)
    for i, eps in enumerate(EPSILONS):
        joint = joint_selection_delta(eps, rho, k, p)
        standard = _standard(eps, rho, k, p)
        assert joint >= exact[i] - FLOAT_NOISE, (eps, joint, exact[i])
        # Never above the standard bound; equal where the standard's Gaussian part (4e-23
        # at ε = 5, σ = 2) is below a float's resolution of δ_τ.
        assert exact[i] - FLOAT_NOISE <= joint <= standard, (eps, joint, standard)


def test_joint_delta_improves_on_the_standard_bound_concretely() -> None:
    # k = 1: the joint δ is max(δ_τ, δ_ρ(ε)) where the standard one is their sum.
    sigma, tau, k = 1.0, 3, 1
    table = _exact(sigma, tau, k)
    p = discrete_tail(sigma, tau - 1)
    rho = 1 / (2 * sigma * sigma)
    exact = np.max(np.stack(list(table.values())), axis=0)
    i = EPSILONS.index(2.0)
    joint, standard = joint_selection_delta(2.0, rho, k, p), _standard(2.0, rho, k, p)
    curve = pf.zCDP(rho).delta_at(2.0)
    assert joint == max(p, curve)
    assert standard - joint >= 0.99 * min(p, curve)
    assert joint - exact[i] < 0.7 * (standard - exact[i])  # the gap shrinks by > 30%


def test_worst_existing_counts_are_large_and_match_the_unthresholded_gaussian() -> None:
    # Post-processing: thresholding can only lower the divergence of the existing
    # groups; with a large count the threshold almost never binds, so the worst case
    # is the plain discrete Gaussian pair (Z, 1 + Z).
    for sigma, tau in [(1.0, 3), (2.0, 5)]:
        table = _exact(sigma, tau, 1)
        by_count = np.stack([table[0, (c,)] for c in COUNTS])
        _, w = _pmf(sigma)
        shifted = np.concatenate([[0.0], w])  # law of 1 + Z: Z moved one step right
        plain = np.concatenate([w, [0.0]])
        unthresholded = np.array([_hockey_stick(shifted, plain, e) for e in EPSILONS])
        assert np.all(by_count.max(axis=0) <= by_count[-1] + FLOAT_NOISE)
        assert np.allclose(by_count[-1], unthresholded, rtol=0, atol=FLOAT_NOISE)
        assert np.all(by_count <= unthresholded + FLOAT_NOISE)
        # ... and strictly lower where it binds: count 1, at ε = 0 (total variation).
        assert by_count[0][0] < unthresholded[0] - 0.05


def test_product_structure_of_one_new_and_one_existing_group() -> None:
    # The key step of the derivation, checked exactly: with j new groups and existing
    # part (A without, A' with the unit), q = (1 − p)^j,
    #   H_e^ε(with || without) = 1 − q + q·H_{e^(ε − ln q)}(A' || A),
    #   H_e^ε(without || with) = H_{e^(ε + ln q)}(A || A').
    sigma, tau = 1.0, 3
    q = 1 - discrete_tail(sigma, tau - 1)
    for c in (1, 2, 5, 30):
        without, with_unit = _neighbours(sigma, tau, (c,), 1)
        a, a_with = _neighbours(sigma, tau, (c,), 0)
        for eps in EPSILONS:
            add = _hockey_stick(with_unit, without, eps)
            remove = _hockey_stick(without, with_unit, eps)
            assert add == pytest.approx(
                1 - q + q * _hockey_stick(a_with, a, eps - math.log(q)), abs=FLOAT_NOISE
            )
            assert remove == pytest.approx(
                _hockey_stick(a, a_with, eps + math.log(q)), abs=FLOAT_NOISE
            )


def test_only_new_groups_cost_delta_tau() -> None:
    sigma, tau, k = 1.5, 4, 2
    p = discrete_tail(sigma, tau - 1)
    without, with_unit = _neighbours(sigma, tau, (), k)
    delta_tau = 1 - (1 - p) ** k
    for eps in EPSILONS:
        assert _hockey_stick(with_unit, without, eps) == pytest.approx(delta_tau, abs=FLOAT_NOISE)
        assert _hockey_stick(without, with_unit, eps) <= delta_tau
    assert joint_selection_delta(1000.0, 1.0, k, p) == pytest.approx(delta_tau, rel=1e-12)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------

GRID = [(sigma, k) for sigma in (0.5, 2.0, 5.0, 20.0) for k in (1, 2, 5, 20)]


def _selection(sigma: float, k: int, delta_tau: float) -> float:
    return discrete_tail(sigma, discrete_threshold(sigma, k, delta_tau) - 1)


def _brief_formula(epsilon: float, rho: float, k: int, p: float) -> float:
    """max over j of the add/remove bounds with the whole ρ for every j (no j = k case)."""
    curve = pf.zCDP(rho).delta_at
    worst = 0.0
    for j in range(k + 1):
        log_q = j * math.log1p(-p)
        add = -math.expm1(log_q) + math.exp(log_q) * curve(epsilon - log_q)
        shifted = epsilon + log_q
        remove = curve(shifted) if shifted >= 0 else curve(0.0) - math.expm1(shifted)
        worst = max(worst, add, remove)
    return worst


def test_no_new_group_gives_the_zcdp_curve() -> None:
    for rho in (0.01, 0.5, 2.0):
        for eps in EPSILONS:
            curve = pf.zCDP(rho).delta_at(eps)
            assert joint_selection_delta(eps, rho, 7, 0.0) == curve
            assert _existing_part_delta(eps, rho, 0, 0.3) == curve
            assert joint_selection_delta(eps, rho, 1, min(curve, 1e-9)) == curve


@pytest.mark.parametrize(("sigma", "k"), GRID)
def test_monotone_and_below_the_standard_bound(sigma: float, k: int) -> None:
    p = _selection(sigma, k, 1e-7)
    for rho in (0.05, 0.5, 3.0):
        epsilons = np.linspace(0.0, 30.0, 61)
        joint = [joint_selection_delta(float(e), rho, k, p) for e in epsilons]
        assert all(b <= a for a, b in itertools.pairwise(joint))
        for e, d in zip(epsilons, joint, strict=True):
            assert d <= _standard(float(e), rho, k, p) * (1 + 1e-12)
            assert d <= _brief_formula(float(e), rho, k, p) * (1 + 1e-12)


@pytest.mark.parametrize("p", [1e-9, 1e-3, 0.05, 0.3, 0.7])
def test_existing_part_increases_with_new_groups(p: float) -> None:
    # Why joint_selection_delta only evaluates j = k − 1 (docs/privacy.md §6).
    for rho in (0.02, 0.5, 4.0):
        for eps in (0.0, 0.1, 1.0, 3.0, 8.0):
            values = [_existing_part_delta(eps, rho, j, p) for j in range(12)]
            assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(values))


@pytest.mark.parametrize(("sigma", "k"), GRID)
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_epsilon_round_trip_and_below_standard(sigma: float, k: int, delta: float) -> None:
    p = _selection(sigma, k, delta / 10)
    for rho in (0.01, 0.5):
        eps = joint_selection_epsilon(delta, rho, k, p)
        assert joint_selection_delta(eps, rho, k, p) <= delta
        assert eps == 0 or joint_selection_delta(eps * (1 - 1e-6), rho, k, p) > delta
        assert eps <= standard_selection_epsilon(delta, rho, k, p)


def test_epsilon_zero_and_delta_tau_itself() -> None:
    assert joint_selection_epsilon(0.9, 0.01, 1, 0.01) == 0.0
    # k = 1: δ_τ = p is reachable, by the zCDP curve alone; the standard analysis is not.
    p = 1e-7
    eps = joint_selection_epsilon(p, 0.5, 1, p)
    assert joint_selection_delta(eps, 0.5, 1, p) <= p
    assert eps == pytest.approx(pf.zCDP(0.5).epsilon(p), rel=1e-9)
    with pytest.raises(pf.InvalidValueError, match="delta"):
        standard_selection_epsilon(p, 0.5, 1, p)


def test_standard_epsilon_is_the_zcdp_conversion() -> None:
    p, k = 1e-8, 5
    delta_tau = -math.expm1(k * math.log1p(-p))
    assert standard_selection_epsilon(1e-6, 0.5, k, p) == pytest.approx(
        pf.zCDP(0.5, delta=delta_tau).epsilon(1e-6), rel=1e-12
    )


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("func", [joint_selection_epsilon, standard_selection_epsilon])
def test_unreachable_delta_is_refused(func) -> None:
    with pytest.raises(pf.InvalidValueError, match=r"delta=1e-08 is not reachable"):
        func(1e-8, 0.5, 5, 1e-8)  # δ_τ ≈ 5e-8


@pytest.mark.parametrize(
    ("args", "error", "name"),
    [
        ((-1.0, 0.5, 2, 1e-6), pf.InvalidBudgetError, "epsilon"),
        ((math.inf, 0.5, 2, 1e-6), pf.InvalidBudgetError, "epsilon"),
        ((1.0, math.nan, 2, 1e-6), pf.InvalidBudgetError, "rho"),
        ((1.0, -0.5, 2, 1e-6), pf.InvalidBudgetError, "rho"),
        ((1.0, 0.5, 0, 1e-6), pf.InvalidArgumentError, "k"),
        ((1.0, 0.5, 1.5, 1e-6), pf.InvalidArgumentError, "k"),
        ((1.0, 0.5, True, 1e-6), pf.InvalidArgumentError, "k"),
        ((1.0, 0.5, 2, 1.0), pf.InvalidBudgetError, "p"),
        ((1.0, 0.5, 2, -1e-6), pf.InvalidBudgetError, "p"),
        ((1.0, 0.5, 2, "0.1"), pf.InvalidArgumentError, "p"),
    ],
)
def test_bad_arguments_are_named(args: tuple, error: type, name: str) -> None:
    with pytest.raises(error, match=rf"^{name}\b"):
        joint_selection_delta(*args)
    # The ε functions take δ first; their other arguments are checked alike.
    if name != "epsilon":
        for func in (joint_selection_epsilon, standard_selection_epsilon):
            with pytest.raises(error, match=rf"^{name}\b"):
                func(1e-3, *args[1:])


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-6, math.nan])
def test_bad_delta_is_named(bad: float) -> None:
    for func in (joint_selection_epsilon, standard_selection_epsilon):
        with pytest.raises(pf.InvalidBudgetError, match=r"^delta\b"):
            func(bad, 0.5, 2, 1e-6)


def test_explain_states_the_single_release_epsilon_by_both_analyses() -> None:
    df = pl.DataFrame({"u": list(range(40)), "g": ["a"] * 20 + ["b"] * 20})
    sess = pf.Session(df, "u", pf.zCDP(1.0, delta=1e-6))
    explanation = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .group_by("g")
        .agg(pf.count())
        .explain(rho=0.5)
    )
    line = next(x for x in str(explanation).splitlines() if "this release alone" in x)
    plan = explanation.plan
    selection = plan.selection
    assert selection is not None
    p = discrete_tail(selection.measurement.sigma_units, selection.threshold - 1)
    total = 1e-6 + selection.delta  # the session's reporting delta defaults to 1e-6
    standard = standard_selection_epsilon(total, plan.cost.rho, 1, p)
    joint = joint_selection_epsilon(total, plan.cost.rho, 1, p)
    assert joint < standard
    assert f"epsilon = {standard:.4g} by the standard analysis" in line
    assert f"{joint:.4g} by the joint analysis" in line
