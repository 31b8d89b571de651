"""Packed (unit, key) cells: the polars engine's fast path for integer units and public keys.

Bounding groups the rows by (unit, key) cell, and a unit over ``max_groups``
keeps the ``k`` groups whose keyed hash ranks lowest. On two columns both
steps are the bulk of a release: a ``group_by`` on (unit, key) row-encodes
the pair, and the rank is a window over the unit. With an integer unit and
the public keys' positions as the key, each cell is one integer,

    cell = unit · 2^bits + key,  0 <= key < 2^bits,

which a ``group_by`` hashes at about half the cost, and the kept groups are
the first ``k`` of each unit in the order of one 64-bit sort key,

    order = (unit − lowest unit) · 2^(h + bits) + ⌊hash(cell) / 2^(64 − h)⌋ · 2^bits + key,

sorted once: a cell is kept when the cell ``k`` places before it in that
order belongs to another unit (half the window's cost).
Both are exact only while the numbers fit in 64 bits:

* the cell, while every unit fits in ``63 − bits`` bits: :func:`units_fit`
  checks the keyed rows before they are grouped, and the engine runs the
  two-column path when one does not;
* the order, while the units' span leaves ``h >= MIN_HASH_BITS`` bits of
  hash; else the kept groups come from the rank in a window, as on the
  two-column path.

The kept set depends on the unit's own cells and the seed only (each unit
is ranked within itself), so the sensitivity is that of
``docs/sensitivity.md`` §2 whatever the other units. The order is the keyed
hash's, with ties in its top ``h`` bits (probability at most
``C(g, 2) · 2^-h`` for a unit in ``g`` groups) broken by key position.

Example:
    >>> import polars as pl
    >>> from privframe.engines.polars.cells import cell_code
    >>> pl.DataFrame({"u": [3], "__key": [2]}).select(cell_code("u", 4)).item()
    50
"""

from __future__ import annotations

import polars as pl

from privframe.engines.bounding import CELL, KEY, RANK, ROWS, Grouping
from privframe.engines.spec import AggregationSpec

__all__ = [
    "MIN_HASH_BITS",
    "cell_bits",
    "cell_code",
    "kept_cells",
    "packed_cells",
    "ranked_in_windows",
    "units_fit",
]

MIN_HASH_BITS = 24
"""The fewest hash bits the sort order of a unit's groups may keep (else: a window rank)."""


def cell_bits(schema: pl.Schema, spec: AggregationSpec, keyed: Grouping) -> int | None:
    """The key's bits in a packed cell, or None when the cells stay two columns.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.bounding import grouping
        >>> from privframe.engines.polars.cells import cell_bits
        >>> from privframe.engines.spec import AggregationSpec
        >>> spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": list("abcde")}),
        ...                        2, 1, None, (), seed=7)
        >>> cell_bits(pl.Schema({"u": pl.Int64}), spec, grouping(spec))
        3
        >>> cell_bits(pl.Schema({"u": pl.String}), spec, grouping(spec)) is None
        True
    """
    if spec.unit is None or keyed.by != [KEY] or spec.histograms:
        return None
    if not schema[spec.unit].is_integer():
        return None
    return max(1, (keyed.keys.height - 1).bit_length())


def cell_code(unit: str, bits: int) -> pl.Expr:
    """A row's packed cell, :data:`CELL` (wraps, unchecked, for units :func:`units_fit` refuses)."""
    code = pl.col(unit).cast(pl.Int64, strict=False) * (1 << bits) + pl.col(KEY).cast(pl.Int64)
    return code.alias(CELL)


def units_fit(frame: pl.LazyFrame, unit: str, bits: int) -> pl.LazyFrame:
    """One boolean: whether every unit of ``frame`` fits in a cell's ``63 − bits`` high bits.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.polars.cells import units_fit
        >>> frame = pl.LazyFrame({"u": [0, 2**58]})
        >>> units_fit(frame, "u", 4).collect().item(), units_fit(frame, "u", 5).collect().item()
        (True, False)
    """
    column = pl.col(unit)
    limit = 1 << (63 - bits)
    low = column >= -limit if frame.collect_schema()[unit].is_signed_integer() else pl.lit(True)
    return frame.select((low & (column < limit)).all())


def packed_cells(frame: pl.LazyFrame, unit: str, names: list[str], bits: int) -> pl.LazyFrame:
    """Per packed cell: its rows (:data:`ROWS`) and the sums of the value columns ``names``."""
    sums = [pl.len().cast(pl.Int64).alias(ROWS), *(pl.col(n).sum() for n in names)]
    return frame.group_by(cell_code(unit, bits)).agg(*sums)


def kept_cells(
    cells: pl.DataFrame, unit: str, dtype: pl.DataType, bits: int, k: int | None, seed: int
) -> pl.LazyFrame:
    """The cells each unit keeps (all, or its ``k`` lowest in hash order), as (unit, key) columns.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.polars.cells import kept_cells
        >>> cells = pl.DataFrame({"__cell": [16, 17, 18, 32], "__rows": [1, 1, 1, 1]})
        >>> kept = kept_cells(cells, "u", pl.Int64, 4, 2, seed=7).collect()
        >>> kept.group_by("u").len().sort("u").rows()
        [(1, 2), (2, 1)]
    """
    cell = pl.col(CELL)
    whole = 1 << bits
    owner = cell // whole
    decoded = [owner.cast(dtype).alias(unit), (cell & (whole - 1)).cast(pl.UInt32).alias(KEY)]
    if k is None or cells.is_empty():
        return cells.lazy().with_columns(decoded).drop(CELL)
    lowest, highest = cells.select(owner.min().alias("low"), owner.max().alias("high")).row(0)
    hash_bits = 63 - bits - (highest - lowest).bit_length()
    if hash_bits < MIN_HASH_BITS:
        return ranked_in_windows(
            cells.lazy().with_columns(decoded).drop(CELL), unit, [KEY], k, seed
        )
    top = cell.hash(seed) // (1 << (64 - hash_bits))
    offset = (owner - lowest).cast(pl.UInt64)
    key = (cell & (whole - 1)).cast(pl.UInt64)
    order = (offset * (1 << hash_bits) + top) * whole + key
    unit_of = pl.col(RANK) // (1 << (hash_bits + bits))
    # Sorted by unit first, a cell is among its unit's first k exactly when the cell k
    # places before it is another unit's (or there is none).
    first_k = (unit_of != unit_of.shift(k)).fill_null(True)
    return (
        cells.lazy()
        .with_columns(order.alias(RANK))
        .sort(RANK)
        .filter(first_k)
        .with_columns(decoded)
        .drop(CELL, RANK)
    )


def ranked_in_windows(
    partial: pl.LazyFrame, unit: str, by: list[str], k: int, seed: int
) -> pl.LazyFrame:
    """Each unit's per-key partials, cut to the ``k`` keys whose keyed hash ranks lowest.

    The general path (any unit type, any grouping). A unit in at most ``k``
    groups keeps them all, so only the units over the limit are ranked, in a
    window over the unit: the kept set is the same as ranking every unit.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.polars.cells import ranked_in_windows
        >>> partial = pl.LazyFrame({"u": ["a", "a", "a", "b"], "g": [1, 2, 3, 1]})
        >>> kept = ranked_in_windows(partial, "u", ["g"], 2, seed=7).collect()
        >>> kept.group_by("u").len().sort("u").rows()
        [('a', 2), ('b', 1)]
    """
    groups = pl.len().over(unit)
    rank = pl.struct(unit, *by).hash(seed).rank("ordinal").over(unit)
    return pl.concat([partial.filter(groups <= k), partial.filter(groups > k).filter(rank <= k)])
