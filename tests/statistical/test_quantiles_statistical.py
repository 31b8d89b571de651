"""Private quantiles, statistically: the mechanism's draws, uniform row subsets, rank bounds.

Significance: every test here rejects at the fixed level ALPHA = 1e-3. A test
that checks several hypotheses splits ALPHA between them (Bonferroni; the
split is stated where it happens). All random draws come from fixed
``SeededRandomness`` streams (and the data from fixed numpy seeds), so every
run is reproducible; ALPHA is the rate at which a fresh seed would fail
correct code. The references are in ``tests/quantile_reference.py``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from quantile_reference import (
    float_candidates,
    gof_pvalue,
    hist_distances,
    hist_of,
    hspec,
    interval_distance,
    probabilities,
    run,
)
from scipy import stats

import privframe as pf
from privframe.mechanisms import noise, quantiles
from privframe.mechanisms.noise import SeededRandomness

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = 1e-3


# Small histograms over N = 6 candidates (11 positions: even = on c_i, odd = between).
CHOOSE_CASES = {
    # n = 7, q·n = 2.1: not an integer; rows on and between candidates.
    "q=0.3,n=7": ([1, 0, 2, 0, 0, 1, 1, 0, 1, 1, 0], 0.3, 0.8),
    # Intervals [0,0], [0,3], [3,3], [3,6], [6,6], [6,6] around target 3: three tied best
    # candidates and three tied worst.
    "ties": ([0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 0], 0.5, 0.5),
    # Every row on c_2: c_2 has distance 0, every other candidate 2.
    "point mass": ([0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0], 0.5, 0.5),
    "q=1": ([2, 0, 1, 0, 0, 3, 1, 0, 0, 0, 1], 1.0, 0.3),
    "q=0": ([0, 0, 0, 3, 1, 0, 0, 2, 0, 0, 0], 0.0, 1.1),
    "empty group": ([0] * 11, 0.9, 2.0),
    "q=1/3 (float),n=5": ([1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0], 1 / 3, 1.5),
}


@pytest.mark.parametrize("case", list(CHOOSE_CASES))
def test_choose_samples_the_exponential_mechanism(case: str) -> None:
    row, q, eta = CHOOSE_CASES[case]
    n_cand = (len(row) + 1) // 2
    draws = 20_000
    hist = np.tile(np.array([row], dtype=np.int64), (draws, 1))
    seed = list(CHOOSE_CASES).index(case) + 100
    out = quantiles.choose(hist, q, eta, rng=SeededRandomness(seed))
    assert out.dtype == np.int64
    assert out.shape == (draws,)
    observed = np.bincount(out, minlength=n_cand)
    assert observed.size == n_cand
    assert gof_pvalue(observed, probabilities(hist_distances(row, q), eta)) > ALPHA


# Rows of exact x (each with minimum 0): moderate, large (30, 700 = the clamp, beyond it).
FAST_ROWS = [
    [0.0, 0.5, 1.0, 2.0, 30.0, 700.0, 1e6],
    [0.25, 0.0, 0.0, 3.0, 40.0, 745.5, 0.125],
]


def test_exponential_choice_matches_exp_minus_x() -> None:
    # 200,000 draws, 100,000 per row pattern; each pattern tested at ALPHA/2.
    draws = 200_000
    x = np.array([FAST_ROWS[i % 2] for i in range(draws)], dtype=np.float64)
    out = noise.exponential_choice(
        x, lambda r, i: Fraction(float(x[r, i])), rng=SeededRandomness(7)
    )
    for p, row in enumerate(FAST_ROWS):
        observed = np.bincount(out[p::2], minlength=len(row))
        probs = np.exp(-np.array(row))
        probs /= probs.sum()
        # x >= 30 has probability below 1e-13: those cells must stay empty.
        assert observed[np.array(row) >= 30].sum() == 0
        assert gof_pvalue(observed, probs) > ALPHA / 2


def test_exponential_choice_exact_path_matches_exp_minus_x() -> None:
    # A NaN x̂ makes the float fast path undecided for every coin, so each coin is
    # decided by the exact (integer and rational) path: count that it is used.
    xs = [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(40)]
    draws = 8_000
    calls = [0]

    def exact_x(r: int, i: int) -> Fraction:
        calls[0] += 1
        return xs[i]

    x_hat = np.full((draws, len(xs)), np.nan)
    out = noise.exponential_choice(x_hat, exact_x, rng=SeededRandomness(8))
    assert calls[0] >= draws  # every accepted draw passed an exact coin
    observed = np.bincount(out, minlength=len(xs))
    probs = np.exp(-np.array([float(v) for v in xs]))
    assert observed[4] == 0  # exp(-40) ≈ 4e-18
    assert gof_pvalue(observed, probs / probs.sum()) > ALPHA


def test_engine_row_subset_is_uniform() -> None:
    # 3,000 units with 10 rows each in one key, row j at value 10·j (exactly on the
    # candidate c_j of the grid 0, 10, ..., 100: position 2j); m = 3. Each unit keeps a
    # uniform 3-subset, so with O_j the units keeping row j, T = X²·(K − 1)/((1 − p)·K)
    # is asymptotically χ²(K − 1) (the covariance of a without-replacement draw),
    # K = 10, p = 0.3.
    units, k_rows, m = 3000, 10, 3
    df = pl.DataFrame(
        {
            "u": np.repeat(np.arange(units), k_rows),
            "g": ["a"] * (units * k_rows),
            "x": np.tile(np.arange(k_rows) * 10.0, units),
        }
    )
    h = hist_of(run(df, hspec(keys=["a"], m=m, n=11, seed=2024)), 11)[0]
    assert h.size == 21
    assert not h[1::2].any()  # nothing between candidates
    observed = h[0 : 2 * k_rows : 2].astype(np.float64)
    assert observed.sum() == units * m
    p = m / k_rows
    x2 = float(((observed - units * p) ** 2 / (units * p)).sum())
    t = x2 * (k_rows - 1) / ((1 - p) * k_rows)
    assert stats.chi2.sf(t, k_rows - 1) > ALPHA


def _distance_of(sorted_x: np.ndarray, v: float, target: Fraction) -> Fraction:
    """The distance from ``target`` to v's rank interval [#{x < v}, #{x <= v}]."""
    below = int(np.searchsorted(sorted_x, v, side="left"))
    at_or_below = int(np.searchsorted(sorted_x, v, side="right"))
    return interval_distance(below, at_or_below, target)


def _check_rank(xs: np.ndarray, out: float, q: float, eta: float, agg, alpha: float) -> None:
    """d(out) <= d_min + rank_error(η, N, 1 − alpha): fails w.p. <= alpha."""
    grid = float_candidates(agg.lower, agg.upper, agg.candidates)
    assert out in grid
    sorted_x = np.sort(np.clip(xs, agg.lower, agg.upper))
    target = Fraction(q) * xs.size
    d_min = min(_distance_of(sorted_x, c, target) for c in grid)
    tol = d_min + Fraction(quantiles.rank_error(eta, agg.candidates, 1 - alpha))
    assert _distance_of(sorted_x, out, target) <= tol


def test_large_group_quantiles_are_within_the_rank_bound() -> None:
    # 50,000 rows (30,000 in "a", 20,000 in "b"), one row per unit, three quantiles at
    # once; "c" is a public key without rows. 6 rank checks at ALPHA/6 each.
    rng = np.random.default_rng(50)
    x = rng.uniform(0, 1000, 50_000)
    g = np.where(np.arange(50_000) < 30_000, "a", "b")
    df = pl.DataFrame({"g": g, "x": x})
    sess = pf.Session(df, None, pf.zCDP(10.0), rng=SeededRandomness(50))
    query = (
        sess.query()
        .group_by("g", keys=["a", "b", "c"])
        .agg(pf.median("x", bounds=(0, 1000)), pf.quantile("x", [0.1, 0.9], bounds=(0, 1000)))
    )
    plan = query.explain(rho=3.0).plan
    out = query.release(rho=3.0)
    assert isinstance(out, pl.DataFrame)
    assert out.columns == ["g", "x_median", "x_p10", "x_p90"]
    assert out["g"].to_list() == ["a", "b", "c"]
    for qm in plan.quantiles:
        name = qm.aggregate.output_name
        for i, key in enumerate(["a", "b"]):
            xs = x[g == key]
            released = float(out[name][i])
            _check_rank(xs, released, qm.aggregate.q, qm.eta, qm.aggregate, ALPHA / 6)
            # At ~25 rows per unit of value the rank bound is well below one spacing.
            assert abs(released - np.quantile(xs, qm.aggregate.q)) <= 2.0
        assert float(out[name][2]) in float_candidates(0, 1000, 1001)  # empty: any
    assert len(sess.ledger) == 1
    assert sess.ledger[0].rho == plan.cost.rho
    assert sess.spent.rho == plan.cost.rho


def test_private_key_selection_with_quantiles() -> None:
    # 3 keys of 1,500 units (2 rows each: m = 2 never cuts) and 5 keys of one unit
    # each. The big keys survive (their distinct counts are ~100 σ above the threshold)
    # and each one-unit key with probability <= δ = 1e-6; 3 rank checks at ALPHA/3.
    rng = np.random.default_rng(8)
    units = np.arange(4500)
    keys = np.array(["a", "b", "c"])[units // 1500]
    x = rng.uniform(0, 1000, 2 * units.size)
    big = pl.DataFrame({"u": np.repeat(units, 2), "g": np.repeat(keys, 2), "x": x})
    lonely = pl.DataFrame(
        {"u": np.arange(9000, 9005), "g": [f"z{i}" for i in range(5)], "x": [1.0] * 5}
    )
    df = pl.concat([big, lonely])
    sess = pf.Session(df, "u", pf.zCDP(10.0, delta=1e-6), rng=SeededRandomness(9))
    query = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=2)
        .group_by("g")
        .agg(pf.count(), pf.median("x", bounds=(0, 1000)))
    )
    plan = query.explain(rho=2.0).plan
    assert plan.selection is not None
    assert plan.cost.delta == 1e-6
    out = query.release(rho=2.0, with_error=True)
    assert out["g"].to_list() == ["a", "b", "c"]
    (qm,) = plan.quantiles
    for i, key in enumerate(["a", "b", "c"]):
        xs = big.filter(pl.col("g") == key)["x"].to_numpy()
        _check_rank(xs, float(out["x_median"][i]), 0.5, qm.eta, qm.aggregate, ALPHA / 3)
    assert out["x_median_rank_ci95"].to_list() == [qm.rank_error()] * 3
    assert len(sess.ledger) == 1
    assert sess.ledger[0].delta == 1e-6
