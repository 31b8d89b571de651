"""The narrow interface between the planner and an engine: what to aggregate, exactly.

Example:
    >>> from privframe.engines.spec import ValueSpec
    >>> v = ValueSpec("amount_sum", "amount", 0.0, 1000.0, 10, 0, 1024000, 0, 0.0)
    >>> v.upper_units
    1024000
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Protocol

import polars as pl

from privframe.engines.checked_arithmetic import checked

__all__ = [
    "COUNT",
    "DISTINCT",
    "AggregationSpec",
    "Engine",
    "HistogramSpec",
    "RowStep",
    "ValueSpec",
    "apply_steps",
    "checked_step",
]

COUNT = "__count"
"""Name of the bounded row-count column every engine returns."""

DISTINCT = "__distinct"
"""Name of the column of distinct units per key (after group bounding) every engine returns."""


@dataclass(frozen=True, eq=False)
class RowStep:
    """One row-wise step before aggregation, in query order.

    ``filter`` keeps the rows where every expression holds; ``with_columns``
    adds or replaces columns; ``join`` adds the columns of a public ``table``
    (unique on ``on``, so each row gets at most one match) with a left or
    inner join. The front end admits only row-wise expressions that cannot
    fail (:mod:`privframe.engines.expressions`).
    """

    kind: Literal["filter", "with_columns", "join"]
    exprs: tuple[pl.Expr, ...] = ()
    table: pl.DataFrame | None = None
    on: tuple[str, ...] = ()
    how: Literal["left", "inner"] = "left"


def checked_step(step: RowStep, schema: pl.Schema) -> RowStep:
    """``step`` with checked integer arithmetic over ``schema``, the columns it reads.

    Every engine runs this form: where an integer operation of a filter or
    derived column overflows, the expression is null, never a wrapped value
    (:func:`~privframe.engines.expressions.checked`). A step without integer
    arithmetic is returned as is.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spec import RowStep, checked_step
        >>> step = RowStep("filter", (pl.col("age") > 18,))
        >>> checked_step(step, pl.Schema({"age": pl.Int64})) is step
        True
    """
    if step.kind == "join":
        return step
    exprs = tuple(checked(e, schema) for e in step.exprs)
    if all(new is old for new, old in zip(exprs, step.exprs, strict=True)):
        return step
    return dataclasses.replace(step, exprs=exprs)


def apply_steps(frame: pl.LazyFrame, steps: tuple[RowStep, ...]) -> pl.LazyFrame:
    """The frame after the row steps, in order, arithmetic checked (lazy: nothing runs)."""
    for step in steps:
        if step.kind != "join":
            step = checked_step(step, frame.collect_schema())
        if step.kind == "filter":
            frame = frame.filter(*step.exprs)
        elif step.kind == "with_columns":
            frame = frame.with_columns(*step.exprs)
        else:
            assert step.table is not None
            frame = frame.join(step.table.lazy(), on=list(step.on), how=step.how)
    return frame


@dataclass(frozen=True)
class ValueSpec:
    """One summed column: clip to [lower, upper], snap to the grid 2^-j, subtract a centre.

    Each row contributes ``clip(round(clip(x, lower, upper)·2^j), lower_units,
    upper_units) − centre_units`` grid units; a null or NaN ``x`` is replaced by
    ``fill`` first, or, with ``fill=None``, contributes 0 (as if its row had no
    value: 0 lies in ``[lower_units − centre_units, upper_units − centre_units]``,
    so the per-row bound holds). With ``square_around = a`` the clipped value is
    replaced by ``(x − a)²`` before the grid step (for variances). The second
    clip makes the planner's integer bounds hold whatever the rounding mode or
    float error. With ``present=True`` a row contributes 1 if ``x`` is neither
    null nor NaN, else 0 (the count of values; bounds ``[0, 1]``, centre 0).
    """

    name: str
    column: str
    lower: float
    upper: float
    grid_exponent: int
    lower_units: int
    upper_units: int
    centre_units: int
    fill: float | None
    square_around: float | None = None
    present: bool = False


@dataclass(frozen=True)
class HistogramSpec:
    """Per key, how many bounded rows sit at or between each pair of candidates.

    With candidates c_0 < ... < c_{N−1} (``grid``), a row whose value,
    clipped to [c_0, c_{N−1}], equals c_i has position 2i, and one strictly
    between c_{i−1} and c_i has position 2i − 1 (exact float comparisons).
    Null and NaN values have no position. The engine returns a column
    ``name`` holding, per key, the list of its nonzero positions and counts
    (structs ``{position, count}``), in any order.
    Rows are whole rows here, not scaled: each unit keeps a random subset of
    at most its weight's rows per key.
    """

    name: str
    column: str
    grid: tuple[float, ...]

    @property
    def positions(self) -> int:
        """2N − 1: the length of each key's array."""
        return 2 * len(self.grid) - 1


@dataclass(frozen=True, eq=False)
class AggregationSpec:
    """What the engine computes, with every privacy decision already made.

    Attributes:
        steps: row-wise filters and derived columns, applied first, in order.
        unit: the privacy unit column, or None when each row is a unit.
        group_by: key columns (empty for one global group).
        keys: the public key rows; rows with other keys are dropped, keys
            without rows get zeros, output follows this order. None with an
            empty ``group_by``: one global group. None with ``group_by``:
            the observed keys (for private key selection). Over some of the
            ``group_by`` columns only: rows whose keyed columns are not a
            public key are dropped, the other columns are observed, and the
            output has a row for every public key in each observed combination
            of the others (sorted), with ``DISTINCT`` the combination's units.
        max_groups: per unit, keep this many of its groups (chosen at random);
            None when no unit can exceed it.
        max_rows_per_group: per unit and group, at most this many rows' worth.
        max_rows: per unit overall, at most this many rows' worth (or None).
        values: the summed columns.
        seed: fresh secret randomness for choosing groups (and rows).
        histograms: per-key histograms of bounded rows, for quantiles.
    """

    steps: tuple[RowStep, ...]
    unit: str | None
    group_by: tuple[str, ...]
    keys: pl.DataFrame | None
    max_groups: int | None
    max_rows_per_group: int
    max_rows: int | None
    values: tuple[ValueSpec, ...]
    seed: int
    histograms: tuple[HistogramSpec, ...] = ()


class Engine(Protocol):
    """The interface every engine implements."""

    def aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        """One row per public key (in order): keys, ``COUNT``, values and histogram arrays."""
        ...
