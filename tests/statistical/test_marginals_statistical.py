"""Marginals' noise and intervals: calibrated as stated, in zCDP and pure-DP sessions.

Each cell of a marginal is measured with discrete Gaussian noise of the
stated ``count_std`` (or discrete Laplace noise in a pure-DP session), and
``count_ci95_low``/``count_ci95_high`` is the measurement's exact 95%
interval clipped at 0: it must cover the true count in 94–97% of cells.

Sizes: 400 calls of two 6-cell and 2-cell tables, so 3,200 intervals per
session kind. Coverage 0.95 is then estimated within ±0.0039 (one standard
error): the band's lower edge is 2.6 standard errors away and its upper 5.2,
so a correct interval fails with probability below 5e-3 per check. The
measured variance of the noise (the interval's centre minus the truth, where
no end is clipped) must be within the two-sided 1e-3 chi-square band of the
stated std's square. The stream is a fixed ``SeededRandomness``: each run is
reproducible.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy import stats

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness
from privframe.plan.marginals import Exact, Measurer

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning"),
]

CALLS = 400
BAND = (0.94, 0.97)
SEX, REGION = ["f", "m"], ["n", "s", "e"]


def _data() -> pl.DataFrame:
    rng = np.random.default_rng(11)
    n = 900
    return pl.DataFrame({"sex": rng.choice(SEX, n), "region": rng.choice(REGION, n)})


@pytest.mark.parametrize(
    ("budget", "spend"),
    [(pf.zCDP(1e6), {"rho": 0.02}), (pf.PureDP(1e6), {"epsilon": 0.2})],
    ids=["zcdp", "pure"],
)
def test_intervals_cover_and_std_is_the_noise(budget: pf.Budget, spend: dict) -> None:
    df = _data()
    truth = {
        ("sex", "region"): df.group_by("sex", "region").len(),
        ("sex",): df.group_by("sex").len(),
    }
    sess = pf.Session(df, None, budget, rng=SeededRandomness(33))
    covered = total = 0
    errors: list[float] = []
    std = None
    for _ in range(CALLS):
        tables = sess.marginals(
            [("sex", "region"), ("sex",)], domains={"sex": SEX, "region": REGION}, **spend
        )
        for s, table in tables.items():
            joined = table.join(truth[s], on=list(s))
            low, high, n = joined["count_ci95_low"], joined["count_ci95_high"], joined["len"]
            covered += int(((low <= n) & (n <= high)).sum())
            total += joined.height
            inside = low > 0
            centre = (low + high) / 2
            errors += (centre - n).filter(inside).to_list()
            std = float(table["count_std"][0])
    coverage = covered / total
    assert BAND[0] <= coverage <= BAND[1], coverage
    k = len(errors)
    statistic = float(np.sum(np.square(errors))) / std**2
    low_q, high_q = stats.chi2.ppf([5e-4, 1 - 5e-4], k)
    assert low_q <= statistic <= high_q, (statistic / k, k)


def test_choices_follow_the_exponential_mechanism() -> None:
    """MST's and AIM's choices: P(r) ∝ exp(ε·score_r / (2·max w·M)), exactly.

    Three candidates with scores w·‖exact − estimate‖₁ of 1·2, 3·2 and 1·0
    (weights 1, 3 and 1; M = 1, so the sensitivity is 3; ε = 1 from ρ = 1/8)
    give probabilities ∝ exp(−4/6), 1 and exp(−6/6). 20,000 seeded draws; a
    chi-square test at 1e-3.
    """
    exact = Exact({"a": 2, "b": 2}, np.array([[0, 0], [1, 0]]), np.array([1, 1]))
    door = Measurer(exact, 1, "gaussian", SeededRandomness(8))
    candidates = [("a",), ("b",), ("a", "b")]
    estimates = [np.zeros(2), np.zeros(2), np.array([[1.0, 0.0], [1.0, 0.0]])]
    draws = 20_000
    picks = [
        door.choose(candidates, estimates, [1, 3, 1], [0.0, 0.0, 0.0], Fraction(1, 8))
        for _ in range(draws)
    ]
    weights = np.exp([-2 / 3, 0.0, -1.0])
    expected = draws * weights / weights.sum()
    observed = np.bincount(picks, minlength=3)
    assert stats.chisquare(observed, expected).pvalue > 1e-3
