"""``query.tune``'s contribution histograms (:mod:`privframe.engines.contributions`) on Spark.

:func:`spark_contributions` computes exactly what
:func:`~privframe.engines.contributions.contribution_tables` computes on polars,
bin for bin: per (unit, key) cell its rows ``n``, per unit its cells ``g`` and
its non-missing values ``N_u`` per column, and from them the three kinds of
histograms, with the same integer weights ``floor(W·c / g)`` and
``floor(W·c / N_u)`` (Spark's integer ``div``, which floors non-negative
operands) and the same bins (a value's bin is the number of lower edges at or
below it, minus one, as polars' ``search_sorted(side="right") - 1``, compared
in float64). Null and NaN values have no bucket; infinities fall in the
outermost buckets.

Everything is aggregated on the cluster: the per-cell and per-unit partials
stay in Spark, and one Spark job collects only the histograms' non-empty bins
(bin, summed weight), at most a few hundred small rows. Without a privacy
unit each row is its own unit: a unit with one cell of one row and at most one
value per column, so the histograms are counts of rows (times ``W`` for the
rows and values histograms), with no per-row identifier.

Example:
    >>> import polars as pl
    >>> from privframe.engines.contributions import ContributionSpec
    >>> from privframe.engines.spark.contributions import spark_contributions
    >>> from privframe.engines.spec import AggregationSpec
    >>> rows = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a", "b"]}), None, 1, None,
    ...                        (), seed=0)
    >>> spec = ContributionSpec(rows, scale=4, group_edges=(1, 2), row_edges=(1, 2),
    ...                         value_columns=("x",), value_edges=(1.0, 2.0, 4.0))
    >>> from pyspark.sql import SparkSession  # doctest: +SKIP
    >>> spark = SparkSession.builder.master("local[1]").getOrCreate()  # doctest: +SKIP
    >>> frame = spark.createDataFrame([(1, "a", 1.0), (1, "a", 3.0), (1, "b", 3.0),
    ...                                (2, "a", 5.0)], "u long, g string, x double"
    ...                               )  # doctest: +SKIP
    >>> tables = spark_contributions(frame, spec, ["g"])  # doctest: +SKIP
    >>> tables.groups.tolist(), tables.rows.tolist()  # doctest: +SKIP
    ([1, 1], [6, 2])
    >>> tables.values["x"].tolist()  # doctest: +SKIP
    [0, 0, 0, 0, 1, 2, 4]
"""

from __future__ import annotations

import bisect
import functools
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from privframe.engines.contributions import Contributions, ContributionSpec, signed_buckets
from privframe.engines.spark._columns import col, long_literal

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["spark_contributions"]

_UNIT = "__tune_unit"
_CELLS = "__tune_cells"
_ROWS = "__tune_rows"
_BIN = "__tune_bin"
_WEIGHT = "__tune_weight"
_PIECE = "__tune_piece"
_TOTAL = "__tune_total"


def _bin(edges: tuple[float, ...] | tuple[int, ...], value: Column) -> Column:
    """The index of the bin holding ``value`` (−1 below the first edge), as a long.

    The number of edges at or below ``value``, less one, found by a balanced
    tree of comparisons (depth log2 of the edges): polars'
    ``search_sorted(side="right") - 1`` on the float64 edges.
    """
    from pyspark.sql import functions as f

    grid = [float(e) for e in edges]
    x = value.cast("double")

    def at_or_below(lo: int, hi: int) -> Column:
        # How many of the edges are <= x, knowing it is between lo and hi.
        if lo == hi:
            return long_literal(lo - 1)
        mid = (lo + hi) // 2
        return f.when(x >= f.lit(grid[mid]), at_or_below(mid + 1, hi)).otherwise(
            at_or_below(lo, mid)
        )

    return at_or_below(0, len(grid))


def _python_bin(edges: tuple[float, ...] | tuple[int, ...], value: float) -> int:
    """:func:`_bin` for one number known on the driver."""
    return bisect.bisect_right([float(e) for e in edges], float(value)) - 1


def _signed(column: str, spec: ContributionSpec) -> Column:
    """The signed value bucket of the column: ``±(bin of |x| + 1)``, 0 below the first edge."""
    from pyspark.sql import functions as f

    x = col(column).cast("double")
    magnitude = _bin(spec.value_edges, f.abs(x)) + 1
    return magnitude * f.when(x < 0, long_literal(-1)).otherwise(long_literal(1))


def _known(column: str) -> Column:
    """The column's value is neither null nor NaN."""
    from pyspark.sql import functions as f

    x = col(column).cast("double")
    return x.isNotNull() & ~f.isnan(x)


def _floor_share(count: Column, scale: int, total: Column) -> Column:
    """``floor(W·count / total)`` in exact integer arithmetic (both non-negative)."""
    from pyspark.sql import functions as f

    return f.call_function("div", count.cast("long") * long_literal(scale), total.cast("long"))


def _piece(table: DataFrame, index: int, bin_: Column, weight: Column) -> DataFrame:
    """One histogram's (bin, weight) rows, tagged with its index in the collect."""
    from pyspark.sql import functions as f

    return table.select(
        f.lit(index).alias(_PIECE),
        bin_.cast("long").alias(_BIN),
        weight.cast("long").alias(_WEIGHT),
    )


def _unit_pieces(frame: DataFrame, spec: ContributionSpec, by: list[str]) -> list[DataFrame]:
    """The histograms' per-bin weights (lazy) when each unit has a column ``_UNIT``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    unit = Window.partitionBy(col(_UNIT))
    cells = frame.groupBy(col(_UNIT), *(col(c) for c in by)).agg(f.count(f.lit(1)).alias(_ROWS))
    cells = cells.withColumn(_CELLS, f.count(f.lit(1)).over(unit))
    pieces = []
    if spec.group_edges:
        units = cells.groupBy(col(_UNIT)).agg(f.count(f.lit(1)).alias(_CELLS))
        per_bin = units.groupBy(_bin(spec.group_edges, col(_CELLS)).alias(_BIN)).agg(
            f.count(f.lit(1)).alias(_WEIGHT)
        )
        pieces.append(_piece(per_bin, 0, col(_BIN), col(_WEIGHT)))
    if spec.row_edges:
        per_unit = cells.groupBy(col(_UNIT), _bin(spec.row_edges, col(_ROWS)).alias(_BIN)).agg(
            f.count(f.lit(1)).alias(_ROWS), f.first(col(_CELLS)).alias(_CELLS)
        )
        weight = _floor_share(col(_ROWS), spec.scale, col(_CELLS))
        per_bin = per_unit.groupBy(col(_BIN)).agg(f.sum(weight).alias(_WEIGHT))
        pieces.append(_piece(per_bin, 1, col(_BIN), col(_WEIGHT)))
    for i, column in enumerate(spec.value_columns):
        known = frame.filter(_known(column))
        per_unit = known.groupBy(col(_UNIT), _signed(column, spec).alias(_BIN)).agg(
            f.count(f.lit(1)).alias(_ROWS)
        )
        per_unit = per_unit.withColumn(_TOTAL, f.sum(col(_ROWS)).over(unit))
        weight = _floor_share(col(_ROWS), spec.scale, col(_TOTAL))
        per_bin = per_unit.groupBy(col(_BIN)).agg(f.sum(weight).alias(_WEIGHT))
        pieces.append(_piece(per_bin, 2 + i, col(_BIN), col(_WEIGHT)))
    return pieces


def _row_pieces(frame: DataFrame, spec: ContributionSpec) -> list[DataFrame]:
    """The histograms' per-bin weights (lazy) when each row is its own unit.

    Every unit has one cell (``g = 1``) of one row (``n = 1``) and at most one
    value per column, which takes all of its weight ``W``.
    """
    from pyspark.sql import functions as f

    rows = f.count(f.lit(1))
    pieces = []
    if spec.group_edges:
        one = long_literal(_python_bin(spec.group_edges, 1))
        pieces.append(_piece(frame.agg(rows.alias(_WEIGHT)), 0, one, col(_WEIGHT)))
    if spec.row_edges:
        one = long_literal(_python_bin(spec.row_edges, 1))
        weight = col(_WEIGHT) * long_literal(spec.scale)
        pieces.append(_piece(frame.agg(rows.alias(_WEIGHT)), 1, one, weight))
    for i, column in enumerate(spec.value_columns):
        per_bin = (
            frame.filter(_known(column))
            .groupBy(_signed(column, spec).alias(_BIN))
            .agg(rows.alias(_WEIGHT))
        )
        weight = col(_WEIGHT) * long_literal(spec.scale)
        pieces.append(_piece(per_bin, 2 + i, col(_BIN), weight))
    return pieces


def _dense(found: pl.DataFrame, piece: int, size: int, offset: int = 0) -> np.ndarray:
    """One histogram's collected per-bin weights as a dense array (as the polars engine's)."""
    out = np.zeros(size, dtype=np.int64)
    part = found.filter(pl.col(_PIECE) == piece)
    index = part[_BIN].to_numpy().astype(np.int64) + offset
    np.add.at(out, index, part[_WEIGHT].to_numpy().astype(np.int64))
    return out


def spark_contributions(frame: DataFrame, spec: ContributionSpec, by: list[str]) -> Contributions:
    """The histograms of :mod:`privframe.engines.contributions` over a Spark ``frame``.

    ``frame`` holds the rows a release would aggregate, as for
    :func:`~privframe.engines.contributions.contribution_tables`: the unit
    column (unless ``spec.rows.unit`` is None), the columns ``by`` that
    identify a row's group and the value columns, one row per input row that
    reaches a public key, rows without a unit already dropped. One Spark job
    collects the non-empty bins of every histogram; no row or per-unit
    summary leaves the cluster.

    Example:
        >>> from privframe.engines.spark.contributions import spark_contributions
        >>> spark_contributions(keyed_rows, spec, ["__key"]).groups  # doctest: +SKIP
        array([120,  31,   4])
    """
    unit = spec.rows.unit
    if unit is None:
        pieces = _row_pieces(frame, spec)
    else:
        keep = [c for c in dict.fromkeys((*by, *spec.value_columns)) if c != unit]
        frame = frame.select(col(unit).alias(_UNIT), *(col(c) for c in keep))
        pieces = _unit_pieces(frame, spec, by)
    size, offset = signed_buckets(spec.value_edges), len(spec.value_edges)
    if pieces:
        union = functools.reduce(lambda a, b: a.unionByName(b), pieces)
        found = pl.from_arrow(union.toArrow())
        assert isinstance(found, pl.DataFrame)
    else:
        found = pl.DataFrame(
            {_PIECE: [], _BIN: [], _WEIGHT: []},
            schema={_PIECE: pl.Int32, _BIN: pl.Int64, _WEIGHT: pl.Int64},
        )
    return Contributions(
        groups=_dense(found, 0, len(spec.group_edges)),
        rows=_dense(found, 1, len(spec.row_edges)),
        values={c: _dense(found, 2 + i, size, offset) for i, c in enumerate(spec.value_columns)},
    )
