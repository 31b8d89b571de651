"""Post-processing a release asks for: clamping, clipped intervals and a total row.

Everything here reads only noisy measurements and public parameters, so it
costs no privacy (post-processing, Dwork & Roth 2014, Prop. 2.1).

- **clamp** (default on): each estimate is clipped into the range its true
  value can take (:meth:`Aggregate.possible_range
  <privframe.plan.aggregates.base.Aggregate.possible_range>`): counts and
  sums of non-negative values at least 0, means and quantiles within their
  bounds, variances within ``[0, ((U − L)/2)²]``. The truth lies in that
  range, so clipping never moves an estimate away from it: every estimate's
  error can only shrink. The price is bias where the truth is near an edge:
  a true count of 0 with noise σ is released, on average, as about 0.4σ
  (E[max(Z, 0)] = σ/√(2π)), and summing many clamped small counts adds that
  bias up. Release with ``clamp=False`` for unbiased estimates to combine
  later (docs/sensitivity.md, "Post-processing").
- **intervals**: ``<name>_ci95_low`` and ``<name>_ci95_high``, the 95%
  interval about the unclamped estimate, clipped to the possible range when
  clamping (the truth is in that range, so clipping never lowers coverage).
- **total**: one more row (when any group is released: a private key
  selection may keep none), with null group keys, whose outputs are estimated
  from the group measurements summed (each measurement is a sum over rows,
  so its groups add up to the total's, with noise σ·sqrt(groups)). No
  measurement is made for it, and counts and sums agree with their groups:
  unclamped they are the sum of the groups; clamped, the groups are the
  least-squares projection onto the clamped total
  (:func:`consistent_groups`), which, unlike clamping alone, can move a
  group away from its truth (noisy (5, −1, 2) with total 6 becomes
  (4.5, 0, 1.5), though the truth may be (5, 0, 2)). Means and variances are pooled from the
  same sums; distinct counts and quantiles do not add up and are null there.

Example:
    >>> import numpy as np
    >>> from privframe.plan.postprocess import consistent_groups
    >>> consistent_groups(np.array([5.0, -1.0, 2.0]), 6.0, 0.0)
    array([4.5, 0. , 1.5])
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from privframe.plan.aggregates.base import (
    CI95_SUFFIX,
    HIGH_SUFFIX,
    LOW_SUFFIX,
    Aggregate,
    Measured,
    RankMeasured,
)
from privframe.plan.measurements import Measurement
from privframe.plan.planner import ReleasePlan

__all__ = [
    "Pooled",
    "PostProcessing",
    "clamp_output",
    "consistent_groups",
    "estimate_outputs",
]


@dataclass(frozen=True)
class PostProcessing:
    """What a release does to its estimates after the noise; see the module docstring.

    Example:
        >>> from privframe.plan.postprocess import PostProcessing
        >>> PostProcessing()
        PostProcessing(clamp=True, intervals=False, total=False)
    """

    clamp: bool = True
    intervals: bool = False
    total: bool = False


def _clip(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """``values`` clipped to [low, high], keeping an integer array integer."""
    if np.issubdtype(values.dtype, np.integer):
        if low > -math.inf:
            values = np.maximum(values, math.ceil(low))
        if high < math.inf:
            values = np.minimum(values, math.floor(high))
        return values
    return np.clip(values, low, high)


def clamp_output(
    aggregate: Aggregate, columns: Mapping[str, np.ndarray], post: PostProcessing
) -> dict[str, np.ndarray]:
    """One output's columns after clamping and intervals (error columns kept as given).

    Example:
        >>> import numpy as np
        >>> import privframe as pf
        >>> from privframe.plan.postprocess import PostProcessing, clamp_output
        >>> clamp_output(pf.count(), {"count": np.array([-3, 5])}, PostProcessing())["count"]
        array([0, 5])
    """
    name = aggregate.output_name
    low, high = aggregate.possible_range()
    out = dict(columns)
    raw = columns[name]
    ci = columns.get(name + CI95_SUFFIX)
    if post.intervals and ci is not None:
        lower, upper = raw - ci, raw + ci
        if post.clamp:
            lower, upper = np.clip(lower, low, high), np.clip(upper, low, high)
        out[name + LOW_SUFFIX], out[name + HIGH_SUFFIX] = lower, upper
    if post.clamp:
        out[name] = _clip(raw, low, high)
    return out


def consistent_groups(values: np.ndarray, total: float, low: float) -> np.ndarray:
    """The closest groups (least squares) that are >= ``low`` and add up to ``total``.

    The projection onto {x : x >= low, Σx = total} is x = max(v − λ, low)
    with λ chosen so the sum is ``total`` (a monotone equation, solved by
    bisection); ``total`` must be at least ``low`` times the groups.

    Example:
        >>> import numpy as np
        >>> from privframe.plan.postprocess import consistent_groups
        >>> consistent_groups(np.array([7, -3, 2, 0]), 5, 0)
        array([5, 0, 0, 0])
    """
    v = values.astype(np.float64)
    if v.size == 0:
        return v

    def excess(lam: float) -> float:
        return float(np.maximum(v - lam, low).sum() - total)

    width = max(float(np.max(np.abs(v))), abs(total), abs(low), 1.0) * 4 * (v.size + 1)
    left, right = -width, width
    for _ in range(200):
        middle = (left + right) / 2
        left, right = (middle, right) if excess(middle) > 0 else (left, middle)
    result = np.maximum(v - (left + right) / 2, low)
    if np.issubdtype(values.dtype, np.integer):
        return _integer_sum(result, round(total), int(low))
    return result


def _integer_sum(x: np.ndarray, total: int, low: int) -> np.ndarray:
    """Integers >= ``low`` adding up to ``total``, each within 1 of ``x`` (largest remainders)."""
    floor = np.maximum(np.floor(x).astype(np.int64), low)
    short = total - int(floor.sum())
    order = np.argsort(-(x - floor), kind="stable")
    floor[order[: max(short, 0)]] += 1
    return floor


@dataclass(frozen=True)
class Pooled:
    """The release's measurements summed over ``groups`` groups: the total row's σ·sqrt(groups).

    Example:
        >>> import privframe as pf
        >>> from privframe.plan.ir import Plan
        >>> from privframe.plan.planner import plan_release
        >>> from privframe.plan.postprocess import Pooled
        >>> release = plan_release(Plan(aggregates=(pf.count(),)), False, 1.0)
        >>> Pooled(release, 4).measurement("count").sigma / release.measurement("count").sigma
        2.0
    """

    measured: Measured
    groups: int

    def measurement(self, key: str) -> Measurement:
        """The measurement with its noise scaled to a sum of ``groups`` independent draws."""
        m = self.measured.measurement(key)
        return dataclasses.replace(
            m, sigma_units=m.sigma_units * math.sqrt(self.groups), pooled=m.pooled * self.groups
        )

    def quantile(self, key: str) -> RankMeasured:
        """Quantiles are not pooled: the total row has none."""
        raise KeyError(key)


Columns = dict[str, np.ndarray]


def estimate_outputs(
    release: ReleasePlan, noisy: Mapping[str, np.ndarray], with_error: bool, post: PostProcessing
) -> tuple[Columns, Columns | None]:
    """Every output's columns per group, and the total row's (None unless ``post.total``).

    Each aggregate estimates from the noisy measurements; then clamping,
    intervals and, for the total, the pooled estimate and the groups'
    consistency with it. Error columns are dropped unless ``with_error``.

    Example:
        >>> import numpy as np
        >>> import privframe as pf
        >>> from privframe.plan.ir import Plan
        >>> from privframe.plan.planner import plan_release
        >>> from privframe.plan.postprocess import PostProcessing, estimate_outputs
        >>> release = plan_release(Plan(aggregates=(pf.count(),)), False, 1.0)
        >>> estimate_outputs(release, {"count": np.array([-2, 7])}, False, PostProcessing())
        ({'count': array([0, 7])}, None)
    """
    errors = with_error or post.intervals
    groups = next(iter(noisy.values())).size if noisy else 0
    totals: Columns | None = None
    if post.total and groups:
        pooled_noisy = {m.key: _pooled(noisy[m.key]) for m in release.measurements}
        totals = {}
    columns: Columns = {}
    for out in release.outputs:
        agg = out.aggregate
        raw = agg.estimate(release, noisy, errors)
        clamped = clamp_output(agg, raw, post)
        if totals is not None:
            total = _total_columns(agg, release, pooled_noisy, groups, errors, post)
            if post.clamp and agg.linear:
                clamped[agg.output_name] = _agreeing(agg, raw[agg.output_name], total)
            totals.update(total)
        columns.update(clamped)
    if not with_error:
        dropped = {name for out in release.outputs for name in out.aggregate.error_columns()}
        columns = {k: v for k, v in columns.items() if k not in dropped}
        if totals is not None:
            totals = {k: v for k, v in totals.items() if k not in dropped}
    return columns, totals


def _pooled(values: np.ndarray) -> np.ndarray:
    """The sum of a noisy integer vector, exact: int64 if it fits, else the nearest float."""
    total = sum(int(v) for v in values)
    return np.array([total], dtype=np.int64 if -(2**63) <= total < 2**63 else np.float64)


def _total_columns(
    agg: Aggregate,
    release: ReleasePlan,
    pooled_noisy: Mapping[str, np.ndarray],
    groups: int,
    errors: bool,
    post: PostProcessing,
) -> Columns:
    """The total row's columns of one output: pooled if it adds up, else missing (NaN)."""
    if agg.additive:
        raw = agg.estimate(Pooled(release, groups), pooled_noisy, errors)
        return clamp_output(agg, raw, post)
    names = [agg.output_name]
    if errors:
        names += [*agg.error_columns(), *(agg.interval_columns() if post.intervals else ())]
    return {name: np.array([math.nan]) for name in names}


def _agreeing(agg: Aggregate, values: np.ndarray, total: Columns) -> np.ndarray:
    """The clamped groups of a linear output, projected to add up to its clamped total."""
    low, high = agg.possible_range()
    target = total[agg.output_name][0]
    if low > -math.inf:
        return consistent_groups(values, target, low)
    if high < math.inf:
        return -consistent_groups(-values, -target, -high)
    return values
