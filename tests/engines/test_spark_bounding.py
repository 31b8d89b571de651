"""The Spark bounding keeps exactly the groups, weights and sums of the one-window ranking.

The reference below is the algorithm the Spark engine ran before its rows
were shuffled once by the unit (the same steps, without that shuffle):
aggregate by (unit, key), then rank every unit's groups in a window by
``xxhash64(seed ^ GROUP_SALT, unit, *key)``, ties by key, and keep the first
``k``. The engine's :func:`partials` must
give the same rows for a given seed, on random data with units in fewer and
more than ``k`` groups, with and without the cap ``M``, for integer units
(small ids and ids near ±2^62 and ±2^63, which nothing may wrap or merge),
string units, and the groupings the engine passes (public keys, selected
columns, both). Spark runs on ``local[2]`` (conftest.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from test_polars_engine import vspec

from privframe.engines.bounding import KEY, ROWS, WEIGHT
from privframe.engines.spark import engine as spark_engine
from privframe.engines.spark.bounding import partials
from privframe.engines.spark.engine import SparkEngine
from privframe.engines.spark.rows import spark_table
from privframe.engines.spec import AggregationSpec, HistogramSpec

VALUES = (vspec("s", "x", 0, 10, j=2), vspec("c", "x", 0, 10, j=2, centred=True))
NAMES = [v.name for v in VALUES]


def reference_partials(frame: Any, spec: AggregationSpec, by: list[str], names: list[str]) -> Any:
    """The old bounding: the same steps without the shuffle of the rows by the unit first."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(type(frame), "repartition", lambda self, *columns: self)
        return partials(frame, spec, by, names)


def cells(rng: np.random.Generator, units: list[Any], n_keys: int, k: int) -> dict[str, list[Any]]:
    """Rows of ``units``: about half in at most ``k`` keys, the rest in up to ``n_keys``."""
    rows: dict[str, list[Any]] = {"u": [], KEY: [], "sel": [], "s": [], "c": []}
    for i, unit in enumerate(units):
        many = i % 2 == 1
        groups = int(rng.integers(k + 1, n_keys + 1)) if many else int(rng.integers(1, k + 1))
        for key in rng.choice(n_keys, size=groups, replace=False):
            for _ in range(int(rng.integers(1, 6))):
                rows["u"].append(unit)
                rows[KEY].append(int(key))
                rows["sel"].append(str(rng.choice(["p", "q"])))
                rows["s"].append(int(rng.integers(0, 41)))
                rows["c"].append(int(rng.integers(-20, 21)))
    return rows


def spec(k: int | None, m: int, big_m: int | None, seed: int) -> AggregationSpec:
    keys = pl.DataFrame({"g": list(range(12))})
    return AggregationSpec((), "u", ("g",), keys, k, m, big_m, VALUES, seed)


def collected(frame: Any, by: list[str]) -> pl.DataFrame:
    out = pl.from_arrow(frame.toArrow())
    assert isinstance(out, pl.DataFrame)
    return out.select("u", *by, ROWS, WEIGHT, *NAMES).sort("u", *by)


def assert_same_partials(frame: Any, s: AggregationSpec, by: list[str]) -> None:
    got = collected(partials(frame, s, by, NAMES), by)
    expected = collected(reference_partials(frame, s, by, NAMES), by)
    assert got.height > 0
    assert got.equals(expected), f"new:\n{got}\nreference:\n{expected}"


SMALL = list(range(-40, 40))
HUGE = [
    *(2**62 + d for d in (-2, -1, 0, 1, 2)),
    *(-(2**62) + d for d in (-2, -1, 0, 1, 2)),
    2**63 - 1,
    -(2**63),
    *(2**62 + d * 2**56 for d in (1, 2, 3)),  # units that a 6-bit key shift would merge
]
UNITS = {
    "small ints": (SMALL, "long"),
    "huge ints": (HUGE + SMALL[:10], "long"),
    "ints": ([u * 1000 for u in SMALL], "int"),
    "strings": ([f"user {u}" for u in SMALL], "string"),
}


@pytest.mark.parametrize("units", list(UNITS))
@pytest.mark.parametrize(
    ("k", "m", "big_m"), [(3, 2, None), (3, 2, 7), (1, 100, None), (None, 3, 4)]
)
@pytest.mark.parametrize("by", [[KEY], [KEY, "sel"], ["sel"]], ids=["public", "mixed", "selected"])
def test_partials_equal_the_one_window_ranking(spark, units, k, m, big_m, by) -> None:
    ids, kind = UNITS[units]
    seed = 1000 * len(ids) + (k or 0) * 10 + m
    rows = cells(np.random.default_rng(seed), ids, 12, k or 3)
    frame = spark.createDataFrame(
        list(zip(*rows.values(), strict=True)),
        f"u {kind}, {KEY} long, sel string, s long, c long",
    )
    for salt in (7, 2**64 - 1):
        assert_same_partials(frame, spec(k, m, big_m, seed ^ salt), by)


def test_huge_units_are_never_merged(spark) -> None:
    """Units that agree in their low bits keep their own groups and weights."""
    units = [2**62, 2**62 + 2**57, -(2**62), -(2**62) - 2**57, 2**63 - 1, -(2**63)]
    rows = [(u, key, 1, 0) for u in units for key in range(4)]
    frame = spark.createDataFrame(rows, f"u long, {KEY} long, s long, c long")
    got = collected(partials(frame, spec(2, 5, None, 11), [KEY], NAMES), [KEY])
    per_unit = got.group_by("u").agg(pl.len(), pl.col(WEIGHT).sum()).sort("u")
    assert per_unit.rows() == [(u, 2, 2) for u in sorted(units)]


def test_units_in_at_most_k_groups_keep_all_of_them(spark) -> None:
    rows = [(u, key, 1, 0) for u in range(50) for key in range(u % 5)]
    frame = spark.createDataFrame(rows, f"u long, {KEY} long, s long, c long")
    got = collected(partials(frame, spec(3, 5, None, 5), [KEY], NAMES), [KEY])
    groups = dict(got.group_by("u").len().rows())
    assert groups == {u: min(u % 5, 3) for u in range(50) if u % 5}


def test_one_shuffle_by_the_unit_before_the_per_key_totals(spark, capsys) -> None:
    """The (unit, key) aggregation and the windows over the unit reuse one exchange."""
    from pyspark.sql import functions as f

    rows = [(u, key, 1, 0) for u in range(20) for key in range(5)]
    frame = spark.createDataFrame(rows, f"u long, {KEY} long, s long, c long")
    per_key = partials(frame, spec(3, 5, 7, 5), [KEY], NAMES).groupBy(KEY).agg(f.sum(WEIGHT))
    per_key.explain()
    plan = capsys.readouterr().out
    shuffles = [line for line in plan.splitlines() if "Exchange hashpartitioning" in line]
    assert len(shuffles) == 2, plan  # by the unit, then by the key
    assert "hashpartitioning(u#" in shuffles[-1], plan  # the first one planned: by the unit


@pytest.mark.parametrize("histograms", [False, True])
@pytest.mark.parametrize("selected", [False, True])
def test_engine_results_equal_the_one_window_ranking(
    spark, monkeypatch, histograms, selected
) -> None:
    """Whole releases (per-key counts, distinct units, sums, histograms) are unchanged."""
    rng = np.random.default_rng(3)
    n = 4_000
    data = pl.DataFrame(
        {
            "u": rng.integers(0, 300, n),
            "g": rng.choice(["a", "b", "c", "d", "e", "f"], n),
            "r": rng.choice(["n", "s"], n),
            "x": rng.integers(0, 40, n) / 4,
        }
    )
    frame = spark_table(spark, data).cache()
    keys = pl.DataFrame({"g": ["a", "b", "c", "d", "e", "f", "h"]})
    group_by = ("g", "r") if selected else ("g",)
    hist = (HistogramSpec("__h", "x", tuple(float(i) for i in range(11))),) if histograms else ()
    for k, big_m in ((2, None), (2, 6), (None, 6)):
        s = AggregationSpec((), "u", group_by, keys, k, 3, big_m, VALUES, 99, histograms=hist)
        got = SparkEngine(frame).aggregate(s)
        with monkeypatch.context() as patched:
            patched.setattr(spark_engine, "partials", reference_partials)
            expected = SparkEngine(frame).aggregate(s)
        assert got.equals(expected), f"new:\n{got}\nreference:\n{expected}"
