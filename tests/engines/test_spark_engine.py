"""The Spark engine against the polars engine: equal when bounds do not bind, bounded when they do.

Spark runs in local mode, started once by the ``spark`` fixture (conftest.py);
the data sets are small and shared by module-scoped fixtures, and every
``aggregate`` call is one Spark job.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import polars as pl
import pytest
from test_polars_engine import vspec

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import (
    COUNT,
    DISTINCT,
    AggregationSpec,
    HistogramSpec,
    RowStep,
    ValueSpec,
)

KEYS = ["a", "b", "c", "d", "e", "f", "g", "h"]  # "g", "h" have no rows; "zz" is not public
# Quantile candidates 0, 0.5, ..., 10: some values sit on them, others between.
GRID = tuple(pf.quantile("x", 0.5, bounds=(0, 10), candidates=21).candidate_values())


VALUES = (
    vspec("s", "x", 0, 10, j=4),
    vspec("c", "x", 0, 10, j=4, centred=True),
    vspec("q", "x", 0, 10, j=4, square=True),
    vspec("t", "x", -3, 7, j=1),  # half-grid ties: rounding must be half to even
    # missing="drop": a null or NaN adds nothing, and the values are counted.
    dataclasses.replace(vspec("cd", "x", 0, 10, j=4, centred=True), fill=None),
    dataclasses.replace(vspec("qd", "x", 0, 10, j=4, square=True), fill=None),
    ValueSpec("n", "x", 0.0, 1.0, 0, 0, 1, 0, None, present=True),
)
HISTOGRAMS = (HistogramSpec("__h", "x", GRID),)


def spec(
    *,
    unit: str | None = "u",
    keys: pl.DataFrame | None = None,
    group_by: tuple[str, ...] | None = None,
    k: int | None = None,
    m: int = 1_000,
    big_m: int | None = None,
    values: tuple[ValueSpec, ...] = VALUES,
    histograms: tuple[HistogramSpec, ...] = HISTOGRAMS,
    steps: tuple[RowStep, ...] = (),
    seed: int = 12345,
) -> AggregationSpec:
    if group_by is None:
        group_by = tuple(keys.columns) if keys is not None else ()
    return AggregationSpec(
        steps, unit, group_by, keys, k, m, big_m, values, seed, histograms=histograms
    )


def small_data(seed: int = 0, n_units: int = 150) -> pl.DataFrame:
    """Each unit: at most 3 groups, at most 2 rows per group; some nulls, NaNs and odd keys."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list[Any]] = {"u": [], "g": [], "r": [], "mo": [], "ms": [], "x": []}
    for unit in range(n_units):
        groups = rng.choice([*KEYS[:6], "zz", None], size=rng.integers(1, 4), replace=False)
        for g in groups:
            mo = int(rng.integers(1, 4))
            for _ in range(rng.integers(1, 3)):
                rows["u"].append(unit if rng.random() > 0.03 else None)
                rows["g"].append(g)
                rows["r"].append("n" if g in ("a", "b", "c") else "s")
                rows["mo"].append(mo)
                odd = str(rng.choice([" 1", "+2", "2.0", "03", "x"]))  # polars' cast grammar
                rows["ms"].append(str(mo) if rng.random() > 0.2 else odd)
                kind = rng.random()
                if kind < 0.05:
                    x = None
                elif kind < 0.1:
                    x = float("nan")
                elif kind < 0.13:
                    x = float("inf")
                else:
                    x = int(rng.integers(-40, 400)) / 32  # on and between the grids
                rows["x"].append(x)
    return pl.DataFrame(rows, schema_overrides={"x": pl.Float64, "u": pl.Int64})


def heavy_unit(n_rows: int = 2_000, unit: int = -1) -> pl.DataFrame:
    rng = np.random.default_rng(99)
    return pl.DataFrame(
        {
            "u": [unit] * n_rows,
            "g": [KEYS[i % 6] for i in range(n_rows)],
            "r": ["n"] * n_rows,
            "mo": [1] * n_rows,
            "ms": ["1"] * n_rows,
            "x": (rng.integers(-40, 400, n_rows) / 32).tolist(),
        }
    )


def sorted_lists(frame: pl.DataFrame) -> pl.DataFrame:
    """Histogram lists in position order (the engines may list positions in any order)."""
    return frame.with_columns(
        pl.col(h.name).list.eval(pl.element().sort_by(pl.element().struct.field("position")))
        for h in HISTOGRAMS
        if h.name in frame.columns
    )


def run_polars(df: pl.DataFrame, s: AggregationSpec) -> pl.DataFrame:
    return sorted_lists(PolarsEngine(df.lazy()).aggregate(s))


def run_spark(frame: Any, s: AggregationSpec) -> pl.DataFrame:
    from privframe.engines.spark.engine import SparkEngine

    return sorted_lists(SparkEngine(frame).aggregate(s))


def assert_same(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    assert got.schema == expected.schema
    assert got.equals(expected), f"spark:\n{got}\npolars:\n{expected}"


def to_spark(spark: Any, df: pl.DataFrame) -> Any:
    from privframe.engines.spark.rows import spark_table

    return spark_table(spark, df).cache()  # with its schema: Connect infers none from no rows


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    return small_data()


@pytest.fixture(scope="module")
def with_heavy(data: pl.DataFrame) -> pl.DataFrame:
    return pl.concat([data, heavy_unit()])


@pytest.fixture(scope="module")
def spark_data(spark: Any, data: pl.DataFrame) -> Any:
    return to_spark(spark, data)


@pytest.fixture(scope="module")
def spark_with_heavy(spark: Any, with_heavy: pl.DataFrame) -> Any:
    return to_spark(spark, with_heavy)


# -- equal to the polars engine when bounding does not bind ---------------------------------

PRODUCT = pl.DataFrame({"r": ["s", "s", "n", "n", "x"], "mo": [1, 2, 1, 2, 3]})

EXACT = {
    "public keys": spec(keys=pl.DataFrame({"g": KEYS}), k=3, m=2),
    "two key columns, M": spec(keys=PRODUCT, k=3, m=6, big_m=18),  # M = k·m: never binds
    "string column, int keys": spec(keys=pl.DataFrame({"ms": [3, 1, 2, 7]}), m=2, histograms=()),
    "global": spec(m=6),
    "observed keys": spec(group_by=("g",), k=3, m=2),
    "observed two columns": spec(group_by=("g", "mo"), k=3, m=2, values=VALUES[:1]),
    "no unit": spec(unit=None, keys=pl.DataFrame({"g": KEYS}), m=1),
    "no unit, global": spec(unit=None, m=1, histograms=()),
}


@pytest.fixture(scope="module")
def exact_results(spark_data) -> Any:
    """Each EXACT spec's Spark result, computed once (Spark jobs are slow to start)."""
    cache: dict[str, pl.DataFrame] = {}

    def result(name: str) -> pl.DataFrame:
        if name not in cache:
            cache[name] = run_spark(spark_data, EXACT[name])
        return cache[name]

    return result


@pytest.mark.parametrize("name", list(EXACT))
def test_equals_polars_when_bounding_does_not_bind(name, data, exact_results) -> None:
    expected = run_polars(data, EXACT[name])
    assert expected[COUNT].sum() > 0
    assert_same(exact_results(name), expected)


def test_output_shape_and_types(data, exact_results) -> None:
    out = exact_results("public keys")
    values = [v.name for v in VALUES]
    assert out.columns == ["g", COUNT, DISTINCT, *values, "__h"]
    assert out["g"].to_list() == KEYS  # key order, absent keys present
    assert out.row(6)[1:-1] == (0,) * (2 + len(values))
    assert out["__h"][6].to_list() == []
    assert out.schema["__h"] == pl.List(pl.Struct({"position": pl.Int64, "count": pl.Int64}))
    observed = exact_results("observed keys")
    assert observed["g"].to_list() == sorted(set(data["g"].drop_nulls()))  # "zz" too


def test_empty_input_gives_zeros(spark) -> None:
    empty = pl.DataFrame(schema=small_data(n_units=1).schema)
    s = spec(keys=pl.DataFrame({"g": ["a", "b"]}), k=1, m=2)
    assert_same(run_spark(to_spark(spark, empty), s), run_polars(empty, s))


def test_null_and_nan_units_are_dropped_not_merged(spark) -> None:
    df = pl.DataFrame(
        {
            "u": [1.0, float("nan"), float("nan"), None, None, 2.0],
            "g": ["a", "a", "b", "a", "b", "b"],
            "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        }
    )
    s = spec(keys=pl.DataFrame({"g": ["a", "b"]}), k=1, m=1, values=VALUES[:1], histograms=())
    got = run_spark(to_spark(spark, df), s)
    assert got[COUNT].to_list() == [1, 1]
    assert_same(got, run_polars(df, s))


# -- bounded when it binds --------------------------------------------------------------------


def test_weights_and_scaled_sums_equal_polars_without_random_choices(
    with_heavy, spark_with_heavy
) -> None:
    # Only m binds (no group choice, no overall cap): the weights and scaled sums
    # round(s·w/n), ties to even, are deterministic and equal; so are the histogram totals
    # (over a column without nulls, so each unit's kept rows all have a position).
    s = spec(keys=pl.DataFrame({"g": KEYS}), m=1, histograms=(HistogramSpec("__h", "mo", GRID),))
    got, expected = run_spark(spark_with_heavy, s), run_polars(with_heavy, s)
    assert_same(got.drop("__h"), expected.drop("__h"))
    total = pl.col("__h").list.eval(pl.element().struct.field("count").sum()).list.first()
    assert got.select(total).equals(expected.select(total))
    assert got.select(total)["__h"].to_list() == got[COUNT].to_list()


@pytest.mark.parametrize(("k", "m", "big_m"), [(3, 5, None), (4, 2, 6), (6, 100, 250)])
def test_heavy_unit_is_bounded(k, m, big_m, data, with_heavy, spark_with_heavy) -> None:
    s = spec(keys=pl.DataFrame({"g": KEYS}), k=k, m=m, big_m=big_m, seed=2024)
    without = run_polars(data, s)  # the other units are not bounded: exact
    got = run_spark(spark_with_heavy, s)
    d_count = (got[COUNT] - without[COUNT]).to_numpy()
    d_units = (got[DISTINCT] - without[DISTINCT]).to_numpy()
    assert (d_count >= 0).all()
    assert (d_count <= m).all()
    assert np.count_nonzero(d_count) <= k
    assert (d_units >= 0).all()
    assert d_units.sum() <= k
    assert 0 < d_count.sum() <= (big_m if big_m is not None else k * m)
    for v in VALUES:
        d_sum = (got[v.name] - without[v.name]).to_numpy()
        lo, hi = v.lower_units - v.centre_units, v.upper_units - v.centre_units
        assert (d_sum >= lo * d_count).all()
        assert (d_sum <= hi * d_count).all()
    # The heavy unit's histogram rows: exactly its weight w in each key (its x has no nulls).
    totals = pl.col("__h").list.eval(pl.element().struct.field("count").sum()).list.first()
    d_rows = got.select(totals.fill_null(0)) - without.select(totals.fill_null(0))
    assert d_rows["__h"].to_list() == d_count.tolist()


def test_group_choice_depends_on_the_seed(spark) -> None:
    heavy = heavy_unit(60)
    frame = to_spark(spark, heavy)
    chosen = set()
    for seed in (1, 2**63, 2**64 - 1):  # any 64-bit seed
        s = spec(keys=pl.DataFrame({"g": KEYS}), k=3, m=5, values=(), histograms=(), seed=seed)
        out = run_spark(frame, s)
        assert out[COUNT].to_list().count(5) == 3
        assert out[COUNT].sum() == 15
        chosen.add(tuple(out[COUNT].to_list()))
    assert len(chosen) > 1


def test_row_cap_spreads_exactly_m_rows_by_largest_remainder(spark) -> None:
    # One row in each of 10 groups, M = 5: exactly 5 rows, one in each of 5 groups.
    groups = [f"g{i}" for i in range(10)]
    frame = to_spark(spark, pl.DataFrame({"u": [1] * 10, "g": groups, "x": [1.0] * 10}))
    s = spec(keys=pl.DataFrame({"g": groups}), m=3, big_m=5, values=VALUES[:1], histograms=())
    counts = run_spark(frame, s)[COUNT].to_list()
    assert sum(counts) == 5
    assert max(counts) == 1


# -- row steps: filters, derived columns, public joins ------------------------------------------

REGIONS = pl.DataFrame(
    {
        "g": ["a", "b", "c", "zz", "e"],
        "region": ["n", "n", "s", "s", None],
        "w": [1.0, 2.0, 0.5, 4.0, 3.0],
        "r": ["R1", "R2", "R3", "R4", "R5"],  # clashes with the data's "r": becomes "r_right"
    }
)
STEPS = (
    RowStep("join", table=REGIONS, on=("g",), how="left"),
    RowStep(
        "with_columns",
        (
            (pl.col("x") * pl.col("w")).alias("xw"),
            # Replaces x (xw sees the old x).
            pl.when(pl.col("r_right") == "R1")
            .then(pl.lit(1.5))
            .otherwise(pl.col("x") - pl.col("w"))
            .alias("x"),
        ),
    ),
    RowStep(
        "filter", (pl.col("mo") != 2, pl.col("u").is_between(0, 120), pl.col("r_right") != "R2")
    ),
)
STEP_VALUES = (vspec("xw", "xw", 0, 20, j=3), vspec("x", "x", 0, 10, j=4, centred=True))
STEP_SPECS = {
    "left join, public keys": spec(
        keys=pl.DataFrame({"region": ["s", "n", "q"]}), k=2, m=4, values=STEP_VALUES, steps=STEPS
    ),
    "inner join, observed keys": spec(
        group_by=("region",),
        k=2,
        m=4,
        values=STEP_VALUES,
        histograms=(HistogramSpec("__h", "xw", GRID),),
        steps=(RowStep("join", table=REGIONS, on=("g",), how="inner"), *STEPS[1:]),
    ),
}


@pytest.mark.parametrize("name", list(STEP_SPECS))
def test_row_steps_equal_polars(name, data, spark_data) -> None:
    pytest.importorskip("privframe.engines.spark.expressions")
    s = STEP_SPECS[name]
    expected = run_polars(data, s)
    assert expected[COUNT].sum() > 0
    assert_same(run_spark(spark_data, s), expected)
