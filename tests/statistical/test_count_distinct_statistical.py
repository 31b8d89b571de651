"""pf.count_distinct(), statistically: the released noise has the explained σ.

Significance: the test rejects at the fixed level ALPHA = 1e-3 (a two-sided
chi-square test of the variance), with draws from a fixed ``SeededRandomness``
stream (reproducible); ALPHA is the rate at which a fresh seed would fail
correct code.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from release_setup import DISTINCT_KEYS, distinct_data, distinct_query
from scipy import stats

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import DISTINCT, AggregationSpec
from privframe.mechanisms.noise import SeededRandomness

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = 1e-3


def test_noise_matches_the_explained_sigma() -> None:
    df = distinct_data()
    spec = AggregationSpec(
        (), "u", ("g",), pl.DataFrame({"g": DISTINCT_KEYS}), None, 10**6, None, (), 1
    )
    exact = PolarsEngine(df.lazy()).aggregate(spec)[DISTINCT].to_numpy()
    sess = pf.Session(df, "u", pf.zCDP(1e9), rng=SeededRandomness(12))
    query = distinct_query(sess)
    (measurement,) = query.explain(rho=0.05).measurements
    errors = np.concatenate(
        [query.release(rho=0.05)["count_distinct"].to_numpy() - exact for _ in range(300)]
    )
    # Chi-square test of the variance (the discrete Gaussian's variance is σ² to 1e-7 here).
    n = errors.size
    statistic = float(np.sum(errors.astype(np.float64) ** 2)) / measurement.sigma**2
    p = 2 * min(stats.chi2.cdf(statistic, n), stats.chi2.sf(statistic, n))
    assert p > ALPHA
