"""The narrow interface between the planner and an engine: what to aggregate, exactly.

Example:
    >>> from privframe.engines.spec import ValueSpec
    >>> v = ValueSpec("amount_sum", "amount", 0.0, 1000.0, 10, 0, 1024000, 0, 0.0)
    >>> v.upper_units
    1024000
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

import polars as pl

from privframe.engines.checked_arithmetic import checked
from privframe.engines.unit_values import UnitValue

__all__ = [
    "COUNT",
    "DISTINCT",
    "FLAT_MAP_SALT",
    "JOIN_SALT",
    "AggregationSpec",
    "Engine",
    "FlatMap",
    "HistogramSpec",
    "PerUnit",
    "PrivateJoin",
    "RowStep",
    "Step",
    "UnitColumns",
    "ValueSpec",
    "apply_steps",
    "checked_step",
    "truncation_key",
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


Truncation = Literal["random", "hash"]

JOIN_SALT = 0x94D049BB133111EB
"""Salt of the keyed hash that truncates each side of a private join."""

FLAT_MAP_SALT = 0xBF58476D1CE4E5B9
"""Salt of the keyed hash that truncates a unit's rows after a flat_map."""

_COPY_SALT = 0xD6E8FEB86659FD93
"""Salt of the second hash of a truncation, over a row's hash and its number among copies."""

_HASH_KEY = 0x7F4A7C159E3779B9
"""The fixed key of ``truncation="hash"``: the same rows on every release."""


def truncation_key(truncation: Truncation, seed: int, salt: int) -> int:
    """The key of a truncation's hash: the release's fresh seed, or a fixed one for ``hash``.

    Example:
        >>> from privframe.engines.spec import JOIN_SALT, truncation_key
        >>> truncation_key("hash", 1, JOIN_SALT) == truncation_key("hash", 2, JOIN_SALT)
        True
    """
    return (seed if truncation == "random" else _HASH_KEY) ^ salt


@dataclass(frozen=True, eq=False)
class PrivateJoin:
    """Join another private table on keys that include the privacy unit, each side truncated.

    Each unit keeps at most ``left_rows`` of its rows on the left and
    ``right_rows`` on the right (those ranking lowest by a hash of the row's
    values, keyed by the release's fresh seed with ``truncation="random"`` or
    by a fixed key with ``"hash"``: never by where the rows sit in the data),
    then the sides are joined on ``on``. Since ``on`` includes the unit, a
    joined row belongs to one unit, and a unit has at most
    ``left_rows·right_rows`` of them. The right side's own ``steps`` run
    first, on ``table``. Non-key columns of the right side that the left has
    too get ``suffix``.

    Example:
        >>> from privframe.engines.spec import PrivateJoin
        >>> PrivateJoin("visits", (), ("pid",), "inner", left_rows=3, right_rows=2).max_rows
        6
    """

    table: str
    steps: tuple[Step, ...]
    on: tuple[str, ...]
    how: Literal["inner", "left"]
    left_rows: int
    right_rows: int
    truncation: Truncation = "random"
    suffix: str = "_right"
    kind: Literal["private_join"] = "private_join"

    @property
    def max_rows(self) -> int:
        """``left_rows·right_rows``: the most joined rows one unit can have."""
        return self.left_rows * self.right_rows


@dataclass(frozen=True)
class FlatMap:
    """One row to several: each element of the list ``column`` becomes a row.

    Empty and null lists give no row. The element is in ``name`` (the list
    column itself by default). Each unit then keeps at most ``max_rows`` of its
    rows, chosen as a private join's sides are (see :class:`PrivateJoin`).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spec import FlatMap, apply_steps
        >>> baskets = pl.LazyFrame({"u": [1, 2], "items": [["tea", "jam"], []]})
        >>> step = FlatMap("items", "item", max_rows=5)
        >>> apply_steps(baskets, (step,), unit="u").collect()["item"].sort().to_list()
        ['jam', 'tea']
    """

    column: str
    name: str
    max_rows: int
    truncation: Truncation = "random"
    kind: Literal["flat_map"] = "flat_map"


@dataclass(frozen=True)
class UnitColumns:
    """Add columns computed over each unit's rows (:mod:`privframe.engines.unit_values`).

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.engines.spec import UnitColumns, apply_steps
        >>> rows = pl.LazyFrame({"u": [1, 1, 2], "x": [1, 2, 5]})
        >>> step = UnitColumns((("total", pf.unit.sum("x")),))
        >>> apply_steps(rows, (step,), unit="u").collect()["total"].to_list()
        [3, 3, 5]
    """

    values: tuple[tuple[str, UnitValue], ...]
    kind: Literal["unit_columns"] = "unit_columns"


@dataclass(frozen=True)
class PerUnit:
    """The per-unit stage: one row per unit and combination of ``by``, with per-unit values.

    Its rows have the unit column, ``by`` and one column per value.

    Example:
        >>> import polars as pl
        >>> import privframe as pf
        >>> from privframe.engines.spec import PerUnit, apply_steps
        >>> rows = pl.LazyFrame({"u": [1, 1, 2], "x": [1, 2, 5]})
        >>> step = PerUnit((), (("n", pf.unit.count()),))
        >>> apply_steps(rows, (step,), unit="u").collect().sort("u")["n"].to_list()
        [2, 1]
    """

    by: tuple[str, ...]
    values: tuple[tuple[str, UnitValue], ...]
    kind: Literal["per_unit"] = "per_unit"


Step = RowStep | PrivateJoin | FlatMap | UnitColumns | PerUnit
"""One step before aggregation: row-wise (:class:`RowStep`) or over each unit's rows."""


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


def apply_steps(
    frame: pl.LazyFrame,
    steps: tuple[Step, ...],
    *,
    unit: str | None = None,
    tables: Mapping[str, pl.LazyFrame] | None = None,
    seed: int = 0,
) -> pl.LazyFrame:
    """The frame after the steps, in order, arithmetic checked (lazy: nothing runs).

    Steps over units (joins of private ``tables``, flat maps, per-unit values)
    need the privacy ``unit`` column, and truncate with the release's ``seed``.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.spec import RowStep, apply_steps
        >>> step = RowStep("filter", (pl.col("x") > 1,))
        >>> apply_steps(pl.LazyFrame({"x": [1, 2, 3]}), (step,)).collect()["x"].to_list()
        [2, 3]
    """
    for step in steps:
        if isinstance(step, RowStep):
            frame = _row_step(frame, step)
            continue
        assert unit is not None, "a step over units needs the privacy unit"
        if isinstance(step, PrivateJoin):
            if tables is None or step.table not in tables:
                raise KeyError(step.table)
            right = apply_steps(tables[step.table], step.steps, unit=unit, tables=tables, seed=seed)
            key = truncation_key(step.truncation, seed, JOIN_SALT)
            frame = _truncated(frame, unit, step.left_rows, key).join(
                _truncated(right, unit, step.right_rows, key ^ 1),
                on=list(step.on),
                how=step.how,
                suffix=step.suffix,
            )
        elif isinstance(step, FlatMap):
            listed = frame.filter(pl.col(step.column).list.len() > 0)
            if step.name != step.column:
                listed = listed.with_columns(pl.col(step.column).alias(step.name))
            key = truncation_key(step.truncation, seed, FLAT_MAP_SALT)
            frame = _truncated(listed.explode(step.name), unit, step.max_rows, key)
        elif isinstance(step, UnitColumns):
            schema = frame.collect_schema()
            frame = frame.with_columns(v.polars(schema, unit).alias(n) for n, v in step.values)
        else:
            schema = frame.collect_schema()
            frame = frame.group_by(unit, *step.by).agg(
                v.polars(schema, None).alias(n) for n, v in step.values
            )
    return frame


def _row_step(frame: pl.LazyFrame, step: RowStep) -> pl.LazyFrame:
    if step.kind != "join":
        step = checked_step(step, frame.collect_schema())
    if step.kind == "filter":
        return frame.filter(*step.exprs)
    if step.kind == "with_columns":
        return frame.with_columns(*step.exprs)
    assert step.table is not None
    return frame.join(step.table.lazy(), on=list(step.on), how=step.how)


def _truncated(frame: pl.LazyFrame, unit: str, limit: int, key: int) -> pl.LazyFrame:
    """Each unit's rows cut to ``limit``: those whose values hash (keyed) lowest.

    The hash reads every column and the row's number among the unit's rows
    identical to it: identical rows are interchangeable, so which rows stay
    never depends on their order in the data, and with a fresh key every
    subset of ``limit`` rows is equally likely, duplicates included. Two
    sorts do it (a window per rank costs about twice as much).
    """
    columns = frame.collect_schema().names()
    hashed, start, order = (_fresh(name, columns) for name in ("__hash", "__start", "__order"))
    position = pl.int_range(pl.len(), dtype=pl.Int64)

    def runs(*by: str) -> pl.Expr:
        """Each row's position in its run of equal ``by`` values (the frame sorted by them)."""
        new = pl.any_horizontal((pl.col(c) != pl.col(c).shift()).fill_null(True) for c in by)
        return position - pl.when(new).then(position).forward_fill()

    copies = (
        frame.with_columns(pl.struct(*columns).hash(key).alias(hashed))
        .sort(unit, hashed)
        .with_columns(runs(unit, hashed).alias(start))
        .with_columns(pl.struct(hashed, start).hash(key ^ _COPY_SALT).alias(order))
    )
    kept = copies.sort(unit, order).filter(runs(unit) < limit)
    return kept.select(columns)


def _fresh(name: str, taken: list[str]) -> str:
    """``name``, lengthened until no column has it."""
    while name in taken:
        name += "_"
    return name


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
        table: the private table the steps start from (None: the session's first).
    """

    steps: tuple[Step, ...]
    unit: str | None
    group_by: tuple[str, ...]
    keys: pl.DataFrame | None
    max_groups: int | None
    max_rows_per_group: int
    max_rows: int | None
    values: tuple[ValueSpec, ...]
    seed: int
    histograms: tuple[HistogramSpec, ...] = ()
    table: str | None = None


class Engine(Protocol):
    """The interface every engine implements."""

    def aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        """One row per public key (in order): keys, ``COUNT``, values and histogram arrays."""
        ...
