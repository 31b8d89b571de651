"""Reaching into a Session's release pipeline, for tests that audit the exact aggregates.

The audits compare what the engine computes for neighbouring datasets with
what the planner promised; these helpers name the few internals they need.
"""

from __future__ import annotations

from typing import Any

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
