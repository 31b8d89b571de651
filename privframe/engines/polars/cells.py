"""Packed (unit, key) cells: the polars engine's fast path for integer units and public keys.

Bounding groups the rows by (unit, key) cell, and a unit over ``max_groups``
keeps the ``k`` groups whose keyed hash ranks lowest. On two columns both
steps are the bulk of a release: a ``group_by`` on (unit, key) row-encodes
the pair, and the rank is a window over the unit. With an integer unit and
the public keys' positions as the key, each cell is one unsigned integer,

    cell = (unit − lowest unit) · 2^bits + key,  0 <= key < 2^bits,

used only while every unit fits in ``63 − bits`` bits (:func:`packing`;
else the engine runs the two-column path). The cells' row counts and sums
come from sorting one 64-bit word per row, ``cell · 2^v + value − lowest
value``, where a cell and a value fit in it (:func:`sorted_cells`: numpy
sorts unit ranges in parallel threads, about half the time of a hash
``group_by`` over millions of cells on this project's 2-core machine), else
from a hash ``group_by`` of the cell (32 bits wide when the units' span
allows: a smaller hash table). The kept groups are the first ``k`` of each
unit in the order of one 64-bit sort key,

    order = (unit − lowest unit) · 2^(h + bits)
            + ⌊hash(unit · 2^bits + key) / 2^(64 − h)⌋ · 2^bits + key,

sorted alone by numpy: a cell is dropped when the cell ``k`` places before
it in that order belongs to the same unit, and the dropped cells are removed
from the table by value. The order is exact only while the units' span
leaves ``h >= MIN_HASH_BITS`` bits of hash, else the kept groups come from
the rank in a window, as on the two-column path.

The kept set depends on the unit's own cells and the seed only (each unit
is ranked within itself), so the sensitivity is that of
``docs/sensitivity.md`` §2 whatever the other units. The order is the keyed
hash's, with ties in its top ``h`` bits (probability at most
``C(g, 2) · 2^-h`` for a unit in ``g`` groups) broken by key position.

Example:
    >>> import polars as pl
    >>> from privframe.engines.polars.cells import packing
    >>> rows = pl.DataFrame({"u": [3, 5], "__key": [2, 1]})
    >>> cells = packing(rows, "u", 4)
    >>> cells.cell_type, rows.select(cells.code()).to_series().to_list()
    (UInt32, [2, 33])
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import polars as pl

from privframe.engines.bounding import CELL, KEY, ROWS, Grouping
from privframe.engines.spec import AggregationSpec

__all__ = [
    "MIN_HASH_BITS",
    "SORTED_FROM_ROWS",
    "Packing",
    "cell_bits",
    "kept_cells",
    "packed_cells",
    "packing",
    "ranked_in_windows",
    "sorted_cells",
]

MIN_HASH_BITS = 24
"""The fewest hash bits the sort order of a unit's groups may keep (else: a window rank)."""

SORTED_FROM_ROWS = 2_000_000
"""Rows from which :func:`packed_cells` sorts: below, the hash table of a ``group_by`` stays
small enough to be faster (measured on this project's 2-core machine, 0.5 M to 10 M rows
of ``benchmarks/compare.py``'s workload: sorting took 1.6 times the hash's time at 0.5 M
and 1 M rows, about the same at 2 M and 0.6 times from 4 M)."""

_MOST_PARTS = 8
"""The most unit ranges :func:`sorted_cells` sorts in parallel (each costs a pass of the rows)."""


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


@dataclass(frozen=True)
class Packing:
    """How the (unit, key) cells of some rows pack into one unsigned integer, :data:`CELL`.

    ``lowest`` and ``highest`` are the rows' extreme units; each fits in
    ``63 − bits`` signed bits.
    """

    unit: str
    dtype: pl.DataType
    bits: int
    lowest: int
    highest: int

    @property
    def cell_type(self) -> pl.DataType:
        """UInt32 when every cell fits in it, else UInt64."""
        fits = (self.highest - self.lowest) < 1 << (32 - self.bits)
        return pl.UInt32() if fits else pl.UInt64()

    def code(self) -> pl.Expr:
        """A row's packed cell (from its unit and ``KEY``)."""
        return (
            self.unit_offset().cast(self.cell_type) * (1 << self.bits)
            + pl.col(KEY).cast(self.cell_type)
        ).alias(CELL)

    def unit_offset(self) -> pl.Expr:
        """A row's unit less the lowest unit, in Int64 (exact: units fit in ``63 − bits`` bits)."""
        return pl.col(self.unit).cast(pl.Int64) - self.lowest

    def offset(self) -> pl.Expr:
        """A cell's unit, less the lowest unit."""
        return pl.col(CELL) // (1 << self.bits)

    def key(self) -> pl.Expr:
        """A cell's key position."""
        return (pl.col(CELL) % (1 << self.bits)).cast(pl.UInt32)

    def decoded(self) -> list[pl.Expr]:
        """A cell's unit (of the unit's type) and ``KEY``, from :data:`CELL`."""
        unit = (self.offset().cast(pl.Int64) + self.lowest).cast(self.dtype)
        return [unit.alias(self.unit), self.key().alias(KEY)]


def packing(rows: pl.DataFrame, unit: str, bits: int) -> Packing | None:
    """How the cells of ``rows`` pack, or None when a unit does not fit in ``63 − bits`` bits.

    Example:
        >>> import polars as pl
        >>> from privframe.engines.polars.cells import packing
        >>> rows = pl.DataFrame({"u": [0, 2**58]})
        >>> packing(rows, "u", 4).cell_type, packing(rows, "u", 5)
        (UInt64, None)
    """
    lowest, highest = _extremes(rows, unit)
    limit = 1 << (63 - bits)
    if lowest is None or lowest < -limit or highest >= limit:
        return None
    return Packing(unit, rows.schema[unit], bits, lowest, highest)


def _extremes(rows: pl.DataFrame, column: str) -> tuple[int, int]:
    """A column's least and greatest value (None, None when it has none)."""
    x = pl.col(column)
    least, most = rows.select(x.min().alias("least"), x.max().alias("most")).row(0)
    return least, most


def packed_cells(rows: pl.DataFrame, cells: Packing, names: list[str]) -> pl.DataFrame:
    """Per packed cell: its rows (:data:`ROWS`) and the sums of the value columns ``names``.

    By sorting (:func:`sorted_cells`) from :data:`SORTED_FROM_ROWS` rows,
    where the cells fit, else by a hash ``group_by``; the same table either
    way (in another row order).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.polars.cells import packed_cells, packing
        >>> rows = pl.DataFrame({"u": [1, 1, 2], "__key": [0, 0, 1], "x": [5, 7, -1]})
        >>> packed_cells(rows, packing(rows, "u", 1), ["x"]).sort("__cell").rows()
        [(0, 2, 12), (3, 1, -1)]
    """
    found = sorted_cells(rows, cells, names) if rows.height >= SORTED_FROM_ROWS else None
    if found is not None:
        return found
    sums = [pl.len().cast(pl.Int64).alias(ROWS), *(pl.col(n).sum() for n in names)]
    return rows.lazy().group_by(cells.code()).agg(*sums).collect()


def sorted_cells(rows: pl.DataFrame, cells: Packing, names: list[str]) -> pl.DataFrame | None:
    """:func:`packed_cells` by sorting, in cell order (None: a cell too wide to share a word).

    Each row becomes one 64-bit word, its cell in the high bits and in the
    low ones its value less the lowest value (``cell · 2^v + x − min x``)
    where there is one value and it fits, or its row number when the values
    must be gathered after the sort (nothing with no value). Sorted, the words
    of a cell are adjacent: its rows are the length of its run and a sum the
    difference of a running sum at the run's ends, modulo 2^64 as a polars
    Int64 sum (so the same sum whenever that does not wrap). The units are
    split into ranges, one per polars thread, sorted in parallel threads
    (numpy's sort releases the GIL): on this project's quiet 2-core machine,
    about half the time of a hash ``group_by`` over millions of cells (a
    range holding most rows, from skewed units, sorts alone).

    Example:
        >>> import polars as pl
        >>> from privframe.engines.polars.cells import packing, sorted_cells
        >>> rows = pl.DataFrame({"u": [7, 7, 9], "__key": [1, 1, 0], "x": [5, -2, 4]})
        >>> sorted_cells(rows, packing(rows, "u", 1), ["x"]).rows()
        [(1, 2, 3), (4, 1, 4)]
    """
    if rows.height == 0:
        return None
    span = (cells.highest - cells.lowest) << cells.bits | ((1 << cells.bits) - 1)
    # The low bits: the one value less its lowest where it fits, else the row number.
    lowest: int | None = None
    low_bits, low = 0, pl.lit(0, pl.UInt64)
    if names:
        low_bits, low = rows.height.bit_length(), pl.int_range(pl.len(), dtype=pl.UInt64)
    if len(names) == 1:
        least, most = _extremes(rows, names[0])
        width = (most - least).bit_length()
        if span.bit_length() + width <= 64:
            lowest, low_bits, low = least, width, (pl.col(names[0]) - least).cast(pl.UInt64)
    if span.bit_length() + low_bits > 64:
        return None
    word = (cells.code().cast(pl.UInt64) * (1 << low_bits) + low).alias(CELL)
    gathered = names if lowest is None else []
    parts = max(1, min(pl.thread_pool_size(), _MOST_PARTS, cells.highest - cells.lowest + 1))
    ends = [(cells.highest - cells.lowest) * (i + 1) // parts for i in range(parts)]
    offset = cells.unit_offset()
    plans = [
        rows.lazy().filter((offset > start) & (offset <= end)).select(word, *gathered)
        for start, end in zip([-1, *ends[:-1]], ends, strict=True)
    ]
    # A range between units (a gap in their ids) may hold no row.
    arrays = [
        [c.to_numpy() for c in frame.get_columns()]
        for frame in pl.collect_all(plans)
        if frame.height
    ]

    def runs(part: list[np.ndarray]) -> list[np.ndarray]:
        return _runs(part[0], low_bits, lowest, part[1:])

    # np.sort runs on one core and releases the GIL: one thread per unit range.
    with ThreadPoolExecutor(max_workers=len(arrays)) as pool:
        found = list(pool.map(runs, arrays))
    columns = [np.concatenate(column) for column in zip(*found, strict=True)]
    table = pl.DataFrame(
        dict(zip([CELL, ROWS, *names], columns, strict=True)),
        schema={CELL: pl.UInt64, ROWS: pl.Int64, **dict.fromkeys(names, pl.Int64)},
    )
    return table.with_columns(pl.col(CELL).cast(cells.cell_type))


def _runs(
    words: np.ndarray, low_bits: int, lowest: int | None, values: list[np.ndarray]
) -> list[np.ndarray]:
    """(cells, rows, sums) of one unit range's words, at least one (see :func:`sorted_cells`).

    The low ``low_bits`` of a word are its value less ``lowest``, or (with
    ``lowest`` None) its row number in the ``values`` columns.
    """
    if words.flags.writeable:  # a copy polars made to join chunks: sorted in place
        words.sort()
    else:
        words = np.sort(words)
    cell = words >> np.uint64(low_bits)
    first = np.empty(cell.size, dtype=bool)
    first[:1] = True
    np.not_equal(cell[1:], cell[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    count = np.diff(starts, append=cell.size)
    low = words & np.uint64((1 << low_bits) - 1)
    if lowest is None:
        summed, shift = [v.view(np.uint64)[low] for v in values], 0
    else:
        summed, shift = [low], lowest
    last = np.append(starts[1:], cell.size) - 1
    sums = []
    for x in summed:
        # Modulo 2^64, as polars sums Int64: a run's sum is the difference at its ends.
        at_end = np.cumsum(x)[last]
        sums.append(np.diff(at_end, prepend=np.uint64(0)).view(np.int64) + count * shift)
    return [cell[starts], count, *sums]


def kept_cells(cells: pl.DataFrame, packed: Packing, k: int | None, seed: int) -> pl.LazyFrame:
    """The cells each unit keeps (all, or its ``k`` lowest in hash order), as (unit, key) columns.

    A unit's order is that of the whole 64-bit keyed hash of ``unit · 2^bits
    + key`` (ties by key), whatever the other units: one sort of a 64-bit
    key holding the unit, the hash's top ``h`` bits and the key ranks them,
    and the few units with two cells equal in those ``h`` bits are ranked
    again on the whole hash. (Were ``h``, which the units' span sets, to
    decide a tie, one unit's presence could change another's groups.)

    Example:
        >>> import polars as pl
        >>> from privframe.engines.polars.cells import kept_cells, packing, packed_cells
        >>> rows = pl.DataFrame({"u": [1, 1, 1, 2], "__key": [0, 1, 2, 0]})
        >>> packed = packing(rows, "u", 4)
        >>> kept = kept_cells(packed_cells(rows, packed, []), packed, 2, seed=7).collect()
        >>> kept.group_by("u").len().sort("u").rows()
        [(1, 2), (2, 1)]
    """
    kept = cells.lazy()
    if k is not None and cells.height:
        hash_bits = 63 - packed.bits - (packed.highest - packed.lowest).bit_length()
        if hash_bits < MIN_HASH_BITS:
            decoded = kept.with_columns(packed.decoded()).drop(CELL)
            return ranked_in_windows(decoded, packed.unit, [KEY], k, seed)
        gone = _dropped(cells[CELL].to_numpy(), packed, k, seed, hash_bits)
        if gone.size:
            codes = pl.Series(gone).cast(packed.cell_type)
            kept = kept.filter(~pl.col(CELL).is_in(codes.implode()))
    return kept.with_columns(packed.decoded()).drop(CELL)


def _dropped(cell: np.ndarray, packed: Packing, k: int, seed: int, hash_bits: int) -> np.ndarray:
    """The cells a unit drops: those after its first ``k`` by (keyed hash, key), as codes."""
    bits, whole = np.uint64(packed.bits), np.uint64(1 << packed.bits)
    cell = cell.astype(np.uint64)
    offset, key = cell >> bits, cell & (whole - np.uint64(1))
    unit = offset.astype(np.int64) + packed.lowest
    signed = (unit << np.int64(packed.bits)) | key.view(np.int64)
    hashed = pl.Series(signed).hash(seed).to_numpy()
    top = hashed >> np.uint64(64 - hash_bits)
    above = np.uint64(hash_bits) + bits
    ordered = np.sort((offset << above) | (top << bits) | key)
    unit_of = ordered >> above
    # Sorted by unit first, a cell is dropped when the cell k places before it is the unit's.
    after = np.flatnonzero(unit_of[k:] == unit_of[: unit_of.size - k]) + k
    tied = ordered >> bits  # (unit, top bits): equal neighbours are tied
    tied_units = np.unique(unit_of[1:][tied[1:] == tied[:-1]])
    dropped = ordered[after]
    if tied_units.size:
        # Rare (probability at most C(g, 2)·2^-h for a unit in g groups): rank these
        # units' cells on the whole hash.
        dropped = dropped[~np.isin(dropped >> above, tied_units)]
        mine = np.flatnonzero(np.isin(offset, tied_units))
        ranked = mine[np.lexsort((key[mine], hashed[mine], offset[mine]))]
        owner = offset[ranked]
        late = np.flatnonzero(owner[k:] == owner[: owner.size - k]) + k
        retied = (offset[ranked[late]] << above) | key[ranked[late]]
        dropped = np.concatenate([dropped, retied])
    return ((dropped >> above) << bits) | (dropped & (whole - np.uint64(1)))


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
