"""Exact per-unit contribution summaries, for choosing contribution limits and bounds.

``query.tune`` (:mod:`privframe.api.tune`) needs to know how units contribute:
how many groups each unit is in, how many rows it has per (unit, group) cell,
and how a column's values spread. The release aggregation
(:mod:`privframe.engines.spec`) sums bounded rows per group and cannot say
that, so an engine that supports tuning also answers a
:class:`ContributionSpec` with :class:`Contributions`: three kinds of
histograms whose every unit's share is bounded, so that the privacy layer can
add noise to them (the sensitivity is derived in :mod:`privframe.plan.tuning`).

Bins are given by their lower edges ``e_0 < e_1 < ...``: bin ``i`` holds the
values in ``[e_i, e_{i+1})`` (the last bin has no upper edge). For a unit ``u``
over the rows a release would aggregate (after the row steps, with rows of
non-public keys dropped and rows without a unit dropped):

* **groups per unit**: the unit adds 1 to the bin of ``g_u``, its number of
  groups (cells);
* **rows per cell**: the unit adds ``floor(W·c_ub / g_u)`` to bin ``b``, where
  ``c_ub`` of its cells have a row count in ``b``: in all at most ``W``;
* **values**: per column, the unit adds ``floor(W·c_ub / N_u)`` to signed
  bucket ``b``, where ``c_ub`` of its ``N_u`` non-missing values fall in ``b``:
  in all at most ``W``. Buckets are signed magnitudes: bucket ``0`` holds
  ``|x| < e_0``, bucket ``+(i + 1)`` holds ``x`` with ``|x|`` in bin ``i``, and
  ``-(i + 1)`` its mirror; an array holds them from the most negative.

Without a privacy unit each row is its own unit. Null and NaN values have no
bucket; infinities fall in the outermost buckets.

The polars engine computes them with :func:`contribution_tables` on its
keyed rows (:meth:`privframe.engines.polars.engine.PolarsEngine.contributions`);
the Spark engine computes the same bins on its cluster
(:func:`privframe.engines.spark.contributions.spark_contributions`).

Example:
    >>> import polars as pl
    >>> from privframe.engines.contributions import ContributionSpec, contribution_tables
    >>> from privframe.engines.spec import AggregationSpec
    >>> frame = pl.LazyFrame({"u": [1, 1, 1, 2], "g": ["a", "a", "b", "a"], "x": [1.0, 3, 3, 5]})
    >>> rows = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a", "b"]}), None, 1, None,
    ...                        (), seed=0)
    >>> spec = ContributionSpec(rows, scale=4, group_edges=(1, 2), row_edges=(1, 2),
    ...                         value_columns=("x",), value_edges=(1.0, 2.0, 4.0))
    >>> tables = contribution_tables(frame, spec, ["g"])
    >>> tables.groups.tolist(), tables.rows.tolist()
    ([1, 1], [6, 2])
    >>> tables.values["x"].tolist()
    [0, 0, 0, 0, 1, 2, 4]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import polars as pl

from privframe.engines.spec import AggregationSpec

__all__ = [
    "ContributionSpec",
    "Contributions",
    "SupportsContributions",
    "contribution_tables",
    "signed_buckets",
]

_UNIT = "__tune_unit"
_CELLS = "__tune_cells"
_ROWS = "__tune_rows"
_BIN = "__tune_bin"
_WEIGHT = "__tune_weight"


@dataclass(frozen=True)
class ContributionSpec:
    """What to summarise, with every choice made: columns, bins and the weight scale ``W``.

    Attributes:
        rows: the rows summarised: those a release with this spec would
            aggregate, before any contribution bounding (its steps, unit,
            group_by and keys; its limits, values and histograms are unused).
        scale: ``W``: one unit's weights in a rows or values histogram add
            up to at most this.
        group_edges: lower edges of the groups-per-unit bins (empty: skip).
        row_edges: lower edges of the rows-per-cell bins (empty: skip).
        value_columns: the columns whose values are bucketed.
        value_edges: the magnitude edges of the signed value buckets.
    """

    rows: AggregationSpec
    scale: int
    group_edges: tuple[float, ...]
    row_edges: tuple[float, ...]
    value_columns: tuple[str, ...] = ()
    value_edges: tuple[float, ...] = ()


@dataclass(frozen=True, eq=False)
class Contributions:
    """The exact histograms (int64 arrays, one entry per bin); never shown before noise."""

    groups: np.ndarray
    rows: np.ndarray
    values: dict[str, np.ndarray]


@runtime_checkable
class SupportsContributions(Protocol):
    """An engine that can summarise contributions (the polars and Spark engines)."""

    def contributions(self, spec: ContributionSpec) -> Contributions:
        """The exact histograms of the module doc for ``spec``."""
        ...


def signed_buckets(edges: tuple[float, ...]) -> int:
    """How many signed value buckets ``edges`` make: ``2·len(edges) + 1``.

    Example:
        >>> from privframe.engines.contributions import signed_buckets
        >>> signed_buckets((1.0, 2.0))
        5
    """
    return 2 * len(edges) + 1


def _bin(edges: tuple[float, ...] | tuple[int, ...], value: pl.Expr) -> pl.Expr:
    """The index of the bin holding ``value`` (−1 below the first edge)."""
    grid = pl.lit(pl.Series(edges, dtype=pl.Float64))
    return grid.search_sorted(value.cast(pl.Float64), side="right").cast(pl.Int64) - 1


def _dense(table: pl.DataFrame | None, size: int, offset: int = 0) -> np.ndarray:
    """Per-bin sums as a dense array of ``size`` (``offset`` shifts signed bucket ids)."""
    out = np.zeros(size, dtype=np.int64)
    if table is None:
        return out
    index = table[_BIN].to_numpy().astype(np.int64) + offset
    np.add.at(out, index, table[_WEIGHT].to_numpy().astype(np.int64))
    return out


def _value_weights(frame: pl.LazyFrame, column: str, spec: ContributionSpec) -> pl.LazyFrame:
    """Per signed bucket, Σ_u floor(W·c_ub / N_u) over the column's non-missing values."""
    x = pl.col(column).cast(pl.Float64)
    magnitude = _bin(spec.value_edges, x.abs()) + 1
    signed = pl.when(x < 0).then(-magnitude).otherwise(magnitude)
    known = frame.filter(x.is_not_null() & x.is_not_nan())
    cells = known.group_by(_UNIT, signed.alias(_BIN)).agg(pl.len().cast(pl.Int64).alias(_ROWS))
    weight = (pl.col(_ROWS) * spec.scale) // pl.col(_ROWS).sum().over(_UNIT)
    return cells.with_columns(weight.alias(_WEIGHT)).group_by(_BIN).agg(pl.col(_WEIGHT).sum())


def _cells(frame: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """Per (unit, group) cell: its rows n, and the unit's number of cells g."""
    cells = frame.group_by(_UNIT, *by).agg(pl.len().cast(pl.Int64).alias(_ROWS))
    return cells.with_columns(pl.len().over(_UNIT).cast(pl.Int64).alias(_CELLS))


def _group_weights(cells: pl.LazyFrame, edges: tuple[float, ...]) -> pl.LazyFrame:
    """Per bin of g, the number of units."""
    units = cells.group_by(_UNIT).agg(pl.col(_CELLS).first())
    return units.group_by(_bin(edges, pl.col(_CELLS)).alias(_BIN)).agg(
        pl.len().cast(pl.Int64).alias(_WEIGHT)
    )


def _row_weights(cells: pl.LazyFrame, spec: ContributionSpec) -> pl.LazyFrame:
    """Per bin of n, Σ_u floor(W·c_ub / g_u)."""
    per_unit = cells.group_by(_UNIT, _bin(spec.row_edges, pl.col(_ROWS)).alias(_BIN)).agg(
        pl.len().cast(pl.Int64).alias(_ROWS), pl.col(_CELLS).first()
    )
    weight = (pl.col(_ROWS) * spec.scale) // pl.col(_CELLS)
    return per_unit.group_by(_BIN).agg(weight.sum().alias(_WEIGHT))


def contribution_tables(
    frame: pl.LazyFrame, spec: ContributionSpec, by: list[str], *, streaming: bool = False
) -> Contributions:
    """The histograms of the module doc over ``frame``: the rows a release would aggregate.

    ``frame`` holds the unit column (unless ``spec.rows.unit`` is None), the
    columns ``by`` that identify a row's group and the value columns, one row
    per input row that reaches a public key; rows without a unit must already
    be dropped.
    """
    unit = spec.rows.unit
    frame = frame.with_row_index(_UNIT) if unit is None else frame.rename({unit: _UNIT})
    cells = _cells(frame, by)
    pieces = [
        _group_weights(cells, spec.group_edges) if spec.group_edges else None,
        _row_weights(cells, spec) if spec.row_edges else None,
        *(_value_weights(frame, c, spec) for c in spec.value_columns),
    ]
    wanted = [p for p in pieces if p is not None]
    found = iter(pl.collect_all(wanted, engine="streaming" if streaming else "auto"))
    groups = _dense(next(found) if spec.group_edges else None, len(spec.group_edges))
    rows = _dense(next(found) if spec.row_edges else None, len(spec.row_edges))
    size, offset = signed_buckets(spec.value_edges), len(spec.value_edges)
    values = {c: _dense(next(found), size, offset) for c in spec.value_columns}
    return Contributions(groups=groups, rows=rows, values=values)
