"""A budget that asks for less noise than the exact samplers draw gets their smallest scale.

The planner raises such a measurement's noise to the sampler's floor (σ = 2^-20
grid units for the discrete Gaussian, b = 2^-10 for the discrete Laplace) and
charges the budget asked: more noise than the share needs is private at that
share. At the floors the noise is 0 but with probability below 2e-22, so a
release gives the exact answer on its grid; the checks below are exact up to
the grid's rounding of each row (half a grid unit), not statistical.
"""

from __future__ import annotations

import html
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.mechanisms.noise import MIN_LAPLACE_SCALE, MIN_SIGMA, SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

HUGE = 10**40
KEYS = ["a", "b", "c"]
# (session budget, release arguments, the noise's floor in grid units)
KINDS = {
    "zCDP": (pf.zCDP(2 * HUGE), {"rho": HUGE}, MIN_SIGMA),
    "PureDP": (pf.PureDP(2 * HUGE), {"epsilon": HUGE}, MIN_LAPLACE_SCALE),
    "ApproxDP": (pf.ApproxDP(2 * HUGE, 1e-3), {"epsilon": HUGE}, None),
}


def data(bounds: tuple[float, float], n: int = 3000, seed: int = 0) -> pl.DataFrame:
    """Units 0-299 in groups a-c, with values spread over ``bounds`` (none clipped)."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "u": rng.integers(0, 300, n),
            "g": rng.choice(KEYS, n),
            "x": rng.uniform(*bounds, n),
        }
    )


def query(sess: pf.Session, bounds: tuple[float, float]):
    return (
        sess.query()
        .bound(max_groups=3, max_rows_per_group=30)
        .group_by("g", keys=KEYS)
        .agg(pf.count(), pf.sum("x", bounds=bounds), pf.mean("x", bounds=bounds))
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bounds", [(-50.0, 50.0), (0.0, 1e-6), (0.0, 1e15)])
def test_a_huge_budget_releases_the_exact_answer_and_charges_what_it_asks(kind, bounds):
    budget, spend, _ = KINDS[kind]
    df = data(bounds)
    sess = pf.Session(df, "u", budget, rng=SeededRandomness(1))
    explanation = query(sess, bounds).explain(**spend)
    released = query(sess, bounds).release(**spend).sort("g")
    exact = (
        df.group_by("g").agg(pl.len(), pl.col("x").sum().alias("s"), pl.col("x").mean().alias("m"))
    ).sort("g")
    assert released["count"].to_list() == exact["len"].to_list()
    # Each row is rounded to the sum's grid, by at most half a unit.
    (centred,) = (m for m in explanation.measurements if m.kind == "centred_sum")
    slack = exact["len"].cast(pl.Float64) * centred.scale / 2
    assert ((released["x_sum"] - exact["s"]).abs() <= slack).all()
    assert ((released["x_mean"] - exact["m"]).abs() <= slack / exact["len"]).all()
    assert sess.spent == type(budget)(**spend, **({"delta": 0} if kind == "ApproxDP" else {}))


@pytest.mark.parametrize("kind", ["zCDP", "PureDP"])
def test_a_raised_noise_is_the_samplers_floor_private_at_its_share_and_explained(kind):
    budget, spend, floor = KINDS[kind]
    sess = pf.Session(data((0.0, 100.0)), "u", budget)
    explanation = query(sess, (0.0, 100.0)).explain(**spend)
    lines = str(explanation).splitlines()
    sign = "σ" if kind == "zCDP" else "b"
    note = f"{sign} raised to the sampler's minimum"
    assert explanation.plan.raised == tuple(m.key for m in explanation.measurements)
    for m in explanation.measurements:
        assert m.scale_units == floor
        share = m.exact_share
        if kind == "zCDP":
            # Δ₂²/(2σ²) <= ρ: the share charged covers the noise drawn (Bun & Steinke 2016).
            assert Fraction(m.l2_units) ** 2 / (2 * Fraction(m.sigma_units) ** 2) <= share
        else:
            assert Fraction(m.l1_units) / Fraction(m.scale_units) <= share
            assert m.sigma_units >= math.sqrt(2) * m.scale_units
        (line,) = (line for line in lines if line.startswith(f"  {m.key}:"))
        assert note in line
    assert note in html.unescape(explanation._repr_html_())


def test_a_noise_the_budget_calibrates_carries_no_floor_note():
    sess = pf.Session(data((0.0, 100.0)), "u", pf.zCDP(1.0))
    explanation = query(sess, (0.0, 100.0)).explain(rho=0.5)
    assert explanation.plan.raised == ()
    assert "raised to the sampler's minimum" not in str(explanation)


def test_groups_chosen_privately_at_a_huge_budget_are_the_groups_of_the_data():
    df = data((0.0, 100.0))
    sess = pf.Session(df, "u", pf.zCDP(2 * HUGE, delta=1e-3), rng=SeededRandomness(2))
    q = sess.query().bound(max_groups=3, max_rows_per_group=30).group_by("g").agg(pf.count())
    released = q.release(rho=HUGE, delta=1e-6).sort("g")
    exact = df.group_by("g").len().sort("g")
    assert released.rows() == exact.rows()


def test_a_budget_too_small_for_the_largest_laplace_scale_is_still_refused_before_charging():
    sess = pf.Session(data((0.0, 100.0)), "u", pf.PureDP(1.0))
    with pytest.raises(pf.InvalidBudgetError, match="epsilon=1e-13 is too small"):
        query(sess, (0.0, 100.0)).release(epsilon=1e-13)
    assert sess.ledger == ()
