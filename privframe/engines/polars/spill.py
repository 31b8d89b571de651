"""Unit partitions spilled to memory or disk: the input read once, whatever its size.

An input too large to bound in memory is split into partitions by a keyed
hash of the privacy unit, so each unit's rows all fall in one partition and
bounding one partition at a time is bounding the whole. :func:`spill` makes
one streaming pass over the input and adds each batch's rows to their
partition: held in memory while all of them fit in :data:`MEMORY_BYTES`,
else appended to the partition's Arrow IPC files; each partition is then
bounded in memory (files are read back memory-mapped, with no parsing).
Reading the input once keeps the time per row flat as the input grows,
where reading it once per partition would not; holding the rows in memory
when they fit saves writing them (on this project's machine, writing was
half of the spilling pass).

Batches are split in Python with ``DataFrame.partition_by`` and written with
pyarrow's IPC writer: measured on 10 M rows into 8 partitions, about 4 times
faster than polars' partitioned ``sink_ipc``, and no slower than collecting
the rows in memory. Columns of dictionary type (polars ``Categorical`` and
``Enum``), which an IPC file cannot change between batches, and 128-bit
integers, which pyarrow has no type for, are written as their exact text
and read back as their type.

Rows take as few bytes as their values allow, so that less is written and
held: the caller narrows the columns whose bounds it knows (key positions,
clipped values), and the columns it names in ``narrow`` (the privacy unit)
are stored in the narrowest integer type holding every value read so far
(:func:`narrowest_integer` of the running minimum and maximum, checked on
each batch). That type only widens: a batch that does not fit it starts a
new file for its partitions, in the wider type, and every file and held
batch is read back as the column's own type. A cast never drops a bit, so
no two units are ever merged. Measured on the benchmark's 100 M rows (unit
Int64, key UInt8, one value) all written to disk, the rows took 17 bytes
each before and 9 after (UInt32 unit, Int32 value), and the spilling pass
21.7 s before and 11.2 s after (medians of interleaved runs on a shared
2-core machine). Also measured, and not used: Arrow's compression (on 10 M
of those rows, lz4 left the 9 bytes as they were, as pyarrow keeps a buffer
uncompressed where compressing does not shrink it, and zstd saved 1.1 bytes
a row for more time than the writes it saved); a thread writing while the
next batches are read (no faster at 100 M rows on 2 cores); and summing each
batch's rows per (unit, key) before spilling (a batch of 2 M rows held 1 %
fewer cells than rows in the benchmark's 100 M rows, 0.1 % in its 1 B, and
the summed rows would need their count).

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> import polars as pl
    >>> from privframe.engines.polars.spill import spill
    >>> rows = pl.LazyFrame({"u": [1, 2, 3, 4], "x": [1.0, 2.0, 3.0, 4.0]})
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     parts = spill(rows, pl.col("u") % 2, 3, Path(directory))
    ...     [None if p is None else sorted(p.collect()["u"]) for p in parts]
    [[2, 4], [1, 3], None]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from privframe.engines.bounding import PART

__all__ = ["BATCH_ROWS", "MEMORY_BYTES", "narrowest_integer", "spill"]

BATCH_ROWS = 2_000_000
"""Rows per batch of the spilling pass (what it holds beside the rows kept in memory)."""

MEMORY_BYTES = 2 << 30
"""The partitions' rows stay in memory up to this size (2 GiB), and go to disk past it."""

_WIDE_INTEGERS = {t for t in (getattr(pl, "Int128", None), getattr(pl, "UInt128", None)) if t}

# The integer types a column may be narrowed to, smallest first, with their bits.
_NARROW_TYPES: tuple[tuple[pl.DataType, int], ...] = (
    (pl.UInt8(), 8),
    (pl.Int8(), 8),
    (pl.UInt16(), 16),
    (pl.Int16(), 16),
    (pl.UInt32(), 32),
    (pl.Int32(), 32),
)
_BITS: dict[type[pl.DataType], int] = {
    **{type(t): bits for t, bits in _NARROW_TYPES},
    pl.Int64: 64,
    pl.UInt64: 64,
}


def narrowest_integer(lower: int, upper: int) -> pl.DataType | None:
    """The smallest integer type of at most 32 bits holding every integer in [lower, upper].

    None when no such type holds them all (a 64-bit type is then needed).

    Example:
        >>> from privframe.engines.polars.spill import narrowest_integer
        >>> narrowest_integer(0, 255), narrowest_integer(-1, 255), narrowest_integer(0, 2**32)
        (UInt8, Int16, None)
    """
    for dtype, bits in _NARROW_TYPES:
        signed = dtype.is_signed_integer()
        low = -(1 << (bits - 1)) if signed else 0
        high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
        if low <= lower and upper <= high:
            return dtype
    return None


def spill(
    frame: pl.LazyFrame,
    partition: pl.Expr,
    partitions: int,
    directory: Path,
    memory_bytes: int | None = None,
    narrow: Collection[str] = (),
) -> list[pl.LazyFrame | None]:
    """Each partition's rows of ``frame`` (None where none), held in memory or in ``directory``.

    ``partition`` gives each row its partition, in ``[0, partitions)``. The
    rows stay in memory while they take at most ``memory_bytes`` (default
    :data:`MEMORY_BYTES`); past that, all of them are written to files in
    ``directory``: one per partition, and one more each time a column of
    ``narrow`` (integers) widens. The partitions come back as ``frame``'s
    types.
    """
    budget = MEMORY_BYTES if memory_bytes is None else memory_bytes
    schema = frame.collect_schema()
    as_text = pl.Schema({c: pl.String for c, t in schema.items() if _written_as_text(t)})
    narrowing = _Narrowing({c: schema[c] for c in narrow})
    held: dict[int, list[pl.DataFrame]] = {}
    size = 0.0
    writers: dict[int, tuple[ipc.RecordBatchFileWriter, pa.Schema]] = {}
    files: dict[int, list[Path]] = {}

    def write(part: int, part_rows: pl.DataFrame) -> None:
        table: pa.Table = part_rows.to_arrow()
        if part not in writers or not writers[part][1].equals(table.schema):
            # A new file for each set of types the rows come in (the types only widen).
            if part in writers:
                writers.pop(part)[0].close()
            path = directory / f"{part}-{len(files.get(part, []))}.arrow"
            files.setdefault(part, []).append(path)
            writers[part] = ipc.new_file(path, table.schema), table.schema
        writers[part][0].write_table(table)

    try:
        rows = frame.with_columns(partition.alias(PART)).cast(as_text)
        for batch in rows.collect_batches(chunk_size=BATCH_ROWS, maintain_order=False):
            parts = narrowing.of(batch).partition_by(PART, as_dict=True, include_key=False)
            for (part,), part_rows in parts.items():
                if writers or size + part_rows.estimated_size() > budget:
                    for held_part, frames in held.items():
                        for frame_rows in frames:
                            write(held_part, frame_rows)
                    held.clear()
                    write(part, part_rows)
                else:
                    held.setdefault(part, []).append(part_rows)
                    size += part_rows.estimated_size()
    finally:
        for writer, _ in writers.values():
            writer.close()
    return [_rows_of(p, held, files, schema) for p in range(partitions)]


class _Narrowing:
    """Integer columns cast to the narrowest type that holds every value read so far.

    Each batch's minimum and maximum widen the running range, whose
    :func:`narrowest_integer` is the type the batch is cast to (when smaller
    than the column's own). The cast is strict and the type holds the batch's
    whole range, so it is exact; a batch that does not fit widens the type
    for it and every batch after it.
    """

    def __init__(self, types: Mapping[str, pl.DataType]) -> None:
        self._bits = {c: _BITS[type(t)] for c, t in types.items() if type(t) in _BITS}
        self._ranges: dict[str, tuple[int, int]] = {}

    def of(self, batch: pl.DataFrame) -> pl.DataFrame:
        """``batch`` with the columns cast to their narrowest type so far."""
        if not self._bits:
            return batch
        columns = list(self._bits)
        lowest = batch.select(pl.col(columns).min()).row(0)
        highest = batch.select(pl.col(columns).max()).row(0)
        casts = {}
        for column, low, high in zip(columns, lowest, highest, strict=True):
            if low is not None:  # else the batch has no value in it: nothing to widen
                seen = self._ranges.get(column, (low, high))
                self._ranges[column] = (min(seen[0], low), max(seen[1], high))
            if column in self._ranges:
                dtype = narrowest_integer(*self._ranges[column])
                if dtype is not None and _BITS[type(dtype)] < self._bits[column]:
                    casts[column] = dtype
        return batch.cast(pl.Schema(casts), strict=True) if casts else batch


def _rows_of(
    part: int,
    held: dict[int, list[pl.DataFrame]],
    files: Mapping[int, list[Path]],
    schema: pl.Schema,
) -> pl.LazyFrame | None:
    """One partition's rows, read back as their types (None if it has none)."""
    if part in files:
        return pl.concat([pl.scan_ipc(path).cast(schema) for path in files[part]])
    if part in held:
        return pl.concat([rows.lazy().cast(schema) for rows in held[part]])
    return None


def _written_as_text(dtype: pl.DataType) -> bool:
    """Whether a column is spilled as its text: dictionaries, and integers pyarrow lacks."""
    return isinstance(dtype, pl.Categorical | pl.Enum) or dtype in _WIDE_INTEGERS
