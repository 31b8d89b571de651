"""The tight (ε, δ) composition an ApproxDP budget is charged, and why it is not the PLD.

The charge must be a privacy filter: valid when each release is chosen after
seeing the earlier ones. These tests check its invariants (never above basic
composition, never below the optimal composition of the same fixed
sequence, monotone, a function of the entries) and show, with exact
numbers, that the natural PLD filter is not one.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import mpmath
import pytest

import privframe as pf
from privframe.accounting._composition import ORDERS, Composition, description_events
from privframe.accounting.events import (
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    ThresholdEvent,
)
from privframe.accounting.pld import PLDAccountant
from privframe.errors import InvalidValueError


def _fold(steps: list[tuple[Fraction, Fraction, list | None]]) -> list[Composition]:
    states, state = [], Composition()
    for eps, delta, events in steps:
        state = state.add(eps, delta, events)
        states.append(state)
    return states


def test_without_slack_the_charge_is_the_sum() -> None:
    states = _fold([(Fraction(1, 10), Fraction(0), [LaplaceEvent(10.0)])] * 100)
    assert states[-1].epsilon == states[-1].basic_epsilon == 10
    generic = _fold([(Fraction(1, 10), Fraction(1, 10**7), None)] * 100)
    assert generic[-1].epsilon == 10  # δ of a generic release is all spent outright


def test_a_first_release_of_pure_slack_starts_the_renyi_bound() -> None:
    # An entry that ran nothing ("events": []) turns its whole δ into slack.
    deposit = (Fraction(0), Fraction(1, 10**6), [])
    laplace = (Fraction(1, 10), Fraction(0), [LaplaceEvent(10.0)])
    with_deposit = _fold([deposit] + [laplace] * 50)[-1]
    assert with_deposit.basic_epsilon == 5
    assert with_deposit.epsilon < 4.1


def test_the_charge_is_monotone_and_never_above_basic() -> None:
    rng = random.Random(7)
    for _ in range(30):
        steps = []
        for _ in range(rng.randrange(1, 80)):
            eps = Fraction(rng.choice([1, 3, 10, 50, 100]), 1000)
            delta = Fraction(rng.choice([0, 1, 5]), 10**8)
            events = rng.choice(
                [
                    None,
                    [],
                    [LaplaceEvent(float(1 / eps))],
                    [PureDPEvent(float(eps))],
                    [GaussianEvent(rng.choice([5.0, 20.0]), discrete=True)],
                    [GaussianEvent(20.0), ThresholdEvent(0.0, float(delta) / 2)],
                ]
            )
            steps.append((eps, delta, events))
        previous = Fraction(0)
        for state in _fold(steps):
            assert previous <= state.epsilon <= state.basic_epsilon
            previous = state.epsilon


def _optimal(k: int, epsilon: float, delta: float) -> float:
    """The exact ε at δ of k ε-randomized responses (Kairouz, Oh & Viswanath 2015, Thm. 3.3)."""
    mpmath.mp.dps = 50
    e = mpmath.mpf(epsilon)
    low = 1 / (1 + mpmath.e**e)

    def profile(t: mpmath.mpf) -> mpmath.mpf:
        return mpmath.fsum(
            mpmath.binomial(k, j)
            * low**j
            * (1 - low) ** (k - j)
            * (1 - mpmath.e ** (t - e * (k - 2 * j)))
            for j in range(k + 1)
            if e * (k - 2 * j) > t
        )

    lo, hi = mpmath.mpf(0), e * k
    for _ in range(150):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if profile(mid) <= delta else (mid, hi)
    return float(hi)


@pytest.mark.parametrize(("k", "epsilon"), [(50, 0.1), (200, 0.05), (20, 0.5)])
def test_the_charge_is_never_below_the_optimal_composition_of_its_releases(
    k: int, epsilon: float
) -> None:
    # A filter also bounds a fixed sequence, so it cannot beat the exact composition of
    # that sequence at the δ the releases were charged: below it would be unsound.
    delta = Fraction(1, 10**7)
    state = _fold([(Fraction(epsilon), delta, [PureDPEvent(epsilon)])] * k)[-1]
    assert state.epsilon >= Fraction(_optimal(k, epsilon, float(delta * k)))


def test_fifty_laplace_releases_at_a_tenth() -> None:
    state = _fold([(Fraction(1, 10), Fraction(1, 10**7), [LaplaceEvent(10.0)])] * 50)[-1]
    assert state.basic_epsilon == 5
    assert state.delta == Fraction(5, 10**6)
    optimal = _optimal(50, 0.1, 5e-6)  # the PLD of this fixed sequence: about 2.96
    assert optimal < state.epsilon < 4.3


def test_a_release_that_is_not_what_its_events_say_counts_by_its_charge() -> None:
    # Events claiming a larger ε than charged: the generic (ε, δ) pair is used.
    loose = _fold([(Fraction(1, 10), Fraction(1, 10**7), [PureDPEvent(0.2)])] * 60)[-1]
    assert loose.epsilon == 6
    # Events of a subsampled mechanism without a Rényi bound: likewise.
    assert description_events({"events": []}) == []
    with pytest.raises(InvalidValueError, match="malformed"):
        description_events({"events": [{"type": "gaussian"}]})


def test_orders_are_fixed_so_every_reader_folds_the_same_total() -> None:
    assert len(ORDERS) == 16
    assert all(a > 1 for a in ORDERS)
    steps = [(Fraction(1, 20), Fraction(1, 10**8), [LaplaceEvent(20.0)])] * 120
    assert _fold(steps)[-1] == _fold(steps)[-1]


def test_the_natural_pld_filter_is_not_a_privacy_filter() -> None:
    """Why the charge is not the PLD of the releases: an adaptive analyst breaks it.

    Release ε₁-randomized response. If its output raises the privacy loss (it
    does with probability p = e^ε₁/(1 + e^ε₁) under the data with the person),
    release a Gaussian of multiplier z chosen so that the two compose to
    exactly (E, D)-DP; otherwise release a mechanism that spends δ = D
    outright. Each path's composition is (E, D)-DP, so the natural filter
    lets both run; but the session's δ at E is p·g(E − ε₁) + (1 − p)·D > D,
    with g the Gaussian's privacy profile.
    """
    eps1, target_delta = 1.0, 1e-6
    mu = 1.0  # the Gaussian: N(μ²/2, μ²) loss
    path_y = PLDAccountant().compose(PureDPEvent(eps1)).compose(GaussianEvent(1 / mu))
    big_e = path_y.epsilon(target_delta)  # E: the path composes to exactly (E, D)
    path_n = PLDAccountant().compose(PureDPEvent(eps1)).compose(ThresholdEvent(0.0, target_delta))
    assert path_n.delta(big_e) <= target_delta * (1 + 1e-6)  # fits too (up to grid error)

    def gaussian_profile(t: float) -> float:  # δ(t) of the μ-Gaussian (exact)
        return pf.GDP(mu).delta(t)

    p = math.exp(eps1) / (1 + math.exp(eps1))
    adaptive = p * gaussian_profile(big_e - eps1) + (1 - p) * target_delta
    assert adaptive > 1.2 * target_delta  # the session is not (E, D)-DP (about 1.27 D)

    # The charge refuses the first path's Gaussian: it is far above E there.
    state = Composition().add(Fraction(eps1), Fraction(0), [PureDPEvent(eps1)])
    charged_e = pf.GDP(mu).epsilon(target_delta)  # the Gaussian's own (ε, D)
    after = state.add(Fraction(charged_e), Fraction(target_delta), [GaussianEvent(1 / mu)])
    assert after.epsilon > big_e


def test_events_that_claim_less_than_the_charge_are_not_believed() -> None:
    # "Nothing ran" for a release charged ε > 0: it counts by its charge.
    empty = _fold([(Fraction(1, 10), Fraction(1, 10**7), [])] * 60)[-1]
    assert empty.epsilon == 6
    # A Laplace of ε = 0.05 for a release charged 0.1: likewise.
    smaller = _fold([(Fraction(1, 10), Fraction(1, 10**7), [LaplaceEvent(20.0)])] * 60)[-1]
    assert smaller.epsilon == 6
    # The same releases described truthfully are charged less.
    truthful = _fold([(Fraction(1, 10), Fraction(1, 10**7), [LaplaceEvent(10.0)])] * 60)[-1]
    assert truthful.epsilon < 5


def test_gaussian_releases_with_room_in_their_delta_compose_by_their_renyi_curve() -> None:
    # A discrete Gaussian that is (0.1, 5e-9)-DP, charged (0.1, 1e-8): half its δ is slack.
    z = 62.0
    assert pf.zCDP(1 / (2 * z * z)).epsilon(5e-9) <= 0.1
    state = _fold([(Fraction(1, 10), Fraction(1, 10**8), [GaussianEvent(z, discrete=True)])] * 100)
    assert state[-1].basic_epsilon == 10
    assert state[-1].epsilon < 2


def test_an_entry_charged_nothing_changes_nothing() -> None:
    # The accountant checks a spend against a composition read before the ledger's lock,
    # if the totals are unchanged: entries charged (0, 0) must not change the composition.
    base = _fold([(Fraction(1, 10), Fraction(1, 10**7), [LaplaceEvent(10.0)])] * 40)[-1]
    for events in (None, [], [GaussianEvent(1.0)], [ThresholdEvent(0.5, 0.0)]):
        after = base.add(Fraction(0), Fraction(0), events)
        assert (after.epsilon, after.sums, after.offsets) == (base.epsilon, base.sums, base.offsets)
        assert after.count == base.count + 1
