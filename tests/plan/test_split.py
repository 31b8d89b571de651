"""Splitting ρ to balance relative error (privframe.plan.split and the planner's use of it)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.api.query import Query
from privframe.plan.split import balanced_fractions


def _worst(b: np.ndarray, f: np.ndarray) -> float:
    return float(np.max(b @ (1.0 / f)))


def test_separate_measurements_get_rho_in_proportion_to_their_need() -> None:
    # b1/f1 = b2/f2 at the optimum, so f is proportional to b.
    assert balanced_fractions([[1.0, 0.0], [0.0, 4.0]]) == pytest.approx([0.2, 0.8], rel=1e-6)
    assert balanced_fractions([[1.0, 1.0]]) == pytest.approx([0.5, 0.5], rel=1e-6)


def test_measurements_no_output_needs_get_the_floor() -> None:
    assert balanced_fractions([[1.0, 0.0, 3.0]])[1] == pytest.approx(0.01 / 3, rel=0.02)


@pytest.mark.parametrize("seed", range(20))
def test_optimum_beats_the_equal_split_and_random_splits(seed: int) -> None:
    rng = np.random.default_rng(seed)
    outputs, measurements = rng.integers(1, 6), rng.integers(1, 6)
    b = rng.exponential(size=(outputs, measurements)) * (rng.random((outputs, measurements)) < 0.7)
    b[:, b.sum(axis=0) == 0] = 0.1  # every measurement read by someone
    b[b.sum(axis=1) == 0, 0] = 0.1  # every output reads something
    f = np.array(balanced_fractions(b))
    assert f.sum() == pytest.approx(1.0)
    assert np.all(f >= 0.01 / measurements / 1.01)
    best = _worst(b, f)
    assert best <= _worst(b, np.full(measurements, 1 / measurements)) * (1 + 1e-9)
    # Random splits that also respect the floor do no better.
    trials = rng.dirichlet(np.ones(measurements), size=2000)
    trials = np.maximum(trials, 0.01 / measurements)
    trials /= trials.sum(axis=1, keepdims=True)
    assert best <= min(_worst(b, t) for t in trials) * (1 + 1e-6)


@pytest.mark.parametrize("bad", [[], [[-1.0]], [[math.nan]], [[0.0, 0.0]]])
def test_bad_matrices_are_refused(bad: list) -> None:
    with pytest.raises(pf.InvalidArgumentError):
        balanced_fractions(bad)


def _query(sess: pf.Session) -> Query:  # type: ignore[name-defined]
    return (
        sess.query()
        .bound(max_groups=2, max_rows_per_group=3)
        .group_by("g", keys=["a", "b"])
        .agg(pf.count(), pf.sum("x", bounds=(0, 100)), pf.median("y", bounds=(0, 10)))
    )


@pytest.fixture
def sess() -> pf.Session:
    df = pl.DataFrame(
        {"u": list(range(400)), "g": ["a", "b"] * 200, "x": [5.0] * 400, "y": [1.0] * 400}
    )
    return pf.Session(df, "u", pf.zCDP(10.0))


def test_balance_equalises_the_outputs_relative_errors(sess: pf.Session) -> None:
    weights = pf.balance(rows=200, x_sum=20_000)
    explanation = _query(sess).explain(rho=1.0, weights=weights)
    errors = dict(explanation.plan.relative_errors)
    assert set(errors) == {"count", "x_sum", "y_median"}
    assert max(errors.values()) / min(errors.values()) == pytest.approx(1.0, rel=1e-3)
    assert explanation.plan.cost.rho == pytest.approx(1.0, rel=1e-12)
    assert explanation.plan.cost.rho <= 1.0
    # The count's error matches its measurement: 1.96·σ/rows.
    count = explanation.plan.measurement("count")
    assert errors["count"] == pytest.approx(1.959963984540054 * count.sigma / 200, rel=1e-9)
    text = str(explanation)
    assert "balanced relative error" in text
    # The equal split is worse at its worst output.
    equal = _query(sess).explain(rho=1.0).plan
    rhos = {m.key: float(m.exact_share) for m in (*equal.measurements, *equal.quantiles)}
    assert rhos["count"] != pytest.approx(float(count.exact_share))


def test_balanced_release_charges_rho_once(sess: pf.Session) -> None:
    before = sess.remaining.rho
    result = _query(sess).release(rho=1.0, weights=pf.balance(rows=200, x_sum=20_000))
    assert result.height == 2
    assert before - sess.remaining.rho == pytest.approx(1.0, rel=1e-12)


def test_balance_needs_expected_values_and_known_names(sess: pf.Session) -> None:
    with pytest.raises(pf.InvalidValueError, match="x_sum"):
        _query(sess).explain(rho=1.0, weights=pf.balance(rows=200))
    with pytest.raises(pf.InvalidValueError, match="unknown outputs"):
        _query(sess).explain(rho=1.0, weights=pf.balance(rows=200, x_sum=1, nope=3))
    assert sess.remaining.rho == 10.0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"rows": 0}, pf.InvalidBudgetError),
        ({"rows": math.nan}, pf.InvalidBudgetError),
        ({"rows": "many"}, pf.InvalidArgumentError),
        ({"rows": 10, "x_sum": 0}, pf.InvalidValueError),
        ({"rows": 10, "x_sum": math.inf}, pf.InvalidValueError),
    ],
)
def test_balance_arguments_are_checked(kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        pf.balance(**kwargs)


def test_every_measurement_keeps_a_floor_share() -> None:
    # The second measurement is worth nothing to first order; it still gets 1% of equal.
    f = balanced_fractions([[1.0, 0.0], [1.0, 1e-12]])
    assert f[1] >= 0.01 / 2 / 1.01


def test_a_mean_at_its_midpoint_still_funds_its_count(sess: pf.Session) -> None:
    query = sess.query().bound(max_groups=2, max_rows_per_group=3)
    query = query.group_by("g", keys=["a", "b"]).agg(pf.mean("x", bounds=(0, 100)))
    plan = query.explain(rho=1.0, weights=pf.balance(rows=200, x_mean=50)).plan
    assert float(plan.measurement("count").exact_share) >= 0.01 / 2 * 0.99


@pytest.mark.parametrize("kwargs", [{"rows": 1e-300}, {"rows": 10, "x_sum": 1e300}])
def test_out_of_range_guesses_are_refused(kwargs: dict) -> None:
    with pytest.raises(pf.InvalidValueError):
        pf.balance(**kwargs)
