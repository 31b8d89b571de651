"""The polars engine: filter, drop non-public keys, bound contributions, aggregate exactly.

The bounding algorithm and its conventions are shared with the Spark engine
(:mod:`privframe.engines.bounding`); this module computes it on polars
LazyFrames. Filters are row-wise by construction (the front end admits
nothing else), so they keep each unit's contribution local. Rows whose
privacy unit is null or NaN are dropped on every run: the Session refuses
such data when it opens, and dropping them here keeps the guarantee even if
a file is rewritten after that check.

Example:
    >>> import polars as pl
    >>> from privframe.engines.polars import PolarsEngine
    >>> from privframe.engines.spec import COUNT, AggregationSpec
    >>> df = pl.DataFrame({"u": [1, 1, 1, 2], "g": ["a", "a", "b", "a"]})
    >>> spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a", "b", "c"]}),
    ...                        None, 1, None, (), seed=7)
    >>> PolarsEngine(df.lazy()).aggregate(spec)[COUNT].to_list()
    [2, 1, 0]
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import polars as pl

from privframe.engines.bounding import (
    COUNTED,
    INDEX,
    KEY,
    PARTITION_SALT,
    ROW_SALT,
    ROWS,
    TIE_SALT,
    WEIGHT,
    Grouping,
    centred_bounds,
    finish,
    grouping,
)
from privframe.engines.contributions import Contributions, ContributionSpec, contribution_tables
from privframe.engines.inputs import mixed_engines
from privframe.engines.polars.cells import (
    cell_bits,
    kept_cells,
    packed_cells,
    packing,
    ranked_in_windows,
)
from privframe.engines.polars.spill import narrowest_integer, spill
from privframe.engines.spec import (
    COUNT,
    DISTINCT,
    AggregationSpec,
    HistogramSpec,
    ValueSpec,
    apply_steps,
)
from privframe.progress import steps

__all__ = ["PolarsEngine"]


def _row_units(v: ValueSpec) -> pl.Expr:
    # NaN becomes null, so a missing value stays null through the arithmetic.
    x = pl.col(v.column).cast(pl.Float64).fill_nan(None)
    if v.present:
        return x.is_not_null().cast(pl.Int64)
    if v.fill is not None:
        x = x.fill_null(v.fill)
    x = x.clip(v.lower, v.upper)
    if v.square_around is not None:
        x = (x - v.square_around) ** 2
    units = (x * 2.0**v.grid_exponent).round().cast(pl.Int64)
    return (units.clip(v.lower_units, v.upper_units) - v.centre_units).fill_null(0)


def _row_position(h: HistogramSpec) -> pl.Expr:
    """#{c < v} + #{c <= v} − 1 (2i on c_i, 2i − 1 between c_{i−1} and c_i); null if null/NaN."""
    x = pl.col(h.column).cast(pl.Float64).fill_nan(None).clip(h.grid[0], h.grid[-1])
    grid = pl.lit(pl.Series(h.grid, dtype=pl.Float64))
    below = grid.search_sorted(x, side="left").cast(pl.Int64)
    at_or_below = grid.search_sorted(x, side="right").cast(pl.Int64)
    return pl.when(x.is_not_null()).then(below + at_or_below - 1)


class PolarsEngine:
    """Runs an :class:`~privframe.engines.spec.AggregationSpec` on a polars LazyFrame.

    Args:
        frame: the private data.
        streaming: collect with polars' streaming engine (for files and
            larger-than-memory inputs).
        partitions: split the privacy units into this many parts by a keyed
            hash and aggregate one part at a time, adding the per-key results.
            Each unit's rows all fall in one part, so bounding is unchanged;
            the per-(unit, key) table, the largest thing held in memory, shrinks
            by the factor. The input is read once and the parts held in memory
            or spilled to disk (:meth:`_by_partition`).
        tables: the session's private tables by name, for queries that start
            from one of them or join them (:class:`~privframe.engines.spec.PrivateJoin`).
    """

    def __init__(
        self,
        frame: pl.LazyFrame,
        *,
        streaming: bool = False,
        partitions: int = 1,
        tables: Mapping[str, pl.LazyFrame] | None = None,
    ) -> None:
        self._frame = frame
        self._streaming = streaming
        self._partitions = partitions
        self._tables = dict(tables or {})

    def with_tables(self, tables: Mapping[str, object]) -> PolarsEngine:
        """This engine, able to read the private ``tables`` (other polars engines) by name.

        Raises:
            InvalidArgumentError: a table is on another engine.

        Example:
            >>> import polars as pl
            >>> from privframe.engines.polars import PolarsEngine
            >>> other = PolarsEngine(pl.LazyFrame({"u": [1]}))
            >>> PolarsEngine(pl.LazyFrame({"u": [2]})).with_tables({"b": other}).tables
            ['b']
        """
        frames = {}
        for name, engine in tables.items():
            if not isinstance(engine, PolarsEngine):
                raise mixed_engines(name, engine, "polars")
            frames[name] = engine._frame
        return PolarsEngine(
            self._frame,
            streaming=self._streaming,
            partitions=self._partitions,
            tables={**self._tables, **frames},
        )

    @property
    def tables(self) -> list[str]:
        """The names of the private tables besides the first."""
        return list(self._tables)

    def _rows(self, spec: AggregationSpec) -> pl.LazyFrame:
        """The rows after the steps, from the spec's table."""
        frame = self._frame if spec.table is None else self._tables[spec.table]
        return apply_steps(frame, spec.steps, unit=spec.unit, tables=self._tables, seed=spec.seed)

    def aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        """Exact bounded aggregates, one row per public key, in key order.

        Without public keys but with ``group_by`` (private key selection), one
        row per observed non-null key, sorted by key, with ``DISTINCT`` units.
        """
        # The front end admits only row-wise filters that cannot fail on any value
        # (privframe.engines.expressions), so a row's fate depends on that row alone.
        keyed = grouping(spec)
        by = keyed.by
        frame = _keyed_rows(self._rows(spec), keyed)
        # Keep only what the aggregation reads, so no other column can collide with the
        # engine's working columns.
        unit = [spec.unit] if spec.unit is not None else []
        frame = frame.select(
            *unit,
            *by,
            *(_row_units(v).alias(v.name) for v in spec.values),
            *(_row_position(h).alias(h.name) for h in spec.histograms),
        )
        names = [v.name for v in spec.values]
        if spec.unit is None or self._partitions == 1:
            result, *histograms = self._collect(frame, spec, keyed, names)
        else:
            parts = self._by_partition(frame, spec, keyed, names)
            # Every unit is in exactly one part: the per-key totals are sums over parts.
            result, *histograms = (
                pl.concat(pieces).group_by(group).agg(pl.exclude(group).sum())
                for pieces, group in zip(
                    zip(*parts, strict=True),
                    [by, *([*by, h.name] for h in spec.histograms)],
                    strict=True,
                )
            )
        return finish(result, keyed, names, list(zip(spec.histograms, histograms, strict=True)))

    def _by_partition(
        self, frame: pl.LazyFrame, spec: AggregationSpec, keyed: Grouping, names: list[str]
    ) -> list[list[pl.DataFrame]]:
        """Each unit partition's results, from one pass that spills the rows.

        The rows the aggregation reads (already keyed, scaled to grid units and
        cut to its columns) are sorted once, by a keyed hash of the unit, into
        partitions held in memory or written to disk
        (:mod:`privframe.engines.polars.spill`); then each partition is bounded
        in memory. Files live in a private temporary directory (``tempfile``:
        mode 0700, under ``TMPDIR``), removed when the release ends, whatever
        happens.
        """
        assert spec.unit is not None
        bucket = pl.col(spec.unit).hash(spec.seed ^ PARTITION_SALT) % self._partitions
        # Fewer bytes a row, less to write and hold: the columns whose bounds the spec
        # proves are cast to the narrowest type holding them, an integer unit to the
        # narrowest holding the values read so far (spill's ``narrow``).
        schema = frame.collect_schema()
        narrow = _narrow_types(spec, keyed)
        spilled_rows = frame.with_columns(pl.col(c).cast(t) for c, t in narrow.items())
        units = [spec.unit] if schema[spec.unit].is_integer() else []
        wide = pl.Schema({c: schema[c] for c in narrow})
        with tempfile.TemporaryDirectory(prefix="privframe-spill-") as directory:
            spilled = spill(spilled_rows, bucket, self._partitions, Path(directory), narrow=units)
            results = []
            with steps("partitions", self._partitions) as advance:
                for rows in spilled:
                    part = frame.head(0) if rows is None else rows.cast(wide)
                    results.append(self._collect(part, spec, keyed, names, streaming=False))
                    advance()
        return results

    def contributions(self, spec: ContributionSpec) -> Contributions:
        """Exact per-unit contribution histograms of the rows a release would aggregate.

        For ``query.tune``; see :mod:`privframe.engines.contributions`.
        """
        rows, keyed = spec.rows, grouping(spec.rows)
        frame = _keyed_rows(self._rows(rows), keyed)
        if rows.unit is not None:
            frame = _known_units(frame, rows.unit)
        unit = [rows.unit] if rows.unit is not None else []
        frame = frame.select(*unit, *keyed.by, *spec.value_columns)
        return contribution_tables(frame, spec, keyed.by, streaming=self._streaming)

    def _collect(
        self,
        frame: pl.LazyFrame,
        spec: AggregationSpec,
        keyed: Grouping,
        names: list[str],
        *,
        streaming: bool | None = None,
    ) -> list[pl.DataFrame]:
        """Per-key aggregates, then per-(key, position) counts per histogram, for these rows.

        ``streaming`` (default: the engine's) collects with polars' streaming engine.
        """
        stream = self._streaming if streaming is None else streaming
        engine: Literal["auto", "streaming"] = "streaming" if stream else "auto"
        if spec.unit is None:
            return pl.collect_all(_per_key(frame, spec, keyed, names, None), engine=engine)
        frame = _known_units(frame, spec.unit)
        schema = frame.collect_schema()
        bits = cell_bits(schema, spec, keyed)
        if bits is not None:
            # The keyed rows, materialized, group faster than the lazy plan that makes them.
            rows = frame.collect(engine=engine)
            packed = packing(rows, spec.unit, bits)
            if packed is not None:
                cells = packed_cells(rows, packed, names)
                kept = kept_cells(cells, packed, spec.max_groups, spec.seed)
                partial = _bounded(kept, spec, keyed.by)
                return pl.collect_all(_per_key(rows.lazy(), spec, keyed, names, partial))
            frame = rows.lazy()
        partial = frame.group_by([spec.unit, *keyed.by]).agg(
            pl.len().cast(pl.Int64).alias(ROWS), *(pl.col(n).sum() for n in names)
        )
        if spec.max_groups is not None:
            partial = ranked_in_windows(partial, spec.unit, keyed.by, spec.max_groups, spec.seed)
        partial = _bounded(partial, spec, keyed.by)
        return pl.collect_all(_per_key(frame, spec, keyed, names, partial), engine=engine)


def _per_key(
    frame: pl.LazyFrame,
    spec: AggregationSpec,
    keyed: Grouping,
    names: list[str],
    partial: pl.LazyFrame | None,
) -> list[pl.LazyFrame]:
    """The plans of :meth:`PolarsEngine._collect`'s results, from the bounded partials if any."""
    by = keyed.by
    if spec.unit is None or partial is None:
        per_key = frame.group_by(by).agg(
            pl.len().cast(pl.Int64).alias(COUNT),
            pl.len().cast(pl.Int64).alias(DISTINCT),
            *(pl.col(n).sum() for n in names),
        )
        rows = frame
    else:
        units = pl.len()
        if keyed.kind == "mixed":
            lowest = pl.col(KEY).min().over(spec.unit, *keyed.selected)
            partial = partial.with_columns((pl.col(KEY) == lowest).alias(COUNTED))
            units = pl.col(COUNTED).sum()
        per_key = partial.group_by(by).agg(
            pl.col(WEIGHT).sum().alias(COUNT),
            units.cast(pl.Int64).alias(DISTINCT),
            *(pl.col(nm).sum() for nm in names),
        )
        rows = _sampled_rows(frame, partial, spec.unit, by, spec)
    counts = [
        rows.filter(pl.col(h.name).is_not_null()).group_by(*by, h.name).agg(pl.len().cast(pl.Int64))
        for h in spec.histograms
    ]
    return [per_key, *counts]


def _bounded(partial: pl.LazyFrame, spec: AggregationSpec, by: list[str]) -> pl.LazyFrame:
    """The kept per-(unit, key) partials with bounded weight w and scaled, clipped sums."""
    assert spec.unit is not None
    partial = partial.with_columns(
        pl.min_horizontal(pl.col(ROWS), pl.lit(spec.max_rows_per_group, pl.Int64)).alias(WEIGHT)
    )
    if spec.max_rows is not None:
        partial = _cap_rows(partial, spec.unit, by, spec.max_rows, spec.seed)
    w, n = pl.col(WEIGHT), pl.col(ROWS)
    scaled = []
    for v in spec.values:
        s = pl.col(v.name)
        shrunk = (s.cast(pl.Float64) * w / n).round().cast(pl.Int64)
        lo, hi = centred_bounds(v)
        scaled.append(pl.when(w < n).then(shrunk).otherwise(s).clip(w * lo, w * hi).alias(v.name))
    return partial.with_columns(scaled)


def _narrow_types(spec: AggregationSpec, keyed: Grouping) -> dict[str, pl.DataType]:
    """Types of at most 32 bits that hold every value the spec lets a column take.

    A key position is in [0, keys); a value (:func:`_row_units`) is clipped to
    its centred bounds, or 0 where missing ([0, 1] for a count of values); a
    histogram position is in [-1, 2N - 1] whatever the grid
    (:func:`_row_position`: two counts of at most N candidates each, less 1).
    A column whose bounds need 64 bits keeps its type.
    """
    bounds = {} if keyed.observed else {KEY: (0, keyed.keys.height - 1)}
    for v in spec.values:
        low, high = (0, 1) if v.present else centred_bounds(v)
        bounds[v.name] = (min(low, 0), max(high, 0))
    for h in spec.histograms:
        bounds[h.name] = (-1, 2 * len(h.grid) - 1)
    narrow = {c: narrowest_integer(low, high) for c, (low, high) in bounds.items()}
    return {c: t for c, t in narrow.items() if t is not None}


def _keyed_rows(frame: pl.LazyFrame, keyed: Grouping) -> pl.LazyFrame:
    """The rows that reach a key, with the columns ``keyed.by`` groups them by."""
    if keyed.kind == "global":
        return frame.with_columns(pl.lit(0, pl.UInt32).alias(KEY))
    if not keyed.observed:
        # Each row gets its key's index, an integer, which makes the per-(unit, key)
        # grouping much cheaper than grouping by the key values.
        frame = _key_index(frame, keyed.keys)
    if keyed.selected:
        frame = frame.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in keyed.selected))
    return frame


def _key_index(frame: pl.LazyFrame, keys: pl.DataFrame) -> pl.LazyFrame:
    """Rows whose key is public, with the key's position in ``keys`` as ``KEY``.

    Every cast is non-strict: a value the key type cannot hold matches no key
    (and a strict cast's error would quote the private value). One string key
    column goes through an enum of the keys, whose codes are the positions:
    much cheaper than a join.
    """
    columns = list(keys.columns)
    if (
        len(columns) == 1
        and keys.schema[columns[0]] == pl.String
        and not keys[columns[0]].has_nulls()
    ):
        (column,) = columns
        code = (
            pl.col(column).cast(pl.String, strict=False).cast(pl.Enum(keys[column]), strict=False)
        )
        return frame.with_columns(code.to_physical().cast(pl.UInt32).alias(KEY)).filter(
            pl.col(KEY).is_not_null()
        )
    return frame.with_columns(pl.col(c).cast(keys.schema[c], strict=False) for c in columns).join(
        keys.with_row_index(KEY).lazy(), on=columns, how="inner"
    )


def _known_units(frame: pl.LazyFrame, unit: str) -> pl.LazyFrame:
    """Drop rows whose unit is null or NaN: they must never be merged into one unit."""
    column = pl.col(unit)
    if frame.collect_schema()[unit].is_float():
        return frame.filter(column.is_not_null() & column.is_not_nan())
    return frame.filter(column.is_not_null())


def _sampled_rows(
    frame: pl.LazyFrame, partial: pl.LazyFrame, unit: str, by: list[str], spec: AggregationSpec
) -> pl.LazyFrame:
    """Each unit's rows in each kept key, cut to a random subset of its weight w.

    The rows ranking lowest by a keyed hash of (unit, key, row number) stay: a
    uniformly random subset given a fresh seed. The row number is taken within
    the (unit, key) cell, ordered by the histogram positions, so the subset
    depends on the unit's own rows and the seed only (docs/sensitivity.md,
    Lemma 1), never on other units' rows or on where the rows sit in the
    input. Rows that tie in every position are interchangeable: whichever of
    them is kept, the histograms are the same.
    """
    cell = [unit, *by]
    number = pl.int_range(pl.len(), dtype=pl.Int64).over(
        cell, order_by=[h.name for h in spec.histograms]
    )
    rank = pl.struct(*cell, INDEX).hash(spec.seed ^ ROW_SALT).rank("ordinal").over(cell)
    return (
        frame.join(partial.select(*cell, WEIGHT), on=cell, how="inner")
        .with_columns(number.alias(INDEX))
        .filter(rank <= pl.col(WEIGHT))
    )


def _cap_rows(partial: pl.LazyFrame, unit: str, by: list[str], cap: int, seed: int) -> pl.LazyFrame:
    """Scale a unit's weights w_g (total T > M) to integers summing to exactly M.

    Largest remainders: each group keeps floor(w_g·M/T), and the M − Σ floor
    rows left go one each to the groups with the largest remainders (ties by a
    keyed hash). Every new weight stays within [0, w_g] and depends only on the
    unit's own groups and the seed.
    """
    total, base, rem, deficit, order = "__total", "__base", "__rem", "__deficit", "__order"
    w = pl.col(WEIGHT)
    tie = pl.struct(unit, *by).hash(seed ^ TIE_SALT).cast(pl.Float64) * 2.0**-64
    return (
        partial.with_columns(w.sum().over(unit).alias(total))
        .with_columns((w * cap // pl.col(total)).alias(base), (w * cap % pl.col(total)).alias(rem))
        .with_columns(
            (cap - pl.col(base).sum().over(unit)).alias(deficit),
            (pl.col(rem).cast(pl.Float64) + tie)
            .rank("ordinal", descending=True)
            .over(unit)
            .alias(order),
        )
        .with_columns(
            pl.when(pl.col(total) > cap)
            .then(pl.col(base) + (pl.col(order) <= pl.col(deficit)).cast(pl.Int64))
            .otherwise(w)
            .alias(WEIGHT)
        )
        .drop(total, base, rem, deficit, order)
    )
