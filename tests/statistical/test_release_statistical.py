"""Statistical tests of releases: the noise each output gets is the noise ``explain`` reports.

Significance level: every hypothesis test in this module rejects at the fixed
level ``ALPHA = 1e-3`` (two-sided unless stated; Bonferroni-corrected where one
test checks several groups). The randomness is a fixed ``SeededRandomness``
stream, so each run draws the same samples and the outcome is reproducible; the
level is what a fresh seed would fail with when the code is right.

Repetitions: 400 releases of a 5-key query per configuration, so 2,000 noise
draws per measurement. The sample variance then has a relative standard error
of sqrt(2/2000) ≈ 3%, so a σ off by 10% (a 21% variance error) is rejected
(checked below as the power of the test).

The chi-square variance test: with e the 2,000 draws of (noisy − exact) and v
the variance of the discrete Gaussian with the reported σ (computed from its
pmf; it equals σ² to double precision once σ ≥ 2 grid units),
``T = Σ e² / v`` follows χ²(2000) under the null hypothesis.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import COUNT, AggregationSpec
from privframe.mechanisms.noise import SeededRandomness, discrete_gaussian_halfwidth

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning"),
]

ALPHA = 1e-3
RELEASES = 400
KEYS = ["a", "b", "c", "d", "e"]
LOW, HIGH = 0.0, 100.0
MID = (LOW + HIGH) / 2
# Every σ at least 4 grid units (the count's, without a unit: 1/sqrt(2·ρ·share)), where
# the chi-square test's normal approximation of the discrete Gaussian holds.
RHO = 0.05


def _data() -> pl.DataFrame:
    """600 units, each in 2 groups with 1 or 2 rows: the bounds k=2, m=3, M=4 never bind."""
    rng = np.random.default_rng(2024)
    rows: dict[str, list] = {"u": [], "g": [], "x": []}
    for unit in range(600):
        for g in rng.choice(KEYS, size=2, replace=False):
            for _ in range(rng.integers(1, 3)):
                rows["u"].append(unit)
                rows["g"].append(str(g))
                rows["x"].append(float(rng.integers(0, 101)))
    return pl.DataFrame(rows)


DATA = _data()
EXACT = (
    pl.DataFrame({"g": KEYS})
    .join(
        DATA.group_by("g").agg(
            pl.len().alias("n"),
            pl.col("x").sum().alias("s"),
            (pl.col("x") - MID).sum().alias("c"),
        ),
        on="g",
        how="left",
        maintain_order="left",
    )
    .fill_null(0)
)


def _discrete_variance(sigma_units: float) -> float:
    """Var of N_Z(0, σ²) in grid units: σ² for large σ, else summed from the pmf."""
    if sigma_units > 50:
        return sigma_units**2
    x = np.arange(-math.ceil(40 * sigma_units) - 2, math.ceil(40 * sigma_units) + 3)
    w = np.exp(-(x.astype(float) ** 2) / (2 * sigma_units**2))
    return float((x**2 * w).sum() / w.sum())


def _variance_p_value(errors: np.ndarray, variance: float) -> float:
    """Two-sided p-value of the chi-square test that zero-mean ``errors`` have ``variance``."""
    statistic = float(np.sum(errors**2) / variance)
    n = errors.size
    return float(2 * min(stats.chi2.cdf(statistic, n), stats.chi2.sf(statistic, n)))


def _mean_p_value(errors: np.ndarray, variance: float) -> float:
    z = float(errors.mean() / math.sqrt(variance / errors.size))
    return float(2 * stats.norm.sf(abs(z)))


CONFIGS = {
    # (privacy unit, bound): S = k·m² = 18; S = q·m² + r² = 9 + 1 = 10; S = 1.
    "k=2,m=3": ("u", {"max_groups": 2, "max_rows_per_group": 3}),
    "k=2,m=3,M=4": ("u", {"max_groups": 2, "max_rows_per_group": 3, "max_rows": 4}),
    "no unit": (None, {}),
}


def _releases(unit, bound, seed):
    sess = pf.Session(DATA, unit, pf.zCDP(RELEASES * RHO), rng=SeededRandomness(seed))
    query = sess.query()
    if bound:
        query = query.bound(**bound)
    query = query.group_by("g", keys=KEYS).agg(
        pf.count(), pf.sum("x", bounds=(LOW, HIGH)), pf.mean("x", bounds=(LOW, HIGH))
    )
    explanation = query.explain(rho=RHO)
    results = [query.release(rho=RHO) for _ in range(RELEASES)]
    return explanation, pl.concat(results)


@pytest.fixture(scope="module", params=list(CONFIGS))
def released(request):
    unit, bound = CONFIGS[request.param]
    seed = 100 + list(CONFIGS).index(request.param)
    explanation, results = _releases(unit, bound, seed)
    n = np.tile(EXACT["n"].to_numpy(), RELEASES)
    s = np.tile(EXACT["s"].to_numpy(), RELEASES)
    c = np.tile(EXACT["c"].to_numpy(), RELEASES)
    count = results["count"].to_numpy()
    mean = results["x_mean"].to_numpy()
    total = results["x_sum"].to_numpy()
    # The sum and the mean are post-processing of the noisy centred sum and the
    # shared noisy count (the grid's centre is MID exactly); the clamps never bind here.
    assert (count > 0).all()
    assert ((mean > LOW) & (mean < HIGH)).all()
    centred = total - MID * count
    np.testing.assert_allclose(mean, MID + centred / count, rtol=1e-9)
    errors = {
        "count": count - n,
        "sum": total - s,
        "centred_sum": centred - c,
    }
    return request.param, explanation, errors


def _measurement(explanation, kind):
    return next(m for m in explanation.measurements if m.kind == kind)


def _variance(explanation, kind):
    """The noise variance of a measurement, or of the sum read from two of them."""
    if kind != "sum":
        m = _measurement(explanation, kind)
        return _discrete_variance(m.sigma_units) * m.scale**2
    return _variance(explanation, "centred_sum") + MID**2 * _variance(explanation, "count")


@pytest.mark.parametrize("kind", ["count", "sum", "centred_sum"])
def test_noise_std_matches_explain(released, kind):
    _, explanation, errors = released
    variance = _variance(explanation, kind)
    if kind == "sum":  # the output's std as explain prints it
        (row,) = (r for r in explanation.rows if r["output"] == "x_sum")
        assert float(str(row["std"])) == pytest.approx(math.sqrt(variance), rel=1e-5)
    e = errors[kind]
    assert e.size == RELEASES * len(KEYS)
    assert _variance_p_value(e, variance) > ALPHA
    assert _mean_p_value(e, variance) > ALPHA
    # Power: the same draws reject a σ that is 10% off in either direction.
    assert _variance_p_value(e, variance * 1.1**2) < ALPHA
    assert _variance_p_value(e, variance / 1.1**2) < ALPHA


def test_explained_sigma_follows_the_sensitivity(released):
    name, explanation, _ = released
    squares = {"k=2,m=3": 18, "k=2,m=3,M=4": 10, "no unit": 1}[name]
    assert explanation.plan.limits.squares == squares
    assert sorted(m.kind for m in explanation.measurements) == ["centred_sum", "count"]
    sensitivities = {
        "count": math.sqrt(squares),
        "centred_sum": math.sqrt(squares) * (HIGH - LOW) / 2,
    }
    for kind, delta in sensitivities.items():
        m = _measurement(explanation, kind)
        assert m.sigma == pytest.approx(delta / math.sqrt(2 * float(m.exact_share)), rel=1e-9)


@pytest.mark.parametrize("kind", ["count", "centred_sum"])
def test_ci95_coverage(released, kind):
    _, explanation, errors = released
    m = _measurement(explanation, kind)
    e = errors[kind]
    covered = int(np.sum(np.abs(e) <= m.ci95 * (1 + 1e-12)))
    if m.sigma_units <= 50:
        # The exact coverage of the integer half-width, from the pmf.
        h = discrete_gaussian_halfwidth(m.sigma_units, 0.95)
        x = np.arange(-math.ceil(40 * m.sigma_units) - 2, math.ceil(40 * m.sigma_units) + 3)
        w = np.exp(-(x.astype(float) ** 2) / (2 * m.sigma_units**2))
        level = float(w[np.abs(x) <= h].sum() / w.sum())
    else:
        level = 0.95
    assert level >= 0.95
    assert stats.binomtest(covered, e.size, level).pvalue > ALPHA


def test_group_choice_is_uniform():
    """A unit in 10 groups with k=3 keeps each group with probability 3/10.

    Ten two-sided binomial tests over 300 fresh seeds, each at ALPHA/10.
    """
    groups = [f"g{i}" for i in range(10)]
    df = pl.DataFrame({"u": [1] * 1000, "g": [groups[i % 10] for i in range(1000)]})
    engine = PolarsEngine(df.lazy())
    keys = pl.DataFrame({"g": groups})
    rng = SeededRandomness(77)
    kept = np.zeros(10, dtype=np.int64)
    trials = 300
    for seed in rng.words(trials):
        spec = AggregationSpec((), "u", ("g",), keys, 3, 1, None, (), seed=int(seed))
        chosen = engine.aggregate(spec)[COUNT].to_numpy() > 0
        assert chosen.sum() == 3
        kept += chosen
    for count in kept:
        assert stats.binomtest(int(count), trials, 0.3).pvalue > ALPHA / 10
