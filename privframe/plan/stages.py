"""The row limits a plan's steps imply: how many rows one unit can have when they reach bounding.

Steps over units make row limits that the engine enforces, so the planner can
derive contribution limits from them instead of assuming any:

* a private join keeps at most ``l`` rows of each unit on the left and ``r``
  on the right, so a unit has at most ``l·r`` joined rows (``M = l·r``);
* a flat map keeps at most its ``max_rows`` rows of each unit (``M``);
* a per-unit stage makes one row per unit and combination of its ``by``
  columns: at most one row per group when the query groups by all of them
  (``m = 1``), and one row per unit when it has none (``M = 1``).

Filters and per-unit columns never add rows. A derived column that rewrites
one of a per-unit stage's ``by`` columns ends its one-row-per-group
guarantee. The engine bounds contributions to the resolved limits whatever
they are (:mod:`privframe.engines.bounding`): a derivation here can only be
as tight as what the steps enforce, and is shown by ``explain``.

Example:
    >>> from privframe.engines.spec import PerUnit, PrivateJoin
    >>> join = PrivateJoin("visits", (), ("uid",), "inner", left_rows=4, right_rows=3)
    >>> limits = stage_limits((join,), ())
    >>> limits.max_rows, limits.lines
    (12, ('join_private(visits): at most 4 left × 3 right rows per unit: M ≤ 12',))
"""

from __future__ import annotations

from dataclasses import dataclass

from privframe.engines.spec import FlatMap, PerUnit, PrivateJoin, RowStep, Step, UnitColumns

__all__ = ["StageLimits", "stage_limits"]


@dataclass(frozen=True)
class StageLimits:
    """Row limits the steps enforce (None: no limit from the steps) and how they were derived.

    Example:
        >>> from privframe.plan.stages import StageLimits
        >>> StageLimits(max_rows=6).max_rows_per_group is None
        True
    """

    max_rows: int | None = None
    max_rows_per_group: int | None = None
    lines: tuple[str, ...] = ()


def _written(step: RowStep | UnitColumns) -> set[str | None]:
    """The columns a step writes."""
    if isinstance(step, UnitColumns):
        return {name for name, _ in step.values}
    if step.kind != "with_columns":
        return set()
    return {e.meta.output_name(raise_if_undetermined=False) for e in step.exprs}


def stage_limits(steps: tuple[Step, ...], group_by: tuple[str, ...]) -> StageLimits:
    """The row limits ``steps`` enforce for a query grouped by ``group_by``.

    Example:
        >>> from privframe.engines.spec import PerUnit
        >>> stage_limits((PerUnit(("region",), ()),), ("region",)).max_rows_per_group
        1
        >>> stage_limits((PerUnit((), ()),), ()).max_rows
        1
    """
    rows: int | None = None
    whole: frozenset[str] | None = None  # each unit has one row per combination of these
    lines: list[str] = []
    for step in steps:
        if isinstance(step, RowStep | UnitColumns):
            if whole is not None and _written(step) & whole:
                whole = None
                lines.append("a per-unit stage's column was rewritten: no row limit per group")
            continue
        if isinstance(step, PrivateJoin):
            right = stage_limits(step.steps, ()).max_rows
            left_rows = min(step.left_rows, rows or step.left_rows)
            right_rows = min(step.right_rows, right or step.right_rows)
            rows, whole = left_rows * right_rows, None
            lines.append(
                f"join_private({step.table}): at most {left_rows} left × {right_rows} right "
                f"rows per unit: M ≤ {rows}"
            )
        elif isinstance(step, FlatMap):
            rows, whole = step.max_rows, None
            lines.append(f"flat_map({step.column}): at most {rows} rows per unit: M ≤ {rows}")
        elif isinstance(step, PerUnit):
            whole = frozenset(step.by)
            if not step.by:
                rows = 1
                lines.append("per_unit(): one row per unit: M = 1")
    per_group = None
    if whole is not None and whole <= set(group_by):
        per_group = 1
        if whole:
            names = ", ".join(sorted(whole))
            lines.append(f"per_unit({names}): one row per unit and group: m = 1")
    return StageLimits(rows, per_group, tuple(lines))
