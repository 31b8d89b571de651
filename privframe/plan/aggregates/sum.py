"""Sums of a column clipped to public bounds, per group, and the centred sum they share.

A sum is post-processing of two measurements: the centred sum
``C = Σ(clip(x) − c)`` with ``c`` the bounds' midpoint, whose L2 sensitivity
is ``sqrt(S)·(U − L)/2`` (each row moves it by at most half the range), and
the shared row count ``N`` (:mod:`privframe.plan.aggregates.count`), with
sensitivity ``sqrt(S)``. The estimate is ``C + c·N``, with variance
``σ_C² + c²·σ_N²``. At the best split of ρ between the two that is
``S·((U − L)/2 + |c|)²/(2ρ) = S·max(|L|, |U|)²/(2ρ)``, the variance of a
plain sum of clipped values; and a mean and a count of the same query read
the same two measurements, so nothing is measured twice
(docs/sensitivity.md). With ``c = 0`` (bounds ``(-B, B)``) the centred sum
is the sum and the count is not needed.

Values are snapped to a public grid first
(:func:`privframe.plan.measurements.grid_measurement`) so the exact discrete
Gaussian can be added. A null or NaN value counts as the bounds' midpoint
by default, in sums and means alike (it adds nothing to the centred sum, and
its row is counted); with ``missing="drop"`` its row adds nothing and the
count is of the column's values instead (:class:`~.count.ValuesNeed`), as
SQL's ``SUM`` skips nulls (:class:`~privframe.plan.aggregates.base.Summed`).

Example:
    >>> import privframe as pf
    >>> pf.sum("amount", bounds=(0, 1000)).output_name
    'amount_sum'
    >>> pf.sum("amount", bounds=(0, 1000)).keys()
    ('centred_sum(amount, [0, 1000])', 'count')
    >>> pf.sum("change", bounds=(-5, 5)).keys()
    ('centred_sum(change, [-5, 5])',)
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
    GridNeed,
    Measured,
    Missing,
    Summary,
    Summed,
    Width,
    summed,
)
from privframe.plan.aggregates.count import count_need, gaussian_columns, spread_columns
from privframe.plan.aggregates.per_unit import PerUnitBounded, per_unit_aggregate
from privframe.plan.limits import Limits
from privframe.plan.measurements import Z95, GridRange, Measurement, Need

__all__ = ["CentredSumNeed", "Sum", "centre_of", "sum"]


@dataclass(frozen=True)
class CentredSumNeed(GridNeed):
    """The noisy sum of clipped values about their grid centre, per group.

    Shared by sums, means and variances of one column, bounds and missing
    rule; a missing value adds 0 (as the midpoint, or dropped) or its
    replacement's distance from the centre.
    """

    kind = "centred_sum"

    def values(self, limits: Limits) -> GridRange:
        """Each row adds its value about the centre: Δ₂ = sqrt(S)·(U − L)/2, Δ₁ = W·(U − L)/2."""
        a = self.aggregate
        return GridRange(a.lower, a.upper, a.half_width, formula="(U−L)/2")


def centre_of(m: Measurement) -> float:
    """The grid centre c of a centred sum, in value units (the bounds' midpoint, on the grid)."""
    return math.ldexp(m.centre_units, -m.grid_exponent)


@dataclass(frozen=True, kw_only=True)
class Sum(Summed):
    """The sum of a column's values, each clipped to [lower, upper], per group.

    Released as the noisy centred sum plus the midpoint times the noisy
    count, both shared with a mean or count of the same query.
    """

    spec_name = "sum"
    sql_functions = ("SUM",)
    additive = True
    linear = True

    def _default_name(self) -> str:
        return f"{self.column}_sum"

    def needs(self) -> tuple[Need, ...]:
        """The centred sum, and the count unless the bounds are centred on zero."""
        centred = CentredSumNeed(self)
        return (centred,) if self.lower == -self.upper else (centred, count_need(self))

    def estimate(
        self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
    ) -> dict[str, np.ndarray]:
        """C + c·N, back from grid units to value units."""
        centred = measured.measurement(self.keys()[0])
        units = noisy[centred.key].astype(np.float64)
        if len(self.keys()) == 1:
            values = np.ldexp(units, -centred.grid_exponent)
            return gaussian_columns(self.output_name, values, centred, with_error)
        units = units + float(centred.centre_units) * noisy[self.keys()[1]].astype(np.float64)
        values = np.ldexp(units, -centred.grid_exponent)
        std = self._std(measured)
        return spread_columns(self.output_name, values, np.full(values.shape, std), with_error)

    def _std(self, measured: Measured) -> float:
        centred = measured.measurement(self.keys()[0])
        if len(self.keys()) == 1:
            return centred.sigma
        count = measured.measurement(self.keys()[1])
        return math.hypot(centred.sigma, centre_of(centred) * count.sigma)

    def typical_value(self, summary: Summary) -> tuple[float, float]:
        """Rows times the values' mean, at the scale of rows times their mean |x|."""
        if summary.mean is None or summary.spread is None:
            return 0.0, 0.0
        return summary.rows * summary.mean, summary.rows * summary.spread

    def possible_range(self) -> tuple[float, float]:
        """Non-negative with L >= 0, non-positive with U <= 0, else anything."""
        return (
            0.0 if self.lower >= 0 else -math.inf,
            0.0 if self.upper <= 0 else math.inf,
        )

    def formula(self, measured: Measured) -> str:
        """The centred sum plus the midpoint times the count."""
        centred = measured.measurement(self.keys()[0])
        if len(self.keys()) == 1:
            return centred.key
        return f"{centred.key} + {centre_of(centred):g}·{self.keys()[1]}"

    def width(self, measured: Measured) -> Width:
        """σ and the 95% half-width of its noise (exact for one measurement)."""
        if len(self.keys()) == 1:
            m = measured.measurement(self.keys()[0])
            return Width(m.ci95, m.sigma)
        std = self._std(measured)
        return Width(Z95 * std, std, approx=True)

    def balance_terms(
        self, coefficients: Mapping[str, float], rows: float, expected: float | None
    ) -> dict[str, float]:
        """Relative error sqrt(σ_C² + c²σ_N²)/expected."""
        assert expected is not None
        keys = self.keys()
        terms = {keys[0]: coefficients[keys[0]] / expected**2}
        if len(keys) == 2:
            mid = float(self.midpoint)
            terms[keys[1]] = mid * mid * coefficients[keys[1]] / expected**2
        return terms


@overload
def sum(column: str, bounds: Bounds, *, missing: Missing = "midpoint") -> Sum: ...


@overload
def sum(column: str, bounds: None = None, *, per_unit_bounds: Bounds) -> PerUnitBounded: ...


@hinted(bounds=BOUNDS_HINT, missing=MISSING_HINT)
def sum(
    column: str,
    bounds: Bounds | None = None,
    *,
    missing: Missing = "midpoint",
    per_unit_bounds: Bounds | None = None,
) -> Sum | PerUnitBounded:
    """Sum ``column`` per group, each value clipped to ``bounds`` first.

    Args:
        column: a numeric column.
        bounds: public (lower, upper) clipping bounds, lower < upper. They must
            come from knowledge of the domain, never from the private data.
        missing: what a null or NaN value does: ``"midpoint"`` (the default)
            adds the bounds' midpoint for it, ``"drop"`` adds nothing for its
            row, a number adds that value (clipped to the bounds).
        per_unit_bounds: instead of ``bounds``, BigQuery's clamping
            (``SUM(x, contribution_bounds_per_group => (L, U))``): each
            privacy unit's sum of its rows in a group is clamped to (L, U),
            then summed over units; no rows-per-group limit is needed
            (:mod:`privframe.plan.aggregates.per_unit`).

    Example:
        >>> import privframe as pf
        >>> pf.sum("amount", bounds=(0, 1000)).magnitude
        1000.0
        >>> pf.sum("amount", bounds=(0, 1000), missing="drop").keys()
        ('centred_sum(amount, [0, 1000], missing drop)', 'count(amount)')
    """
    if per_unit_bounds is not None or bounds is None:
        return per_unit_aggregate("sum", column, bounds, missing, per_unit_bounds)
    return summed(Sum, column, bounds, missing)
