"""The contribution bounding both engines run: its parameters, conventions and last step.

Contribution bounding works on each unit's per-group partial aggregates
instead of sampling rows, which is both cheaper and more accurate:

* A unit with ``n`` rows in a group contributes ``w = min(n, m)`` to the
  count, exactly what a random subset of ``m`` of its rows would; and
  ``round(s·w/n)`` to a sum whose row total is ``s``, the *expected* sum of
  a random ``m``-row subset, clipped to ``[w·lo, w·hi]`` (:func:`centred_bounds`)
  so the bound holds exactly in grid units.
* With an overall cap ``M``, a unit whose weights add up to ``T > M`` has
  them rescaled to integers in ``[0, w]`` that add up to exactly ``M``
  (largest remainders, ties by a keyed hash salted with :data:`TIE_SALT`),
  and its sums are scaled the same way.
* A unit in more than ``k`` groups keeps the ``k`` whose keyed hash (with a
  fresh secret seed per release) ranks lowest: a uniformly random subset,
  chosen from the unit's own groups and fresh randomness only.
* For quantile histograms, each unit keeps a random subset of ``w`` of its
  rows per kept group: the rows ranking lowest by a keyed hash (salted with
  :data:`ROW_SALT`) of (unit, key, row number), the row number taken within
  the cell in histogram-position order (``docs/sensitivity.md``, Lemma 1).

Every step touches one unit's rows at a time, so adding or removing a unit
changes the output only through that unit's bounded contribution
(``docs/sensitivity.md`` §2). Rows whose privacy unit is null or NaN are
dropped on every run: they must never be merged into one unit.

Each engine computes these steps on its own frames
(:mod:`privframe.engines.polars.engine`, :mod:`privframe.engines.spark.bounding`)
with the column names, salts and key conventions defined here, and hands its
per-key results to :func:`finish`, which gives every engine's output the same
shape.

Example:
    >>> import polars as pl
    >>> from privframe.engines.bounding import grouping
    >>> from privframe.engines.spec import AggregationSpec
    >>> spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a", "b"]}),
    ...                        None, 1, None, (), seed=7)
    >>> grouping(spec).by, grouping(spec).kind
    (['__key'], 'public')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from privframe.engines.spec import COUNT, DISTINCT, AggregationSpec, HistogramSpec, ValueSpec

__all__ = [
    "CELL",
    "COUNTED",
    "GLOBAL",
    "GROUP_SALT",
    "INDEX",
    "KEY",
    "PART",
    "PARTITION_SALT",
    "RANK",
    "ROWS",
    "ROW_SALT",
    "TIE_SALT",
    "WEIGHT",
    "Grouping",
    "attach_histogram",
    "centred_bounds",
    "every_public_key",
    "finish",
    "grouping",
    "in_key_order",
]

ROWS = "__rows"
"""Working column: a unit's rows in a group (n)."""

WEIGHT = "__weight"
"""Working column: a unit's bounded weight in a group (w <= n)."""

KEY = "__key"
"""Working column: the position of a row's key among the public keys."""

CELL = "__cell"
"""Working column: a (unit, key) cell packed into one integer (the polars engine's fast path)."""

GLOBAL = "__all"
"""The one key column of a release without ``group_by`` (one global group)."""

COUNTED = "__counted"
"""Working column of a mixed grouping: whether a unit is counted at this kept group.

Each unit is counted once per combination of the selected columns, at the
lowest key position among its kept groups there; :func:`every_public_key`
adds the counts up to the combination's distinct units.
"""

PART = "__part"
"""Working column: a row's unit partition (the polars engine's spill files, one per partition)."""

RANK = "__rank"
"""Working column: a unit's groups (or rows) ranked by a keyed hash: a rank or a sort key."""

INDEX = "__index"
"""Working column: a row's number within its (unit, key) cell."""

# Salts keep the keyed hashes of one release apart: each choice is XORed with its own.
PARTITION_SALT = 0x9E3779B97F4A7C15
"""Salt of the hash that splits units into partitions (the polars engine's passes)."""

GROUP_SALT = 0x61C8864680B583EB
"""Salt of the Spark engine's group-choice hash (polars hashes a struct, keyed by the seed)."""

ROW_SALT = 0x2545F4914F6CDD1D
"""Salt of the hash that chooses a unit's histogram rows."""

TIE_SALT = 0x5DEECE66D
"""Salt of the hash that breaks ties between equal remainders in the cap on rows."""


def centred_bounds(v: ValueSpec) -> tuple[int, int]:
    """The bounds (lo, hi) of one row's contribution to ``v`` in grid units, after centring.

    A unit of weight w contributes a sum in [w·lo, w·hi].

    Example:
        >>> from privframe.engines.bounding import centred_bounds
        >>> from privframe.engines.spec import ValueSpec
        >>> centred_bounds(ValueSpec("s", "x", 0.0, 10.0, 0, 0, 10, 5, 0.0))
        (-5, 5)
    """
    return v.lower_units - v.centre_units, v.upper_units - v.centre_units


@dataclass(frozen=True)
class Grouping:
    """How a release's rows are keyed before bounding.

    Attributes:
        kind: ``"public"`` (each row gets its key's position in ``keys`` as
            :data:`KEY`, rows with other keys are dropped), ``"global"`` (no
            ``group_by``: every row gets :data:`KEY` 0), ``"observed"``
            (private key selection: rows are grouped by their non-null keys)
            or ``"mixed"`` (public keys over some group columns, as
            ``"public"``, and the ``selected`` others observed, as
            ``"observed"``).
        keys: the public keys (one row of :data:`GLOBAL` for a global group).
        by: the columns the per-key aggregates are grouped by.
        selected: the observed group columns, whose combinations are chosen
            privately (rows with a null in one are dropped).
    """

    kind: Literal["public", "global", "observed", "mixed"]
    keys: pl.DataFrame
    by: list[str]
    selected: tuple[str, ...] = ()

    @property
    def observed(self) -> bool:
        """Whether the keys are the observed ones (private key selection)."""
        return self.kind == "observed"


def grouping(spec: AggregationSpec) -> Grouping:
    """The :class:`Grouping` of ``spec`` (see the module example).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.bounding import grouping
        >>> from privframe.engines.spec import AggregationSpec
        >>> spec = AggregationSpec((), "u", ("g", "h"), pl.DataFrame({"g": ["a", "b"]}),
        ...                        2, 1, None, (), seed=7)
        >>> grouping(spec).kind, grouping(spec).by
        ('mixed', ['__key', 'h'])
    """
    if spec.keys is None:
        if spec.group_by:
            observed = list(spec.group_by)
            return Grouping("observed", pl.DataFrame({GLOBAL: [0]}), observed, spec.group_by)
        return Grouping("global", pl.DataFrame({GLOBAL: [0]}), [KEY])
    selected = tuple(c for c in spec.group_by if c not in spec.keys.columns)
    if selected:
        return Grouping("mixed", spec.keys, [KEY, *selected], selected)
    return Grouping("public", spec.keys, [KEY])


def in_key_order(
    result: pl.DataFrame, keys: pl.DataFrame, by: list[str], names: list[str], *, observed: bool
) -> pl.DataFrame:
    """Per-key results as an engine returns them: observed keys sorted, or in public-key order.

    With public keys, ``result`` is keyed by the key's index (:data:`KEY`):
    every public key gets a row, zeros where no bounded row reached it.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.bounding import in_key_order
        >>> result = pl.DataFrame({"__key": [1], "__count": [4], "__distinct": [2]},
        ...                       schema_overrides={"__key": pl.UInt32})
        >>> keys = pl.DataFrame({"g": ["a", "b"]})
        >>> in_key_order(result, keys, ["__key"], [], observed=False)["__count"].to_list()
        [0, 4]
    """
    if observed:
        return result.sort(by)
    return (
        keys.with_row_index(KEY)
        .join(result, on=KEY, how="left")
        .sort(KEY)
        .with_columns(pl.col(COUNT, DISTINCT, *names).fill_null(0))
    )


def every_public_key(result: pl.DataFrame, keyed: Grouping, names: list[str]) -> pl.DataFrame:
    """Mixed grouping: per observed combination of the selected columns, every public key.

    The combinations come sorted, and within each the public keys in their
    order; a key without a bounded row in a combination gets zeros. The engine
    counts each unit once per combination (at one of its keys there), so
    ``DISTINCT`` summed over the combination's keys is its distinct units, the
    count its selection uses: it is repeated on each of its rows.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.bounding import Grouping, every_public_key
        >>> result = pl.DataFrame(
        ...     {"__key": [1, 0], "m": [5, 5], "__count": [4, 1], "__distinct": [2, 1]},
        ...     schema_overrides={"__key": pl.UInt32})
        >>> keyed = Grouping("mixed", pl.DataFrame({"g": ["a", "b", "c"]}), ["__key", "m"], ("m",))
        >>> out = every_public_key(result, keyed, [])
        >>> out["g"].to_list(), out["__count"].to_list(), out["__distinct"].to_list()
        (['a', 'b', 'c'], [1, 4, 0], [3, 3, 3])
    """
    selected = list(keyed.selected)
    combinations = result.group_by(selected).agg(pl.col(DISTINCT).sum()).sort(selected)
    grid = combinations.join(keyed.keys.with_row_index(KEY), how="cross")
    found = result.drop(DISTINCT)
    out = grid.join(found, on=[*selected, KEY], how="left", maintain_order="left")
    out = out.with_columns(pl.col(COUNT, *names).fill_null(0))
    return out.select(*selected, *keyed.keys.columns, KEY, COUNT, DISTINCT, *names)


def attach_histogram(
    out: pl.DataFrame, by: list[str], h: HistogramSpec, found: pl.DataFrame
) -> pl.DataFrame:
    """Add each key's nonzero (position, count) pairs as a list column, empty where none.

    ``found`` holds the ``by`` columns, the position (named ``h.name``) and its
    count (``len``). Sparse on purpose: a dense keys × positions array would
    take memory in proportion to the number of *observed* keys, a private
    number, before anything is charged.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.bounding import attach_histogram
        >>> from privframe.engines.spec import HistogramSpec
        >>> out = pl.DataFrame({"__key": [0, 1]})
        >>> found = pl.DataFrame({"__key": [1], "h": [2], "len": [3]})
        >>> h = HistogramSpec("h", "x", (0.0, 1.0))
        >>> attach_histogram(out, ["__key"], h, found)["h"].to_list()
        [[], [{'position': 2, 'count': 3}]]
    """
    pairs = found.group_by(by).agg(
        pl.struct(pl.col(h.name).alias("position"), pl.col("len").alias("count")).alias(h.name)
    )
    joined = out.with_row_index("__row").join(pairs, on=by, how="left").sort("__row")
    return joined.drop("__row").with_columns(pl.col(h.name).fill_null([]))


def finish(
    result: pl.DataFrame,
    keyed: Grouping,
    names: list[str],
    histograms: Sequence[tuple[HistogramSpec, pl.DataFrame]] = (),
) -> pl.DataFrame:
    """An engine's output from its per-key results and histogram counts, the same for every engine.

    One row per public key in key order (or per observed key, sorted; or per
    observed combination of the selected columns and public key,
    :func:`every_public_key`), with the key columns, ``COUNT``, ``DISTINCT``,
    the value sums ``names`` and one list column per histogram; the working
    key columns are dropped.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.bounding import Grouping, finish
        >>> result = pl.DataFrame({"__key": [0], "__count": [4], "__distinct": [2]},
        ...                       schema_overrides={"__key": pl.UInt32})
        >>> keyed = Grouping("global", pl.DataFrame({"__all": [0]}), ["__key"])
        >>> finish(result, keyed, []).columns
        ['__count', '__distinct']
    """
    if keyed.kind == "mixed":
        out = every_public_key(result, keyed, names)
    else:
        out = in_key_order(result, keyed.keys, keyed.by, names, observed=keyed.observed)
    for h, found in histograms:
        out = attach_histogram(out, keyed.by, h, found)
    return out.drop(KEY, GLOBAL, strict=False)
