"""Counts of rows per group, and the count measurement means and variances share.

Sensitivity: a privacy unit adds ``w_g <= m`` rows to each of at most ``k``
groups (and at most ``M`` rows overall), so ``sum_g w_g² <= S``
(:mod:`privframe.plan.limits`) and the grouped count vector has L2
sensitivity ``sqrt(S)``; ``sqrt(k)·m`` without ``M``.

Example:
    >>> import privframe as pf
    >>> pf.count().output_name
    'count'
    >>> [need.key for need in pf.count().needs()]
    ['count']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import overload

import numpy as np

from privframe._arguments import hinted
from privframe.engines.spec import COUNT, ValueSpec
from privframe.plan.aggregates.base import (
    CI95_SUFFIX,
    STD_SUFFIX,
    Aggregate,
    Bounds,
    Measured,
    Summary,
    Summed,
    Width,
)
from privframe.plan.aggregates.per_unit import PerUnitBounded, per_unit_aggregate
from privframe.plan.limits import Limits
from privframe.plan.measurements import (
    Z95,
    GaussianNeed,
    Measurement,
    Need,
    Share,
    integer_measurement,
)

__all__ = [
    "Count",
    "CountNeed",
    "ValuesNeed",
    "count",
    "count_need",
    "gaussian_columns",
    "spread_columns",
]


def _rows_bound(limits: Limits) -> tuple[int, str, int, str]:
    """A row count's bounds: sum_g w_g² <= S and sum_g w_g <= W."""
    return limits.squares, "S", limits.rows, "W"


class CountNeed(GaussianNeed):
    """The noisy row count per group; every count, mean and variance shares it."""

    @property
    def key(self) -> str:
        """Always ``count``: one count per release."""
        return "count"

    def measure(self, limits: Limits, share: Share) -> Measurement:
        """Rows per group: a unit's weights w_g have sum_g w_g² <= S and sum_g w_g <= W.

        So Δ₂ = sqrt(S) and Δ₁ = W.
        """
        return integer_measurement("count", "count", _rows_bound(limits), share, self)

    def error_coefficient(self, limits: Limits) -> float:
        """Squared 95% error (1.96σ)² = 1.96²·S/(2ρ)."""
        return Z95 * Z95 * (limits.squares / 2.0)

    def value_spec(self, measurement: Measurement, name: str) -> None:
        """None: the engine counts bounded rows."""
        return None

    def exact_column(self, name: str) -> str:
        """The engine's row count."""
        return COUNT


class ValuesNeed(GaussianNeed):
    """The noisy count of one column's values (rows where it is neither null nor NaN), per group.

    What sums, means and variances with ``missing="drop"`` divide by or
    scale the midpoint by, in place of the row count.
    """

    def __init__(self, column: str) -> None:
        self.column = column

    @property
    def key(self) -> str:
        """``count(<column>)``: shared by the column's aggregates that drop missing values."""
        return f"count({self.column})"

    def measure(self, limits: Limits, share: Share) -> Measurement:
        """Values per group: a row adds 1 (0 if its value is missing), so Δ₂ = sqrt(S), Δ₁ = W.

        A unit adds at most its bounded weight w_g to each group, as to the
        row count: sum_g w_g² <= S and sum_g w_g <= W.
        """
        return integer_measurement(self.key, "values", _rows_bound(limits), share, self)

    def error_coefficient(self, limits: Limits) -> float:
        """Squared 95% error (1.96σ)² = 1.96²·S/(2ρ), as the row count's."""
        return Z95 * Z95 * (limits.squares / 2.0)

    def value_spec(self, measurement: Measurement, name: str) -> ValueSpec:
        """1 per row whose value is there, bounded like a row's weight."""
        return ValueSpec(name, self.column, 0.0, 1.0, 0, 0, 1, 0, fill=None, present=True)

    def exact_column(self, name: str) -> str:
        """The column the engine sums the ones into."""
        return name


def count_need(agg: Summed) -> GaussianNeed:
    """The count a summed aggregate reads: of the column's values with ``drop``, else of rows.

    Example:
        >>> import privframe as pf
        >>> from privframe.plan.aggregates.count import count_need
        >>> count_need(pf.mean("x", (0, 1), missing="drop")).key
        'count(x)'
    """
    return ValuesNeed(agg.column) if agg.missing == "drop" else CountNeed()


def gaussian_columns(
    name: str, values: np.ndarray, m: Measurement, with_error: bool
) -> dict[str, np.ndarray]:
    """An output read straight from one measurement, with its exact error columns."""
    columns = {name: values}
    if with_error:
        columns[name + STD_SUFFIX] = np.full(values.shape, m.sigma)
        columns[name + CI95_SUFFIX] = np.full(values.shape, m.ci95)
    return columns


def spread_columns(
    name: str, values: np.ndarray, std: np.ndarray, with_error: bool
) -> dict[str, np.ndarray]:
    """An output derived from several measurements, with its std and a normal 95% half-width.

    The noise is a sum of independent discrete Gaussians (or, for ratios, is
    approximated by one to first order), so the half-width is 1.96·std, not
    an exact quantile. Under Laplace noise (pure-DP and some (ε, δ) releases)
    it is the normal approximation of a sum of Laplaces, which covers a little
    less than 95% when few measurements dominate (docs/privacy.md §3a).
    """
    columns = {name: values}
    if with_error:
        columns[name + STD_SUFFIX] = std
        columns[name + CI95_SUFFIX] = Z95 * std
    return columns


@dataclass(frozen=True)
class Count(Aggregate):
    """The number of rows per group (after filtering and contribution bounding)."""

    spec_name = "count"
    needs_expected = False
    integer_output = True
    additive = True
    linear = True

    def _default_name(self) -> str:
        return "count"

    def needs(self) -> tuple[Need, ...]:
        """The row count."""
        return (CountNeed(),)

    def estimate(
        self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
    ) -> dict[str, np.ndarray]:
        """The noisy count itself."""
        m = measured.measurement("count")
        return gaussian_columns(self.output_name, noisy["count"], m, with_error)

    def typical_value(self, summary: Summary) -> tuple[float, float]:
        """The rows per group."""
        return summary.rows, summary.rows

    def possible_range(self) -> tuple[float, float]:
        """A count is never negative."""
        return (0.0, math.inf)

    def formula(self, measured: Measured) -> str:
        """The count measurement itself."""
        return "count"

    def width(self, measured: Measured) -> Width:
        """σ and the exact 95% half-width of the count's noise."""
        m = measured.measurement("count")
        return Width(m.ci95, m.sigma)

    def balance_terms(
        self, coefficients: Mapping[str, float], rows: float, expected: float | None
    ) -> dict[str, float]:
        """Relative error σ_N/rows."""
        return {"count": coefficients["count"] / rows**2}


@overload
def count() -> Count: ...


@overload
def count(*, per_unit_bounds: Bounds) -> PerUnitBounded: ...


@hinted(
    "count() counts the rows of each group and takes no column; filter rows first, and name "
    "the output with .alias(...)"
)
def count(*, per_unit_bounds: Bounds | None = None) -> Count | PerUnitBounded:
    """Count rows per group; the output column is ``count``.

    Args:
        per_unit_bounds: BigQuery's ``COUNT(*, contribution_bounds_per_group
            => (L, U))``: each privacy unit's row count in a group is clamped
            to (L, U), then summed over units; no rows-per-group limit is
            needed (:mod:`privframe.plan.aggregates.per_unit`).

    Example:
        >>> import privframe as pf
        >>> pf.count()
        Count(name=None)
        >>> pf.count(per_unit_bounds=(0, 5)).upper
        5.0
    """
    if per_unit_bounds is not None:
        return per_unit_aggregate("count", None, None, "midpoint", per_unit_bounds)
    return Count()
