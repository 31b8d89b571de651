"""Private key selection through Session.release, statistically: survival rates.

Significance: the test rejects at the fixed level ALPHA = 1e-3 (a two-sided
exact binomial test), with draws from a fixed ``SeededRandomness`` stream
(reproducible); ALPHA is the rate at which a fresh seed would fail correct code.
"""

from __future__ import annotations

import pytest
from release_setup import selection_data, selection_query
from scipy import stats

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness
from privframe.mechanisms.selection import discrete_tail

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = 1e-3


def test_single_unit_groups_survive_at_most_at_the_threshold_rate() -> None:
    # 20,000 groups held by one unit each: every one is a Bernoulli trial of the rule.
    n, delta = 20_000, 0.05
    sess = pf.Session(selection_data(n), "u", pf.zCDP(1.0, delta=0.5), rng=SeededRandomness(3))
    query = selection_query(sess)
    selection = query.explain(rho=0.5, delta=delta).plan.selection
    assert selection is not None
    p = discrete_tail(selection.measurement.sigma_units, selection.threshold - 1)
    assert p <= delta  # k = 1: the whole δ goes to one group
    result = query.release(rho=0.5, delta=delta)
    kept_lonely = int(result["g"].str.starts_with("lonely").sum())
    assert stats.binomtest(kept_lonely, n, p).pvalue > ALPHA
    assert {"a", "b"} <= set(result["g"].to_list())  # 200 units is far above the threshold
