"""The polars engine: exact bounded aggregation, called directly with an AggregationSpec."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import polars as pl
import pytest

import privframe as pf
from privframe.engines.polars import PolarsEngine
from privframe.engines.spec import COUNT, DISTINCT, AggregationSpec, RowStep, ValueSpec

KEYS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]


def vspec(
    name: str,
    column: str,
    lower: float,
    upper: float,
    *,
    j: int = 0,
    centred: bool = False,
    square: bool = False,
    fill: float | None = None,
) -> ValueSpec:
    """A ValueSpec as the planner builds it: a sum, a centred sum, or a centred sum of squares."""
    mid = (lower + upper) / 2
    if square:
        top = round(math.ldexp(((upper - lower) / 2) ** 2, j))
        return ValueSpec(name, column, lower, upper, j, 0, top, top // 2, mid, square_around=mid)
    lo, hi = round(math.ldexp(lower, j)), round(math.ldexp(upper, j))
    centre = (lo + hi) // 2 if centred else 0
    if fill is None:
        fill = mid if centred else 0.0
    return ValueSpec(name, column, float(lower), float(upper), j, lo, hi, centre, fill)


def spec(
    *,
    unit: str | None = "u",
    keys: list[str] | pl.DataFrame | None = None,
    k: int | None = None,
    m: int = 1_000_000,
    big_m: int | None = None,
    values: tuple[ValueSpec, ...] = (),
    filters: tuple[pl.Expr, ...] = (),
    seed: int = 12345,
) -> AggregationSpec:
    if keys is None:
        key_frame, group_by = None, ()
    elif isinstance(keys, pl.DataFrame):
        key_frame, group_by = keys, tuple(keys.columns)
    else:
        key_frame, group_by = pl.DataFrame({"g": keys}), ("g",)
    steps = tuple(RowStep("filter", (f,)) for f in filters)
    return AggregationSpec(steps, unit, group_by, key_frame, k, m, big_m, values, seed)


def run(df: pl.DataFrame, s: AggregationSpec, *, streaming: bool = False) -> pl.DataFrame:
    return PolarsEngine(df.lazy(), streaming=streaming).aggregate(s)


def small_data(seed: int = 0, n_units: int = 200) -> pl.DataFrame:
    """Each unit: at most 3 groups, at most 2 rows per group; values on the 1/16 grid in [0, 10]."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {"u": [], "g": [], "x": []}
    for unit in range(n_units):
        groups = rng.choice(KEYS[:6], size=rng.integers(1, 4), replace=False)
        for g in groups:
            for _ in range(rng.integers(1, 3)):
                rows["u"].append(unit)
                rows["g"].append(str(g))
                rows["x"].append(rng.integers(0, 161) / 16)
    return pl.DataFrame(rows)


def heavy_unit(n_rows: int = 10_000, unit: int = -1, n_groups: int = 10) -> pl.DataFrame:
    rng = np.random.default_rng(99)
    return pl.DataFrame(
        {
            "u": [unit] * n_rows,
            "g": [KEYS[i % n_groups] for i in range(n_rows)],
            "x": rng.uniform(-50, 50, n_rows).round(3),
        }
    )


# -- exactness when bounding does not bind ------------------------------------------------


@pytest.mark.parametrize("big_m", [None, 6, 1000])
def test_exact_aggregates_match_polars_when_bounds_do_not_bind(big_m):
    df = small_data()
    s = spec(
        keys=KEYS[:8],
        k=3,
        m=2,
        big_m=big_m,
        values=(vspec("sum", "x", 0, 10, j=4), vspec("csum", "x", 0, 10, j=4, centred=True)),
    )
    out = run(df, s)
    expected = (
        pl.DataFrame({"g": KEYS[:8]})
        .join(
            df.group_by("g").agg(
                pl.len().cast(pl.Int64).alias("n"),
                (pl.col("x") * 16).sum().cast(pl.Int64).alias("s"),
                (pl.col("x") * 16 - 80).sum().cast(pl.Int64).alias("c"),
            ),
            on="g",
            how="left",
            maintain_order="left",
        )
        .fill_null(0)
    )
    assert out["g"].to_list() == KEYS[:8]
    assert out[COUNT].to_list() == expected["n"].to_list()
    assert out["sum"].to_list() == expected["s"].to_list()
    assert out["csum"].to_list() == expected["c"].to_list()
    assert out[COUNT].dtype == pl.Int64
    assert out["sum"].dtype == pl.Int64
    # The two keys without data ("g", "h") are present with zeros.
    assert out[COUNT].to_list()[6:] == [0, 0]


def test_exact_without_unit_counts_every_row():
    df = small_data(1)
    s = spec(unit=None, keys=KEYS[:6], m=1, values=(vspec("sum", "x", 0, 10, j=4),))
    out = run(df, s)
    by_hand = df.group_by("g").agg(pl.len(), (pl.col("x") * 16).sum()).sort("g")
    assert out[COUNT].to_list() == by_hand["len"].to_list()
    assert out["sum"].to_list() == [int(v) for v in by_hand["x"].to_list()]


def test_global_aggregate_is_one_row():
    df = small_data(2)
    out = run(df, spec(keys=None, m=10, values=(vspec("sum", "x", 0, 10, j=4),)))
    assert out.columns == [COUNT, DISTINCT, "sum"]
    assert out.height == 1
    assert out[COUNT][0] == df.height
    assert out["sum"][0] == int((df["x"] * 16).sum())


def test_streaming_engine_gives_the_same_result():
    df = small_data(3)
    s = spec(keys=KEYS, k=2, m=1, values=(vspec("sum", "x", 0, 10, j=4),), seed=5)
    assert run(df, s).equals(run(df, s, streaming=True))


def test_clipping_happens_per_row_before_summing():
    df = pl.DataFrame({"u": [1, 1, 2], "g": ["a", "a", "a"], "x": [100.0, -100.0, 3.0]})
    out = run(df, spec(keys=["a"], m=5, values=(vspec("sum", "x", 0, 10),)))
    # 10 (clipped) + 0 (clipped) + 3, not clip(100 - 100 + 3) = 3.
    assert out["sum"].to_list() == [13]


def test_the_integer_clip_holds_whatever_the_rounding_mode() -> None:
    # Bounds off the grid: 2.5 rounds to 2 (half to even) in the planner but to 3
    # (half away from zero) in polars; the second clip keeps the planner's bound.
    value = ValueSpec("s", "x", 0.0, 2.5, 0, 0, 2, 0, 0.0)
    df = pl.DataFrame({"u": [1, 2], "g": ["a", "a"], "x": [2.5, 2.5]})
    spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a"]}), None, 1, None, (value,), 1)
    assert PolarsEngine(df.lazy()).aggregate(spec)["s"].to_list() == [4]


def test_squares_are_exact_in_grid_units() -> None:
    value = ValueSpec("q", "x", 0.0, 10.0, 4, 0, 400, 200, 5.0, square_around=5.0)
    df = pl.DataFrame({"u": [1, 2, 3], "g": ["a"] * 3, "x": [5.0, 6.5, 0.0]})
    spec = AggregationSpec((), "u", ("g",), pl.DataFrame({"g": ["a"]}), None, 1, None, (value,), 1)
    # (0 + 2.25 + 25)·2^4 = 436 grid units, minus the centre 200 per row.
    assert PolarsEngine(df.lazy()).aggregate(spec)["q"].to_list() == [436 - 3 * 200]


# -- keys ------------------------------------------------------------------------------


def test_key_order_absent_keys_and_non_public_keys():
    df = pl.DataFrame({"u": [1, 2, 3, 4], "g": ["b", "z", "a", "b"]})
    out = run(df, spec(keys=["c", "b", "a"], m=1))
    assert out["g"].to_list() == ["c", "b", "a"]
    assert out[COUNT].to_list() == [0, 2, 1]


def test_huge_non_public_group_changes_nothing():
    df = small_data(4)
    rng = np.random.default_rng(0)
    huge = pl.DataFrame(
        {
            "u": rng.integers(0, 200, 50_000),
            "g": ["secret-group"] * 50_000,
            "x": rng.uniform(0, 10, 50_000),
        }
    )
    s = spec(keys=KEYS[:6], k=2, m=1, values=(vspec("sum", "x", 0, 10, j=4),), seed=77)
    assert run(df, s).equals(run(pl.concat([df, huge]), s))


def test_null_keys_are_dropped():
    df = pl.DataFrame({"u": [1, 2, 3], "g": ["a", None, "a"]})
    out = run(df, spec(keys=["a", "b"], m=1))
    assert out[COUNT].to_list() == [2, 0]


def test_multi_column_keys():
    df = pl.DataFrame(
        {"u": [1, 2, 3, 4], "r": ["n", "s", "n", "x"], "mo": [1, 2, 2, 1], "x": [1.0] * 4}
    )
    keys = pf.keys.product(r=["s", "n"], mo=[1, 2]).to_polars()
    out = run(df, spec(keys=keys, m=1))
    assert out.select("r", "mo").rows() == [("s", 1), ("s", 2), ("n", 1), ("n", 2)]
    assert out[COUNT].to_list() == [0, 1, 1, 1]


def test_value_the_key_type_cannot_hold_matches_no_key():
    big = 2**64 - 5
    df = pl.DataFrame({"u": [1, 2, 3], "g": pl.Series([big, 1, 2], dtype=pl.UInt64)})
    out = run(df, spec(keys=pl.DataFrame({"g": [1, 2]}), m=1))
    assert out[COUNT].to_list() == [1, 1]


def test_observed_keys_are_sorted_and_null_keys_dropped() -> None:
    df = pl.DataFrame({"u": list(range(9)), "g": ["c", "a", None, "b", "c", "a", None, "b", "a"]})
    spec = AggregationSpec((), "u", ("g",), None, 1, 1, None, (), 3)
    out = PolarsEngine(df.lazy()).aggregate(spec)
    assert out["g"].to_list() == ["a", "b", "c"]
    assert out["__distinct"].to_list() == [3, 2, 2]


# -- contribution bounding ----------------------------------------------------------------


@pytest.mark.parametrize(("k", "m", "big_m"), [(3, 5, None), (4, 2, 6), (10, 100, 250)])
def test_heavy_unit_is_bounded(k, m, big_m):
    base = small_data(5)
    heavy = heavy_unit()
    values = (vspec("sum", "x", -2, 7, j=3),)
    s = spec(keys=KEYS, k=k, m=m, big_m=big_m, values=values, seed=2024)
    without = run(base, s)
    with_heavy = run(pl.concat([base, heavy]), s)
    d_count = (with_heavy[COUNT] - without[COUNT]).to_numpy()
    d_sum = (with_heavy["sum"] - without["sum"]).to_numpy()
    assert (d_count >= 0).all()
    assert (d_count <= m).all()
    assert np.count_nonzero(d_count) <= k
    assert d_count.sum() <= (big_m if big_m is not None else k * m)
    assert d_count.sum() > 0  # the heavy unit still contributes
    # Each row clipped to [-2, 7], i.e. [-16, 56] grid units: w·L <= sum <= w·U.
    assert (d_sum >= -16 * d_count).all()
    assert (d_sum <= 56 * d_count).all()
    assert (d_sum[d_count == 0] == 0).all()


def test_max_rows_caps_the_units_total():
    # One unit with 4 rows in each of 5 groups; m=4, M=6: at most 6 rows overall.
    df = pl.DataFrame({"u": [1] * 20, "g": [KEYS[i % 5] for i in range(20)]})
    out = run(df, spec(keys=KEYS[:5], m=4, big_m=6))
    counts = out[COUNT].to_numpy()
    assert counts.sum() <= 6
    assert (counts <= 4).all()


@pytest.mark.parametrize("big_m", [None, 3, 4, 10_000])
def test_rows_per_group_bound_holds_whether_or_not_max_rows_binds(big_m):
    # Whether or not the overall cap M binds, the unit keeps weight m: its count is m and
    # its sum is scaled and clipped.
    df = pl.DataFrame({"u": [1] * 1000, "g": ["a"] * 1000, "x": [100.0] * 1000})
    out = run(df, spec(keys=["a"], m=3, big_m=big_m, values=(vspec("sum", "x", 0, 100),)))
    assert out[COUNT].to_list() == [3]
    assert out["sum"].to_list() == [300]


def test_only_max_rows_bound():
    df = heavy_unit(1000)
    out = run(df, spec(keys=KEYS, m=7, big_m=7))
    assert out[COUNT].sum() <= 7


def test_bounded_sum_scales_a_units_rows():
    # 4 rows of 10 in one group, m=2: the unit contributes 2 rows' worth, i.e. 20.
    df = pl.DataFrame({"u": [1] * 4, "g": ["a"] * 4, "x": [10.0] * 4})
    out = run(df, spec(keys=["a"], m=2, values=(vspec("sum", "x", 0, 100),)))
    assert out[COUNT].to_list() == [2]
    assert out["sum"].to_list() == [20]


def test_random_group_choice_depends_on_seed_and_never_exceeds_k():
    df = heavy_unit(10_000)
    subsets = set()
    for seed in range(40):
        out = run(df, spec(keys=KEYS, k=3, m=5, seed=seed))
        chosen = tuple(out.filter(pl.col(COUNT) > 0)["g"].to_list())
        assert len(chosen) == 3
        assert out[COUNT].max() <= 5
        subsets.add(chosen)
    assert len(subsets) > 10
    # Every group is chosen by some seed.
    assert set().union(*subsets) == set(KEYS)


def test_same_seed_same_choice():
    df = pl.concat([small_data(6), heavy_unit()])
    s = spec(keys=KEYS, k=2, m=3, values=(vspec("sum", "x", -50, 50, j=2),), seed=31337)
    assert run(df, s).equals(run(df, s))


def ranked_by_struct_hash(cells: pl.DataFrame, k: int, seed: int) -> pl.DataFrame:
    """The general path's choice: each unit's k cells lowest by the keyed hash of (unit, key)."""
    rank = pl.struct("u", "__key").hash(seed).rank("ordinal").over("u")
    return cells.filter(rank <= k)


def ranked_by_packed_order(cells: pl.DataFrame, k: int, seed: int) -> pl.DataFrame:
    """The packed path's choice (privframe.engines.polars.cells): the keyed hash of the
    packed cell u·2^4 + key, ties by key."""
    cell = pl.col("u") * 16 + pl.col("__key").cast(pl.Int64)
    rank = pl.struct(cell.hash(seed), pl.col("__key")).rank("ordinal").over("u")
    return cells.filter(rank <= k)


@pytest.mark.parametrize(
    ("unit_type", "choice"),
    [(pl.Int64, ranked_by_packed_order), (pl.String, ranked_by_struct_hash)],
)
@pytest.mark.parametrize("seed", range(5))
def test_the_groups_kept_are_each_units_k_lowest_in_hash_order(seed: int, unit_type, choice):
    """Only units over k are cut; the kept set is the k lowest of the path's keyed order."""
    df = pl.concat([small_data(seed), heavy_unit(n_rows=600, unit=-1), heavy_unit(300, -2, 4)])
    df = df.with_columns(pl.col("u").cast(unit_type))
    s = spec(keys=KEYS, k=2, m=3, values=(vspec("sum", "x", -50, 50, j=2),), seed=seed)
    cells = df.group_by("u", "g").agg(pl.len().alias("n"), pl.col("x").sum())
    key = pl.col("g").cast(pl.Enum(KEYS)).to_physical().cast(pl.UInt32)
    kept = choice(cells.with_columns(key.alias("__key")), 2, seed)
    counts = kept.group_by("g").agg(pl.col("n").clip(upper_bound=3).sum().alias("want"))
    out = run(df, s).join(counts, on="g", how="left").with_columns(pl.col("want").fill_null(0))
    assert out[COUNT].to_list() == out["want"].to_list()


def test_units_spread_too_wide_for_the_sort_order_are_ranked_in_windows() -> None:
    # Units 2^40 apart leave 63 − 4 − 41 = 18 < 24 hash bits: the window rank chooses.
    df = pl.concat([heavy_unit(50, unit=0), heavy_unit(50, unit=2**40)])
    s = spec(keys=KEYS, k=3, m=100, seed=11)
    cells = df.group_by("u", "g").agg(pl.len().alias("n"))
    key = pl.col("g").cast(pl.Enum(KEYS)).to_physical().cast(pl.UInt32)
    kept = ranked_by_struct_hash(cells.with_columns(key.alias("__key")), 3, 11)
    counts = kept.group_by("g").agg(pl.col("n").sum().alias("want"))
    out = run(df, s).join(counts, on="g", how="left").with_columns(pl.col("want").fill_null(0))
    assert out[COUNT].to_list() == out["want"].to_list()


def test_a_units_choice_does_not_depend_on_other_units():
    heavy = heavy_unit()
    s = spec(keys=KEYS, k=2, m=3, seed=8)
    alone = run(heavy, s)
    other = small_data(7)
    together = run(pl.concat([heavy, other]), s)
    assert (together[COUNT] - run(other, s)[COUNT]).to_list() == alone[COUNT].to_list()


# -- filters ----------------------------------------------------------------------------


def test_row_wise_filter():
    df = pl.DataFrame({"u": [1, 2, 3], "g": ["a", "a", "b"], "age": [17, 30, 40]})
    out = run(df, spec(keys=["a", "b"], m=1, filters=(pl.col("age") >= 18,)))
    assert out[COUNT].to_list() == [1, 1]


def test_null_unit_rows_are_dropped_not_merged():
    # The Session refuses such data up front; the engine still never merges null
    # units into one (a file may be rewritten after the Session checked it).
    df = pl.DataFrame({"u": [1, None, None, None], "g": ["a", "a", "a", "b"]})
    assert run(df, spec(keys=["a", "b"], m=1))[COUNT].to_list() == [1, 0]
    floats = pl.DataFrame({"u": [1.0, float("nan"), float("nan")], "g": ["a", "a", "b"]})
    assert run(floats, spec(keys=["a", "b"], m=1))[COUNT].to_list() == [1, 0]


# -- nulls, NaN, infinities, empty input ---------------------------------------------------


def test_null_nan_and_inf_values():
    df = pl.DataFrame(
        {
            "u": [1, 2, 3, 4, 5],
            "g": ["a"] * 5,
            "x": [4.0, None, float("nan"), float("inf"), float("-inf")],
        }
    )
    values = (vspec("sum", "x", 1, 10), vspec("csum", "x", 0, 10, centred=True))
    out = run(df, spec(keys=["a"], m=1, values=values))
    assert out[COUNT].to_list() == [5]
    # Sum: 4 + clip(0)=1 (null) + 1 (NaN) + 10 (inf) + 1 (-inf).
    assert out["sum"].to_list() == [17]
    # Centred on 5: -1 + 0 (null -> midpoint) + 0 (NaN) + 5 + -5.
    assert out["csum"].to_list() == [-1]


def test_a_missing_value_without_fill_adds_nothing_and_present_counts_the_values():
    df = pl.DataFrame(
        {
            "u": [1, 2, 3, 4, 5],
            "g": ["a"] * 5,
            "x": [4.0, None, float("nan"), float("inf"), 8.0],
        }
    )
    values = (
        dataclasses.replace(vspec("csum", "x", 0, 10, centred=True), fill=None),
        dataclasses.replace(vspec("sq", "x", 0, 10, square=True), fill=None),
        ValueSpec("n", "x", 0.0, 1.0, 0, 0, 1, 0, None, present=True),
    )
    out = run(df, spec(keys=["a"], m=1, values=values))
    assert out[COUNT].to_list() == [5]
    # Centred on 5: -1 + 0 (null) + 0 (NaN) + 5 (inf) + 3; the midpoint would also add 0.
    assert out["csum"].to_list() == [-1 + 5 + 3]
    # Squares about 5 centred on 12 (of 0..25): 1 − 12, 25 − 12, 9 − 12; the missing add 0,
    # where the midpoint (square 0) would add −12 each.
    assert out["sq"].to_list() == [(1 - 12) + (25 - 12) + (9 - 12)]
    assert out["n"].to_list() == [3]


def test_empty_input_gives_zeros_for_every_key():
    df = pl.DataFrame(schema={"u": pl.Int64, "g": pl.String, "x": pl.Float64})
    out = run(df, spec(keys=["a", "b", "c"], k=1, m=2, values=(vspec("sum", "x", 0, 1),)))
    assert out["g"].to_list() == ["a", "b", "c"]
    assert out[COUNT].to_list() == [0, 0, 0]
    assert out["sum"].to_list() == [0, 0, 0]
    glob = run(df, spec(keys=None, m=2))
    assert glob[COUNT].to_list() == [0]


def test_row_cap_keeps_exactly_m_rows_spread_by_largest_remainder():
    # One row in each of 10 groups with M = 5: a floor-only scaling would keep 0 rows
    # (floor(1·5/10) = 0 everywhere); largest remainders keep exactly 5, one per group,
    # in groups that vary with the seed.
    groups = [f"g{i}" for i in range(10)]
    df = pl.DataFrame({"u": [1] * 10, "g": groups})
    chosen = set()
    for seed in range(8):
        out = run(df, spec(keys=groups, m=3, big_m=5, seed=seed))
        counts = out[COUNT].to_list()
        assert sum(counts) == 5
        assert max(counts) == 1
        chosen.add(tuple(counts))
    assert len(chosen) > 1


def test_row_cap_never_exceeds_a_groups_weight():
    # Weights 3, 3, 1 (m = 3) capped at M = 4: new weights sum to 4, each within [0, w_g].
    df = pl.DataFrame({"u": [1] * 9, "g": ["a"] * 4 + ["b"] * 4 + ["c"]})
    for seed in range(8):
        out = run(df, spec(keys=["a", "b", "c"], m=3, big_m=4, seed=seed))
        counts = out[COUNT].to_list()
        assert sum(counts) == 4
        assert all(0 <= c <= w for c, w in zip(counts, [3, 3, 1], strict=True))


@pytest.mark.parametrize("parts", [2, 5])
@pytest.mark.parametrize(("k", "m", "big_m"), [(None, 1_000_000, None), (2, 3, None), (3, 2, 4)])
def test_unit_partitions_give_the_same_aggregates(parts: int, k, m, big_m) -> None:
    # Each unit's rows all land in one partition, so bounding (seeded by the same
    # spec) and the per-key totals are the same however the units are split.
    df = pl.concat([small_data(seed=3), heavy_unit(n_rows=500, unit=-7)])
    values = (vspec("s", "x", 0, 50), vspec("c", "x", 0, 50, centred=True))
    s = spec(keys=KEYS, k=k, m=m, big_m=big_m, values=values)
    whole = PolarsEngine(df.lazy()).aggregate(s)
    split = PolarsEngine(df.lazy(), partitions=parts).aggregate(s)
    assert split.equals(whole)


def test_unit_partitions_with_observed_keys_and_no_unit() -> None:
    df = small_data(seed=4)
    for s in (spec(k=2, m=3), spec(unit=None, keys=KEYS)):
        observed = AggregationSpec(s.steps, s.unit, ("g",), None, 2, 3, None, (), s.seed)
        chosen = s if s.unit is None else observed
        whole = PolarsEngine(df.lazy()).aggregate(chosen)
        split = PolarsEngine(df.lazy(), partitions=3).aggregate(chosen)
        assert split.equals(whole)


def test_partitioned_sessions_over_a_parquet_file(tmp_path, monkeypatch) -> None:
    from privframe.engines.polars import input as session_module

    path = tmp_path / "data.parquet"
    small_data(seed=5).write_parquet(path)
    monkeypatch.setattr(session_module, "_ROWS_PER_PARTITION", 100)  # several partitions
    assert session_module._partitions(path) > 1
    split = pf.Session(path, "u", pf.zCDP(1.0))
    q = split.query().bound(max_groups=2, max_rows_per_group=2).group_by("g", keys=KEYS)
    got = q.agg(pf.count(), pf.sum("x", (0, 50))).release(rho=0.5)
    assert got.height == len(KEYS)
    assert split.remaining.rho == 0.5
