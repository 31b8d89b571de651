"""The privacy unit column is never cast lossily: every distinct ID stays one unit.

Two people merged into one unit are bounded as one, so removing one of them
changes a release by more than the planned sensitivity (docs/privacy.md,
"What the guarantee assumes"). The invariant checked here, on every path data
takes into a Session (polars, pandas, parquet and Hive-partitioned folders, CSV,
unit partitions of a large file, Spark): for every unit type privframe
accepts, the number of distinct units a release sees equals the number of
distinct IDs in the input (for text files, distinct texts).

Releases run at a budget so large (ρ = 10^8, σ ≈ 7·10^-5) that the discrete
Gaussian noise is 0 except with probability below 10^-10^8: the released
count of distinct units is the exact one.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import privframe as pf
from privframe.engines.polars import input as polars_input

N = 40  # distinct IDs; every one of them collides with the others under a float cast
HUGE = 10**8


def _ids() -> dict[str, pl.Series]:
    """Per accepted unit type, N distinct IDs that a cast to Float64 would merge."""
    base = dt.datetime(2020, 1, 1)
    return {
        "decimal_scale0": pl.Series(
            [Decimal(10**19 + i) for i in range(N)], dtype=pl.Decimal(38, 0)
        ),
        "decimal_scale2": pl.Series(
            [Decimal(10**17) + Decimal(i) / 100 for i in range(N)], dtype=pl.Decimal(38, 2)
        ),
        "uint64_above_2_63": pl.Series([2**63 + i for i in range(N)], dtype=pl.UInt64),
        "int128": pl.Series([2**100 + i for i in range(N)], dtype=pl.Int128),
        "int64": pl.Series([2**62 + i for i in range(N)], dtype=pl.Int64),
        "int8": pl.Series(list(range(N)), dtype=pl.Int8),
        "float64": pl.Series([1.0 + i * 2.0**-52 for i in range(N)], dtype=pl.Float64),
        "string": pl.Series([f"person-{i}" for i in range(N)], dtype=pl.String),
        "categorical": pl.Series([f"person-{i}" for i in range(N)], dtype=pl.Categorical),
        "enum": pl.Series([f"p{i}" for i in range(N)], dtype=pl.Enum([f"p{i}" for i in range(N)])),
        "date": pl.Series([base.date() + dt.timedelta(days=i) for i in range(N)], dtype=pl.Date),
        "datetime_ns": pl.Series(
            [base + dt.timedelta(microseconds=i) for i in range(N)], dtype=pl.Datetime("ns")
        ).dt.offset_by("1ns"),
        "binary": pl.Series([f"id{i}".encode() for i in range(N)], dtype=pl.Binary),
    }


IDS = _ids()


def _frame(ids: pl.Series) -> pl.DataFrame:
    """Two rows per ID, in an order that does not group them."""
    doubled = pl.concat([ids, ids.reverse()])
    return pl.DataFrame({"id": doubled, "amount": np.arange(doubled.len(), dtype=np.float64)})


def _released_units(data: Any, unit: str = "id") -> int:
    sess = pf.Session(data, unit, pf.zCDP(HUGE))
    result = (
        sess.query()
        .bound(max_groups=1, max_rows_per_group=1)
        .agg(pf.count_distinct(), pf.count())
        .release(rho=HUGE)
    )
    frame = pl.from_pandas(result) if isinstance(result, pd.DataFrame) else result
    distinct, count = frame.row(0)
    assert count == distinct  # one row per unit is kept: the count counts units too
    return int(distinct)


@pytest.mark.parametrize("kind", sorted(IDS))
def test_polars_input_keeps_every_unit_distinct(kind: str) -> None:
    ids = IDS[kind]
    assert ids.n_unique() == N
    assert _released_units(_frame(ids)) == N
    assert _released_units(_frame(ids).lazy()) == N


@pytest.mark.parametrize(
    "kind", ["decimal_scale0", "decimal_scale2", "uint64_above_2_63", "categorical", "binary"]
)
def test_pandas_input_keeps_every_unit_distinct(kind: str) -> None:
    frame = _frame(IDS[kind]).to_pandas()
    assert frame["id"].nunique() == N
    assert _released_units(frame) == N


def test_pandas_decimal_objects_keep_every_unit_distinct() -> None:
    ids = [Decimal(10**19 + i) for i in range(N)] * 2
    frame = pd.DataFrame({"id": pd.Series(ids, dtype=object), "amount": 1.0})
    assert _released_units(frame) == N


@pytest.mark.parametrize("kind", sorted(IDS))
def test_parquet_input_keeps_every_unit_distinct(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    _frame(IDS[kind]).write_parquet(path)
    assert _released_units(str(path)) == N


@pytest.mark.parametrize("kind", ["decimal_scale0", "uint64_above_2_63", "int128", "binary"])
def test_unit_partitions_of_a_large_file_keep_every_unit_distinct(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data.parquet"
    _frame(IDS[kind]).write_parquet(path)
    monkeypatch.setattr(polars_input, "_ROWS_PER_PARTITION", 7)  # 12 partitions
    assert polars_input._partitions(str(path)) > 1
    assert _released_units(str(path)) == N


@pytest.mark.parametrize("kind", ["uint64_above_2_63", "int128", "string", "date", "float64"])
def test_csv_input_keeps_every_unit_distinct(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    _frame(IDS[kind]).write_csv(path)
    assert _released_units(str(path)) == N


def test_csv_integer_ids_beyond_64_bits_keep_every_unit_distinct(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("id,amount\n" + "".join(f"{10**19 + i % N},1.5\n" for i in range(2 * N)))
    assert _released_units(str(path)) == N


def test_csv_ids_are_the_text_the_file_holds(tmp_path: Path) -> None:
    # Parsed, these would be one integer, one float and one boolean: 3 units, not 8.
    texts = ["007", "07", "7", "1.5", "1.50000000000000001", "true", "TRUE", "True"]
    path = tmp_path / "data.csv"
    path.write_text("id,amount\n" + "".join(f"{t},1.5\n{t},2.5\n" for t in texts))
    assert _released_units(str(path)) == len(texts)
    assert pf.Session(str(path), "id", pf.zCDP(1.0))._schema["id"] == pl.String


def test_hive_partition_ids_are_the_text_of_the_directory_names(tmp_path: Path) -> None:
    # The layout Spark's partitionBy writes: the unit is in the directory names only.
    folder = tmp_path / "data.parquet"
    for i, text in enumerate(["007", "07", "7"]):
        (folder / f"id={text}").mkdir(parents=True)
        pl.DataFrame({"amount": [1.0 + i, 2.0]}).write_parquet(folder / f"id={text}" / "0.parquet")
    (folder / "id=8").mkdir()
    pl.DataFrame({"amount": [4.0]}).write_parquet(folder / "id=8" / "0.parquet")
    assert _released_units(str(folder)) == 4


def test_pandas_decimals_beyond_128_bits_are_a_clear_error() -> None:
    frame = pd.DataFrame({"id": pd.Series([Decimal(10**40), Decimal(1)], dtype=object)})
    with pytest.raises(pf.InvalidArgumentError, match=r"columns \['id'\]") as info:
        pf.Session(frame, "id", pf.zCDP(1.0))
    assert info.value.__context__ is None


@pytest.mark.parametrize("dtype", [pl.List(pl.Int64), pl.Struct({"a": pl.Int64}), pl.Null], ids=str)
def test_unit_types_that_cannot_identify_units_are_refused(dtype: pl.DataType) -> None:
    frame = pl.DataFrame({"id": [None, None], "x": [1, 2]}, schema={"id": dtype, "x": pl.Int64})
    with pytest.raises(pf.InvalidArgumentError, match=r"privacy unit column of type"):
        pf.Session(frame, "id", pf.zCDP(1.0))


def test_decimal_unit_ids_are_worked_on_as_integers() -> None:
    sess = pf.Session(_frame(IDS["decimal_scale0"]), "id", pf.zCDP(1.0))
    assert sess._schema["id"] == pl.Int128
    # Other decimal columns stay floats, as every query expects of them.
    other = _frame(IDS["decimal_scale0"]).with_columns(pl.col("amount").cast(pl.Decimal(12, 2)))
    assert pf.Session(other, "id", pf.zCDP(1.0))._schema["amount"] == pl.Float64


# --------------------------------------------------------------------------- Spark


@pytest.mark.parametrize(
    ("kind", "spark_type"),
    [
        ("decimal_scale0", "decimal(38,0)"),
        ("decimal_scale2", "decimal(38,2)"),
        ("int64", "bigint"),
        ("string", "string"),
        ("date", "date"),
        ("binary", "binary"),
    ],
)
def test_spark_input_keeps_every_unit_distinct(spark: Any, kind: str, spark_type: str) -> None:
    rows = _frame(IDS[kind]).to_dicts()
    frame = spark.createDataFrame(
        [(r["id"], r["amount"]) for r in rows], schema=f"id {spark_type}, amount double"
    )
    assert frame.select("id").distinct().count() == N
    assert _released_units(frame) == N


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("data.parquet", b"id,amount\n1,2\nalice@example.com,\x00\xff,3,4\n"),
        # A CSV's bad bytes and extra fields change their own row alone; a quote never
        # closed leaves the file unreadable.
        ("data.csv", b'id,amount\n1,"2\nalice@example.com,3\n'),
    ],
)
def test_an_unreadable_file_is_refused_without_quoting_it(
    tmp_path: Path, name: str, content: bytes
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(pf.InvalidValueError, match="could not be read") as info:
        pf.Session(str(path), "id", pf.zCDP(1.0))
    assert "alice" not in str(info.value)
    assert info.value.__context__ is None
    assert info.value.__cause__ is None
