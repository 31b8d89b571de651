"""The Spark engine: the polars engine's bounded aggregation, computed on a Spark cluster.

:class:`SparkEngine` runs an :class:`~privframe.engines.spec.AggregationSpec`
on a ``pyspark.sql.DataFrame`` and returns exactly what
:class:`~privframe.engines.polars.PolarsEngine` returns: one row per public key
(in key order, absent keys with zeros), or per observed key (sorted) in
private key selection, or per observed combination of the selected columns
and public key (:func:`~privframe.engines.bounding.every_public_key`), with
Int64 counts and Int64 sums in grid units. Only those per-key aggregates are
collected to the driver (through Arrow); the rows never leave the cluster.

The frame may be classic or a Spark Connect DataFrame (``sc://`` sessions):
the engine uses the DataFrame API only (no RDD, SparkContext or JVM handle),
which both implement, so a Connect client sends plans and receives the same
per-key aggregates.

The arithmetic is the polars engine's, step for step (``docs/sensitivity.md``
§2): row values are filled, clipped, snapped to the grid with the same
round-half-to-even (Spark ``rint``, as polars' ``Expr.round()``) and clipped
again; per (unit, key) the rows ``n``, the weight ``w = min(n, m)``, the
largest-remainder cap at ``M`` and the scaled sums ``round(s·w/n)`` are
computed with the same float operations. Choices that polars makes with its
own keyed hash (which ``k`` groups a unit keeps, remainder ties, which rows
go into a histogram) are made here with Spark's ``xxhash64`` keyed by the
release's seed: the same distribution (uniformly random given a fresh seed),
not the same draw. So the result equals the polars engine's whenever no
such choice binds, and obeys the same bounds when one does.

The steps before aggregation run on Spark too, from the spec's table (the
engine's own frame, or one of the session's other private tables given by
:meth:`SparkEngine.with_tables`): filters, derived columns and public joins
(:mod:`privframe.engines.spark.rows`), and the steps over units, private
joins, flat maps and per-unit values (:mod:`privframe.engines.spark.units`),
with the polars engine's semantics. Their truncations choose each unit's rows
with a keyed ``xxhash64`` as well: the same distribution, not the same rows.

pyspark (4.0 or later) is imported only when the engine runs.

Example:
    >>> import polars as pl
    >>> from privframe.engines.spark.engine import SparkEngine
    >>> from privframe.engines.spec import COUNT, AggregationSpec
    >>> spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a", "b", "c"]}),
    ...                        None, 1, None, (), seed=7)
    >>> from pyspark.sql import SparkSession  # doctest: +SKIP
    >>> spark = SparkSession.builder.master("local[1]").getOrCreate()  # doctest: +SKIP
    >>> frame = spark.createDataFrame([(1, "a"), (1, "a"), (1, "b"), (2, "a")],
    ...                               "u long, g string")  # doctest: +SKIP
    >>> SparkEngine(frame).aggregate(spec)[COUNT].to_list()  # doctest: +SKIP
    [2, 1, 0]
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING

import polars as pl

from privframe.engines.bounding import COUNTED, KEY, WEIGHT, Grouping, finish, grouping
from privframe.engines.contributions import Contributions, ContributionSpec
from privframe.engines.inputs import mixed_engines
from privframe.engines.spark._columns import col, long_literal
from privframe.engines.spark.bounding import key_index, known_units, partials, sampled_rows
from privframe.engines.spark.contributions import spark_contributions
from privframe.engines.spark.frames import quiet_query_errors
from privframe.engines.spark.rows import apply_spark_steps, polars_schema, row_position, row_units
from privframe.engines.spec import COUNT, DISTINCT, AggregationSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SparkEngine"]

_HIST = "__hist"
_POS = "__pos"


def _to_polars(frame: DataFrame) -> pl.DataFrame:
    """Collect a small Spark DataFrame through Arrow."""
    out = pl.from_arrow(frame.toArrow())
    assert isinstance(out, pl.DataFrame)
    return out


class SparkEngine:
    """Runs an :class:`~privframe.engines.spec.AggregationSpec` on a Spark DataFrame.

    Everything stays lazy in Spark until one collect of the per-key result
    (and the per-(key, position) histogram counts, in the same Spark job).

    Args:
        frame: the private data, a ``pyspark.sql.DataFrame`` (classic or Spark Connect).
        schema: the polars types of its columns, as queries were checked
            against (each column must hold the Spark twin of its type,
            :func:`~privframe.engines.spark.expressions.spark_type`); by
            default read from the Spark schema.

    Other private tables of the session come with :meth:`with_tables`.

    Example:
        >>> from privframe.engines.spark.engine import SparkEngine
        >>> engine = SparkEngine(spark.table("sales.orders"))  # doctest: +SKIP
    """

    def __init__(
        self, frame: DataFrame, *, schema: Mapping[str, pl.DataType] | pl.Schema | None = None
    ) -> None:
        self._frame = frame
        self._schema = pl.Schema(schema) if schema is not None else None
        self._tables: dict[str, tuple[DataFrame, pl.Schema]] = {}

    def with_tables(self, tables: Mapping[str, object]) -> SparkEngine:
        """This engine, able to read the private ``tables`` (other Spark engines) by name.

        For queries that start from one of them (``AggregationSpec.table``) or
        join them (:class:`~privframe.engines.spec.PrivateJoin`). The frames
        should belong to the same Spark session, which joins them.

        Raises:
            InvalidArgumentError: a table is on another engine.

        Example:
            >>> from privframe.engines.spark.engine import SparkEngine
            >>> visits = SparkEngine(spark.table("clinic.visits"))  # doctest: +SKIP
            >>> drugs = SparkEngine(spark.table("clinic.drugs"))  # doctest: +SKIP
            >>> visits.with_tables({"drugs": drugs}).tables  # doctest: +SKIP
            ['drugs']
        """
        frames = {}
        for name, engine in tables.items():
            if not isinstance(engine, SparkEngine):
                raise mixed_engines(name, engine, "Spark")
            frames[name] = (engine._frame, engine._frame_schema())
        joined = SparkEngine(self._frame, schema=self._schema)
        joined._tables = {**self._tables, **frames}
        return joined

    @property
    def tables(self) -> list[str]:
        """The names of the private tables besides the first."""
        return list(self._tables)

    def _frame_schema(self) -> pl.Schema:
        """The polars schema queries are checked against: given, or read from Spark's."""
        return self._schema if self._schema is not None else polars_schema(self._frame)

    def aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        """Exact bounded aggregates, one row per public key, in key order.

        Without public keys but with ``group_by`` (private key selection), one
        row per observed non-null key, sorted by key, with ``DISTINCT`` units.
        The same columns and dtypes as :meth:`PolarsEngine.aggregate
        <privframe.engines.polars.PolarsEngine.aggregate>`.

        A failed job's error is raised as Spark gives it (its caller withholds
        the message), but pyspark's log of it is silenced (:func:`quiet_query_errors`).
        """
        with quiet_query_errors():
            return self._aggregate(spec)

    def contributions(self, spec: ContributionSpec) -> Contributions:
        """Exact per-unit contribution histograms of the rows a release would aggregate.

        For ``query.tune``: the same histograms as :meth:`PolarsEngine.contributions
        <privframe.engines.polars.PolarsEngine.contributions>`, bin for bin, over
        the rows :meth:`aggregate` would read (the same steps and keys), computed
        on the cluster; only the histograms' bins are collected
        (:func:`~privframe.engines.spark.contributions.spark_contributions`).

        Example:
            >>> from privframe.engines.spark.engine import SparkEngine
            >>> SparkEngine(frame).contributions(spec).rows  # doctest: +SKIP
            array([131072,  65536,      0])
        """
        with quiet_query_errors():
            rows = spec.rows
            frame, keyed = self._keyed(rows)
            if rows.unit is not None:
                frame = known_units(frame, rows.unit)
            return spark_contributions(frame, spec, keyed.by)

    def _keyed(self, spec: AggregationSpec) -> tuple[DataFrame, Grouping]:
        """The rows that reach a key after the spec's steps, and how they are keyed."""
        if spec.table is None:
            frame, schema = self._frame, self._frame_schema()
        else:
            frame, schema = self._tables[spec.table]
        frame, schema = apply_spark_steps(
            frame, schema, spec.steps, unit=spec.unit, tables=self._tables, seed=spec.seed
        )
        keyed = grouping(spec)
        return _keyed_rows(frame, schema, keyed), keyed

    def _aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        frame, keyed = self._keyed(spec)
        # Keep only what the aggregation reads, so no other column can collide with the
        # engine's working columns.
        unit = [spec.unit] if spec.unit is not None else []
        frame = frame.select(
            *(col(c) for c in (*unit, *keyed.by)),
            *(row_units(v).alias(v.name) for v in spec.values),
            *(row_position(h).alias(h.name) for h in spec.histograms),
        )
        names = [v.name for v in spec.values]
        collected = _collect(frame, spec, keyed, names)
        if not keyed.observed:
            index = keyed.keys.with_row_index(KEY).schema[KEY]
            collected = collected.with_columns(pl.col(KEY).cast(index))
        collected = collected.with_columns(pl.col(COUNT, DISTINCT, *names).cast(pl.Int64))
        result = collected.filter(pl.col(_HIST).is_null())
        result = result.select(*keyed.by, COUNT, DISTINCT, *names)
        histograms = [
            (
                h,
                collected.filter(pl.col(_HIST) == i)
                .select(*keyed.by, pl.col(_POS).alias(h.name), pl.col(COUNT).alias("len"))
                .sort(h.name),  # each key's list in position order
            )
            for i, h in enumerate(spec.histograms)
        ]
        return finish(result, keyed, names, histograms)


def _keyed_rows(frame: DataFrame, schema: pl.Schema, keyed: Grouping) -> DataFrame:
    """The rows that reach a key, with the columns ``keyed.by`` groups them by."""
    if keyed.kind == "global":
        return frame.withColumn(KEY, long_literal(0))
    if not keyed.observed:
        frame = key_index(frame, schema, keyed.keys)
    if keyed.selected:
        present = (col(c).isNotNull() for c in keyed.selected)
        frame = frame.filter(functools.reduce(operator.and_, present))
    return frame


def _per_key(
    frame: DataFrame, spec: AggregationSpec, keyed: Grouping, names: list[str]
) -> tuple[DataFrame, DataFrame]:
    """The per-key aggregates (lazy), and the bounded rows the histograms count."""
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    by = keyed.by
    if spec.unit is None:
        per_key = frame.groupBy(*(col(c) for c in by)).agg(
            f.count(f.lit(1)).alias(COUNT),
            f.count(f.lit(1)).alias(DISTINCT),
            *(f.sum(col(n)).alias(n) for n in names),
        )
        return per_key, frame
    frame = known_units(frame, spec.unit)
    partial = partials(frame, spec, by, names)
    units = f.count(f.lit(1))
    if keyed.kind == "mixed":
        # Each unit counted once per combination, at its lowest key there (as polars).
        combination = Window.partitionBy(*(col(c) for c in (spec.unit, *keyed.selected)))
        counted = col(KEY) == f.min(col(KEY)).over(combination)
        partial = partial.withColumn(COUNTED, counted.cast("long"))
        units = f.sum(col(COUNTED))
    per_key = partial.groupBy(*(col(c) for c in by)).agg(
        f.sum(col(WEIGHT)).alias(COUNT),
        units.alias(DISTINCT),
        *(f.sum(col(n)).alias(n) for n in names),
    )
    return per_key, sampled_rows(frame, partial, spec, by) if spec.histograms else frame


def _collect(
    frame: DataFrame, spec: AggregationSpec, keyed: Grouping, names: list[str]
) -> pl.DataFrame:
    """One collect (one Spark job): the per-key rows and each histogram's (key, position) counts.

    The parts are told apart by ``_HIST``: null for the per-key rows, i for
    the counts of the i-th histogram.
    """
    from pyspark.sql import functions as f

    by = keyed.by
    per_key, rows = _per_key(frame, spec, keyed, names)
    null = f.lit(None).cast("long")
    parts = [
        per_key.select(
            *(col(c) for c in by),
            f.lit(None).cast("int").alias(_HIST),
            null.alias(_POS),
            col(COUNT).cast("long").alias(COUNT),
            col(DISTINCT).cast("long").alias(DISTINCT),
            *(col(n).cast("long").alias(n) for n in names),
        )
    ]
    for i, h in enumerate(spec.histograms):
        counts = (
            rows.filter(col(h.name).isNotNull())
            .groupBy(*(col(c) for c in (*by, h.name)))
            .agg(f.count(f.lit(1)).alias(COUNT))
        )
        parts.append(
            counts.select(
                *(col(c) for c in by),
                f.lit(i).alias(_HIST),
                col(h.name).cast("long").alias(_POS),
                col(COUNT),
                null.alias(DISTINCT),
                *(null.alias(n) for n in names),
            )
        )
    return _to_polars(functools.reduce(lambda a, b: a.unionByName(b), parts))
