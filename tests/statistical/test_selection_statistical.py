"""Private key selection, statistically: a one-unit group survives at the computed rate.

Significance: the test rejects at the fixed level ALPHA = 1e-3, with draws from a
fixed ``SeededRandomness`` stream (reproducible).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privframe.mechanisms.noise import SeededRandomness, discrete_gaussian
from privframe.mechanisms.selection import discrete_tail, discrete_threshold

pytestmark = [
    pytest.mark.statistical,
    pytest.mark.filterwarnings("ignore::privframe.errors.SeededRandomnessWarning"),
]

ALPHA = 1e-3


def test_single_unit_group_survives_at_the_computed_rate() -> None:
    # A group held by one unit has true count 1. With a loose delta the survival rate
    # is measurable: it must match P[1 + Z >= tau] and stay within delta's share.
    sigma, k, delta, n = 2.0, 3, 0.05, 400_000
    tau = discrete_threshold(sigma, k, delta)
    p = discrete_tail(sigma, tau - 1)
    noisy = 1 + discrete_gaussian(sigma, n, rng=SeededRandomness(99))
    survived = int(np.count_nonzero(noisy >= tau))
    assert stats.binomtest(survived, n, p).pvalue > ALPHA
    assert -math.expm1(k * math.log1p(-p)) <= delta
