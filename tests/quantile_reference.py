"""Reference computations for the quantile tests, written from the definitions alone.

From ``docs/quantiles.md`` and ``privframe/mechanisms/quantiles.py``,
independently of privframe's code:

* candidates c_i = L + i·(U − L)/(N − 1), each correctly rounded to a float once;
* a value (clipped to [c_0, c_{N−1}]; null and NaN dropped) equal to c_i is at
  position 2i, one strictly between c_{i−1} and c_i at position 2i − 1, compared
  exactly against the rounded candidates (2N − 1 positions);
* candidate i's rank interval is [a_i, b_i] = [#{v < c_i}, #{v <= c_i}], its
  distance d_i from the target rank q·n is 0 inside the interval and the gap to
  the interval outside it; P(i) ∝ exp(−η·d_i).

Also the polars engine's histogram spec and its dense reading (``hspec``,
``run``, ``hist_of``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import polars as pl
from scipy import stats

from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import AggregationSpec, HistogramSpec


def exact_candidates(lower: float, upper: float, n: int) -> list[Fraction]:
    """The real grid L + i·(U − L)/(N − 1), as exact rationals."""
    lo, hi = Fraction(lower), Fraction(upper)
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def float_candidates(lower: float, upper: float, n: int) -> list[float]:
    """The grid each correctly rounded to a float (Fraction.__float__ rounds correctly)."""
    return [float(c) for c in exact_candidates(lower, upper, n)]


def interval_distance(below: int, at_or_below: int, target: Fraction) -> Fraction:
    """The distance from ``target`` to the rank interval [below, at_or_below]."""
    if target < below:
        return below - target
    if target > at_or_below:
        return target - at_or_below
    return Fraction(0)


def hist_distances(row: Sequence[int] | np.ndarray, q: float) -> list[Fraction]:
    """d_i from a row of 2N − 1 position counts (2i on c_i, 2i − 1 between), exactly."""
    counts = [int(c) for c in row]
    assert len(counts) % 2 == 1
    target = Fraction(q) * sum(counts)
    out = []
    for i in range((len(counts) + 1) // 2):
        below = sum(c for p, c in enumerate(counts) if p < 2 * i)
        on = counts[2 * i]
        out.append(interval_distance(below, below + on, target))
    return out


def _kept(values: Sequence[float | None], grid: Sequence[float]) -> Counter[Fraction]:
    """Non-null, non-NaN values clipped to [c_0, c_{N−1}], as exact rationals, counted."""
    return Counter(
        Fraction(min(max(v, grid[0]), grid[-1]))
        for v in values
        if v is not None and not math.isnan(v)
    )


def value_intervals(
    values: Sequence[float | None], grid: Sequence[float]
) -> tuple[list[tuple[int, int]], int]:
    """([a_i, b_i] per candidate, n) from raw values, counted exactly."""
    kept = _kept(values, grid)
    cands = [Fraction(c) for c in grid]
    intervals = [
        (sum(k for v, k in kept.items() if v < c), sum(k for v, k in kept.items() if v <= c))
        for c in cands
    ]
    return intervals, kept.total()


def value_distances(
    values: Sequence[float | None], q: float, grid: Sequence[float]
) -> list[Fraction]:
    """d_i from raw values."""
    intervals, total = value_intervals(values, grid)
    target = Fraction(q) * total
    return [interval_distance(a, b, target) for a, b in intervals]


def probabilities(distances: list[Fraction], eta: float) -> np.ndarray:
    best = min(distances)
    weights = [math.exp(-float(Fraction(eta) * (d - best))) for d in distances]
    total = math.fsum(weights)
    return np.array([w / total for w in weights])


def log_probabilities(distances: list[Fraction], eta: float) -> np.ndarray:
    x = np.array([-eta * float(d) for d in distances])
    top = x.max()
    return x - (top + math.log(np.exp(x - top).sum()))


def ref_position(v: float | None, grid: Sequence[float]) -> int | None:
    """2i if the clipped value equals c_i, 2i − 1 if strictly between c_{i−1} and c_i."""
    if v is None or math.isnan(v):
        return None
    x = Fraction(min(max(v, grid[0]), grid[-1]))
    for i, c in enumerate(Fraction(c) for c in grid):
        if x == c:
            return 2 * i
        if x < c:
            return 2 * i - 1
    raise AssertionError("unreachable: the value is clipped to the grid")


def ref_hist(values: Sequence[float | None], grid: Sequence[float]) -> np.ndarray:
    out = np.zeros(2 * len(grid) - 1, dtype=np.int64)
    for v in values:
        p = ref_position(v, grid)
        if p is not None:
            out[p] += 1
    return out


def gof_pvalue(observed: np.ndarray, probs: np.ndarray) -> float:
    """Goodness of fit of category counts to ``probs``.

    Chi-square over the cells expected at least 5 times; the other cells are
    pooled into one cell if that is expected at least 5 times, otherwise tested
    with a Poisson upper tail (its count must not be too large). With two tests
    the smaller p-value is doubled (Bonferroni).
    """
    observed = np.asarray(observed, dtype=np.float64)
    expected = probs * observed.sum()
    big = expected >= 5
    obs, exp = list(observed[big]), list(expected[big])
    rest_obs, rest_exp = float(observed[~big].sum()), float(expected[~big].sum())
    pvalues = []
    if rest_exp >= 5:
        obs.append(rest_obs)
        exp.append(rest_exp)
    elif rest_obs > 0:
        pvalues.append(float(stats.poisson.sf(rest_obs - 1, rest_exp)))
    if len(obs) >= 2:
        exp_arr = np.array(exp) * (sum(obs) / sum(exp))  # conditional on the big cells' total
        pvalues.append(float(stats.chisquare(obs, exp_arr).pvalue))
    return min(1.0, len(pvalues) * min(pvalues)) if pvalues else 1.0


def hspec(
    *,
    unit: str | None = "u",
    keys: list[str] | None = None,
    group_by: tuple[str, ...] | None = None,
    k: int | None = None,
    m: int = 1_000_000,
    big_m: int | None = None,
    lower: float = 0.0,
    upper: float = 100.0,
    n: int = 101,
    seed: int = 7,
    column: str = "x",
) -> AggregationSpec:
    key_frame = None if keys is None else pl.DataFrame({"g": keys})
    if group_by is None:
        group_by = () if keys is None else ("g",)
    histogram = HistogramSpec("__h", column, tuple(float_candidates(lower, upper, n)))
    assert histogram.positions == 2 * n - 1
    return AggregationSpec((), unit, group_by, key_frame, k, m, big_m, (), seed, (histogram,))


def run(df: pl.DataFrame, s: AggregationSpec, *, streaming: bool = False) -> pl.DataFrame:
    return PolarsEngine(df.lazy(), streaming=streaming).aggregate(s)


def hist_of(out: pl.DataFrame, n: int = 101) -> np.ndarray:
    """The engine's sparse (position, count) pairs per key, as dense rows of 2n − 1 counts.

    Checks the sparse form on the way: a list of {position, count} structs per key,
    each position at most once, only nonzero counts, positions in [0, 2n − 1).
    """
    dtype = out.schema["__h"]
    assert isinstance(dtype, pl.List)
    assert isinstance(dtype.inner, pl.Struct)
    assert [f.name for f in dtype.inner.fields] == ["position", "count"]
    width = 2 * n - 1
    h = np.zeros((out.height, width), dtype=np.int64)
    for row, pairs in enumerate(out["__h"].to_list()):
        positions = [pair["position"] for pair in pairs]
        assert len(set(positions)) == len(positions), positions
        for pair in pairs:
            assert 0 <= pair["position"] < width
            assert pair["count"] > 0
            h[row, pair["position"]] = pair["count"]
    return h
