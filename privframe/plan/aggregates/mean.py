"""Means of a column clipped to public bounds, and the centred sum they share with variances.

A mean is post-processing of two measurements: the centred sum
``Σ(clip(x) − c)`` with ``c`` the bounds' midpoint, whose L2 sensitivity is
``sqrt(S)·(U − L)/2`` (each row moves it by at most half the range), and the
shared row count (:mod:`privframe.plan.aggregates.count`). The estimate is
``c + centred/count``, clipped to the bounds. A null or NaN value counts as
the midpoint: it adds nothing to the centred sum and its row counts in the
denominator.

Example:
    >>> import privframe as pf
    >>> [need.key for need in pf.mean("x", bounds=(0, 10)).needs()]
    ['centred_sum(x, [0, 10])', 'count']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from privframe._arguments import hinted
from privframe.plan.aggregates.base import (
    BOUNDS_HINT,
    Bounded,
    GridNeed,
    Measured,
    bounded,
)
from privframe.plan.aggregates.count import CountNeed
from privframe.plan.limits import Limits
from privframe.plan.measurements import (
    Z95,
    GridRange,
    Need,
)

__all__ = ["CentredSumNeed", "Mean", "mean"]


@dataclass(frozen=True)
class CentredSumNeed(GridNeed):
    """The noisy sum of clipped values about their grid centre, per group.

    Shared by means and variances alike; a missing value counts as the midpoint.
    """

    kind = "centred_sum"

    def values(self, limits: Limits) -> GridRange:
        """Each row adds its value about the centre: Δ = sqrt(S)·(U − L)/2."""
        a = self.aggregate
        half = a.half_width
        formula = f"sqrt(S)·(U−L)/2 = sqrt({limits.squares})·{half:g}"
        return GridRange(a.lower, a.upper, half, centred=True, formula=formula)


@dataclass(frozen=True, kw_only=True)
class Mean(Bounded):
    """The mean of a column's values, each clipped to [lower, upper], per group.

    Released as a noisy centred sum over a noisy count, shared with a
    ``count()`` in the same query.
    """

    spec_name = "mean"
    sql_functions = ("AVG",)

    def _default_name(self) -> str:
        return f"{self.column}_mean"

    def needs(self) -> tuple[Need, ...]:
        """The centred sum and the count."""
        return (CentredSumNeed(self), CountNeed())

    def estimate(
        self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
    ) -> dict[str, np.ndarray]:
        """Midpoint + centred/count, clipped to the bounds; std by the delta method."""
        m, count = (measured.measurement(key) for key in self.keys())
        denominator = np.maximum(noisy[count.key], 1).astype(np.float64)
        centred = np.ldexp(noisy[m.key].astype(np.float64), -m.grid_exponent)
        midpoint = math.ldexp(m.centre_units, -m.grid_exponent)
        values = np.clip(midpoint + centred / denominator, self.lower, self.upper)
        columns = {self.output_name: values}
        if with_error:
            # Delta method for a ratio of independent noisy terms: a documented approximation.
            std = np.sqrt(m.sigma**2 + ((values - midpoint) * count.sigma) ** 2) / denominator
            std_name, ci_name = self.error_columns()
            columns[std_name] = std
            columns[ci_name] = Z95 * std
        return columns

    def explain_row(self, measured: Measured) -> tuple[str, str]:
        """The delta method at the largest |mean − midpoint|, (U − L)/2, over the count."""
        m, count = (measured.measurement(key) for key in self.keys())
        bound = math.hypot(m.sigma, (self.upper - self.lower) / 2 * count.sigma)
        return f"≈ {bound:.6g} / count", f"≈ {Z95 * bound:.6g} / count"

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


@hinted(bounds=BOUNDS_HINT)
def mean(column: str, bounds: tuple[float, float]) -> Mean:
    """Average ``column`` per group, each value clipped to ``bounds`` first.

    Args:
        column: a numeric column.
        bounds: public (lower, upper) clipping bounds, lower < upper.

    Example:
        >>> import privframe as pf
        >>> float(pf.mean("age", bounds=(18, 90)).midpoint)
        54.0
    """
    return bounded(Mean, column, bounds)
