"""The release pipeline (privframe.plan.release): the spec it hands the engine."""

from __future__ import annotations

import polars as pl
from internals import spec_of

import privframe as pf
from privframe.plan.planner import plan_release


def test_every_release_draws_a_fresh_bounding_seed() -> None:
    sess = pf.Session(pl.DataFrame({"u": [1, 1], "g": ["a", "b"]}), "u", pf.zCDP(1e6))
    query = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g", keys=["a", "b"])
    plan = query.agg(pf.count()).plan
    release = plan_release(plan, True, 1.0)
    assert len({spec_of(sess, plan, release).seed for _ in range(4)}) == 4
