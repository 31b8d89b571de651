"""Unit partitions spilled to disk: the input read once, whatever its size.

An input too large to bound in memory is split into partitions by a keyed
hash of the privacy unit, so each unit's rows all fall in one partition and
bounding one partition at a time is bounding the whole. :func:`spill` makes
one streaming pass over the input and appends each batch's rows to their
partition's Arrow IPC file; each partition is then read back (memory-mapped,
no parsing) and bounded in memory. Reading the input once keeps the time per
row flat as the input grows, where reading it once per partition would not.

Batches are split in Python with ``DataFrame.partition_by`` and written with
pyarrow's IPC writer: measured on 10 M rows into 8 partitions, about 4 times
faster than polars' partitioned ``sink_ipc``, and no slower than collecting
the rows in memory. Columns of dictionary type (polars ``Categorical`` and
``Enum``), which an IPC file cannot change between batches, and 128-bit
integers, which pyarrow has no type for, are written as their exact text
and read back as their type.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> import polars as pl
    >>> from privframe.engines.polars.spill import spill
    >>> rows = pl.LazyFrame({"u": [1, 2, 3, 4], "x": [1.0, 2.0, 3.0, 4.0]})
    >>> with tempfile.TemporaryDirectory() as directory:
    ...     parts = spill(rows, pl.col("u") % 2, 3, Path(directory))
    ...     [None if p is None else p.collect()["u"].to_list() for p in parts]
    [[2, 4], [1, 3], None]
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from privframe.engines.bounding import PART

__all__ = ["BATCH_ROWS", "spill"]

BATCH_ROWS = 2_000_000
"""Rows per batch of the spilling pass (its memory: a batch and one buffer per partition)."""

_WIDE_INTEGERS = {t for t in (getattr(pl, "Int128", None), getattr(pl, "UInt128", None)) if t}


def spill(
    frame: pl.LazyFrame, partition: pl.Expr, partitions: int, directory: Path
) -> list[pl.LazyFrame | None]:
    """Each partition's rows of ``frame`` (None where none), from files written in ``directory``.

    ``partition`` gives each row its partition, in ``[0, partitions)``.
    """
    schema = frame.collect_schema()
    as_text = pl.Schema({c: pl.String for c, t in schema.items() if _written_as_text(t)})
    writers: dict[int, ipc.RecordBatchFileWriter] = {}
    try:
        rows = frame.with_columns(partition.alias(PART)).cast(as_text)
        for batch in rows.collect_batches(chunk_size=BATCH_ROWS, maintain_order=False):
            parts = batch.partition_by(PART, as_dict=True, include_key=False)
            for (part,), part_rows in parts.items():
                table: pa.Table = part_rows.to_arrow()
                if part not in writers:
                    writers[part] = ipc.new_file(directory / f"{part}.arrow", table.schema)
                writers[part].write_table(table)
    finally:
        for writer in writers.values():
            writer.close()
    return [
        pl.scan_ipc(directory / f"{p}.arrow").cast(schema) if p in writers else None
        for p in range(partitions)
    ]


def _written_as_text(dtype: pl.DataType) -> bool:
    """Whether a column is spilled as its text: dictionaries, and integers pyarrow lacks."""
    return isinstance(dtype, pl.Categorical | pl.Enum) or dtype in _WIDE_INTEGERS
