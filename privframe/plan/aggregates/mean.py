"""Means of a column clipped to public bounds, per group.

A mean is post-processing of the two measurements a sum of the same column
and bounds reads (:mod:`privframe.plan.aggregates.sum`): the centred sum
``Σ(clip(x) − c)`` with ``c`` the bounds' midpoint, whose L2 sensitivity is
``sqrt(S)·(U − L)/2``, and the shared row count. The estimate is
``c + centred/count`` (clamped into the bounds by default:
:mod:`privframe.plan.postprocess`). A null or NaN value counts as
the midpoint by default, as in a sum: it adds nothing to the centred sum and
its row counts in the denominator; with ``missing="drop"`` the denominator is
the count of the column's values instead, so its row is left out entirely.

Example:
    >>> import privframe as pf
    >>> [need.key for need in pf.mean("x", bounds=(0, 10)).needs()]
    ['centred_sum(x, [0, 10])', 'count']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import overload

import numpy as np

from privframe._arguments import hinted
from privframe.plan.aggregates.base import (
    BOUNDS_HINT,
    MISSING_HINT,
    Bounds,
    Measured,
    Missing,
    Summary,
    Summed,
    Width,
    summed,
)
from privframe.plan.aggregates.count import count_need, spread_columns
from privframe.plan.aggregates.per_unit import PerUnitBounded, per_unit_aggregate
from privframe.plan.aggregates.sum import CentredSumNeed, centre_of
from privframe.plan.measurements import Z95, Need

__all__ = ["Mean", "mean"]


@dataclass(frozen=True, kw_only=True)
class Mean(Summed):
    """The mean of a column's values, each clipped to [lower, upper], per group.

    Released as a noisy centred sum over a noisy count, shared with a
    ``count()`` in the same query.
    """

    spec_name = "mean"
    sql_functions = ("AVG",)
    additive = True

    def _default_name(self) -> str:
        return f"{self.column}_mean"

    def needs(self) -> tuple[Need, ...]:
        """The centred sum and the count (of the column's values with ``missing="drop"``)."""
        return (CentredSumNeed(self), count_need(self))

    def estimate(
        self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
    ) -> dict[str, np.ndarray]:
        """Midpoint + centred/count; std by the delta method."""
        m, count = (measured.measurement(key) for key in self.keys())
        denominator = np.maximum(noisy[count.key], 1).astype(np.float64)
        centred = np.ldexp(noisy[m.key].astype(np.float64), -m.grid_exponent)
        midpoint = centre_of(m)
        values = midpoint + centred / denominator
        # Delta method for a ratio of independent noisy terms, a documented approximation,
        # at the estimate moved into the bounds (where the true mean is).
        offset = np.clip(values, self.lower, self.upper) - midpoint
        std = np.sqrt(m.sigma**2 + (offset * count.sigma) ** 2) / denominator
        return spread_columns(self.output_name, values, std, with_error)

    def typical_value(self, summary: Summary) -> tuple[float, float]:
        """The values' mean, at the scale of their mean |x|."""
        if summary.mean is None or summary.spread is None:
            return 0.0, 0.0
        return summary.mean, summary.spread

    def possible_range(self) -> tuple[float, float]:
        """Within the bounds."""
        return (self.lower, self.upper)

    def formula(self, measured: Measured) -> str:
        """The midpoint plus the centred sum over the count."""
        m = measured.measurement(self.keys()[0])
        return f"{centre_of(m):g} + {m.key} / {self.keys()[1]}"

    def width(self, measured: Measured) -> Width:
        """The delta method at the largest |mean − midpoint|, (U − L)/2, over the count."""
        m, count = (measured.measurement(key) for key in self.keys())
        bound = math.hypot(m.sigma, (self.upper - self.lower) / 2 * count.sigma)
        return Width(Z95 * bound, bound, approx=True, per=self.keys()[1])

    def balance_terms(
        self, coefficients: Mapping[str, float], rows: float, expected: float | None
    ) -> dict[str, float]:
        """(σ_C² + (μ − mid)²σ_N²)/(rows·μ)²."""
        assert expected is not None
        centred, count = self.keys()
        mid = float(self.midpoint)
        return {
            centred: coefficients[centred] / (rows * expected) ** 2,
            count: (expected - mid) ** 2 * coefficients[count] / (rows * expected) ** 2,
        }

    def split_terms(self, coefficients: Mapping[str, float]) -> dict[str, float]:
        """At the worst case: a mean at a bound is as far from the midpoint as it gets."""
        worst = self.lower if abs(self.lower) > abs(self.upper) else self.upper
        return self.balance_terms(coefficients, 1.0, worst)


@overload
def mean(column: str, bounds: Bounds, *, missing: Missing = "midpoint") -> Mean: ...


@overload
def mean(column: str, bounds: None = None, *, per_unit_bounds: Bounds) -> PerUnitBounded: ...


@hinted(bounds=BOUNDS_HINT, missing=MISSING_HINT)
def mean(
    column: str,
    bounds: Bounds | None = None,
    *,
    missing: Missing = "midpoint",
    per_unit_bounds: Bounds | None = None,
) -> Mean | PerUnitBounded:
    """Average ``column`` per group, each value clipped to ``bounds`` first.

    Args:
        column: a numeric column.
        bounds: public (lower, upper) clipping bounds, lower < upper.
        missing: what a null or NaN value does: ``"midpoint"`` (the default)
            counts it as the bounds' midpoint, ``"drop"`` averages the values
            there are (as SQL's ``AVG``), a number counts it as that value
            (clipped to the bounds).
        per_unit_bounds: instead of ``bounds``, BigQuery's ``AVG(x,
            contribution_bounds_per_group => (L, U))``: each privacy unit's
            average in a group is clamped to (L, U), and the result is the
            average of these averages
            (:mod:`privframe.plan.aggregates.per_unit`).

    Example:
        >>> import privframe as pf
        >>> float(pf.mean("age", bounds=(18, 90)).midpoint)
        54.0
        >>> pf.mean("age", bounds=(18, 90), missing="drop").keys()[1]
        'count(age)'
    """
    if per_unit_bounds is not None or bounds is None:
        return per_unit_aggregate("mean", column, bounds, missing, per_unit_bounds)
    return summed(Mean, column, bounds, missing)
