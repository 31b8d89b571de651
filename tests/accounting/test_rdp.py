"""RDP accounting (privframe.accounting.rdp) and mechanism events (privframe.accounting.events).

Independent values: tests/data/dp_accounting_reference.json, computed with
Google's dp_accounting RdpAccountant (version and script inside the file), and
the closed form α/(2σ²) per Gaussian.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from privframe.accounting import rdp
from privframe.accounting._subsampled import subsampled_gaussian_rdp
from privframe.accounting.events import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    ThresholdEvent,
    ZCDPEvent,
    from_dict,
    from_json,
)
from privframe.errors import InvalidArgumentError, InvalidValueError, PrivframeError
from privframe.mechanisms import dpsgd

DATA = Path(__file__).resolve().parent.parent / "data" / "dp_accounting_reference.json"
REL = 1e-9


@cache
def reference() -> dict[str, Any]:
    return json.loads(DATA.read_text())


@cache
def raw_curve(q: float, sigma: float) -> tuple[float, ...]:
    """The unguarded per-order RDP: the same sums dp_accounting evaluates."""
    return tuple(subsampled_gaussian_rdp(q, sigma, a, guard=False) for a in rdp.DEFAULT_ORDERS)


@cache
def guarded_curve(q: float, sigma: float) -> tuple[float, ...]:
    return tuple(rdp.poisson_gaussian_rdp(q, sigma))


def sampled(q: float, sigma: float) -> PoissonSampledEvent:
    return PoissonSampledEvent(q, GaussianEvent(sigma))


REF_EVENTS = {
    "gaussian_1.1": GaussianEvent(1.1),
    "poisson_0.01_1.1": sampled(0.01, 1.1),
    "poisson_0.1_0.8": sampled(0.1, 0.8),
    "poisson_0.001_2.0": sampled(0.001, 2.0),
    "composed": ComposedEvent(
        [
            SelfComposedEvent(sampled(0.01, 1.1), 50),
            GaussianEvent(3.0),
            SelfComposedEvent(GaussianEvent(10.0), 7),
        ]
    ),
}


def close(a: float, b: float, rel: float = REL) -> bool:
    return a == b or abs(a - b) <= rel * abs(b)


# ---------------------------------------------------------------------------
# Against dp_accounting
# ---------------------------------------------------------------------------


def test_reference_file_is_self_describing() -> None:
    ref = reference()
    assert ref["dp_accounting_version"]
    assert "RdpAccountant" in ref["generated_by"]
    assert tuple(ref["orders"]) == rdp.DEFAULT_ORDERS


@pytest.mark.parametrize("name", ["poisson_0.01_1.1", "poisson_0.1_0.8", "poisson_0.001_2.0"])
def test_subsampled_rdp_per_order_matches_dp_accounting(name: str) -> None:
    expected = next(c["rdp"] for c in reference()["rdp_curves"] if c["name"] == name)
    event = REF_EVENTS[name]
    q, sigma = event.sampling_probability, event.event.noise_multiplier
    raw = raw_curve(q, sigma)
    guarded = guarded_curve(q, sigma)
    for order, mine, theirs, safe in zip(rdp.DEFAULT_ORDERS, raw, expected, guarded, strict=True):
        assert close(mine, theirs), (order, mine, theirs)
        # The rounding guard only ever adds, and stays small next to the value.
        assert safe >= mine
        assert close(safe, theirs, 1e-3), (order, safe, theirs)
    # Non-converged fractional orders are excluded (inf) in both.
    assert any(math.isinf(r) for r in expected) == (name == "poisson_0.1_0.8")


@pytest.mark.parametrize("name", ["gaussian_1.1", "composed"])
def test_accountant_rdp_matches_dp_accounting(name: str) -> None:
    expected = next(c["rdp"] for c in reference()["rdp_curves"] if c["name"] == name)
    mine = rdp.RDPAccountant().compose(REF_EVENTS[name]).rdp
    rel = REL if name == "gaussian_1.1" else 1e-4  # "composed" holds guarded subsampled terms
    for order, a, b in zip(rdp.DEFAULT_ORDERS, mine, expected, strict=True):
        assert a >= b * (1 - REL), order
        assert close(a, b, rel), (order, a, b)


def test_dpsgd_epsilon_matches_dp_accounting() -> None:
    ref = reference()
    assert len(ref["poisson_gaussian"]) == 27
    for case in ref["poisson_gaussian"]:
        q, sigma, steps = case["sampling_probability"], case["noise_multiplier"], case["steps"]
        # Unguarded curve, dp_accounting's conversion: equal to 1e-9.
        curve = [steps * r for r in raw_curve(q, sigma)]
        assert close(rdp.rdp_to_epsilon(rdp.DEFAULT_ORDERS, curve, ref["delta"]), case["epsilon"])
        # The guarded accountant: never below, within 1e-7.
        event = PoissonSampledEvent(q, GaussianEvent(sigma))
        safe = rdp.RDPAccountant().compose(event, steps).epsilon(ref["delta"])
        assert safe >= case["epsilon"]
        assert close(safe, case["epsilon"], 1e-7), case


def test_gaussian_composition_epsilon_matches_dp_accounting() -> None:
    ref = reference()
    for case in ref["gaussian_compositions"]:
        acct = rdp.RDPAccountant().compose(GaussianEvent(case["noise_multiplier"]), case["count"])
        eps = acct.epsilon(ref["delta"])
        assert eps >= case["epsilon"]
        assert close(eps, case["epsilon"]), case


def test_delta_matches_dp_accounting() -> None:
    for case in reference()["delta_at_epsilon"]:
        q, sigma, steps = case["sampling_probability"], case["noise_multiplier"], case["steps"]
        curve = [steps * r for r in raw_curve(q, sigma)]
        assert close(rdp.rdp_to_delta(rdp.DEFAULT_ORDERS, curve, case["epsilon"]), case["delta"])
        safe = rdp.RDPAccountant().compose(sampled(q, sigma), steps).delta(case["epsilon"])
        assert safe >= case["delta"]
        assert close(safe, case["delta"], 1e-5), case


def test_noise_multiplier_search_meets_target_and_is_tight() -> None:
    ref = reference()
    for case in ref["noise_multiplier"][:2]:
        q, steps, target = case["sampling_probability"], case["steps"], case["target_epsilon"]
        sigma = dpsgd.dpsgd_noise_multiplier(target, ref["delta"], q, steps)
        assert dpsgd.dpsgd_epsilon(sigma, q, steps, ref["delta"]) <= target
        assert dpsgd.dpsgd_epsilon(0.99 * sigma, q, steps, ref["delta"]) > target
        # dp_accounting's calibration agrees to its and our bisection tolerances.
        assert close(sigma, case["noise_multiplier"], 1e-5), (sigma, case)


# ---------------------------------------------------------------------------
# Closed forms and properties
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("sigma", "count"), [(0.5, 1), (1.0, 10), (3.7, 1000)])
def test_gaussian_composition_closed_form(sigma: float, count: int) -> None:
    acct = rdp.RDPAccountant().compose(GaussianEvent(sigma), count)
    for order, r in zip(acct.orders, acct.rdp, strict=True):
        exact = count * order / (2 * sigma**2)
        assert r >= exact * (1 - 1e-15)
        assert close(r, exact, 1e-14)
    # ε from the closed form: min over orders of the CKS conversion.
    delta = 1e-6
    expected = min(
        count * a / (2 * sigma**2) + math.log1p(-1 / a) - math.log(delta * a) / (a - 1)
        for a in rdp.DEFAULT_ORDERS
    )
    assert close(acct.epsilon(delta), max(0.0, expected), 1e-12)
    # A composition of k Gaussians is one Gaussian with σ/sqrt(k).
    merged = rdp.RDPAccountant().compose(GaussianEvent(sigma / math.sqrt(count)))
    assert close(merged.epsilon(delta), acct.epsilon(delta), 1e-12)


def test_discrete_gaussian_is_accounted_as_continuous() -> None:
    a = rdp.RDPAccountant().compose(GaussianEvent(2.0, discrete=True), 5)
    b = rdp.RDPAccountant().compose(GaussianEvent(2.0), 5)
    assert a.rdp == b.rdp


def test_monotonicity() -> None:
    delta = 1e-5
    eps_steps = [dpsgd.dpsgd_epsilon(1.1, 0.01, s, delta) for s in (10, 100, 1000)]
    assert eps_steps == sorted(eps_steps)
    eps_sigma = [dpsgd.dpsgd_epsilon(s, 0.01, 100, delta) for s in (0.8, 1.1, 2.0)]
    assert eps_sigma == sorted(eps_sigma, reverse=True)
    eps_q = [dpsgd.dpsgd_epsilon(1.1, q, 100, delta) for q in (0.001, 0.01, 0.1)]
    assert eps_q == sorted(eps_q)
    acct = rdp.RDPAccountant().compose(sampled(0.01, 1.1), 100)
    eps_delta = [acct.epsilon(d) for d in (1e-9, 1e-7, 1e-5)]
    assert eps_delta == sorted(eps_delta, reverse=True)
    deltas = [acct.delta(e) for e in (0.5, 1.0, 2.0)]
    assert deltas == sorted(deltas, reverse=True)
    # epsilon and delta are consistent: δ(ε(δ)) <= δ (up to the rounding guards).
    assert acct.delta(acct.epsilon(1e-6)) <= 1e-6 * (1 + 1e-9)


def test_subsampling_edge_cases() -> None:
    assert rdp.poisson_gaussian_rdp(0.0, 1.0, [2.0]) == [0.0]
    assert rdp.poisson_gaussian_rdp(1.0, 2.0, [4.0]) == rdp.gaussian_rdp(2.0, [4.0])
    # Subsampling never hurts.
    full = rdp.gaussian_rdp(1.0, [2.0, 10.0])
    assert all(
        s <= f for s, f in zip(rdp.poisson_gaussian_rdp(0.5, 1.0, [2.0, 10.0]), full, strict=True)
    )


def test_subsampled_composition_of_gaussians_uses_effective_multiplier() -> None:
    nested = PoissonSampledEvent(0.01, SelfComposedEvent(GaussianEvent(2.0), 4))
    a = rdp.RDPAccountant([2.0, 8.0]).compose(nested).rdp
    b = rdp.RDPAccountant([2.0, 8.0]).compose(sampled(0.01, 1.0)).rdp
    assert all(x >= y and close(x, y, 1e-12) for x, y in zip(a, b, strict=True))


def test_threshold_event_adds_rho_and_delta() -> None:
    acct = rdp.RDPAccountant().compose(ThresholdEvent(rho=0.1, delta=1e-7), 2)
    assert acct.threshold_delta == 2e-7
    assert acct.rdp[0] >= 0.2 * acct.orders[0]
    plain = rdp.RDPAccountant().compose(GaussianEvent(math.sqrt(1 / (2 * 0.2))))
    # The RDP part is converted at δ − 2e-7.
    assert close(acct.epsilon(1e-5), plain.epsilon(1e-5 - 2e-7), 1e-9)
    assert acct.delta(1.0) >= plain.delta(1.0) + 2e-7 * (1 - 1e-12)
    with pytest.raises(InvalidValueError, match="delta"):
        acct.epsilon(2e-7)


def test_accountant_records_events_for_replay() -> None:
    acct = rdp.RDPAccountant().compose(sampled(0.01, 1.1), 10).compose(GaussianEvent(3.0))
    session = ComposedEvent(acct.events)
    replayed = rdp.RDPAccountant().compose(from_json(session.to_json()))
    assert replayed.rdp == acct.rdp


# ---------------------------------------------------------------------------
# Events: serialization and validation
# ---------------------------------------------------------------------------

ALL_EVENTS = [
    GaussianEvent(1.5),
    GaussianEvent(0.75, discrete=True),
    ThresholdEvent(rho=0.02, delta=1e-9),
    sampled(0.01, 1.1),
    SelfComposedEvent(sampled(0.5, 2.0), 0),
    ComposedEvent([]),
    ComposedEvent([GaussianEvent(1.0), SelfComposedEvent(ThresholdEvent(0.1, 0.0), 3)]),
]


@pytest.mark.parametrize("event", ALL_EVENTS, ids=repr)
def test_event_json_round_trip(event: Any) -> None:
    data = event.to_dict()
    assert data["version"] == 1
    assert isinstance(data["type"], str)
    assert from_dict(json.loads(json.dumps(data))) == event
    assert from_json(event.to_json()) == event


def test_event_versioning_and_unknown_fields_refused() -> None:
    data = GaussianEvent(1.0).to_dict()
    with pytest.raises(InvalidValueError, match="version"):
        from_dict({**data, "version": 4})
    with pytest.raises(InvalidValueError, match="version"):
        from_dict({k: v for k, v in data.items() if k != "version"})
    nested = sampled(0.1, 1.0).to_dict()
    nested["event"]["version"] = 99
    with pytest.raises(InvalidValueError, match="version"):
        from_dict(nested)
    with pytest.raises(InvalidValueError, match="unknown event type"):
        from_dict({**data, "type": "cauchy"})
    # A pure-DP event type exists from version 3 on: an older version cannot hold one.
    with pytest.raises(InvalidValueError, match="came in version 3"):
        from_dict({**data, "type": "laplace"})
    with pytest.raises(InvalidValueError, match="unexpected fields"):
        from_dict({**data, "width": 3})
    with pytest.raises(InvalidValueError, match="came in version 2"):
        from_dict({**data, "dimension": 3})
    with pytest.raises(InvalidValueError, match="dimension"):
        from_dict({**data, "version": 2, "dimension": 0})
    assert from_dict({**data, "version": 2, "dimension": 3}).dimension == 3
    # Written in the oldest version that holds it; dimension is metadata, not identity.
    assert GaussianEvent(1.0).to_dict()["version"] == 1
    with_dimension = GaussianEvent(1.0, dimension=4)
    assert with_dimension.to_dict()["version"] == 2
    assert from_json(with_dimension.to_json()).dimension == 4
    assert with_dimension == GaussianEvent(1.0)
    with pytest.raises(InvalidValueError, match="noise_multiplier"):
        from_dict({"type": "gaussian", "version": 1})
    with pytest.raises(InvalidValueError, match="JSON"):
        from_json("{not json")
    with pytest.raises(InvalidArgumentError):
        from_dict([1, 2])


@pytest.mark.parametrize(
    ("make", "error", "name"),
    [
        (lambda: GaussianEvent(0.0), InvalidValueError, "noise_multiplier"),
        (lambda: GaussianEvent(-1.0), InvalidValueError, "noise_multiplier"),
        (lambda: GaussianEvent(math.nan), InvalidValueError, "noise_multiplier"),
        (lambda: GaussianEvent("1"), InvalidArgumentError, "noise_multiplier"),
        (lambda: GaussianEvent(1.0, discrete=1), InvalidArgumentError, "discrete"),
        (lambda: sampled(1.5, 1.0), InvalidValueError, "sampling_probability"),
        (lambda: sampled(-0.1, 1.0), InvalidValueError, "sampling_probability"),
        (lambda: PoissonSampledEvent(0.1, 3), InvalidArgumentError, "event"),
        (lambda: SelfComposedEvent(GaussianEvent(1.0), -1), InvalidValueError, "count"),
        (lambda: SelfComposedEvent(GaussianEvent(1.0), 2.0), InvalidArgumentError, "count"),
        (lambda: ComposedEvent(GaussianEvent(1.0)), InvalidArgumentError, "events"),
        (lambda: ComposedEvent([GaussianEvent(1.0), "x"]), InvalidArgumentError, r"events\[1\]"),
        (lambda: ThresholdEvent(rho=-1.0, delta=0.0), InvalidValueError, "rho"),
        (lambda: ThresholdEvent(rho=0.1, delta=1.0), InvalidValueError, "delta"),
    ],
)
def test_bad_event_fields_raise_privframe_errors(make: Any, error: type, name: str) -> None:
    with pytest.raises(error, match=name):
        make()


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: rdp.RDPAccountant([1.0, 2.0]), InvalidValueError, "orders"),
        (lambda: rdp.RDPAccountant([]), InvalidValueError, "orders"),
        (lambda: rdp.RDPAccountant("2"), InvalidArgumentError, "orders"),
        (lambda: rdp.RDPAccountant().compose("gaussian"), InvalidArgumentError, "event"),
        (lambda: rdp.RDPAccountant().compose(GaussianEvent(1.0), -2), InvalidValueError, "count"),
        (lambda: rdp.RDPAccountant().epsilon(0.0), InvalidValueError, "delta"),
        (lambda: rdp.RDPAccountant().epsilon(1.0), InvalidValueError, "delta"),
        (lambda: rdp.RDPAccountant().delta(-1.0), InvalidValueError, "epsilon"),
        (lambda: dpsgd.dpsgd_epsilon(0.0, 0.01, 10, 1e-5), InvalidValueError, "noise_multiplier"),
        (lambda: dpsgd.dpsgd_epsilon(1.0, 2.0, 10, 1e-5), InvalidValueError, "sampling_prob"),
        (lambda: dpsgd.dpsgd_epsilon(1.0, 0.01, 1.5, 1e-5), InvalidArgumentError, "count"),
        (lambda: dpsgd.dpsgd_noise_multiplier(-1.0, 1e-5, 0.01, 10), InvalidValueError, "target"),
        (
            lambda: dpsgd.dpsgd_noise_multiplier(1.0, 1e-5, 0.0, 10),
            InvalidValueError,
            "sample_rate",
        ),
        (lambda: dpsgd.dpsgd_noise_multiplier(1.0, 1e-5, 0.01, 0), InvalidValueError, "steps"),
        (lambda: rdp.rdp_to_epsilon([2.0], [0.1, 0.2], 1e-5), InvalidValueError, "rdp"),
        (lambda: rdp.rdp_to_epsilon([2.0], [-0.1], 1e-5), InvalidValueError, "rdp"),
    ],
)
def test_bad_accountant_inputs_raise_privframe_errors(call: Any, error: type, name: str) -> None:
    with pytest.raises(error, match=name):
        call()


@pytest.mark.parametrize(
    "event",
    [PoissonSampledEvent(0.1, ThresholdEvent(0.1, 1e-9)), PoissonSampledEvent(0.1, ZCDPEvent(0.1))],
    ids=repr,
)
def test_unsupported_subsampled_events_are_refused_without_composing(event: Any) -> None:
    acct = rdp.RDPAccountant([2.0]).compose(GaussianEvent(1.0))
    with pytest.raises(PrivframeError):
        acct.compose(event)
    assert acct.rdp == (1.0,)
    assert len(acct.events) == 1


@pytest.mark.parametrize(("q", "sigma"), [(0.01, 1.1), (0.1, 0.8), (0.001, 2.0), (0.5, 1.0)])
def test_general_subsampled_bound_is_above_the_gaussian_series(q: float, sigma: float) -> None:
    # Without Zhu & Wang's factor 3 their series is MTZ's exact Gaussian one, so with
    # it the general bound must lie above the Gaussian's at every integer order (equal
    # at α = 2, which has no ℓ >= 3 term, up to each side's rounding guard).
    orders = [float(a) for a in range(2, 64)]
    general = rdp.poisson_rdp_general(q, 1 / (2 * sigma**2), orders)
    exact = rdp.poisson_gaussian_rdp(q, sigma, orders)
    for g, e, a in zip(general, exact, orders, strict=True):
        assert g >= e * (1 - 1e-12)
        assert g <= a / (2 * sigma**2) * (1 + 1e-12)
    # ...and not far above it where subsampling matters (small orders).
    assert general[0] <= 3 * exact[0]


def test_subsampled_discrete_gaussian_uses_the_general_bound() -> None:
    discrete = PoissonSampledEvent(0.01, GaussianEvent(1.1, discrete=True))
    continuous = PoissonSampledEvent(0.01, GaussianEvent(1.1))
    eps_discrete = rdp.RDPAccountant().compose(discrete, 1000).epsilon(1e-5)
    eps_continuous = rdp.RDPAccountant().compose(continuous, 1000).epsilon(1e-5)
    unsampled = rdp.RDPAccountant().compose(GaussianEvent(1.1, discrete=True), 1000)
    # Amplified (far below no subsampling), and at least the continuous value.
    assert eps_continuous <= eps_discrete < unsampled.epsilon(1e-5) / 10
    assert eps_discrete < 1.5 * eps_continuous
    # A fractional order takes the bound at the next integer order (RDP is monotone).
    curve = dict(zip(rdp.DEFAULT_ORDERS, rdp.RDPAccountant().compose(discrete).rdp, strict=True))
    assert curve[2.5] == curve[3.0]
    assert curve[1.5] == curve[2.0]
    # Never worse than no subsampling, even at q close to 1.
    nearly_all = PoissonSampledEvent(0.9, GaussianEvent(3.0, discrete=True))
    eps = rdp.RDPAccountant().compose(nearly_all, 5).epsilon(1e-6)
    plain = rdp.RDPAccountant().compose(GaussianEvent(3.0, discrete=True), 5).epsilon(1e-6)
    assert eps <= plain * (1 + 1e-12)  # up to the rounding of σ_eff


def test_curves_past_the_float_range_are_infinite_or_named() -> None:
    assert math.isinf(rdp.RDPAccountant().compose(GaussianEvent(1e-160)).epsilon(1e-5))
    assert math.isinf(rdp.RDPAccountant().compose(ZCDPEvent(1e308), 10).epsilon(1e-5))
    assert math.isinf(rdp.poisson_rdp_general(0.01, 1e308, [2.0])[0])
    with pytest.raises(InvalidValueError, match="too small to subsample"):
        rdp.RDPAccountant().compose(PoissonSampledEvent(0.5, GaussianEvent(1e-160, discrete=True)))
