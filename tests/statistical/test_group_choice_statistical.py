"""Which groups a unit over max_groups keeps, statistically: uniform, on either bounding path.

The polars engine chooses a unit's ``k`` groups by a keyed hash: on packed
cells (integer units) by the order of one sort key, on the general path by
a rank in a window. Both must choose a uniformly random ``k``-subset over
fresh seeds, so the bounded aggregates have the same support and means as
before the packed path existed.

Significance: each test rejects at the fixed level ALPHA = 1e-3 (chi-square
tests over the C(5, 2) = 10 subsets, from seeds 0 .. N − 1: reproducible);
ALPHA is the rate at which another range of seeds would fail correct code.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter

import numpy as np
import polars as pl
import pytest
from scipy import stats

from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import COUNT, AggregationSpec, ValueSpec

pytestmark = pytest.mark.statistical

ALPHA = 1e-3
N = 1000
KEYS = ["a", "b", "c", "d", "e", "f"]
SUBSETS = [frozenset(s) for s in itertools.combinations("abcde", 2)]


@functools.cache
def choices(unit_type: pl.DataType) -> Counter[frozenset[str]]:
    """The subset unit 7 keeps (k = 2 of its 5 groups) for each of N seeds."""
    df = pl.DataFrame(
        {"u": [7] * 5 + [8], "g": ["a", "b", "c", "d", "e", "f"], "x": [1.0, 2, 3, 4, 5, 6]}
    ).with_columns(pl.col("u").cast(unit_type))
    engine = PolarsEngine(df.lazy())
    value = ValueSpec("s", "x", 0.0, 8.0, 0, 0, 8, 0, 0.0)
    keys = pl.DataFrame({"g": KEYS})
    kept: Counter[frozenset[str]] = Counter()
    for seed in range(N):
        spec = AggregationSpec((), "u", ("g",), keys, 2, 1, None, (value,), seed)
        out = engine.aggregate(spec)
        counts = dict(zip(KEYS, out[COUNT].to_list(), strict=True))
        sums = dict(zip(KEYS, out["s"].to_list(), strict=True))
        assert counts["f"] == 1  # unit 8's one group is always kept
        chosen = frozenset(g for g in "abcde" if counts[g])
        assert len(chosen) == 2
        assert all(sums[g] == (KEYS.index(g) + 1 if g in chosen else 0) for g in "abcde")
        kept[chosen] += 1
    return kept


@pytest.mark.parametrize("unit_type", [pl.Int64, pl.String], ids=["packed", "general"])
def test_a_unit_keeps_a_uniformly_random_subset_of_its_groups(unit_type) -> None:
    kept = choices(unit_type)
    assert set(kept) == set(SUBSETS)  # the same support: every subset
    observed = np.array([kept[s] for s in SUBSETS])
    assert stats.chisquare(observed).pvalue > ALPHA


def test_both_paths_choose_with_the_same_distribution() -> None:
    packed, general = choices(pl.Int64), choices(pl.String)
    table = np.array([[packed[s] for s in SUBSETS], [general[s] for s in SUBSETS]])
    assert stats.chi2_contingency(table).pvalue > ALPHA
