"""Aggregates whose bounds clamp each privacy unit's value in a group (BigQuery's clamping).

``pf.sum("x", per_unit_bounds=(L, U))`` is BigQuery's ``SUM(x,
contribution_bounds_per_group => (L, U))``: each unit's sum of its rows in a
group is clamped to [L, U], then the clamped values are summed over units.
Likewise ``pf.count(per_unit_bounds=(L, U))`` clamps each unit's row count and
``pf.mean("x", per_unit_bounds=(L, U))`` averages the units' clamped averages
(BigQuery's ``AVG``: "first computes the average per privacy unit column, and
then computes the final result by averaging these averages"; BigQuery,
"Differentially private aggregate functions").

Such an aggregate is no plan aggregate of its own: :meth:`Query.agg
<privframe.api.query.Query.agg>` rewrites it onto the per-unit stage,
``per_unit(<group columns>, <value>=pf.unit.sum("x"))`` followed by the
ordinary ``pf.sum(<value>, (L, U))``, so the sensitivity (one per-unit row
per group: ``m = 1``), ``explain``, the noise and the engines are the existing
ones. A unit whose values in a group are all null has a null per-unit sum or
mean, which adds nothing (``missing="drop"``), as BigQuery skips NULLs.

Example:
    >>> import privframe as pf
    >>> spec = pf.sum("amount", per_unit_bounds=(0, 100))
    >>> spec.output_name, spec.value_name, spec.missing
    ('amount_sum', 'amount_sum_per_unit', 'drop')
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from privframe.errors import InvalidArgumentError
from privframe.plan.aggregates.base import AUTO, AUTO_STAND_IN, check_bounds, check_column

Kind = Literal["sum", "count", "mean"]

_DEFAULT_NAMES: dict[str, str] = {"sum": "{}_sum", "mean": "{}_mean", "count": "count"}


@dataclass(frozen=True)
class PerUnitBounded:
    """One aggregate of each unit's value in a group, clamped to [lower, upper].

    ``kind`` is the per-unit value (``"sum"`` of ``column``, ``"count"`` of
    rows, ``"mean"`` of ``column``) and how the clamped values combine (a sum
    over units, or for ``"mean"`` their average). Not a plan aggregate:
    :meth:`Query.agg <privframe.api.query.Query.agg>` rewrites it (see the
    module docstring). With ``auto`` the bounds are chosen at release
    (:mod:`privframe.plan.auto_bounds`) and ``lower``, ``upper`` are stand-ins.
    """

    kind: Kind
    column: str | None
    lower: float
    upper: float
    name: str | None = None
    auto: bool = False

    def alias(self, name: str) -> PerUnitBounded:
        """The same aggregate with its output named ``name``."""
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"alias takes a non-empty string, got {name!r}")
        return dataclasses.replace(self, name=name)

    @property
    def output_name(self) -> str:
        """The output name: the alias, else ``<column>_sum``, ``<column>_mean`` or ``count``."""
        return self.name or _DEFAULT_NAMES[self.kind].format(self.column)

    @property
    def value_name(self) -> str:
        """The per-unit value's column in the per-unit stage: ``<output>_per_unit``."""
        return f"{self.output_name}_per_unit"

    @property
    def missing(self) -> Literal["drop", "midpoint"]:
        """The ``missing`` rule of the aggregate over the per-unit values.

        ``"drop"`` for a sum or mean: a unit whose values in the group are all
        null has no per-unit value and adds nothing. A count is never null.
        """
        return "midpoint" if self.kind == "count" else "drop"


def per_unit_bounded(kind: Kind, column: str | None, bounds: object) -> PerUnitBounded:
    """A :class:`PerUnitBounded` after checking its bounds (finite numbers, lower < upper).

    ``"auto"`` bounds are chosen at release.

    Example:
        >>> from privframe.plan.aggregates.per_unit import per_unit_bounded
        >>> per_unit_bounded("count", None, (0, 5)).output_name
        'count'
        >>> per_unit_bounded("sum", "x", "auto").auto
        True
    """
    name = None if column is None else check_column(column)
    if isinstance(bounds, str) and bounds == AUTO:
        return PerUnitBounded(kind, name, *AUTO_STAND_IN, auto=True)
    lower, upper = check_bounds(kind, name or "rows", bounds)  # the same checks as any bounds
    return PerUnitBounded(kind, name, float(lower), float(upper))


def per_unit_aggregate(
    kind: Kind,
    column: str | None,
    bounds: object,
    missing: object,
    per_unit_bounds: object,
) -> PerUnitBounded:
    """``pf.sum``/``pf.mean``/``pf.count`` called with ``per_unit_bounds``: checked and built.

    Raises:
        InvalidArgumentError: both ``bounds`` and ``per_unit_bounds`` are
            given, or neither, or a ``missing`` rule with per-unit bounds (a
            null per-unit value always adds nothing, as BigQuery skips NULLs).
        InvalidValueError: the bounds are not finite with lower < upper.

    Example:
        >>> import privframe as pf
        >>> pf.mean("x", (0, 1), per_unit_bounds=(0, 1))
        Traceback (most recent call last):
        ...
        privframe.errors.InvalidArgumentError: mean takes bounds (each row clamped) or \
per_unit_bounds (each unit's value in a group clamped), not both
    """
    if bounds is not None and per_unit_bounds is not None:
        raise InvalidArgumentError(
            f"{kind} takes bounds (each row clamped) or per_unit_bounds (each unit's value in a "
            "group clamped), not both"
        )
    if per_unit_bounds is None:
        raise InvalidArgumentError(
            f"{kind}() is missing the argument 'bounds'. bounds=(lower, upper) are public "
            "clipping bounds: finite numbers, lower < upper, chosen from knowledge of the "
            "domain (e.g. bounds=(0, 1000)), never computed from the data; values outside "
            "them are clipped to them. Or per_unit_bounds=(lower, upper) clamps each privacy "
            "unit's value in a group (BigQuery's contribution_bounds_per_group); or "
            'bounds="auto" (per_unit_bounds="auto") spends a share of the release\'s budget '
            "choosing them privately (Query.bounds_share)"
        )
    if missing != "midpoint":
        raise InvalidArgumentError(
            f"{kind} with per_unit_bounds takes no missing= rule: a unit whose values in a "
            "group are all null adds nothing (as BigQuery skips NULLs)"
        )
    return per_unit_bounded(kind, column, per_unit_bounds)
