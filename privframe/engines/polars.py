"""The polars engine: filter, drop non-public keys, bound contributions, aggregate exactly.

Contribution bounding works on each unit's per-group partial aggregates
instead of sampling rows, which is both cheaper and more accurate:

* A unit with ``n`` rows in a group contributes ``w = min(n, m)`` to the
  count, exactly what a random subset of ``m`` of its rows would; and
  ``round(s·w/n)`` to a sum whose row total is ``s``, the *expected* sum of
  a random ``m``-row subset, clipped to ``[w·lo, w·hi]`` so the bound holds
  exactly in grid units.
* With an overall cap ``M``, a unit whose weights add up to ``T > M`` has
  them rescaled to integers in ``[0, w]`` that add up to exactly ``M``
  (largest remainders, see :func:`_cap_rows`), and its sums are scaled the
  same way.
* A unit in more than ``k`` groups keeps the ``k`` whose keyed hash (with a
  fresh secret seed per release) ranks lowest: a uniformly random subset,
  chosen from the unit's own groups and fresh randomness only.

Every step touches one unit's rows at a time, so adding or removing a unit
changes the output only through that unit's bounded contribution. Filters
are row-wise by construction (the front end admits nothing else), so they
keep that locality. Rows whose privacy unit is null or NaN are dropped on
every run: the Session refuses such data when it opens, and dropping them
here keeps the guarantee even if a file is rewritten after that check (they
must never be merged into one unit).

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

import polars as pl

from privframe.engines.spec import (
    COUNT,
    DISTINCT,
    AggregationSpec,
    HistogramSpec,
    ValueSpec,
    apply_steps,
)

__all__ = ["PolarsEngine"]

_N = "__rows"
_W = "__weight"
_GLOBAL = "__all"
_INDEX = "__index"
_KEY = "__key"
_PART_SEED = 0x9E3779B97F4A7C15  # separates the partition hash from the other keyed hashes
_ROW_SEED = 0x2545F4914F6CDD1D  # separates the row choice's hash from the group choice's


def _row_units(v: ValueSpec) -> pl.Expr:
    x = pl.col(v.column).cast(pl.Float64)
    x = x.fill_nan(v.fill).fill_null(v.fill).clip(v.lower, v.upper)
    if v.square_around is not None:
        x = (x - v.square_around) ** 2
    units = (x * 2.0**v.grid_exponent).round().cast(pl.Int64)
    return units.clip(v.lower_units, v.upper_units) - v.centre_units


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
            by the factor, at the cost of one pass over the input per part.
    """

    def __init__(
        self, frame: pl.LazyFrame, *, streaming: bool = False, partitions: int = 1
    ) -> None:
        self._frame = frame
        self._streaming = streaming
        self._partitions = partitions

    def aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        """Exact bounded aggregates, one row per public key, in key order.

        Without public keys but with ``group_by`` (private key selection), one
        row per observed non-null key, sorted by key, with ``DISTINCT`` units.
        """
        frame = self._frame
        # The front end admits only row-wise filters that cannot fail on any value
        # (privframe.engines.expressions), so a row's fate depends on that row alone.
        frame = apply_steps(frame, spec.steps)
        observed = spec.keys is None and bool(spec.group_by)
        keys = spec.keys if spec.keys is not None else pl.DataFrame({_GLOBAL: [0]})
        if observed:
            by = list(spec.group_by)
            frame = frame.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in by))
        else:
            # Public keys: each row gets its key's index, an integer, which makes the
            # per-(unit, key) grouping much cheaper than grouping by the key values.
            by = [_KEY]
            if spec.keys is None:
                frame = frame.with_columns(pl.lit(0, pl.UInt32).alias(_KEY))
            else:
                frame = _key_index(frame, keys)
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
            result, *histograms = self._collect(frame, spec, by, names)
        else:
            bucket = pl.col(spec.unit).hash(spec.seed ^ _PART_SEED) % self._partitions
            parts = [
                self._collect(frame.filter(bucket == b), spec, by, names)
                for b in range(self._partitions)
            ]
            # Every unit is in exactly one part: the per-key totals are sums over parts.
            result, *histograms = (
                pl.concat(pieces).group_by(group).agg(pl.exclude(group).sum())
                for pieces, group in zip(
                    zip(*parts, strict=True),
                    [by, *([*by, h.name] for h in spec.histograms)],
                    strict=True,
                )
            )
        out = in_key_order(result, keys, by, names, observed=observed)
        for h, found in zip(spec.histograms, histograms, strict=True):
            out = _attach(out, by, h, found)
        return out.drop(_KEY, _GLOBAL, strict=False)

    def _collect(
        self, frame: pl.LazyFrame, spec: AggregationSpec, by: list[str], names: list[str]
    ) -> list[pl.DataFrame]:
        """Per-key aggregates, then per-(key, position) counts per histogram, for these rows."""
        if spec.unit is None:
            per_key = frame.group_by(by).agg(
                pl.len().cast(pl.Int64).alias(COUNT),
                pl.len().cast(pl.Int64).alias(DISTINCT),
                *(pl.col(n).sum() for n in names),
            )
            rows = frame
        else:
            frame = _known_units(frame, spec.unit)
            partial = self._partials(frame, spec, by, names)
            per_key = partial.group_by(by).agg(
                pl.col(_W).sum().alias(COUNT),
                pl.len().cast(pl.Int64).alias(DISTINCT),
                *(pl.col(nm).sum() for nm in names),
            )
            rows = _sampled_rows(frame, partial, spec.unit, by, spec)
        counts = [
            rows.filter(pl.col(h.name).is_not_null())
            .group_by(*by, h.name)
            .agg(pl.len().cast(pl.Int64))
            for h in spec.histograms
        ]
        return pl.collect_all([per_key, *counts], engine="streaming" if self._streaming else "auto")

    @staticmethod
    def _partials(
        frame: pl.LazyFrame, spec: AggregationSpec, by: list[str], names: list[str]
    ) -> pl.LazyFrame:
        """Per (unit, key): rows n, bounded weight w, and each value's scaled, clipped sum."""
        unit = spec.unit
        assert unit is not None
        partial = frame.group_by([unit, *by]).agg(
            pl.len().cast(pl.Int64).alias(_N), *(pl.col(n).sum() for n in names)
        )
        if spec.max_groups is not None:
            rank = pl.struct(unit, *by).hash(spec.seed).rank("ordinal").over(unit)
            partial = partial.filter(rank <= spec.max_groups)
        partial = partial.with_columns(
            pl.min_horizontal(pl.col(_N), pl.lit(spec.max_rows_per_group, pl.Int64)).alias(_W)
        )
        if spec.max_rows is not None:
            partial = _cap_rows(partial, unit, by, spec.max_rows, spec.seed)
        w, n = pl.col(_W), pl.col(_N)
        scaled = []
        for v in spec.values:
            s = pl.col(v.name)
            shrunk = (s.cast(pl.Float64) * w / n).round().cast(pl.Int64)
            lo, hi = v.lower_units - v.centre_units, v.upper_units - v.centre_units
            scaled.append(
                pl.when(w < n).then(shrunk).otherwise(s).clip(w * lo, w * hi).alias(v.name)
            )
        return partial.with_columns(scaled)


def _key_index(frame: pl.LazyFrame, keys: pl.DataFrame) -> pl.LazyFrame:
    """Rows whose key is public, with the key's position in ``keys`` as ``_KEY``.

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
        return frame.with_columns(code.to_physical().cast(pl.UInt32).alias(_KEY)).filter(
            pl.col(_KEY).is_not_null()
        )
    return frame.with_columns(pl.col(c).cast(keys.schema[c], strict=False) for c in columns).join(
        keys.with_row_index(_KEY).lazy(), on=columns, how="inner"
    )


def in_key_order(
    result: pl.DataFrame, keys: pl.DataFrame, by: list[str], names: list[str], *, observed: bool
) -> pl.DataFrame:
    """Per-key results as an engine returns them: observed keys sorted, or in public-key order.

    With public keys, ``result`` is keyed by the key's index (``_KEY``): every
    public key gets a row, zeros where no bounded row reached it.
    """
    if observed:
        return result.sort(by)
    return (
        keys.with_row_index(_KEY)
        .join(result, on=_KEY, how="left")
        .sort(_KEY)
        .with_columns(pl.col(COUNT, DISTINCT, *names).fill_null(0))
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
    rank = pl.struct(*cell, _INDEX).hash(spec.seed ^ _ROW_SEED).rank("ordinal").over(cell)
    return (
        frame.join(partial.select(*cell, _W), on=cell, how="inner")
        .with_columns(number.alias(_INDEX))
        .filter(rank <= pl.col(_W))
    )


def _attach(
    out: pl.DataFrame, by: list[str], h: HistogramSpec, found: pl.DataFrame
) -> pl.DataFrame:
    """Add each key's nonzero (position, count) pairs as a list column, empty where none.

    Sparse on purpose: a dense keys × positions array would take memory in
    proportion to the number of *observed* keys, a private number, before
    anything is charged.
    """
    pairs = found.group_by(by).agg(
        pl.struct(pl.col(h.name).alias("position"), pl.col("len").alias("count")).alias(h.name)
    )
    joined = out.with_row_index("__row").join(pairs, on=by, how="left").sort("__row")
    return joined.drop("__row").with_columns(pl.col(h.name).fill_null([]))


def _cap_rows(partial: pl.LazyFrame, unit: str, by: list[str], cap: int, seed: int) -> pl.LazyFrame:
    """Scale a unit's weights w_g (total T > M) to integers summing to exactly M.

    Largest remainders: each group keeps floor(w_g·M/T), and the M − Σ floor
    rows left go one each to the groups with the largest remainders (ties by a
    keyed hash). Every new weight stays within [0, w_g] and depends only on the
    unit's own groups and the seed.
    """
    total, base, rem, deficit, order = "__total", "__base", "__rem", "__deficit", "__order"
    w = pl.col(_W)
    tie = pl.struct(unit, *by).hash(seed ^ 0x5DEECE66D).cast(pl.Float64) * 2.0**-64
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
            .alias(_W)
        )
        .drop(total, base, rem, deficit, order)
    )
