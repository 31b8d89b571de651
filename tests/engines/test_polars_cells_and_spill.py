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
from privframe.engines.spec import COUNT, DISTINCT, AggregationSpec

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
