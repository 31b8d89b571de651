"""Contribution limits: how much one privacy unit can add, and the bound S it implies.

Sensitivity (``docs/sensitivity.md``; DP primer section 2): a privacy unit
contributes at most ``w_g <= m`` rows to each of at most ``k`` groups, and at
most ``M`` rows overall. Over all groups, ``sum_g w_g² <= S`` with
``S = q·m² + r²``, ``q = min(k, floor(M/m))`` full groups and ``r = M − q·m``
rows left (``r = 0`` when ``q = k``), or ``S = k·m²`` without ``M``. So the
L2 sensitivity of a grouped count vector is ``sqrt(S)``, and of a grouped sum
of values clipped to ``[L, U]`` it is ``sqrt(S)·max(|L|, |U|)``, or
``sqrt(S)·(U − L)/2`` for values centred on the midpoint.

The planner resolves a plan's limits (:func:`privframe.plan.planner.resolve_limits`).

Example:
    >>> from privframe.plan.limits import Limits
    >>> Limits(max_groups=3, max_rows_per_group=5, max_rows=12, squares=2 * 25 + 4).describe()
    'k=3, m=5, M=12: q=2 full groups + r=2 rows: S = q·m² + r² = 54'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """Resolved contribution limits and the sum-of-squares bound S they imply."""

    max_groups: int
    max_rows_per_group: int
    max_rows: int | None
    squares: int  # S = max over contributions of sum_g w_g²

    def describe(self) -> str:
        """How S was derived, for ``explain``."""
        k, m, big_m = self.max_groups, self.max_rows_per_group, self.max_rows
        if big_m is None or big_m >= k * m:
            return f"k={k} groups × m={m} rows: S = k·m² = {self.squares}"
        q = min(k, big_m // m)
        r = big_m - q * m if q < k else 0
        return (
            f"k={k}, m={m}, M={big_m}: q={q} full groups + r={r} rows: "
            f"S = q·m² + r² = {self.squares}"
        )
