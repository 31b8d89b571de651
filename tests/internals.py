"""Reaching into a Session's release pipeline, for tests that audit the exact aggregates.

The audits compare what the engine computes for neighbouring datasets with
what the planner promised; these helpers name the few internals they need.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl

from privframe.engines.spec import AggregationSpec
from privframe.plan.ir import Plan
from privframe.plan.measurements import Measurement
from privframe.plan.planner import ReleasePlan
from privframe.plan.release import value_column


def spec_of(sess: Any, plan: Plan, release: ReleasePlan) -> AggregationSpec:
    """The engine spec the session's pipeline builds for ``release``."""
    return sess._pipeline.spec(plan, release, sess.check(plan))


def column_of(release: ReleasePlan, m: Measurement) -> str:
    """The engine's working column of a value measurement."""
    return value_column(release.measurements.index(m))


@dataclasses.dataclass(frozen=True)
class Released:
    """One real release: its plan, the engine spec, the exact aggregates it noised, its output."""

    release: ReleasePlan
    spec: AggregationSpec
    exact: pl.DataFrame
    output: Any


def released_exactly(sess: Any, query: Any, **spend: Any) -> Released:
    """Run ``query.release(**spend)`` and keep what its pipeline planned and computed exactly.

    The session's pipeline is watched (its ``plan`` and ``aggregate`` calls
    recorded) for the one release, so the exact aggregates are those the
    release charged for and noised, through ``Session.release`` itself.
    """
    pipeline = sess._pipeline
    seen: dict[str, Any] = {}
    plan, aggregate = pipeline.plan, pipeline.aggregate

    def planned(*args: Any, **kwargs: Any) -> ReleasePlan:
        seen["release"] = plan(*args, **kwargs)
        return seen["release"]

    def computed(spec: AggregationSpec) -> pl.DataFrame:
        seen["spec"], seen["exact"] = spec, aggregate(spec)
        return seen["exact"]

    pipeline.plan, pipeline.aggregate = planned, computed
    try:
        output = query.release(**spend)
    finally:
        del pipeline.plan, pipeline.aggregate
    return Released(seen["release"], seen["spec"], seen["exact"], output)
