"""Distinct privacy units per group, and the counts that choose groups privately.

Sensitivity: a unit adds 1 to the distinct count of at most ``k`` groups,
whatever ``max_rows_per_group`` is, so the grouped vector has L2 sensitivity
``sqrt(k)``. Private key selection (:mod:`privframe.mechanisms.selection`)
thresholds the same kind of count.

Example:
    >>> import privframe as pf
    >>> [need.key for need in pf.count_distinct().needs()]
    ['distinct units']
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from privframe._arguments import hinted
from privframe.engines.spec import DISTINCT
from privframe.plan.aggregates.base import Aggregate, Measured, Summary, Width
from privframe.plan.aggregates.count import gaussian_columns
from privframe.plan.limits import Limits
from privframe.plan.measurements import (
    Z95,
    GaussianNeed,
    Measurement,
    Need,
    Share,
    integer_measurement,
)

__all__ = ["DISTINCT_KEY", "SELECTION_KEY", "CountDistinct", "DistinctNeed", "count_distinct"]

DISTINCT_KEY = "distinct units"
SELECTION_KEY = "distinct units (selection)"


@dataclass(frozen=True)
class DistinctNeed(GaussianNeed):
    """Noisy distinct-unit counts per group (released, or thresholded to choose groups)."""

    name: str = DISTINCT_KEY

    @property
    def key(self) -> str:
        """``distinct units``, or ``distinct units (selection)`` for key selection."""
        return self.name

    def measure(self, limits: Limits, share: Share) -> Measurement:
        """Each unit adds 1 to at most k groups: Δ₂ = sqrt(k), Δ₁ = k."""
        k = limits.max_groups
        return integer_measurement(self.name, "distinct", (k, "k", k, "k"), share, self)

    def error_coefficient(self, limits: Limits) -> float:
        """Squared 95% error 1.96²·k/(2ρ)."""
        return Z95 * Z95 * (limits.max_groups / 2)

    def value_spec(self, measurement: Measurement, name: str) -> None:
        """None: the engine counts distinct units."""
        return None

    def exact_column(self, name: str) -> str:
        """The engine's distinct-unit count."""
        return DISTINCT


@dataclass(frozen=True)
class CountDistinct(Aggregate):
    """The number of distinct privacy units per group (after contribution bounding).

    Each unit adds 1 to at most ``max_groups`` groups, so the grouped vector
    has L2 sensitivity sqrt(k), whatever ``max_rows_per_group`` is. Without a
    privacy unit every row is a unit, and this equals :func:`count`.
    """

    spec_name = "count_distinct"
    integer_output = True

    def _default_name(self) -> str:
        return "count_distinct"

    def needs(self) -> tuple[Need, ...]:
        """The distinct-unit counts."""
        return (DistinctNeed(),)

    def estimate(
        self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
    ) -> dict[str, np.ndarray]:
        """The noisy distinct count itself."""
        m = measured.measurement(DISTINCT_KEY)
        return gaussian_columns(self.output_name, noisy[DISTINCT_KEY], m, with_error)

    def typical_value(self, summary: Summary) -> tuple[float, float]:
        """The distinct units per group."""
        return summary.distinct, summary.distinct

    def possible_range(self) -> tuple[float, float]:
        """A distinct count is never negative."""
        return (0.0, math.inf)

    def formula(self, measured: Measured) -> str:
        """The distinct count measurement itself."""
        return DISTINCT_KEY

    def width(self, measured: Measured) -> Width:
        """σ and the exact 95% half-width of its noise."""
        m = measured.measurement(DISTINCT_KEY)
        return Width(m.ci95, m.sigma)

    def balance_terms(
        self, coefficients: Mapping[str, float], rows: float, expected: float | None
    ) -> dict[str, float]:
        """Relative error σ/expected."""
        assert expected is not None
        return {DISTINCT_KEY: coefficients[DISTINCT_KEY] / expected**2}


@hinted(
    "count_distinct() counts the distinct privacy units of each group and takes no column; "
    "name the output with .alias(...)"
)
def count_distinct() -> CountDistinct:
    """Count distinct privacy units per group; the output column is ``count_distinct``.

    Example:
        >>> import privframe as pf
        >>> pf.count_distinct().output_name
        'count_distinct'
    """
    return CountDistinct()
