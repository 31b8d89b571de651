"""The polars engine: filter, drop non-public keys, bound contributions, aggregate exactly.

Contribution bounding works on each unit's per-group partial aggregates
instead of sampling rows, which is both cheaper and more accurate:

* A unit with ``n`` rows in a group contributes ``w = min(n, m)`` to the
  count, exactly what a random subset of ``m`` of its rows would; and
  ``round(s·w/n)`` to a sum whose row total is ``s``, the *expected* sum of
  a random ``m``-row subset, clipped to ``[w·lo, w·hi]`` so the bound holds
  exactly in grid units.
* With an overall cap ``M``, a unit whose weights add up to ``T > M`` keeps
  ``floor(w·M/T)`` rows' worth in each group (integer arithmetic), and its
  sums are scaled the same way, so its weights still add up to at most ``M``.
* A unit in more than ``k`` groups keeps the ``k`` whose keyed hash (with a
  fresh secret seed per release) ranks lowest: a uniformly random subset,
  chosen from the unit's own groups and fresh randomness only.

Every step touches one unit's rows at a time, so adding or removing a unit
changes the output only through that unit's bounded contribution.

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

from privframe.engines.spec import COUNT, AggregationSpec, ValueSpec
from privframe.errors import InvalidValueError

__all__ = ["PolarsEngine"]

_N = "__rows"
_W = "__weight"
_NULL_UNIT = "__null_unit"
_GLOBAL = "__all"


def _row_units(v: ValueSpec) -> pl.Expr:
    x = pl.col(v.column).cast(pl.Float64)
    x = x.fill_nan(v.fill).fill_null(v.fill).clip(v.lower, v.upper)
    units = (x * 2.0**v.grid_exponent).round().cast(pl.Int64)
    return units.clip(v.lower_units, v.upper_units) - v.centre_units


class PolarsEngine:
    """Runs an :class:`~privframe.engines.spec.AggregationSpec` on a polars LazyFrame.

    Args:
        frame: the private data.
        streaming: collect with polars' streaming engine (for files and
            larger-than-memory inputs).
    """

    def __init__(self, frame: pl.LazyFrame, *, streaming: bool = False) -> None:
        self._frame = frame
        self._streaming = streaming

    def aggregate(self, spec: AggregationSpec) -> pl.DataFrame:
        """Exact bounded aggregates, one row per public key, in key order."""
        frame = self._frame
        for predicate in spec.filters:
            frame = frame.filter(predicate)
        keys = spec.keys if spec.keys is not None else pl.DataFrame({_GLOBAL: [0]})
        by = list(keys.columns)
        if spec.keys is None:
            frame = frame.with_columns(pl.lit(0).alias(_GLOBAL))
        else:
            frame = frame.with_columns(pl.col(c).cast(keys.schema[c]) for c in by)
            frame = frame.join(keys.lazy(), on=by, how="semi")
        frame = frame.with_columns(_row_units(v).alias(v.name) for v in spec.values)
        names = [v.name for v in spec.values]
        if spec.unit is None:
            per_key = frame.group_by(by).agg(
                pl.len().cast(pl.Int64).alias(COUNT),
                *(pl.col(n).sum() for n in names),
                pl.lit(False).alias(_NULL_UNIT),
            )
        else:
            per_key = self._bounded(frame, spec, by, names)
        result = per_key.collect(engine="streaming" if self._streaming else "auto")
        if result[_NULL_UNIT].any():
            raise InvalidValueError(
                f"the privacy unit column {spec.unit!r} contains nulls: rows without a unit "
                "cannot be bounded. Drop them or give each its own unit before the session."
            )
        out = (
            keys.with_row_index("__order")
            .join(result.drop(_NULL_UNIT), on=by, how="left")
            .sort("__order")
            .drop("__order")
            .with_columns(pl.col(COUNT, *names).fill_null(0))
        )
        return out.drop(_GLOBAL) if spec.keys is None else out

    @staticmethod
    def _bounded(
        frame: pl.LazyFrame, spec: AggregationSpec, by: list[str], names: list[str]
    ) -> pl.LazyFrame:
        unit = spec.unit
        assert unit is not None
        partial = frame.group_by([unit, *by]).agg(
            pl.len().cast(pl.Int64).alias(_N), *(pl.col(n).sum() for n in names)
        )
        if spec.max_groups is not None:
            rank = pl.struct(unit, *by).hash(spec.seed).rank("ordinal").over(unit)
            partial = partial.filter(rank <= spec.max_groups)
        weight = pl.min_horizontal(pl.col(_N), pl.lit(spec.max_rows_per_group, pl.Int64))
        if spec.max_rows is not None:
            total = weight.sum().over(unit)
            weight = pl.when(total > spec.max_rows).then(weight * spec.max_rows // total)
            weight = weight.otherwise(weight)
        partial = partial.with_columns(weight.alias(_W))
        w, n = pl.col(_W), pl.col(_N)
        scaled = []
        for v in spec.values:
            s = pl.col(v.name)
            shrunk = (s.cast(pl.Float64) * w / n).round().cast(pl.Int64)
            lo, hi = v.lower_units - v.centre_units, v.upper_units - v.centre_units
            scaled.append(
                pl.when(w < n).then(shrunk).otherwise(s).clip(w * lo, w * hi).alias(v.name)
            )
        return (
            partial.with_columns(scaled)
            .group_by(by)
            .agg(
                pl.col(_W).sum().alias(COUNT),
                *(pl.col(nm).sum() for nm in names),
                pl.col(unit).is_null().any().alias(_NULL_UNIT),
            )
        )
