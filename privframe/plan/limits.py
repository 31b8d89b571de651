"""Contribution limits: how much one privacy unit can add, and the bound S it implies.

Sensitivity (``docs/sensitivity.md``; DP primer section 2): a privacy unit
contributes at most ``w_g <= m`` rows to each of at most ``k`` groups, and at
most ``M`` rows overall. Over all groups, ``sum_g w_g² <= S`` with
``S = q·m² + r²``, ``q = min(k, floor(M/m))`` full groups and ``r = M − q·m``
rows left (``r = 0`` when ``q = k``), or ``S = k·m²`` without ``M``. So the
L2 sensitivity of a grouped count vector is ``sqrt(S)``, and of a grouped sum
of values clipped to ``[L, U]`` it is ``sqrt(S)·max(|L|, |U|)``, or
``sqrt(S)·(U − L)/2`` for values centred on the midpoint.

Example:
    >>> from privframe.plan.ir import Bound, Plan
    >>> from privframe.plan.limits import resolve_limits
    >>> plan = Plan(bound=Bound(max_groups=3, max_rows_per_group=5))
    >>> resolve_limits(plan, has_unit=True).describe()  # one global group: k = 1
    'k=1 groups × m=5 rows: S = k·m² = 25'
"""

from __future__ import annotations

from dataclasses import dataclass

from privframe.errors import InvalidValueError
from privframe.plan.ir import Plan

__all__ = ["Limits", "resolve_limits", "selects"]


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


def resolve_limits(plan: Plan, has_unit: bool) -> Limits:
    """Contribution limits from the plan (each row is its own unit without a unit column)."""
    n_groups = plan.n_groups or 1
    if not has_unit:
        return Limits(1, 1, None, 1)
    bound = plan.bound
    if selects(plan) and (bound is None or bound.max_groups is None):
        raise InvalidValueError(
            "choosing groups privately (group_by without keys) needs .bound(max_groups=...): "
            "with no public key list there is no other bound on a unit's groups"
        )
    if selects(plan):
        assert bound is not None  # refused just above otherwise
        assert bound.max_groups is not None
        n_groups = bound.max_groups
    if bound is None:
        raise InvalidValueError(
            "a query over a privacy unit needs contribution limits: call "
            ".bound(max_groups=..., max_rows_per_group=...) (and optionally max_rows=...)"
        )
    if bound.max_rows_per_group is None and bound.max_rows is None:
        raise InvalidValueError(
            "the contribution limits have no row limit: max_rows_per_group is missing (the most "
            "rows one privacy unit adds to one group, e.g. .bound(max_groups=3, "
            "max_rows_per_group=5), or pf.Bound(...) the same way); or give max_rows (the most "
            "rows one unit adds in all)"
        )
    m = bound.max_rows_per_group or bound.max_rows
    assert m is not None
    big_m = bound.max_rows
    if big_m is not None:
        m = min(m, big_m)
    k = min(bound.max_groups or n_groups, n_groups)
    if big_m is None or big_m >= k * m:
        return Limits(k, m, big_m, k * m * m)
    q = min(k, big_m // m)
    r = big_m - q * m if q < k else 0
    return Limits(k, m, big_m, q * m * m + r * r)


def selects(plan: Plan) -> bool:
    """Whether the plan chooses its groups privately (group_by without public keys)."""
    return bool(plan.group_by) and plan.keys is None
