"""Sums of a column clipped to public bounds, per group.

Sensitivity: each row's value is clipped to ``[L, U]`` and a unit weighs
``w_g <= m`` rows in each group, with ``sum_g w_g² <= S``; so the grouped sum
has L2 sensitivity ``sqrt(S)·max(|L|, |U|)``. Values are snapped to a public
grid first (:func:`privframe.plan.measurements.grid_measurement`) so the exact
discrete Gaussian can be added. A null or NaN value counts as 0 (SQL's SUM
skips it), clipped to the bounds like any value.

Example:
    >>> import privframe as pf
    >>> pf.sum("amount", bounds=(0, 1000)).output_name
    'amount_sum'
"""

from __future__ import annotations

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
from privframe.plan.aggregates.count import gaussian_columns
from privframe.plan.limits import Limits
from privframe.plan.measurements import (
    GridRange,
    Need,
)

__all__ = ["Sum", "SumNeed", "sum"]


@dataclass(frozen=True)
class SumNeed(GridNeed):
    """The noisy sum of clipped values per group; a missing value counts as 0."""

    kind = "sum"
    fill_zero = True

    def values(self, limits: Limits) -> GridRange:
        """Each row adds its value in [L, U]: Δ = sqrt(S)·max(|L|, |U|)."""
        a = self.aggregate
        formula = f"sqrt(S)·max(|L|,|U|) = sqrt({limits.squares})·{a.magnitude:g}"
        return GridRange(a.lower, a.upper, a.magnitude, centred=False, formula=formula)


@dataclass(frozen=True, kw_only=True)
class Sum(Bounded):
    """The sum of a column's values, each clipped to [lower, upper], per group."""

    spec_name = "sum"
    sql_functions = ("SUM",)

    def _default_name(self) -> str:
        return f"{self.column}_sum"

    def needs(self) -> tuple[Need, ...]:
        """The sum."""
        return (SumNeed(self),)

    def estimate(
        self, measured: Measured, noisy: Mapping[str, np.ndarray], with_error: bool
    ) -> dict[str, np.ndarray]:
        """The noisy sum, back from grid units to value units."""
        m = measured.measurement(self.keys()[0])
        values = np.ldexp(noisy[m.key].astype(np.float64), -m.grid_exponent)
        return gaussian_columns(self.output_name, values, m, with_error)

    def explain_row(self, measured: Measured) -> tuple[str, str]:
        """σ and the exact 95% half-width of its noise."""
        m = measured.measurement(self.keys()[0])
        return f"{m.sigma:.6g}", f"{m.ci95:.6g}"

    def balance_terms(
        self, coefficients: Mapping[str, float], rows: float, expected: float | None
    ) -> dict[str, float]:
        """Relative error σ/expected."""
        assert expected is not None
        (key,) = self.keys()
        return {key: coefficients[key] / expected**2}


@hinted(bounds=BOUNDS_HINT)
def sum(column: str, bounds: tuple[float, float]) -> Sum:
    """Sum ``column`` per group, each value clipped to ``bounds`` first.

    Args:
        column: a numeric column.
        bounds: public (lower, upper) clipping bounds, lower < upper. They must
            come from knowledge of the domain, never from the private data.

    Example:
        >>> import privframe as pf
        >>> pf.sum("amount", bounds=(0, 1000)).magnitude
        1000.0
    """
    return bounded(Sum, column, bounds)
