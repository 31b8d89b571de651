"""The session tests' data: a synthetic table, exact sessions and planted sentinels.

Used by tests/api/test_session*.py and test_missing_values.py.
"""

from __future__ import annotations

import numpy as np
import polars as pl

import privframe as pf
from privframe.mechanisms.noise import SeededRandomness

REGIONS = ["north", "south", "east", "west"]
SENTINEL_TEXT = "SENTINEL-7d3f"
SENTINEL_NUMBER = 987654.321
# A budget so large that the noise is negligible (σ ≈ 1e-3): results are the exact aggregates.
EXACT = 1e6


def make_data(n: int = 300, seed: int = 0) -> pl.DataFrame:
    """``n`` rows of synthetic transactions: user_id, region, age and amount."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "user_id": rng.integers(0, 100, n),
            "region": rng.choice(["north", "south", "east"], n),
            "age": rng.integers(10, 80, n),
            "amount": rng.uniform(0, 1000, n).round(2),
        }
    )


def exact_release(df, unit="user_id", seed=0, **options):
    """A seeded session over ``df`` with a budget so large its results are exact."""
    return pf.Session(df, unit, pf.zCDP(EXACT), rng=SeededRandomness(seed), **options)
