"""The polars engine's fast paths: packed (unit, key) cells and partitions spilled to disk.

Both must give exactly the aggregates of the general path: packed cells only
while every unit fits beside the key (huge ids fall back), and spilled
partitions whatever the number of parts, with the spill files removed.
"""

from __future__ import annotations

import logging

import polars as pl
import pytest

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.polars import spill as spill_module
from privframe.engines.spec import COUNT, DISTINCT, AggregationSpec, HistogramSpec, ValueSpec

KEYS = [f"k{i}" for i in range(10)]  # 4 bits of key in a packed cell


def public_spec(k: int | None = None, m: int = 1, seed: int = 5) -> AggregationSpec:
    return AggregationSpec((), "u", ("g",), pl.DataFrame({"g": KEYS}), k, m, None, (), seed)


@pytest.mark.parametrize(
    ("dtype", "far"),
    [
        (pl.Int64, 2**60),  # 2^60 · 2^4 wraps to 0 in 64 bits: unit 0's cell
        (pl.Int64, -(2**60)),
        (pl.UInt64, 2**63 + 5),
        (pl.Int64, 2**59),  # just past the range that fits beside 4 bits of key
    ],
)
def test_units_too_large_to_pack_are_never_merged(dtype, far: int) -> None:
    df = pl.DataFrame(
        {"u": [0, far, 1], "g": ["k0", "k0", "k1"]}, schema={"u": dtype, "g": pl.String}
    )
    out = PolarsEngine(df.lazy()).aggregate(public_spec())
    assert out[COUNT].to_list()[:2] == [2, 1]
    assert out[DISTINCT].to_list()[:2] == [2, 1]


def test_units_at_the_edge_of_the_packed_range_are_exact() -> None:
    edge = [-(2**59), 2**59 - 1, 0]  # the extremes that still fit beside 4 bits of key
    df = pl.DataFrame({"u": edge * 2, "g": ["k0"] * 3 + ["k1"] * 3})
    out = PolarsEngine(df.lazy()).aggregate(public_spec(k=1))
    assert out[DISTINCT].to_list()[:2] == out[COUNT].to_list()[:2]
    assert sum(out[COUNT].to_list()) == 3


def test_a_release_counts_units_whose_ids_would_collide_when_packed() -> None:
    # Released through the Session with negligible noise (σ ≈ 0.001): merged cells would
    # count one unit at k0, not two.
    df = pl.DataFrame({"u": [0, 2**60], "g": ["k0", "k0"]})
    sess = pf.Session(df, "u", pf.zCDP(rho=1e6))
    query = sess.query().bound(max_groups=1, max_rows_per_group=1).group_by("g", keys=KEYS)
    got = query.agg(pf.count()).release(rho=1e6)
    assert got["count"].to_list()[0] == 2


def spread_data(units: int = 400) -> pl.DataFrame:
    rows = [
        (u, KEYS[(u * 7 + r) % len(KEYS)], float(r)) for u in range(units) for r in range(u % 9)
    ]
    return pl.DataFrame(rows, schema=["u", "g", "x"], orient="row")


@pytest.mark.parametrize("memory", [0, 2_000, None], ids=["disk", "memory-then-disk", "memory"])
@pytest.mark.parametrize("parts", [1, 3, 16])
def test_spilled_partitions_give_the_aggregates_of_one_pass(
    parts: int, memory: int | None, tmp_path, monkeypatch
) -> None:
    # Small batches, so that with 2,000 bytes some rows are held before all go to disk.
    monkeypatch.setattr(spill_module, "BATCH_ROWS", 100)
    if memory is not None:
        monkeypatch.setattr(spill_module, "MEMORY_BYTES", memory)
    path = tmp_path / "data.parquet"
    spread_data().write_parquet(path)
    s = public_spec(k=2, m=3)
    whole = PolarsEngine(pl.scan_parquet(path)).aggregate(s)
    split = PolarsEngine(pl.scan_parquet(path), streaming=True, partitions=parts).aggregate(s)
    assert split.equals(whole)


@pytest.fixture
def spill_dir(tmp_path, monkeypatch) -> list:
    """TMPDIR for the spill, partitions always written to disk; the files written, listed."""
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setenv("TMPDIR", str(spill))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    monkeypatch.setattr(spill_module, "MEMORY_BYTES", 0)
    written: list = []
    new_file = spill_module.ipc.new_file

    def recorded(path, schema):
        written.append(path)
        return new_file(path, schema)

    monkeypatch.setattr(spill_module.ipc, "new_file", recorded)
    return written


def test_spill_files_are_removed_after_the_release(spill_dir) -> None:
    PolarsEngine(spread_data().lazy(), partitions=4).aggregate(public_spec(k=2, m=3))
    assert len(spill_dir) == 4
    assert not any(path.exists() for path in spill_dir)
    assert [p.name for p in spill_dir[0].parent.parent.iterdir()] == []


def test_spill_files_are_removed_when_a_partition_fails(spill_dir) -> None:
    bad = AggregationSpec(
        (), "u", ("missing",), pl.DataFrame({"missing": ["a"]}), 1, 1, None, (), 1
    )
    with pytest.raises(pl.exceptions.PolarsError):
        PolarsEngine(spread_data().lazy(), partitions=4).aggregate(bad)
    assert not any(path.exists() for path in spill_dir)


def test_partitions_are_reported_as_steps(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="privframe.progress"):
        PolarsEngine(spread_data().lazy(), partitions=3).aggregate(public_spec(k=2, m=3))
    steps = [r.getMessage() for r in caplog.records if r.name == "privframe.progress"]
    assert steps == [f"partitions: step {i} of 3" for i in (1, 2, 3)]


@pytest.mark.parametrize("key_type", [pl.Categorical, pl.Enum(KEYS), pl.String])
def test_spilled_partitions_keep_observed_keys_of_every_type(key_type) -> None:
    df = spread_data().with_columns(pl.col("g").cast(key_type))
    observed = AggregationSpec((), "u", ("g",), None, 2, 3, None, (), 9)
    whole = PolarsEngine(df.lazy()).aggregate(observed)
    split = PolarsEngine(df.lazy(), partitions=5).aggregate(observed)
    assert split.equals(whole)
    assert split.schema["g"] == df.schema["g"]


@pytest.mark.parametrize("memory", [0, None], ids=["disk", "memory"])
def test_spilled_partitions_of_a_mixed_grouping_give_the_aggregates_of_one_pass(
    memory: int | None, monkeypatch
) -> None:
    if memory is not None:
        monkeypatch.setattr(spill_module, "MEMORY_BYTES", memory)
    df = spread_data().with_columns((pl.col("u") % 3).alias("h"))
    keys = pl.DataFrame({"g": KEYS})
    mixed = AggregationSpec((), "u", ("g", "h"), keys, 2, 3, None, (), 4)
    whole = PolarsEngine(df.lazy()).aggregate(mixed)
    split = PolarsEngine(df.lazy(), partitions=4).aggregate(mixed)
    assert split.equals(whole)


@pytest.mark.parametrize(
    ("lower", "upper", "dtype"),
    [
        (0, 255, pl.UInt8),
        (-128, 127, pl.Int8),
        (-129, 127, pl.Int16),
        (0, 256, pl.UInt16),
        (0, 2**16 - 1, pl.UInt16),
        (-(2**15), 2**15 - 1, pl.Int16),
        (0, 2**32 - 1, pl.UInt32),
        (-1, 2**31 - 1, pl.Int32),
        (-(2**31), 2**31 - 1, pl.Int32),
        (-(2**31) - 1, 0, None),
        (0, 2**32, None),
        (-1, 2**31, None),
    ],
)
def test_the_narrowest_integer_type_holds_both_bounds(lower: int, upper: int, dtype) -> None:
    assert spill_module.narrowest_integer(lower, upper) == dtype


def record_file_types(monkeypatch) -> list:
    """The unit column's type in each spill file, in the order the files are opened."""
    types: list = []
    new_file = spill_module.ipc.new_file

    def recorded(path, schema):
        types.append(pl.from_arrow(schema.empty_table())["u"].dtype)
        return new_file(path, schema)

    monkeypatch.setattr(spill_module.ipc, "new_file", recorded)
    return types


EDGE_UNITS = {
    pl.Int64: [0, 255, 256, -1, -(2**31), 2**31 - 1, 2**31, 2**32 - 1, 2**32, -(2**63), 2**63 - 1],
    pl.UInt64: [0, 255, 2**32 - 1, 2**32, 2**63, 2**64 - 1],
    pl.Int32: [0, 127, 128, -(2**15) - 1, -(2**31), 2**31 - 1],
}


@pytest.mark.parametrize("memory", [0, 40, None], ids=["disk", "memory-then-disk", "memory"])
@pytest.mark.parametrize("dtype", list(EDGE_UNITS))
def test_spilled_units_come_back_exactly_at_the_edges_of_every_narrow_type(
    dtype, memory: int | None, tmp_path, monkeypatch
) -> None:
    # Two rows a batch: batches with only small units are narrowed, and a batch that
    # does not fit the type so far widens it for itself and every batch after it.
    monkeypatch.setattr(spill_module, "BATCH_ROWS", 2)
    units = EDGE_UNITS[dtype]
    rows = pl.DataFrame(
        {"u": units * 3, "x": range(3 * len(units))}, schema={"u": dtype, "x": pl.Int64}
    )
    parts = spill_module.spill(
        rows.lazy(), pl.col("x") % 3, 3, tmp_path, memory_bytes=memory, narrow=["u"]
    )
    for p, got in enumerate(parts):
        assert got is not None
        want = rows.filter(pl.col("x") % 3 == p).sort("x")
        assert got.collect().sort("x").equals(want)


def test_small_units_are_written_in_a_narrow_type(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(spill_module, "MEMORY_BYTES", 0)
    types = record_file_types(monkeypatch)
    rows = pl.DataFrame({"u": [0, 7, 300, 65_535], "x": [1, 2, 3, 4]})
    parts = spill_module.spill(rows.lazy(), pl.col("x") % 2, 2, tmp_path, narrow=["u"])
    assert types == [pl.UInt16, pl.UInt16]
    assert pl.concat([p.collect() for p in parts if p is not None]).sort("x").equals(rows)


def test_a_batch_of_wider_units_starts_a_file_of_a_wider_type(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(spill_module, "MEMORY_BYTES", 0)
    monkeypatch.setattr(spill_module, "BATCH_ROWS", 2)
    types = record_file_types(monkeypatch)
    rows = pl.DataFrame({"u": [1, 2, 2**40, -(2**40), 3, 4], "x": range(6)})
    parts = spill_module.spill(rows.lazy(), pl.lit(0), 1, tmp_path, narrow=["u"])
    assert parts[0] is not None
    assert parts[0].collect().sort("x").equals(rows)
    # Whatever order the batches come in, the types only widen, each file in one type.
    assert types[-1] == pl.Int64
    assert len(types) == len(set(types)) <= 3


def edge_value(name: str, lower_units: int, upper_units: int, centre: int) -> ValueSpec:
    return ValueSpec(name, "x", lower_units, upper_units, 0, lower_units, upper_units, centre, None)


@pytest.mark.parametrize("parts", [1, 3])
def test_values_spilled_narrow_sum_exactly_at_their_extremes(parts: int, monkeypatch) -> None:
    monkeypatch.setattr(spill_module, "MEMORY_BYTES", 0)
    values = (
        edge_value("int32", -(2**31), 2**31 - 1, 0),  # Int32's own edges
        edge_value("centred", 0, 2**32 - 2, 2**31 - 1),  # Int32 once centred
        edge_value("uint8", 0, 255, 0),
        edge_value("wide", -1, 2**31, 0),  # needs 64 bits: kept Int64
        ValueSpec("present", "x", 0.0, 1.0, 0, 0, 1, 0, None, present=True),
    )
    extremes = [-(2**31), -(2**31) + 1, -1, 0, 1, 255, 256, 2**31 - 1, 2**31, 2**32, None]
    df = pl.DataFrame(
        {
            "u": list(range(len(extremes))) * 2,
            "g": ["k0"] * len(extremes) + ["k1"] * len(extremes),
            "x": extremes * 2,
        },
        schema={"u": pl.Int64, "g": pl.String, "x": pl.Float64},
    )
    # Histogram positions (Int8 here) of values at, between and past the candidates, and null.
    quantiles = HistogramSpec("h", "x", (-1.0, 0.0, 1.0))
    spec = AggregationSpec(
        (), "u", ("g",), pl.DataFrame({"g": KEYS}), None, 1, None, values, 3, (quantiles,)
    )
    # A key's histogram lists its positions in any order.
    in_order = pl.col("h").list.eval(pl.element().sort_by(pl.element().struct.field("position")))
    whole = PolarsEngine(df.lazy()).aggregate(spec).with_columns(in_order)
    split = PolarsEngine(df.lazy(), partitions=parts).aggregate(spec).with_columns(in_order)
    assert split.equals(whole)
    assert split["h"][0].to_list() == [
        {"position": 0, "count": 3},  # at or below -1
        {"position": 2, "count": 1},  # at 0
        {"position": 4, "count": 6},  # at or past 1
    ]
    clipped = {
        v.name: sum(
            min(max(int(x), v.lower_units), v.upper_units) - v.centre_units
            for x in extremes
            if x is not None
        )
        for v in values[:4]
    }
    assert {v: split[v][0] for v in clipped} == clipped
    assert split["present"][0] == len(extremes) - 1


@pytest.mark.parametrize("memory", [0, None], ids=["disk", "memory"])
def test_spilled_partitions_of_units_that_outgrow_their_type_give_the_aggregates_of_one_pass(
    memory: int | None, monkeypatch
) -> None:
    # The first batches' units fit UInt16; later ones are the same IDs plus 2^32, which
    # a truncating cast would merge with them (doubling their rows, halving DISTINCT).
    monkeypatch.setattr(spill_module, "BATCH_ROWS", 100)
    if memory is not None:
        monkeypatch.setattr(spill_module, "MEMORY_BYTES", memory)
    small = spread_data()
    df = pl.concat([small, small.with_columns(pl.col("u") + 2**32)])
    s = public_spec(k=2, m=3)
    whole = PolarsEngine(df.lazy()).aggregate(s)
    split = PolarsEngine(df.lazy(), partitions=3).aggregate(s)
    assert split.equals(whole)
    # Each unit keeps min(its groups, 2) whichever are chosen: twice the units, twice that.
    assert split[DISTINCT].sum() == 2 * PolarsEngine(small.lazy()).aggregate(s)[DISTINCT].sum()
