"""Contribution limits: how much one privacy unit can add, and the bounds S and W they imply.

Sensitivity (``docs/sensitivity.md``; DP primer section 2): a privacy unit
contributes at most ``w_g <= m`` rows to each of at most ``k`` groups, and at
most ``M`` rows overall. Over all groups, ``sum_g w_g² <= S`` with
``S = q·m² + r²``, ``q = min(k, floor(M/m))`` full groups and ``r = M − q·m``
rows left (``r = 0`` when ``q = k``), or ``S = k·m²`` without ``M``. So the
L2 sensitivity of a grouped count vector is ``sqrt(S)``, and of a grouped sum
of values clipped to ``[L, U]`` it is ``sqrt(S)·max(|L|, |U|)``, or
``sqrt(S)·(U − L)/2`` for values centred on the midpoint. Pure DP calibrates
to the L1 sensitivity instead: ``sum_g w_g <= W`` with ``W = min(k·m, M)``
rows in all, so a grouped count has L1 sensitivity ``W`` and a centred sum
``W·(U − L)/2``.

The planner resolves a plan's limits (:func:`privframe.plan.planner.resolve_limits`).

Example:
    >>> from privframe.plan.limits import Limits
    >>> Limits(max_groups=3, max_rows_per_group=5, max_rows=12, squares=2 * 25 + 4).describe()
    'k=3, m=5, M=12: q=2 full groups + r=2 rows: S = q·m² + r² = 54'
    >>> Limits(max_groups=3, max_rows_per_group=5, max_rows=12, squares=54).rows
    12
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """Resolved contribution limits and the bounds S (sum of squares) and W (rows) they imply."""

    max_groups: int
    max_rows_per_group: int
    max_rows: int | None
    squares: int  # S = max over contributions of sum_g w_g²
    derived: tuple[str, ...] = ()  # how the plan's steps limit rows (plan/stages.py)

    @property
    def rows(self) -> int:
        """W = max over contributions of sum_g w_g: min(k·m, M), the L1 bound of a count."""
        most = self.max_groups * self.max_rows_per_group
        return most if self.max_rows is None else min(most, self.max_rows)

    def describe(self, l1: bool = False) -> str:
        """How S (or, with ``l1``, W) was derived, for ``explain``.

        The limits the plan's steps enforce (a private join's ``l·r``, ...) come first.

        Example:
            >>> Limits(2, 1, 2, 2, derived=("flat_map(items): M ≤ 2",)).describe()
            'flat_map(items): M ≤ 2; k=2 groups × m=1 rows: S = k·m² = 2'
        """
        steps = "".join(f"{line}; " for line in self.derived)
        return steps + self._bound(l1)

    def _bound(self, l1: bool) -> str:
        if l1:
            k, m, big_m = self.max_groups, self.max_rows_per_group, self.max_rows
            if big_m is None or big_m >= k * m:
                return f"k={k} groups × m={m} rows: W = k·m = {self.rows}"
            return f"k={k}, m={m}, M={big_m}: W = min(k·m, M) = {self.rows}"
        k, m, big_m = self.max_groups, self.max_rows_per_group, self.max_rows
        if big_m is None or big_m >= k * m:
            return f"k={k} groups × m={m} rows: S = k·m² = {self.squares}"
        q = min(k, big_m // m)
        r = big_m - q * m if q < k else 0
        return (
            f"k={k}, m={m}, M={big_m}: q={q} full groups + r={r} rows: "
            f"S = q·m² + r² = {self.squares}"
        )
