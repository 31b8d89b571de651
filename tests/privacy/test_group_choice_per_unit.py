"""A unit's groups depend on its own cells and the seed only, never on the other units.

On the polars engine's packed path the order of a unit's groups is taken
from a 64-bit sort key holding the unit's offset, the top ``h`` bits of the
keyed hash and the key, where ``h`` shrinks as the units spread. Were two of
a unit's cells tied in those ``h`` bits ranked by key, a far-away unit (which
shrinks ``h``) could change the groups a unit keeps: the other units'
contributions would move with one person's presence, beyond the sensitivity
the noise is calibrated to. Here a unit has cells tied in the top 24 bits
right at its ``k``-th place, and adding a unit 2^21 ids away must change the
release by that unit's row only.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.mechanisms.noise import SeededRandomness

pytestmark = pytest.mark.filterwarnings("ignore::privframe.SeededRandomnessWarning")

KEYS = [f"g{i:05d}" for i in range(70_000)]  # 17 bits of key position
HASH_BITS = 63 - 17 - 22  # with units 0 and 2^21: the fewest the sort key may keep


def rows(*far: int) -> pl.DataFrame:
    """Unit 0 in every group, unit 1 in the first; and each ``far`` unit in the first."""
    units = [0] * len(KEYS) + [1, *far]
    groups = KEYS + [KEYS[0]] * (1 + len(far))
    return pl.DataFrame({"u": units, "g": groups})


def boundary_tie(seed: int) -> int:
    """A k at which unit 0's k-th and (k+1)-th cells by keyed hash tie in its top bits
    and come in the other order by key."""
    codes = pl.Series(np.arange(len(KEYS), dtype=np.int64))  # unit 0: cell = key position
    hashed = codes.hash(seed).to_numpy()
    order = np.argsort(hashed, kind="stable")
    top = hashed[order] >> np.uint64(64 - HASH_BITS)
    tied = np.flatnonzero((top[1:] == top[:-1]) & (order[1:] < order[:-1]))
    assert tied.size, "no tie at this seed"  # about 70 are expected
    return int(tied[0]) + 1


def released(df: pl.DataFrame, k: int, seeds: list[int]) -> list[int]:
    sess = pf.Session(df, "u", pf.zCDP(rho=1e10), rng=SeededRandomness(3))
    query = sess.query().bound(max_groups=k, max_rows_per_group=1).group_by("g", keys=KEYS)
    return query.agg(pf.count()).release(rho=1e10)["count"].to_list()


def test_a_far_away_unit_does_not_change_the_groups_another_unit_keeps(monkeypatch) -> None:
    seeds: list[int] = []
    aggregate = PolarsEngine.aggregate

    def spied(self, spec):
        seeds.append(spec.seed)
        return aggregate(self, spec)

    monkeypatch.setattr(PolarsEngine, "aggregate", spied)
    released(rows(), 10, seeds)  # the seed the seeded stream gives each release
    k = boundary_tie(seeds[0])
    near, far = released(rows(), k, seeds), released(rows(2**21), k, seeds)
    assert seeds[1:] == [seeds[0]] * 2
    # σ is about 0.001: the counts are exact. Unit 2^21 adds one row to the first group.
    moved = [g for g, (a, b) in enumerate(zip(near, far, strict=True)) if a != b]
    assert moved == [0]
    assert far[0] - near[0] == 1
    assert sum(near) == k + 1
