"""Private key selection through Session.release: δ accounting and refusals.

The survival rate's statistical test is in
tests/statistical/test_selection_release_statistical.py.
"""

from __future__ import annotations

import math
import warnings

import polars as pl
import pytest
from internals import spec_of
from release_setup import selection_data, selection_query

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness
from privframe.mechanisms.selection import discrete_threshold
from privframe.plan.planner import ReleasePlan, plan_release

pytestmark = pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning")


def test_selection_spends_delta_and_refuses_when_none_is_left() -> None:
    sess = pf.Session(selection_data(), "u", pf.zCDP(1.0, delta=1e-6))
    out = selection_query(sess).release(rho=0.25, delta=4e-7)
    assert out["g"].to_list() == ["a", "b"]  # sorted observed keys
    assert sess.ledger[-1].delta == 4e-7
    assert sess.ledger[-1].description["selection"]["delta"] == 4e-7
    selection_query(sess).release(rho=0.25)  # the default spends what is left
    assert sess.remaining.delta == 0
    with pytest.raises(pf.InvalidBudgetError, match="public keys"):
        selection_query(sess).release(rho=0.25)
    assert len(sess.ledger) == 2


def test_selection_at_a_huge_budget_releases_without_warnings() -> None:
    # rho = 5e9, about what epsilon = 1e6 converts to, gives σ ≈ 1e-5: numpy's overflow
    # RuntimeWarning escaped from the threshold's tail sums.
    sess = pf.Session(selection_data(n_lonely=3), "u", pf.zCDP(1e10, delta=1e-5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = selection_query(sess).release(rho=5e9, delta=1e-6)
    assert out["g"].to_list() == ["a", "b"]
    assert out["count"].to_list() == [200, 200]


def test_selection_without_delta_in_the_budget_suggests_public_keys() -> None:
    sess = pf.Session(selection_data(), "u", pf.zCDP(1.0))
    with pytest.raises(pf.InvalidBudgetError, match=r"keys=\[\.\.\.\]"):
        selection_query(sess).release(rho=0.5)
    with pytest.raises(pf.InvalidBudgetError, match="delta"):
        selection_query(sess).explain(rho=0.5)
    assert sess.ledger == ()


def test_selection_needs_max_groups() -> None:
    sess = pf.Session(selection_data(), "u", pf.zCDP(1.0, delta=1e-6))
    query = sess.query().bound(max_rows_per_group=1).group_by("g").agg(pf.count())
    with pytest.raises(pf.InvalidValueError, match="max_groups"):
        query.release(rho=0.5)


def test_delta_on_a_public_keys_query_is_refused() -> None:
    sess = pf.Session(selection_data(), "u", pf.zCDP(1.0, delta=1e-6))
    query = sess.query().bound(max_rows_per_group=1).group_by("g", keys=["a"]).agg(pf.count())
    with pytest.raises(pf.InvalidValueError, match="delta"):
        query.release(rho=0.5, delta=1e-7)


def test_max_groups_bounds_units_without_public_keys() -> None:
    # One unit in 50 groups with k = 2: with a loose threshold, at most its 2 chosen
    # groups can carry it; its other 48 groups have no other units and vanish exactly.
    df = pl.DataFrame({"u": [1] * 50, "g": [f"g{i:02d}" for i in range(50)]})
    sess = pf.Session(df, "u", pf.zCDP(1e6, delta=0.9), rng=SeededRandomness(1))
    exact = sess._engine.aggregate(spec_of(sess, selection_query(sess, k=2).plan, _plan(sess, k=2)))
    assert exact.height == 2


def _plan(sess: pf.Session, k: int) -> ReleasePlan:
    return plan_release(selection_query(sess, k).plan, True, 1.0, None, 0.5)


def test_explain_for_selection_reveals_nothing_about_the_data() -> None:
    one = pf.Session(selection_data(10), "u", pf.zCDP(1.0, delta=1e-6))
    two = pf.Session(selection_data(0, big=3), "u", pf.zCDP(1.0, delta=1e-6))
    text = str(selection_query(one, k=3).explain(rho=0.3))
    assert text == str(selection_query(two, k=3).explain(rho=0.3))
    assert "noisy count >=" in text
    assert "95% at" in text


def test_threshold_grows_with_k_and_shrinks_with_delta() -> None:
    sess = pf.Session(selection_data(), "u", pf.zCDP(1.0, delta=1e-3))

    def tau(k: int, delta: float) -> int:
        selection = selection_query(sess, k).explain(rho=0.5, delta=delta).plan.selection
        assert selection is not None
        return selection.threshold

    assert tau(1, 1e-6) <= tau(1, 1e-9)
    assert math.isfinite(tau(5, 1e-6))
    assert tau(1, 1e-6) < tau(5, 1e-6)


def test_selection_threshold_uses_the_units_group_bound() -> None:
    df = pl.DataFrame({"u": [1, 2], "g": ["a", "b"]})
    sess = pf.Session(df, "u", pf.zCDP(1.0, delta=1e-6))
    query = sess.query().bound(max_groups=4, max_rows_per_group=1).group_by("g").agg(pf.count())
    selection = query.explain(rho=0.5).plan.selection
    assert selection is not None
    sigma = selection.measurement.sigma_units
    assert selection.threshold == discrete_threshold(sigma, 4, 1e-6)
    assert selection.threshold > discrete_threshold(sigma, 1, 1e-6)
