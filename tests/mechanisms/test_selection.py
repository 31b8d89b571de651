"""Partition-selection thresholds: reference values and exact discrete tails.

The survival frequency of a one-unit group is tested in
``tests/statistical/test_selection_statistical.py``.
"""

from __future__ import annotations

import math
import warnings

import pytest

import privframe as pf
from privframe.mechanisms.selection import (
    discrete_selection_delta,
    discrete_tail,
    discrete_threshold,
    gaussian_threshold,
    gaussian_threshold_union_bound,
)


def test_continuous_thresholds_match_reference(reference_values: dict) -> None:
    for ref in reference_values["partition_selection_gaussian_threshold"]["values"]:
        sigma, k, delta = ref["sigma"], ref["k"], ref["delta_threshold"]
        assert gaussian_threshold(sigma, k, delta) == pytest.approx(
            ref["T_exact_independent"], rel=1e-9
        )
        assert gaussian_threshold_union_bound(sigma, k, delta) == pytest.approx(
            ref["T_union_bound"], rel=1e-9
        )
        # The exact-independent threshold is never above the union bound's.
        assert gaussian_threshold(sigma, k, delta) <= gaussian_threshold_union_bound(
            sigma, k, delta
        ) * (1 + 1e-12)


def test_discrete_tail_matches_reference(reference_values: dict) -> None:
    for ref in reference_values["discrete_gaussian"]["values"]:
        for tail in ref["tails"]:
            got = 2 * discrete_tail(float(ref["sigma"]), tail["t"])
            assert got == pytest.approx(tail["P_abs_X_ge_t"], rel=1e-10)


def test_large_sigma_tail_is_an_upper_bound() -> None:
    sigma = 1e4
    for t in (1, 10_000, 30_000, 50_000):
        exact = discrete_tail(sigma, t)
        bound = discrete_tail(math.nextafter(sigma, math.inf), t)  # takes the bound branch
        assert bound >= exact


@pytest.mark.parametrize("sigma", [1e-300, 1e-160, 1e-3, 0.025, 0.03, 0.1])
def test_small_sigma_tails_are_exact_without_overflow(sigma: float) -> None:
    # σ = 1e-3 is what epsilon = 1e6 gives; numpy's overflow warnings once escaped here.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tails = [discrete_tail(sigma, t) for t in (-3, 0, 1, 2)]
        assert discrete_threshold(sigma, 1, 1e-6) == 2
    assert tails[:2] == [1.0, 1.0]
    # P[Z >= 1] is e^(-1/(2σ²)) to relative 1e-12, below the smallest double for σ <= 1/40.
    expected = math.exp(-1 / (2 * sigma * sigma)) if sigma > 0.025 else 0.0
    assert tails[2] == pytest.approx(expected, rel=1e-12, abs=0.0)
    assert 0.0 <= tails[3] <= tails[2]


@pytest.mark.parametrize(("sigma", "k", "delta"), [(1.0, 1, 1e-6), (3.0, 4, 1e-8), (10, 5, 1e-6)])
def test_discrete_threshold_is_the_smallest_valid(sigma: float, k: int, delta: float) -> None:
    tau = discrete_threshold(sigma, k, delta)
    assert discrete_selection_delta(sigma, k, tau) <= delta
    assert discrete_selection_delta(sigma, k, tau - 1) > delta
    # Charging the mass at the threshold: keeping only noisy counts > tau - 1 would be
    # the same rule; keeping counts > tau is a stricter, wasteful one.
    assert discrete_selection_delta(sigma, k, tau + 1) < discrete_selection_delta(sigma, k, tau)


def test_the_atom_at_the_threshold_is_charged() -> None:
    # P[1 + Z >= tau] includes P[Z = tau - 1]; dropping that atom undercounts delta.
    sigma, tau = 2.0, 6
    with_atom = discrete_selection_delta(sigma, 1, tau)
    without_atom = discrete_tail(sigma, tau)  # P[1 + Z > tau]
    assert with_atom > without_atom
    assert with_atom == pytest.approx(discrete_tail(sigma, tau - 1), rel=1e-12)


@pytest.mark.parametrize("bad", [0.0, 1.0, -1e-6, math.nan])
def test_bad_delta_is_refused(bad: float) -> None:
    with pytest.raises(pf.InvalidBudgetError, match="delta"):
        discrete_threshold(1.0, 1, bad)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_bad_k_is_refused(bad: object) -> None:
    with pytest.raises(pf.InvalidArgumentError, match="k"):
        discrete_threshold(1.0, bad, 1e-6)  # type: ignore[arg-type]
