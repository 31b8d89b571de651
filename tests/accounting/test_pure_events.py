"""Pure-DP events (Laplace, PureDP): their format, and their Rényi and PLD accounting."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import pytest

import privframe as pf
from privframe.accounting.events import (
    EVENT_FORMAT_VERSION,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SelfComposedEvent,
    ThresholdEvent,
    from_dict,
    from_json,
)
from privframe.accounting.pld import PLDAccountant
from privframe.accounting.rdp import RDPAccountant, pure_dp_rdp
from privframe.errors import InvalidArgumentError, InvalidBudgetError, InvalidValueError

# --------------------------------------------------------------------------- format


@pytest.mark.parametrize(
    "event",
    [
        LaplaceEvent(4.0),
        LaplaceEvent(0.5, discrete=True, dimension=7),
        PureDPEvent(0.25),
        ComposedEvent([LaplaceEvent(2.0), PureDPEvent(0.1), GaussianEvent(3.0)]),
        SelfComposedEvent(PureDPEvent(0.01), 100),
    ],
    ids=repr,
)
def test_pure_events_round_trip(event: object) -> None:
    data = event.to_dict()  # type: ignore[attr-defined]
    assert from_dict(json.loads(json.dumps(data))) == event
    assert from_json(event.to_json()) == event  # type: ignore[attr-defined]


def test_pure_events_are_written_in_version_3_and_older_ones_unchanged() -> None:
    assert EVENT_FORMAT_VERSION == 3
    assert LaplaceEvent(1.0).to_dict() == {
        "type": "laplace",
        "version": 3,
        "noise_multiplier": 1.0,
        "discrete": False,
    }
    assert PureDPEvent(0.5).to_dict() == {"type": "pure_dp", "version": 3, "epsilon": 0.5}
    assert GaussianEvent(1.0).to_dict()["version"] == 1
    assert GaussianEvent(1.0, dimension=2).to_dict()["version"] == 2
    # A composition keeps its own version; the pure event inside carries 3.
    nested = ComposedEvent([PureDPEvent(0.5)]).to_dict()
    assert (nested["version"], nested["events"][0]["version"]) == (1, 3)


@pytest.mark.parametrize("version", [1, 2])
def test_a_pure_event_in_an_older_version_is_refused(version: int) -> None:
    for data in (LaplaceEvent(1.0).to_dict(), PureDPEvent(0.5).to_dict()):
        with pytest.raises(InvalidValueError, match="came in version 3"):
            from_dict({**data, "version": version})


def test_pure_event_fields_are_validated() -> None:
    with pytest.raises(InvalidValueError, match="unexpected fields"):
        from_dict({"type": "pure_dp", "version": 3, "epsilon": 0.5, "delta": 0.0})
    with pytest.raises(InvalidValueError, match="missing the field"):
        from_dict({"type": "laplace", "version": 3})
    with pytest.raises(InvalidBudgetError):
        LaplaceEvent(0.0)
    with pytest.raises(InvalidBudgetError):
        PureDPEvent(-0.1)
    with pytest.raises(InvalidArgumentError):
        LaplaceEvent(1.0, discrete="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="dimension"):
        LaplaceEvent(1.0, dimension=0)


def test_laplace_epsilon_is_the_inverse_multiplier_rounded_up() -> None:
    assert LaplaceEvent(2.0).epsilon == 0.5
    third = LaplaceEvent(3.0).epsilon
    assert Fraction(third) >= Fraction(1) / 3
    assert LaplaceEvent(1.0, dimension=3) == LaplaceEvent(1.0)  # dimension is metadata


# --------------------------------------------------------------------------- Rényi DP


def _exact_rr_rdp(epsilon: float, alpha: float) -> float:
    mpmath.mp.dps = 60
    p = mpmath.e**epsilon / (1 + mpmath.e**epsilon)
    value = p**alpha * (1 - p) ** (1 - alpha) + (1 - p) ** alpha * p ** (1 - alpha)
    return float(mpmath.log(value) / (alpha - 1))


@pytest.mark.parametrize("epsilon", [1e-6, 1e-3, 0.1, 1.0, 5.0, 30.0])
def test_pure_rdp_bounds_randomized_response_tightly(epsilon: float) -> None:
    orders = [1.01, 1.5, 2.0, 10.0, 256.0, 1e4]
    for alpha, value in zip(orders, pure_dp_rdp(epsilon, orders), strict=True):
        exact = _exact_rr_rdp(epsilon, alpha)
        assert exact <= value <= exact * (1 + 1e-8) + 1e-300
        assert value <= min(epsilon, alpha * epsilon**2 / 2) * (1 + 1e-15)


def test_pure_events_compose_in_the_rdp_accountant() -> None:
    acct = RDPAccountant().compose(LaplaceEvent(10.0), 50)
    assert acct.rdp == tuple(pf.accounting.round_up(50 * Fraction(r)) for r in pure_dp_rdp(0.1))
    # Never worse than adding the ε's, and much better for many small releases.
    assert acct.epsilon(1e-6) < 4.0 < 5.0
    mixed = RDPAccountant().compose(PureDPEvent(0.5)).compose(GaussianEvent(2.0))
    assert mixed.epsilon(1e-6) > 0


# --------------------------------------------------------------------------- PLD


def _optimal_k_fold(k: int, epsilon: float, delta: float) -> float:
    """Kairouz, Oh & Viswanath 2015, Thm. 3.3 (δ = 0 per step): the exact ε at δ."""
    mpmath.mp.dps = 60
    e = mpmath.mpf(epsilon)
    p_low = 1 / (1 + mpmath.e**e)  # P[loss = −ε] under P

    def profile(t: mpmath.mpf) -> mpmath.mpf:
        total = mpmath.mpf(0)
        for j in range(k + 1):
            loss = e * (k - 2 * j)
            if loss > t:
                weight = mpmath.binomial(k, j) * p_low**j * (1 - p_low) ** (k - j)
                total += weight * (1 - mpmath.e ** (t - loss))
        return total

    lo, hi = mpmath.mpf(0), e * k
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if profile(mid) <= delta else (mid, hi)
    return float(hi)


@pytest.mark.parametrize(
    ("k", "epsilon", "delta"), [(50, 0.1, 1e-6), (10, 1.0, 1e-6), (200, 0.05, 1e-8)]
)
def test_k_fold_randomized_response_matches_the_optimal_composition(
    k: int, epsilon: float, delta: float
) -> None:
    acct = PLDAccountant().compose(PureDPEvent(epsilon), k)
    lower, upper = acct.epsilon_bounds(delta)
    exact = _optimal_k_fold(k, epsilon, delta)
    assert acct.fallback is None
    assert lower <= exact <= upper == acct.epsilon(delta)
    assert upper - exact < 1e-3  # the grid error at h = 1e-4


def test_a_laplace_event_is_accounted_as_randomized_response() -> None:
    laplace = PLDAccountant().compose(LaplaceEvent(10.0), 50).epsilon(1e-6)
    assert laplace == PLDAccountant().compose(PureDPEvent(0.1), 50).epsilon(1e-6)
    assert laplace < 3.2 < 5.0  # optimal composition: about 3.173


def test_pure_and_continuous_gaussian_events_compose_in_one_pld() -> None:
    acct = PLDAccountant().compose(PureDPEvent(0.5), 3).compose(GaussianEvent(2.0), 2)
    assert acct.fallback is None
    lower, upper = acct.epsilon_bounds(1e-6)
    assert lower <= upper
    alone = PLDAccountant().compose(PureDPEvent(0.5), 3).epsilon(1e-6)
    assert upper > alone


def test_with_a_discrete_gaussian_pure_events_fall_back_to_their_zcdp_cost() -> None:
    acct = PLDAccountant().compose(PureDPEvent(0.5), 3).compose(GaussianEvent(2.0, discrete=True))
    assert acct.fallback == "zcdp"
    # ρ = 3·0.5²/2 + 1/(2·2²) (Bun & Steinke 2016, Prop. 1.4 for the ε-DP events).
    rho = Fraction(3, 8) + Fraction(1, 8)
    assert acct.epsilon(1e-6) == pf.zCDP(rho).epsilon(1e-6)


def test_threshold_delta_adds_to_a_pure_composition() -> None:
    acct = PLDAccountant().compose(PureDPEvent(1.0), 4).compose(ThresholdEvent(0.0, 1e-7))
    assert acct.fallback is None
    assert acct.delta(4.0) == pytest.approx(1e-7, rel=1e-6)
    with pytest.raises(InvalidValueError, match="must exceed"):
        acct.epsilon(1e-7)
    assert acct.epsilon(2e-7) <= 4.0


def test_mu_estimate_is_not_the_gaussian_shortcut_for_pure_events() -> None:
    acct = PLDAccountant().compose(PureDPEvent(0.1), 100)
    assert acct.mu_estimate(1e-6) == pf.accounting.mu_estimate(acct.epsilon(1e-6), 1e-6)
    assert math.isfinite(acct.mu_estimate(1e-6))
