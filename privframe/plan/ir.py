"""The plan IR: what a query asks, with no data and no budget.

Front ends (the builder, SQL, reports) build a :class:`Plan`; the planner
(:mod:`privframe.plan.planner`) turns it and a budget into measurements, and
the release pipeline (:mod:`privframe.plan.release`) runs it. Plans are
frozen: every builder call makes a new one.

Example:
    >>> from privframe.plan.ir import Bound, Plan
    >>> Plan(bound=Bound(max_groups=2, max_rows_per_group=1)).n_groups
    1
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from fractions import Fraction

import polars as pl

from privframe.engines.spec import RowStep, Step
from privframe.errors import InvalidArgumentError, InvalidValueError
from privframe.plan.aggregates import Aggregate
from privframe.plan.keys import KeySet

__all__ = ["Bound", "Plan"]


def _positive_int(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
    try:
        v = operator.index(value)  # type: ignore[arg-type]  # any object: TypeError refuses it
    except TypeError:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}") from None
    if v < 1:
        raise InvalidValueError(f"{name} must be >= 1, got {v}")
    return v


@dataclass(frozen=True)
class Bound:
    """Per-privacy-unit contribution limits.

    Attributes:
        max_groups: k, the most groups one unit contributes to.
        max_rows_per_group: m, the most rows one unit contributes to one group.
        max_rows: M, the most rows one unit contributes overall.
    """

    max_groups: int | None = None
    max_rows_per_group: int | None = None
    max_rows: int | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            object.__setattr__(
                self, field.name, _positive_int(field.name, getattr(self, field.name))
            )


@dataclass(frozen=True, eq=False)
class Plan:
    """What a query asks, with no data and no budget: the planner's input.

    ``keys`` are public keys over ``group_by``'s columns, or over some of them:
    the group columns they leave out (:attr:`selected`) are chosen privately,
    and every chosen combination gets every public key. Without keys, every
    group column is chosen privately. ``table`` names the private table the
    steps start from (None: the session's first).
    """

    steps: tuple[Step, ...] = ()
    bound: Bound | None = None
    group_by: tuple[str, ...] = ()
    keys: KeySet | None = None
    aggregates: tuple[Aggregate, ...] = ()
    other: str | None = None
    table: str | None = None
    bounds_share: Fraction | None = None

    def __post_init__(self) -> None:
        if self.keys is not None and not set(self.keys.columns) <= set(self.group_by):
            raise InvalidValueError(
                f"keys cover columns {list(self.keys.columns)}, not all of which are group "
                f"columns {list(self.group_by)}"
            )

    @property
    def selected(self) -> tuple[str, ...]:
        """The group columns without public keys, whose combinations are chosen privately.

        Example:
            >>> import privframe as pf
            >>> keys = pf.keys.from_list("region", ["n", "s"])
            >>> Plan(group_by=("region", "month"), keys=keys).selected
            ('month',)
        """
        keyed = self.keys.columns if self.keys is not None else ()
        return tuple(c for c in self.group_by if c not in keyed)

    @property
    def n_groups(self) -> int | None:
        """How many groups the output has (None when some are chosen privately).

        The public keys and ``other``, or 1 without group_by.
        """
        if self.selected:
            return None
        if self.keys is not None:
            return len(self.keys) + (self.other is not None)
        return 1

    @property
    def filters(self) -> tuple[pl.Expr, ...]:
        """The filter predicates among the row steps."""
        return tuple(
            e
            for step in self.steps
            if isinstance(step, RowStep) and step.kind == "filter"
            for e in step.exprs
        )
