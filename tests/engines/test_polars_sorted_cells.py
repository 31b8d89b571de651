"""The packed path's two ways to aggregate cells: by sorting 64-bit words, or by a hash group_by.

Sorting must give exactly the hash group_by's cells (rows and Int64 sums),
whatever the units' type and range and the values' range (a value shares a
row's word with its cell, or is gathered by the row's number), and decline
when a cell is too wide for either; a release must come out the same
whichever way its cells were aggregated, for every seed and limit.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from privframe.engines.bounding import CELL, KEY, ROWS
from privframe.engines.polars import PolarsEngine
from privframe.engines.polars import cells as cells_module
from privframe.engines.polars.cells import packing, sorted_cells
from privframe.engines.spec import AggregationSpec, ValueSpec

KEYS = [f"k{i}" for i in range(10)]  # 4 bits of key in a packed cell


def keyed_rows(units: list[int], dtype: pl.DataType, values: dict[str, list[int]]) -> pl.DataFrame:
    """Rows as the engine holds them before grouping: unit, key position, grid values."""
    rng = np.random.default_rng(len(units))
    return pl.DataFrame(
        {
            "u": pl.Series(units, dtype=dtype),
            KEY: pl.Series(rng.integers(0, len(KEYS), len(units)), dtype=pl.UInt32),
            **{name: pl.Series(v, dtype=pl.Int64) for name, v in values.items()},
        }
    )


def hashed(rows: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    packed = packing(rows, "u", 4)
    assert packed is not None
    sums = [pl.len().cast(pl.Int64).alias(ROWS), *(pl.col(n).sum() for n in names)]
    return rows.group_by(packed.code()).agg(*sums).sort(CELL)


RNG = np.random.default_rng(7)
CASES = {
    "negative units, centred values": (
        [int(u) for u in RNG.integers(-500, 500, 3_000)],
        pl.Int64,
        [int(v) for v in RNG.integers(-(2**31), 2**31, 3_000)],
    ),
    "one unit, one value": ([5] * 40, pl.Int32, [-3] * 40),
    "32-bit units across their whole range": (
        [-(2**31), 2**31 - 1, 0] * 20,
        pl.Int32,
        [int(v) for v in RNG.integers(-5, 5, 60)],
    ),
    "unsigned units far from zero": (
        [2**58 + int(u) for u in RNG.integers(0, 50, 500)],
        pl.UInt64,
        [int(v) for v in RNG.integers(0, 9, 500)],
    ),
    "values at the Int64 extremes of a narrow span": (
        [int(u) for u in RNG.integers(0, 8, 300)],
        pl.Int64,
        [2**62 + int(v) for v in RNG.integers(0, 2**20, 300)],
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
@pytest.mark.parametrize("with_value", [True, False], ids=["sum", "count only"])
def test_sorted_cells_equal_a_hash_group_by(case: str, with_value: bool) -> None:
    units, dtype, values = CASES[case]
    names = ["x"] if with_value else []
    rows = keyed_rows(units, dtype, {"x": values})
    packed = packing(rows, "u", 4)
    assert packed is not None
    got = sorted_cells(rows, packed, names)
    assert got is not None
    want = hashed(rows, names)
    assert got.select(CELL, ROWS, *names).equals(want.select(CELL, ROWS, *names))


@pytest.mark.parametrize(
    ("units", "values"),
    [
        ([0, 2**40, 0], {"x": [0, 2**30, 1]}),  # 45 bits of cell and 31 of value
        ([1, 2, 1, 1], {"x": [1, 2, 3, 4], "y": [3, -4, 5, 6]}),  # two values
    ],
    ids=["value too wide", "two values"],
)
def test_values_that_do_not_share_a_word_are_gathered_by_row_number(
    units: list[int], values: dict[str, list[int]]
) -> None:
    rows = keyed_rows(units, pl.Int64, values)
    packed = packing(rows, "u", 4)
    assert packed is not None
    got = sorted_cells(rows, packed, list(values))
    assert got is not None
    assert got.equals(hashed(rows, list(values)).select(got.columns))


def test_cells_too_wide_to_share_a_word_with_a_value_are_left_to_the_hash() -> None:
    # 2^58 units apart: 63 bits of cell, and 3 more for the value or 2 for the row number.
    rows = keyed_rows([0, 2**58, 0], pl.Int64, {"x": [0, 5, 1]})
    packed = packing(rows, "u", 4)
    assert packed is not None
    assert sorted_cells(rows, packed, ["x"]) is None
    counted = sorted_cells(rows, packed, [])  # a count needs no low bits
    assert counted is not None
    assert counted.equals(hashed(rows, []))


@pytest.mark.parametrize("with_value", [True, False], ids=["sum", "count only"])
def test_unit_ranges_without_rows_are_skipped(with_value: bool, monkeypatch) -> None:
    # Eight ranges over units 0..100 with only 0 and 100 in use: six hold no row.
    monkeypatch.setattr(pl, "thread_pool_size", lambda: 8)
    names = ["x"] if with_value else []
    for values in ({"x": [3, 4, 5, 6]}, {"x": [0, 2**40, 1, 2]}):  # in the word, or gathered
        rows = keyed_rows([0, 0, 100, 100], pl.Int64, values)
        packed = packing(rows, "u", 4)
        assert packed is not None
        got = sorted_cells(rows, packed, names)
        assert got is not None
        assert got.equals(hashed(rows, names))


def vspec(name: str, column: str, j: int = 0) -> ValueSpec:
    return ValueSpec(name, column, -50.0, 50.0, j, -50 * 2**j, 50 * 2**j, 0, 0.0)


def random_rows(seed: int) -> pl.DataFrame:
    """Units in 1 to 10 keys with 1 to 8 rows in each, and two value columns."""
    rng = np.random.default_rng(seed)
    rows = []
    for unit in rng.integers(-(2**20), 2**20, 150):
        for key in rng.choice(len(KEYS), rng.integers(1, 11), replace=False):
            for _ in range(rng.integers(1, 9)):
                rows.append((int(unit), KEYS[key], float(rng.normal(0, 40)), float(rng.normal())))
    return pl.DataFrame(rows, schema=["u", "g", "x", "y"], orient="row")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    ("k", "m", "cap"), [(1, 1, None), (3, 2, None), (None, 3, None), (4, 5, 6)]
)
@pytest.mark.parametrize("columns", [(), ("x",), ("x", "y")], ids=["count", "sum", "two sums"])
def test_a_release_is_the_same_whichever_way_its_cells_are_aggregated(
    seed: int, k: int | None, m: int, cap: int | None, columns: tuple[str, ...], monkeypatch
) -> None:
    df = random_rows(seed)
    values = tuple(vspec(f"s_{c}", c, j=3) for c in columns)
    spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": KEYS}), k, m, cap, values, seed)
    sorted_tables = []

    def sorting(*args):
        sorted_tables.append(sorted_cells(*args))
        return sorted_tables[-1]

    monkeypatch.setattr(cells_module, "SORTED_FROM_ROWS", 0)
    monkeypatch.setattr(cells_module, "sorted_cells", sorting)
    got = PolarsEngine(df.lazy()).aggregate(spec)
    assert len(sorted_tables) == 1
    assert sorted_tables[0] is not None
    monkeypatch.setattr(cells_module, "sorted_cells", lambda *_: None)
    assert got.equals(PolarsEngine(df.lazy()).aggregate(spec))
