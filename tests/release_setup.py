"""Data and queries shared by a subject's unit tests and its statistical tests."""

from __future__ import annotations

import numpy as np
import polars as pl

import privframe as pf
from privframe.api.query import Query

DISTINCT_KEYS = ["a", "b", "c", "d"]


def distinct_data() -> pl.DataFrame:
    """3,000 rows of 400 units over four keys, seeded."""
    rng = np.random.default_rng(4)
    n = 3_000
    return pl.DataFrame(
        {
            "u": rng.integers(0, 400, n),
            "g": rng.choice(DISTINCT_KEYS, n),
            "x": rng.uniform(0, 1, n),
        }
    )


def distinct_query(sess: pf.Session, k: int = 4, m: int = 1_000) -> Query:
    """Distinct units per key, at most ``k`` keys and ``m`` rows per key per unit."""
    return (
        sess.query()
        .bound(max_groups=k, max_rows_per_group=m)
        .group_by("g", keys=DISTINCT_KEYS)
        .agg(pf.count_distinct())
    )


def selection_data(n_lonely: int = 0, big: int = 200) -> pl.DataFrame:
    """Two big groups (a, b) of ``big`` units each, plus ``n_lonely`` groups of one unit each."""
    units = list(range(2 * big)) + list(range(10_000, 10_000 + n_lonely))
    groups = ["a"] * big + ["b"] * big + [f"lonely{i:05d}" for i in range(n_lonely)]
    return pl.DataFrame({"u": units, "g": groups, "x": [1.0] * len(units)})


def selection_query(sess: pf.Session, k: int = 1) -> Query:
    """A count per group, the groups chosen privately, one row per unit and group."""
    return sess.query().bound(max_groups=k, max_rows_per_group=1).group_by("g").agg(pf.count())
