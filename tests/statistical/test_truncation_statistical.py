"""Which rows a join's or flat map's truncation keeps, statistically: uniform, duplicates included.

``truncation="random"`` keeps each person's rows whose keyed hash ranks
lowest, with a fresh key per release. Identical rows must not share one fate:
a basket of nine teas and one jam cut to one item keeps the jam one time in
ten, and a person with rows a, a, b cut to two keeps {a, a} one time in three.

Significance: each test rejects at the fixed level ALPHA = 1e-3 (chi-square
tests over the possible kept multisets, from seeds 0 .. N − 1: reproducible);
ALPHA is the rate at which another range of seeds would fail correct code.
"""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest
from scipy import stats

from privframe.engines.spec import FlatMap, PrivateJoin, apply_steps

pytestmark = pytest.mark.statistical

ALPHA = 1e-3
N = 3000


def _chi_square_p(counts: Counter, expected: dict) -> float:
    assert set(counts) <= set(expected)
    observed = [counts.get(k, 0) for k in expected]
    return float(stats.chisquare(observed, [N * p for p in expected.values()]).pvalue)


def test_a_flat_map_keeps_a_duplicated_item_as_often_as_its_copies_say() -> None:
    basket = pl.DataFrame({"u": [1], "items": [["tea"] * 9 + ["jam"]]}).lazy()
    step = FlatMap("items", "items", max_rows=1)
    kept = Counter(
        apply_steps(basket, (step,), unit="u", seed=seed).collect()["items"][0] for seed in range(N)
    )
    assert _chi_square_p(kept, {"tea": 0.9, "jam": 0.1}) > ALPHA


def test_a_join_side_keeps_every_subset_of_rows_equally_often() -> None:
    left = pl.DataFrame({"u": [1, 1, 1], "v": ["a", "a", "b"]}).lazy()
    right = pl.DataFrame({"u": [1]}).lazy()
    step = PrivateJoin("r", (), ("u",), "inner", left_rows=2, right_rows=1)
    kept = Counter(
        tuple(
            sorted(
                apply_steps(left, (step,), unit="u", tables={"r": right}, seed=seed)
                .collect()["v"]
                .to_list()
            )
        )
        for seed in range(N)
    )
    # Of the C(3, 2) = 3 pairs of rows, one is {a, a} and two are {a, b}.
    assert _chi_square_p(kept, {("a", "a"): 1 / 3, ("a", "b"): 2 / 3}) > ALPHA
