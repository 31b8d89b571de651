"""Private key selection through Session.release, statistically: survival rates.

Significance: the test rejects at the fixed level ALPHA = 1e-3 (a two-sided
exact binomial test), with draws from a fixed ``SeededRandomness`` stream
(reproducible); ALPHA is the rate at which a fresh seed would fail correct code.
"""

from __future__ import annotations

import polars as pl
import pytest
from scipy import stats

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness
from privframe.mechanisms.selection import discrete_tail

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = 1e-3


def _data(n_lonely: int = 0, big: int = 200) -> pl.DataFrame:
    """Two big groups (a, b) of `big` units each, plus `n_lonely` groups of one unit each."""
    units = list(range(2 * big)) + list(range(10_000, 10_000 + n_lonely))
    groups = ["a"] * big + ["b"] * big + [f"lonely{i:05d}" for i in range(n_lonely)]
    return pl.DataFrame({"u": units, "g": groups, "x": [1.0] * len(units)})


def _query(sess: pf.Session, k: int = 1) -> pf.query.Query:
    return sess.query().bound(max_groups=k, max_rows_per_group=1).group_by("g").agg(pf.count())


def test_single_unit_groups_survive_at_most_at_the_threshold_rate() -> None:
    # 20,000 groups held by one unit each: every one is a Bernoulli trial of the rule.
    n, delta = 20_000, 0.05
    sess = pf.Session(_data(n), "u", pf.zCDP(1.0, delta=0.5), rng=SeededRandomness(3))
    query = _query(sess)
    selection = query.explain(rho=0.5, delta=delta).plan.selection
    assert selection is not None
    p = discrete_tail(selection.measurement.sigma_units, selection.threshold - 1)
    assert p <= delta  # k = 1: the whole δ goes to one group
    result = query.release(rho=0.5, delta=delta)
    kept_lonely = int(result["g"].str.starts_with("lonely").sum())
    assert stats.binomtest(kept_lonely, n, p).pvalue > ALPHA
    assert {"a", "b"} <= set(result["g"].to_list())  # 200 units is far above the threshold
